/* fcache.c - a node's file cache manager; see fcache.h. */
#include "cluster/fcache.h"

#include "cluster/fmarks.h"
#include "common/clock.h"
#include "common/log.h"
#include "pmem/bstore.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define NBUCKETS 4096
/* A write short of space waits for write-back this long at most. */
#define SPACE_WAIT_MS 10
#define SPACE_TRIES 1000
/* Dirty blocks are written back at most this long after their first write
 * since the last write-back, whatever the opens say: a mount that dies
 * before it asks for the write-back of a closed file leaves nothing dirty
 * for good (as a page cache's dirty_expire). */
#define DIRTY_EXPIRE_NS (30ull * 1000000000ull)
/* epoch_known: how long an owner trusts a file's epoch it learnt */
#define EPOCH_TRUST_NS 1000000000ull
/* The shadow is asked whether it holds this node's whole list of marks
 * this often; after a SET that failed, writers try again after this. */
#define SHADOW_PING_NS (2ull * 1000000000ull)
#define SHADOW_RETRY_NS (1000000000ull)
/* At most this many handles reclaimed in one OPEN (a mount's count). */
#define RECLAIM_MAX (1u << 24)
/* At most this many idle records go at once when the table is full. */
#define RECLAIM_BATCH 64

/* One object this node knows: its store id and, at its home, the file's
 * cluster-wide state that lives only as long as its open handles. */
struct fobj {
	uint64_t gid;          /* cluster-wide id */
	uint64_t lid;          /* the store's id */
	uint32_t opens;        /* at the home: handles open cluster-wide */
	bool doomed;           /* unlinked while open: never written back */
	/* at the home: a write may have been made since the last close
	 * that had the owners write back (FRAME_FILE_WRITER): set when the
	 * record is found here at a start (a restarted home cannot tell),
	 * by a writing mount's CLOSE (also one that finds no open of its
	 * own), by a SETSIZE, and when a gone mount's opens are released;
	 * clear when an OPEN makes the record; cleared by the last close
	 * cluster-wide, which says so */
	bool wrote;
	uint64_t wb_due_ns;    /* 0: no write-back scheduled */
	/* the backing file's size when past_backing_end last looked (0:
	 * never): a block below it is taken as having backing bytes, not
	 * looked at again (a hint; only a fresh look says there are none) */
	uint64_t backing_seen;
	bool labeled;          /* its unit is on its backing file (auto) */
	/* at the home: the file's mtime (ns since the epoch, this node's
	 * clock) as of its last write, truncate or time set through a
	 * mount; 0: none, the backing file's holds. The owners' write-backs
	 * move the backing file's, so while the file is cached this one is
	 * the file's. Kept in the record too (its utime, mtime_keep), so a
	 * restarted home has it */
	uint64_t mtime_ns;
	/* at the home: when (this node's clock, ns) mtime_ns last changed;
	 * after a restart, the start */
	uint64_t mtime_at;
	/* size epoch (fcache.h): at the home, the file's (set at its first
	 * use after the record is made here, moved by every change that
	 * lowers the record's size); at another owner, the newest it knows
	 * (0: none yet, ask the home), trusted for EPOCH_TRUST_NS from
	 * epoch_at (clock_now_ns), and after a question to the home that
	 * failed at asked_fail, none is asked for as long */
	uint64_t epoch, epoch_at, asked_fail;
	/* at the home: whose opens (a mount's run id, struct minst; 0: a
	 * mount that sends none) make up opens */
	struct hold *hold;
	struct fobj *next;
};

struct hold {
	uint64_t inst;
	uint32_t n;
	struct hold *next;
};

/* A mount's run (fcache_mount_conn): its connections here, and since
 * when it has none. */
struct minst {
	uint64_t inst;
	uint32_t conns;
	uint64_t gone_ns;
	struct minst *next;
};

/* A replica object at the shadow (replicas=2): the copies of one owner's
 * dirty blocks of one file, in this node's store under its own record
 * ("replica:OWNER:GID"), apart from the table the write-back walks. */
struct robj {
	uint32_t owner;        /* the owner's node index */
	uint64_t gid, lid;
	struct robj *next;
};
/* A replica record's uflags: its size field holds the owner's size of
 * the file (the owner is its home; MARK REPLICA of FMARK_SIZE_BLK), kept
 * while the size's mark is. */
#define RSIZE_KNOWN 1u

struct fcache {
	struct bstore *bs;
	uint32_t bsize;
	uint64_t digest;
	uint32_t self;
	char side[4200];       /* PATH.backing: the attached backing dir */
	uint32_t replicas;     /* 1 or 2, fixed by the first ATTACH (and
				* kept in PATH.backing); 0: none yet */
	/* the mounts' stripe_unit in bytes, 0: auto; fixed by the first
	 * ATTACH with replicas and kept beside it (unit_set) */
	uint64_t unit;
	bool unit_set;

	pthread_mutex_t lk;    /* the table, the backing, the thread's state */
	pthread_cond_t cv;
	struct fobj *tab[NBUCKETS];
	int backing_fd;        /* -1: no mount attached yet */
	struct fcache_ident bid;  /* the backing directory's */
	bool wb_all;
	/* fcache_stop called: the thread ends (told under lk), and waits
	 * for space end (read without it) */
	atomic_bool stopping;
	uint64_t grace_end_ns; /* reclaims only, before this (fcache.h) */
	size_t reclaim_at;     /* records_reclaim's next bucket */
	pthread_t thread;
	pthread_mutex_t wb_mx; /* one write-back pass at a time */

	atomic_uint_fast64_t served_bytes, written_back, wb_errors, dropped,
		writes, reads, reclaimed;

	/* dirty marks (fmarks.h): this node's, told to its shadow, and
	 * those of the node whose shadow this is */
	struct fmark_sent *sent;
	struct fmark_tab *marks;
	fcache_mark_fn mark;        /* NULL: no shadow (one node, tests) */
	void *mark_arg;
	uint32_t self_idx;
	atomic_bool shadow_ok;      /* the shadow holds our whole list */
	atomic_uint_fast64_t shadow_failed_ns, skipped, mark_errors;
	uint64_t next_ping_ns;      /* the write-back thread's */
	struct log_limit mark_log;

