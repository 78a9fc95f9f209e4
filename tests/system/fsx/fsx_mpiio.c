/* fsx_mpiio - MPI-IO workloads for the nvcachefs system tests, as ROMIO
 * drives a FUSE file system (plain POSIX "ufs" driver). Compiled by
 * tests/system/fsx_mpiio.sh with mpicc; run with mpiexec -n 4.
 *
 * Every byte written is a function of its file offset and a generation
 * number, so any rank (or a plain reader later) can verify any range.
 *
 *   fsx_mpiio collective PATH MIB      create; collective interleaved write
 *                                      (write_at_all), sync, close; reopen
 *                                      RDONLY, read_at_all the neighbour's
 *                                      chunks, verify                 (gen 1)
 *   fsx_mpiio noncontig PATH MIB       independent non-contiguous writes
 *                                      through a vector file view with data
 *                                      sieving (ROMIO locks with fcntl) over
 *                                      the first half; everyone verifies the
 *                                      whole file (gen 2 there, gen 1 after)
 *   fsx_mpiio delete PATH MIB          CREATE|DELETE_ON_CLOSE, write_at_all,
 *                                      close; the file must be gone   (gen 3)
 *   fsx_mpiio rdonly PATH MIB GEN      MPI_MODE_RDONLY, read_at_all, verify
 *   fsx_mpiio sync PATH MIB GEN MARKER create, write_at_all, MPI_File_sync,
 *                                      then create MARKER and wait, file still
 *                                      open, to be killed
 *   fsx_mpiio write PATH MIB GEN       create, write_at_all, sync, close; prints
 *                                      the slowest rank's time in MPI-IO (bench)
 *   fsx_mpiio read PATH MIB GEN        RDONLY, read_at_all, verify; prints the
 *                                      time in MPI-IO, not verifying (bench)
 *   fsx_mpiio verify PATH MIB GEN [HALF_GEN]   no MPI: pread and verify the
 *                                      file (first half HALF_GEN if given)
 *   fsx_mpiio expect PATH MIB GEN      no MPI: write the expected file with
 *                                      pwrite (a pre-existing input)
 *
 * In the MPI modes, "{rank}" in PATH stands for the rank + 1: rank i of a
 * cluster test opens the file through node i+1's mount.
 */
#include <mpi.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "../../mpi/mpiapp.h" /* relative: the tests build it with a bare mpicc */

#define MIB (1024L * 1024L)
#define CHUNK (64 * 1024)       /* collective interleave unit */
#define NCCHUNK 3000            /* non-contiguous piece: not block aligned */

static int rank, nprocs;
static double io_seconds;      /* time in MPI-IO calls, excluding fill/verify */

static double now(void);

static unsigned char pattern(uint64_t off, int gen)
{
	uint64_t x = off * 0x9E3779B97F4A7C15ull + (uint64_t)gen * 0xD1B54A32D192ED03ull;

	x ^= x >> 29;
	x *= 0xBF58476D1CE4E5B9ull;
	x ^= x >> 32;
	return (unsigned char)x;
}

static void fill(unsigned char *buf, size_t len, uint64_t off, int gen)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern(off + i, gen);
}

/* Returns the index of the first wrong byte, or -1. */
static long check(const unsigned char *buf, size_t len, uint64_t off, int gen)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != pattern(off + i, gen))
			return (long)i;
	return -1;
}

static void die(const char *what, int err)
{
	char who[32];

	snprintf(who, sizeof(who), "fsx_mpiio rank %d", rank);
	mpiapp_mpi_die(who, what, err);
}

#define CHECK(call) do { int e_ = (call); if (e_ != MPI_SUCCESS) die(#call, e_); } while (0)

static void report_bad(const char *what, const unsigned char *buf, uint64_t off, long i, int gen)
{
	fprintf(stderr, "fsx_mpiio rank %d: %s: wrong byte at file offset %llu: got 0x%02x, "
		"want 0x%02x (generation %d)\n", rank, what, (unsigned long long)(off + (uint64_t)i),
		buf[i], pattern(off + (uint64_t)i, gen), gen);
}

static unsigned char *xmalloc(size_t n)
{
	unsigned char *p = malloc(n ? n : 1);

	if (!p) {
		fprintf(stderr, "fsx_mpiio: out of memory (%zu bytes)\n", n);
		MPI_Abort(MPI_COMM_WORLD, 1);
		exit(1);
	}
	return p;
}

/* File view in which this rank owns chunks k with k % nprocs == (rank+shift)
 * % nprocs: the interleaved layout collective buffering is made for. */
