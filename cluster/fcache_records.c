/* fcache_records.c - the tables of a node's objects and replicas, and
 * their records: made, and reclaimed when the object table is full. */
#include "cluster/fcache_int.h"

static struct fobj **slot_of(struct fcache *fc, uint64_t gid)
{
	struct fobj **p = &fc->tab[(gid ^ gid >> 29) % NBUCKETS];

	while (*p && (*p)->gid != gid)
		p = &(*p)->next;
	return p;
}

struct fobj *fobj_find(struct fcache *fc, uint64_t gid)
{
	return *slot_of(fc, gid);
}

/* The record's path field names the object's cluster-wide id. */
void gid_put(char *path, uint64_t gid)
{
	snprintf(path, BSTORE_PATH_MAX, "fcache:%016" PRIx64, gid);
}

bool gid_get(const char *path, uint64_t *gid)
{
	char *end;

	if (strncmp(path, "fcache:", 7) != 0)
		return false;
	*gid = strtoull(path + 7, &end, 16);
	return *end == 0 && end == path + 23;
}

void rec_handle(const struct bstore_obj *rec, struct rec_handle *h)
{
	h->fh.handle_bytes = rec->handle_len;
	h->fh.handle_type = (int)rec->handle_type;
	memcpy(h->fh.f_handle, rec->handle, rec->handle_len);
}

int rec_path_fd(int bfd, const struct bstore_obj *rec)
{
	struct rec_handle h;

	rec_handle(rec, &h);
	return open_by_handle_at(bfd, &h.fh, O_PATH | O_CLOEXEC);
}

