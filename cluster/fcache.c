/* fcache.c - a node's file cache manager (see fcache.h): the backing
 * directory, the mounts' runs, the messages' dispatch, set-up and counters. */
#include "cluster/fcache_int.h"

#include <sys/file.h>

/* ---- the backing directory ---- */

int fcache_ident(int dirfd, const char *path, int flags, struct fcache_ident *id)
{
	struct {
		struct file_handle fh;
		unsigned char buf[FRAME_FILE_MAX_HANDLE];
	} h;
	struct stat st;
	int mnt;

	h.fh.handle_bytes = FRAME_FILE_MAX_HANDLE;
	if (name_to_handle_at(dirfd, path, &h.fh, &mnt, flags) < 0 ||
	    fstatat(dirfd, path, &st, flags) < 0)
		return -errno;
	if (!h.fh.handle_bytes || h.fh.handle_bytes > FRAME_FILE_MAX_HANDLE)
		return -EOPNOTSUPP;
	memset(id, 0, sizeof(*id));
	id->ino = st.st_ino;
	id->type = (uint32_t)h.fh.handle_type;
	id->len = h.fh.handle_bytes;
	memcpy(id->handle, h.fh.f_handle, id->len);
	return 0;
}

static bool ident_eq(const struct fcache_ident *a, const struct fcache_ident *b)
{
	return a->ino == b->ino && a->type == b->type && a->len == b->len &&
	       !memcmp(a->handle, b->handle, a->len);
}

/* PATH.backing: the backing directory and the cluster-wide settings,
 * for a restart (write-back without a mount; ATTACHes checked). */
static void side_save(struct fcache *fc, const char *path)
{
	char tmp[4300];
	snprintf(tmp, sizeof(tmp), "%s.tmp", fc->side);
	FILE *f = fopen(tmp, "w");
	if (!f || fprintf(f, "%s\nreplicas=%u\nstripe_unit=%" PRIu64 "\n", path,
			  fc->replicas, fc->unit) < 0 ||
	    fflush(f) || fsync(fileno(f)) || fclose(f) || rename(tmp, fc->side)) {
		log_warn("file cache: cannot record the backing directory in %s: "
			 "%s; after a restart write-back waits for a mount",
			 fc->side, strerror(errno));
		if (f)
			fclose(f);
	}
}

static int backing_bind(struct fcache *fc, const char *path, bool save)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	/* the cluster's nodes and mounts share the backing (LOCK_SH); a
	 * one-node nvcachefs holds its own alone (LOCK_EX, fs/main.c): two
	 * caches over one backing overwrite each other's write-backs */
	if (flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK) {
		close(fd);
		return -EBUSY;
	}
	int rc = fcache_ident(fd, "", AT_EMPTY_PATH, &fc->bid);
	if (rc) {
		close(fd);
		return rc;
	}
	fc->backing_fd = fd;
	snprintf(fc->backing, sizeof(fc->backing), "%s", path);
	if (save)
		side_save(fc, path);
	log_info("file cache: backing directory %s", path);
	return 0;
}

/* "auto" or the unit in K or M, as the mount option says it */
static const char *unit_name(uint64_t unit, char *buf, size_t len)
{
	if (!unit)
		snprintf(buf, len, "auto");
	else if (!(unit % (1u << 20)))
		snprintf(buf, len, "%" PRIu64 "M", unit >> 20);
	else
		snprintf(buf, len, "%" PRIu64 "K", unit >> 10);
	return buf;
}

