/* fcache_shadow.c - an owner's side of its shadow: the dirty marks and
 * (replicas=2) copies it sends, the resync that makes the shadow current. */
#include "cluster/fcache_int.h"

/* One MARK to the shadow: 0 and *rflags, or -errno (logged, limited;
 * the shadow is then taken as not holding our whole list). */
static int mark_send(struct fcache *fc, uint32_t flags, uint64_t obj,
		     uint64_t blk, uint64_t seq, const uint64_t *list,
		     uint32_t n, uint32_t *rflags)
{
	struct frame_fop f = { .obj = obj, .blk = blk, .size = seq,
			       .off = fc->self_idx, .flags = flags,
			       .len = n * 8 };
	uint32_t rf = 0;
	int rc = fc->mark(fc->mark_arg, &f, list, f.len, &rf);
	if (rc) {
		char note[96];
		atomic_store(&fc->shadow_ok, false);
		atomic_store(&fc->shadow_failed_ns, clock_now_ns());
		atomic_fetch_add(&fc->mark_errors, 1);
		/* with no dirty block here (a cluster starting, its nodes
		 * one by one) nothing is at stake yet */
		struct bstore_stats st;
		bstore_stats_get(fc->bs, &st);
		if (!st.blocks_dirty)
			log_debug("file cache: the next node (this node's shadow) "
				  "did not take our dirty marks: %s (none dirty here)",
				  strerror(-rc));
		else if (log_limit(&fc->mark_log, 30, note, sizeof(note)))
			log_warn("file cache: the next node (this node's shadow) "
				 "did not take our dirty marks: %s; while it cannot, "
				 "a read of our blocks while we are down fails%s",
				 strerror(-rc), note);
	}
	if (rflags)
		*rflags = rf;
	return rc;
}

/* Under the block's stripe lock, before a write: the shadow learns the
 * block is dirty, unless it knows already (or is out of reach: counted,
 * and the next resync covers it). The next MARK_AHEAD blocks go in the
 * same SET, those whose stripe lock is free now (held while the SET is
 * on its way: a write-back cannot take them out before they are in), so
 * a stream of writes costs one round trip per MARK_AHEAD blocks; a
 * block told and never written is forgotten at the next write-back.
 * With size (a write at the file's home that may extend the file), the
 * size's mark (FMARK_SIZE_BLK) goes in the same SET on the same terms:
 * the SETSIZE that follows the write then needs no round trip of its
 * own (a new small file's write costs one, not two); a size told and
 * not changed is cleared at the next write-back, as a block is. Alone,
 * the size's mark goes with no blocks ahead. */
#define MARK_AHEAD 16
void mark_dirty(struct fcache *fc, uint64_t gid, uint64_t blk, bool size)
{
	uint64_t list[MARK_AHEAD + 1];
	uint32_t n = 0;
	uint64_t ahead = blk == FMARK_SIZE_BLK ? 1 : MARK_AHEAD;

	if (fmark_sent_has(fc->sent, gid, blk))
		return;
	list[n++] = blk;
	for (uint64_t b = blk + 1; b < blk + ahead && b > blk; b++)
		if (fmark_sent_trylock(fc->sent, gid, b, blk)) {
			if (fmark_sent_has(fc->sent, gid, b))
				fmark_sent_unlock(fc->sent, gid, b);
			else
				list[n++] = b;
		}
	if (size && blk != FMARK_SIZE_BLK && blk + ahead <= FMARK_SIZE_BLK &&
	    fmark_sent_trylock(fc->sent, gid, FMARK_SIZE_BLK, blk)) {
		if (fmark_sent_has(fc->sent, gid, FMARK_SIZE_BLK))
			fmark_sent_unlock(fc->sent, gid, FMARK_SIZE_BLK);
		else
			list[n++] = FMARK_SIZE_BLK;
	}
	uint64_t failed = atomic_load(&fc->shadow_failed_ns);
	if ((!atomic_load(&fc->shadow_ok) && failed &&
	     clock_now_ns() - failed < SHADOW_RETRY_NS) ||
	    mark_send(fc, FRAME_MARK_SET, gid, 0, fmark_next_seq(fc->sent),
		      list, n, NULL))
		atomic_fetch_add(&fc->skipped, 1);
	for (uint32_t k = 0; k < n; k++) {
		if (fmark_sent_add(fc->sent, gid, list[k]) < 0)
			atomic_store(&fc->shadow_ok, false);
		if (k)
			fmark_sent_unlock(fc->sent, gid, list[k]);
	}
}

/* The blocks the shadow may forget: written back and cleaned, each if
 * not marked again after seq; in batches. */
