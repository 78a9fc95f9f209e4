/* fdlimit.c - raise the open-file limit (see fdlimit.h). */
#include "common/fdlimit.h"

#include <stdio.h>
#include <sys/resource.h>

uint64_t fdlimit_raise(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 1024;
	rlim_t soft = rl.rlim_cur;
	FILE *f = fopen("/proc/sys/fs/nr_open", "r");
	unsigned long long nr = 0;
	if (f) {
		if (fscanf(f, "%llu", &nr) != 1)
			nr = 0;
		fclose(f);
	}
	if (nr > rl.rlim_max) {
		struct rlimit up = { (rlim_t)nr, (rlim_t)nr };
		if (setrlimit(RLIMIT_NOFILE, &up) == 0)
			rl = up;
	}
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) == 0 && getrlimit(RLIMIT_NOFILE, &rl) == 0)
		soft = rl.rlim_cur;
	return soft == RLIM_INFINITY ? UINT64_MAX : (uint64_t)soft;
}
