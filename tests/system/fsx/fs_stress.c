/* fs_stress.c - data-integrity stress for nvcachefs (tests/system/
 * fs_stress.sh; written for the review of the absence token, commit
 * b0e251a, where it showed acknowledged bytes read back stale and lost in
 * the backing file with a delay injected before the token existed).
 *
 * Several worker processes do partial (unaligned, sub-block) writes, reads,
 * appends, truncates (private files only), punched holes and zeroed ranges,
 * fsync and close/reopen, on a few
 * shared and private files, through the mount, with O_DIRECT (so the kernel
 * page cache never hides what the daemon returns). Shared files are cut in
 * stripes of STRIPE bytes owned round-robin by the workers: a worker only
 * writes its own stripes, so its model of them is exact at any time, and a
 * 16K block holds bytes of every worker (reads and partial writes of one
 * worker fetch and install blocks that hold other workers' acknowledged
 * bytes). Some shared-file writes go through io_uring, several at once,
 * so that writes to one file are in flight in the daemon together (the
 * kernel serialises plain write(2)s per inode).
 *
 *   fs_stress init   -D BACKING -e EXP [opts]  seed files in the backing dir
 *   fs_stress run    -m MNT -e EXP [opts]      stress, check, final check
 *   fs_stress verify -D DIR -e EXP             compare DIR's files with EXP
 *
 * opts: -b block size for reports(16384) -N no truncates -X stop at 1st failure
 *       -w workers(4) -t seconds(60) -s shared(4) -p private/worker(2)
 *       -S shared max size(3M) -P private max size(1M) -q uring depth(4)
 *       -r seed  -i initial shared size(1M) -j initial private size(256K)
 * Exit status: 0 clean, 1 data mismatches found, 2 usage/system error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STRIPE 1531u   /* prime: stripes straddle blocks and pages */
#define MAXW 16
#define MAXSH 16
#define MAXPR 8
#define MAXPRINT 40

struct stats {
	uint64_t writes, uring_writes, wbytes, reads, checks, cbytes, fails,
		 fsyncs, reopens, truncs, appends, punches;
};

struct shm {
	atomic_int stop;
	atomic_int printed;
	uint64_t sh_size0[MAXSH];               /* size when the run began */
	uint64_t sh_end[MAXSH][MAXW];           /* each worker's max acked end */
	uint64_t pr_size[MAXW][MAXPR];
	struct stats st[MAXW];
};

static int W = 4, T = 60, NS = 4, NP = 2, QD = 4;
static uint64_t SMAX = 3u << 20, PMAX = 1u << 20, S0 = 1u << 20, P0 = 256u << 10;
static unsigned seed0;
static const char *mnt, *expdir, *dir;
static struct shm *G;
static uint8_t *shexp[MAXSH], *prexp[MAXW][MAXPR];
static uint64_t lastw[MAXSH]; /* this worker's last write per shared file */
static int NOTRUNC, STOP1;
static uint64_t BSZ = 16384; /* the mount's block size, for reports */
/* per-worker history of private-file ops, dumped at the first failure */
#define HIST 48
struct hent { double t; char op; int f; uint64_t off, len, sz; };
static struct hent hist[HIST];
static unsigned hn;
static double T0;
static void hadd(char op, int f, uint64_t off, uint64_t len, uint64_t sz)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	hist[hn++ % HIST] = (struct hent){ ts.tv_sec + ts.tv_nsec / 1e9 - T0, op, f, off, len, sz };
}
static void hdump(int w)
{
	static int done;
	if (done++)
		return;
	for (unsigned i = hn > HIST ? hn - HIST : 0; i < hn; i++) {
		struct hent *h = &hist[i % HIST];
		fprintf(stderr, "  hist w%d %9.6f %c f%d off=%llu len=%llu size->%llu\n", w, h->t,
			h->op, h->f, (unsigned long long)h->off, (unsigned long long)h->len,
			(unsigned long long)h->sz);
	}
}

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, ": %s\n", strerror(errno));
	exit(2);
}

static uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}
static uint64_t rr(uint64_t *s, uint64_t n) { return n ? rnd(s) % n : 0; }

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *shmap(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	return p;
}

static void shname(char *b, size_t n, const char *d, int f) { snprintf(b, n, "%s/shared-%d", d, f); }
static void prname(char *b, size_t n, const char *d, int w, int f) { snprintf(b, n, "%s/priv-%d-%d", d, w, f); }

