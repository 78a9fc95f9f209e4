/* clock.c - see clock.h. */
#include "common/clock.h"

#include <time.h>

uint64_t clock_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void clock_spin_ns(uint64_t ns)
{
	uint64_t end;

	if (!ns)
		return;
	end = clock_now_ns() + ns;
	while (clock_now_ns() < end)
		__builtin_ia32_pause();
}
