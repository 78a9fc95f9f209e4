/* clock.h - monotonic time, deadlines for timed waits, and busy-wait
 * delays (for emulated NVRAM latency). */
#pragma once
#include <pthread.h>
#include <stdint.h>
#include <time.h>

uint64_t clock_now_ns(void);
/* CLOCK_REALTIME in ns since the epoch: for times that mean a date
 * (mtimes) or must differ across restarts (incarnations, epochs). */
uint64_t clock_wall_ns(void);
/* Spin for ns nanoseconds: sleeping would be far too coarse for the
 * sub-microsecond delays of emulated NVRAM. */
void clock_spin_ns(uint64_t ns);

/* The CLOCK_MONOTONIC instant ns_from_now from now, as a timespec for
 * pthread_cond_timedwait on a condition variable made by
 * clock_cond_init(). Monotonic so that a wall-clock step (NTP, an
 * operator's `date`) neither cuts a wait short nor stretches it. */
void clock_deadline(struct timespec *ts, uint64_t ns_from_now);
/* Initialise c to time its waits against CLOCK_MONOTONIC (the clock of
 * clock_deadline). */
void clock_cond_init(pthread_cond_t *c);
