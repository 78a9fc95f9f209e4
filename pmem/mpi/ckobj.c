/* ckobj.c - settings, checkpointed objects with their consensus, and
 * protected variables; see ckobj.h. */
#include "pmem/mpi/ckobj.h"
#include "pmem/mpi/nvckpt.h"

#include "common/clock.h"
#include "common/log.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define DEFAULT_DIR "/dev/shm/nvcache-ckpt"
#define PROTECT_IDS 64
#define PROTECT_BYTES (64u << 10)
#define EXTRA_MAX (PROTECT_BYTES + 8u * PROTECT_IDS + 8u)

static struct ckobj_conf conf;
static const char *conf_error; /* why the environment is unusable */
static bool conf_read;
static bool dir_is_default;

bool ckobj_name_ok(const char *s)
{
	if (!*s || *s == '.' || strlen(s) >= CKPT_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("._-", *s))
			return false;
	return true;
}

static char why[256];

/* A count >= 1 from the environment variable name, if set. */
static void conf_count(const char *name, const char *what, uint64_t *out)
{
	const char *e = getenv(name);
	char *end;

	if (!e || !*e)
		return;
	unsigned long long k = strtoull(e, &end, 10);
	if (!*end && k > 0)
		*out = k;
	else if (!conf_error) {
		snprintf(why, sizeof(why), "%s=%s: expected a number of %s >= 1",
			 name, e, what);
		conf_error = why;
	}
}

