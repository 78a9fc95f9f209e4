/* fcache_data.c - an owner's blocks: reads, writes, truncates. */
#include "cluster/fcache_int.h"

static uint64_t lid_of(struct fcache *fc, uint64_t gid)
{
	pthread_mutex_lock(&fc->lk);
	struct fobj *o = fobj_find(fc, gid);
	uint64_t lid = o ? o->lid : 0;
	pthread_mutex_unlock(&fc->lk);
	return lid;
}

static int range_check(struct fcache *fc, const struct frame_fop *f,
		       struct frame_hdr *r)
{
	if ((uint64_t)f->off + f->len > fc->bsize || f->base_len > fc->bsize ||
	    f->blk > UINT64_MAX / fc->bsize) {
		snprintf(r->text, sizeof(r->text), "range outside a %u-byte block",
			 fc->bsize);
		return -EPROTO;
	}
	return 0;
}

/* Zeros: a read's bytes past a block's valid length, a punched range */
static const uint8_t zeros[FRAME_FILE_MAX_BLOCK];

int fcache_serve_read(struct fcache *fc, const struct frame_hdr *q,
		      struct frame_hdr *r, struct fcache_read *rd)
{
	const struct frame_fop *f = &q->fop;
	struct bstore_binfo bi;
	const void *data;

	memset(rd, 0, sizeof(*rd));
	r->fop = *f;
	r->fop.base_len = 0;
	r->fop.len = 0;
	r->fop.flags &= ~(FRAME_FILE_BOUND | FRAME_FILE_BOUND_OK);
	r->fop.epoch = 0;
	if (q->type != FT_FILE_READ || f->obj == 0)
		return -EPROTO;
	int rc = range_check(fc, f, r);
	if (rc)
		return rc;
	/* REPLICA: the copy kept for owner index gen (replicas=2) */
	uint64_t lid = f->flags & FRAME_FILE_REPLICA ? replica_lid(fc, f->gen, f->obj) :
		       lid_of(fc, f->obj);
	if (!lid)
		return -ENOENT;
	if (f->flags & FRAME_FILE_BOUND)
		epoch_known(fc, f->obj);   /* asked now, if need be: not pinned */
	rc = bstore_block_pin(fc->bs, lid, f->blk, &data, &rd->token, &bi);
	if (rc == -ENOENT)
		bound_answer(fc, f, r);   /* the backing's bytes: the size still */
	if (rc)
		return rc;
	rd->pinned = true;
	uint32_t n = f->off < bi.valid ? bi.valid - f->off : 0;
	if (n > f->len)
		n = f->len;
	if (n)
		rd->iov[rd->niov++] = (struct iovec){ (uint8_t *)data + f->off, n };
	if (n < f->len)
		rd->iov[rd->niov++] = (struct iovec){ (void *)zeros, f->len - n };
	r->fop.len = f->len;
	r->payload_len = f->len;
	bound_answer(fc, f, r);
	atomic_fetch_add(&fc->reads, 1);
	atomic_fetch_add(&fc->served_bytes, f->len);
	return 0;
}

void fcache_read_done(struct fcache *fc, struct fcache_read *rd)
{
	if (rd->pinned)
		bstore_block_unpin(fc->bs, rd->token);
	memset(rd, 0, sizeof(*rd));
}

/* fcache_serve's FILE_READ: the bytes copied into buf */
int serve_read(struct fcache *fc, const struct frame_hdr *q,
	       struct frame_hdr *r, uint8_t *buf, const void **out)
{
	struct fcache_read rd;
	size_t at = 0;
	int rc = fcache_serve_read(fc, q, r, &rd);

	for (unsigned k = 0; !rc && k < rd.niov; k++) {
		memcpy(buf + at, rd.iov[k].iov_base, rd.iov[k].iov_len);
		at += rd.iov[k].iov_len;
	}
	fcache_read_done(fc, &rd);
	if (!rc)
		*out = buf;
	return rc;
}

/* A WRITE with EXTEND at the file's home, written: the SETSIZE that
 * would follow it (size = max(f->size, the record's)), as if it came
 * next on the wire. Done: the reply says EXTEND, with the record's size
 * and the home's epoch (as SETSIZE's); else the writer sends the
 * SETSIZE itself. */
static int write_extend(struct fcache *fc, const struct frame_fop *f,
			struct frame_hdr *r)
{
	struct frame_hdr sr = { .type = FT_FILE_SETSIZE, .reply = true };

	if (!at_home(fc, f->obj))
		return 0;
	sr.fop = (struct frame_fop){ .obj = f->obj, .size = f->size,
				     .flags = FRAME_FILE_EXTEND, .digest = f->digest };
	int rc = serve_size(fc, FT_FILE_SETSIZE, &sr.fop, &sr);
	if (rc == 0) {
		r->fop.flags |= FRAME_FILE_EXTEND;
		r->fop.size = sr.fop.size;
		r->fop.epoch = sr.fop.epoch;
	}
	/* a SETSIZE that failed fails the write, as the writer's own
	 * would have (replicas=2: the size not in the shadow; EFBIG);
	 * none to make (no record): the writer sends it */
	if (rc == -ESTALE || rc == -ENOENT)
		rc = 0;
	if (rc)
		snprintf(r->text, sizeof(r->text), "the size of the write: %.150s",
			 sr.text[0] ? sr.text : strerror(-rc));
	return rc;
}

