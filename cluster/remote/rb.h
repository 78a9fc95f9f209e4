/* rb.h - the remote backend's private header (the .c files of
 * cluster/remote/): its state, the locks and their order, and the layers
 * its files form. The public interface is cluster/remote_backend.h.
 *
 * Layers, lowest first; a file calls only into its own layer or lower ones:
 *   1. slotmap.c (stripe and pool locks, loss logging), node.c (liveness,
 *      capacity table, connection pool)
 *   2. request.c (requests to one node or many at once,
 *      over cluster/fanout.h)
 *   3. place.c (placement), hold.c (the hold and the spill file)
 *   4. groups.c (parity groups)
 *   5. copies.c (none, mirror), pslot.c (parity): one slot's read and write
 *   6. wparity.c, write.c, trim.c: batched writes and trims
 *   7. recover.c, migrate.c, stale.c: the refresher's passes
 *   8. stats.c, modes.c (the modes' tables), backend.c (open, close and
 *      the refresher thread)
 *
 * Locks, in the order they are taken (a thread holding one may take only
 * those below it):
 *   1. a slot's stripe (stripes[], rb_stripe): the slot's entry in slots[]
 *      and slot_grp[], and the contents of its hold entry. Several at once
 *      only in stripe order (rb_stripes_lock: the modes' write_slots and
 *      trim_slots, recover_regroup).
 *   2. a parity-pool entry (pool[].lock: its open group and parity buffer,
 *      its write scratch) or a trim scratch (tscr[].lock); never two.
 *   3. a group's lock stripe (glocks[], rb_glock): the group in the parity
 *      table. Several at once only in index order (close_batch,
 *      overwrite_batch, trim_groups, recover_regroup).
 *   4. hold_lock: the hold's free list and entry -> slot map (slots[].hold
 *      is written under it and the stripe).
 *   5. a connection's lock (rconn.lock): the connection; several at once
 *      only in node order (request.c, mirror_parallel).
 *   lock (with cond): stopping; taken alone.
 * Nobody waits for a lock of levels 1-4 while holding a connection. Every
 * change of a grouped slot's node or version happens under its group's
 * lock, so a group's member list read under that lock is consistent with
 * the nodes' contents and the parity page.
 * Counters and node state are atomics, read and written without a lock. */
#pragma once
#include "cluster/remote_backend.h"

#include "cluster/client.h"
#include "cluster/fanout.h"
#include "cluster/parity.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/outbuf.h"
#include "common/paths.h"
#include "common/xor.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#define PAGE FRAME_PAGE_SIZE
#define STRIPES 1024
#define NO_NODE 0xff
#define GSTRIPES 256     /* group locks */
#define POOL 4           /* open groups: the parity-logging buffers */
#define DOWN_NS (1000ULL * 1000000ULL) /* avoid a failed node this long */
#define RECOVER_THREADS 8 /* parity recovery workers (parity_recover) */
#define HOLD_CHUNK 256   /* held pages per allocation (1 MiB) */
#define HOLD_MIN_PAGES ((64u << 20) / PAGE) /* hold at least 64 MiB ... */
#define HOLD_MAX_PAGES 65535u /* ... at most 256 MiB (struct slot's
					* 16-bit hold index) */
#define RETRY_MIN_NS (1000ULL * 1000000ULL)  /* short of room: first retry */
#define RETRY_MAX_NS (60ULL * 1000000000ULL) /* ... backing off to this */
#define SHORT_LOG_S 60       /* short of room: log this often */

struct rconn {
	pthread_mutex_t lock;
	struct cluster_client *cl;      /* NULL: not connected */
	unsigned epoch;                 /* the node's conn_epoch at connect */
};