static int owner(uint64_t off) { return (int)((off / STRIPE) % (uint64_t)W); }

static void report(int w, const char *what, const char *file, uint64_t off,
		   uint64_t len, const uint8_t *exp, const uint8_t *got)
{
	G->st[w].fails++;
	if (STOP1)
		atomic_store(&G->stop, 1);
	if (atomic_fetch_add(&G->printed, 1) >= MAXPRINT)
		return;
	hdump(w);
	int zeros = 1;
	for (uint64_t i = 0; i < len; i++)
		if (got && got[i]) { zeros = 0; break; }
	fprintf(stderr, "FAIL w%d %s %s off=%llu len=%llu", w, what, file,
		(unsigned long long)off, (unsigned long long)len);
	if (exp && got) {
		fprintf(stderr, " exp=");
		for (uint64_t i = 0; i < len && i < 8; i++) fprintf(stderr, "%02x", exp[i]);
		fprintf(stderr, " got=");
		for (uint64_t i = 0; i < len && i < 8; i++) fprintf(stderr, "%02x", got[i]);
		fprintf(stderr, "%s", zeros ? " (zeros)" : "");
	}
	fprintf(stderr, " block=%llu+%llu\n", (unsigned long long)(off / BSZ),
		(unsigned long long)(off % BSZ));
}

/* compare, reporting runs of mismatches; mask: only bytes owned by w */
static void compare(int w, const char *what, const char *file, uint64_t off,
		    const uint8_t *exp, const uint8_t *got, uint64_t n, int only_own)
{
	uint64_t i = 0;
	G->st[w].checks++;
	while (i < n) {
		if ((only_own && owner(off + i) != w) || exp[i] == got[i]) {
			if (!only_own || owner(off + i) == w)
				G->st[w].cbytes++;
			i++;
			continue;
		}
		uint64_t j = i;
		while (j < n && (!only_own || owner(off + j) == w) && exp[j] != got[j])
			j++;
		report(w, what, file, off + i, j - i, exp + i, got + i);
		i = j;
	}
}

static void load(const char *path, uint8_t *buf, uint64_t max, uint64_t *size)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		die("open %s", path);
	if ((uint64_t)st.st_size > max) {
		fprintf(stderr, "%s: larger than the max size\n", path);
		exit(2);
	}
	uint64_t got = 0;
	while (got < (uint64_t)st.st_size) {
		ssize_t r = pread(fd, buf + got, st.st_size - got, got);
		if (r <= 0)
			die("read %s", path);
		got += r;
	}
	*size = st.st_size;
	close(fd);
}

static void save(const char *path, const uint8_t *buf, uint64_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die("create %s", path);
	uint64_t put = 0;
	while (put < size) {
		ssize_t r = pwrite(fd, buf + put, size - put, put);
		if (r <= 0)
			die("write %s", path);
		put += r;
	}
	if (ftruncate(fd, size) < 0)
		die("ftruncate");
	close(fd);
}

/* ---- worker ---- */

struct wfile {
	char path[512];
	int fd;
	int shared, idx;
};

static int wopen(struct wfile *f)
{
	if (f->fd >= 0)
		return f->fd;
	f->fd = open(f->path, O_RDWR | O_DIRECT);
	if (f->fd < 0)
		die("open %s", f->path);
	return f->fd;
}

static void wmaybe_close(struct wfile *f, uint64_t *s, int pct, struct stats *st)
{
	if (f->fd >= 0 && (int)rr(s, 100) < pct) {
		if (!f->shared)
			hadd('c', f->idx, 0, 0, 0);
		close(f->fd);
		f->fd = -1;
		st->reopens++;
	}
}

static uint8_t *abuf(size_t n)
{
	void *p;
	if (posix_memalign(&p, 4096, n))
		die("memalign");
	return p;
}

static uint64_t sh_cur_end(int f)
{
	uint64_t e = G->sh_size0[f];
	for (int w = 0; w < W; w++)
		if (G->sh_end[f][w] > e)
			e = G->sh_end[f][w];
	return e;
}