static void conf_load(void)
{
	const char *e;

	conf_read = true;
	log_init("nvckpt", LOG_LVL_WARN);
	conf.mode = CKOBJ_ON;
	conf.every = 1;
	e = getenv("NVCACHE_CKPT");
	if (e && (!strcmp(e, "off") || !strcmp(e, "0")))
		conf.mode = CKOBJ_OFF;
	else if (e && !strcmp(e, "restart"))
		conf.mode = CKOBJ_RESTART;
	else if (e && *e && strcmp(e, "on") && strcmp(e, "1")) {
		snprintf(why, sizeof(why), "NVCACHE_CKPT=%s: expected on, off or restart", e);
		conf_error = why;
	}
	e = getenv("NVCACHE_CKPT_DIR");
	dir_is_default = !e || !*e;
	snprintf(conf.dir, sizeof(conf.dir), "%s", dir_is_default ? DEFAULT_DIR : e);
	e = getenv("NVCACHE_CKPT_JOB");
	if (e && *e) {
		snprintf(conf.job, sizeof(conf.job), "%s", e);
		if (!ckobj_name_ok(e) && !conf_error) {
			snprintf(why, sizeof(why), "NVCACHE_CKPT_JOB=%s: a job name is 1 to %d "
				 "letters, digits, '.', '_' or '-', not starting with '.'",
				 e, CKPT_NAME_MAX - 1);
			conf_error = why;
		}
	} else {
		char exe[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		exe[n > 0 ? n : 0] = 0;
		const char *b = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
		if (!*b)
			b = "job";
		size_t bl = strnlen(b, sizeof(conf.job) - 1);
		memcpy(conf.job, b, bl); /* cut to the longest job name */
		conf.job[bl] = 0;
		for (char *p = conf.job; *p; p++)
			if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
				*p = '_';
		if (conf.job[0] == '.')
			conf.job[0] = '_';
	}
	conf_count("NVCACHE_CKPT_EVERY", "synchronizations", &conf.every);
	e = getenv("NVCACHE_CKPT_FLUSH");
	if (e && *e)
		snprintf(conf.flush, sizeof(conf.flush), "%s", e);
	conf.flush_every = 10;
	conf_count("NVCACHE_CKPT_FLUSH_EVERY", "versions", &conf.flush_every);
	e = getenv("NVCACHE_CKPT_MODE");
	if (e && !strcmp(e, "incremental"))
		conf.incremental = true;
	else if (e && *e && strcmp(e, "full") && !conf_error) {
		snprintf(why, sizeof(why), "NVCACHE_CKPT_MODE=%s: expected full or incremental", e);
		conf_error = why;
	}
}

const struct ckobj_conf *ckobj_conf(void)
{
	if (!conf_read)
		conf_load();
	return &conf;
}

/* ---- protected variables ---- */

struct protect { int id; void *ptr; uint32_t size; };
static struct protect prot[PROTECT_IDS];
static int nprot;
static uint32_t prot_bytes;
static uint8_t *saved;        /* the restored extra bytes, kept for late calls */
static uint32_t saved_len;
static uint64_t restored_version;

/* Find id's bytes in a packed blob: u32 count, then {i32 id, u32 size,
 * bytes} entries. NULL if absent or the blob is malformed. */
static const uint8_t *blob_find(const uint8_t *b, uint32_t len, int id, uint32_t *size)
{
	uint32_t n, off = 4;

	if (len < 4)
		return NULL;
	memcpy(&n, b, 4);
	for (uint32_t i = 0; i < n && off + 8 <= len; i++) {
		int32_t eid;
		uint32_t esz;
		memcpy(&eid, b + off, 4);
		memcpy(&esz, b + off + 4, 4);
		if (esz > len - off - 8)
			return NULL;
		if (eid == id) {
			*size = esz;
			return b + off + 8;
		}
		off += 8 + esz;
	}
	return NULL;
}

static void protect_apply(const struct protect *p)
{
	uint32_t sz;
	const uint8_t *src = saved ? blob_find(saved, saved_len, p->id, &sz) : NULL;

	if (!src)
		return;
	if (sz != p->size) {
		log_err("nvckpt_protect(%d): the checkpoint holds %u bytes for this id, "
			"the program protects %u: not restored", p->id, sz, p->size);
		return;
	}
	memcpy(p->ptr, src, sz);
}

static uint32_t protect_pack(uint8_t *out)
{
	uint32_t off = 4, n = (uint32_t)nprot;

	memcpy(out, &n, 4);
	for (int i = 0; i < nprot; i++) {
		int32_t id = prot[i].id;
		memcpy(out + off, &id, 4);
		memcpy(out + off + 4, &prot[i].size, 4);
		memcpy(out + off + 8, prot[i].ptr, prot[i].size);
		off += 8 + prot[i].size;
	}
	return off;
}

int nvckpt_protect(int id, void *ptr, size_t size)
{
	if (!size || size > PROTECT_BYTES || !ptr)
		return -EINVAL;
	for (int i = 0; i < nprot; i++) {
		if (prot[i].id != id)
			continue;
		if (prot[i].size != size)
			return -EINVAL;
		prot[i].ptr = ptr;
		protect_apply(&prot[i]);
		return 0;
	}
	if (nprot == PROTECT_IDS || prot_bytes + size > PROTECT_BYTES)
		return -ENOSPC;
	prot[nprot] = (struct protect){ id, ptr, (uint32_t)size };
	prot_bytes += (uint32_t)size;
	protect_apply(&prot[nprot++]);
	return 0;
}

uint64_t nvckpt_version(void)
{
	return restored_version;
}

uint64_t ckobj_restored_version(void)
{
	return restored_version;
}

void ckobj_restore_protected(struct ckobj *o)
{
	struct ckpt_version v[CKPT_SLOTS];
	int n = ckpt_versions(o->ck, v), s = ckpt_find(o->ck, o->restored);

	if (s < 0)
		return;
	if (o->restored > restored_version)
		restored_version = o->restored;
	if (saved)
		return; /* the first object restored gives the variables */
	for (int i = 0; i < n; i++) {
		if (v[i].slot != s)
			continue;
		saved = malloc(v[i].extra_len ? v[i].extra_len : 1);
		if (!saved)
			return;
		saved_len = v[i].extra_len;
		memcpy(saved, ckpt_extra(o->ck, s), saved_len);
	}
	for (int i = 0; i < nprot; i++)
		protect_apply(&prot[i]);
}

/* ---- areas that grow ---- */

/* Replace the area *c at path by one of data_size bytes per version that
 * holds the newest version of the old one, crash-consistently: the new
 * area is made beside the old one (path.grow), the version copied and
 * committed there, then renamed over it, and the rename persisted; a kill
 * at any instant leaves either file with that version. 0 or -errno (the
 * new file then removed, *c unchanged). */
static int area_grow(struct ckpt **c, const char *path, uint64_t data_size)
{
	char tmp[1400];
	struct ckpt_geom g = *ckpt_geom(*c);
	struct ckpt_version v[CKPT_SLOTS];
	int n = ckpt_versions(*c, v), rc = 0;
	struct ckpt *nc;
	uint64_t old = g.data_size;

	snprintf(tmp, sizeof(tmp), "%s.grow", path);
	g.data_size = data_size;
	if ((rc = ckpt_create(&nc, tmp, &g, NULL)))
		return rc;
	if (n) {
		int s = ckpt_next_slot(nc);
		ckpt_begin(nc, s);
		ckpt_write(nc, s, 0, ckpt_data(*c, v[0].slot), old);
		memcpy(ckpt_extra(nc, s), ckpt_extra(*c, v[0].slot), v[0].extra_len);
		rc = ckpt_commit(nc, s, v[0].version, v[0].consistent, v[0].extra_len);
	}
	if (!rc && rename(tmp, path) < 0)
		rc = -errno;
	if (rc) {
		ckpt_close(nc);
		unlink(tmp);
		return rc;
	}
	*strrchr(tmp, '/') = 0;
	int dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd); /* the rename itself persisted */
		close(dfd);
	}
	ckpt_close(*c);
	*c = nc;
	return 0;
}