static int serve_attach(struct fcache *fc, const struct frame_fop *f,
			const uint8_t *payload, struct frame_hdr *r)
{
	char path[FRAME_FILE_MAX_PATH + 1];
	struct fcache_ident want = { .ino = f->obj, .type = f->handle_type,
				     .len = f->base_len }, have;
	int rc = 0;

	if (f->digest != fc->digest) {
		snprintf(r->text, sizeof(r->text), "node %u reads another cluster "
			 "file (the node lists differ)", fc->self);
		return -ESTALE;
	}
	/* payload: the path, then the directory's handle */
	memcpy(path, payload, f->len);
	path[f->len] = 0;
	if (strlen(path) != f->len || path[0] != '/' ||
	    f->base_len > FRAME_FILE_MAX_HANDLE) {
		snprintf(r->text, sizeof(r->text), "backing path is not an absolute path");
		return -EPROTO;
	}
	memcpy(want.handle, payload + f->len, f->base_len);
	uint32_t replicas = f->flags & FRAME_FILE_REPLICAS2 ? 2 : 1;
	char had_u[32], want_u[32];
	pthread_mutex_lock(&fc->lk);
	if (fc->replicas && fc->replicas != replicas) {
		/* mixed settings would leave some blocks in one NVRAM only */
		snprintf(r->text, sizeof(r->text), "node %u serves replicas=%u; "
			 "this mount asks replicas=%u", fc->self, fc->replicas,
			 replicas);
		rc = -ESTALE;
	} else if (fc->unit_set && fc->unit != f->blk) {
		/* mounts that cut files otherwise would send one block to
		 * two owners */
		snprintf(r->text, sizeof(r->text), "node %u serves stripe_unit=%s; "
			 "this mount asks stripe_unit=%s", fc->self,
			 unit_name(fc->unit, had_u, sizeof(had_u)),
			 unit_name(f->blk, want_u, sizeof(want_u)));
		rc = -ESTALE;
	} else if (fc->backing_fd < 0) {
		struct stat st;
		if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode) ||
		    fcache_ident(AT_FDCWD, path, 0, &have) < 0 || !ident_eq(&have, &want)) {
			snprintf(r->text, sizeof(r->text), "node %u does not see the "
				 "mount's backing directory %.120s", fc->self, path);
			rc = -ESTALE;
		} else {
			uint32_t had = fc->replicas;
			fc->replicas = replicas;   /* recorded beside the path */
			fc->unit = f->blk;
			rc = backing_bind(fc, path, true);
			fc->unit_set = !rc;
			if (rc) {
				fc->replicas = had;
				snprintf(r->text, sizeof(r->text), "node %u: %.120s: %s",
					 fc->self, path, rc == -EBUSY ?
					 "in use by a one-node nvcachefs (unmount it first)" :
					 strerror(-rc));
			}
			fc->wb_all = true;  /* what a previous run left dirty */
			pthread_cond_signal(&fc->cv);
		}
	} else if (!ident_eq(&fc->bid, &want)) {
		snprintf(r->text, sizeof(r->text), "node %u serves backing %.70s "
			 "(its NVRAM file's), not %.70s", fc->self, fc->backing, path);
		rc = -ESTALE;
	} else if (!fc->unit_set) {
		/* a side file without the stripe unit (an older nvcached
		 * wrote it): this ATTACH fixes it */
		fc->unit = f->blk;
		fc->unit_set = true;
		side_save(fc, path);
	}
	pthread_mutex_unlock(&fc->lk);
	return rc;
}

void fcache_set_peers(struct fcache *fc, uint32_t n_nodes, fcache_call_fn fn,
		      void *arg)
{
	pthread_mutex_lock(&fc->lk);
	fc->n_nodes = n_nodes;
	fc->call = fn;
	fc->call_arg = arg;
	pthread_mutex_unlock(&fc->lk);
}

bool fcache_mount_conn(struct fcache *fc, uint64_t inst, bool up)
{
	bool first = false;

	pthread_mutex_lock(&fc->lk);
	struct minst **p = &fc->mounts;
	while (*p && (*p)->inst != inst)
		p = &(*p)->next;
	if (!*p && up && (*p = calloc(1, sizeof(**p)))) {
		(*p)->inst = inst;
		first = true;
	}
	if (*p && up) {
		(*p)->conns++;
		(*p)->gone_ns = 0;
	} else if (*p && (*p)->conns && !--(*p)->conns) {
		(*p)->gone_ns = clock_now_ns();
	}
	pthread_mutex_unlock(&fc->lk);
	return first;
}

/* Every other node asked, node to node, to drop the object (doomed) or
 * write it back now. why says in the log how it came to be asked for a
 * node not told. A node in *unreached (bit per node index) is not asked:
 * one that does not answer is added, so that a batch of these waits for
 * a down node once, not once a file. */
