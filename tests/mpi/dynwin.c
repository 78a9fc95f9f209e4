/* dynwin.c - a small MPI program over a dynamic window, for the persistent
 * windows' tests: MPI_Win_create_dynamic, then per rank the regions of
 * --sizes (doubles each) attached in order, and a scratch region attached
 * and detached again (a detach drops a region from the checkpoint).
 * Each iteration every rank puts its first region into the last region of
 * its right neighbour (MPI_Put at the address the neighbour published),
 * and, after the fence, mixes what it received into all of its regions;
 * the iteration count lives in the first region, so a restarted job
 * resumes where its windows came back from.
 *
 * --stride S: each iteration writes only the first half of every Sth block
 * of 512 doubles of each region (and puts one such half): a few pages per
 * iteration, for the incremental checkpoints' test.
 * --grow-at K: at iteration K one more region (as large as the first) is
 * attached and mixed from then on (the window's checkpoint area grows); a
 * restart past K attaches it again right after the others.
 *
 * --sync fence (default): two fences per iteration, each a checkpoint.
 * --sync lockall: lock_all / Put / unlock_all and an MPI_Allreduce instead,
 * no fence and no barrier (libnvckpt checkpoints at the Allreduce after
 * the unlock). --sync lockp2p: the same with zero-byte messages to and from
 * both neighbours instead of the Allreduce: no collective at all, a window
 * never checkpointed (libnvckpt says so). --sync lockopen: one lock_all
 * epoch over the whole loop, each Put completed by MPI_Win_flush_all, and
 * the Allreduces inside that epoch: never checkpointed either (an open
 * epoch may have RMA on its way).
 *
 * Output (rank 0), as hpccg's: "startup_s S restored K mpi_init_s I",
 * "iter K" with --progress, "result iters N hash H H H H", "time_s T". */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/mpi/mpiapp.h"

#define MAXR 8

static void die(const char *m)
{
	fprintf(stderr, "dynwin: %s\n", m);
	MPI_Abort(MPI_COMM_WORLD, 2);
}

/* Without a fence: an MPI_Allreduce (how 1), or (2) a zero-byte message
 * to and from each neighbour, enough for the ring of Puts. */