/* a random range inside one of w's stripes of shared file f */
static void pick_own(uint64_t *s, int w, int f, uint64_t *off, uint32_t *len)
{
	uint64_t base;
	if (rr(s, 100) < 35) { /* near the end: appends that extend the file */
		uint64_t e = sh_cur_end(f);
		base = e + rr(s, 3 * 16384);
		base = base > 2 * 16384 ? base - 2 * 16384 : 0;
	} else {
		uint64_t e = sh_cur_end(f) + 32768;
		base = rr(s, e < SMAX ? e : SMAX);
	}
	uint64_t st = base / STRIPE;
	while ((int)(st % W) != w)
		st++;
	if ((st + 1) * STRIPE > SMAX) {
		st = (SMAX / STRIPE) - 1;
		while ((int)(st % W) != w)
			st--;
	}
	uint64_t in = rr(s, STRIPE);
	uint32_t l = 1 + (uint32_t)rr(s, STRIPE - in);
	if (rr(s, 4) == 0) { /* a whole stripe sometimes */
		in = 0;
		l = STRIPE;
	}
	*off = st * STRIPE + in;
	*len = l;
}

static void fill(uint64_t *s, uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(rnd(s) | 1); /* never 0: zeros show up */
}

static void worker(int w)
{
	uint64_t s = seed0 * 7919ull + (uint64_t)w * 104729ull + 1;
	struct stats *st = &G->st[w];
	struct wfile sh[MAXSH], pr[MAXPR];
	struct io_uring ring;
	uint8_t *wb = abuf(QD * (size_t)65536), *rb = abuf(1 << 20);
	double end = now() + T;

	if (io_uring_queue_init(QD * 2, &ring, 0) < 0)
		die("io_uring");
	for (int f = 0; f < NS; f++) {
		shname(sh[f].path, sizeof(sh[f].path), mnt, f);
		sh[f].fd = -1, sh[f].shared = 1, sh[f].idx = f;
	}
	for (int f = 0; f < NP; f++) {
		prname(pr[f].path, sizeof(pr[f].path), mnt, w, f);
		pr[f].fd = -1, pr[f].shared = 0, pr[f].idx = f;
	}
	for (int64_t it = 0; !atomic_load(&G->stop); it++) {
		if ((it & 63) == 0 && now() > end)
			break;
		int op = (int)rr(&s, 100);
		if (op < 38) {
			/* shared write(s), own stripes only */
			int f = (int)rr(&s, NS);
			struct wfile *F = &sh[f];
			int fd = wopen(F);
			int k = rr(&s, 3) == 0 ? 1 + (int)rr(&s, QD) : 1;
			uint64_t offs[16];
			uint32_t lens[16];
			for (int i = 0; i < k; i++) {
				int clash;
				int tries = 0;
				do {
					pick_own(&s, w, f, &offs[i], &lens[i]);
					clash = 0;
					for (int j = 0; j < i; j++)
						if (offs[i] < offs[j] + lens[j] && offs[j] < offs[i] + lens[i])
							clash = 1;
				} while (clash && ++tries < 20);
				if (clash) {
					k = i;
					break;
				}
				fill(&s, wb + (size_t)i * 65536, lens[i]);
			}
			if (k == 1) {
				ssize_t r = pwrite(fd, wb, lens[0], (off_t)offs[0]);
				if (r != (ssize_t)lens[0]) {
					fprintf(stderr, "w%d pwrite %s off %llu len %u: %zd %s\n", w,
						F->path, (unsigned long long)offs[0], lens[0], r, strerror(errno));
					st->fails++;
					continue;
				}
			} else {
				for (int i = 0; i < k; i++) {
					struct io_uring_sqe *q = io_uring_get_sqe(&ring);
					io_uring_prep_write(q, fd, wb + (size_t)i * 65536, lens[i], offs[i]);
					io_uring_sqe_set_data64(q, (uint64_t)i);
				}
				int r = io_uring_submit_and_wait(&ring, k);
				if (r < 0) {
					errno = -r;
					die("io_uring_submit");
				}
				for (int n = 0; n < k; n++) {
					struct io_uring_cqe *c;
					if (io_uring_wait_cqe(&ring, &c) < 0)
						die("wait_cqe");
					int i = (int)io_uring_cqe_get_data64(c);
					if (c->res != (int)lens[i]) {
						fprintf(stderr, "w%d uring write %s off %llu len %u: %d\n", w,
							F->path, (unsigned long long)offs[i], lens[i], c->res);
						st->fails++;
						lens[i] = 0; /* unknown state: abort below */
					}
					io_uring_cqe_seen(&ring, c);
				}
				st->uring_writes += k;
			}
			for (int i = 0; i < k; i++) {
				memcpy(shexp[f] + offs[i], wb + (size_t)i * 65536, lens[i]);
				lastw[f] = offs[i];
				if (offs[i] + lens[i] > G->sh_end[f][w])
					G->sh_end[f][w] = offs[i] + lens[i];
				st->writes++;
				st->wbytes += lens[i];
			}
			wmaybe_close(F, &s, 25, st);
		} else if (op < 68) {
			/* shared read: check own bytes */
			int f = (int)rr(&s, NS);
			struct wfile *F = &sh[f];
			int fd = wopen(F);
			uint64_t e = sh_cur_end(f);
			uint64_t off, len = 1 + rr(&s, rr(&s, 4) ? 20000 : 200000);
			int how = (int)rr(&s, 10);
			if (how < 3) /* the end: blocks that straddle the backing size */
				off = e - rr(&s, e < 3 * 16384 ? e + 1 : 3 * 16384);
			else if (how < 6) /* around my last write */
				off = lastw[f] - rr(&s, lastw[f] < 16384 ? lastw[f] + 1 : 16384);
			else
				off = rr(&s, e + 16384);
			ssize_t r = pread(fd, rb, len, (off_t)off);
			if (r < 0) {
				fprintf(stderr, "w%d pread %s: %s\n", w, F->path, strerror(errno));
				st->fails++;
				continue;
			}
			st->reads++;
			/* my acked bytes must all be there: the size covers them */
			uint64_t mine = G->sh_end[f][w];
			uint64_t need = mine > off ? mine - off : 0;
			if (need > len)
				need = len;
			if ((uint64_t)r < need) {
				report(w, "short-read", F->path, off + r, need - r, NULL, NULL);
			}
			compare(w, "read-shared", F->path, off, shexp[f] + off, rb, (uint64_t)r, 1);
			wmaybe_close(F, &s, 25, st);
		} else if (op < 80) {
			/* private write / append */
			int f = (int)rr(&s, NP);
			struct wfile *F = &pr[f];
			int fd = wopen(F);
			uint64_t *sz = &G->pr_size[w][f];
			uint64_t off, len = 1 + rr(&s, rr(&s, 3) ? 3000 : 40000);
			if (rr(&s, 3) == 0) {
				off = *sz;
				st->appends++;
			} else {
				off = rr(&s, *sz + 1000);
			}
			if (off + len > PMAX) {
				if (off >= PMAX)
					off = rr(&s, PMAX - 1);
				len = PMAX - off;
				if (len > 40000)
					len = 1 + rr(&s, 40000);
			}
			fill(&s, wb, len);
			ssize_t r = pwrite(fd, wb, len, (off_t)off);
			if (r != (ssize_t)len) {
				fprintf(stderr, "w%d pwrite %s: %zd %s\n", w, F->path, r, strerror(errno));
				st->fails++;
				continue;
			}
			hadd('W', f, off, len, off + len > *sz ? off + len : *sz);
			memcpy(prexp[w][f] + off, wb, len);
			if (off > *sz)
				memset(prexp[w][f] + *sz, 0, off - *sz);
			if (off + len > *sz)
				*sz = off + len;
			st->writes++;
			st->wbytes += len;
			wmaybe_close(F, &s, 20, st);
		} else if (op < 92) {
			/* private read: everything checked, and the size */
			int f = (int)rr(&s, NP);
			struct wfile *F = &pr[f];
			int fd = wopen(F);
			uint64_t sz = G->pr_size[w][f];
			uint64_t off = rr(&s, sz + 100);
			uint64_t len = 1 + rr(&s, 100000);
			ssize_t r = pread(fd, rb, len, (off_t)off);
			if (r < 0) {
				fprintf(stderr, "w%d pread %s: %s\n", w, F->path, strerror(errno));
				st->fails++;
				continue;
			}
			st->reads++;
			hadd('R', f, off, len, sz);
			uint64_t want = off >= sz ? 0 : (sz - off < len ? sz - off : len);
			if ((uint64_t)r != want) {
				report(w, r < (ssize_t)want ? "short-read" : "long-read", F->path,
				       off, want, NULL, NULL);
				if ((uint64_t)r > want)
					r = (ssize_t)want;
			}
			compare(w, "read-private", F->path, off, prexp[w][f] + off, rb, (uint64_t)r, 0);
			wmaybe_close(F, &s, 20, st);
		} else if (op < 94 && !NOTRUNC) {
			/* private truncate (down or up) */
			int f = (int)rr(&s, NP);
			struct wfile *F = &pr[f];
			int fd = wopen(F);
			uint64_t *sz = &G->pr_size[w][f];
			uint64_t n = rr(&s, 4) ? rr(&s, *sz + 1) : rr(&s, PMAX);
			if (ftruncate(fd, (off_t)n) < 0) {
				fprintf(stderr, "w%d ftruncate: %s\n", w, strerror(errno));
				st->fails++;
				continue;
			}
			if (n < *sz)
				memset(prexp[w][f] + n, 0, *sz - n);
			else
				memset(prexp[w][f] + *sz, 0, n - *sz);
			hadd('T', f, n, 0, n);
			*sz = n;
			st->truncs++;
		} else if (op < 96) {
			struct wfile *F = rr(&s, 2) ? &sh[rr(&s, NS)] : &pr[rr(&s, NP)];
			if (fsync(wopen(F)) < 0) {
				fprintf(stderr, "w%d fsync: %s\n", w, strerror(errno));
				st->fails++;
			}
			st->fsyncs++;
		} else if (op < 98) {
			/* a punched hole or a zeroed range, keeping the size: in
			 * a shared file inside one of my stripes (the other
			 * workers' bytes of its blocks must survive it), or
			 * anywhere in a private file */
			int shared = (int)rr(&s, 2), f;
			uint64_t off, len;
			struct wfile *F;
			if (shared) {
				uint32_t l;
				f = (int)rr(&s, NS);
				F = &sh[f];
				pick_own(&s, w, f, &off, &l);
				len = l;
			} else {
				f = (int)rr(&s, NP);
				F = &pr[f];
				off = rr(&s, G->pr_size[w][f] + 1000);
				len = 1 + rr(&s, rr(&s, 2) ? 3000 : 100000);
				if (off + len > PMAX)
					len = PMAX - off;
			}
			int mode = FALLOC_FL_KEEP_SIZE |
				   (rr(&s, 2) ? FALLOC_FL_PUNCH_HOLE : FALLOC_FL_ZERO_RANGE);
			if (len == 0)
				continue;
			if (fallocate(wopen(F), mode, (off_t)off, (off_t)len) < 0) {
				fprintf(stderr, "w%d fallocate %s: %s\n", w, F->path, strerror(errno));
				st->fails++;
				continue;
			}
			if (shared) {
				memset(shexp[f] + off, 0, len);
			} else {
				uint64_t sz = G->pr_size[w][f];
				if (off < sz)
					memset(prexp[w][f] + off, 0, (off + len < sz ? off + len : sz) - off);
				hadd('P', f, off, len, sz);
			}
			st->punches++;
		} else {
			/* close everything: last closes start write-back */
			hadd('C', -1, 0, 0, 0);
			for (int f = 0; f < NS; f++)
				wmaybe_close(&sh[f], &s, 100, st);
			for (int f = 0; f < NP; f++)
				wmaybe_close(&pr[f], &s, 100, st);
			usleep((useconds_t)rr(&s, 2000));
		}
	}
	for (int f = 0; f < NS; f++)
		if (sh[f].fd >= 0)
			close(sh[f].fd);
	for (int f = 0; f < NP; f++)
		if (pr[f].fd >= 0)
			close(pr[f].fd);
	io_uring_queue_exit(&ring);
	exit(0);
}