/* ---- the second level ---- */

struct ckobj_flush {
	pthread_t th;
	bool running;             /* a copy was started and not yet joined */
	int slot;                 /* the NVRAM slot it reads */
	uint64_t version;
	uint32_t extra_len;
	struct ckpt *src;
	struct ckpt *dst;         /* the flush area: on a restart the one
				   * there, else made by the first copy;
				   * grown as the NVRAM area grows */
	char path[700];
	_Atomic uint64_t done;    /* the last version copied completely */
	_Atomic int err;
};

static void *flush_main(void *arg)
{
	struct ckobj_flush *f = arg;
	struct ckpt_geom g = *ckpt_geom(f->src);
	uint32_t extra = f->extra_len;
	int rc = 0;

	g.live_size = 0;
	if (!f->dst)
		rc = ckpt_create(&f->dst, f->path, &g, NULL);
	else if (ckpt_geom(f->dst)->data_size < g.data_size) /* it grew */
		rc = area_grow(&f->dst, f->path, g.data_size);
	if (rc) {
		log_err("second level %s: %s: copies of the checkpoint stop here",
			f->path, strerror(-rc));
		atomic_store(&f->err, rc);
		return NULL;
	}
	int s = ckpt_next_slot(f->dst);
	ckpt_begin(f->dst, s);
	region_crash_in("flush-copy"); /* the other slot's copy must survive */
	ckpt_write(f->dst, s, 0, ckpt_data(f->src, f->slot), g.data_size);
	memcpy(ckpt_extra(f->dst, s), ckpt_extra(f->src, f->slot), extra);
	rc = ckpt_commit(f->dst, s, f->version, f->version, extra);
	if (rc)
		atomic_store(&f->err, rc);
	else
		atomic_store(&f->done, f->version);
	return NULL;
}

static void flush_join(struct ckobj_flush *f)
{
	if (f && f->running) {
		pthread_join(f->th, NULL);
		f->running = false;
	}
}

static uint64_t cpu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void ckobj_clock_start(struct ckobj_clock *c)
{
	c->wall = clock_now_ns();
	c->cpu = cpu_now_ns();
}

void ckobj_clock_add(struct ckobj *o, const struct ckobj_clock *c)
{
	o->local_ns += clock_now_ns() - c->wall;
	o->local_cpu_ns += cpu_now_ns() - c->cpu;
}

void ckobj_begin(struct ckobj *o, int slot)
{
	struct ckobj_clock c;

	ckobj_clock_start(&c);
	if (o->fl && o->fl->running && o->fl->slot == slot) {
		flush_join(o->fl);
		o->flush_wait_ns += clock_now_ns() - c.wall;
	}
	ckpt_begin(o->ck, slot);
	ckobj_clock_add(o, &c);
}

static void flush_start(struct ckobj *o, int slot, uint64_t version)
{
	struct ckobj_flush *f = o->fl;
	struct ckpt_version v[CKPT_SLOTS];
	int n = ckpt_versions(o->ck, v);

	flush_join(f);
	if (atomic_load(&f->err))
		return;
	f->slot = slot;
	f->version = version;
	f->extra_len = 0;
	for (int i = 0; i < n; i++)
		if (v[i].slot == slot)
			f->extra_len = v[i].extra_len;
	f->src = o->ck;
	if (pthread_create(&f->th, NULL, flush_main, f) == 0)
		f->running = true;
}