static void tell_others(struct fcache *fc, uint64_t gid, bool doomed, const char *why,
			uint64_t *unreached)
{
	static struct log_limit tell_log;
	uint32_t type = doomed ? FT_FILE_DROP : FT_FILE_WRITEBACK;
	struct frame_fop f = { .obj = gid };   /* size 0: no delay */
	char note[96];

	for (uint32_t i = 0; i < fc->n_nodes; i++) {
		if (i == fc->self_idx || (i < 64 && (*unreached >> i) & 1))
			continue;
		int rc = fc->call ? fc->call(fc->call_arg, i, type, &f, NULL) : -ENOTCONN;
		if (rc && i < 64)
			*unreached |= 1ull << i;
		if (rc && log_limit(&tell_log, 30, note, sizeof(note)))
			log_warn("file cache: object %016" PRIx64 ", %s: node index %u "
				 "not told to %s: %s; it does at its next write-back "
				 "pass or close%s", gid, why, i,
				 doomed ? "drop it" : "write it back", strerror(-rc), note);
	}
}

void linger_drop(struct fcache *fc, uint64_t gid, uint64_t *unreached)
{
	/* here first, at once with the look: an OPEN after it finds no
	 * record (answered STALE), one before it holds the file */
	pthread_mutex_lock(&fc->lk);
	struct fobj *o = fobj_find(fc, gid);
	bool go = o && o->doomed && !o->opens && o->linger_ns &&
		  o->linger_ns <= clock_now_ns();
	if (go) {
		bstore_obj_delete(fc->bs, o->lid);
		fobj_forget(fc, gid);
		atomic_fetch_add(&fc->dropped, 1);
	}
	pthread_mutex_unlock(&fc->lk);
	if (!go)
		return;
	marks_forget(fc, gid);
	tell_others(fc, gid, true, "unlinked", unreached);
}

/* The write-back thread: the runs without a connection for
 * mount_gone_ns lose their opens (fcache_mount_conn). A file then open
 * nowhere gets what its last close would have had done (fdcl_release):
 * written back by every owner now, or, unlinked while open, its linger
 * ended, so that this thread's next scan drops it everywhere. */
void mounts_check(struct fcache *fc, uint64_t now)
{
	uint64_t *left = NULL;
	size_t nleft = 0, cap = 0, ndoomed = 0;
	uint64_t opens = 0, runs = 0;

	pthread_mutex_lock(&fc->lk);
	for (struct minst **p = &fc->mounts; *p;) {
		struct minst *m = *p;
		if (m->conns || !m->gone_ns || now - m->gone_ns < fc->mount_gone_ns) {
			p = &m->next;
			continue;
		}
		for (size_t b = 0; b < NBUCKETS; b++)
			for (struct fobj *o = fc->tab[b]; o; o = o->next) {
				struct hold **hp, *h = hold_find(o, m->inst, &hp);
				if (!h)
					continue;
				opens += h->n;
				o->opens -= h->n < o->opens ? h->n : o->opens;
				*hp = h->next;
				free(h);
				/* whatever it wrote, its CLOSE will not say */
				o->wrote = true;
				if (o->opens)
					continue;
				if (o->doomed) {
					o->linger_ns = 1;
					ndoomed++;
					continue;
				}
				if (nleft == cap) {
					size_t nc = cap ? 2 * cap : 16;
					uint64_t *x = realloc(left, nc * sizeof(*x));
					if (!x)
						continue;   /* its owners write back under pressure */
					left = x;
					cap = nc;
				}
				left[nleft++] = o->gid;
			}
		*p = m->next;
		minst_free(m);
		runs++;
	}
	pthread_mutex_unlock(&fc->lk);
	if (!runs)
		return;
	atomic_fetch_add(&fc->mounts_gone, runs);
	atomic_fetch_add(&fc->opens_released, opens);
	/* a mount unmounted cleanly closed every file first: nothing to
	 * warn about; one that held files open died, or lost its network */
	if (opens)
		log_warn("file cache: %" PRIu64 " mount(s) gone (no connection "
			 "for %" PRIu64 " ms): their %" PRIu64 " open handle(s) "
			 "released; %zu file(s) open nowhere now, written back "
			 "(or dropped, unlinked) by every owner", runs,
			 (uint64_t)(fc->mount_gone_ns / 1000000ull), opens,
			 nleft + ndoomed);
	else
		log_info("file cache: %" PRIu64 " mount(s) gone (no connection "
			 "for %" PRIu64 " ms), no file open there", runs,
			 (uint64_t)(fc->mount_gone_ns / 1000000ull));
	uint64_t unreached = 0;
	for (size_t k = 0; k < nleft; k++) {
		struct frame_fop f = { .obj = left[k] };   /* no delay */
		tell_others(fc, left[k], false, "left open by a gone mount", &unreached);
		serve_writeback(fc, &f);
	}
	free(left);
}

