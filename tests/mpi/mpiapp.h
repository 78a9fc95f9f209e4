/* mpiapp.h - what the test MPI programs (hpccg.c, dynwin.c) share: the
 * clock, the hash of their results, and the pid file through which the
 * tests kill a chosen rank. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define MPIAPP_FNV_INIT 1469598103934665603ull

/* Seconds on the monotonic clock. */
static inline double mpiapp_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* FNV-1a of len bytes, continuing h (start with MPIAPP_FNV_INIT). */
static inline uint64_t mpiapp_fnv(uint64_t h, const void *buf, size_t len)
{
	const uint8_t *b = buf;
	for (size_t i = 0; i < len; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

/* Write this process's pid to dir/pid.RANK: 0, or -1. */
static inline int mpiapp_pidfile(const char *dir, int rank)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/pid.%d", dir, rank);
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	fprintf(f, "%d\n", (int)getpid());
	return fclose(f) ? -1 : 0;
}