static void sync_ranks(int how, int rank, int nranks)
{
	double one = 1, sum;

	if (how == 1) {
		MPI_Allreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		return;
	}
	int left = (rank + nranks - 1) % nranks, right = (rank + 1) % nranks;
	MPI_Sendrecv(NULL, 0, MPI_BYTE, right, 7, NULL, 0, MPI_BYTE, left, 7,
		     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	MPI_Sendrecv(NULL, 0, MPI_BYTE, left, 8, NULL, 0, MPI_BYTE, right, 8,
		     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

/* --grow-at: one more region of n doubles, attached after the others;
 * fresh contents unless restored (libnvckpt fills it at the attach). */
static void attach_extra(MPI_Win win, double **reg, int *nall, long n, int restored)
{
	double *e = malloc(sizeof(double) * n);

	if (!e)
		die("out of memory");
	if (!restored)
		for (long j = 0; j < n; j++)
			e[j] = 7 + j * 1e-3;
	MPI_Win_attach(win, e, sizeof(double) * n);
	reg[(*nall)++] = e;
}

int main(int argc, char **argv)
{
	double t0 = mpiapp_now();
	int iters = 20, progress = 0, delay_ms = 0, lockall = 0, rank, nranks, nr = 0;
	/* lockall: 1 with MPI_Allreduce, 2 with messages to the neighbours,
	 * 3 with MPI_Allreduce inside one lock_all epoch */
	int stride = 1, grow_at = 0;
	long sizes[MAXR];
	const char *piddir = NULL, *sz = "300,1000,517";

	double init_s = mpiapp_init(&argc, &argv, t0, &rank, &nranks);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--progress"))
			progress = 1;
		else if (!v)
			die("usage: dynwin [--iters N] [--sizes A,B,..] [--sync fence|lockall|lockp2p|lockopen] "
			    "[--stride S] [--grow-at K] [--progress] [--delay-ms N] [--piddir D]");
		else if (!strcmp(a, "--iters"))
			iters = atoi(v), i++;
		else if (!strcmp(a, "--sizes"))
			sz = v, i++;
		else if (!strcmp(a, "--stride"))
			stride = atoi(v), i++;
		else if (!strcmp(a, "--grow-at"))
			grow_at = atoi(v), i++;
		else if (!strcmp(a, "--sync"))
			lockall = !strcmp(v, "lockall") ? 1 : !strcmp(v, "lockp2p") ? 2 :
				  !strcmp(v, "lockopen") ? 3 : 0, i++;
		else if (mpiapp_common_opt(a, v, &delay_ms, &piddir))
			i++;
		else
			die("unknown option");
	}
	for (const char *p = sz; *p && nr < MAXR; nr++) {
		char *end;
		sizes[nr] = strtol(p, &end, 10);
		if (sizes[nr] < 2 || (*end && *end != ','))
			die("--sizes: numbers >= 2, comma-separated");
		p = *end ? end + 1 : end;
	}
	if (!nr || iters < 1 || stride < 1 || grow_at < 0)
		die("--sizes and --iters must not be empty or 0, --stride >= 1, --grow-at >= 0");
	if (piddir && mpiapp_pidfile(piddir, rank))
		die("cannot write its pid file");

	MPI_Win win;
	double *reg[MAXR + 1] = { 0 }, scratch[64];
	int nall = nr; /* with the region of --grow-at once attached */
	MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
	for (int i = 0; i < nr; i++) {
		if (!(reg[i] = malloc(sizeof(double) * sizes[i])))
			die("out of memory");
		MPI_Win_attach(win, reg[i], sizeof(double) * sizes[i]);
	}
	/* Restored? The window's info key says from which version. */
	int k0 = mpiapp_restored(win) > 0 ? (int)reg[0][0] : 0;
	if (grow_at && k0 >= grow_at)
		attach_extra(win, reg, &nall, sizes[0], 1);
	MPI_Win_attach(win, scratch, sizeof(scratch));
	MPI_Win_detach(win, scratch);
	if (!k0) {
		for (int i = 0; i < nr; i++)
			for (long j = 0; j < sizes[i]; j++)
				reg[i][j] = rank + i * 0.25 + j * 1e-3;
		reg[0][0] = 0;
	}
	double *last = reg[nr - 1];
	long put = sizes[0] < sizes[nr - 1] ? sizes[0] : sizes[nr - 1];
	if (stride > 1 && put > 256)
		put = 256;
	MPI_Aint mine, right_at;
	int right = (rank + 1) % nranks;
	MPI_Get_address(last, &mine);
	MPI_Aint *at = malloc(sizeof(MPI_Aint) * nranks);
	MPI_Allgather(&mine, 1, MPI_AINT, at, 1, MPI_AINT, MPI_COMM_WORLD);
	right_at = at[right];
	free(at);
	MPI_Barrier(MPI_COMM_WORLD);
	if (!lockall)
		MPI_Win_fence(0, win);
	if (rank == 0) {
		printf("startup_s %.3f restored %d mpi_init_s %.3f\n", mpiapp_now() - t0, k0, init_s);
		fflush(stdout);
	}
	double *send = malloc(sizeof(double) * put);
	if (lockall == 3)
		MPI_Win_lock_all(0, win);
	for (int k = (int)reg[0][0]; k < iters; k++) {
		if (grow_at && k == grow_at && nall == nr)
			attach_extra(win, reg, &nall, sizes[0], 0);
		memcpy(send, reg[0], sizeof(double) * put);
		if (lockall == 3) {
			MPI_Put(send, put, MPI_DOUBLE, right, right_at, put, MPI_DOUBLE, win);
			MPI_Win_flush_all(win);
			sync_ranks(1, rank, nranks);
		} else if (lockall) {
			MPI_Win_lock_all(0, win);
			MPI_Put(send, put, MPI_DOUBLE, right, right_at, put, MPI_DOUBLE, win);
			MPI_Win_unlock_all(win);
			sync_ranks(lockall, rank, nranks);
		} else {
			MPI_Put(send, put, MPI_DOUBLE, right, right_at, put, MPI_DOUBLE, win);
			MPI_Win_fence(0, win);
		}
		for (int i = 0; i < nall; i++) {
			long len = i < nr ? sizes[i] : sizes[0];
			for (long j = 1; j < len; j++)
				if (stride == 1 || (j / 512 % stride == 0 && j % 512 < 256))
					reg[i][j] = reg[i][j] * 0.5 + last[j % put] * 0.25 + k;
		}
		reg[0][0] = k + 1;
		if (lockall) {
			sync_ranks(lockall == 3 ? 1 : lockall, rank, nranks);
		} else {
			MPI_Win_fence(0, win);
		}
		if (rank == 0 && progress) {
			printf("iter %d\n", k + 1);
			fflush(stdout);
		}
		if (delay_ms)
			usleep(delay_ms * 1000);
	}
	if (lockall == 3)
		MPI_Win_unlock_all(win);
	uint64_t h = MPIAPP_FNV_INIT, *all = malloc(8 * nranks);
	for (int i = 0; i < nall; i++)
		h = mpiapp_fnv(h, reg[i], sizeof(double) * (i < nr ? sizes[i] : sizes[0]));
	MPI_Gather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("result iters %d hash", iters);
		for (int r = 0; r < nranks; r++)
			printf(" %016llx", (unsigned long long)all[r]);
		printf("\ntime_s %.3f\n", mpiapp_now() - t0);
	}
	for (int i = 0; i < nall; i++)
		MPI_Win_detach(win, reg[i]);
	MPI_Win_free(&win);
	for (int i = 0; i < nall; i++)
		free(reg[i]);
	free(send);
	free(all);
	MPI_Finalize();
	return 0;
}