/* ---- the messages ---- */

/* stripe_unit=auto: the unit the home fixed for a file goes on its
 * backing file too (FCACHE_UNIT_XATTR), where a mount reads it while the
 * home is down. Whether that is done: a backing without user xattrs
 * (logged once) counts as done, as nothing would change; another
 * failure is logged (limited) and tried again at the file's next open. */
bool unit_label(struct fcache *fc, int bfd, const struct bstore_obj *rec)
{
	static atomic_bool warned;
	static struct log_limit fail_log;
	struct rec_handle h;
	char v[24], note[96];

	rec_handle(rec, &h);
	int fd = open_by_handle_at(bfd, &h.fh, O_RDONLY | O_NOFOLLOW | O_CLOEXEC |
				   O_NONBLOCK);
	int n = snprintf(v, sizeof(v), "%" PRIu64, (uint64_t)rec->uflags * fc->bsize);
	int e = fd < 0 ? errno : fsetxattr(fd, FCACHE_UNIT_XATTR, v, (size_t)n, 0) < 0 ?
		errno : 0;
	if (fd >= 0)
		close(fd);
	if (e == ENOTSUP) {
		if (!atomic_exchange(&warned, true))
			log_warn("file cache: the backing file system takes no %s: "
				 "with stripe_unit=auto, a file whose home is down opens "
				 "only on mounts that knew its unit", FCACHE_UNIT_XATTR);
		return true;
	}
	if (e && log_limit(&fail_log, 10, note, sizeof(note)))
		log_warn("file cache: the stripe unit of a file (%s) not put on its "
			 "backing file: %s; tried again at its next open%s",
			 rec->path, strerror(e), note);
	return !e;
}

/* The unit the file's home wrote on the backing file (FCACHE_UNIT_XATTR),
 * in blocks; 0: none there (or not a valid one). pfd: the file, any
 * mode (O_PATH too). */
uint64_t unit_on_backing(struct fcache *fc, int pfd)
{
	char link[40], v[24];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", pfd);
	ssize_t n = getxattr(link, FCACHE_UNIT_XATTR, v, sizeof(v) - 1);
	if (n <= 0)
		return 0;
	v[n] = 0;
	char *end;
	unsigned long long u = strtoull(v, &end, 10);
	if (*end || !u || u % fc->bsize || u / fc->bsize > FCACHE_UNIT_MAX)
		return 0;
	return u / fc->bsize;
}

int fcache_serve(struct fcache *fc, const struct frame_hdr *q,
		 const uint8_t *payload, struct frame_hdr *r, uint8_t *buf,
		 const void **out)
{
	const struct frame_fop *f = &q->fop;

	*out = NULL;
	r->fop = *f;
	r->fop.base_len = 0;
	r->fop.len = 0;
	if (q->type != FT_FILE_ATTACH && q->type != FT_FILE_MARK &&
	    q->type != FT_FILE_WATCH && f->obj == 0)
		return -EPROTO;
	switch (q->type) {
	case FT_FILE_ATTACH: return serve_attach(fc, f, payload, r);
	case FT_FILE_OPEN: return serve_open(fc, f, payload, r);
	case FT_FILE_CLOSE: return serve_close(fc, f, r);
	case FT_FILE_GETATTR:
	case FT_FILE_SETSIZE: return serve_size(fc, q->type, f, r);
	case FT_FILE_UNLINK: return serve_unlink(fc, f, r);
	case FT_FILE_READ: return serve_read(fc, q, r, buf, out);
	case FT_FILE_WRITE: return serve_write(fc, f, payload, r);
	case FT_FILE_TRUNC: return serve_trunc(fc, f);
	case FT_FILE_WRITEBACK: return serve_writeback(fc, f);
	case FT_FILE_DROP: drop_obj(fc, f->obj); return 0;
	case FT_FILE_MARK: return serve_mark(fc, f, payload, r);
	case FT_FILE_SHADOW: return serve_shadow(fc, f, r);
	case FT_FILE_INVAL: return serve_inval(fc, f);
	case FT_FILE_WATCH: return serve_watch(fc, f, r, buf, out);
	default: return -EOPNOTSUPP;
	}
}

/* ---- set-up ---- */

