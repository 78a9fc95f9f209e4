/* fcache_int.h - the file cache manager's parts (fcache*.c) share this:
 * its tables, its state (struct fcache), and the functions one part calls
 * in another. Not an interface: callers use fcache.h. */
#ifndef NVCACHE_CLUSTER_FCACHE_INT_H
#define NVCACHE_CLUSTER_FCACHE_INT_H

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
/* A request short of space tries again every SPACE_WAIT_MS while
 * write-back makes room, for a hold at most, then is answered: a mount's
 * WRITE after WRITE_HOLD_NS (answered FULL, it comes again: the mount's
 * connection is not held for long, and its other requests to the node
 * go on), an OPEN's record as long (answered FULL too, unless every
 * record is of a file open here), an owner's copy at its shadow after
 * REPLICA_HOLD_NS (within the nodes' 2 s timeout), a record for a copy
 * after RECORD_HOLD_NS. */
#define SPACE_WAIT_MS 10
#define WRITE_HOLD_NS (2 * 1000000000ull)
#define REPLICA_HOLD_NS (1000000000ull)
#define RECORD_HOLD_NS (10 * 1000000000ull)
/* Dirty blocks are written back at most this long after their first write
 * since the last write-back, whatever the opens say: a mount that dies
 * before it asks for the write-back of a closed file leaves nothing dirty
 * for good (as a page cache's dirty_expire). */
#define DIRTY_EXPIRE_NS (30ull * 1000000000ull)
/* How long a file unlinked while open nowhere lingers (fobj.linger_ns):
 * an opener's lookup and its OPEN are two requests, the unlink may come
 * between; one that comes later is answered STALE (serve_open) and the
 * kernel looks the name up again. A full object table ends the lingers
 * at once (record_create). */
#define UNLINK_LINGER_NS (2ull * 1000000000ull)
/* A file unlinked while open somewhere is looked at again this often
 * (writeback): gone, its blocks are dropped. */
#define UNLINKED_RETRY_NS (5ull * 1000000000ull)
/* A write-back that failed is tried again this long after, doubled for
 * each failure in a row, WB_RETRY_MAX_NS at most; a pass over every
 * dirty file (wb_all, but for room) leaves it till then too. */
#define WB_RETRY_NS (500000000ull)
#define WB_RETRY_MAX_NS (30000000000ull)
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
	/* at the home: unlinked while open nowhere, the record and the
	 * blocks everywhere are kept until then (clock_now_ns) for a mount
	 * that looked the file up before the unlink and opens it now;
	 * then the write-back thread drops them everywhere (0: not so).
	 * Set at the last close of a doomed file too, in case the closing
	 * mount's DROP does not come */
	uint64_t linger_ns;
	/* at the home: a write may have been made since the last close
	 * that had the owners write back (FRAME_FILE_WRITER): set when the
	 * record is found here at a start (a restarted home cannot tell),
	 * by a writing mount's CLOSE (also one that finds no open of its
	 * own), by a SETSIZE, and when a gone mount's opens are released;
	 * clear when an OPEN makes the record; cleared by the last close
	 * cluster-wide, which says so */
	bool wrote;
	uint64_t wb_due_ns;    /* 0: no write-back scheduled */
	/* its write-back put off until then (its backing file had no name,
	 * writeback), or its last one failed then: a pass over every dirty
	 * file (wb_all) but for room leaves it till then, so that such
	 * files do not take every pass */
	uint64_t wb_retry_at;
	uint8_t wb_fails;      /* write-backs failed in a row (WB_RETRY_NS) */
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
	/* at the home: the mtime_ns last put on the backing file (or that
	 * could not be, mtime_out), and the backing file's mtime seen right
	 * after (a file system may round it): the record may go while
	 * both still hold; else record_idle asks the write-back thread to
	 * put it (mtime_wanted) */
	uint64_t mtime_put, mtime_seen;
	bool mtime_wanted;
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

/* A mount run's opens of a file at its home: n, and the tokens of the
 * last HOLD_SEEN OPENs counted (an OPEN sent again after its reply was
 * lost, on another connection, carries its token again: not counted
 * twice). */
#define HOLD_SEEN 4
struct hold {
	uint64_t inst;
	uint32_t n, seen_at;
	uint64_t seen[HOLD_SEEN];
	struct hold *next;
};

/* A mount's run (fcache_mount_conn): its connections here, and since
 * when it has none. */