#define WB_FAILING_NS (60 * 1000000000ull)
bool wb_failing(struct fcache *fc)
{
	uint64_t at = atomic_load(&fc->wb_failed_ns);
	return at && clock_now_ns() - at < WB_FAILING_NS;
}

void answer_full(struct fcache *fc, struct frame_hdr *r)
{
	r->fop.flags |= FRAME_FILE_FULL;
	atomic_fetch_add(&fc->full_waits, 1);
	atomic_store(&fc->full_at, clock_now_ns());
}

int serve_write(struct fcache *fc, const struct frame_fop *f,
		const uint8_t *payload, struct frame_hdr *r)
{
	r->fop.flags &= ~FRAME_FILE_EXTEND;   /* (set only once done) */
	int rc = range_check(fc, f, r);
	if (rc)
		return rc;
	uint64_t lid = lid_of(fc, f->obj);
	if (!lid)
		return -ESTALE;  /* no record here: OPEN first */
	bool base = f->flags & FRAME_FILE_GEN;
	struct bstore_src src = { .buf = payload + f->base_len };
	bool whole = f->off == 0 && f->len == fc->bsize;  /* needs no old bytes */
	unsigned flags = BSTORE_DIRTY | (base ? BSTORE_GEN : whole ? 0 : BSTORE_NEED_OLD);
	bool rep = fc->mark && replicas_of(fc) == 2;
	uint32_t gen = f->gen, base_len = f->base_len;
again:
	for (uint64_t since = clock_now_ns();;) {
		struct bstore_binfo was = { 0 };
		/* the shadow knows the block is dirty before it is (fmarks.h) */
		if (fc->mark) {
			fmark_sent_lock(fc->sent, f->obj, f->blk);
			mark_dirty(fc, f->obj, f->blk,
				   (f->flags & FRAME_FILE_EXTEND) && at_home(fc, f->obj));
		}
		if (rep && !whole && !base && bstore_block_info(fc->bs, lid, f->blk, &was))
			was.dirty = false;
		rc = bstore_block_write_src(fc->bs, lid, f->blk, f->off, &src, f->len,
					    base ? payload : NULL, base_len,
					    flags, gen, NULL);
		/* replicas=2: in the shadow's NVRAM too before the reply; a
		 * block dirty before: the bytes written alone */
		if (rep && !rc)
			rc = replica_send(fc, lid, f->obj, f->blk, f->off,
					  was.dirty ? f->len : 0);
		if (fc->mark)
			fmark_sent_unlock(fc->sent, f->obj, f->blk);
		if (space_wait_over(fc, since, WRITE_HOLD_NS, &rc))
			break;
		/* every block dirty: write back, then try again */
		wb_kick_all(fc);
		usleep(SPACE_WAIT_MS * 1000);
	}
	if (rc == -ENODATA && !base && past_backing_end(fc, f->obj, lid, f->blk, &gen)) {
		/* absent, and the backing has no bytes of it: none to ask
		 * the writer for (a round trip and a read of the backing);
		 * once (the write now needs no old bytes: no -ENODATA) */
		base = true;
		base_len = 0;
		flags = BSTORE_DIRTY | BSTORE_GEN;
		goto again;
	}
	if (rc == -ENODATA || rc == -ESTALE) {
		/* absent (or gone since the writer's gen): its backing bytes */
		r->fop.gen = bstore_block_gen(fc->bs, lid, f->blk);
		return -ENOENT;
	}
	if (!rc) {
		atomic_fetch_add(&fc->writes, 1);
		if (base && !(f->flags & FRAME_FILE_GEN))
			atomic_fetch_add(&fc->past_end, 1);
		pthread_mutex_lock(&fc->lk);
		struct fobj *o = fobj_find(fc, f->obj);
		if (o && !o->wb_due_ns)
			o->wb_due_ns = clock_now_ns() + DIRTY_EXPIRE_NS;
		pthread_mutex_unlock(&fc->lk);
		bound_answer(fc, f, r);
		if (f->flags & FRAME_FILE_EXTEND)
			rc = write_extend(fc, f, r);
	}
	/* every block dirty for the whole hold, the write-back making no
	 * room but not failing (a slow or stalled backing): the writer
	 * waits on */
	if (rc == -ENOSPC && !wb_failing(fc))
		answer_full(fc, r);
	return rc;
}

/* Block blk (at start) of object lid within the punched range [a, z):
 * inside it, or clean (the backing is punched too), it goes; else the
 * range's bytes of it that it holds become zeros, still dirty. A copy
 * (replicas=2) never goes: its owner's mark of it stays until the
 * owner's write-back, and a mark without a copy reads as lost. */