void mark_clean(struct fcache *fc, uint64_t gid, const uint64_t *idx,
		size_t n, uint64_t seq)
{
	for (size_t k = 0; k < n; k += FRAME_MARK_MAX_BLOCKS) {
		size_t m = n - k < FRAME_MARK_MAX_BLOCKS ? n - k : FRAME_MARK_MAX_BLOCKS;
		mark_send(fc, FRAME_MARK_CLEAR, gid, 0, seq, idx + k, (uint32_t)m, NULL);
	}
}

/* The shadow did not take a copy (what: of which datum of object gid):
 * logged, limited; the shadow is taken as not holding our whole list,
 * so the write-back thread's resync sends it all. Returns -EIO, for the
 * write that needed the copy to fail. */
static int replica_failed(struct fcache *fc, int rc, const char *what, uint64_t gid)
{
	char note[96];

	atomic_fetch_add(&fc->uncopied, 1);
	atomic_store(&fc->shadow_ok, false);
	atomic_store(&fc->shadow_failed_ns, clock_now_ns());
	atomic_fetch_add(&fc->replica_errors, 1);
	if (log_limit(&fc->mark_log, 30, note, sizeof(note)))
		log_warn("file cache: the next node (this node's shadow) did not "
			 "take %s of object %016" PRIx64 ": %s; the write fails "
			 "(replicas=2)%s", what, gid, strerror(-rc), note);
	return -EIO;
}

/* replicas=2: the shadow is dead to the heartbeats: the datum (what, of
 * object gid) is kept in this node's NVRAM alone (counted, logged,
 * limited); the shadow's resync sends it when the shadow is back. 0. */
static int replica_degraded(struct fcache *fc, const char *what, uint64_t gid)
{
	char note[96];
	uint_fast64_t none = 0;

	atomic_fetch_add(&fc->uncopied, 1);
	atomic_store(&fc->shadow_ok, false);
	atomic_compare_exchange_strong(&fc->degraded_ns, &none, clock_now_ns());
	atomic_fetch_add(&fc->degraded_writes, 1);
	if (log_limit(&fc->degraded_log, 30, note, sizeof(note)))
		log_warn("file cache: the next node (this node's shadow) is down: "
			 "%s of object %016" PRIx64 " is kept in this node's NVRAM "
			 "alone until it is back (replicas=2, degraded)%s",
			 what, gid, note);
	return 0;
}

/* A copy for the shadow: send(fc, ctx) until it takes it. A send that
 * fails while the shadow is not declared dead is tried again every
 * 100 ms until the heartbeats' verdict (their timeout and 1 s): the
 * shadow back, the copy is there; declared dead, the datum is kept here
 * alone (replica_degraded). Never told the timeout (no heartbeats),
 * or past it: -EIO (replica_failed). The shadow's cache full: -ENOSPC. */
static int replica_put_to_shadow(struct fcache *fc, int (*send)(struct fcache *, void *),
				 void *ctx, const char *what, uint64_t gid)
{
	uint64_t until = 0;

	for (;;) {
		if (atomic_load(&fc->shadow_down_ns))
			return replica_degraded(fc, what, gid);
		int rc = send(fc, ctx);
		if (!rc)
			return 0;
		/* it may have missed a write: ranges no more, a resync */
		atomic_fetch_add(&fc->uncopied, 1);
		atomic_store(&fc->shadow_ok, false);
		/* the shadow's cache full for its hold: the write waits for
		 * room as for its own block (serve_write), and its writer
		 * asks again (FULL) */
		if (rc == -ENOSPC)
			return rc;
		uint64_t now = clock_now_ns(), t = atomic_load(&fc->shadow_timeout_ms);
		if (!until)
			until = now + (t + 1000) * 1000000ull;
		if (!t || now >= until)
			return replica_failed(fc, rc, what, gid);
		usleep(100000);
	}
}

struct block_copy {
	uint64_t lid, gid, blk;
	uint32_t at, n;
};

/* One send of a block's copy (replica_send): 0 (also for a block no
 * longer dirty) or -errno. */