struct minst {
	uint64_t inst;
	uint32_t conns;
	uint64_t gone_ns;
	/* files this run is to drop from its kernel's page cache (a
	 * FILE_INVAL at their home, fcache_inval.c), oldest first, each
	 * with its number (seq counts them): a WATCH takes them, the run's
	 * next WATCH says it dropped them (acked). watching: a WATCH came
	 * (a run that sends none is not waited for) */
	uint64_t *drop, *drop_seq;
	size_t ndrop, drop_cap;
	uint64_t seq, acked;
	bool watching;
	struct minst *next;
};
void minst_free(struct minst *m);

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
	char backing[4096];    /* that directory's path, once bound */
	uint32_t replicas;     /* 1 or 2, fixed by the first ATTACH (and
				* kept in PATH.backing); 0: none yet */
	/* the mounts' stripe_unit in bytes, 0: auto; fixed by the first
	 * ATTACH with replicas and kept beside it (unit_set) */
	uint64_t unit;
	bool unit_set;

	pthread_mutex_t lk;    /* the table, the backing, the thread's state */
	pthread_cond_t cv;
	/* under lk: when the write-back thread, waiting on cv, wakes next
	 * (0: it is not waiting); a write-back scheduled no earlier than
	 * that wakes nobody (wb_schedule) */
	uint64_t wb_wake_ns;
	struct fobj *tab[NBUCKETS];
	int backing_fd;        /* -1: no mount attached yet */
	struct fcache_ident bid;  /* the backing directory's */
	/* the write-back thread writes back every dirty file: what a
	 * previous run left (wb_all), or to make room for writers waiting
	 * (wb_room too: files unlinked while open go as well, writeback) */
	bool wb_all, wb_room;
	/* fcache_stop called: the thread ends (told under lk), and waits
	 * for space end (read without it) */
	atomic_bool stopping;
	uint64_t grace_end_ns; /* reclaims only, before this (fcache.h) */
	size_t reclaim_at;     /* records_reclaim's next bucket */
	pthread_t thread;
	pthread_mutex_t wb_mx; /* one write-back pass at a time */

	atomic_uint_fast64_t served_bytes, written_back, wb_errors, dropped,
		writes, reads, reclaimed;
	atomic_uint_fast64_t wb_unlinked;  /* write-backs put off: unlinked */
	atomic_uint_fast64_t opens_stale;  /* OPENs of files unlinked since */
	atomic_uint_fast64_t lingered;     /* unlinks kept a while (linger_ns) */
	/* when a write-back last failed (clock_now_ns; 0: none since the
	 * last that succeeded): a write that finds the cache full then is
	 * answered NO_SPACE (the backing full, read-only, failing: the
	 * cache cannot make room), else with FULL, and its writer asks
	 * again (serve_write) */
	atomic_uint_fast64_t wb_failed_ns;
	atomic_uint_fast64_t full_waits;   /* WRITEs and OPENs answered FULL */
	atomic_uint_fast64_t full_at;      /* the last answered FULL (clock_now_ns) */

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
	/* FILE_INVAL and FILE_WATCH (fcache_inval.c): inval_cv, with lk,
	 * wakes a WATCH when a drop is queued and an INVAL when one is
	 * acknowledged; INVALs served, drops queued, INVALs that gave up
	 * waiting for a run, WATCH replies */
	pthread_cond_t inval_cv;
	atomic_uint_fast64_t invals, inval_drops, inval_timeouts, watches;
	/* READs and WRITEs with BOUND: answered BOUND_OK, or not; and the
	 * GETATTRs to homes for an epoch this node did not know */
	atomic_uint_fast64_t bounds_ok, bounds_refused, epochs_asked;
	/* absent blocks written with no old bytes: past the backing's end */
	atomic_uint_fast64_t past_end;
	uint32_t n_nodes;
	fcache_call_fn call;
	void *call_arg;
};

/* A record's file handle, as open_by_handle_at takes it. */
struct rec_handle {
	struct file_handle fh;
	unsigned char b[BSTORE_HANDLE_MAX];
};

/* fcache_records.c */
struct fobj *fobj_find(struct fcache *fc, uint64_t gid);
void gid_put(char *path, uint64_t gid);
bool gid_get(const char *path, uint64_t *gid);
void rec_handle(const struct bstore_obj *rec, struct rec_handle *h);
/* The backing file of rec opened by its handle, O_PATH, under the
 * backing directory bfd: an fd, or -1 and errno. */
int rec_path_fd(int bfd, const struct bstore_obj *rec);
/* Whether the backing file at pfd has no name left: its inode alive
 * (some process holds it open), its last link gone. With pfd -1 (its
 * open failed, errno), whether it is gone altogether (ESTALE, ENOENT). */
bool backing_nameless(int pfd);
void rid_put(char *path, uint32_t owner, uint64_t gid);
bool rid_get(const char *path, uint32_t *owner, uint64_t *gid);
struct robj **rslot_of(struct fcache *fc, uint32_t owner, uint64_t gid);
struct robj *rinsert(struct fcache *fc, uint32_t owner, uint64_t gid,
		     uint64_t lid);