/* A restarted job keeps the second level's area it finds (its versions up
 * to the one restored: the others are of a history the restart left), so
 * that its copies stay there until the next copy is complete; one that
 * does not fit is replaced by the first copy. */
static void flush_keep(struct ckobj_flush *f, const struct ckpt_geom *g, uint64_t restored)
{
	const struct ckpt_geom *h;

	if (ckpt_open(&f->dst, f->path, false, NULL))
		return;
	h = ckpt_geom(f->dst);
	if (h->nranks != g->nranks || h->rank != g->rank || h->extra_max != g->extra_max ||
	    h->data_size > g->data_size) {
		ckpt_close(f->dst);
		f->dst = NULL;
		return;
	}
	ckpt_drop_newer(f->dst, restored);
}

/* Make the flush directory's job folder and the copier (not its area:
 * the first copy makes that, unless a restart keeps the one there). */
static int flush_setup(struct ckobj *o, const struct ckpt_geom *g)
{
	char dir[600];

	snprintf(dir, sizeof(dir), "%s/%s", conf.flush, conf.job);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		int e = errno;
		log_err("NVCACHE_CKPT_FLUSH %s: cannot make %s: %s", conf.flush, dir, strerror(e));
		return -e;
	}
	if (!(o->fl = calloc(1, sizeof(*o->fl))))
		return -ENOMEM;
	snprintf(o->fl->path, sizeof(o->fl->path), "%s/%s.r%d.nvckpt", dir, g->name, o->rank);
	if (o->restored)
		flush_keep(o->fl, g, o->restored);
	return 0;
}

/* Bring the versions of the second level's area from back into a new
 * NVRAM area at to, with the geometry g (the live part included). */
static int flush_restore(const char *from, const char *to, const struct ckpt_geom *geom,
			 bool any_size)
{
	struct ckpt *src, *dst;
	struct ckpt_version v[CKPT_SLOTS];
	struct ckpt_geom gs = *geom, *g = &gs;
	int rc = ckpt_open(&src, from, true, NULL);

	if (rc)
		return rc;
	if (any_size)
		g->data_size = ckpt_geom(src)->data_size;
	if (ckpt_geom(src)->data_size != g->data_size ||
	    ckpt_geom(src)->extra_max != g->extra_max ||
	    ckpt_geom(src)->nranks != g->nranks) {
		ckpt_close(src);
		return -EMEDIUMTYPE;
	}
	if ((rc = ckpt_create(&dst, to, g, NULL))) {
		ckpt_close(src);
		return rc;
	}
	for (int i = ckpt_versions(src, v) - 1; i >= 0 && !rc; i--) {
		int s = ckpt_next_slot(dst);
		ckpt_begin(dst, s);
		ckpt_write(dst, s, 0, ckpt_data(src, v[i].slot), g->data_size);
		memcpy(ckpt_extra(dst, s), ckpt_extra(src, v[i].slot), v[i].extra_len);
		rc = ckpt_commit(dst, s, v[i].version, v[i].consistent, v[i].extra_len);
	}
	ckpt_close(dst);
	ckpt_close(src);
	return rc;
}

/* ---- objects ---- */

/* Make dir/job (dir itself only when it is the default). */
static int job_dir(char *out, size_t len)
{
	struct stat st;

	if (stat(conf.dir, &st) < 0) {
		if (errno != ENOENT || !dir_is_default ||
		    (mkdir(conf.dir, 0700) < 0 && errno != EEXIST)) {
			int e = errno;
			log_err("NVCACHE_CKPT_DIR %s: %s (set it to a directory on NVRAM, "
				"e.g. a DAX file system or /dev/shm)", conf.dir, strerror(e));
			return -e;
		}
	} else if (!S_ISDIR(st.st_mode)) {
		log_err("NVCACHE_CKPT_DIR %s: not a directory", conf.dir);
		return -ENOTDIR;
	}
	snprintf(out, len, "%s/%s", conf.dir, conf.job);
	if (mkdir(out, 0700) < 0 && errno != EEXIST) {
		int e = errno;
		log_err("NVCACHE_CKPT_DIR %s: cannot make the job's directory %s: %s",
			conf.dir, out, strerror(e));
		return -e;
	}
	return 0;
}

