/* fcache_replica.c - the shadow's side: the marks and copies it keeps of the
 * previous node's dirty blocks, answered for a down owner and written back
 * when the owner is lost. */
#include "cluster/fcache_int.h"

/* ---- a lost owner's replicas ---- */

void fcache_owner_down(struct fcache *fc, uint32_t idx, bool down)
{
	if (idx >= FMARK_OWNERS)
		return;
	if (!down) {
		atomic_store(&fc->down_since[idx], 0);
		return;
	}
	uint_fast64_t none = 0;
	if (atomic_compare_exchange_strong(&fc->down_since[idx], &none, clock_now_ns()))
		log_debug("file cache: owner index %u is down", idx);
}

void fcache_shadow_down(struct fcache *fc, bool down, uint32_t timeout_ms)
{
	atomic_store(&fc->shadow_timeout_ms, timeout_ms);
	if (!down) {
		/* the writes kept alone stay so until the resync (shadow_resync) */
		atomic_store(&fc->shadow_down_ns, 0);
		return;
	}
	uint_fast64_t none = 0;
	if (atomic_compare_exchange_strong(&fc->shadow_down_ns, &none, clock_now_ns()))
		log_debug("file cache: the next node (this node's shadow) is down");
}

/* replicas=2: while writes kept here alone are not yet copied to the
 * shadow (the resync after its return), the write-back waits: until the
 * shadow has been down for FCACHE_DEGRADED_HOLD orphan times (fcache.h),
 * or, the shadow back, until its resync (which waits for a write-back
 * of its copies there to end), FCACHE_DEGRADED_HOLD orphan times after
 * the first such write at most. The time it ends, or 0 (no hold). */
uint64_t wb_held_until(struct fcache *fc, uint64_t now)
{
	uint64_t alone = atomic_load(&fc->degraded_ns);
	if (!alone)
		return 0;
	uint64_t down = atomic_load(&fc->shadow_down_ns);
	uint64_t end = (down ? down : alone) + FCACHE_DEGRADED_HOLD * fc->orphan_ns;
	return now < end ? end : 0;
}

/* Under rep_mx: replica object o's blocks to the backing file (named by
 * its handle), fsync'ed, then its marks cleared (each if not marked
 * after it was read: a newer one belongs to a write since) and the copy
 * dropped. Counts the blocks in *blocks. 0 or -errno (the copy stays;
 * a file gone from the backing drops it: nowhere to write). */
static int orphan_one(struct fcache *fc, int bfd, struct robj **p, uint64_t *blocks)
{
	struct robj *o = *p;
	struct bstore_obj rec;
	uint64_t nb = 0, nd = 0;
	int rc = bstore_obj_get(fc->bs, o->lid, &rec);

	if (!rc)
		rc = bstore_obj_counts(fc->bs, o->lid, &nb, &nd);
	if (rc)
		return rc;
	struct rec_handle h;
	rec_handle(&rec, &h);
	bool sized = rec.uflags & RSIZE_KNOWN;   /* the home's size kept here */
	int fd = nb || sized ? open_by_handle_at(bfd, &h.fh, O_WRONLY | O_NOFOLLOW |
						 O_CLOEXEC) : -1;
	struct stat st;
	if ((nb || sized) && fd < 0) {
		rc = -errno;
		if (rc != -ESTALE && rc != -ENOENT)
			return rc;
		nb = 0;   /* the file is gone: its copies too */
		sized = false;
	} else if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		return -EINVAL;
	}
	uint64_t *idx = nb ? calloc(nb, sizeof(*idx)) : NULL;
	uint64_t *seq = nb ? calloc(nb, sizeof(*seq)) : NULL;
	bool *has = nb ? calloc(nb, sizeof(*has)) : NULL;
	uint8_t *buf = nb ? malloc(fc->bsize) : NULL;
	rc = 0;
	if (nb && (!idx || !seq || !has || !buf))
		rc = -ENOMEM;
	size_t n = rc || !nb ? 0 : bstore_obj_blocks(fc->bs, o->lid, false, idx, nb);
	n = n < nb ? n : nb;
	for (size_t k = 0; k < n && !rc; k++) {
		struct bstore_binfo bi;
		has[k] = fmark_tab_has(fc->marks, o->owner, o->gid, idx[k]);
		seq[k] = fmark_tab_seq(fc->marks, o->owner, o->gid, idx[k]);
		if (bstore_block_read(fc->bs, o->lid, idx[k], 0, buf, fc->bsize, &bi) < 0)
			continue;
		if (bi.valid && pwrite(fd, buf, bi.valid, (off_t)(idx[k] * fc->bsize)) !=
				(ssize_t)bi.valid)
			rc = errno ? -errno : -EIO;
	}
	/* the size the home had, which the blocks alone may not make
	 * (a file extended by truncate): marked as the blocks are */
	bool size_has = sized && fmark_tab_has(fc->marks, o->owner, o->gid, FMARK_SIZE_BLK);
	uint64_t size_seq = fmark_tab_seq(fc->marks, o->owner, o->gid, FMARK_SIZE_BLK);
	if (!rc && sized)
		rc = backing_grow(fd, rec.size);
	if (!rc && fd >= 0 && fsync(fd) < 0)
		rc = -errno;
	if (!rc && size_has) {
		uint64_t sb = FMARK_SIZE_BLK;
		struct frame_fop f = { .obj = o->gid, .off = o->owner, .len = 8,
				       .size = size_seq, .flags = FRAME_MARK_CLEAR };
		uint32_t rf;
		fmark_tab_apply(fc->marks, &f, (const uint8_t *)&sb, &rf);
	}
	for (size_t k = 0; k < n && !rc; k++)
		if (has[k]) {
			struct frame_fop f = { .obj = o->gid, .off = o->owner, .len = 8,
					       .size = seq[k], .flags = FRAME_MARK_CLEAR };
			uint32_t rf;
			fmark_tab_apply(fc->marks, &f, (const uint8_t *)&idx[k], &rf);
		}
	if (!rc) {
		*blocks += n;
		rdrop(fc, p);
	}
	if (fd >= 0)
		close(fd);
	free(idx);
	free(seq);
	free(has);
	free(buf);
	return rc;
}

