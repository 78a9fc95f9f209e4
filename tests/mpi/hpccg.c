/* hpccg.c - an HPCCG-like conjugate-gradient mini-app for the persistent
 * windows' tests and benchmark (the seed paper's four versions in one
 * program):
 *   --mode none   no checkpoints; its state (x, r, p with halo planes, and
 *                 the loop's scalars) lives in one MPI window, the halo is
 *                 exchanged with MPI_Put and one MPI_Win_fence per
 *                 iteration. Run under LD_PRELOAD=libnvckpt.so this is the
 *                 "nvram" version, unchanged: it restarts when the window's
 *                 info key nvcache_version says it was restored.
 *   --mode disk   the same, and after every fence the window is written to
 *                 --dir with fwrite + fsync (two files per rank, alternating,
 *                 each with a CRC32C); --restart reads the newest one all
 *                 ranks have.
 *   --mode db     the state in libnvckpt's double buffers (nvckpt_db_*):
 *                 each iteration computes the next state into the other
 *                 buffer and commits it, no copy; needs the library.
 *   --mode touch  not CG: each iteration writes --touch-pct percent of the
 *                 window's pages (a pseudo-random choice), then fences; for
 *                 the incremental checkpoints' benchmark and test.
 * The problem: a 27-point stencil (27 on the diagonal, -1 off it) on an
 * nx x ny x (nz * ranks) grid, split along z; b = A * ones, x0 = 0; a fixed
 * number of iterations. Rank 0 prints the final residual (%a) and a hash of
 * each rank's x: the tests compare them bit for bit.
 *
 * --sync passive: the halo goes with MPI_Win_lock_all / MPI_Put /
 * MPI_Win_unlock_all and an MPI_Barrier instead of the fence (none, disk).
 * --win create: the window over the program's own memory (MPI_Win_create)
 * instead of MPI_Win_allocate; --win shared: MPI_Win_allocate_shared (all
 * ranks on one node).
 *
 * Output lines (rank 0): "startup_s S restored K mpi_init_s I" (S - I:
 * the program's own start, the restore on a restart), "iter K" with
 * --progress, "result iters N residual R xhash H H H H", "time_s T". */
#include <mpi.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "pmem/mpi/nvckpt.h"
#include "tests/mpi/mpiapp.h"

#pragma weak nvckpt_version
#pragma weak nvckpt_protect
#pragma weak nvckpt_db_alloc
#pragma weak nvckpt_db_next
#pragma weak nvckpt_db_commit
#pragma weak nvckpt_db_free

enum { HDR = 8 };                 /* doubles of loop scalars ahead of x */
enum { H_K, H_RTRANS, H_OLD, H_MAGIC };
#define MAGIC 4242.0

static int rank, nranks, nx, ny, nz, passive, create, touch;
static long plane, n;
static double init_s; /* MPI_Init's share of the start */