struct rnode {
	uint32_t id;
	const struct cluster_node *cn;
	bool target;                    /* not ourselves */
	atomic_int alive;               /* per the last node table */
	/* Declared dead, and the incarnation it had then: until the node
	 * answers us itself or shows a new incarnation, a peer that still
	 * calls it alive has simply not noticed yet (its heartbeat timeout
	 * runs later than ours). Without this the verdict flaps while the
	 * cluster agrees, and a recovery pass can run under a stale "alive". */
	atomic_int declared_dead;
	/* Our owner's pages an earlier device left there are dropped (at
	 * open, or once it first answers): until then nothing of ours goes
	 * there, since the drop would take it too. */
	atomic_int reset_done;
	atomic_uint_fast64_t dead_inc;
	/* Declared dead, then answering with dead_inc (a partition, not a
	 * restart): it may hold copies the slot map moved away meanwhile,
	 * which the refresher drops (stale.c). */
	atomic_int stale;
	atomic_int_fast64_t free_pages; /* estimate: offer - use */
	/* Pages it holds beyond its offer, per its last report (it shrank:
	 * the operator's cap or local memory pressure). Non-zero: no new
	 * page goes there, and the migration pass moves ours away. */
	atomic_int_fast64_t over_pages;
	/* refresher only: a migration pass found none of our pages there
	 * (the excess is other owners'): no full scan again before this */
	uint64_t mig_idle_until_ns;
	atomic_uint_fast64_t down_until_ns;
	struct log_limit down_log;            /* mark_down's warning */
	atomic_uint rr;                 /* rotating start for conn_get */
	/* Bumped by a transport error on a connection of the current
	 * epoch: the node most likely restarted or died, and its other
	 * pooled connections broke with that one. Each is reconnected when
	 * next taken, rather than found broken in turn, one down time apart
	 * (which would keep a restarted node out of use for seconds, and
	 * recovery would regroup without it). */
	atomic_uint conn_epoch;
	/* The node's incarnation as last seen, and a generation number that
	 * changes with it: copies placed under another generation died with
	 * the node's previous process. */
	atomic_uint_fast64_t incarnation;
	atomic_uint gen;
	unsigned nconn;
	struct rconn *conns;
	atomic_uint_fast64_t placed, stores, fetches, errors;
	atomic_int_fast64_t held;       /* our copies there (placement load) */
};

_Static_assert(HOLD_MAX_PAGES <= UINT16_MAX, "a hold entry + 1 fits slot.hold");

/* One shadow slot map entry: where the slot's copies are and its version. */
struct slot {
	uint64_t version;
	uint8_t n[2];                   /* node index, NO_NODE: none */
	uint8_t g[2];                   /* the node's generation at placement */
	/* In the local spill file, not on nodes; with parity and no spill
	 * file: held in our own memory (the hold, below). */
	uint8_t spilled;
	/* Its page was lost (rebuilt for one read, then no node took it):
	 * reads give EIO, never zeros, until a write or a trim. */
	uint8_t lost;
	/* With parity: its entry in the hold + 1, 0: none (in the struct's
	 * padding, so the hold costs nothing per slot) */
	uint16_t hold;
};

struct remote_backend;

/* The connection pool's side of a fan-out (cluster/fanout.h), the first
 * member of each fan-out's context: rb_fan_get and rb_fan_put take a
 * node's connection from its pool and give it back (request.c). any: also
 * nodes not usable now (else -EHOSTDOWN for them). */
struct rb_fan {
	struct remote_backend *rb;
	bool any;
	struct rconn *c[CONFIG_MAX_NODES];
};

/* A redundancy mode: the operations that differ between them, as
 * pmem/policy.h's policies. modes.c has the two tables: none and mirror
 * (copies.c; rb->copies tells them apart), parity and parity-dist
 * (pslot.c; rb->pnode >= 0: the dedicated parity node of "parity").
 *
 * Rules every mode keeps:
 *  - a slot's functions are called with its stripe held;
 *  - a write is acknowledged only once the page is stored with the mode's
 *    redundancy, or kept where the next read finds it (the spill file,
 *    the hold); a failed write returns its error;
 *  - a slot's version only grows: every write moves it on, so a stale
 *    copy on a node (or another device's page under our key) is never
 *    taken for current;
 *  - nothing is allocated on the I/O path (reconnecting aside). */