bool backing_nameless(int pfd)
{
	struct stat st;

	if (pfd < 0)
		return errno == ESTALE || errno == ENOENT;
	return fstat(pfd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 0;
}

/* A replica record's path: the owner's index and the object's id. */
void rid_put(char *path, uint32_t owner, uint64_t gid)
{
	snprintf(path, BSTORE_PATH_MAX, "replica:%02x:%016" PRIx64, owner, gid);
}

bool rid_get(const char *path, uint32_t *owner, uint64_t *gid)
{
	char *end;

	if (strncmp(path, "replica:", 8) != 0 || path[10] != ':')
		return false;
	unsigned long o = strtoul(path + 8, &end, 16);
	if (end != path + 10 || o >= FMARK_OWNERS)
		return false;
	*owner = (uint32_t)o;
	*gid = strtoull(path + 11, &end, 16);
	return *end == 0 && end == path + 27;
}

/* Under rep_mx. */
struct robj **rslot_of(struct fcache *fc, uint32_t owner, uint64_t gid)
{
	struct robj **p = &fc->rtab[(gid ^ gid >> 29 ^ owner) % NBUCKETS];

	while (*p && ((*p)->gid != gid || (*p)->owner != owner))
		p = &(*p)->next;
	return p;
}

struct robj *rinsert(struct fcache *fc, uint32_t owner, uint64_t gid,
		     uint64_t lid)
{
	struct robj *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->owner = owner;
	o->gid = gid;
	o->lid = lid;
	*rslot_of(fc, owner, gid) = o;
	return o;
}

/* A replica record holding no copy: no block, no size. */
bool replica_empty(struct fcache *fc, uint64_t lid)
{
	struct bstore_obj rec;
	uint64_t nb = 1;

	return bstore_obj_counts(fc->bs, lid, &nb, NULL) == 0 && !nb &&
	       bstore_obj_get(fc->bs, lid, &rec) == 0 && !(rec.uflags & RSIZE_KNOWN);
}

/* Under rep_mx: the replica object goes, blocks and record. */
void rdrop(struct fcache *fc, struct robj **p)
{
	struct robj *o = *p;

	bstore_obj_delete(fc->bs, o->lid);
	*p = o->next;
	free(o);
}

/* The replica object of owner's gid (0: none). */
uint64_t replica_lid(struct fcache *fc, uint32_t owner, uint64_t gid)
{
	pthread_mutex_lock(&fc->rep_mx);
	struct robj *o = owner < FMARK_OWNERS ? *rslot_of(fc, owner, gid) : NULL;
	uint64_t lid = o ? o->lid : 0;
	pthread_mutex_unlock(&fc->rep_mx);
	return lid;
}

struct fobj *fobj_insert(struct fcache *fc, uint64_t gid, uint64_t lid)
{
	struct fobj *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->gid = gid;
	o->lid = lid;
	o->wrote = true;
	struct fobj **p = slot_of(fc, gid);
	o->next = NULL;
	*p = o;
	return o;
}

void fobj_free(struct fobj *o)
{
	while (o->hold) {
		struct hold *h = o->hold;
		o->hold = h->next;
		free(h);
	}
	free(o);
}

/* o's holder entry of mount run inst (NULL: none; *pp its link). */
struct hold *hold_find(struct fobj *o, uint64_t inst, struct hold ***pp)
{
	struct hold **p = &o->hold;

	while (*p && (*p)->inst != inst)
		p = &(*p)->next;
	if (pp)
		*pp = p;
	return *p;
}

void fobj_forget(struct fcache *fc, uint64_t gid)
{
	struct fobj **p = slot_of(fc, gid);
	struct fobj *o = *p;

	if (o) {
		*p = o->next;
		fobj_free(o);
	}
}

/* ---- a full object table: records no longer needed go ---- */

/* Under fc->lk: whether o's record may go now (and if so, the mtime it
 * keeps is put on the backing file). Its file is open
 * nowhere (at the home: opens counts every mount's; an owner's record
 * has none, and a write that finds it gone makes it again: STALE, then
 * OPEN), holds no dirty block here (bstore_obj_delete_clean checks that
 * again, atomically), has no write-back due, and what the record alone
 * knows is on the backing file: its size is not ahead of the backing
 * file's, and with stripe_unit=auto its unit is there too (an OPEN that
 * makes the record again takes it from there, so no mount cuts the file
 * another way). A file gone from the backing: nothing to keep. */
static bool record_idle(struct fcache *fc, struct fobj *o, uint64_t now)
{
	struct bstore_obj rec;
	struct stat st;
	uint64_t nb = 0, nd = 0;

	if (o->opens || o->doomed || o->wb_due_ns || now < fc->grace_end_ns ||
	    fc->backing_fd < 0 || bstore_obj_counts(fc->bs, o->lid, &nb, &nd) || nd ||
	    bstore_obj_get(fc->bs, o->lid, &rec))
		return false;
	int pfd = rec_path_fd(fc->backing_fd, &rec);
	if (pfd < 0)
		return errno == ESTALE || errno == ENOENT;
	bool idle = fstat(pfd, &st) == 0 && rec.size <= (uint64_t)st.st_size &&
		    (!(fc->unit_set && !fc->unit && rec.uflags) ||
		     unit_on_backing(fc, pfd) == rec.uflags);
	uint64_t on_backing = (uint64_t)st.st_mtim.tv_sec * 1000000000ull +
			      (uint64_t)st.st_mtim.tv_nsec;
	if (idle && o->mtime_ns && at_home(fc, o->gid) &&
	    (o->mtime_put != o->mtime_ns || o->mtime_seen != on_backing)) {
		/* the mtime the home keeps goes with the record, onto the
		 * backing file (the write-backs moved its own): put there by
		 * the write-back thread (mtime_out), not here under fc->lk,
		 * which a stalled backing would hold for every request */
		idle = false;
		o->mtime_wanted = true;
		wb_schedule(fc, o, 0);
	}
	close(pfd);
	return idle;
}

/* Under fc->lk: up to max idle records go (record_idle), their ids in
 * gone[] for the caller to tell the shadow (marks_forget, once fc->lk
 * is let go); returns how many. The scan starts where the last one
 * stopped, so the table's records take turns. */
static size_t records_reclaim(struct fcache *fc, uint64_t *gone, size_t max)
{
	uint64_t now = clock_now_ns();
	size_t n = 0;

	for (size_t k = 0; k < NBUCKETS && n < max; k++) {
		size_t b = (fc->reclaim_at + k) % NBUCKETS;
		for (struct fobj **p = &fc->tab[b]; *p && n < max;) {
			struct fobj *o = *p;
			if (record_idle(fc, o, now) &&
			    bstore_obj_delete_clean(fc->bs, o->lid) == 0) {
				gone[n++] = o->gid;
				*p = o->next;
				fobj_free(o);
				continue;
			}
			p = &o->next;
		}
		if (n >= max)
			fc->reclaim_at = b;
	}
	if (n)
		atomic_fetch_add(&fc->reclaimed, n);
	return n;
}

/* Under rep_mx: the replica records that hold no copy any more (every
 * block cleared, no size kept) go. Returns how many. */
static size_t replicas_reclaim(struct fcache *fc)
{
	size_t n = 0;

	for (size_t b = 0; b < NBUCKETS; b++)
		for (struct robj **p = &fc->rtab[b]; *p;) {
			if (replica_empty(fc, (*p)->lid)) {
				rdrop(fc, p);
				n++;
			} else {
				p = &(*p)->next;
			}
		}
	if (n)
		atomic_fetch_add(&fc->reclaimed, n);
	return n;
}

/* Whether a wait for space (back-pressure: the write-back frees some)
 * begun at since (clock_now_ns) is over after a try that returned *rc: it
 * succeeded or failed otherwise, hold_ns went by, or the node is
 * stopping (no write-back will free any): then *rc is -ESHUTDOWN, which
 * the node answers by ending the connection unanswered, so the writer
 * asks again once the node is back (fcache_serve). */
bool space_wait_over(struct fcache *fc, uint64_t since, uint64_t hold_ns, int *rc)
{
	if (*rc == -ENOSPC && atomic_load(&fc->stopping)) {
		*rc = -ESHUTDOWN;
		return true;
	}
	return *rc != -ENOSPC || clock_now_ns() - since >= hold_ns;
}

/* Under fc->lk: up to max records of files unlinked while open nowhere
 * (lingering, fobj.linger_ns) go now, here, their ids in gone[]: room
 * comes before an open looked up before the unlink (answered STALE, it
 * looks the name up again). Their blocks at the other owners are not
 * told (no request from here, under the lock): they go at those owners'
 * write-back, which finds the backing file unlinked, once it is gone.
 * Returns how many. */
static size_t lingers_end(struct fcache *fc, uint64_t *gone, size_t max)
{
	size_t n = 0;

	for (size_t b = 0; b < NBUCKETS && n < max; b++)
		for (struct fobj **p = &fc->tab[b]; *p && n < max;) {
			struct fobj *o = *p;
			if (o->doomed && !o->opens && o->linger_ns) {
				bstore_obj_delete(fc->bs, o->lid);
				gone[n++] = o->gid;
				*p = o->next;
				fobj_free(o);
				continue;
			}
			p = &o->next;
		}
	if (n)
		atomic_fetch_add(&fc->dropped, n);
	return n;
}

bool records_freeable(struct fcache *fc)
{
	bool some = false;

	pthread_mutex_lock(&fc->lk);
	for (size_t b = 0; b < NBUCKETS && !some; b++)
		for (const struct fobj *o = fc->tab[b]; o && !some; o = o->next)
			some = !o->opens && (!o->doomed || o->linger_ns);
	pthread_mutex_unlock(&fc->lk);
	return some;
}

/* A record for the file in rec (an OPEN's, or a replica's): its id in
 * rec->id. The table full: replica records holding nothing go, then idle
 * records (records_reclaim); with none idle, write-back runs (a file
 * written back and closed becomes idle) and this waits, as a write does
 * for a block (back-pressure), hold_ns at most. Holding rep_mx (a
 * replica's, then: rep_held) or nothing; takes fc->lk itself. */
int record_create(struct fcache *fc, struct bstore_obj *rec, bool rep_held,
		  uint64_t hold_ns)
{
	uint64_t gone[RECLAIM_BATCH];
	int rc;

	bool said = false;
	for (uint64_t since = clock_now_ns();;) {
		rc = bstore_obj_create(fc->bs, rec);
		if (space_wait_over(fc, since, hold_ns, &rc))
			return rc;
		if (!rep_held)
			pthread_mutex_lock(&fc->rep_mx);
		size_t nr = replicas_reclaim(fc);
		if (!rep_held)
			pthread_mutex_unlock(&fc->rep_mx);
		pthread_mutex_lock(&fc->lk);
		size_t n = records_reclaim(fc, gone, RECLAIM_BATCH);
		/* (not with rep_mx held: their marks at the shadow, of
		 * dirty blocks, must go with them, marks_forget) */
		if (!n && !rep_held)
			n = lingers_end(fc, gone, RECLAIM_BATCH);
		pthread_mutex_unlock(&fc->lk);
		/* (no dirty block, so no mark at the shadow but stale ones;
		 * not told while rep_mx is held: the shadow may be waiting
		 * for ours the same way, round the ring) */
		for (size_t k = 0; k < n; k++)
			if (rep_held)
				fmark_sent_drop_obj(fc->sent, gone[k]);
			else
				marks_forget(fc, gone[k]);
		if (!n && !nr) {
			if (!said)
				log_info("file cache: the object table is full (%u "
					 "files and copies); writing back so that "
					 "closed files' records can go",
					 bstore_geom(fc->bs)->nobjs);
			said = true;
			wb_kick_all(fc);
			/* rep_mx let go meanwhile: the owners' CLEARs free
			 * copies (the caller looks again) */
			if (rep_held)
				pthread_mutex_unlock(&fc->rep_mx);
			usleep(SPACE_WAIT_MS * 1000);
			if (rep_held)
				pthread_mutex_lock(&fc->rep_mx);
		}
	}
}