static void die(const char *msg)
{
	fprintf(stderr, "hpccg rank %d: %s\n", rank, msg);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

/* The global z index of local plane z (0-based within this rank). */
static int gz(int z) { return rank * nz + z; }

/* y = A p; lo/hi: the neighbours' planes (NULL at the domain's ends). */
static void spmv(double *y, const double *lo, const double *p, const double *hi)
{
	int gnz = nz * nranks;

	for (int z = 0; z < nz; z++)
		for (int yy = 0; yy < ny; yy++)
			for (int xx = 0; xx < nx; xx++) {
				double s = 27.0 * p[(long)z * plane + (long)yy * nx + xx];
				for (int dz = -1; dz <= 1; dz++) {
					int g = gz(z) + dz;
					if (g < 0 || g >= gnz)
						continue;
					const double *pl = dz == -1 && z == 0 ? lo :
						dz == 1 && z == nz - 1 ? hi :
						p + (long)(z + dz) * plane;
					for (int dy = -1; dy <= 1; dy++) {
						int y2 = yy + dy;
						if (y2 < 0 || y2 >= ny)
							continue;
						for (int dx = -1; dx <= 1; dx++) {
							int x2 = xx + dx;
							if (x2 < 0 || x2 >= nx || (!dx && !dy && !dz))
								continue;
							s -= pl[(long)y2 * nx + x2];
						}
					}
				}
				y[(long)z * plane + (long)yy * nx + xx] = s;
			}
}

static double dot(const double *a, const double *b)
{
	double l = 0, g;
	for (long i = 0; i < n; i++)
		l += a[i] * b[i];
	MPI_Allreduce(&l, &g, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	return g;
}

/* b = A * ones, by counting each row's neighbours. */
static void rhs(double *b)
{
	static double *ones, *one_plane;
	ones = malloc(sizeof(double) * n);
	one_plane = malloc(sizeof(double) * plane);
	for (long i = 0; i < n; i++)
		ones[i] = 1;
	for (long i = 0; i < plane; i++)
		one_plane[i] = 1;
	spmv(b, one_plane, ones, one_plane);
	free(ones);
	free(one_plane);
}

/* Send my first plane down and my last plane up, into the neighbours'
 * halo planes at displacement (in doubles) lo_at / hi_at of their window. */
static void halo_put(const double *p, MPI_Win win, MPI_Aint lo_at, MPI_Aint hi_at)
{
	if (rank > 0)
		MPI_Put(p, (int)plane, MPI_DOUBLE, rank - 1, hi_at, (int)plane, MPI_DOUBLE, win);
	if (rank < nranks - 1)
		MPI_Put(p + (long)(nz - 1) * plane, (int)plane, MPI_DOUBLE, rank + 1, lo_at,
			(int)plane, MPI_DOUBLE, win);
}

static void report(int iters, double rtrans, const double *x, double t0)
{
	uint64_t h = mpiapp_fnv(MPIAPP_FNV_INIT, x, sizeof(double) * (size_t)(touch ? HDR + 3 * n : n)), *all = malloc(8 * (size_t)nranks);
	MPI_Gather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("result iters %d residual %a xhash", iters, sqrt(rtrans));
		for (int i = 0; i < nranks; i++)
			printf(" %016llx", (unsigned long long)all[i]);
		printf("\ntime_s %.3f\n", mpiapp_now() - t0);
		fflush(stdout);
	}
	free(all);
}

/* ---- disk checkpoints: dir/hpccg.rR.{0,1}: u64 k, u64 crc, window ----
 * The same work as libnvckpt's restart, so that the two compare fairly:
 * the same checksum (CRC32C), and only the newest file read and checked,
 * the other one only if the ranks agree on its version. */

static void disk_path(char *path, size_t len, const char *dir, int i)
{
	snprintf(path, len, "%s/hpccg.r%d.%d", dir, rank, i);
}

static void disk_write(const char *dir, const double *w, size_t bytes, uint64_t k)
{
	char path[512];
	uint64_t h[2] = { k, crc32c(0, w, bytes) };
	disk_path(path, sizeof(path), dir, (int)(k & 1));
	FILE *f = fopen(path, "w");
	if (!f || fwrite(h, sizeof(h), 1, f) != 1 || fwrite(w, bytes, 1, f) != 1 ||
	    fflush(f) || fsync(fileno(f)) || fclose(f))
		die("cannot write its checkpoint file");
}

/* File i's version (0: none), from its header alone. */
static uint64_t disk_version(const char *dir, int i)
{
	char path[512];
	uint64_t h[2];
	disk_path(path, sizeof(path), dir, i);
	FILE *f = fopen(path, "r");
	int ok = f && fread(h, sizeof(h), 1, f) == 1;
	if (f)
		fclose(f);
	return ok ? h[0] : 0;
}

/* Read file i into w and check it: its version, or 0. */
static uint64_t disk_load(const char *dir, int i, double *w, size_t bytes)
{
	char path[512];
	uint64_t h[2];
	disk_path(path, sizeof(path), dir, i);
	FILE *f = fopen(path, "r");
	int ok = f && fread(h, sizeof(h), 1, f) == 1 && fread(w, bytes, 1, f) == 1 &&
		 crc32c(0, w, bytes) == h[1];
	if (f)
		fclose(f);
	return ok ? h[0] : 0;
}

/* Load the newest checkpoint all ranks have into w; returns its k or 0. */
static uint64_t disk_read(const char *dir, double *w, size_t bytes)
{
	uint64_t have[2] = { disk_version(dir, 0), disk_version(dir, 1) }, newest = 0, common;
	int in_w = -1, first = have[1] > have[0];
	for (int j = 0; j < 2 && !newest; j++) {
		int i = j ? !first : first;
		if (have[i] && (newest = disk_load(dir, i, w, bytes)))
			in_w = i;
		else
			have[i] = 0;
	}
	MPI_Allreduce(&newest, &common, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
	int i = have[0] == common ? 0 : have[1] == common ? 1 : -1;
	if (common && (i < 0 || (i != in_w && disk_load(dir, i, w, bytes) != common)))
		die("its disk checkpoints lack the version all ranks have");
	return common;
}

/* ---- none / nvram / disk: the state in one window ---- */

static void run_window(int iters, const char *dir, int restart, int progress,
		       int delay_ms, double t0)
{
	MPI_Aint words = HDR + 2 * n + (nz + 2) * plane;
	size_t bytes = sizeof(double) * (size_t)words;
	double *w;
	MPI_Win win;
	MPI_Info info;
	MPI_Info_create(&info);
	MPI_Info_set(info, "nvcache_name", "cg");
	double ta = mpiapp_now();
	if (create == 1) {
		w = calloc(1, bytes);
		if (!w || MPI_Win_create(w, (MPI_Aint)bytes, sizeof(double), info,
					 MPI_COMM_WORLD, &win))
			die("MPI_Win_create failed");
	} else if (create == 2) {
		if (MPI_Win_allocate_shared((MPI_Aint)bytes, sizeof(double), info,
					    MPI_COMM_WORLD, &w, &win))
			die("MPI_Win_allocate_shared failed");
	} else if (MPI_Win_allocate((MPI_Aint)bytes, sizeof(double), info,
				    MPI_COMM_WORLD, &w, &win)) {
		die("MPI_Win_allocate failed");
	}
	MPI_Info_free(&info);
	ta = mpiapp_now() - ta;
	double *hdr = w, *x = w + HDR, *r = x + n, *pw = r + n, *p = pw + plane;
	MPI_Aint lo_at = HDR + 2 * n, hi_at = lo_at + (nz + 1) * plane;
	double *Ap = malloc(sizeof(double) * n);
	/* The iteration also kept as a protected variable (nvckpt_protect):
	 * on a restart it must come back equal to the window's copy. */
	static int prot_k = -1;
	if (nvckpt_protect && nvckpt_protect(1, &prot_k, sizeof(prot_k)))
		die("nvckpt_protect failed");

	/* Restored by libnvckpt? Its info key says which version. */
	long long restored = mpiapp_restored(win);
	int flag = restored >= 0;      /* libnvckpt is there */
	if (restored < 0)
		restored = 0;
	if (dir && restart)
		restored = (long long)disk_read(dir, w, bytes);
	int k0 = restored && hdr[H_MAGIC] == MAGIC ? (int)hdr[H_K] : 0;
	if (flag && nvckpt_version && nvckpt_version() != (uint64_t)restored)
		die("nvckpt_version() differs from the window's nvcache_version");
	if (flag && restored && nvckpt_protect && prot_k != (int)hdr[H_K])
		die("the protected iteration came back different from the window's");
	double rtrans, oldrtrans = 0;
	if (k0 == 0) {
		memset(w, 0, bytes);
		rhs(r);
		memcpy(p, r, sizeof(double) * n);
		rtrans = dot(r, r);
		hdr[H_MAGIC] = MAGIC;
		hdr[H_RTRANS] = rtrans;
		prot_k = 0;
		/* no neighbour's Put may land before this rank's initialisation
		 * (a fence that opens the first epoch is no barrier) */
		MPI_Barrier(MPI_COMM_WORLD);
	} else {
		rtrans = hdr[H_RTRANS];
		oldrtrans = hdr[H_OLD];
	}
	if (!passive)
		MPI_Win_fence(0, win);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0) {
		printf("startup_s %.3f restored %d mpi_init_s %.3f win_s %.3f\n", mpiapp_now() - t0, k0,
		       init_s, ta);
		fflush(stdout);
	}
	for (int k = k0 ? k0 : 1; k <= iters; k++) {
		if (k != k0) {
			if (k > 1) {
				double beta = rtrans / oldrtrans;
				for (long i = 0; i < n; i++)
					p[i] = r[i] + beta * p[i];
			}
			hdr[H_K] = k;
			prot_k = k;
			hdr[H_RTRANS] = rtrans;
			hdr[H_OLD] = oldrtrans;
			if (passive) {
				MPI_Win_lock_all(0, win);
				halo_put(p, win, lo_at, hi_at);
				MPI_Win_unlock_all(win);
				MPI_Barrier(MPI_COMM_WORLD);
			} else {
				halo_put(p, win, lo_at, hi_at);
				MPI_Win_fence(0, win);
			}
			if (dir)
				disk_write(dir, w, bytes, (uint64_t)k);
		}
		spmv(Ap, rank > 0 ? pw : NULL, p, rank < nranks - 1 ? p + n : NULL);
		double alpha = rtrans / dot(p, Ap);
		for (long i = 0; i < n; i++) {
			x[i] = x[i] + alpha * p[i];
			r[i] = r[i] - alpha * Ap[i];
		}
		oldrtrans = rtrans;
		rtrans = dot(r, r);
		if (progress && rank == 0) {
			printf("iter %d\n", k);
			fflush(stdout);
		}
		if (delay_ms)
			usleep(delay_ms * 1000);
	}
	report(iters, rtrans, x, t0);
	free(Ap);
	MPI_Win_free(&win);
	if (create == 1)
		free(w);
}

/* ---- touch: pct % of the window's pages written per iteration ---- */

static void run_touch(int iters, int pct, int progress, int delay_ms, double t0)
{
	size_t bytes = sizeof(double) * (size_t)(HDR + 3 * n), pages = bytes / 4096;
	double *w;
	MPI_Win win;
	MPI_Info info;
	MPI_Info_create(&info);
	MPI_Info_set(info, "nvcache_name", "touch");
	if (MPI_Win_allocate((MPI_Aint)bytes, sizeof(double), info, MPI_COMM_WORLD, &w, &win))
		die("MPI_Win_allocate failed");
	MPI_Info_free(&info);
	int k0 = w[H_MAGIC] == MAGIC ? (int)w[H_K] : 0;
	if (!k0) {
		memset(w, 0, bytes);
		w[H_MAGIC] = MAGIC;
		MPI_Barrier(MPI_COMM_WORLD);
	}
	MPI_Win_fence(0, win);
	if (rank == 0) {
		printf("startup_s %.3f restored %d mpi_init_s %.3f\n", mpiapp_now() - t0, k0, init_s);
		fflush(stdout);
	}
	for (int k = k0 + 1; k <= iters; k++) {
		for (size_t pg = 0; pg < pages; pg++) {
			uint64_t h = (pg * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)k * 0xbf58476d1ce4e5b9ull);
			h ^= h >> 31;
			h *= 0x94d049bb133111ebull;
			h ^= h >> 29;
			if (h % 100 < (uint64_t)pct && pg > 0)
				((uint64_t *)w)[pg * 512 + (h >> 40) % 512] += h ^ (uint64_t)rank;
		}
		w[H_K] = k;
		MPI_Win_fence(0, win);
		if (progress && rank == 0) {
			printf("iter %d\n", k);
			fflush(stdout);
		}
		if (delay_ms)
			usleep(delay_ms * 1000);
	}
	report(iters, 0, w, t0);
	MPI_Win_free(&win);
}

