/* ior.c - an IOR-like MPI-IO benchmark for file systems mounted on several
 * "nodes" of one host: rank i works through DIR[i % ndirs] (each node's own
 * mount point of the same file system), so what a rank reads back was
 * written through another node's mount.
 *
 *   ior [--layout n1|nn] [--xfer BYTES] [--mib MIB_PER_RANK] [--seed S]
 *       [--name NAME] [--keep] [--read-only] DIR0 [DIR1 ...]
 *
 * Write phase: every rank opens the file (n1: one shared file DIR/NAME,
 * strided: rank r's block b at (b * nranks + r) * xfer; nn: its own file
 * DIR/NAME.RANK, contiguous), writes MIB_PER_RANK MiB (rounded down to whole
 * transfers) with independent MPI_File_write_at, MPI_File_sync, closes.
 * Read phase (after a barrier): rank r reads rank (r + 1) % nranks's blocks
 * through its own mount, with independent MPI_File_read_at, and compares
 * every byte with what that rank wrote (a pattern of seed, writer and file
 * offset; a new seed per run tells a fresh write from a stale one).
 * Each phase's time runs from the barrier before the open to the last
 * rank's close (open, sync and close included, as IOR reports them).
 *
 * Output (rank 0), one line per phase:
 *   "ior write BYTES bytes SECS s MIBPS MiB/s"
 *   "ior read BYTES bytes SECS s MIBPS MiB/s wrong_bytes N"
 * Exit 1 when any byte read differs (or an MPI-IO call fails), 2 on bad
 * arguments. Unless --keep, the files are deleted at the end. --read-only
 * skips the write phase (files a --keep run left, same seed and layout):
 * a file changed in between must fail the run. */
#include <inttypes.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/mpi/mpiapp.h"

#define IOR_MAX_PATH 4096

struct ior_opts {
	int nn;              /* file per process, else one shared file */
	long xfer;           /* bytes per transfer, a multiple of 8 */
	long long per_rank;  /* bytes per rank, whole transfers */
	uint64_t seed;
	const char *name;
	int keep;
	int read_only;
	char **dirs;
	int ndirs;
};

static void die(const char *m)
{
	fprintf(stderr, "ior: %s\n", m);
	MPI_Abort(MPI_COMM_WORLD, 2);
	exit(2);
}

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The xfer bytes writer w puts at file offset off (off and xfer are
 * multiples of 8): one word per 8 bytes of file. */
static void pattern_fill(uint64_t *buf, long xfer, uint64_t seed, int w, long long off)
{
	uint64_t base = mix64(seed ^ ((uint64_t)w << 48));
	for (long k = 0; k < xfer / 8; k++)
		buf[k] = mix64(base + (uint64_t)(off / 8 + k));
}

/* Bytes of got that differ from what writer w put at off. */
static long long pattern_check(const uint64_t *got, uint64_t *want, long xfer,
			       uint64_t seed, int w, long long off)
{
	long long bad = 0;
	pattern_fill(want, xfer, seed, w, off);
	if (!memcmp(got, want, (size_t)xfer))
		return 0;
	const unsigned char *g = (const unsigned char *)got, *e = (const unsigned char *)want;
	for (long i = 0; i < xfer; i++)
		bad += g[i] != e[i];
	return bad;
}

static void file_path(const struct ior_opts *o, int rank, int owner, char *p)
{
	const char *dir = o->dirs[rank % o->ndirs];
	int n = o->nn ? snprintf(p, IOR_MAX_PATH, "%s/%s.%d", dir, o->name, owner)
		      : snprintf(p, IOR_MAX_PATH, "%s/%s", dir, o->name);
	if (n < 0 || n >= IOR_MAX_PATH)
		die("path too long");
}

/* File offset of block b of writer w. */
static long long block_off(const struct ior_opts *o, int nranks, int w, long long b)
{
	return o->nn ? b * o->xfer : (b * nranks + w) * o->xfer;
}

static void check(int rc, const char *what, const char *path)
{
	char who[IOR_MAX_PATH + 32];

	if (rc == MPI_SUCCESS)
		return;
	snprintf(who, sizeof(who), "ior: %s %s", what, path);
	mpiapp_mpi_die(who, "failed", rc);
}