static int load_objects(struct fcache *fc)
{
	uint64_t now = clock_wall_ns();
	size_t n = bstore_obj_list(fc->bs, NULL, 0);
	uint64_t *ids = n ? calloc(n, sizeof(*ids)) : NULL;

	if (n && !ids)
		return -ENOMEM;
	n = bstore_obj_list(fc->bs, ids, n);
	for (size_t k = 0; k < n; k++) {
		struct bstore_obj rec;
		uint64_t gid;
		uint32_t owner;
		if (bstore_obj_get(fc->bs, ids[k], &rec) < 0)
			continue;
		if (rid_get(rec.path, &owner, &gid)) {
			/* another node's copies: never written back on our
			 * own account, so not in the write-back's table */
			if (gid && !*rslot_of(fc, owner, gid)) {
				if (!rinsert(fc, owner, gid, ids[k])) {
					free(ids);
					return -ENOMEM;
				}
				continue;
			}
		}
		if (!gid_get(rec.path, &gid) || !gid || fobj_find(fc, gid)) {
			log_warn("file cache: object %" PRIu64 " has no valid id; dropped",
				 ids[k]);
			bstore_obj_delete(fc->bs, ids[k]);
			continue;
		}
		struct fobj *o = fobj_insert(fc, gid, ids[k]);
		if (!o) {
			free(ids);
			return -ENOMEM;
		}
		/* the home's, if it is (record_idle asks); when it was set
		 * is not kept: now, so that no MTIME_PAY of a write from
		 * before the restart overrides it (a time set, say) */
		o->mtime_ns = rec.utime;
		o->mtime_at = now;
	}
	if (n)
		log_info("file cache: %zu files found in NVRAM", n);
	free(ids);
	return 0;
}

/* A time in ms from the environment, 1..86400000 (else def_ms, said),
 * in ns. */
static uint64_t env_ms(const char *name, uint64_t def_ms)
{
	const char *v = getenv(name);
	if (v && *v) {
		char *end;
		unsigned long long ms = strtoull(v, &end, 10);
		if (!*end && ms && ms <= 86400000ull)
			return ms * 1000000ull;
		log_warn("file cache: %s=%s: not 1..86400000 ms; %" PRIu64 " ms",
			 name, v, def_ms);
	}
	return def_ms * 1000000ull;
}

int fcache_open(struct fcache **out, const struct fcache_opts *o)
{
	struct fcache *fc = calloc(1, sizeof(*fc));
	struct bstore_open_opts bo = { .create = true, .drop_clean = true,
				       .tag = "nvcached file cache" };
	int rc;

	if (!fc)
		return -ENOMEM;
	fc->bsize = FCACHE_BLOCK;
	fc->digest = o->digest;
	fc->self = o->self;
	fc->backing_fd = -1;
	snprintf(fc->side, sizeof(fc->side), "%s.backing", o->path);
	bstore_geom_for_size(o->size, FCACHE_BLOCK, &bo.geom);
	rc = bstore_open(&fc->bs, o->path, &bo);
	if (rc) {
		log_err("file cache: NVRAM file %s unusable: %s", o->path,
			rc == -EMEDIUMTYPE ? "it holds something else (see above)" :
			strerror(-rc));
		free(fc);
		return rc;
	}
	pthread_mutex_init(&fc->lk, NULL);
	pthread_mutex_init(&fc->wb_mx, NULL);
	pthread_mutex_init(&fc->rep_mx, NULL);
	clock_cond_init(&fc->cv);
	clock_cond_init(&fc->inval_cv);
	fc->orphan_ns = env_ms("NVCACHE_REPLICA_ORPHAN_MS", FCACHE_ORPHAN_MS);
	fc->mount_gone_ns = env_ms("NVCACHE_MOUNT_GONE_MS", FCACHE_MOUNT_GONE_MS);
	rc = fmark_sent_new(&fc->sent);
	if (!rc)
		rc = fmark_tab_new(&fc->marks);
	if (!rc)
		rc = load_objects(fc);
	FILE *f = rc ? NULL : fopen(fc->side, "r");
	if (f) {
		char path[4200];
		if (fgets(path, sizeof(path), f)) {
			path[strcspn(path, "\n")] = 0;
			unsigned rp = 1;   /* a file from before replicas: 1 */
			char line[64];
			if (fgets(line, sizeof(line), f) &&
			    sscanf(line, "replicas=%u", &rp) == 1 && rp != 2)
				rp = 1;
			fc->replicas = rp;
			/* a file from before it: the next ATTACH sets it */
			uint64_t u;
			if (fgets(line, sizeof(line), f) &&
			    sscanf(line, "stripe_unit=%" SCNu64, &u) == 1) {
				fc->unit = u;
				fc->unit_set = true;
			}
			int e = backing_bind(fc, path, false);
			if (e)
				log_warn("file cache: backing directory %s: %s; write-back "
					 "waits for a mount", path, e == -EBUSY ?
					 "in use by a one-node nvcachefs" : strerror(-e));
			fc->wb_all = true;
			/* mounts attached before may hold files open */
			fc->grace_end_ns = clock_now_ns() +
					   FCACHE_GRACE_MS * 1000000ull;
		}
		fclose(f);
	}
	if (!rc)
		rc = -pthread_create(&fc->thread, NULL, wb_main, fc);
	if (rc) {
		fmark_sent_free(fc->sent);
		fmark_tab_free(fc->marks);
		bstore_close(fc->bs);
		free(fc);
		return rc;
	}
	log_info("file cache: %s, %" PRIu64 " MiB in %u KiB blocks", o->path,
		 bo.geom.nblocks * FCACHE_BLOCK >> 20, FCACHE_BLOCK >> 10);
	*out = fc;
	return 0;
}