	/* replicas=2: the blocks of the node whose shadow this is, and
	 * how many this node sent to its shadow. rep_mx orders every
	 * change of the replicas: a CLEAR's drop against a new REPLICA
	 * of the same block (serve_mark). */
	pthread_mutex_t rep_mx;
	struct robj *rtab[NBUCKETS];
	atomic_uint_fast64_t replicas_sent, replicas_taken, replica_errors,
		replicas_written, replica_bytes;
	/* replicas=2 with the shadow dead to the heartbeats (fcache.h):
	 * since when (0: it is not), the heartbeats' timeout, since when
	 * writes are kept here alone (0: none since it went down) */
	atomic_uint_fast64_t shadow_down_ns, degraded_ns, degraded_writes, wb_held;
	/* writes acknowledged alone or failed at the shadow, ever: a resync
	 * during which one came does not make the shadow current */
	atomic_uint_fast64_t uncopied;
	atomic_uint shadow_timeout_ms;
	struct log_limit degraded_log;
	/* per owner index: since when it is down (fcache_owner_down), 0:
	 * up; its replicas are written back here after orphan_ns */
	atomic_uint_fast64_t down_since[FMARK_OWNERS];
	uint64_t orphan_ns;

	/* mounts' runs (under lk), how long one may have no connection
	 * before its opens are released, and the way to the other nodes
	 * for the write-backs and drops that follows */
	struct minst *mounts;
	uint64_t mount_gone_ns;
	atomic_uint_fast64_t mounts_gone, opens_released;
	/* READs and WRITEs with BOUND: answered BOUND_OK, or not; and the
	 * GETATTRs to homes for an epoch this node did not know */
	atomic_uint_fast64_t bounds_ok, bounds_refused, epochs_asked;
	/* absent blocks written with no old bytes: past the backing's end */
	atomic_uint_fast64_t past_end;
	uint32_t n_nodes;
	fcache_call_fn call;
	void *call_arg;
};

static struct fobj **slot_of(struct fcache *fc, uint64_t gid)
{
	struct fobj **p = &fc->tab[(gid ^ gid >> 29) % NBUCKETS];

	while (*p && (*p)->gid != gid)
		p = &(*p)->next;
	return p;
}

static struct fobj *find(struct fcache *fc, uint64_t gid)
{
	return *slot_of(fc, gid);
}

/* The record's path field names the object's cluster-wide id. */
static void gid_put(char *path, uint64_t gid)
{
	snprintf(path, BSTORE_PATH_MAX, "fcache:%016" PRIx64, gid);
}

static bool gid_get(const char *path, uint64_t *gid)
{
	char *end;

	if (strncmp(path, "fcache:", 7) != 0)
		return false;
	*gid = strtoull(path + 7, &end, 16);
	return *end == 0 && end == path + 23;
}

/* A record's file handle, as open_by_handle_at takes it. */
struct rec_handle {
	struct file_handle fh;
	unsigned char b[BSTORE_HANDLE_MAX];
};

static void rec_handle(const struct bstore_obj *rec, struct rec_handle *h)
{
	h->fh.handle_bytes = rec->handle_len;
	h->fh.handle_type = (int)rec->handle_type;
	memcpy(h->fh.f_handle, rec->handle, rec->handle_len);
}

/* A replica record's path: the owner's index and the object's id. */
static void rid_put(char *path, uint32_t owner, uint64_t gid)
{
	snprintf(path, BSTORE_PATH_MAX, "replica:%02x:%016" PRIx64, owner, gid);
}

static bool rid_get(const char *path, uint32_t *owner, uint64_t *gid)
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
static struct robj **rslot_of(struct fcache *fc, uint32_t owner, uint64_t gid)
{
	struct robj **p = &fc->rtab[(gid ^ gid >> 29 ^ owner) % NBUCKETS];

	while (*p && ((*p)->gid != gid || (*p)->owner != owner))
		p = &(*p)->next;
	return p;
}