/* One phase; returns this rank's wrong bytes (0 for writes). */
static long long phase(const struct ior_opts *o, int rank, int nranks, int write,
		       uint64_t *buf, uint64_t *want)
{
	char path[IOR_MAX_PATH];
	int w = write ? rank : (rank + 1) % nranks;
	long long nblk = o->per_rank / o->xfer, bad = 0;
	MPI_File fh;

	file_path(o, rank, w, path);
	check(MPI_File_open(o->nn ? MPI_COMM_SELF : MPI_COMM_WORLD, path,
			    write ? MPI_MODE_CREATE | MPI_MODE_WRONLY : MPI_MODE_RDONLY,
			    MPI_INFO_NULL, &fh), "open", path);
	for (long long b = 0; b < nblk; b++) {
		long long off = block_off(o, nranks, w, b);
		MPI_Status st;
		int cnt = 0;
		if (write) {
			pattern_fill(buf, o->xfer, o->seed, w, off);
			check(MPI_File_write_at(fh, off, buf, (int)o->xfer, MPI_BYTE, &st),
			      "write", path);
		} else {
			check(MPI_File_read_at(fh, off, buf, (int)o->xfer, MPI_BYTE, &st),
			      "read", path);
		}
		MPI_Get_count(&st, MPI_BYTE, &cnt);
		if (cnt != o->xfer) {
			fprintf(stderr, "ior: %s %s at %lld: %d of %ld bytes\n",
				write ? "write" : "read", path, off, cnt, o->xfer);
			if (write)
				MPI_Abort(MPI_COMM_WORLD, 1);
		}
		if (!write)
			bad += pattern_check(buf, want, o->xfer, o->seed, w, off);
	}
	if (write)
		check(MPI_File_sync(fh), "sync", path);
	check(MPI_File_close(&fh), "close", path);
	return bad;
}

static void parse(int argc, char **argv, struct ior_opts *o)
{
	long long mib = 128;
	*o = (struct ior_opts){ .xfer = 1 << 20, .seed = 1, .name = "ior.dat" };
	int i;
	for (i = 1; i < argc && !strncmp(argv[i], "--", 2); i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--keep") || !strcmp(a, "--read-only")) {
			*(a[2] == 'k' ? &o->keep : &o->read_only) = 1;
			continue;
		}
		if (!v)
			die("option needs a value");
		i++;
		if (!strcmp(a, "--layout") && (!strcmp(v, "n1") || !strcmp(v, "nn")))
			o->nn = !strcmp(v, "nn");
		else if (!strcmp(a, "--xfer"))
			o->xfer = strtol(v, NULL, 0);
		else if (!strcmp(a, "--mib"))
			mib = strtoll(v, NULL, 0);
		else if (!strcmp(a, "--seed"))
			o->seed = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--name") && !strchr(v, '/'))
			o->name = v;
		else
			die("usage: ior [--layout n1|nn] [--xfer BYTES] [--mib MIB] "
			    "[--seed S] [--name NAME] [--keep] [--read-only] DIR0 [DIR1 ...]");
	}
	if (o->xfer < 8 || o->xfer % 8 || o->xfer > (1 << 30))
		die("--xfer must be a multiple of 8 from 8 to 1 GiB");
	if (mib < 1 || mib > (1 << 20))
		die("--mib must be 1 to 1048576");
	o->per_rank = (mib << 20) / o->xfer * o->xfer;
	if (o->per_rank == 0)
		die("--mib is smaller than one transfer");
	if (i >= argc)
		die("no directory given");
	o->dirs = argv + i;
	o->ndirs = argc - i;
}

int main(int argc, char **argv)
{
	int rank, nranks;
	struct ior_opts o;

	mpiapp_init(&argc, &argv, mpiapp_now(), &rank, &nranks);
	parse(argc, argv, &o);
	uint64_t *buf = malloc((size_t)o.xfer), *want = malloc((size_t)o.xfer);
	if (!buf || !want)
		die("out of memory");
	long long bad_total = 0;
	for (int write = !o.read_only; write >= 0; write--) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = mpiapp_now();
		long long bad = phase(&o, rank, nranks, write, buf, want);
		double dt = mpiapp_now() - t0, dt_max = 0;
		MPI_Reduce(&dt, &dt_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		MPI_Allreduce(&bad, &bad_total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
		if (rank == 0) {
			long long bytes = o.per_rank * nranks;
			printf("ior %s %lld bytes %.6f s %.1f MiB/s", write ? "write" : "read",
			       bytes, dt_max, dt_max > 0 ? bytes / 1048576.0 / dt_max : 0);
			if (!write)
				printf(" wrong_bytes %lld", bad_total);
			printf("\n");
			fflush(stdout);
		}
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (!o.keep) {
		char path[IOR_MAX_PATH];
		for (int w = 0; w < (o.nn ? nranks : 1); w++) {
			if (o.nn ? w % nranks == rank : rank == 0) {
				file_path(&o, rank, w, path);
				MPI_File_delete(path, MPI_INFO_NULL);
			}
		}
	}
	free(buf);
	free(want);
	MPI_Finalize();
	return bad_total ? 1 : 0;
}
