/* fcache_home.c - what a file's home keeps: its opens, size, size
 * epoch, mtime, and whether it was unlinked while open. */
#include "cluster/fcache_int.h"

/* ---- size epochs (fcache.h) ---- */

/* The home of gid is this node (or no peers are set: a node alone) */
bool at_home(const struct fcache *fc, uint64_t gid)
{
	return !fc->n_nodes || gid % fc->n_nodes == fc->self_idx;
}

/* At the home, under fc->lk: o's epoch, given at its first use (a shrink
 * before the record was made here came before it) */
static uint64_t home_epoch(struct fobj *o)
{
	if (!o->epoch)
		o->epoch = clock_wall_ns();
	return o->epoch;
}

/* At the home, under fc->lk: the record's size went down, so the bounds
 * given before end (a new epoch, above the last). */
void home_shrunk(struct fobj *o)
{
	uint64_t e = home_epoch(o) + 1, now = clock_wall_ns();

	o->epoch = now > e ? now : e;
}

/* The newest epoch of gid this node knows (0: no record, or none to be
 * had). An owner asks the file's home, with no lock held (a read does it
 * before it pins its block), when it knows none, or knew it longer than
 * EPOCH_TRUST_NS ago: a shrink whose TRUNC never came here (the
 * truncating mount died between the home and the owners, or its TRUNC
 * to this node failed) ends the bounds here within that time. A home
 * that could not be asked is not asked again for as long (no bound
 * holds meanwhile). */
uint64_t epoch_known(struct fcache *fc, uint64_t gid)
{
	bool home = at_home(fc, gid);
	uint64_t known = 0, lid = 0, now = clock_now_ns();

	pthread_mutex_lock(&fc->lk);
	struct fobj *o = fobj_find(fc, gid), *was = o;
	bool ask = false;
	if (o && home) {
		known = home_epoch(o);
	} else if (o) {
		lid = o->lid;
		bool fresh = o->epoch && now - o->epoch_at < EPOCH_TRUST_NS;
		bool failed = o->asked_fail && now - o->asked_fail < EPOCH_TRUST_NS;
		known = fresh ? o->epoch : 0;
		ask = !fresh && !failed;
	}
	pthread_mutex_unlock(&fc->lk);
	if (!ask)
		return known;
	struct frame_fop f = { .obj = gid }, rf = { 0 };
	atomic_fetch_add(&fc->epochs_asked, 1);
	int rc = fc->call ? fc->call(fc->call_arg, (uint32_t)(gid % fc->n_nodes),
				     FT_FILE_GETATTR, &f, &rf) : -ENOTCONN;
	/* only for the record that was there before the question: a record
	 * made since may have missed a shrink after it */
	pthread_mutex_lock(&fc->lk);
	o = fobj_find(fc, gid);
	bool same = o && o == was && o->lid == lid;
	if (same && (rc || !rf.epoch)) {
		o->asked_fail = now;
	} else if (same) {
		if (o->epoch < rf.epoch)
			o->epoch = rf.epoch;
		o->epoch_at = now;
		o->asked_fail = 0;
		known = o->epoch;
	}
	pthread_mutex_unlock(&fc->lk);
	return known;
}

/* A READ or WRITE with BOUND at epoch e, once served: whether no shrink
 * of gid came after e, as far as this node knows. Looked at after the
 * block was read or written: a shrink seen after that came later. */
static bool bound_holds(struct fcache *fc, uint64_t gid, uint64_t e)
{
	uint64_t known = e ? epoch_known(fc, gid) : 0;
	bool ok = known && e >= known;

	atomic_fetch_add(ok ? &fc->bounds_ok : &fc->bounds_refused, 1);
	return ok;
}

/* A reply to a READ or WRITE: BOUND_OK if the request's bound holds */
void bound_answer(struct fcache *fc, const struct frame_fop *f,
		  struct frame_hdr *r)
{
	r->fop.flags &= ~(FRAME_FILE_BOUND | FRAME_FILE_BOUND_OK);
	r->fop.epoch = 0;
	if ((f->flags & FRAME_FILE_BOUND) && bound_holds(fc, f->obj, f->epoch))
		r->fop.flags |= FRAME_FILE_BOUND_OK;
}