static int block_copy_send(struct fcache *fc, void *ctx)
{
	struct block_copy *c = ctx;
	struct bstore_obj rec;
	struct bstore_binfo bi;
	uint8_t *buf = malloc(BSTORE_HANDLE_MAX + fc->bsize);
	uint32_t rf = 0, sent = 0, n = atomic_load(&fc->shadow_ok) ? c->n : 0;
	int rc = buf ? bstore_obj_get(fc->bs, c->lid, &rec) : -ENOMEM;

	while (!rc) {
		uint8_t *data = buf + rec.handle_len;
		rc = n ? bstore_block_read(fc->bs, c->lid, c->blk, c->at, data, n, &bi) :
			 bstore_block_read(fc->bs, c->lid, c->blk, 0, data, fc->bsize, &bi);
		if (rc == -ENOENT || (!rc && !bi.dirty)) {
			rc = 0;   /* dropped or written back meanwhile */
			break;
		}
		if (rc)
			break;
		if (n && bi.valid < c->at + n) {
			n = 0;   /* cut since the write (a truncate): the whole */
			continue;
		}
		struct frame_fop f = { .obj = c->gid, .blk = c->blk, .off = fc->self_idx,
				       .len = n ? n : bi.valid, .size = n ? c->at : 0,
				       .gen = bi.valid, .base_len = rec.handle_len,
				       .handle_type = rec.handle_type,
				       .flags = FRAME_MARK_REPLICA |
						(n ? FRAME_MARK_RANGE : 0) };
		memcpy(buf, rec.handle, rec.handle_len);
		rc = fc->mark(fc->mark_arg, &f, buf, rec.handle_len + f.len, &rf);
		sent += f.len;
		if (rc || !n || !(rf & FRAME_MARK_WHOLE)) {
			if (!rc)
				atomic_fetch_add(&fc->replicas_sent, 1);
			break;
		}
		n = 0;   /* the shadow holds no copy the range fits */
	}
	free(buf);
	atomic_fetch_add(&fc->replica_bytes, sent);
	return rc;
}

/* replicas=2, under the block's stripe lock, after its store write: the
 * shadow gets the block's valid bytes (and the file's handle, to write
 * them back itself if this node is lost), and keeps them until a CLEAR
 * of the block. The stripe lock held through the send makes the
 * shadow's copy follow the block's writes in their order, so a write of
 * n > 0 bytes at `at` into a block that was dirty before it sends only
 * those bytes (RANGE), while the shadow holds our whole list (no send
 * failed since its last resync: each copy there is current); a shadow
 * without a copy they fit answers WHOLE, and the whole block follows.
 * 0, or -EIO (replica_put_to_shadow: the shadow neither took it nor was
 * declared dead). */
int replica_send(struct fcache *fc, uint64_t lid, uint64_t gid,
		 uint64_t blk, uint32_t at, uint32_t n)
{
	struct block_copy c = { .lid = lid, .gid = gid, .blk = blk, .at = at, .n = n };
	char what[48];

	snprintf(what, sizeof(what), "block %" PRIu64, blk);
	return replica_put_to_shadow(fc, block_copy_send, &c, what, gid);
}

uint32_t replicas_of(struct fcache *fc)
{
	pthread_mutex_lock(&fc->lk);
	uint32_t n = fc->replicas;
	pthread_mutex_unlock(&fc->lk);
	return n;
}

/* replicas=2, under the FMARK_SIZE_BLK stripe lock, after the record's
 * size changed (a home's SETSIZE) or in a resync: the shadow keeps the
 * size (MARK REPLICA of FMARK_SIZE_BLK, payload the handle and the size,
 * 8 bytes in the host's order), so a home lost for good loses no size
 * either. 0 or -EIO, as replica_send. */
struct size_copy {
	const struct bstore_obj *rec;
	uint64_t gid, size;
};

static int size_copy_send(struct fcache *fc, void *ctx)
{
	struct size_copy *c = ctx;
	uint8_t buf[BSTORE_HANDLE_MAX + 8];
	uint32_t rf = 0;
	struct frame_fop f = { .obj = c->gid, .blk = FMARK_SIZE_BLK, .off = fc->self_idx,
			       .len = 8, .base_len = c->rec->handle_len,
			       .handle_type = c->rec->handle_type,
			       .flags = FRAME_MARK_REPLICA };

	memcpy(buf, c->rec->handle, c->rec->handle_len);
	memcpy(buf + c->rec->handle_len, &c->size, 8);
	return fc->mark(fc->mark_arg, &f, buf, c->rec->handle_len + 8, &rf);
}

int size_replica_send(struct fcache *fc, const struct bstore_obj *rec,
		      uint64_t gid, uint64_t size)
{
	struct size_copy c = { .rec = rec, .gid = gid, .size = size };
	return replica_put_to_shadow(fc, size_copy_send, &c, "the size", gid);
}

/* The object is gone here: its marks too. */
void marks_forget(struct fcache *fc, uint64_t gid)
{
	if (!fc->mark)
		return;
	fmark_sent_drop_obj(fc->sent, gid);
	mark_send(fc, FRAME_MARK_CLEAR_OBJ, gid, 0, 0, NULL, 0, NULL);
}