/* The write-back thread's look at the owners whose shadow this is: one
 * down for orphan_ns has its replicas written back here (the backing
 * then holds its acknowledged writes, and a mount reads them there); if
 * it comes back it writes back its own dirty blocks, the same bytes
 * (its writes failed while it was down). */
void orphans_check(struct fcache *fc, uint64_t now)
{
	for (uint32_t i = 0; i < FMARK_OWNERS; i++) {
		uint64_t since = atomic_load(&fc->down_since[i]);
		if (!since || now - since < fc->orphan_ns)
			continue;
		pthread_mutex_lock(&fc->lk);
		int bfd = fc->backing_fd;
		pthread_mutex_unlock(&fc->lk);
		if (bfd < 0)
			return;
		uint64_t blocks = 0;
		size_t files = 0, failed = 0;
		int err = 0;
		/* the marks before the pass: a returning owner's new ones
		 * have higher numbers (they rise across its restarts) */
		bool synced;
		uint64_t top = fmark_tab_top_seq(fc->marks, i, &synced);
		pthread_mutex_lock(&fc->rep_mx);
		/* a stop leaves the rest in NVRAM, for the next start */
		for (size_t b = 0; b < NBUCKETS && !atomic_load(&fc->stopping); b++)
			for (struct robj **p = &fc->rtab[b]; *p;) {
				if ((*p)->owner != i) {
					p = &(*p)->next;
					continue;
				}
				int rc = orphan_one(fc, bfd, p, &blocks);
				if (rc) {
					/* kept: tried again after orphan_ns */
					err = rc;
					failed++;
					p = &(*p)->next;
				} else {
					files++;
				}
			}
		pthread_mutex_unlock(&fc->rep_mx);
		/* every copy written back: what stays marked has none. With
		 * the owner's whole list here (synced), every block it wrote
		 * since has its copy (a write waits for it, a resync sends
		 * one for each dirty block before SYNC_END): those are told
		 * ahead and never written (or writes that failed, never
		 * acknowledged), and the backing holds them. Left marked,
		 * they would read as lost (EIO) for good */
		size_t ahead = 0;
		if (!failed && synced && top && !atomic_load(&fc->stopping) &&
		    replicas_of(fc) == 2)
			ahead = fmark_tab_clear_owner(fc->marks, i, top);
		if (ahead)
			log_info("file cache: owner index %u down: %zu of its dirty "
				 "marks had no copy here (told ahead, never written): "
				 "cleared, read from the backing", i, ahead);
		if (files || failed) {
			atomic_fetch_add(&fc->replicas_written, blocks);
			log_warn("file cache: owner index %u down for %" PRIu64 " s: wrote "
				 "back its replicas kept here, %" PRIu64 " blocks of %zu "
				 "files%s%s", i, (uint64_t)((now - since) / 1000000000ull), blocks, files,
				 failed ? "; failed for some, kept: " : "",
				 failed ? strerror(-err) : "");
		}
		/* the next pass (new copies, or the failed ones) after orphan_ns */
		uint_fast64_t was = since;
		atomic_compare_exchange_strong(&fc->down_since[i], &was, now);
	}
}

/* ---- the copies kept: MARK, SHADOW ---- */