bool replica_empty(struct fcache *fc, uint64_t lid);
void rdrop(struct fcache *fc, struct robj **p);
uint64_t replica_lid(struct fcache *fc, uint32_t owner, uint64_t gid);
struct fobj *fobj_insert(struct fcache *fc, uint64_t gid, uint64_t lid);
void fobj_free(struct fobj *o);
struct hold *hold_find(struct fobj *o, uint64_t inst, struct hold ***pp);
void fobj_forget(struct fcache *fc, uint64_t gid);
bool space_wait_over(struct fcache *fc, uint64_t since, uint64_t hold_ns, int *rc);
/* Whether write-back fails (its last attempt within WB_FAILING_NS did,
 * none succeeded since): a full cache then cannot make room. */
bool wb_failing(struct fcache *fc);
/* A request refused NO_SPACE that may go again: the cache stayed full
 * for its hold, but write-back may yet make room (reply flag FULL,
 * counted in full_waits). */
void answer_full(struct fcache *fc, struct frame_hdr *r);
/* Whether some record in the object table is not held by an open here
 * nor doomed (takes fc->lk): write-back may make it idle, so a full
 * table may yet take a new one. */
bool records_freeable(struct fcache *fc);
/* A record for rec (fcache_records.c), waiting for room hold_ns at most. */
int record_create(struct fcache *fc, struct bstore_obj *rec, bool rep_held,
		  uint64_t hold_ns);

/* fcache.c */
void mounts_check(struct fcache *fc, uint64_t now);
bool unit_label(struct fcache *fc, int bfd, const struct bstore_obj *rec);
uint64_t unit_on_backing(struct fcache *fc, int pfd);

/* fcache_shadow.c */
void mark_dirty(struct fcache *fc, uint64_t gid, uint64_t blk, bool size);
void mark_clean(struct fcache *fc, uint64_t gid, const uint64_t *idx,
		size_t n, uint64_t seq);
int replica_send(struct fcache *fc, uint64_t lid, uint64_t gid,
		 uint64_t blk, uint32_t at, uint32_t n);
uint32_t replicas_of(struct fcache *fc);
int size_replica_send(struct fcache *fc, const struct bstore_obj *rec,
		      uint64_t gid, uint64_t size);
void marks_forget(struct fcache *fc, uint64_t gid);
bool past_backing_end(struct fcache *fc, uint64_t gid, uint64_t lid,
		      uint64_t blk, uint32_t *gen);
void shadow_resync(struct fcache *fc);
void shadow_check(struct fcache *fc, uint64_t now);

/* fcache_wb.c */
int backing_grow(int fd, uint64_t size);
void *wb_main(void *arg);
void wb_kick_all(struct fcache *fc);
/* Under fc->lk: o written back delay_ns from now (1 h at most), or when
 * one already due is. */
void wb_schedule(struct fcache *fc, struct fobj *o, uint64_t delay_ns);
int serve_writeback(struct fcache *fc, const struct frame_fop *f);

/* fcache_replica.c */
uint64_t wb_held_until(struct fcache *fc, uint64_t now);
void orphans_check(struct fcache *fc, uint64_t now);
int serve_mark(struct fcache *fc, const struct frame_fop *f,
	       const uint8_t *payload, struct frame_hdr *r);
int serve_shadow(struct fcache *fc, const struct frame_fop *f,
		 struct frame_hdr *r);

/* fcache_inval.c */
int serve_inval(struct fcache *fc, const struct frame_fop *f);
int serve_watch(struct fcache *fc, const struct frame_fop *f,
		struct frame_hdr *r, uint8_t *buf, const void **out);

/* fcache_home.c */
bool at_home(const struct fcache *fc, uint64_t gid);
void home_shrunk(struct fobj *o);
uint64_t epoch_known(struct fcache *fc, uint64_t gid);
void bound_answer(struct fcache *fc, const struct frame_fop *f,
		  struct frame_hdr *r);
int serve_open(struct fcache *fc, const struct frame_fop *f,
	       const uint8_t *payload, struct frame_hdr *r);
int serve_close(struct fcache *fc, const struct frame_fop *f,
		struct frame_hdr *r);
int serve_size(struct fcache *fc, uint32_t type, const struct frame_fop *f,
	       struct frame_hdr *r);
void drop_obj(struct fcache *fc, uint64_t gid);
/* At the home, a file unlinked while open nowhere, its linger over
 * (fobj.linger_ns): dropped here, then at every other node (FILE_DROP,
 * node to node, but those in *unreached, which gains the nodes that do
 * not answer); not if an OPEN came meanwhile (then at its last close). */
void linger_drop(struct fcache *fc, uint64_t gid, uint64_t *unreached);
int serve_unlink(struct fcache *fc, const struct frame_fop *f,
		 struct frame_hdr *r);

/* fcache_data.c */
int serve_read(struct fcache *fc, const struct frame_hdr *q,
	       struct frame_hdr *r, uint8_t *buf, const void **out);
int serve_write(struct fcache *fc, const struct frame_fop *f,
		const uint8_t *payload, struct frame_hdr *r);
int serve_trunc(struct fcache *fc, const struct frame_fop *f);

#endif