static struct robj *rinsert(struct fcache *fc, uint32_t owner, uint64_t gid,
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
static bool replica_empty(struct fcache *fc, uint64_t lid)
{
	struct bstore_obj rec;
	uint64_t nb = 1;

	return bstore_obj_counts(fc->bs, lid, &nb, NULL) == 0 && !nb &&
	       bstore_obj_get(fc->bs, lid, &rec) == 0 && !(rec.uflags & RSIZE_KNOWN);
}

/* Under rep_mx: the replica object goes, blocks and record. */
static void rdrop(struct fcache *fc, struct robj **p)
{
	struct robj *o = *p;

	bstore_obj_delete(fc->bs, o->lid);
	*p = o->next;
	free(o);
}

/* The replica object of owner's gid (0: none). */
static uint64_t replica_lid(struct fcache *fc, uint32_t owner, uint64_t gid)
{
	pthread_mutex_lock(&fc->rep_mx);
	struct robj *o = owner < FMARK_OWNERS ? *rslot_of(fc, owner, gid) : NULL;
	uint64_t lid = o ? o->lid : 0;
	pthread_mutex_unlock(&fc->rep_mx);
	return lid;
}

static struct fobj *insert(struct fcache *fc, uint64_t gid, uint64_t lid)
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

static void fobj_free(struct fobj *o)
{
	while (o->hold) {
		struct hold *h = o->hold;
		o->hold = h->next;
		free(h);
	}
	free(o);
}

/* o's holder entry of mount run inst (NULL: none; *pp its link). */
static struct hold *hold_find(struct fobj *o, uint64_t inst, struct hold ***pp)
{
	struct hold **p = &o->hold;

	while (*p && (*p)->inst != inst)
		p = &(*p)->next;
	if (pp)
		*pp = p;
	return *p;
}

static void forget(struct fcache *fc, uint64_t gid)
{
	struct fobj **p = slot_of(fc, gid);
	struct fobj *o = *p;

	if (o) {
		*p = o->next;
		fobj_free(o);
	}
}

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
	int rc = fcache_ident(fd, "", AT_EMPTY_PATH, &fc->bid);
	if (rc) {
		close(fd);
		return rc;
	}
	fc->backing_fd = fd;
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
					 fc->self, path, strerror(-rc));
			}
			fc->wb_all = true;  /* what a previous run left dirty */
			pthread_cond_signal(&fc->cv);
		}
	} else if (!ident_eq(&fc->bid, &want)) {
		snprintf(r->text, sizeof(r->text), "node %u serves another backing "
			 "directory than %.120s", fc->self, path);
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

/* ---- dirty marks at the shadow ---- */

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
 * The size's mark (FMARK_SIZE_BLK) goes alone. */
#define MARK_AHEAD 16
static void mark_dirty(struct fcache *fc, uint64_t gid, uint64_t blk)
{
	uint64_t list[MARK_AHEAD];
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
static void mark_clean(struct fcache *fc, uint64_t gid, const uint64_t *idx,
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
 * or past it: -EIO (replica_failed). */
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
static int replica_send(struct fcache *fc, uint64_t lid, uint64_t gid,
			uint64_t blk, uint32_t at, uint32_t n)
{
	struct block_copy c = { .lid = lid, .gid = gid, .blk = blk, .at = at, .n = n };
	char what[48];

	snprintf(what, sizeof(what), "block %" PRIu64, blk);
	return replica_put_to_shadow(fc, block_copy_send, &c, what, gid);
}

static uint32_t replicas_of(struct fcache *fc)
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

static int size_replica_send(struct fcache *fc, const struct bstore_obj *rec,
			     uint64_t gid, uint64_t size)
{
	struct size_copy c = { .rec = rec, .gid = gid, .size = size };
	return replica_put_to_shadow(fc, size_copy_send, &c, "the size", gid);
}

/* The object is gone here: its marks too. */
static void marks_forget(struct fcache *fc, uint64_t gid)
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
static bool past_backing_end(struct fcache *fc, uint64_t gid, uint64_t lid,
			     uint64_t blk, uint32_t *gen)
{
	struct bstore_obj rec;
	uint64_t size = 0, at = blk * fc->bsize;

	pthread_mutex_lock(&fc->lk);
	struct fobj *o = find(fc, gid);
	bool below = o && at < o->backing_seen;
	pthread_mutex_unlock(&fc->lk);
	if (below)
		return false;   /* it had bytes there: the writer sends them */
	*gen = bstore_block_gen(fc->bs, lid, blk);
	if (bstore_obj_get(fc->bs, lid, &rec) < 0 ||
	    backing_size(fc, &rec, &size) < 0)
		return false;
	pthread_mutex_lock(&fc->lk);
	if ((o = find(fc, gid)))
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
static void resync(struct fcache *fc)
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
	if (atomic_exchange(&fc->degraded_ns, 0))
		log_info("file cache: the next node (this node's shadow) is back: "
			 "it holds the copies of the writes kept here alone");
}

/* The write-back thread's look at the shadow, at most every
 * SHADOW_PING_NS (at once while it lacks our list). */
static void shadow_check(struct fcache *fc, uint64_t now)
{
	uint32_t rf = 0;

	if (!fc->mark || (atomic_load(&fc->shadow_ok) && now < fc->next_ping_ns))
		return;
	fc->next_ping_ns = now + SHADOW_PING_NS;
	if (atomic_load(&fc->shadow_ok) &&
	    mark_send(fc, FRAME_MARK_PING, 0, 0, 0, NULL, 0, &rf) == 0 &&
	    (rf & FRAME_MARK_SYNCED))
		return;
	resync(fc);
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

void fcache_set_peers(struct fcache *fc, uint32_t n_nodes, fcache_call_fn fn,
		      void *arg)
{
	pthread_mutex_lock(&fc->lk);
	fc->n_nodes = n_nodes;
	fc->call = fn;
	fc->call_arg = arg;
	pthread_mutex_unlock(&fc->lk);
}

void fcache_mount_conn(struct fcache *fc, uint64_t inst, bool up)
{
	pthread_mutex_lock(&fc->lk);
	struct minst **p = &fc->mounts;
	while (*p && (*p)->inst != inst)
		p = &(*p)->next;
	if (!*p && up && (*p = calloc(1, sizeof(**p))))
		(*p)->inst = inst;
	if (*p && up) {
		(*p)->conns++;
		(*p)->gone_ns = 0;
	} else if (*p && (*p)->conns && !--(*p)->conns) {
		(*p)->gone_ns = clock_now_ns();
	}
	pthread_mutex_unlock(&fc->lk);
}

/* A file left open nowhere by a gone mount: what its last close would
 * have had done (fdcl_release): written back by every owner now, or
 * dropped everywhere if unlinked while open. */
struct left { uint64_t gid; bool doomed; };

static void drop_obj(struct fcache *fc, uint64_t gid);
static int serve_writeback(struct fcache *fc, const struct frame_fop *f);

static void left_done(struct fcache *fc, const struct left *l)
{
	uint32_t type = l->doomed ? FT_FILE_DROP : FT_FILE_WRITEBACK;
	struct frame_fop f = { .obj = l->gid };   /* size 0: no delay */

	for (uint32_t i = 0; i < fc->n_nodes; i++) {
		if (i == fc->self_idx)
			continue;
		int rc = fc->call ? fc->call(fc->call_arg, i, type, &f, NULL) : -ENOTCONN;
		if (rc)
			log_warn("file cache: object %016" PRIx64 ", left open by a "
				 "gone mount: node index %u not told to %s: %s; it "
				 "does at its next write-back pass or close", l->gid, i,
				 l->doomed ? "drop it" : "write it back", strerror(-rc));
	}
	if (l->doomed)
		drop_obj(fc, l->gid);
	else
		serve_writeback(fc, &f);
}

/* The write-back thread: the runs without a connection for
 * mount_gone_ns lose their opens (fcache_mount_conn). */
static void mounts_check(struct fcache *fc, uint64_t now)
{
	struct left *left = NULL;
	size_t nleft = 0, cap = 0;
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
				if (nleft == cap) {
					size_t nc = cap ? 2 * cap : 16;
					struct left *x = realloc(left, nc * sizeof(*x));
					if (!x)
						continue;   /* its owners write back under pressure */
					left = x;
					cap = nc;
				}
				left[nleft++] = (struct left){ o->gid, o->doomed };
			}
		*p = m->next;
		free(m);
		runs++;
	}
	pthread_mutex_unlock(&fc->lk);
	if (!runs)
		return;
	atomic_fetch_add(&fc->mounts_gone, runs);
	atomic_fetch_add(&fc->opens_released, opens);
	log_warn("file cache: %" PRIu64 " mount(s) gone (no connection for %" PRIu64
		 " ms): their %" PRIu64 " open handle(s) released; %zu file(s) open "
		 "nowhere now, written back (or dropped, unlinked) by every owner",
		 runs, (uint64_t)(fc->mount_gone_ns / 1000000ull), opens, nleft);
	for (size_t k = 0; k < nleft; k++)
		left_done(fc, &left[k]);
	free(left);
}

/* ---- write-back ---- */

/* The backing file fd at least size bytes long, never shorter: other
 * nodes write their blocks past its end meanwhile (parallel
 * write-back), and an ftruncate to a size looked at before their writes
 * would cut those off, written back and clean here, so lost. fallocate
 * (mode 0) only ever grows a file and keeps every byte; where the file
 * system has none, the size is looked at again right before the
 * ftruncate (a window of one system call). */
static int backing_grow(int fd, uint64_t size)
{
	struct stat st;

	if (!size)
		return 0;
	if (fallocate(fd, 0, (off_t)size - 1, 1) == 0)
		return 0;
	if (errno != EOPNOTSUPP && errno != ENOSYS)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size < size && ftruncate(fd, (off_t)size) < 0)
		return -errno;
	return 0;
}

/* Write the object's dirty blocks to its backing file and fsync it (the
 * home also extends the file to its size). 0, or -errno (the blocks stay
 * dirty; a file that no longer exists is dropped: nothing is written). */
static int writeback(struct fcache *fc, uint64_t gid)
{
	struct bstore_obj rec;
	uint64_t lid, nb = 0, nd = 0;
	int fd = -1, rc = 0;

	pthread_mutex_lock(&fc->lk);
	struct fobj *o = find(fc, gid);
	int bfd = fc->backing_fd;
	bool doomed = o && o->doomed;
	lid = o ? o->lid : 0;
	pthread_mutex_unlock(&fc->lk);
	if (!lid || doomed)
		return 0;
	if (bfd < 0)
		return -EAGAIN;
	pthread_mutex_lock(&fc->wb_mx);
	/* every told block out of the set before anything is read
	 * (fmarks.h): a write after this tells the shadow again, with a
	 * newer number than seq, and the CLEAR below leaves that mark */
	uint64_t seq = 0, *told = NULL;
	size_t ntold = 0;
	if (fc->mark) {
		seq = fmark_last_seq(fc->sent);
		ntold = fmark_sent_take_obj(fc->sent, gid, &told);
	}
	if (bstore_obj_get(fc->bs, lid, &rec) < 0 ||
	    bstore_obj_counts(fc->bs, lid, &nb, &nd) < 0)
		goto out;
	struct rec_handle h;
	rec_handle(&rec, &h);
	if (!nd) {
		/* nothing dirty: the backing file is opened for writing only
		 * if it must grow to the record's size (a file only read
		 * through the cache is never written, nor even opened so) */
		struct stat pst;
		int pfd = open_by_handle_at(bfd, &h.fh, O_PATH | O_CLOEXEC);
		bool grow = pfd >= 0 && fstat(pfd, &pst) == 0 &&
			    rec.size > (uint64_t)pst.st_size;
		if (pfd >= 0)
			close(pfd);
		if (pfd >= 0 && !grow)
			goto out;
	}
	fd = open_by_handle_at(bfd, &h.fh, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		if (rc == -ESTALE || rc == -ENOENT) {
			/* the file is gone: its blocks have nowhere to go */
			bstore_obj_delete(fc->bs, lid);
			pthread_mutex_lock(&fc->lk);
			forget(fc, gid);
			pthread_mutex_unlock(&fc->lk);
			atomic_fetch_add(&fc->dropped, 1);
			marks_forget(fc, gid);
			rc = 0;
		}
		goto out;
	}
	struct stat fst;
	if (fstat(fd, &fst) < 0 || !S_ISREG(fst.st_mode)) {
		/* a handle from the wire names no regular file: nothing to do */
		rc = -EINVAL;
		goto out;
	}
	uint64_t *idx = nd ? calloc(nd, sizeof(*idx)) : NULL;
	uint64_t *ver = nd ? calloc(nd, sizeof(*ver)) : NULL;
	uint8_t *buf = malloc(fc->bsize);
	if ((nd && (!idx || !ver)) || !buf) {
		rc = -ENOMEM;
		goto free_out;
	}
	size_t n = nd ? bstore_obj_blocks(fc->bs, lid, true, idx, nd) : 0;
	n = n < nd ? n : nd;
	uint64_t bytes = 0;
	for (size_t k = 0; k < n && !rc; k++) {
		struct bstore_binfo bi;
		ver[k] = 0;
		if (bstore_block_read(fc->bs, lid, idx[k], 0, buf, fc->bsize, &bi) < 0)
			continue;   /* dropped meanwhile */
		ver[k] = bi.version;
		if (bi.valid && pwrite(fd, buf, bi.valid,
				       (off_t)(idx[k] * fc->bsize)) != (ssize_t)bi.valid)
			rc = errno ? -errno : -EIO;
		bytes += bi.valid;
	}
	if (!rc && rec.size && (uint64_t)fst.st_size < rec.size)
		rc = backing_grow(fd, rec.size);
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	for (size_t k = 0; k < n && !rc; k++)
		if (ver[k])
			bstore_block_clean(fc->bs, lid, idx[k], ver[k]);
	if (!rc)
		atomic_fetch_add(&fc->written_back, bytes);
free_out:
	free(idx);
	free(ver);
	free(buf);
out:
	if (fd >= 0)
		close(fd);
	if (ntold) {
		/* the shadow forgets the told blocks not dirty now: written
		 * back, or told ahead and never written; a block still dirty
		 * (its write-back failed, or written since) keeps its mark,
		 * and goes back in the told set, so that the write-back that
		 * cleans it clears the mark */
		size_t k = 0;
		for (size_t j = 0; j < ntold; j++) {
			struct bstore_binfo bi;
			if (told[j] == FMARK_SIZE_BLK ? !rc :
			    bstore_block_info(fc->bs, lid, told[j], &bi) < 0 || !bi.dirty) {
				told[k++] = told[j];
				continue;
			}
			fmark_sent_lock(fc->sent, gid, told[j]);
			if (fmark_sent_add(fc->sent, gid, told[j]) < 0)
				atomic_store(&fc->shadow_ok, false);
			fmark_sent_unlock(fc->sent, gid, told[j]);
		}
		mark_clean(fc, gid, told, k, seq);
	}
	free(told);
	pthread_mutex_unlock(&fc->wb_mx);
	if (rc) {
		atomic_fetch_add(&fc->wb_errors, 1);
		log_warn("file cache: write-back of object %016" PRIx64 ": %s; its "
			 "blocks stay in NVRAM", gid, strerror(-rc));
	}
	return rc;
}

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
		/* the writes kept alone stay so until the resync (resync) */
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
static uint64_t wb_held_until(struct fcache *fc, uint64_t now)
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
static void orphans_check(struct fcache *fc, uint64_t now)
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

/* Under fc->lk: o's record holds dirty blocks here. */
static bool obj_dirty(struct fcache *fc, const struct fobj *o)
{
	uint64_t nd = 0;

	return bstore_obj_counts(fc->bs, o->lid, NULL, &nd) == 0 && nd;
}

/* The write-back thread: background work, so it runs at nice 10 and the
 * requests of every node's mounts (the writers waiting) come first; it
 * still gets what the CPU has left, and a writer held by a full cache
 * leaves it the CPU. (fsync=backing's write-back runs in the request's
 * own thread, at the normal priority.) */
static void *wb_main(void *arg)
{
	struct fcache *fc = arg;
	uint64_t due[64];

	if (setpriority(PRIO_PROCESS, (id_t)gettid(), 10) < 0)
		log_debug("file cache: write-back thread priority: %s", strerror(errno));
	pthread_mutex_lock(&fc->lk);
	while (!atomic_load(&fc->stopping)) {
		if (fc->mark) {
			pthread_mutex_unlock(&fc->lk);
			shadow_check(fc, clock_now_ns());
			pthread_mutex_lock(&fc->lk);
			if (atomic_load(&fc->stopping))
				break;
		}
		pthread_mutex_unlock(&fc->lk);
		orphans_check(fc, clock_now_ns());
		mounts_check(fc, clock_now_ns());
		pthread_mutex_lock(&fc->lk);
		if (atomic_load(&fc->stopping))
			break;
		uint64_t now = clock_now_ns(), next = now + 1000000000ull;
		size_t n = 0;
		bool all = fc->wb_all && fc->backing_fd >= 0, held = false;
		fc->wb_all = false;
		/* a full cache (writers waiting) is not held */
		uint64_t hold = all ? 0 : wb_held_until(fc, now);
		for (size_t b = 0; b < NBUCKETS && n < 64; b++)
			for (struct fobj *o = fc->tab[b]; o && n < 64; o = o->next) {
				if (o->doomed)
					continue;
				if (hold && o->wb_due_ns && o->wb_due_ns <= now) {
					held = true;
				} else if ((o->wb_due_ns && o->wb_due_ns <= now) ||
				    (all && obj_dirty(fc, o))) {
					o->wb_due_ns = 0;
					due[n++] = o->gid;
				} else if (o->wb_due_ns && o->wb_due_ns < next) {
					next = o->wb_due_ns;
				}
			}
		if (held) {
			atomic_fetch_add(&fc->wb_held, 1);
			if (hold < next)
				next = hold;
		}
		/* a full cache: the files holding dirty blocks, 64 a pass,
		 * until none is left (the table may hold many more files,
		 * clean, than one pass takes) */
		if (all && n == 64)
			fc->wb_all = true;
		if (n) {
			pthread_mutex_unlock(&fc->lk);
			/* a stop leaves the rest dirty in NVRAM, for the
			 * next start */
			for (size_t k = 0; k < n && !atomic_load(&fc->stopping); k++)
				if (writeback(fc, due[k]) == -EAGAIN)
					break;
			pthread_mutex_lock(&fc->lk);
			continue;
		}
		struct timespec ts;
		clock_deadline(&ts, next - now);
		pthread_cond_timedwait(&fc->cv, &fc->lk, &ts);
	}
	pthread_mutex_unlock(&fc->lk);
	return NULL;
}

/* ---- the messages ---- */

/* stripe_unit=auto: the unit the home fixed for a file goes on its
 * backing file too (FCACHE_UNIT_XATTR), where a mount reads it while the
 * home is down. A backing without user xattrs: logged once. */
static void unit_label(struct fcache *fc, int bfd, const struct bstore_obj *rec)
{
	static atomic_bool warned;
	struct rec_handle h;
	char v[24];

	rec_handle(rec, &h);
	int fd = open_by_handle_at(bfd, &h.fh, O_RDONLY | O_NOFOLLOW | O_CLOEXEC |
				   O_NONBLOCK);
	int n = snprintf(v, sizeof(v), "%" PRIu64, (uint64_t)rec->uflags * fc->bsize);
	if (fd >= 0 && fsetxattr(fd, FCACHE_UNIT_XATTR, v, (size_t)n, 0) < 0 &&
	    !atomic_exchange(&warned, true))
		log_warn("file cache: the backing file system takes no %s (%s): "
			 "with stripe_unit=auto, a file whose home is down opens "
			 "only on mounts that knew its unit", FCACHE_UNIT_XATTR,
			 strerror(errno));
	if (fd >= 0)
		close(fd);
}

/* The unit the file's home wrote on the backing file (FCACHE_UNIT_XATTR),
 * in blocks; 0: none there (or not a valid one). pfd: the file, any
 * mode (O_PATH too). */
static uint64_t unit_on_backing(struct fcache *fc, int pfd)
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

/* The write-back thread writes back everything now (a full cache). */
static void wb_kick_all(struct fcache *fc)
{
	pthread_mutex_lock(&fc->lk);
	fc->wb_all = true;
	pthread_cond_signal(&fc->cv);
	pthread_mutex_unlock(&fc->lk);
}

/* ---- a full object table: records no longer needed go ---- */

static bool at_home(const struct fcache *fc, uint64_t gid);

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
static bool record_idle(struct fcache *fc, const struct fobj *o, uint64_t now)
{
	struct bstore_obj rec;
	struct rec_handle h;
	struct stat st;
	uint64_t nb = 0, nd = 0;

	if (o->opens || o->doomed || o->wb_due_ns || now < fc->grace_end_ns ||
	    fc->backing_fd < 0 || bstore_obj_counts(fc->bs, o->lid, &nb, &nd) || nd ||
	    bstore_obj_get(fc->bs, o->lid, &rec))
		return false;
	rec_handle(&rec, &h);
	int pfd = open_by_handle_at(fc->backing_fd, &h.fh, O_PATH | O_CLOEXEC);
	if (pfd < 0)
		return errno == ESTALE || errno == ENOENT;
	bool idle = fstat(pfd, &st) == 0 && rec.size <= (uint64_t)st.st_size &&
		    (!(fc->unit_set && !fc->unit && rec.uflags) ||
		     unit_on_backing(fc, pfd) == rec.uflags);
	if (idle && o->mtime_ns && at_home(fc, o->gid)) {
		/* the mtime the home keeps goes with the record: onto the
		 * backing file, which the write-backs moved */
		char link[40];
		struct timespec tv[2] = {
			{ .tv_nsec = UTIME_OMIT },
			{ .tv_sec = (time_t)(o->mtime_ns / 1000000000ull),
			  .tv_nsec = (long)(o->mtime_ns % 1000000000ull) } };
		snprintf(link, sizeof(link), "/proc/self/fd/%d", pfd);
		if (utimensat(AT_FDCWD, link, tv, 0) < 0)
			log_debug("file cache: the mtime of object %016" PRIx64
				  " onto its backing file: %s", o->gid, strerror(errno));
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
 * is over after a try that returned *rc: it succeeded or failed
 * otherwise, SPACE_TRIES are done, or the node is stopping (no
 * write-back will free any): then *rc is -ESHUTDOWN, which the node
 * answers by ending the connection unanswered, so the writer asks
 * again once the node is back (fcache_serve). */
static bool space_wait_over(struct fcache *fc, int tries, int *rc)
{
	if (*rc == -ENOSPC && atomic_load(&fc->stopping)) {
		*rc = -ESHUTDOWN;
		return true;
	}
	return *rc != -ENOSPC || tries == SPACE_TRIES;
}

/* A record for the file in rec (an OPEN's, or a replica's): its id in
 * rec->id. The table full: replica records holding nothing go, then idle
 * records (records_reclaim); with none idle, write-back runs (a file
 * written back and closed becomes idle) and this waits, as a write does
 * for a block (back-pressure), up to SPACE_TRIES times. Holding rep_mx
 * (a replica's, then: rep_held) or nothing; takes fc->lk itself. */
static int record_create(struct fcache *fc, struct bstore_obj *rec, bool rep_held)
{
	uint64_t gone[RECLAIM_BATCH];
	int rc;

	for (int tries = 0;; tries++) {
		rc = bstore_obj_create(fc->bs, rec);
		if (space_wait_over(fc, tries, &rc))
			return rc;
		if (!rep_held)
			pthread_mutex_lock(&fc->rep_mx);
		size_t nr = replicas_reclaim(fc);
		if (!rep_held)
			pthread_mutex_unlock(&fc->rep_mx);
		pthread_mutex_lock(&fc->lk);
		size_t n = records_reclaim(fc, gone, RECLAIM_BATCH);
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
			if (!tries)
				log_info("file cache: the object table is full (%u "
					 "files and copies); writing back so that "
					 "closed files' records can go",
					 bstore_geom(fc->bs)->nobjs);
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

/* ---- size epochs (fcache.h) ---- */

/* The home of gid is this node (or no peers are set: a node alone) */
static bool at_home(const struct fcache *fc, uint64_t gid)
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
static void home_shrunk(struct fobj *o)
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
static uint64_t epoch_known(struct fcache *fc, uint64_t gid)
{
	bool home = at_home(fc, gid);
	uint64_t known = 0, lid = 0, now = clock_now_ns();

	pthread_mutex_lock(&fc->lk);
	struct fobj *o = find(fc, gid), *was = o;
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
	o = find(fc, gid);
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
static void bound_answer(struct fcache *fc, const struct frame_fop *f,
			 struct frame_hdr *r)
{
	r->fop.flags &= ~(FRAME_FILE_BOUND | FRAME_FILE_BOUND_OK);
	r->fop.epoch = 0;
	if ((f->flags & FRAME_FILE_BOUND) && bound_holds(fc, f->obj, f->epoch))
		r->fop.flags |= FRAME_FILE_BOUND_OK;
}

static int serve_open(struct fcache *fc, const struct frame_fop *f,
		      const uint8_t *payload, struct frame_hdr *r)
{
	struct bstore_obj rec;
	int rc = 0;

	if (f->off > FCACHE_UNIT_MAX) {
		snprintf(r->text, sizeof(r->text), "OPEN stripe unit out of range");
		return -EPROTO;
	}
	pthread_mutex_lock(&fc->lk);
	struct fobj *o = find(fc, f->obj);
	if (!o) {
		memset(&rec, 0, sizeof(rec));
		rec.size = f->size;
		rec.uflags = f->off;   /* the file's stripe unit, in blocks */
		rec.handle_type = f->handle_type;
		rec.handle_len = f->len;
		memcpy(rec.handle, payload, f->len);
		gid_put(rec.path, f->obj);
		bool autou = fc->unit_set && !fc->unit;
		int bfd = fc->backing_fd;
		pthread_mutex_unlock(&fc->lk);
		if (autou && bfd >= 0) {
			/* a unit its home fixed before (a record that went,
			 * or NVRAM lost) holds over the mount's offer */
			struct rec_handle h;
			rec_handle(&rec, &h);
			int pfd = open_by_handle_at(bfd, &h.fh, O_PATH | O_CLOEXEC);
			uint64_t u = pfd >= 0 ? unit_on_backing(fc, pfd) : 0;
			if (pfd >= 0)
				close(pfd);
			if (u)
				rec.uflags = u;
		}
		rc = record_create(fc, &rec, false);
		pthread_mutex_lock(&fc->lk);
		struct fobj *had = find(fc, f->obj);
		if (!rc && had) {
			/* another OPEN made it meanwhile */
			bstore_obj_delete(fc->bs, rec.id);
			o = had;
			rc = bstore_obj_get(fc->bs, o->lid, &rec);
		} else if (!rc && !(o = insert(fc, f->obj, rec.id))) {
			bstore_obj_delete(fc->bs, rec.id);
			rc = -ENOMEM;
		} else if (!rc) {
			/* made here now: a write before was told to the
			 * owners at its last close under the record before
			 * (or, that broadcast lost, left to their 30 s pass) */
			o->wrote = false;
		}
	} else {
		rc = bstore_obj_get(fc->bs, o->lid, &rec);
		if (!rc && (rec.handle_len != f->len || rec.handle_type != f->handle_type ||
			    memcmp(rec.handle, payload, f->len) != 0)) {
			snprintf(r->text, sizeof(r->text), "object id clash: another "
				 "file holds this id");
			rc = -EEXIST;
		} else if (!rc && !rec.uflags && f->off) {
			rec.uflags = f->off;   /* the first OPEN that offers one */
			rc = bstore_obj_update(fc->bs, &rec);
		}
	}
	if (!rc)
		r->fop.off = rec.uflags;
	/* once a run per file, at its first counted open (its record may
	 * have been made by another OPEN first) */
	bool label = !rc && (f->flags & FRAME_FILE_HOME) && !o->labeled &&
		     fc->unit_set && !fc->unit && rec.uflags;
	if (label)
		o->labeled = true;
	if (!rc && (f->flags & FRAME_FILE_HOME)) {
		uint64_t n = f->flags & FRAME_FILE_RECLAIM ? f->blk : 1;
		struct hold **hp, *h = hold_find(o, f->digest, &hp);
		if (n > RECLAIM_MAX || o->opens + n > UINT32_MAX) {
			snprintf(r->text, sizeof(r->text), "open count out of range");
			rc = -EPROTO;
		} else if (!h && !(h = *hp = calloc(1, sizeof(*h)))) {
			rc = -ENOMEM;
		} else {
			h->inst = f->digest;
			h->n += (uint32_t)n;
			o->opens += (uint32_t)n;
			r->fop.size = rec.size;
			r->fop.epoch = home_epoch(o);
			r->fop.blk = o->mtime_ns;   /* as GETATTR's */
		}
	}
	int bfd = fc->backing_fd;
	pthread_mutex_unlock(&fc->lk);
	if (label && bfd >= 0)
		unit_label(fc, bfd, &rec);
	return rc;
}

static int serve_close(struct fcache *fc, const struct frame_fop *f,
		       struct frame_hdr *r)
{
	int rc = 0;

	pthread_mutex_lock(&fc->lk);
	struct fobj *o = find(fc, f->obj);
	struct hold **hp = NULL, *h = o ? hold_find(o, f->digest, &hp) : NULL;
	if (!o || !o->opens || !h) {
		/* (no holder: this mount's opens were released as a gone
		 * mount's; the other mounts' are not its to close; its writes
		 * still count for the last close) */
		if (o && (f->flags & FRAME_FILE_WRITER))
			o->wrote = true;
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
			o->wrote = false;
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
	struct fobj *o = find(fc, f->obj);
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
static int serve_size(struct fcache *fc, uint32_t type, const struct frame_fop *f,
		      struct frame_hdr *r)
{
	struct bstore_obj rec;
	bool tell = fc->mark && type == FT_FILE_SETSIZE, told = false, copy = false;
	int rc;

	if (type == FT_FILE_SETSIZE && (f->flags & FRAME_FILE_MTIME))
		return serve_mtime(fc, f, r);
	if (tell)
		fmark_sent_lock(fc->sent, f->obj, FMARK_SIZE_BLK);
again:
	pthread_mutex_lock(&fc->lk);
	struct fobj *o = find(fc, f->obj);
	rc = o ? bstore_obj_get(fc->bs, o->lid, &rec) : -ENOENT;
	uint64_t was = rc ? 0 : rec.size;   /* where an append goes */
	uint64_t wall = clock_wall_ns();
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
			mark_dirty(fc, f->obj, FMARK_SIZE_BLK);
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

static void drop_obj(struct fcache *fc, uint64_t gid)
{
	pthread_mutex_lock(&fc->lk);
	struct fobj *o = find(fc, gid);
	if (o) {
		bstore_obj_delete(fc->bs, o->lid);
		forget(fc, gid);
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

static int serve_unlink(struct fcache *fc, const struct frame_fop *f,
			struct frame_hdr *r)
{
	grace_wait(fc);
	pthread_mutex_lock(&fc->lk);
	struct fobj *o = find(fc, f->obj);
	bool open = o && o->opens;
	if (open) {
		o->doomed = true;
		r->fop.flags = FRAME_FILE_DOOMED;
	}
	pthread_mutex_unlock(&fc->lk);
	if (!open)
		drop_obj(fc, f->obj);
	return 0;
}

static uint64_t lid_of(struct fcache *fc, uint64_t gid)
{
	pthread_mutex_lock(&fc->lk);
	struct fobj *o = find(fc, gid);
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
static int serve_read(struct fcache *fc, const struct frame_hdr *q,
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

static int serve_write(struct fcache *fc, const struct frame_fop *f,
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
	for (int tries = 0;; tries++) {
		struct bstore_binfo was = { 0 };
		/* the shadow knows the block is dirty before it is (fmarks.h) */
		if (fc->mark) {
			fmark_sent_lock(fc->sent, f->obj, f->blk);
			mark_dirty(fc, f->obj, f->blk);
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
		if (space_wait_over(fc, tries, &rc))
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
		struct fobj *o = find(fc, f->obj);
		if (o && !o->wb_due_ns)
			o->wb_due_ns = clock_now_ns() + DIRTY_EXPIRE_NS;
		pthread_mutex_unlock(&fc->lk);
		bound_answer(fc, f, r);
		if (f->flags & FRAME_FILE_EXTEND)
			rc = write_extend(fc, f, r);
	}
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
static int serve_trunc(struct fcache *fc, const struct frame_fop *f)
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
		struct fobj *o = find(fc, f->obj);
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
		rc = record_create(fc, &rec, true);
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
	for (int tries = 0;; tries++) {
		rc = bstore_block_write(fc->bs, o->lid, f->blk, 0, payload + f->base_len,
					f->len, true, false, NULL);
		if (space_wait_over(fc, tries, &rc))
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

static int serve_mark(struct fcache *fc, const struct frame_fop *f,
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

static int serve_shadow(struct fcache *fc, const struct frame_fop *f,
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
	}
	r->fop.flags = fl;
	return 0;
}

static int serve_writeback(struct fcache *fc, const struct frame_fop *f)
{
	if (f->flags & FRAME_FILE_SYNC) {
		/* writes kept alone: after a cut-off shadow's older copies
		 * (wb_held_until), as every write-back here */
		while (wb_held_until(fc, clock_now_ns())) {
			if (atomic_load(&fc->stopping))
				return -ESHUTDOWN;   /* asked again after the restart */
			usleep(100000);
		}
		return writeback(fc, f->obj);
	}
	pthread_mutex_lock(&fc->lk);
	struct fobj *o = find(fc, f->obj);
	if (o) {
		uint64_t delay = f->size > 3600ull * 1000000000ull ?
				 3600ull * 1000000000ull : f->size;
		uint64_t due = clock_now_ns() + delay;
		/* the earlier of this and one already due */
		if (!o->wb_due_ns || due < o->wb_due_ns)
			o->wb_due_ns = due;
		pthread_cond_signal(&fc->cv);
	}
	pthread_mutex_unlock(&fc->lk);
	return 0;
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
	if (q->type != FT_FILE_ATTACH && q->type != FT_FILE_MARK && f->obj == 0)
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
		if (!gid_get(rec.path, &gid) || !gid || find(fc, gid)) {
			log_warn("file cache: object %" PRIu64 " has no valid id; dropped",
				 ids[k]);
			bstore_obj_delete(fc->bs, ids[k]);
			continue;
		}
		struct fobj *o = insert(fc, gid, ids[k]);
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
					 "waits for a mount", path, strerror(-e));
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
		free(m);
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
			 "fcache_bounds_ok: %" PRIu64 "\n"
			 "fcache_bounds_refused: %" PRIu64 "\n"
			 "fcache_epochs_asked: %" PRIu64 "\n"
			 "fcache_writeback_errors: %" PRIu64 "\n"
			 "fcache_marks_told: %zu\n"
			 "fcache_marks_held: %zu\n"
			 "fcache_mark_errors: %" PRIu64 "\n"
			 "fcache_shadow_synced: %d\n"
			 "fcache_replicas: %u\n"
			 "fcache_replicas_sent: %" PRIu64 "\n"
			 "fcache_replica_bytes_sent: %" PRIu64 "\n"
			 "fcache_replica_degraded_writes: %" PRIu64 "\n"
			 "fcache_writeback_held: %" PRIu64 "\n"
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
			 (uint64_t)atomic_load(&fc->bounds_ok),
			 (uint64_t)atomic_load(&fc->bounds_refused),
			 (uint64_t)atomic_load(&fc->epochs_asked),
			 (uint64_t)atomic_load(&fc->wb_errors),
			 fmark_sent_count(fc->sent), fmark_tab_count(fc->marks),
			 (uint64_t)atomic_load(&fc->mark_errors),
			 fc->mark ? (int)atomic_load(&fc->shadow_ok) : -1,
			 replicas_of(fc),
			 (uint64_t)atomic_load(&fc->replicas_sent),
			 (uint64_t)atomic_load(&fc->replica_bytes),
			 (uint64_t)atomic_load(&fc->degraded_writes),
			 (uint64_t)atomic_load(&fc->wb_held), alone_s,
			 (uint64_t)atomic_load(&fc->replica_errors), held,
			 (uint64_t)atomic_load(&fc->replicas_taken),
			 (uint64_t)atomic_load(&fc->replicas_written));
	return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len ? len - 1 : 0;
}