/* Under fc->lk, at the home with stripe_unit=auto: o's unit (in rec)
 * on its backing file once a run, at the first OPEN or SETSIZE that
 * finds it fixed (again at the next if that failed), before any request
 * here can answer it: a mount whose file's home is down trusts a
 * missing label (fdcl.c, unit_unset_on_backing). */
static void label_once(struct fcache *fc, struct fobj *o, const struct bstore_obj *rec)
{
	if (!o->labeled && rec->uflags && fc->unit_set && !fc->unit &&
	    at_home(fc, o->gid) && fc->backing_fd >= 0)
		o->labeled = unit_label(fc, fc->backing_fd, rec);
}

/* Whether h counted an OPEN with token t among its last HOLD_SEEN. */
static bool hold_seen(const struct hold *h, uint64_t t)
{
	for (unsigned k = 0; k < HOLD_SEEN; k++)
		if (h->seen[k] == t)
			return true;
	return false;
}

/* After an OPEN that made the record (serve_open's look found the file
 * named, then the record was made without fc->lk) and
 * counted its opens: an unlink meanwhile found no record to keep, and
 * its mount drops the file everywhere. If the backing file has no name
 * now, the count is taken back, with the OPEN's token (a resend is
 * counted, and looked at, anew), and a record left open nowhere goes
 * (made after the unlink, it holds nothing); the OPEN answers STALE, as
 * above. */
static bool unlinked_meanwhile(struct fcache *fc, int bfd, const struct frame_fop *f,
			       uint64_t counted)
{
	struct bstore_obj rec;

	pthread_mutex_lock(&fc->lk);
	struct fobj *o = fobj_find(fc, f->obj);
	bool got = o && bstore_obj_get(fc->bs, o->lid, &rec) == 0;
	pthread_mutex_unlock(&fc->lk);
	if (!got) {   /* dropped meanwhile: by that unlink's mount */
		atomic_fetch_add(&fc->opens_stale, 1);
		return true;
	}
	int pfd = rec_path_fd(bfd, &rec);
	bool gone = backing_nameless(pfd);
	if (pfd >= 0)
		close(pfd);
	if (!gone)
		return false;
	pthread_mutex_lock(&fc->lk);
	struct hold **hp, *hd;
	if ((o = fobj_find(fc, f->obj)) != NULL &&
	    (hd = hold_find(o, f->digest, &hp)) != NULL && hd->n >= counted &&
	    o->opens >= counted) {
		hd->n -= (uint32_t)counted;
		o->opens -= (uint32_t)counted;
		for (unsigned k = 0; k < HOLD_SEEN && f->token; k++)
			if (hd->seen[k] == f->token)
				hd->seen[k] = 0;
		if (!hd->n) {
			*hp = hd->next;
			free(hd);
		}
	}
	/* (under the same lock: a later OPEN finds no record, STALE) */
	bool drop = o && !o->opens;
	if (drop) {
		bstore_obj_delete(fc->bs, o->lid);
		fobj_forget(fc, f->obj);
		atomic_fetch_add(&fc->dropped, 1);
	}
	pthread_mutex_unlock(&fc->lk);
	if (drop)
		marks_forget(fc, f->obj);
	atomic_fetch_add(&fc->opens_stale, 1);
	return true;
}