static void log_open_error(const char *path, uint64_t need, int rc)
{
	struct statvfs vfs;

	if (rc == -ENOSPC && statvfs(conf.dir, &vfs) == 0)
		log_err("NVCACHE_CKPT_DIR %s is full: %s needs %llu MiB, %llu MiB free",
			conf.dir, path, (unsigned long long)(need >> 20),
			(unsigned long long)((uint64_t)vfs.f_bavail * vfs.f_frsize >> 20));
	else if (rc == -EBUSY)
		log_err("%s is in use: a job named '%s' is running already "
			"(set NVCACHE_CKPT_JOB to run another one beside it)", path, conf.job);
	else if (rc != -EMEDIUMTYPE)
		log_err("checkpoint file %s: %s", path, strerror(-rc));
}

/* MIN over comm of each of n values. */
static void all_min(long long *v, int n, MPI_Comm comm)
{
	long long in[8];

	memcpy(in, v, sizeof(*v) * (size_t)n);
	PMPI_Allreduce(in, v, n, MPI_LONG_LONG, MPI_MIN, comm);
}

/* Restart side of ckobj_open: open path, check it is this object's.
 * Returns 0 (*has says whether a file is there) or -errno, logged. */
static int open_existing(struct ckobj *o, const char *path, const struct ckpt_geom *g,
			 unsigned flags, bool *has, uint64_t *newest)
{
	struct ckpt_version v[CKPT_SLOTS];
	/* verified lazily: the newest here, and the one all ranks agree on */
	uint64_t t0 = clock_now_ns();
	int rc = ckpt_open(&o->ck, path, false, NULL);
	uint64_t t1 = clock_now_ns();

	o->open_ns += t1 - t0;

	*has = false;
	*newest = 0;
	if (rc == -ENOENT)
		return 0;
	if (rc) {
		log_open_error(path, 0, rc);
		return rc;
	}
	*has = true;
	const struct ckpt_geom *h = ckpt_geom(o->ck);
	if (h->nranks != g->nranks) {
		log_err("restart of job '%s': window '%s' was checkpointed by %u ranks, "
			"this job has %u (run it with mpiexec -n %u, or start afresh "
			"without NVCACHE_CKPT=restart)", conf.job, g->name, h->nranks,
			g->nranks, h->nranks);
		return -EINVAL;
	}
	if (!(flags & CKOBJ_ANY_SIZE) && (h->data_size != g->data_size || h->live_size != g->live_size)) {
		log_err("restart of job '%s': window '%s' of rank %u was checkpointed with "
			"%llu bytes, this run asks for %llu bytes", conf.job, g->name,
			g->rank, (unsigned long long)h->data_size,
			(unsigned long long)g->data_size);
		return -EINVAL;
	}
	int n = ckpt_versions(o->ck, v);
	bool live = flags & CKOBJ_RESTORE_LIVE && h->live_size >= h->data_size;
	if (n && (live ? ckpt_read_verify(o->ck, v[0].slot, ckpt_live(o->ck)) :
		  ckpt_verify(o->ck, v[0].slot)) == 0) {
		*newest = o->verified = v[0].version;
		if (live)
			o->in_live = v[0].version;
	} else if (n == 2) {
		*newest = v[1].version; /* verified if the restart takes it */
	}
	o->check_ns += clock_now_ns() - t1;
	return 0;
}