/* A REPLICA: the owner's block (the payload after the handle) kept
 * dirty (never evicted) in the owner's replica object, made at its
 * first block. Under rep_mx (let go while waiting for space). */
static int replica_put(struct fcache *fc, const struct frame_fop *f,
		       const uint8_t *payload)
{
	struct robj **p = rslot_of(fc, f->off, f->obj), *o = *p;
	int rc = 0;

	if (!o) {
		struct bstore_obj rec;
		memset(&rec, 0, sizeof(rec));
		rec.handle_type = f->handle_type;
		rec.handle_len = f->base_len;
		memcpy(rec.handle, payload, f->base_len);
		rid_put(rec.path, f->off, f->obj);
		rc = record_create(fc, &rec, true, RECORD_HOLD_NS);
		if (!rc && (o = *rslot_of(fc, f->off, f->obj)) != NULL) {
			bstore_obj_delete(fc->bs, rec.id);   /* made meanwhile */
		} else if (!rc && !(o = rinsert(fc, f->off, f->obj, rec.id))) {
			bstore_obj_delete(fc->bs, rec.id);
			rc = -ENOMEM;
		}
		if (rc)
			return rc;
	}
	if (f->blk == FMARK_SIZE_BLK) {
		/* the home's size of the file, not a block */
		struct bstore_obj rec;
		uint64_t size;
		if (f->len != 8)
			return -EPROTO;
		memcpy(&size, payload + f->base_len, 8);
		rc = bstore_obj_get(fc->bs, o->lid, &rec);
		if (!rc) {
			rec.size = size;
			rec.uflags |= RSIZE_KNOWN;
			rc = bstore_obj_update(fc->bs, &rec);
		}
		return rc;
	}
	if (!f->len) {
		/* no valid bytes: what a read finds where nothing is held */
		rc = bstore_block_drop(fc->bs, o->lid, f->blk);
		return rc == -ENOENT ? 0 : rc;
	}
	for (uint64_t since = clock_now_ns();;) {
		rc = bstore_block_write(fc->bs, o->lid, f->blk, 0, payload + f->base_len,
					f->len, true, false, NULL);
		if (space_wait_over(fc, since, REPLICA_HOLD_NS, &rc))
			break;
		/* every block dirty: our own write back, then again; rep_mx
		 * let go meanwhile (our write-back's CLEARs go to our own
		 * shadow, which may be waiting for us the same way) */
		wb_kick_all(fc);
		pthread_mutex_unlock(&fc->rep_mx);
		usleep(SPACE_WAIT_MS * 1000);
		pthread_mutex_lock(&fc->rep_mx);
		if (!(o = *rslot_of(fc, f->off, f->obj)))
			return -ESTALE;   /* dropped meanwhile: the owner resyncs */
	}
	if (!rc)   /* the owner's block may have shrunk (a truncate) */
		rc = bstore_block_truncate(fc->bs, o->lid, f->blk, f->len);
	if (!rc)
		atomic_fetch_add(&fc->replicas_taken, 1);
	return rc;
}

/* A REPLICA with RANGE: the owner's bytes [size, size + len) of block
 * blk, whose valid length is gen after them, laid over the copy kept
 * here. *whole when the range fits no copy (none here: never sent, or
 * CLEARed; no space for the change; or the copy's length is not the
 * owner's after it): the owner then sends the whole block, which
 * replaces the copy. Under rep_mx. */
static int replica_range_put(struct fcache *fc, const struct frame_fop *f,
			     const uint8_t *payload, bool *whole)
{
	struct robj *o = *rslot_of(fc, f->off, f->obj);
	struct bstore_src src = { .buf = payload + f->base_len };
	struct bstore_binfo bi;

	*whole = true;
	/* the copy's length after the range must be the owner's: checked
	 * before (a copy it does not fit stays as it is) */
	if (!o || bstore_block_info(fc->bs, o->lid, f->blk, &bi) ||
	    (bi.valid > f->size + f->len ? bi.valid : f->size + f->len) != f->gen)
		return 0;
	int rc = bstore_block_write_src(fc->bs, o->lid, f->blk, (uint32_t)f->size,
					&src, f->len, NULL, 0,
					BSTORE_DIRTY | BSTORE_NEED_OLD, 0, &bi);
	if (rc == -ENODATA || rc == -ENOSPC)
		return 0;
	if (rc)
		return rc;
	*whole = false;
	atomic_fetch_add(&fc->replicas_taken, 1);
	return 0;
}

/* The replica record's size is no longer the owner's (written back). */
static void rsize_forget(struct fcache *fc, uint64_t lid)
{
	struct bstore_obj rec;

	if (bstore_obj_get(fc->bs, lid, &rec) == 0 && (rec.uflags & RSIZE_KNOWN)) {
		rec.uflags &= ~RSIZE_KNOWN;
		bstore_obj_update(fc->bs, &rec);
	}
}