int serve_open(struct fcache *fc, const struct frame_fop *f,
	       const uint8_t *payload, struct frame_hdr *r)
{
	struct bstore_obj rec;
	int rc = 0;

	if (f->off > FCACHE_UNIT_MAX) {
		snprintf(r->text, sizeof(r->text), "OPEN stripe unit out of range");
		return -EPROTO;
	}
	bool opener = (f->flags & FRAME_FILE_HOME) && !(f->flags & FRAME_FILE_RECLAIM);
	bool made = false;
	uint64_t counted = 0;
	pthread_mutex_lock(&fc->lk);
	struct fobj *o = fobj_find(fc, f->obj);
	int bfd = fc->backing_fd;
	if (!o) {
		memset(&rec, 0, sizeof(rec));
		rec.size = f->size;
		rec.uflags = f->off;   /* the file's stripe unit, in blocks */
		rec.handle_type = f->handle_type;
		rec.handle_len = f->len;
		memcpy(rec.handle, payload, f->len);
		gid_put(rec.path, f->obj);
		bool autou = fc->unit_set && !fc->unit;
		pthread_mutex_unlock(&fc->lk);
		if ((autou || opener) && bfd >= 0) {
			int pfd = rec_path_fd(bfd, &rec);
			/* an opener's file with no name left (or gone):
			 * unlinked (a rename over it) between its lookup
			 * and this OPEN. If the record went with the unlink
			 * (UNLINK at the home of a file open nowhere drops
			 * it, after its linger, and its blocks everywhere), a
			 * record made now would show the file empty; none is
			 * made, and the OPEN answers STALE: the kernel looks
			 * the path up again (LOOKUP_REVAL) and opens what it
			 * names now, as if the open came after the unlink. An
			 * unlink after this look finds the open counted (the
			 * mount unlinks the backing file before it tells the
			 * home), or, if it comes before the record is made,
			 * unlinked_meanwhile catches it */
			if (opener && backing_nameless(pfd)) {
				if (pfd >= 0)
					close(pfd);
				atomic_fetch_add(&fc->opens_stale, 1);
				snprintf(r->text, sizeof(r->text), "the file was "
					 "unlinked since the opener looked it up");
				return -ESTALE;
			}
			/* a unit its home fixed before (a record that went,
			 * or NVRAM lost) holds over the mount's offer */
			uint64_t u = autou && pfd >= 0 ? unit_on_backing(fc, pfd) : 0;
			if (pfd >= 0)
				close(pfd);
			if (u)
				rec.uflags = u;
		}
		rc = record_create(fc, &rec, false, WRITE_HOLD_NS);
		pthread_mutex_lock(&fc->lk);
		struct fobj *had = fobj_find(fc, f->obj);
		if (!rc && had) {
			/* another OPEN made it meanwhile */
			bstore_obj_delete(fc->bs, rec.id);
			o = had;
			rc = bstore_obj_get(fc->bs, o->lid, &rec);
		} else if (!rc && !(o = fobj_insert(fc, f->obj, rec.id))) {
			bstore_obj_delete(fc->bs, rec.id);
			rc = -ENOMEM;
		} else if (!rc) {
			/* made here now: a write before was told to the
			 * owners at its last close under the record before
			 * (or, that broadcast lost, left to their 30 s pass) */
			o->wrote = false;
			made = true;
		}
	} else {
		rc = bstore_obj_get(fc->bs, o->lid, &rec);
		if (!rc && (rec.handle_len != f->len || rec.handle_type != f->handle_type ||
			    memcmp(rec.handle, payload, f->len) != 0)) {
			snprintf(r->text, sizeof(r->text), "object id clash: another "
				 "file holds this id");
			rc = -EEXIST;
		}
	}
	if (!rc && !rec.uflags && f->off) {
		/* the first OPEN that offers one (this one's record made
		 * by another OPEN meanwhile, or one that had none) */
		rec.uflags = f->off;
		rc = bstore_obj_update(fc->bs, &rec);
	}
	if (!rc)
		r->fop.off = rec.uflags;
	if (!rc)
		label_once(fc, o, &rec);
	if (!rc && (f->flags & FRAME_FILE_HOME)) {
		uint64_t n = f->flags & FRAME_FILE_RECLAIM ? f->blk : 1;
		struct hold **hp, *h = hold_find(o, f->digest, &hp);
		if (h && f->token && hold_seen(h, f->token))
			n = 0;   /* counted when it came first */
		if (n > RECLAIM_MAX || o->opens + n > UINT32_MAX) {
			snprintf(r->text, sizeof(r->text), "open count out of range");
			rc = -EPROTO;
		} else if (!h && !(h = *hp = calloc(1, sizeof(*h)))) {
			rc = -ENOMEM;
		} else {
			h->inst = f->digest;
			h->n += (uint32_t)n;
			o->opens += (uint32_t)n;
			counted = n;
			if (n && f->token)
				h->seen[h->seen_at++ % HOLD_SEEN] = f->token;
			r->fop.size = rec.size;
			r->fop.epoch = home_epoch(o);
			r->fop.blk = o->mtime_ns;   /* as GETATTR's */
		}
	}
	pthread_mutex_unlock(&fc->lk);
	if (made && counted && opener && bfd >= 0 && unlinked_meanwhile(fc, bfd, f, counted)) {
		snprintf(r->text, sizeof(r->text), "the file was unlinked since "
			 "the opener looked it up");
		return -ESTALE;
	}
	/* the object table stayed full for the hold: the opener waits on
	 * while write-back may free a record (a slow or stalled backing);
	 * not when every record is of a file open here (none will go) */
	if (rc == -ENOSPC && !wb_failing(fc) && records_freeable(fc))
		answer_full(fc, r);
	return rc;
}