struct rb_mode {
	/* pages no node takes (new writes with a spill file; rebuilt,
	 * regrouped and migrated pages always) go to the hold: on no node,
	 * in no group, so not redundant; in the spill file if there is one,
	 * else in our memory (hold.c). false: new writes go to the spill
	 * file, if any, and nothing else leaves the nodes. */
	bool hold;
	unsigned conns;                 /* connections per node by default */
	/* the mode's own state at open, once the nodes are known (targets:
	 * nodes other than us); 0 or -errno, logged. NULL: none. */
	int (*open)(struct remote_backend *rb, const struct remote_opts *o,
		    unsigned targets);
	/* a mapped slot, not spilled and not lost, read into page */
	int (*slot_read)(struct remote_backend *rb, uint64_t i, void *page);
	/* one whole slot written; counts mapped and write_errors */
	int (*slot_write)(struct remote_backend *rb, uint64_t i, const void *page);
	/* a spilled (held) slot's page read or replaced; and forgotten */
	int (*spill_io)(struct remote_backend *rb, bool write, uint64_t i, void *page);
	void (*spill_forget)(struct remote_backend *rb, uint64_t i);
	/* a run of distinct whole slots (n <= WBATCH), their stripes held */
	int (*write_slots)(struct remote_backend *rb, const uint64_t *slots,
			   const uint8_t *const *page, unsigned n);
	/* slots i0 .. i0+n-1 (n <= TRIM_BATCH) trimmed; takes their stripes */
	void (*trim_slots)(struct remote_backend *rb, uint64_t i0, unsigned n);
	/* the refresher's work after a node death or a shortage of room,
	 * each turn (rebuild_needed, retry_due). NULL: none. */
	void (*pass)(struct remote_backend *rb);
	/* mapped slot i's copy on node j moved elsewhere: 1 moved, 0 nothing
	 * to move, <0 left where it is. page: scratch. */
	int (*migrate_slot)(struct remote_backend *rb, uint64_t i, unsigned j,
			    uint8_t *page);
	/* the pages the nodes give slots pages of ours, redundancy counted
	 * (the start's capacity warning) */
	uint64_t (*node_pages)(const struct remote_backend *rb, uint64_t slots);
	/* the mode's own stats lines; groups: closed groups unprotected */
	void (*stats)(struct remote_backend *rb, struct outbuf *o, uint64_t groups);
};

extern const struct rb_mode *const rb_modes[];  /* by enum remote_redundancy */

struct remote_backend {
	struct cluster_config cfg;
	uint32_t self;
	uint64_t owner;
	uint64_t nslots;
	const struct rb_mode *mode;     /* the redundancy mode's operations */
	enum remote_redundancy red;
	bool redundant;                 /* a lost node loses no page: not none */
	unsigned copies;                /* copies of a page: 2 with mirror */
	int spill_fd;                   /* -1: no local spill file */
	int timeout_ms;
	unsigned refresh_ms;
	unsigned nn;
	struct rnode nodes[CONFIG_MAX_NODES];
	struct slot *slots;
	pthread_mutex_t stripes[STRIPES];

	pthread_t refresher;
	bool refresher_started;
	pthread_mutex_t lock;           /* stop */
	pthread_cond_t cond;
	bool stopping;

	/* parity modes (gsize != 0) */
	unsigned gsize;                 /* data pages per group */
	int pnode;                      /* centralised: the parity node; -1 */
	struct parity_table pt;
	uint32_t *slot_grp;             /* group id + 1; 0: none */
	pthread_mutex_t glocks[GSTRIPES];
	struct ppool {
		pthread_mutex_t lock;
		int64_t gid;            /* the open group; -1: none yet */
		uint8_t buf[PAGE];      /* its parity page */
		struct wb_groups *wb;   /* write_pages' scratch (parity) */
	} pool[POOL];
	atomic_uint pool_rr;
	/* rb_parity_trim_slots' scratch, apart from the pool entries: a trim
	 * does not wait for a write's round trips to get one */
	struct tscratch {
		pthread_mutex_t lock;
		struct trim_scratch *t;
	} tscr[POOL];
	atomic_uint tscr_rr;
	atomic_int merge_needed;
	/* a node came back: narrowed groups widen again (parity_widen) */
	atomic_int widen_needed;
	atomic_uint_fast64_t widened_pages;
	/* Parity modes: the hold. A page we have in hand (rebuilt after a
	 * loss, or being moved; with a spill file also a new write) that no
	 * node takes, because the cluster is short of room, is kept here
	 * rather than dropped: in the spill file at the slot's offset if
	 * there is one (reserved: the slot's block allocated; the fields
	 * below unused, counted in spills and spilled_now), else in memory.
	 * Its slot is on no node and in no group, `spilled` set; reads are served from it, a
	 * write replaces it (or places the page, if a node takes it now), a
	 * trim frees it, and the refresher places it once room appears
	 * (hold_retry, backing off). At most hold_max pages; space is
	 * reserved before a page leaves its group (hold_reserve), so a page
	 * that cannot be held stays in its group, still recoverable. The
	 * contents of an entry belong to its slot's stripe; hold_lock guards
	 * the rest (slots[i].hold is written under both). */
	pthread_mutex_t hold_lock;
	uint64_t *hold_slot;            /* entry -> slot */
	uint8_t **hold_chunk;           /* HOLD_CHUNK entries each, made as needed */
	uint32_t *hold_free;            /* free entries, a stack */
	uint32_t hold_n, hold_nfree, hold_reserved, hold_max;
	atomic_uint_fast64_t held_now, holds, hold_placed, hold_refused;
	/* Short of room: something could not be placed (a parity page, a
	 * held page, a rebuild left in its group): retried from the
	 * refresher at retry_at_ns, the delay doubling while nothing
	 * changes (retry_ns); logged once per SHORT_LOG_S with counts
	 * (room_log; nodes_log for short_nodes: each warning its own limit,
	 * so that one never holds back the other). */
	atomic_int retry_due;
	uint64_t retry_at_ns, retry_ns; /* refresher only */
	bool had_room;                  /* refresher only: a node could take a page */
	atomic_uint_fast64_t short_parity, short_held, short_kept;
	/* writes failed for want of room (no spill file), for the warning */
	atomic_uint_fast64_t short_writes;
	struct log_limit room_log;
	/* parity pages not placed because no node outside their group was
	 * up at all: too few nodes, not too little room */
	atomic_uint_fast64_t short_nodes;
	struct log_limit nodes_log;
	/* overwrites whose delta may or may not have reached the parity
	 * node (a transport error): their groups' parity recomputed */
	atomic_uint_fast64_t overwrites_unsure;
	atomic_uint_fast64_t parity_sends, parity_updates, parity_rebuilds,
		parity_errors, reconstructs, rehomes, rebuilt_pages, rebuild_ns,
		rebuilt_batched, rebuilt_regrouped,
		merged_pages, spec_kept, spec_redone;