/* ---- double-buffered: the state in nvckpt_db buffers ---- */

static void run_db(int iters, int progress, int delay_ms, double t0)
{
	struct nvckpt_db *db;
	double *cur, *hw;
	MPI_Win hwin;
	MPI_Info info;

	if (!nvckpt_db_alloc)
		die("--mode db needs libnvckpt (LD_PRELOAD=libnvckpt.so)");
	int rc = nvckpt_db_alloc(&db, "cg-db", sizeof(double) * (HDR + 3 * n),
				 MPI_COMM_WORLD, (void **)&cur);
	if (rc < 0)
		die("nvckpt_db_alloc failed");
	MPI_Info_create(&info);
	MPI_Info_set(info, "nvcache_checkpoint", "false");
	MPI_Win_allocate(sizeof(double) * 2 * plane, sizeof(double), info,
			 MPI_COMM_WORLD, &hw, &hwin);
	MPI_Info_free(&info);
	double *Ap = malloc(sizeof(double) * n);
	int k0 = rc == 1 && cur[H_MAGIC] == MAGIC ? (int)cur[H_K] : 0;
	if (k0 == 0 && !(rc == 1 && cur[H_MAGIC] == MAGIC)) {
		double *s = nvckpt_db_next(db);
		memset(s, 0, sizeof(double) * (HDR + 3 * n));
		rhs(s + HDR + n);
		memcpy(s + HDR + 2 * n, s + HDR + n, sizeof(double) * n);
		s[H_RTRANS] = dot(s + HDR + n, s + HDR + n);
		s[H_MAGIC] = MAGIC;
		cur = nvckpt_db_commit(db);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Win_fence(0, hwin);
	if (rank == 0) {
		printf("startup_s %.3f restored %d mpi_init_s %.3f\n", mpiapp_now() - t0, k0, init_s);
		fflush(stdout);
	}
	for (int k = k0 + 1; k <= iters; k++) {
		double *nx_ = nvckpt_db_next(db);
		const double *x = cur + HDR, *r = x + n, *p = r + n;
		double *x2 = nx_ + HDR, *r2 = x2 + n, *p2 = r2 + n;
		halo_put(p, hwin, 0, plane);
		MPI_Win_fence(0, hwin);
		spmv(Ap, rank > 0 ? hw : NULL, p, rank < nranks - 1 ? hw + plane : NULL);
		double alpha = cur[H_RTRANS] / dot(p, Ap);
		for (long i = 0; i < n; i++) {
			x2[i] = x[i] + alpha * p[i];
			r2[i] = r[i] - alpha * Ap[i];
		}
		double rt = dot(r2, r2), beta = rt / cur[H_RTRANS];
		for (long i = 0; i < n; i++)
			p2[i] = r2[i] + beta * p[i];
		nx_[H_K] = k;
		nx_[H_RTRANS] = rt;
		nx_[H_OLD] = cur[H_RTRANS];
		nx_[H_MAGIC] = MAGIC;
		cur = nvckpt_db_commit(db);
		if (progress && rank == 0) {
			printf("iter %d\n", k);
			fflush(stdout);
		}
		if (delay_ms)
			usleep(delay_ms * 1000);
	}
	report(iters, cur[H_RTRANS], cur + HDR, t0);
	free(Ap);
	MPI_Win_free(&hwin);
	nvckpt_db_free(db);
}

int main(int argc, char **argv)
{
	double t0 = mpiapp_now();
	const char *mode = "none", *dir = NULL, *piddir = NULL;
	int iters = 50, restart = 0, progress = 0, delay_ms = 0, pct = 10;

	nx = ny = nz = 16;
	init_s = mpiapp_init(&argc, &argv, t0, &rank, &nranks);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--restart"))
			restart = 1;
		else if (!strcmp(a, "--progress"))
			progress = 1;
		else if (!v)
			die("usage: hpccg [--mode none|disk|db] [--nx N --ny N --nz N] "
			    "[--iters N] [--dir D] [--restart] [--progress] [--delay-ms N] "
			    "[--sync fence|passive] [--win allocate|create|shared] [--touch-pct P] "
			    "[--piddir D]");
		else if (!strcmp(a, "--touch-pct"))
			pct = atoi(v), i++;
		else if (!strcmp(a, "--win"))
			create = !strcmp(v, "create") ? 1 : !strcmp(v, "shared") ? 2 : 0, i++;
		else if (!strcmp(a, "--sync"))
			passive = !strcmp(v, "passive"), i++;
		else if (!strcmp(a, "--mode"))
			mode = v, i++;
		else if (!strcmp(a, "--nx"))
			nx = atoi(v), i++;
		else if (!strcmp(a, "--ny"))
			ny = atoi(v), i++;
		else if (!strcmp(a, "--nz"))
			nz = atoi(v), i++;
		else if (!strcmp(a, "--iters"))
			iters = atoi(v), i++;
		else if (!strcmp(a, "--dir"))
			dir = v, i++;
		else if (mpiapp_common_opt(a, v, &delay_ms, &piddir))
			i++;
		else
			die("unknown option");
	}
	if (nx < 1 || ny < 1 || nz < 1 || iters < 1)
		die("sizes and --iters must be >= 1");
	plane = (long)nx * ny;
	n = plane * nz;
	if (piddir && mpiapp_pidfile(piddir, rank))
		die("cannot write its pid file");
	if (!strcmp(mode, "none"))
		run_window(iters, NULL, 0, progress, delay_ms, t0);
	else if (!strcmp(mode, "disk")) {
		if (!dir)
			die("--mode disk needs --dir");
		run_window(iters, dir, restart, progress, delay_ms, t0);
	} else if (!strcmp(mode, "db")) {
		run_db(iters, progress, delay_ms, t0);
	} else if (!strcmp(mode, "touch")) {
		touch = 1;
		run_touch(iters, pct, progress, delay_ms, t0);
	} else
		die("--mode: none, disk, db or touch");
	MPI_Finalize();
	return 0;
}