/* Under fc->lk, at o's home, its last close with WRITER and WB: its
 * own blocks written back after delay_ns (as a WRITEBACK would have
 * them). Whether the file ends within its first stripe, the home's: then
 * no other owner holds a block of it (one of a write that failed past
 * the size: the dirty-expiry pass's), and the mount asks none. */
static bool close_writeback(struct fcache *fc, struct fobj *o, uint64_t delay_ns)
{
	struct bstore_obj rec;

	wb_schedule(fc, o, delay_ns);
	/* (block 0 is the home's whatever the unit: auto's unset one too) */
	return !bstore_obj_get(fc->bs, o->lid, &rec) &&
	       (rec.size <= fc->bsize ||
		(rec.uflags && rec.size <= (uint64_t)rec.uflags * fc->bsize));
}

int serve_close(struct fcache *fc, const struct frame_fop *f,
		struct frame_hdr *r)
{
	int rc = 0;

	pthread_mutex_lock(&fc->lk);
	struct fobj *o = fobj_find(fc, f->obj);
	struct hold **hp = NULL, *h = o ? hold_find(o, f->digest, &hp) : NULL;
	if (!o || !o->opens || !h) {
		/* (no holder: this mount's opens were released as a gone
		 * mount's; the other mounts' are not its to close; its writes
		 * still count for the last close) */
		if (o && (f->flags & FRAME_FILE_WRITER))
			o->wrote = true;
		r->fop.flags = 0;   /* (not the request's) */
		rc = -ENOENT;
	} else {
		if (!--h->n) {
			*hp = h->next;
			free(h);
		}
		o->wrote |= (f->flags & FRAME_FILE_WRITER) != 0;
		r->fop.flags = 0;   /* (not the request's) */
		if (!--o->opens) {
			r->fop.flags = FRAME_FILE_LAST |
				       (o->doomed ? FRAME_FILE_DOOMED : 0) |
				       (o->wrote ? FRAME_FILE_WRITER : 0);
			if (o->wrote && !o->doomed && (f->flags & FRAME_FILE_WB) &&
			    close_writeback(fc, o, f->size))
				r->fop.flags |= FRAME_FILE_WB;
			o->wrote = false;
			/* doomed: it lingers (an OPEN looked up before the
			 * unlink may be on its way), then the write-back
			 * thread drops it everywhere (linger_drop) */
			if (o->doomed)
				o->linger_ns = clock_now_ns() + UNLINK_LINGER_NS;
		}
	}
	pthread_mutex_unlock(&fc->lk);
	return rc;
}

/* o's mtime not written into its record: the record keeps its older
 * time, which a restart would show. */
static void mtime_lost(const struct fobj *o)
{
	log_warn("file cache: the mtime of object %016" PRIx64 " not kept in NVRAM",
		 o->gid);
}