/* ---- whole-file checks ---- */

static uint64_t check_file(const char *path, const uint8_t *exp, uint64_t size,
			   int direct, const char *what)
{
	int fd = open(path, O_RDONLY | (direct ? O_DIRECT : 0));
	struct stat st;
	uint64_t bad = 0;
	if (fd < 0 || fstat(fd, &st) < 0)
		die("open %s", path);
	if ((uint64_t)st.st_size != size) {
		fprintf(stderr, "FAIL %s %s: size %llu, expected %llu\n", what, path,
			(unsigned long long)st.st_size, (unsigned long long)size);
		bad++;
	}
	uint8_t *b = abuf(size + 65536);
	uint64_t got = 0;
	for (;;) {
		uint64_t room = size + 65536 - got, want = room < (1 << 20) ? room : (1 << 20);
		want &= ~4095ull;
		if (!want)
			break;
		ssize_t r = pread(fd, b + got, want, (off_t)got);
		if (r < 0)
			die("read %s", path);
		if (r == 0)
			break;
		got += r;
	}
	if (got < size)
		memset(b + got, 0xee, size - got);
	int printed = 0;
	for (uint64_t i = 0; i < size; ) {
		if (b[i] == exp[i]) {
			i++;
			continue;
		}
		uint64_t j = i;
		while (j < size && b[j] != exp[j])
			j++;
		bad += j - i;
		if (printed++ < 20) {
			int z = 1;
			for (uint64_t k = i; k < j; k++)
				if (b[k]) { z = 0; break; }
			fprintf(stderr, "FAIL %s %s off=%llu len=%llu%s block=%llu+%llu\n", what,
				path, (unsigned long long)i, (unsigned long long)(j - i),
				z ? " (zeros)" : "", (unsigned long long)(i / BSZ),
				(unsigned long long)(i % BSZ));
		}
		i = j;
	}
	free(b);
	close(fd);
	return bad;
}