	/* copies dropped on nodes back from a partition (stale.c) */
	atomic_uint_fast64_t stale_dropped;

	/* migration off nodes over their offer (refresher thread) */
	atomic_uint_fast64_t migrations, migrate_ns, migrate_passes,
		migrate_failures;

	atomic_int rebuild_needed;      /* a node died: re-mirror its copies */
	atomic_int recovering;          /* a recovery pass is running */
	atomic_uint_fast64_t mapped, reads, writes, trims, failovers, remirrors,
		read_errors, write_errors, zero_reads, rebuild_passes,
		spills, spilled_now;
	/* Reads of lost pages: the kernel retries each one, and a lost node's
	 * pages are read by the thousand: why a page could not be rebuilt,
	 * and that it is lost, each at most once per interval. */
	struct log_limit rebuild_log, lost_log;
};

/* Several fetches at once, on any nodes (a group's members and parity
 * page, or a recovery batch): each node's share goes out as
 * PAGE_FETCH_MANY requests of up to FRAME_BATCH_MAX entries, pipelined on
 * one connection, and every node's before any reply is taken, so the set
 * costs one round trip of wall time and one request per node and 64
 * pages. Connections are taken in node order, as in mirror_parallel: no
 * two threads can each hold one the other waits for; every reply is taken
 * before a connection goes back. node[k] is entry k's node; f[k].rc comes
 * back as a single fetch's would, or the connection's error. tmp, from:
 * scratch of n entries. At most FETCH_BATCH_NODE entries per node. */
#define FETCH_BATCH_NODE (FRAME_BATCH_MAX * CLUSTER_CLIENT_MAX_INFLIGHT)

#define RECOVER_STORES_MAX FRAME_BATCH_MAX /* store_batch: at most this many per call */
/* node_batch: at most this many per call (a run's pages, two copies each
 * with mirror), and FRAME_BATCH_MAX per node */
#define NODE_BATCH_MAX (2 * FRAME_BATCH_MAX + 1)

/* Many stores at once (a recovery batch's re-homed pages): one
 * PAGE_STORE_MANY request per node, all sent before any reply is taken,
 * so the set costs one round trip and one request per node instead of
 * one per page. Nodes in index order (see fetch_batch). st[k]: slot,
 * version, page and node of store k; its rc comes back in st[k].rc.
 * node_batch does the same for parity updates and drops. */
struct store_req {
	uint64_t slot, version;        /* slot: a page id, or a parity key */
	const void *page;
	uint8_t node;
	uint8_t kind;                   /* FK_DATA (0) or FK_PARITY */
	uint8_t op;                     /* node_batch_mixed: enum batch_op */
	int rc;
};