/* Under fc->lk: o's mtime_ns into its record, if not there yet. */
static void mtime_keep(struct fcache *fc, const struct fobj *o)
{
	struct bstore_obj rec;

	if (bstore_obj_get(fc->bs, o->lid, &rec) || rec.utime == o->mtime_ns)
		return;
	rec.utime = o->mtime_ns;
	if (bstore_obj_update(fc->bs, &rec))
		mtime_lost(o);
}

/* SETSIZE with MTIME: a time set on the file through a mount (utimens),
 * kept as the file's from here on; the owners' write-backs that follow
 * move the backing file's, not this. With MTIME_PAY, the time of a
 * mount's last write that did not tell the home (a size bound's,
 * fcache.h): taken only if nothing changed the mtime here since. */
static int serve_mtime(struct fcache *fc, const struct frame_fop *f,
		       struct frame_hdr *r)
{
	int rc = -ESTALE;   /* no record: the backing's time is the file's */
	bool pay = f->flags & FRAME_FILE_MTIME_PAY;

	pthread_mutex_lock(&fc->lk);
	struct fobj *o = fobj_find(fc, f->obj);
	if (o && (!pay || (o->mtime_at <= f->size && f->size != FRAME_MTIME_NONE))) {
		o->mtime_ns = f->size == FRAME_MTIME_NONE ? 0 : f->size ? f->size : clock_wall_ns();
		o->mtime_at = clock_wall_ns();
		mtime_keep(fc, o);
	}
	if (o) {
		r->fop.blk = o->mtime_ns;
		rc = 0;
	}
	pthread_mutex_unlock(&fc->lk);
	return rc;
}

/* The home's record: size read (set: written) under the table lock. A
 * size that changes is told to the shadow first (its FMARK_SIZE_BLK
 * mark, fmarks.h), under that mark's stripe lock, which every SETSIZE
 * of the file holds: a write-back's take-out cannot come between the
 * look and the change. */
int serve_size(struct fcache *fc, uint32_t type, const struct frame_fop *f,
	       struct frame_hdr *r)
{
	struct bstore_obj rec;
	bool tell = fc->mark && type == FT_FILE_SETSIZE, told = false, copy = false;
	int rc;