static void set_interleaved_view(MPI_File fh, int shift, MPI_Datatype *ft)
{
	int owner = (rank + shift) % nprocs;

	CHECK(MPI_Type_vector(1, CHUNK, CHUNK * nprocs, MPI_BYTE, ft));
	/* Resize so consecutive filetypes tile the file with stride CHUNK*nprocs. */
	MPI_Datatype tiled;
	CHECK(MPI_Type_create_resized(*ft, 0, (MPI_Aint)CHUNK * nprocs, &tiled));
	MPI_Type_free(ft);
	*ft = tiled;
	CHECK(MPI_Type_commit(ft));
	CHECK(MPI_File_set_view(fh, (MPI_Offset)owner * CHUNK, MPI_BYTE, *ft, "native",
				MPI_INFO_NULL));
}

/* Fill buf with what this rank's view holds: its chunks of generation gen. */
static void fill_view(unsigned char *buf, long mine, int owner, int gen)
{
	for (long c = 0; c * CHUNK < mine; c++) {
		uint64_t off = ((uint64_t)c * nprocs + owner) * CHUNK;
		fill(buf + c * CHUNK, CHUNK, off, gen);
	}
}

static int verify_view(unsigned char *buf, long mine, int owner, int gen, const char *what)
{
	for (long c = 0; c * CHUNK < mine; c++) {
		uint64_t off = ((uint64_t)c * nprocs + owner) * CHUNK;
		long bad = check(buf + c * CHUNK, CHUNK, off, gen);
		if (bad >= 0) {
			report_bad(what, buf + c * CHUNK, off, bad, gen);
			return 1;
		}
	}
	return 0;
}

/* Collective interleaved write of the whole file; amode decides the rest. */
static void write_all(const char *path, long total, int gen, int amode, int do_sync)
{
	MPI_File fh;
	MPI_Datatype ft;
	long mine = total / nprocs;
	unsigned char *buf = xmalloc((size_t)mine);
	MPI_Status st;

	fill_view(buf, mine, rank, gen);
	MPI_Barrier(MPI_COMM_WORLD);
	double t0 = now();
	CHECK(MPI_File_open(MPI_COMM_WORLD, path, amode, MPI_INFO_NULL, &fh));
	set_interleaved_view(fh, 0, &ft);
	CHECK(MPI_File_write_at_all(fh, 0, buf, (int)mine, MPI_BYTE, &st));
	if (do_sync)
		CHECK(MPI_File_sync(fh));
	CHECK(MPI_File_close(&fh));
	io_seconds += now() - t0;
	MPI_Type_free(&ft);
	free(buf);
}

/* Collective read through a view shifted by one rank, so every rank checks
 * bytes another rank wrote. */
