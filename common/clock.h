/* clock.h - monotonic time and busy-wait delays (for emulated NVRAM latency). */
#pragma once
#include <stdint.h>

uint64_t clock_now_ns(void);
/* Spin for ns nanoseconds: sleeping would be far too coarse for the
 * sub-microsecond delays of emulated NVRAM. */
void clock_spin_ns(uint64_t ns);