	if (type == FT_FILE_SETSIZE && (f->flags & FRAME_FILE_MTIME))
		return serve_mtime(fc, f, r);
	if (f->off > FCACHE_UNIT_MAX) {
		snprintf(r->text, sizeof(r->text), "SETSIZE stripe unit out of range");
		return -EPROTO;
	}
	if (tell)
		fmark_sent_lock(fc->sent, f->obj, FMARK_SIZE_BLK);
again:
	pthread_mutex_lock(&fc->lk);
	struct fobj *o = fobj_find(fc, f->obj);
	rc = o ? bstore_obj_get(fc->bs, o->lid, &rec) : -ENOENT;
	uint64_t was = rc ? 0 : rec.size;   /* where an append goes */
	uint64_t wall = clock_wall_ns();
	if (!rc && type == FT_FILE_SETSIZE && f->off && !rec.uflags &&
	    !(f->flags & FRAME_FILE_APPEND) && fc->unit_set && !fc->unit &&
	    at_home(fc, f->obj)) {
		/* stripe_unit=auto, a file of one block at most when first
		 * cached: the first size set that offers a unit (a truncate
		 * or fallocate past that block) fixes it, as the first OPEN
		 * that offers one does */
		rec.uflags = f->off;
		rc = bstore_obj_update(fc->bs, &rec);
		if (!rc)
			label_once(fc, o, &rec);
	}
	if (!rc && type == FT_FILE_SETSIZE) {
		uint64_t want = f->flags & FRAME_FILE_EXTEND ?
				(f->size > rec.size ? f->size : rec.size) : f->size;
		if (f->flags & FRAME_FILE_APPEND)
			want = f->size > f->blk || rec.size > f->blk - f->size ?
			       UINT64_MAX : rec.size + f->size;
		if (want == UINT64_MAX) {
			rc = -EFBIG;
		} else if (want != rec.size && tell && !told &&
			   !fmark_sent_has(fc->sent, f->obj, FMARK_SIZE_BLK)) {
			pthread_mutex_unlock(&fc->lk);
			mark_dirty(fc, f->obj, FMARK_SIZE_BLK, false);
			told = true;
			goto again;
		} else if (want != rec.size) {
			bool shrink = want < rec.size;
			rec.size = want;
			rec.utime = wall;   /* the mtime, below */
			rc = bstore_obj_update(fc->bs, &rec);
			copy = !rc && tell && fc->replicas == 2;
			if (!rc && shrink)
				home_shrunk(o);
			/* the backing file follows the size within the 30 s
			 * pass, as a dirty block would, with no write here
			 * (an ftruncate or fallocate that grew it) */
			if (!rc && !o->wb_due_ns)
				o->wb_due_ns = clock_now_ns() + DIRTY_EXPIRE_NS;
		} else if (tell && fc->replicas == 2 && !atomic_load(&fc->shadow_ok) &&
			   !atomic_load(&fc->shadow_down_ns) &&
			   fmark_sent_has(fc->sent, f->obj, FMARK_SIZE_BLK)) {
			/* the size as it is, not written back (its mark), which
			 * a SETSIZE whose copy failed may have set here alone:
			 * the writer that asks again is answered once the
			 * shadow has it, not before the resync (a shadow taken
			 * for dead: kept here alone, as that SETSIZE was) */
			copy = true;
		}
		if (!rc) {   /* a write, an append or a truncate */
			o->mtime_ns = o->mtime_at = wall;
			if (rec.utime != wall) {   /* (a size change took it) */
				rec.utime = wall;
				if (bstore_obj_update(fc->bs, &rec))
					mtime_lost(o);
			}
			o->wrote = true;
		}
	}
	if (!rc) {
		r->fop.size = f->flags & FRAME_FILE_APPEND ? was : rec.size;
		r->fop.off = rec.uflags;
		r->fop.blk = o->mtime_ns;
		r->fop.epoch = home_epoch(o);
	}
	if (rc == -ENOENT && type == FT_FILE_SETSIZE)
		rc = -ESTALE;   /* no record: OPEN first */
	pthread_mutex_unlock(&fc->lk);
	/* replicas=2: the new size in the shadow too before the reply (in
	 * the order of the changes: the stripe lock is held) */
	if (copy)
		rc = size_replica_send(fc, &rec, f->obj, rec.size);
	if (tell)
		fmark_sent_unlock(fc->sent, f->obj, FMARK_SIZE_BLK);
	return rc;
}

void drop_obj(struct fcache *fc, uint64_t gid)
{
	pthread_mutex_lock(&fc->lk);
	struct fobj *o = fobj_find(fc, gid);
	if (o) {
		bstore_obj_delete(fc->bs, o->lid);
		fobj_forget(fc, gid);
		atomic_fetch_add(&fc->dropped, 1);
	}
	pthread_mutex_unlock(&fc->lk);
	if (o)
		marks_forget(fc, gid);
}

/* Wait out the grace after a restart: the mounts' opens are not all
 * counted again before it ends. */
static void grace_wait(struct fcache *fc)
{
	uint64_t now;

	while ((now = clock_now_ns()) < fc->grace_end_ns) {
		uint64_t left = fc->grace_end_ns - now;
		usleep((useconds_t)(left > 100000000ull ? 100000 : left / 1000 + 1));
	}
}

int serve_unlink(struct fcache *fc, const struct frame_fop *f,
		 struct frame_hdr *r)
{
	grace_wait(fc);
	pthread_mutex_lock(&fc->lk);
	struct fobj *o = fobj_find(fc, f->obj);
	if (o) {
		/* open somewhere: dropped at its last close; open nowhere:
		 * kept a while (linger_ns) for an open looked up before */
		o->doomed = true;
		r->fop.flags = FRAME_FILE_DOOMED;
		if (!o->opens) {
			o->linger_ns = clock_now_ns() + UNLINK_LINGER_NS;
			atomic_fetch_add(&fc->lingered, 1);
		}
	}
	pthread_mutex_unlock(&fc->lk);
	if (!o)
		drop_obj(fc, f->obj);   /* (the mount drops it everywhere) */
	return 0;
}
