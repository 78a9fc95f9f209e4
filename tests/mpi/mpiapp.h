/* mpiapp.h - what the test MPI programs (hpccg.c, dynwin.c, ior.c,
 * tests/system/fsx/fsx_mpiio.c) share: the clock, an MPI error's report,
 * the hash of their results, and the pid file through which the tests
 * kill a chosen rank. */
#pragma once
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* An MPI call failed: "WHO: WHAT: MPI's words for err" on stderr, then
 * the whole job aborts. */
static inline void mpiapp_mpi_die(const char *who, const char *what, int err)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0;

	MPI_Error_string(err, msg, &len);
	fprintf(stderr, "%s: %s: %s\n", who, what, msg);
	MPI_Abort(MPI_COMM_WORLD, 1);
	exit(1);
}

/* MPI_Init, then this rank and the number of ranks; returns the seconds
 * from t0 (the program's start) to MPI_Init's end: a restart's time is
 * told apart from MPI's own start-up by it. */
static inline double mpiapp_init(int *argc, char ***argv, double t0, int *rank,
				 int *nranks)
{
	MPI_Init(argc, argv);
	double s = mpiapp_now() - t0;
	MPI_Comm_rank(MPI_COMM_WORLD, rank);
	MPI_Comm_size(MPI_COMM_WORLD, nranks);
	return s;
}

/* The options both test programs take, each with a value v: --delay-ms N
 * (a pause per iteration, so that a test can kill a rank mid-run) and
 * --piddir D (mpiapp_pidfile). 1 when a is one of them (v consumed). */
static inline int mpiapp_common_opt(const char *a, const char *v, int *delay_ms,
				    const char **piddir)
{
	if (!strcmp(a, "--delay-ms"))
		*delay_ms = atoi(v);
	else if (!strcmp(a, "--piddir"))
		*piddir = v;
	else
		return 0;
	return 1;
}

/* The version libnvckpt restored win from (its info key nvcache_version):
 * 0 when it restored nothing, -1 when the key is not there (no libnvckpt). */
static inline long long mpiapp_restored(MPI_Win win)
{
	MPI_Info used;
	char val[32];
	int flag = 0, len = sizeof(val);

	MPI_Win_get_info(win, &used);
	MPI_Info_get_string(used, "nvcache_version", &len, val, &flag);
	MPI_Info_free(&used);
	return flag ? atoll(val) : -1;
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