static int read_all_verify(const char *path, long total, int gen, const char *what)
{
	MPI_File fh;
	MPI_Datatype ft;
	long mine = total / nprocs;
	unsigned char *buf = xmalloc((size_t)mine);
	MPI_Status st;
	int owner = (rank + 1) % nprocs, bad, count = 0;
	MPI_Offset size;

	MPI_Barrier(MPI_COMM_WORLD);
	double t0 = now();
	CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
	CHECK(MPI_File_get_size(fh, &size));
	if (size != total) {
		fprintf(stderr, "fsx_mpiio rank %d: %s: %s has %lld bytes, want %ld\n", rank,
			what, path, (long long)size, total);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	set_interleaved_view(fh, 1, &ft);
	memset(buf, 0, (size_t)mine);
	CHECK(MPI_File_read_at_all(fh, 0, buf, (int)mine, MPI_BYTE, &st));
	io_seconds += now() - t0;
	CHECK(MPI_Get_count(&st, MPI_BYTE, &count));
	bad = count != mine;
	if (bad)
		fprintf(stderr, "fsx_mpiio rank %d: %s: read %d bytes, want %ld\n", rank, what,
			count, mine);
	else
		bad = verify_view(buf, mine, owner, gen, what);
	CHECK(MPI_File_close(&fh));
	MPI_Type_free(&ft);
	free(buf);
	return bad;
}

/* Independent, non-contiguous: rank r owns pieces k (NCCHUNK bytes) with
 * k % nprocs == r over [0, region); data sieving on, so ROMIO reads,
 * modifies and writes whole 512 KiB windows under fcntl write locks while
 * the other ranks do the same on overlapping windows. */
static int noncontig(const char *path, long total)
{
	MPI_File fh;
	MPI_Info info;
	MPI_Datatype vec, ft;
	MPI_Status st;
	long pieces = (total / 2) / NCCHUNK / nprocs;   /* per rank */
	long region = pieces * nprocs * NCCHUNK;
	unsigned char *buf = xmalloc((size_t)(pieces * NCCHUNK));
	unsigned char *all;
	int bad = 0;

	MPI_Info_create(&info);
	MPI_Info_set(info, "romio_ds_write", "enable");
	MPI_Info_set(info, "romio_ds_read", "enable");
	MPI_Info_set(info, "ind_wr_buffer_size", "524288");
	CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR, info, &fh));
	CHECK(MPI_Type_vector(1, NCCHUNK, NCCHUNK * nprocs, MPI_BYTE, &vec));
	CHECK(MPI_Type_create_resized(vec, 0, (MPI_Aint)NCCHUNK * nprocs, &ft));
	CHECK(MPI_Type_commit(&ft));
	CHECK(MPI_File_set_view(fh, (MPI_Offset)rank * NCCHUNK, MPI_BYTE, ft, "native", info));
	for (long k = 0; k < pieces; k++)
		fill(buf + k * NCCHUNK, NCCHUNK, ((uint64_t)k * nprocs + rank) * NCCHUNK, 2);
	/* Two independent calls per rank, so sieving windows of different ranks
	 * interleave in time. */
	long half = (pieces / 2) * NCCHUNK;
	CHECK(MPI_File_write_at(fh, 0, buf, (int)half, MPI_BYTE, &st));
	CHECK(MPI_File_write_at(fh, half, buf + half, (int)(pieces * NCCHUNK - half), MPI_BYTE, &st));
	CHECK(MPI_File_sync(fh));
	MPI_Barrier(MPI_COMM_WORLD);
	CHECK(MPI_File_sync(fh));

	/* Everyone reads the whole file back independently and checks it. */
	CHECK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
	all = xmalloc((size_t)total);
	CHECK(MPI_File_read_at(fh, 0, all, (int)total, MPI_BYTE, &st));
	long i = check(all, (size_t)region, 0, 2);
	if (i >= 0) {
		report_bad("noncontig (sieved region)", all, 0, i, 2);
		bad = 1;
	} else if ((i = check(all + region, (size_t)(total - region), (uint64_t)region, 1)) >= 0) {
		report_bad("noncontig (untouched rest)", all + region, (uint64_t)region, i, 1);
		bad = 1;
	}
	CHECK(MPI_File_close(&fh));
	MPI_Type_free(&vec);
	MPI_Type_free(&ft);
	MPI_Info_free(&info);
	free(all);
	free(buf);
	if (!bad && rank == 0)
		printf("noncontig: %ld pieces of %d bytes per rank over [0,%ld) verified\n",
		       pieces, NCCHUNK, region);
	return bad;
}