int ckobj_open(struct ckobj *o, const char *name, uint64_t data_size,
	       uint64_t live_size, MPI_Comm comm, unsigned flags)
{
	bool any = flags & CKOBJ_ANY_SIZE, flush;
	char dir[600], path[700];
	struct ckpt_geom g = { .data_size = data_size, .live_size = live_size,
			       .extra_max = EXTRA_MAX };
	bool has = false;
	uint64_t newest = 0;
	int rc = 0;

	ckobj_conf();
	flush = conf.flush[0];
	memset(o, 0, sizeof(*o));
	o->comm = MPI_COMM_NULL;
	snprintf(o->name, sizeof(o->name), "%s", name);
	PMPI_Comm_rank(comm, &o->rank);
	PMPI_Comm_size(comm, &o->nranks);
	PMPI_Comm_dup(comm, &o->comm);
	g.rank = (uint32_t)o->rank;
	g.nranks = (uint32_t)o->nranks;
	snprintf(g.job, sizeof(g.job), "%s", conf.job);
	snprintf(g.name, sizeof(g.name), "%s", name);

	if (conf_error) {
		log_err("%s", conf_error);
		rc = -EINVAL;
	} else if (!(rc = job_dir(dir, sizeof(dir)))) {
		snprintf(path, sizeof(path), "%s/%s.r%d.nvckpt", dir, name, o->rank);
		if (conf.mode == CKOBJ_RESTART)
			rc = open_existing(o, path, &g, flags, &has, &newest);
	}

	if (conf.mode == CKOBJ_RESTART && flush) {
		/* Any rank without its NVRAM file: all go back to the second
		 * level's copies (which share a version; the NVRAM ones do not
		 * share one with them). */
		char fpath[1300];
		snprintf(fpath, sizeof(fpath), "%s/%s/%s.r%d.nvckpt", conf.flush, conf.job,
			 name, o->rank);
		long long lost = !rc && !has && access(fpath, R_OK) == 0 ? -1 : 0;
		all_min(&lost, 1, o->comm);
		if (lost) {
			ckpt_close(o->ck);
			o->ck = NULL;
			if (!rc && (rc = flush_restore(fpath, path, &g, any)))
				log_err("restart from the second level: cannot bring %s back to "
					"%s: %s", fpath, path, strerror(-rc));
			if (!rc)
				rc = open_existing(o, path, &g, flags, &has, &newest);
			if (!rc && o->rank == 0)
				fprintf(stderr, "nvckpt: job '%s' window '%s': NVRAM checkpoint "
					"missing on some rank: restarting from %s\n", conf.job,
					name, conf.flush);
		}
	}
	if (conf.mode == CKOBJ_RESTART) {
		uint64_t ta = clock_now_ns();
		/* ok, has a file (min), has a file (max, negated), newest (min),
		 * newest (max, negated), newest checked here (min) */
		long long a[6] = { rc == 0, has, -(long long)has, (long long)newest,
				   -(long long)newest, newest && newest == o->verified };
		all_min(a, 6, o->comm);
		if (!a[0]) {
			rc = rc ? rc : -ECANCELED;
			goto out;
		}
		if (a[1] == 0 && a[2] == -1) {
			if (!has)
				log_err("restart of job '%s': rank %d has no checkpoint of window "
					"'%s' (%s), other ranks have one", conf.job, o->rank,
					name, path);
			rc = -ENOENT;
			goto out;
		}
		uint64_t common = (uint64_t)a[3];
		if (common) {
			int cs = ckpt_find(o->ck, common);
			long long found = cs >= 0 && (common == o->verified || ckpt_verify(o->ck, cs) == 0);
			/* every rank's newest is common and checked: all found it,
			 * no second round needed (the usual restart) */
			if (a[3] != -a[4] || !a[5])
				all_min(&found, 1, o->comm);
			if (!found) {
				if (ckpt_find(o->ck, common) < 0)
					log_err("restart of job '%s': rank %d lacks version %llu of "
						"window '%s', the newest all ranks should have",
						conf.job, o->rank, (unsigned long long)common, name);
				rc = -ENOENT;
				goto out;
			}
			ckpt_drop_newer(o->ck, common);
			o->restored = o->version = o->consistent = common;
			o->agree_ns = clock_now_ns() - ta;
			if (flush && (rc = flush_setup(o, &g)))
				goto out; /* logged; a local failure, as at creation */
			if (o->rank == 0)
				fprintf(stderr, "nvckpt: job '%s' window '%s': restored version %llu "
					"(the newest all %d ranks committed)\n", conf.job, name,
					(unsigned long long)common, o->nranks);
			return MPI_SUCCESS;
		}
		if (o->rank == 0)
			fprintf(stderr, "nvckpt: job '%s' window '%s': no version committed by "
				"all ranks in %s: starting afresh\n", conf.job, name, conf.dir);
		ckpt_close(o->ck);
		o->ck = NULL;
	}
	if (!rc) {
		rc = ckpt_create(&o->ck, path, &g, NULL);
		if (rc)
			log_open_error(path, ckpt_file_size(&g), rc);
	}
	if (!rc && flush)
		rc = flush_setup(o, &g);
	long long ok = rc == 0;
	all_min(&ok, 1, o->comm);
	if (!ok && !rc)
		rc = -ECANCELED; /* another rank failed; it said why */
out:
	if (rc) {
		ckobj_close(o);
		return MPI_ERR_OTHER;
	}
	return MPI_SUCCESS;
}