void fcache_stop(struct fcache *fc)
{
	if (!fc)
		return;
	/* set under lk: the thread looks at it under lk before it waits */
	pthread_mutex_lock(&fc->lk);
	bool was = atomic_exchange(&fc->stopping, true);
	pthread_cond_signal(&fc->cv);
	pthread_cond_broadcast(&fc->inval_cv);
	pthread_mutex_unlock(&fc->lk);
	if (!was)
		pthread_join(fc->thread, NULL);
}

void fcache_close(struct fcache *fc)
{
	if (!fc)
		return;
	fcache_stop(fc);
	for (size_t b = 0; b < NBUCKETS; b++)
		while (fc->tab[b]) {
			struct fobj *o = fc->tab[b];
			fc->tab[b] = o->next;
			fobj_free(o);
		}
	while (fc->mounts) {
		struct minst *m = fc->mounts;
		fc->mounts = m->next;
		minst_free(m);
	}
	for (size_t b = 0; b < NBUCKETS; b++)
		while (fc->rtab[b]) {
			struct robj *o = fc->rtab[b];
			fc->rtab[b] = o->next;
			free(o);
		}
	if (fc->backing_fd >= 0)
		close(fc->backing_fd);
	fmark_sent_free(fc->sent);
	fmark_tab_free(fc->marks);
	bstore_close(fc->bs);
	free(fc);
}

uint64_t fcache_grace_end(const struct fcache *fc)
{
	return fc->grace_end_ns;
}

/* a writer held for room in the last 10 s: the cache is full now */
static int full_recent(struct fcache *fc)
{
	uint64_t at = atomic_load(&fc->full_at);
	return at && clock_now_ns() - at < 10000000000ull;
}