/* What a batch of store_reqs asks of their nodes: PAGE_STORE_MANY,
 * PARITY_UPDATE_MANY (page: the delta) or PAGE_DROP_MANY (version: drop
 * if not newer; page unused). */
enum batch_op { BO_STORE, BO_PARITY_UPDATE, BO_DROP, BO_COUNT };

enum op { OP_STORE, OP_FETCH, OP_DROP, OP_PARITY_UPDATE, OP_PARITY_STORE,
	  OP_PARITY_FETCH, OP_PARITY_DROP };


/* write batching: a run is at most WBATCH pages (write.c) */
#define WBATCH FRAME_BATCH_MAX
_Static_assert(WBATCH <= RECOVER_STORES_MAX, "a run's stores fit store_batch");

struct wb_plan {
	uint64_t i;
	const void *page;
	int node;               /* -1: slot_write's way */
	uint8_t gen;            /* node's generation when planned */
	int64_t gid;            /* parity: the open group it joins */
	bool inplace;           /* an in-use slot, stored over on its node(s) */
	int st;                 /* its store request, or -1 */
	int node2, st2;         /* mirror: the second copy's node and request */
	uint8_t gen2;
};

/* The open groups a run's new pages go to, in the order they fill: for
 * each, the nodes and count of the run's pages planned into it on top of
 * its members, and whether it closes after them. */
struct wb_groups {
	unsigned n;
	int64_t gid[WBATCH + 1];
	bool node[WBATCH + 1][CONFIG_MAX_NODES];
	unsigned cnt[WBATCH + 1];
	bool full[WBATCH + 1];
	/* allocated by this run: its parity buffer (the pool entry's one
	 * buffer, which the groups before it use first) starts at zero */
	bool fresh[WBATCH + 1];
	/* the parity of each that filled up, until its page is sent */
	uint8_t par[WBATCH + 1][PAGE];
	/* its parity page as planned, sent with the run's data pages
	 * (spec_parity): the page, the request (-1: none), its answer, the
	 * node and its generation, the version */
	uint8_t spar[WBATCH + 1][PAGE];
	int spec[WBATCH + 1], spec_rc[WBATCH + 1];
	uint8_t spec_node[WBATCH + 1], spec_gen[WBATCH + 1];
	uint64_t spec_ver[WBATCH + 1];
};

/* A TRIM's slots, batched: the kernel discards freed swap slots in
 * ranges of hundreds of pages, and page by page a trim cost a drop per
 * page, with parity a fetch, a parity update and a drop, each a round
 * trip. TRIM_BATCH slots at a time: a drop for each of two copies, or
 * for a copy and its emptied group's parity page, fit one node_batch. */
#define TRIM_BATCH (RECOVER_STORES_MAX / 2)

/* Scratch of trim_groups: each group a chunk touches. */
struct trim_group {
	uint64_t gid;
	unsigned cut;           /* its members trimmed here */
	bool need_old, failed;
	uint8_t delta[PAGE];    /* closed groups: XOR of the trimmed pages */
};
struct trim_scratch {
	struct trim_group g[TRIM_BATCH];
	uint8_t old[TRIM_BATCH][PAGE];
	struct cluster_fetch f[TRIM_BATCH], tmp[TRIM_BATCH];
	unsigned from[TRIM_BATCH];
	uint8_t node[TRIM_BATCH];
};

static inline bool rb_slot_mapped(const struct slot *s)
{
	return s->n[0] != NO_NODE || s->n[1] != NO_NODE || s->spilled;
}

/* The end of a slot's write, in any mode (under its stripe lock): the
 * mapped count follows the slot from was_mapped to what it is now, and a
 * failed write is counted. Returns rc. */
static inline int rb_slot_written(struct remote_backend *rb, const struct slot *s,
				  bool was_mapped, int rc)
{
	if (!was_mapped && rb_slot_mapped(s))
		atomic_fetch_add(&rb->mapped, 1);
	if (was_mapped && !rb_slot_mapped(s))
		atomic_fetch_sub(&rb->mapped, 1);
	if (rc)
		atomic_fetch_add(&rb->write_errors, 1);
	return rc;
}

static inline int rb_check_range(struct remote_backend *rb, uint64_t off, uint64_t len)
{
	uint64_t size = rb->nslots * PAGE;
	return off > size || len > size - off ? -EINVAL : 0;
}