int ckobj_grow(struct ckobj *o, uint64_t data_size)
{
	struct ckpt_geom g = *ckpt_geom(o->ck);
	char path[700];
	int rc;

	g.data_size = data_size;
	flush_join(o->fl); /* the copier reads the area being replaced */
	snprintf(path, sizeof(path), "%s/%s/%s.r%d.nvckpt", conf.dir, conf.job, o->name,
		 o->rank);
	if ((rc = area_grow(&o->ck, path, data_size))) {
		if (rc == -ENOSPC || rc == -EBUSY)
			log_open_error(path, ckpt_file_size(&g), rc);
		log_err("window '%s': cannot grow its checkpoint %s to %llu bytes: %s",
			o->name, path, (unsigned long long)data_size, strerror(-rc));
	}
	return rc;
}

int ckobj_commit(struct ckobj *o, int slot, uint64_t version)
{
	static uint8_t *pack;
	uint32_t len = 0;
	struct ckobj_clock c;

	ckobj_clock_start(&c);
	if (nprot) {
		if (!pack && !(pack = malloc(EXTRA_MAX)))
			return MPI_ERR_NO_MEM;
		len = protect_pack(pack);
		memcpy(ckpt_extra(o->ck, slot), pack, len);
	}
	int rc = ckpt_commit(o->ck, slot, version, o->consistent, len);
	ckobj_clock_add(o, &c);
	if (rc)
		log_err("window '%s': commit of version %llu failed: %s", o->name,
			(unsigned long long)version, strerror(-rc));
	else
		o->version = version;
	/* the version every rank committed; the copy every rank completed */
	long long v[2] = { (long long)o->version,
			   o->fl ? (long long)atomic_load(&o->fl->done) : 0 };
	uint64_t ta = clock_now_ns();
	all_min(v, 2, o->comm);
	o->agree_all_ns += clock_now_ns() - ta;
	o->consistent = (uint64_t)v[0];
	if (!rc && o->fl && version % conf.flush_every == 0 &&
	    (uint64_t)v[1] == o->fl->version)
		flush_start(o, slot, version);
	return rc ? MPI_ERR_OTHER : MPI_SUCCESS;
}

void ckobj_stats(const struct ckobj *o, uint64_t versions, const char *what)
{
	if (!getenv("NVCACHE_CKPT_STATS"))
		return;
	const struct ckpt_times *t = ckpt_times(o->ck);
	double n = versions ? (double)versions * 1e6 : 1e6;
	fprintf(stderr, "nvckpt: window '%s' rank %d: %llu versions, %llu bytes copied "
		"(%s), %.2f ms per version (copy, CRC, persist): copy %.2f, CRC %.2f, "
		"persist %.2f, records %.2f, second level %.2f; on the CPU %.2f ms "
		"(the rest descheduled); agreement %.2f ms\n", o->name, o->rank,
		(unsigned long long)versions, (unsigned long long)o->bytes_copied, what,
		o->local_ns / n, t->copy_ns / n, t->crc_ns / n, t->persist_ns / n,
		t->record_ns / n, o->flush_wait_ns / n, o->local_cpu_ns / n,
		o->agree_all_ns / n);
}

void ckobj_restore_stats(const struct ckobj *o, uint64_t copy_ns)
{
	if (!getenv("NVCACHE_CKPT_STATS"))
		return;
	fprintf(stderr, "nvckpt: window '%s' rank %d: restored version %llu: open %.1f ms, "
		"check%s %.1f ms, agreement %.1f ms, copy %.1f ms\n", o->name, o->rank,
		(unsigned long long)o->restored, o->open_ns / 1e6,
		o->in_live ? " and copy" : "", o->check_ns / 1e6, o->agree_ns / 1e6,
		copy_ns / 1e6);
}

void ckobj_close(struct ckobj *o)
{
	if (o->fl) {
		flush_join(o->fl);
		ckpt_close(o->fl->dst);
		free(o->fl);
		o->fl = NULL;
	}
	ckpt_close(o->ck);
	o->ck = NULL;
	if (o->comm != MPI_COMM_NULL)
		PMPI_Comm_free(&o->comm);
}