static void alloc_models(void)
{
	G = shmap(sizeof(*G));
	for (int f = 0; f < NS; f++)
		shexp[f] = shmap(SMAX);
	for (int w = 0; w < W; w++)
		for (int f = 0; f < NP; f++)
			prexp[w][f] = shmap(PMAX);
}

static void usage(void)
{
	fprintf(stderr, "usage: fs_stress init|run|verify [-m MNT] [-D DIR] -e EXPDIR "
		"[-w W] [-t SECS] [-s NS] [-p NP] [-S SMAX] [-P PMAX] [-q QD] [-r SEED] "
		"[-i S0] [-j P0]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		usage();
	const char *mode = argv[1];
	int c;
	optind = 2;
	while ((c = getopt(argc, argv, "m:D:e:w:t:s:p:S:P:q:r:i:j:b:NX")) != -1) {
		switch (c) {
		case 'm': mnt = optarg; break;
		case 'D': dir = optarg; break;
		case 'e': expdir = optarg; break;
		case 'w': W = atoi(optarg); break;
		case 't': T = atoi(optarg); break;
		case 's': NS = atoi(optarg); break;
		case 'p': NP = atoi(optarg); break;
		case 'S': SMAX = strtoull(optarg, NULL, 0); break;
		case 'P': PMAX = strtoull(optarg, NULL, 0); break;
		case 'q': QD = atoi(optarg); break;
		case 'r': seed0 = (unsigned)atoi(optarg); break;
		case 'i': S0 = strtoull(optarg, NULL, 0); break;
		case 'j': P0 = strtoull(optarg, NULL, 0); break;
		case 'b': BSZ = strtoull(optarg, NULL, 0); break;
		case 'N': NOTRUNC = 1; break;  /* no truncates */
		case 'X': STOP1 = 1; break;    /* stop at the first failure */
		default: usage();
		}
	}
	if (!expdir || W < 1 || W > MAXW || NS < 1 || NS > MAXSH || NP < 1 ||
	    NP > MAXPR || QD < 1 || QD > 16)
		usage();
	if (!seed0)
		seed0 = (unsigned)time(NULL);
	alloc_models();
	char p[600], q[600];

	if (!strcmp(mode, "init")) {
		/* initial contents, in the backing dir and as the model */
		if (!dir)
			usage();
		mkdir(expdir, 0755);
		uint64_t s = seed0 | 1;
		for (int f = 0; f < NS; f++) {
			fill(&s, shexp[f], S0);
			shname(p, sizeof(p), dir, f);
			save(p, shexp[f], S0);
			shname(q, sizeof(q), expdir, f);
			save(q, shexp[f], S0);
		}
		for (int w = 0; w < W; w++)
			for (int f = 0; f < NP; f++) {
				fill(&s, prexp[w][f], P0);
				prname(p, sizeof(p), dir, w, f);
				save(p, prexp[w][f], P0);
				prname(q, sizeof(q), expdir, w, f);
				save(q, prexp[w][f], P0);
			}
		printf("init: %d shared x %llu, %d x %d private x %llu\n", NS,
		       (unsigned long long)S0, W, NP, (unsigned long long)P0);
		return 0;
	}
	if (!strcmp(mode, "verify")) {
		if (!dir)
			usage();
		uint64_t bad = 0, sz;
		for (int f = 0; f < NS; f++) {
			shname(q, sizeof(q), expdir, f);
			load(q, shexp[f], SMAX, &sz);
			shname(p, sizeof(p), dir, f);
			bad += check_file(p, shexp[f], sz, 0, "verify");
		}
		for (int w = 0; w < W; w++)
			for (int f = 0; f < NP; f++) {
				prname(q, sizeof(q), expdir, w, f);
				load(q, prexp[w][f], PMAX, &sz);
				prname(p, sizeof(p), dir, w, f);
				bad += check_file(p, prexp[w][f], sz, 0, "verify");
			}
		printf("verify %s: %llu bad bytes\n", dir, (unsigned long long)bad);
		return bad ? 1 : 0;
	}
	if (strcmp(mode, "run") || !mnt)
		usage();
	for (int f = 0; f < NS; f++) {
		shname(q, sizeof(q), expdir, f);
		load(q, shexp[f], SMAX, &G->sh_size0[f]);
	}
	for (int w = 0; w < W; w++)
		for (int f = 0; f < NP; f++) {
			prname(q, sizeof(q), expdir, w, f);
			load(q, prexp[w][f], PMAX, &G->pr_size[w][f]);
		}
	double t0 = now();
	T0 = t0;
	pid_t pids[MAXW];
	for (int w = 0; w < W; w++) {
		pids[w] = fork();
		if (pids[w] < 0)
			die("fork");
		if (pids[w] == 0)
			worker(w);
	}
	int errs = 0;
	for (int w = 0; w < W; w++) {
		int stt;
		waitpid(pids[w], &stt, 0);
		if (!WIFEXITED(stt) || WEXITSTATUS(stt)) {
			fprintf(stderr, "worker %d died (status %d)\n", w, stt);
			errs++;
		}
	}
	struct stats tot = { 0 };
	for (int w = 0; w < W; w++) {
		struct stats *s = &G->st[w];
		tot.writes += s->writes; tot.uring_writes += s->uring_writes;
		tot.wbytes += s->wbytes; tot.reads += s->reads; tot.checks += s->checks;
		tot.cbytes += s->cbytes; tot.fails += s->fails; tot.fsyncs += s->fsyncs;
		tot.reopens += s->reopens; tot.truncs += s->truncs; tot.appends += s->appends;
		tot.punches += s->punches;
	}
	/* the final check through the mount, and the expected images */
	uint64_t bad = 0;
	for (int f = 0; f < NS; f++) {
		uint64_t sz = sh_cur_end(f);
		shname(p, sizeof(p), mnt, f);
		bad += check_file(p, shexp[f], sz, 1, "final-mount");
		shname(q, sizeof(q), expdir, f);
		save(q, shexp[f], sz);
	}
	for (int w = 0; w < W; w++)
		for (int f = 0; f < NP; f++) {
			prname(p, sizeof(p), mnt, w, f);
			bad += check_file(p, prexp[w][f], G->pr_size[w][f], 1, "final-mount");
			prname(q, sizeof(q), expdir, w, f);
			save(q, prexp[w][f], G->pr_size[w][f]);
		}
	printf("run: %.1fs seed=%u workers=%d writes=%llu (uring %llu, %llu appends, "
	       "%.1f MB) reads=%llu checks=%llu (%.1f MB own bytes compared) "
	       "fsyncs=%llu truncs=%llu punches=%llu closes=%llu | FAILURES during run=%llu, "
	       "final bad bytes=%llu\n",
	       now() - t0, seed0, W, (unsigned long long)tot.writes,
	       (unsigned long long)tot.uring_writes, (unsigned long long)tot.appends,
	       tot.wbytes / 1e6, (unsigned long long)tot.reads,
	       (unsigned long long)tot.checks, tot.cbytes / 1e6,
	       (unsigned long long)tot.fsyncs, (unsigned long long)tot.truncs,
	       (unsigned long long)tot.punches, (unsigned long long)tot.reopens, (unsigned long long)tot.fails,
	       (unsigned long long)bad);
	return errs ? 2 : (tot.fails || bad) ? 1 : 0;
}