struct resync {
	uint64_t obj, *blk;
	size_t n, cap;
	struct fcache *fc;
	uint64_t seq;
	int rc;
};

static void resync_flush(struct resync *r)
{
	if (r->n && !r->rc)
		r->rc = mark_send(r->fc, FRAME_MARK_SET, r->obj, 0, r->seq, r->blk,
				  (uint32_t)r->n, NULL);
	r->n = 0;
}

static void resync_one(void *arg, uint64_t obj, uint64_t blk)
{
	struct resync *r = arg;
	if (r->n && (obj != r->obj || r->n == FRAME_MARK_MAX_BLOCKS))
		resync_flush(r);
	r->obj = obj;
	if (r->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 1024;
		uint64_t *v = realloc(r->blk, cap * sizeof(*v));
		if (!v) {
			r->rc = -ENOMEM;
			return;
		}
		r->blk = v;
		r->cap = cap;
	}
	r->blk[r->n++] = blk;
}

/* The size of the record's backing file, through its handle: 0, or
 * -errno (-EAGAIN: no backing directory yet). */
static int backing_size(struct fcache *fc, const struct bstore_obj *rec,
			uint64_t *size)
{
	struct rec_handle h;
	struct stat st;

	pthread_mutex_lock(&fc->lk);
	int bfd = fc->backing_fd;
	pthread_mutex_unlock(&fc->lk);
	if (bfd < 0)
		return -EAGAIN;
	rec_handle(rec, &h);
	int fd = open_by_handle_at(bfd, &h.fh, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = fstat(fd, &st) < 0 ? -errno : 0;
	close(fd);
	if (!rc)
		*size = (uint64_t)st.st_size;
	return rc;
}

/* Whether block blk of lid has no bytes in its backing file (the file
 * ends at or before it: a new file's blocks, or past a cut), looked at
 * after taking the block's gen token (*gen, bstore_block_gen), as the
 * writer that reads the backing's bytes does: an absent block's old
 * bytes are then none, and a write installs its range alone. */
bool past_backing_end(struct fcache *fc, uint64_t gid, uint64_t lid,
		      uint64_t blk, uint32_t *gen)
{
	struct bstore_obj rec;
	uint64_t size = 0, at = blk * fc->bsize;

	pthread_mutex_lock(&fc->lk);
	struct fobj *o = fobj_find(fc, gid);
	bool below = o && at < o->backing_seen;
	pthread_mutex_unlock(&fc->lk);
	if (below)
		return false;   /* it had bytes there: the writer sends them */
	*gen = bstore_block_gen(fc->bs, lid, blk);
	if (bstore_obj_get(fc->bs, lid, &rec) < 0 ||
	    backing_size(fc, &rec, &size) < 0)
		return false;
	pthread_mutex_lock(&fc->lk);
	if ((o = fobj_find(fc, gid)))
		o->backing_seen = size;
	pthread_mutex_unlock(&fc->lk);
	return size <= at;
}

/* Whether the record's size is ahead of its backing file's (a home's
 * size not written back yet): its mark goes in a resync. Without the
 * backing directory, any size is taken as ahead. */
static bool size_ahead(struct fcache *fc, const struct bstore_obj *rec)
{
	uint64_t size = 0;
	int e = backing_size(fc, rec, &size);

	if (e == -EAGAIN)
		return rec->size > 0;
	return !e && rec->size > size;   /* gone: nothing of it is read again */
}

/* The shadow gets our whole list again: SYNC_BEGIN, every block dirty
 * here or told before (with replicas=2 a replica of each dirty one:
 * SYNC_BEGIN dropped those it held), SYNC_END. Run by the write-back
 * thread at start,
 * when the shadow says it lacks it (it restarted), and after a SET
 * failed. A SET skipped meanwhile leaves SYNC_END unsent: next time. */
void shadow_resync(struct fcache *fc)
{
	uint64_t skipped = atomic_load(&fc->skipped),
		 uncopied = atomic_load(&fc->uncopied);
	struct resync r = { .fc = fc };
	bool rep = replicas_of(fc) == 2;

	if (mark_send(fc, FRAME_MARK_SYNC_BEGIN, 0, 0, 0, NULL, 0, NULL))
		return;
	atomic_store(&fc->shadow_failed_ns, 0);   /* writers try again */
	/* every dirty block is in the set (a write-back may have taken
	 * some out and not cleaned them) */
	size_t no = bstore_obj_list(fc->bs, NULL, 0);
	uint64_t *ids = no ? calloc(no, sizeof(*ids)) : NULL;
	no = ids ? bstore_obj_list(fc->bs, ids, no) : 0;
	for (size_t i = 0; i < no; i++) {
		struct bstore_obj rec;
		uint64_t gid, nb = 0, nd = 0;
		if (atomic_load(&fc->stopping)) {
			r.rc = -ESHUTDOWN;   /* SYNC_END unsent: not current */
			break;
		}
		if (bstore_obj_get(fc->bs, ids[i], &rec) < 0 || !gid_get(rec.path, &gid))
			continue;
		if (size_ahead(fc, &rec)) {
			fmark_sent_lock(fc->sent, gid, FMARK_SIZE_BLK);
			if (fmark_sent_add(fc->sent, gid, FMARK_SIZE_BLK) < 0)
				r.rc = -ENOMEM;
			/* the size as it is now (a SETSIZE waits for the lock) */
			if (rep && !r.rc && bstore_obj_get(fc->bs, ids[i], &rec) == 0)
				r.rc = size_copy_send(fc, &(struct size_copy){
						.rec = &rec, .gid = gid, .size = rec.size });
			fmark_sent_unlock(fc->sent, gid, FMARK_SIZE_BLK);
		}
		if (bstore_obj_counts(fc->bs, ids[i], &nb, &nd) < 0 || !nd)
			continue;
		uint64_t *idx = calloc(nd, sizeof(*idx));
		size_t n = idx ? bstore_obj_blocks(fc->bs, ids[i], true, idx, nd) : 0;
		for (size_t k = 0; k < n && k < nd; k++) {
			fmark_sent_lock(fc->sent, gid, idx[k]);
			if (fmark_sent_add(fc->sent, gid, idx[k]) < 0)
				r.rc = -ENOMEM;
			if (rep && !r.rc)
				r.rc = block_copy_send(fc, &(struct block_copy){
						.lid = ids[i], .gid = gid, .blk = idx[k] });
			fmark_sent_unlock(fc->sent, gid, idx[k]);
		}
		free(idx);
	}
	free(ids);
	r.seq = fmark_next_seq(fc->sent);
	size_t total = fmark_sent_each(fc->sent, resync_one, &r);
	resync_flush(&r);
	free(r.blk);
	uint32_t rf = 0;
	if (r.rc || atomic_load(&fc->skipped) != skipped ||
	    mark_send(fc, FRAME_MARK_SYNC_END, 0, 0, 0, NULL, 0, &rf) ||
	    !(rf & FRAME_MARK_SYNCED))
		return;
	/* current, unless a write went uncopied meanwhile (that write sets
	 * the flag false after counting: one of the two stores comes last) */
	atomic_store(&fc->shadow_ok, true);
	if (atomic_load(&fc->uncopied) != uncopied) {
		atomic_store(&fc->shadow_ok, false);
		return;
	}
	log_info("file cache: the next node holds our %zu dirty marks", total);
	/* the writes kept alone are copied: their hold on write-back ends,
	 * unless one more came since the look above (replica_degraded
	 * counts it before it sets degraded_ns, which this cleared): then
	 * the hold stays, and so does the resync to come */
	uint_fast64_t was = atomic_exchange(&fc->degraded_ns, 0);
	if (atomic_load(&fc->uncopied) != uncopied) {
		uint_fast64_t none = 0;
		atomic_compare_exchange_strong(&fc->degraded_ns, &none, was);
		atomic_store(&fc->shadow_ok, false);
		return;
	}
	if (was)
		log_info("file cache: the next node (this node's shadow) is back: "
			 "it holds the copies of the writes kept here alone");
}

/* The write-back thread's look at the shadow, at most every
 * SHADOW_PING_NS (at once while it lacks our list). */
void shadow_check(struct fcache *fc, uint64_t now)
{
	uint32_t rf = 0;

	if (!fc->mark || (atomic_load(&fc->shadow_ok) && now < fc->next_ping_ns))
		return;
	fc->next_ping_ns = now + SHADOW_PING_NS;
	if (atomic_load(&fc->shadow_ok) &&
	    mark_send(fc, FRAME_MARK_PING, 0, 0, 0, NULL, 0, &rf) == 0 &&
	    (rf & FRAME_MARK_SYNCED))
		return;
	shadow_resync(fc);
}

void fcache_set_shadow(struct fcache *fc, uint32_t self_idx, fcache_mark_fn fn,
		       void *arg)
{
	pthread_mutex_lock(&fc->lk);
	fc->self_idx = self_idx;
	fc->mark_arg = arg;
	fc->mark = fn;
	fc->next_ping_ns = 0;
	pthread_cond_signal(&fc->cv);   /* the first resync */
	pthread_mutex_unlock(&fc->lk);
}