static inline pthread_mutex_t *rb_stripe(struct remote_backend *rb, uint64_t i)
{
	return &rb->stripes[i % STRIPES];
}

static inline bool rb_stopping(struct remote_backend *rb)
{
	pthread_mutex_lock(&rb->lock);
	bool s = rb->stopping;
	pthread_mutex_unlock(&rb->lock);
	return s;
}

/* slotmap.c: the slot map's locks and the logging of lost pages */
void rb_lost_read(struct remote_backend *rb, uint64_t i, uint64_t version,
		  const char *what);
void rb_rebuild_failed(struct remote_backend *rb, uint64_t slot,
		       uint64_t other, int rc);
unsigned rb_lock_one(pthread_mutex_t *first, size_t stride, unsigned n,
		     atomic_uint *rr);
unsigned rb_stripes_lock(struct remote_backend *rb, const uint64_t *slots,
			 unsigned n, uint16_t *order);
void rb_stripes_unlock(struct remote_backend *rb, const uint16_t *order, unsigned u);

/* node.c: node liveness, the capacity table and the connection pool */
uint64_t rb_rng_next(void);
bool rb_is_transport_error(int rc);
bool rb_usable(struct remote_backend *rb, unsigned i);
bool rb_copy_valid(struct remote_backend *rb, const struct slot *s, unsigned r);
struct rconn *rb_conn_take(struct remote_backend *rb, unsigned i, int *rc, bool wait);
struct rconn *rb_conn_get(struct remote_backend *rb, unsigned i, int *rc);
void rb_conn_put(struct remote_backend *rb, unsigned i, struct rconn *c, int rc);
int rb_refresh_from(struct remote_backend *rb, unsigned i);
int rb_refresh(struct remote_backend *rb);
void rb_reset_late_nodes(struct remote_backend *rb);

/* request.c: requests to several nodes at once, and single requests */
struct cluster_client *rb_fan_get(void *ctx, unsigned j, int *rc);
void rb_fan_put(void *ctx, unsigned j, struct cluster_client *cl, int rc);
void rb_fetch_batch(struct remote_backend *rb, struct cluster_fetch *f,
		    const uint8_t *node, unsigned n, struct cluster_fetch *tmp,
		    unsigned *from);
void rb_node_batch_mixed(struct remote_backend *rb, struct store_req *st, unsigned n);
void rb_node_batch(struct remote_backend *rb, enum batch_op op,
		   struct store_req *st, unsigned n);
void rb_store_batch(struct remote_backend *rb, struct store_req *st, unsigned n);
int rb_node_op(struct remote_backend *rb, unsigned i, enum op op,
	       uint64_t slot, uint64_t version, void *page);

/* place.c: placement: which node takes a new page */
bool rb_over_offer(struct remote_backend *rb, unsigned i);
bool rb_pickable(struct remote_backend *rb, unsigned i);
unsigned rb_pick_count(struct remote_backend *rb, const bool *exclude);
int rb_pick(struct remote_backend *rb, const bool *exclude);
int rb_place_avoid(struct remote_backend *rb, uint64_t i, unsigned r,
		   uint64_t version, void *page, int avoid);
int rb_place(struct remote_backend *rb, uint64_t i, unsigned r,
	     uint64_t version, void *page);
void rb_slot_unmap_remote(struct remote_backend *rb, uint64_t i);

/* hold.c: the hold (parity modes: the spill file, else memory) and the
 * spill file (every mode) */
bool rb_hold_reserve(struct remote_backend *rb, uint64_t i);
void rb_hold_unreserve(struct remote_backend *rb, uint64_t i);
uint64_t rb_hold_count(struct remote_backend *rb);
uint64_t rb_hold_next(struct remote_backend *rb, uint64_t *cur);
int rb_hold_put(struct remote_backend *rb, uint64_t i, const void *page);
void rb_short_log(struct remote_backend *rb);
int rb_hold_io(struct remote_backend *rb, bool write, uint64_t i, void *page);
void rb_hold_forget(struct remote_backend *rb, uint64_t i);
int rb_spill_io(struct remote_backend *rb, bool write, uint64_t i, void *page);
void rb_spill_forget(struct remote_backend *rb, uint64_t i);