static int punch_block(struct fcache *fc, uint64_t lid, uint64_t blk,
		       uint64_t start, uint64_t a, uint64_t z, bool copy)
{
	struct bstore_binfo bi;

	if (start >= z || start + fc->bsize <= a)
		return 0;
	if (bstore_block_info(fc->bs, lid, blk, &bi) < 0)
		return 0;   /* gone meanwhile */
	if (!copy && ((start >= a && start + fc->bsize <= z) || !bi.dirty)) {
		int rc = bstore_block_drop(fc->bs, lid, blk);
		return rc == -ENOENT ? 0 : rc;
	}
	uint32_t from = a > start ? (uint32_t)(a - start) : 0;
	uint32_t to = z < start + fc->bsize ? (uint32_t)(z - start) : fc->bsize;
	if (to > bi.valid)
		to = bi.valid;   /* zeros past its bytes are read so already */
	if (from >= to)
		return 0;
	int rc = bstore_block_write(fc->bs, lid, blk, from, zeros, to - from, true,
				    false, NULL);
	return rc == -ENOENT ? 0 : rc;
}

/* TRUNC's change to the blocks of object lid (copy: a replica object):
 * past f->size dropped and the edge block cut, or with punch
 * [f->size, f->blk) made zeros. */
static int trunc_blocks(struct fcache *fc, uint64_t lid, const struct frame_fop *f,
			bool punch, bool copy)
{
	uint64_t nb = 0, nd = 0;
	int rc = 0;

	if (bstore_obj_counts(fc->bs, lid, &nb, &nd) < 0 || !nb)
		return 0;
	uint64_t *idx = calloc(nb, sizeof(*idx));
	if (!idx)
		return -ENOMEM;
	size_t n = bstore_obj_blocks(fc->bs, lid, false, idx, nb);
	n = n < nb ? n : nb;
	for (size_t k = 0; k < n && !rc; k++) {
		uint64_t start = idx[k] * fc->bsize;
		if (punch)
			rc = punch_block(fc, lid, idx[k], start, f->size, f->blk, copy);
		else if (start >= f->size)
			bstore_block_drop(fc->bs, lid, idx[k]);
		else if (f->size - start < fc->bsize)
			bstore_block_truncate(fc->bs, lid, idx[k],
					      (uint32_t)(f->size - start));
	}
	free(idx);
	return rc;
}

/* Drop the blocks past f->size (a truncate), or, with PUNCH, make
 * [f->size, f->blk) zeros. Under the write-back lock: a write-back under
 * way has written what it read before the blocks change, so the mount's
 * truncate or punch of the backing file, after this reply, is the last
 * word on those bytes there. */
int serve_trunc(struct fcache *fc, const struct frame_fop *f)
{
	uint64_t lid = lid_of(fc, f->obj);
	bool punch = f->flags & FRAME_FILE_PUNCH;
	int rc = 0;

	if (punch && f->blk < f->size)
		return -EINVAL;
	if (lid && !punch) {
		/* every record's size follows: an owner's write-back extends
		 * the backing file to it; and the shrink's epoch is known */
		struct bstore_obj rec;
		pthread_mutex_lock(&fc->lk);
		/* (a record that knows no epoch asks the home: a shrink
		 * newer than this one's may have passed before it was made) */
		struct fobj *o = fobj_find(fc, f->obj);
		bool home = at_home(fc, f->obj);
		if (o && !home && o->epoch && o->epoch < f->epoch)
			o->epoch = f->epoch;
		if (bstore_obj_get(fc->bs, lid, &rec) == 0 && rec.size > f->size) {
			rec.size = f->size;
			/* at the home, a size that goes down (its SETSIZE came
			 * first; a write grew it since): a new epoch too */
			if (bstore_obj_update(fc->bs, &rec) == 0 && o && home)
				home_shrunk(o);
		}
		pthread_mutex_unlock(&fc->lk);
	}
	/* replicas=2: the copies this node keeps of the file's blocks
	 * (every owner's) change as the owners' blocks do, else a lost
	 * owner's copies would bring truncated or punched bytes back */
	pthread_mutex_lock(&fc->rep_mx);
	for (uint32_t owner = 0; owner < FMARK_OWNERS && !rc; owner++) {
		struct robj *o = *rslot_of(fc, owner, f->obj);
		if (o)
			rc = trunc_blocks(fc, o->lid, f, punch, true);
		struct bstore_obj rec;
		if (o && !rc && !punch && bstore_obj_get(fc->bs, o->lid, &rec) == 0 &&
		    (rec.uflags & RSIZE_KNOWN) && rec.size > f->size) {
			rec.size = f->size;
			bstore_obj_update(fc->bs, &rec);
		}
	}
	pthread_mutex_unlock(&fc->rep_mx);
	if (rc || !lid)
		return rc;
	pthread_mutex_lock(&fc->wb_mx);
	rc = trunc_blocks(fc, lid, f, punch, false);
	pthread_mutex_unlock(&fc->wb_mx);
	return rc;
}