/* verify / expect: plain POSIX, no MPI. */
static int plain_file(const char *mode, const char *path, long total, int gen, int half_gen)
{
	unsigned char *buf = xmalloc((size_t)total);
	struct stat stb;
	int fd;

	if (!strcmp(mode, "expect")) {
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0) {
			fprintf(stderr, "fsx_mpiio: %s: %s\n", path, strerror(errno));
			return 1;
		}
		fill(buf, (size_t)total, 0, gen);
		if (pwrite(fd, buf, (size_t)total, 0) != total || fsync(fd) || close(fd)) {
			fprintf(stderr, "fsx_mpiio: writing %s: %s\n", path, strerror(errno));
			return 1;
		}
		free(buf);
		return 0;
	}
	fd = open(path, O_RDONLY);
	if (fd < 0 || fstat(fd, &stb)) {
		fprintf(stderr, "fsx_mpiio: verify %s: %s\n", path, strerror(errno));
		return 1;
	}
	if (stb.st_size != total) {
		fprintf(stderr, "fsx_mpiio: verify %s: size %lld, want %ld\n", path,
			(long long)stb.st_size, total);
		return 1;
	}
	long got = 0;
	while (got < total) {
		ssize_t n = pread(fd, buf + got, (size_t)(total - got), got);
		if (n <= 0) {
			fprintf(stderr, "fsx_mpiio: verify %s: read at %ld: %s\n", path, got,
				n ? strerror(errno) : "unexpected EOF");
			return 1;
		}
		got += n;
	}
	close(fd);
	long split = 0;
	if (half_gen) {
		long pieces = (total / 2) / NCCHUNK / 4;
		split = pieces * 4 * NCCHUNK;     /* the noncontig region of 4 ranks */
		long i = check(buf, (size_t)split, 0, half_gen);
		if (i >= 0) {
			report_bad(path, buf, 0, i, half_gen);
			return 1;
		}
	}
	long i = check(buf + split, (size_t)(total - split), (uint64_t)split, gen);
	if (i >= 0) {
		report_bad(path, buf + split, (uint64_t)split, i, gen);
		return 1;
	}
	printf("verified %s: %ld bytes\n", path, total);
	free(buf);
	return 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: fsx_mpiio MODE PATH MIB [GEN] [MARKER|HALF_GEN]\n");
		return 2;
	}
	const char *mode = argv[1], *path = argv[2];
	long total = atol(argv[3]) * MIB;
	int gen = argc > 4 ? atoi(argv[4]) : 1;
	int bad = 0;

	if (total <= 0) {
		fprintf(stderr, "fsx_mpiio: size must be > 0 MiB\n");
		return 2;
	}
	if (!strcmp(mode, "verify") || !strcmp(mode, "expect"))
		return plain_file(mode, path, total, gen, argc > 5 ? atoi(argv[5]) : 0);

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
	static char ranked[4096];
	const char *mark = strstr(path, "{rank}");
	if (mark && strlen(path) + 16 < sizeof(ranked)) {
		snprintf(ranked, sizeof(ranked), "%.*s%d%s", (int)(mark - path), path,
			 rank + 1, mark + strlen("{rank}"));
		path = ranked;
	}
	if (total % ((long)CHUNK * nprocs)) {
		if (rank == 0)
			fprintf(stderr, "fsx_mpiio: size must be a multiple of %d KiB\n",
				CHUNK / 1024 * nprocs);
		MPI_Finalize();
		return 2;
	}

	if (!strcmp(mode, "collective")) {
		write_all(path, total, 1, MPI_MODE_CREATE | MPI_MODE_WRONLY, 1);
		bad = read_all_verify(path, total, 1, "collective read-back");
		if (!bad && rank == 0)
			printf("collective: %ld bytes written with write_at_all, verified with read_at_all\n",
			       total);
	} else if (!strcmp(mode, "noncontig")) {
		bad = noncontig(path, total);
	} else if (!strcmp(mode, "delete")) {
		write_all(path, total, 3, MPI_MODE_CREATE | MPI_MODE_WRONLY | MPI_MODE_DELETE_ON_CLOSE, 0);
		MPI_Barrier(MPI_COMM_WORLD);
		if (rank == 0 && access(path, F_OK) == 0) {
			fprintf(stderr, "fsx_mpiio: %s still exists after DELETE_ON_CLOSE close\n", path);
			bad = 1;
		}
	} else if (!strcmp(mode, "rdonly") || !strcmp(mode, "read")) {
		double slowest = 0;
		bad = read_all_verify(path, total, gen, "rdonly read");
		MPI_Reduce(&io_seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		if (rank == 0)
			printf("read %ld bytes in %.6f s\n", total, slowest);
	} else if (!strcmp(mode, "write")) {
		double slowest = 0;
		write_all(path, total, gen, MPI_MODE_CREATE | MPI_MODE_WRONLY, 1);
		MPI_Reduce(&io_seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		if (rank == 0)
			printf("wrote+synced %ld bytes in %.6f s\n", total, slowest);
	} else if (!strcmp(mode, "sync")) {
		MPI_File fh;
		MPI_Datatype ft;
		MPI_Status st;
		long mine = total / nprocs;
		unsigned char *buf = xmalloc((size_t)mine);

		if (argc < 6) {
			fprintf(stderr, "fsx_mpiio: sync needs a MARKER path\n");
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		CHECK(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR,
				    MPI_INFO_NULL, &fh));
		set_interleaved_view(fh, 0, &ft);
		fill_view(buf, mine, rank, gen);
		CHECK(MPI_File_write_at_all(fh, 0, buf, (int)mine, MPI_BYTE, &st));
		CHECK(MPI_File_sync(fh));
		MPI_Barrier(MPI_COMM_WORLD);
		if (rank == 0) {
			int fd = open(argv[5], O_WRONLY | O_CREAT, 0644);
			if (fd >= 0)
				close(fd);
			printf("synced %ld bytes; waiting to be killed\n", total);
			fflush(stdout);
		}
		/* The file stays open: the test kills nvcachefs, then us. */
		for (;;)
			pause();
	} else {
		if (rank == 0)
			fprintf(stderr, "fsx_mpiio: unknown mode %s\n", mode);
		bad = 2;
	}
	int any = 0;
	MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	MPI_Finalize();
	return any;
}