size_t fcache_stats(struct fcache *fc, char *out, size_t len)
{
	/* seconds writes have been kept here alone (the shadow down), if so:
	 * rounded up, so that it is not 0 then */
	uint64_t alone = atomic_load(&fc->degraded_ns);
	uint64_t alone_s = alone ? (clock_now_ns() - alone) / 1000000000ull + 1 : 0;
	struct bstore_stats st;
	uint64_t held = 0;

	bstore_stats_get(fc->bs, &st);
	pthread_mutex_lock(&fc->rep_mx);
	for (size_t b = 0; b < NBUCKETS; b++)
		for (struct robj *o = fc->rtab[b]; o; o = o->next) {
			uint64_t nb = 0, nd = 0;
			if (bstore_obj_counts(fc->bs, o->lid, &nb, &nd) == 0)
				held += nb;
		}
	pthread_mutex_unlock(&fc->rep_mx);
	int n = snprintf(out, len,
			 "fcache_used_bytes: %" PRIu64 "\n"
			 "fcache_dirty_bytes: %" PRIu64 "\n"
			 "fcache_total_bytes: %" PRIu64 "\n"
			 "fcache_files: %" PRIu64 "\n"
			 "fcache_written_back_bytes: %" PRIu64 "\n"
			 "fcache_served_bytes: %" PRIu64 "\n"
			 "fcache_writes: %" PRIu64 "\n"
			 "fcache_writes_past_backing_end: %" PRIu64 "\n"
			 "fcache_dropped_files: %" PRIu64 "\n"
			 "fcache_records_total: %" PRIu64 "\n"
			 "fcache_records_reclaimed: %" PRIu64 "\n"
			 "fcache_mounts_gone: %" PRIu64 "\n"
			 "fcache_opens_released: %" PRIu64 "\n"
			 "fcache_invals: %" PRIu64 "\n"
			 "fcache_inval_drops: %" PRIu64 "\n"
			 "fcache_inval_timeouts: %" PRIu64 "\n"
			 "fcache_watch_replies: %" PRIu64 "\n"
			 "fcache_bounds_ok: %" PRIu64 "\n"
			 "fcache_bounds_refused: %" PRIu64 "\n"
			 "fcache_epochs_asked: %" PRIu64 "\n"
			 "fcache_writeback_errors: %" PRIu64 "\n"
			 "fcache_full_waits: %" PRIu64 "\n"
			 "fcache_writeback_failing: %d\n"
			 "fcache_full_recent: %d\n"
			 "fcache_marks_told: %zu\n"
			 "fcache_marks_held: %zu\n"
			 "fcache_mark_errors: %" PRIu64 "\n"
			 "fcache_shadow_synced: %d\n"
			 "fcache_replicas: %u\n"
			 "fcache_replicas_sent: %" PRIu64 "\n"
			 "fcache_replica_bytes_sent: %" PRIu64 "\n"
			 "fcache_replica_degraded_writes: %" PRIu64 "\n"
			 "fcache_writeback_held: %" PRIu64 "\n"
			 "fcache_writeback_unlinked: %" PRIu64 "\n"
			 "fcache_opens_stale: %" PRIu64 "\n"
			 "fcache_unlinks_lingered: %" PRIu64 "\n"
			 "fcache_alone_s: %" PRIu64 "\n"
			 "fcache_replica_errors: %" PRIu64 "\n"
			 "fcache_replicas_held: %" PRIu64 "\n"
			 "fcache_replicas_taken: %" PRIu64 "\n"
			 "fcache_replicas_written_back: %" PRIu64 "\n",
			 st.blocks_used * st.block_size, st.blocks_dirty * st.block_size,
			 st.blocks_total * st.block_size, st.objs_used,
			 (uint64_t)atomic_load(&fc->written_back),
			 (uint64_t)atomic_load(&fc->served_bytes),
			 (uint64_t)atomic_load(&fc->writes),
			 (uint64_t)atomic_load(&fc->past_end),
			 (uint64_t)atomic_load(&fc->dropped),
			 st.objs_total, (uint64_t)atomic_load(&fc->reclaimed),
			 (uint64_t)atomic_load(&fc->mounts_gone),
			 (uint64_t)atomic_load(&fc->opens_released),
			 (uint64_t)atomic_load(&fc->invals),
			 (uint64_t)atomic_load(&fc->inval_drops),
			 (uint64_t)atomic_load(&fc->inval_timeouts),
			 (uint64_t)atomic_load(&fc->watches),
			 (uint64_t)atomic_load(&fc->bounds_ok),
			 (uint64_t)atomic_load(&fc->bounds_refused),
			 (uint64_t)atomic_load(&fc->epochs_asked),
			 (uint64_t)atomic_load(&fc->wb_errors),
			 (uint64_t)atomic_load(&fc->full_waits), wb_failing(fc),
			 full_recent(fc),
			 fmark_sent_count(fc->sent), fmark_tab_count(fc->marks),
			 (uint64_t)atomic_load(&fc->mark_errors),
			 fc->mark ? (int)atomic_load(&fc->shadow_ok) : -1,
			 replicas_of(fc),
			 (uint64_t)atomic_load(&fc->replicas_sent),
			 (uint64_t)atomic_load(&fc->replica_bytes),
			 (uint64_t)atomic_load(&fc->degraded_writes),
			 (uint64_t)atomic_load(&fc->wb_held),
			 (uint64_t)atomic_load(&fc->wb_unlinked),
			 (uint64_t)atomic_load(&fc->opens_stale),
			 (uint64_t)atomic_load(&fc->lingered), alone_s,
			 (uint64_t)atomic_load(&fc->replica_errors), held,
			 (uint64_t)atomic_load(&fc->replicas_taken),
			 (uint64_t)atomic_load(&fc->replicas_written));
	return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len ? len - 1 : 0;
}