/* groups.c: parity groups: parity pages, members, the open groups */
pthread_mutex_t *rb_glock(struct remote_backend *rb, uint64_t gid);
bool rb_member_ok(struct remote_backend *rb, const struct parity_member *m);
bool rb_parity_ok(struct remote_backend *rb, const struct parity_group *g);
void rb_group_exclude(struct remote_backend *rb, const struct parity_group *g,
		      bool *exclude);
int rb_parity_node_pick(struct remote_backend *rb, bool *exclude);
int rb_group_parity_store(struct remote_backend *rb, struct parity_group *g,
			  const void *page);
int rb_group_parity_rebuild(struct remote_backend *rb, struct parity_group *g);
void rb_group_apply(struct remote_backend *rb, struct parity_group *g,
		    const void *delta);
int rb_group_reconstruct(struct remote_backend *rb, struct parity_group *g,
			 uint64_t slot, void *out);
void rb_group_remove(struct remote_backend *rb, uint64_t gid, unsigned idx,
		     const void *old);
struct ppool *rb_pool_take(struct remote_backend *rb);
int64_t rb_group_alloc(struct remote_backend *rb, uint8_t *buf);
int rb_group_add(struct remote_backend *rb, uint64_t i, uint64_t v,
		 const void *page, int have);
int rb_parity_open(struct remote_backend *rb, const struct remote_opts *o,
		   unsigned targets);

/* copies.c: redundancy none and mirror: one slot */
int rb_copies_slot_write(struct remote_backend *rb, uint64_t i, const void *page);
int rb_copies_slot_read(struct remote_backend *rb, uint64_t i, void *page);

/* pslot.c: redundancy parity and parity-dist: one slot */
void rb_pslot_moved(struct remote_backend *rb, struct slot *s,
		    struct parity_group *g, int idx, unsigned n, uint8_t gen);
int rb_pslot_read(struct remote_backend *rb, uint64_t i, void *page);
void rb_pslot_unmap(struct remote_backend *rb, uint64_t i);
void rb_overwrite_count(struct remote_backend *rb, unsigned j, uint64_t i,
			struct parity_group *g, int rc,
			const struct cluster_client *cl);
int rb_pslot_write(struct remote_backend *rb, uint64_t i, const void *page);

/* wparity.c: write batching, parity modes */
int rb_parity_write_slots(struct remote_backend *rb, const uint64_t *slots,
			  const uint8_t *const *page, unsigned n);

/* write.c: reads and writes of byte ranges, write batching */
int rb_slot_read(struct remote_backend *rb, uint64_t i, void *page);
void rb_wb_init(struct wb_plan *w, const uint64_t *slots, const uint8_t *const *page,
		unsigned n);
void rb_wb_request(struct remote_backend *rb, struct wb_plan *w,
		   struct store_req *st, unsigned *ns);
void rb_wb_done(struct remote_backend *rb, struct wb_plan *x);
int rb_wb_rest(struct remote_backend *rb, const struct wb_plan *w, unsigned n);
int rb_copies_write_slots(struct remote_backend *rb, const uint64_t *slots,
			  const uint8_t *const *page, unsigned n);
int rb_write_range(struct remote_backend *rb, const void *buf, uint64_t off,
		   uint64_t len);

/* trim.c: TRIM */
void rb_copies_trim_slots(struct remote_backend *rb, uint64_t i0, unsigned n);
void rb_parity_trim_slots(struct remote_backend *rb, uint64_t i0, unsigned n);

/* recover.c: recovery after a node death, regrouping, the hold's retry */
bool rb_group_room_inside(struct remote_backend *rb, const struct parity_group *g);
uint64_t rb_group_dissolve(struct remote_backend *rb, uint32_t gid,
			   const uint64_t *slots, unsigned n);
void rb_copies_pass(struct remote_backend *rb);
void rb_parity_pass(struct remote_backend *rb);

/* migrate.c: migration off nodes over their offer */
int rb_parity_migrate_slot(struct remote_backend *rb, uint64_t i, unsigned j,
			   uint8_t *page);
int rb_copies_migrate_slot(struct remote_backend *rb, uint64_t i, unsigned j,
			   uint8_t *page);
void rb_migrate(struct remote_backend *rb);

/* stale.c: stale copies on nodes back from a partition */
void rb_stale_drop(struct remote_backend *rb);

/* stats.c: stats */
void rb_parity_stats(struct remote_backend *rb, struct outbuf *o, uint64_t groups);

/* modes.c: the modes' tables */
const char *rb_red_name(enum remote_redundancy r);