int serve_mark(struct fcache *fc, const struct frame_fop *f,
	       const uint8_t *payload, struct frame_hdr *r)
{
	uint32_t rf = 0;
	int rc = fmark_tab_apply(fc->marks, f, payload, &rf);

	if (rc == -EPROTO)
		snprintf(r->text, sizeof(r->text), "MARK owner index or flags out of range");
	r->fop.flags = rf;
	if (rc)
		return rc;
	bool rep = f->flags & FRAME_MARK_REPLICA;
	bool range = f->flags & FRAME_MARK_RANGE;
	if (rep && (!f->obj || (uint64_t)f->len > fc->bsize ||
		    f->blk > UINT64_MAX / fc->bsize || !f->base_len ||
		    f->base_len > BSTORE_HANDLE_MAX ||
		    (range && (f->gen > fc->bsize || f->blk == FMARK_SIZE_BLK ||
			       !f->len || f->size > f->gen ||
			       f->len > f->gen - f->size)))) {
		snprintf(r->text, sizeof(r->text), "REPLICA outside a %u-byte block",
			 fc->bsize);
		return -EPROTO;
	}
	if (!rep && !(f->flags & (FRAME_MARK_CLEAR | FRAME_MARK_CLEAR_OBJ |
				  FRAME_MARK_SYNC_BEGIN)))
		return 0;
	pthread_mutex_lock(&fc->rep_mx);
	if (rep && range) {
		bool whole;
		rc = replica_range_put(fc, f, payload, &whole);
		if (!rc && whole)
			r->fop.flags |= FRAME_MARK_WHOLE;
	} else if (rep) {
		rc = replica_put(fc, f, payload);
	} else if (f->flags & FRAME_MARK_SYNC_BEGIN) {
		/* the owner sends every replica again */
		for (size_t b = 0; b < NBUCKETS; b++)
			for (struct robj **p = &fc->rtab[b]; *p;)
				if ((*p)->owner == f->off)
					rdrop(fc, p);
				else
					p = &(*p)->next;
	} else {
		struct robj **p = rslot_of(fc, f->off, f->obj);
		if (*p && (f->flags & FRAME_MARK_CLEAR_OBJ)) {
			rdrop(fc, p);
		} else if (*p) {
			/* written back at the owner: the copy goes, unless a
			 * newer mark stayed (a write after the owner's
			 * take-out, whose REPLICA follows or came already) */
			for (uint32_t k = 0; k < f->len / 8; k++) {
				uint64_t blk;
				memcpy(&blk, payload + 8 * k, 8);
				if (fmark_tab_has(fc->marks, f->off, f->obj, blk))
					continue;
				if (blk == FMARK_SIZE_BLK)
					rsize_forget(fc, (*p)->lid);
				else
					bstore_block_drop(fc->bs, (*p)->lid, blk);
			}
			/* its record too, once it keeps nothing: a shadow
			 * would otherwise keep one for every file its owner
			 * ever wrote */
			if (replica_empty(fc, (*p)->lid))
				rdrop(fc, p);
		}
	}
	pthread_mutex_unlock(&fc->rep_mx);
	return rc;
}

int serve_shadow(struct fcache *fc, const struct frame_fop *f,
		 struct frame_hdr *r)
{
	struct bstore_binfo bi;
	struct bstore_obj rec;
	uint32_t fl = fmark_tab_query(fc->marks, f->off, f->obj, f->blk);
	uint64_t lid = fl & FRAME_SHADOW_DIRTY ? replica_lid(fc, f->off, f->obj) : 0;

	if (lid && f->blk == FMARK_SIZE_BLK) {
		/* the home's size, kept here (replicas=2) */
		if (bstore_obj_get(fc->bs, lid, &rec) == 0 && (rec.uflags & RSIZE_KNOWN)) {
			fl |= FRAME_SHADOW_REPLICA;
			r->fop.size = rec.size;
		}
	} else if (lid && bstore_block_info(fc->bs, lid, f->blk, &bi) == 0) {
		fl |= FRAME_SHADOW_REPLICA;
	} else if ((fl & FRAME_SHADOW_DIRTY) && f->blk != FMARK_SIZE_BLK &&
		   replicas_of(fc) == 2) {
		/* marked, no copy, the owner's list whole here (else
		 * UNKNOWN): every block it wrote has its copy (a write
		 * waits for it, a resync sends one for each dirty block
		 * before SYNC_END), so this one was told ahead and never
		 * written, or its write failed, never acknowledged: the
		 * backing holds it */
		fl &= ~FRAME_SHADOW_DIRTY;
	}
	r->fop.flags = fl;
	return 0;
}
