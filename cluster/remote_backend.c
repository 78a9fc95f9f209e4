/* remote_backend.c - swap pages in other nodes' memory: the shadow slot map,
 * placement by the capacity table with the power of two choices, and
 * mirroring with failover and re-mirroring on read; see remote_backend.h. */
#include "cluster/remote_backend.h"

#include "cluster/client.h"
#include "cluster/parity.h"
#include "common/clock.h"
#include "common/log.h"
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
#define SHORT_LOG_NS (60ULL * 1000000000ULL) /* short of room: log this often */

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
	 * next taken, rather than found broken in turn, one down time
	 * apart (a restarted node stayed out of use 12 s, and recovery
	 * regrouped without it). */
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
	/* In the local spill file, not on nodes; with parity (no spill
	 * file there): held in our own memory (the hold, below). */
	uint8_t spilled;
	/* Its page was lost (rebuilt for one read, then no node took it):
	 * reads give EIO, never zeros, until a write or a trim. */
	uint8_t lost;
	/* With parity: its entry in the hold + 1, 0: none (in what was the
	 * struct's padding, so the hold costs nothing per slot) */
	uint16_t hold;
};

struct remote_backend {
	struct cluster_config cfg;
	uint32_t self;
	uint64_t owner;
	uint64_t nslots;
	unsigned copies;
	enum remote_redundancy red;
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
	/* trim_pages' scratch (parity), apart from the pool entries: a trim
	 * does not wait for a write's round trips to get one */
	struct tscratch {
		pthread_mutex_t lock;
		struct trim_scratch *t;
	} tscr[POOL];
	atomic_uint tscr_rr;
	atomic_int merge_needed;
	/* Parity modes: the hold. A page we have in hand (rebuilt after a
	 * loss, or being moved) that no node takes, because the cluster is
	 * short of room, is kept here rather than dropped: its slot is on no
	 * node and in no group, `spilled` set; reads are served from it, a
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
	 * changes (retry_ns); logged once per SHORT_LOG_NS with counts. */
	atomic_int retry_due;
	uint64_t retry_at_ns, retry_ns; /* refresher only */
	bool had_room;                  /* refresher only: a node could take a page */
	atomic_uint_fast64_t short_parity, short_held, short_kept, short_logged_ns;
	/* parity pages not placed because no node outside their group was
	 * up at all: too few nodes, not too little room */
	atomic_uint_fast64_t short_nodes;
	struct log_limit nodes_log;
	atomic_uint_fast64_t parity_sends, parity_updates, parity_rebuilds,
		parity_errors, reconstructs, rehomes, rebuilt_pages, rebuild_ns,
		rebuilt_batched, rebuilt_regrouped,
		merged_pages, spec_kept, spec_redone;

	/* migration off nodes over their offer (refresher thread) */
	atomic_uint_fast64_t migrations, migrate_ns, migrate_passes,
		migrate_failures;

	atomic_int rebuild_needed;      /* a node died: re-mirror its copies */
	atomic_int recovering;          /* a recovery pass is running */
	atomic_uint_fast64_t mapped, reads, writes, trims, failovers, remirrors,
		read_errors, write_errors, zero_reads, rebuild_passes,
		spills, spilled_now;
	/* Reads of lost pages: the kernel retries each one, and a lost node's
	 * pages are read by the thousand (133,000 lines for 13,000 pages):
	 * why a page could not be rebuilt, and that it is lost. */
	struct log_limit rebuild_log, lost_log;
};

int remote_redundancy_parse(const char *s)
{
	size_t n = strcspn(s, ":");

	if (!strcmp(s, "none"))
		return REMOTE_NONE;
	if (!strcmp(s, "mirror"))
		return REMOTE_MIRROR;
	if (remote_parity_group_parse(s) < 0)
		return -EINVAL;
	if (n == 6 && !strncmp(s, "parity", n))
		return REMOTE_PARITY;
	if (n == 11 && !strncmp(s, "parity-dist", n))
		return REMOTE_PARITY_DIST;
	return -EINVAL;
}

int remote_parity_group_parse(const char *s)
{
	const char *c = strchr(s, ':');
	char *end;

	if (!c)
		return 0;
	errno = 0;
	long v = strtol(c + 1, &end, 10);
	if (errno || end == c + 1 || *end || v < 2 || v > PARITY_MAX_N)
		return -EINVAL;
	return (int)v;
}

static const char *red_name(enum remote_redundancy r)
{
	switch (r) {
	case REMOTE_MIRROR: return "mirror";
	case REMOTE_PARITY: return "parity";
	case REMOTE_PARITY_DIST: return "parity-dist";
	default: return "none";
	}
}

static uint64_t rng_next(void)
{
	static _Thread_local uint64_t x;

	if (!x)
		x = clock_now_ns() ^ (uint64_t)(uintptr_t)&x ^ 0x9E3779B97F4A7C15ULL;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return x;
}

/* Errors after which a client handle is broken (client.h); reply
 * statuses (-ESTALE, -ENOENT, -ENOSPC, ...) leave it usable. */
static bool is_transport_error(int rc)
{
	return rc == -ECONNRESET || rc == -EPIPE || rc == -ETIMEDOUT ||
	       rc == -ENOTCONN || rc == -EPROTO;
}

static bool usable(struct remote_backend *rb, unsigned i)
{
	struct rnode *nd = &rb->nodes[i];
	return nd->target && atomic_load(&nd->alive) && atomic_load(&nd->reset_done) &&
	       clock_now_ns() >= atomic_load(&nd->down_until_ns);
}

/* A node answered with this incarnation: if it is not the one we knew, the
 * node restarted and every copy it held is gone. */
static void saw_incarnation(struct remote_backend *rb, unsigned i, uint64_t inc)
{
	struct rnode *nd = &rb->nodes[i];
	uint64_t was = atomic_exchange(&nd->incarnation, inc);

	if (was && was != inc) {
		atomic_fetch_add(&nd->gen, 1);
		log_warn("remote swap: node %u restarted (incarnation %" PRIu64
			 " -> %" PRIu64 "): its copies are lost%s", nd->id, was, inc,
			 rb->copies > 1 ? ", re-mirroring them" : "");
		atomic_store(&rb->rebuild_needed, 1);
	}
}

/* Is copy r of s still where the map says? */
static bool copy_valid(struct remote_backend *rb, const struct slot *s, unsigned r)
{
	return s->n[r] != NO_NODE &&
	       (uint8_t)atomic_load(&rb->nodes[s->n[r]].gen) == s->g[r];
}

/* A read of slot i failed for good (EIO to the kernel): counted, and
 * logged at most every 10 s; read_errors in the stats has them all. */
static void lost_read(struct remote_backend *rb, uint64_t i, uint64_t version,
		      const char *what)
{
	char note[96];
	atomic_fetch_add(&rb->read_errors, 1);
	if (log_limit(&rb->lost_log, 10, note, sizeof(note)))
		log_err("remote swap: slot %" PRIu64 " (version %" PRIu64
			") %s%s", i, version, what, note);
}

/* Slot `slot` cannot be rebuilt from parity: slot `other` of its group is
 * lost too (rc). Logged at most every 10 s, as lost_read. */
static void rebuild_failed(struct remote_backend *rb, uint64_t slot,
			   uint64_t other, int rc)
{
	char note[96];
	if (log_limit(&rb->rebuild_log, 10, note, sizeof(note)))
		log_err("remote swap: slot %" PRIu64 " cannot be rebuilt: slot %"
			PRIu64 " of its group is lost too (%s)%s", slot, other,
			strerror(-rc), note);
}

static void mark_down(struct remote_backend *rb, unsigned i, int rc)
{
	struct rnode *nd = &rb->nodes[i];
	uint64_t was = atomic_exchange(&nd->down_until_ns, clock_now_ns() + DOWN_NS);

	atomic_fetch_add(&nd->errors, 1);
	if (was >= clock_now_ns())
		return;
	/* A node that stays away is retried every second: one warning a
	 * minute then, with the count of the others (it was one a retry,
	 * for ever, for a node that never ran). */
	char note[96];
	if (log_limit(&nd->down_log, 60, note, sizeof(note)))
		log_warn("remote swap: node %u unreachable (%s); using the "
			 "others%s", nd->id, strerror(-rc), note);
	(void)rb;
}

/* A locked connection to node i, connected; NULL with *rc on failure. */
/* A connection to node i, waiting for one to be free unless !wait (then
 * NULL with *rc -EBUSY when all are taken). */
static struct rconn *conn_take(struct remote_backend *rb, unsigned i, int *rc, bool wait)
{
	struct rnode *nd = &rb->nodes[i];
	unsigned start = atomic_fetch_add(&nd->rr, 1);
	struct rconn *c = NULL;

	for (unsigned k = 0; k < nd->nconn && !c; k++) {
		struct rconn *t = &nd->conns[(start + k) % nd->nconn];
		if (pthread_mutex_trylock(&t->lock) == 0)
			c = t;
	}
	if (!c && !wait) {
		*rc = -EBUSY;
		return NULL;
	}
	if (!c) {
		c = &nd->conns[start % nd->nconn];
		pthread_mutex_lock(&c->lock);
	}
	if (c->cl && c->epoch != atomic_load(&nd->conn_epoch)) {
		cluster_client_close(c->cl);
		c->cl = NULL;
	}
	if (!c->cl) {
		char err[256];
		/* The only allocation on the I/O path: reconnecting. We
		 * authenticate as a client (id 0), not as our node: the
		 * node's own nvcached speaks for it, and a second process
		 * claiming its id with another incarnation would look to
		 * every peer like a restart of that node, after which they
		 * would refuse the real one's heartbeats as stale. */
		*rc = cluster_client_open_node(&c->cl, &rb->cfg, nd->id, 0,
					       rb->owner, rb->timeout_ms, err,
					       sizeof(err));
		if (*rc) {
			c->cl = NULL;
			pthread_mutex_unlock(&c->lock);
			mark_down(rb, i, *rc);
			return NULL;
		}
		c->epoch = atomic_load(&nd->conn_epoch);
		saw_incarnation(rb, i, cluster_client_incarnation(c->cl));
	}
	return c;
}

static struct rconn *conn_get(struct remote_backend *rb, unsigned i, int *rc)
{
	return conn_take(rb, i, rc, true);
}

/* After an operation on c: drop a broken connection. */
static void conn_put(struct remote_backend *rb, unsigned i, struct rconn *c, int rc)
{
	if (is_transport_error(rc)) {
		struct rnode *nd = &rb->nodes[i];
		unsigned e = c->epoch;
		atomic_compare_exchange_strong(&nd->conn_epoch, &e, e + 1);
		/* A connection to an earlier process of a node seen restarted
		 * since: its break says nothing about the new one, which must
		 * not be put down (the recovery its restart starts would then
		 * regroup everything without it). */
		bool stale = c->cl && cluster_client_incarnation(c->cl) !=
				      atomic_load(&nd->incarnation);
		cluster_client_close(c->cl);
		c->cl = NULL;
		if (!stale)
			mark_down(rb, i, rc);
	} else if (c->cl && cluster_client_pending(c->cl)) {
		/* replies still due (a caller's bug): the stream is out of
		 * step with whoever takes it next */
		cluster_client_close(c->cl);
		c->cl = NULL;
	}
	pthread_mutex_unlock(&c->lock);
}

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

static void fetch_batch(struct remote_backend *rb, struct cluster_fetch *f,
			const uint8_t *node, unsigned n, struct cluster_fetch *tmp,
			unsigned *from)
{
	unsigned first[CONFIG_MAX_NODES + 1] = { 0 };
	struct rconn *c[CONFIG_MAX_NODES] = { NULL };
	int crc[CONFIG_MAX_NODES] = { 0 };

	/* group the entries by node: tmp[first[j] .. first[j+1]) */
	for (unsigned k = 0; k < n; k++)
		first[node[k] + 1]++;
	for (unsigned j = 0; j < CONFIG_MAX_NODES; j++)
		first[j + 1] += first[j];
	{
		unsigned at[CONFIG_MAX_NODES];
		memcpy(at, first, sizeof(at));
		for (unsigned k = 0; k < n; k++) {
			from[at[node[k]]] = k;
			tmp[at[node[k]]++] = f[k];
		}
	}
	for (unsigned j = 0; j < rb->nn; j++) {
		unsigned cnt = first[j + 1] - first[j];
		if (!cnt)
			continue;
		if (cnt > FETCH_BATCH_NODE)
			abort();        /* callers batch at most that much */
		if (!usable(rb, j)) {
			crc[j] = -EHOSTDOWN;
			continue;
		}
		if (!(c[j] = conn_get(rb, j, &crc[j])))
			continue;
		for (unsigned k = first[j]; k < first[j + 1] && !crc[j]; k += FRAME_BATCH_MAX) {
			unsigned m = first[j + 1] - k < FRAME_BATCH_MAX ?
				     first[j + 1] - k : FRAME_BATCH_MAX;
			crc[j] = cluster_client_fetch_many_start(c[j]->cl, &tmp[k], m);
		}
	}
	for (unsigned j = 0; j < rb->nn; j++) {
		if (!c[j])
			continue;
		/* take every reply that is due, even after an error */
		for (unsigned k = first[j]; k < first[j + 1]; k += FRAME_BATCH_MAX) {
			unsigned m = first[j + 1] - k < FRAME_BATCH_MAX ?
				     first[j + 1] - k : FRAME_BATCH_MAX;
			if (!cluster_client_pending(c[j]->cl))
				break;
			int rc = cluster_client_wait_fetch_many(c[j]->cl, &tmp[k], m);
			if (rc && !crc[j])
				crc[j] = rc;
		}
		conn_put(rb, j, c[j], crc[j]);
	}
	for (unsigned j = 0; j < rb->nn; j++)
		for (unsigned k = first[j]; k < first[j + 1]; k++) {
			struct cluster_fetch *d = &f[from[k]];
			d->rc = crc[j] ? crc[j] : tmp[k].rc;
			d->version_out = tmp[k].version_out;
			if (!d->rc && d->kind == FK_DATA)
				atomic_fetch_add(&rb->nodes[j].fetches, 1);
		}
}

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

static int batch_start(struct cluster_client *cl, enum batch_op op,
		       const struct cluster_store *cs, unsigned n)
{
	switch (op) {
	case BO_STORE: return cluster_client_store_many_start(cl, cs, n);
	case BO_PARITY_UPDATE: return cluster_client_parity_update_many_start(cl, cs, n);
	default: return cluster_client_drop_many_start(cl, cs, n);
	}
}

static int batch_wait(struct cluster_client *cl, enum batch_op op,
		      struct cluster_store *cs, unsigned n)
{
	switch (op) {
	case BO_STORE: return cluster_client_wait_store_many(cl, cs, n);
	case BO_PARITY_UPDATE: return cluster_client_wait_parity_update_many(cl, cs, n);
	default: return cluster_client_wait_drop_many(cl, cs, n);
	}
}

/* Requests of several kinds at once (st[k].op each): one request per
 * node and kind, every one sent (pipelined on the node's connection)
 * before any answer is taken, so the set costs one round trip. At most
 * FRAME_BATCH_MAX of one kind per node (callers keep within it). */
static void node_batch_mixed(struct remote_backend *rb, struct store_req *st, unsigned n)
{
	enum { NB = CONFIG_MAX_NODES * BO_COUNT };   /* node j, kind o: j * BO_COUNT + o */
	struct cluster_store cs[NODE_BATCH_MAX];
	unsigned todo[NODE_BATCH_MAX];
	unsigned first[NB + 1] = { 0 };
	struct rconn *c[CONFIG_MAX_NODES] = { NULL };
	int crc[NB] = { 0 };
	bool sent[NB] = { false };

	/* group by node and kind: cs[first[b] .. first[b+1]), todo maps back */
	for (unsigned k = 0; k < n; k++)
		first[st[k].node * BO_COUNT + st[k].op + 1]++;
	for (unsigned b = 0; b < NB; b++)
		first[b + 1] += first[b];
	{
		unsigned at[NB];
		memcpy(at, first, sizeof(at));
		for (unsigned k = 0; k < n; k++) {
			unsigned x = at[st[k].node * BO_COUNT + st[k].op]++;
			todo[x] = k;
			cs[x] = (struct cluster_store){ .kind = st[k].kind, .key = st[k].slot,
							.version = st[k].version,
							.page = st[k].page };
		}
	}
	for (unsigned j = 0; j < rb->nn; j++) {
		unsigned b0 = j * BO_COUNT;
		if (first[b0 + BO_COUNT] == first[b0])
			continue;
		int rc = 0;
		if (!usable(rb, j))
			rc = -EHOSTDOWN;
		else
			c[j] = conn_get(rb, j, &rc);
		for (unsigned b = b0; b < b0 + BO_COUNT; b++) {
			unsigned cnt = first[b + 1] - first[b];
			if (!cnt)
				continue;
			if (cnt > FRAME_BATCH_MAX)
				crc[b] = -E2BIG;        /* callers keep within it */
			else if (!c[j])
				crc[b] = rc;
			else if (!(crc[b] = batch_start(c[j]->cl, (enum batch_op)(b - b0),
							 &cs[first[b]], cnt)))
				sent[b] = true;
		}
	}
	for (unsigned j = 0; j < rb->nn; j++) {
		unsigned b0 = j * BO_COUNT;
		int trc = 0;            /* the first transport error, for conn_put */
		for (unsigned b = b0; b < b0 + BO_COUNT && c[j]; b++) {
			if (!sent[b])
				continue;
			/* the answers come in the order the requests went */
			int rc = batch_wait(c[j]->cl, (enum batch_op)(b - b0),
					    &cs[first[b]], first[b + 1] - first[b]);
			if (rc)
				crc[b] = rc;
		}
		/* the first (later ones say only that the handle broke) */
		for (unsigned b = b0; b < b0 + BO_COUNT && c[j] && !trc; b++)
			if (is_transport_error(crc[b]))
				trc = crc[b];
		if (c[j])
			conn_put(rb, j, c[j], trc);
		for (unsigned x = first[b0]; x < first[b0 + BO_COUNT]; x++) {
			struct store_req *r = &st[todo[x]];
			int b = (int)(b0 + r->op);
			int rc = crc[b] ? crc[b] : cs[x].rc;
			r->rc = rc;
			if (r->op != BO_STORE)
				continue;
			if (rc == -ENOSPC)
				atomic_store(&rb->nodes[j].free_pages, 0);
			else if (!rc && r->kind == FK_DATA)
				atomic_fetch_add(&rb->nodes[j].stores, 1);
		}
	}
}

/* All of one kind (see node_batch_mixed). */
static void node_batch(struct remote_backend *rb, enum batch_op op,
		       struct store_req *st, unsigned n)
{
	for (unsigned k = 0; k < n; k++)
		st[k].op = (uint8_t)op;
	node_batch_mixed(rb, st, n);
}

static void store_batch(struct remote_backend *rb, struct store_req *st, unsigned n)
{
	node_batch(rb, BO_STORE, st, n);
}

enum op { OP_STORE, OP_FETCH, OP_DROP };

static int node_op(struct remote_backend *rb, unsigned i, enum op op,
		   uint64_t slot, uint64_t version, void *page)
{
	struct rnode *nd = &rb->nodes[i];
	int rc;
	struct rconn *c = conn_get(rb, i, &rc);

	if (!c)
		return rc;
	switch (op) {
	case OP_STORE:
		rc = cluster_client_page_store(c->cl, slot, version, page);
		if (rc == -ESTALE) {
			/* Our versions only grow (stripe lock), so a newer copy
			 * there is a leftover of an earlier swap device with
			 * our owner id: garbage. Drop it and store again. */
			rc = cluster_client_page_drop(c->cl, slot, UINT64_MAX);
			if (!rc || rc == -ENOENT)
				rc = cluster_client_page_store(c->cl, slot, version, page);
		}
		if (rc == -ENOSPC)
			atomic_store(&nd->free_pages, 0);
		else if (!rc)
			atomic_fetch_add(&nd->stores, 1);
		break;
	case OP_FETCH:
		rc = cluster_client_page_fetch(c->cl, slot, version, page, NULL);
		if (!rc)
			atomic_fetch_add(&nd->fetches, 1);
		break;
	case OP_DROP:
		rc = cluster_client_page_drop(c->cl, slot, version);
		break;
	}
	conn_put(rb, i, c, rc);
	return rc;
}

/* Does node i hold more than it offers (it is shrinking)? New pages and
 * rewrites then go elsewhere, and the migration pass moves ours off it. */
static bool over_offer(struct remote_backend *rb, unsigned i)
{
	return atomic_load(&rb->nodes[i].over_pages) > 0;
}

/* Below this much room a node is judged by its room, above it by its load:
 * nodes with plenty of idle memory are equally good, and comparing their
 * free bytes would only follow the noise of their MemAvailable readings. */
#define AMPLE_PAGES (64 * 1024 * 1024 / PAGE)

/* Is a a better target than b? */
static bool better(struct remote_backend *rb, unsigned a, unsigned b)
{
	int_fast64_t fa = atomic_load(&rb->nodes[a].free_pages);
	int_fast64_t fb = atomic_load(&rb->nodes[b].free_pages);

	if (fa >= AMPLE_PAGES && fb >= AMPLE_PAGES)
		return atomic_load(&rb->nodes[a].held) <= atomic_load(&rb->nodes[b].held);
	return fa >= fb;
}

/* Can node i take a new page? */
static bool pickable(struct remote_backend *rb, unsigned i)
{
	return usable(rb, i) && !over_offer(rb, i) &&
	       atomic_load(&rb->nodes[i].free_pages) > 0;
}

/* How many nodes not in exclude[] pick() chooses from. */
static unsigned pick_count(struct remote_backend *rb, const bool *exclude)
{
	unsigned nc = 0;

	for (unsigned i = 0; i < rb->nn; i++)
		nc += !exclude[i] && pickable(rb, i);
	return nc;
}

/* Power of two choices among usable nodes with room, not in exclude[]. */
static int pick(struct remote_backend *rb, const bool *exclude)
{
	unsigned cand[CONFIG_MAX_NODES], nc = 0;

	for (unsigned i = 0; i < rb->nn; i++)
		if (!exclude[i] && pickable(rb, i))
			cand[nc++] = i;
	if (!nc)
		return -1;
	if (nc == 1)
		return (int)cand[0];
	unsigned a = cand[rng_next() % nc];
	unsigned b = cand[rng_next() % (nc - 1)];
	if (b == a)
		b = cand[nc - 1];
	return better(rb, a, b) ? (int)a : (int)b;
}

/* Store a new copy r of slot i somewhere other than the other copy and
 * node `avoid` (-1: none). Caller holds the slot's stripe. */
static int place_avoid(struct remote_backend *rb, uint64_t i, unsigned r,
		       uint64_t version, void *page, int avoid)
{
	struct slot *s = &rb->slots[i];
	bool exclude[CONFIG_MAX_NODES] = { false };
	int rc = -ENOSPC;

	for (unsigned k = 0; k < rb->copies; k++)
		if (k != r && s->n[k] != NO_NODE)
			exclude[s->n[k]] = true;
	if (avoid >= 0)
		exclude[avoid] = true;
	for (unsigned tries = 0; tries < rb->nn; tries++) {
		int idx = pick(rb, exclude);
		if (idx < 0)
			break;
		rc = node_op(rb, (unsigned)idx, OP_STORE, i, version, page);
		if (!rc) {
			atomic_fetch_add(&rb->nodes[idx].placed, 1);
			atomic_fetch_add(&rb->nodes[idx].held, 1);
			atomic_fetch_sub(&rb->nodes[idx].free_pages, 1);
			s->n[r] = (uint8_t)idx;
			s->g[r] = (uint8_t)atomic_load(&rb->nodes[idx].gen);
			return 0;
		}
		exclude[idx] = true;
	}
	return rc == -ENOSPC || rc == 0 ? -ENOSPC : -EIO;
}

static int place(struct remote_backend *rb, uint64_t i, unsigned r,
		 uint64_t version, void *page)
{
	return place_avoid(rb, i, r, version, page, -1);
}

static bool slot_mapped(const struct slot *s)
{
	return s->n[0] != NO_NODE || s->n[1] != NO_NODE || s->spilled;
}

/* Forget the slot's copies on the nodes (dropped where the node answers). */
static void slot_unmap_remote(struct remote_backend *rb, uint64_t i)
{
	struct slot *s = &rb->slots[i];

	for (unsigned r = 0; r < rb->copies; r++) {
		if (s->n[r] == NO_NODE)
			continue;
		atomic_fetch_sub(&rb->nodes[s->n[r]].held, 1);
		if (copy_valid(rb, s, r) && usable(rb, s->n[r]) &&
		    node_op(rb, s->n[r], OP_DROP, i, UINT64_MAX, NULL) == 0)
			atomic_fetch_add(&rb->nodes[s->n[r]].free_pages, 1);
		s->n[r] = NO_NODE;
	}
}

/* --- the hold (parity modes; see struct remote_backend) ------------------ */

/* Entry x's page. */
static uint8_t *hold_page(struct remote_backend *rb, uint32_t x)
{
	return rb->hold_chunk[x / HOLD_CHUNK] + (size_t)(x % HOLD_CHUNK) * PAGE;
}

/* Reserve room for one page in the hold (made now, so that hold_put
 * cannot fail): true, or false when the hold is at its cap or out of
 * memory (said once per SHORT_LOG_NS, see short_log). */
static bool hold_reserve(struct remote_backend *rb)
{
	bool ok = false;

	pthread_mutex_lock(&rb->hold_lock);
	if (!rb->hold_slot) {
		uint32_t nc = (rb->hold_max + HOLD_CHUNK - 1) / HOLD_CHUNK;
		rb->hold_slot = calloc(rb->hold_max, sizeof(*rb->hold_slot));
		rb->hold_chunk = calloc(nc, sizeof(*rb->hold_chunk));
		rb->hold_free = calloc(rb->hold_max, sizeof(*rb->hold_free));
		if (!rb->hold_slot || !rb->hold_chunk || !rb->hold_free) {
			free(rb->hold_slot);
			free(rb->hold_chunk);
			free(rb->hold_free);
			rb->hold_slot = NULL;
			rb->hold_chunk = NULL;
			rb->hold_free = NULL;
			goto out;
		}
	}
	if (rb->hold_nfree <= rb->hold_reserved && rb->hold_n < rb->hold_max) {
		uint8_t *c = malloc((size_t)HOLD_CHUNK * PAGE);
		if (c) {
			uint32_t n = rb->hold_max - rb->hold_n < HOLD_CHUNK ?
				     rb->hold_max - rb->hold_n : HOLD_CHUNK;
			rb->hold_chunk[rb->hold_n / HOLD_CHUNK] = c;
			for (uint32_t x = rb->hold_n + n; x-- > rb->hold_n;)
				rb->hold_free[rb->hold_nfree++] = x;
			rb->hold_n += n;
		}
	}
	if (rb->hold_nfree > rb->hold_reserved) {
		rb->hold_reserved++;
		ok = true;
	}
out:
	pthread_mutex_unlock(&rb->hold_lock);
	if (!ok) {
		atomic_fetch_add(&rb->hold_refused, 1);
		atomic_store(&rb->retry_due, 1);
	}
	return ok;
}

static void hold_unreserve(struct remote_backend *rb)
{
	pthread_mutex_lock(&rb->hold_lock);
	rb->hold_reserved--;
	pthread_mutex_unlock(&rb->hold_lock);
}

/* Slot i (on no node, in no group) keeps `page` in the hold, in the room
 * a hold_reserve made; the slot stays mapped. Caller holds the stripe. */
static void hold_put(struct remote_backend *rb, uint64_t i, const void *page)
{
	struct slot *s = &rb->slots[i];

	pthread_mutex_lock(&rb->hold_lock);
	uint32_t x = rb->hold_free[--rb->hold_nfree];
	rb->hold_reserved--;
	rb->hold_slot[x] = i;
	s->hold = (uint16_t)(x + 1);
	pthread_mutex_unlock(&rb->hold_lock);
	memcpy(hold_page(rb, x), page, PAGE);
	s->spilled = 1;
	atomic_fetch_add(&rb->held_now, 1);
	atomic_fetch_add(&rb->holds, 1);
	atomic_fetch_add(&rb->short_held, 1);
	atomic_store(&rb->retry_due, 1);
}

/* Slot i leaves the hold (placed on a node, trimmed). Caller holds the
 * stripe. */
static void hold_release(struct remote_backend *rb, uint64_t i)
{
	pthread_mutex_lock(&rb->hold_lock);
	uint32_t x = rb->slots[i].hold - 1u;
	rb->slots[i].hold = 0;
	rb->hold_free[rb->hold_nfree++] = x;
	pthread_mutex_unlock(&rb->hold_lock);
	atomic_fetch_sub(&rb->held_now, 1);
}

/* The cluster is short of room: one warning per SHORT_LOG_NS, with what
 * happened since the last one, never one per page. */
static void short_log(struct remote_backend *rb)
{
	/* Not room but nodes: with groups of N on N + 1 nodes, one lost,
	 * no node is left outside a group for its parity page; "give the
	 * nodes memory" was the wrong advice. Its own once a minute: in the
	 * shortage's window it held back the room warning that follows. */
	if (atomic_load(&rb->short_nodes) &&
	    log_limit(&rb->nodes_log, SHORT_LOG_NS / 1000000000ull, NULL, 0))
		log_warn("remote swap: %" PRIu64 " parity pages not placed: no node "
			 "outside their group is up (a group of %u pages needs "
			 "%u nodes up); their groups are unprotected until a node "
			 "returns or the recovery pass regroups them, since the "
			 "last such message",
			 (uint64_t)atomic_exchange(&rb->short_nodes, 0), rb->gsize,
			 rb->gsize + 1);
	uint64_t now = clock_now_ns(), last = atomic_load(&rb->short_logged_ns);

	if (last && now - last < SHORT_LOG_NS)
		return;
	/* nothing to say: the window stays open for the next shortage */
	if (!atomic_load(&rb->short_parity) && !atomic_load(&rb->short_held) &&
	    !atomic_load(&rb->short_kept) && !atomic_load(&rb->hold_refused))
		return;
	if (!atomic_compare_exchange_strong(&rb->short_logged_ns, &last, now))
		return;
	uint64_t par = atomic_exchange(&rb->short_parity, 0);
	uint64_t held = atomic_exchange(&rb->short_held, 0);
	uint64_t kept = atomic_exchange(&rb->short_kept, 0);
	uint64_t refused = atomic_exchange(&rb->hold_refused, 0);
	if (!par && !held && !kept && !refused)
		return;
	log_warn("remote swap: the cluster is short of room (no node takes our "
		 "pages): %" PRIu64 " parity pages not placed (their groups are "
		 "unprotected), %" PRIu64 " pages held in nvswapd's memory "
		 "(%" PRIu64 " now, at most %u MiB), %" PRIu64 " lost pages left "
		 "in their groups to be rebuilt later%s, since the last such "
		 "message; retrying with back-off. Give the nodes memory "
		 "(mem=, nvcachectl grow) or add a node", par, held,
		 (uint64_t)atomic_load(&rb->held_now), rb->hold_max / (1048576 / PAGE),
		 kept, refused ? " (the hold is full: another loss in those "
		 "groups loses their pages)" : "");
}

static int spill_io(struct remote_backend *rb, bool write, uint64_t i, void *page)
{
	if (rb->gsize) {        /* the hold; caller holds the stripe */
		uint8_t *h = hold_page(rb, rb->slots[i].hold - 1u);
		memcpy(write ? h : page, write ? page : h, PAGE);
		return 0;
	}
	ssize_t n = write ? pwrite(rb->spill_fd, page, PAGE, (off_t)(i * PAGE)) :
			    pread(rb->spill_fd, page, PAGE, (off_t)(i * PAGE));
	if (n == PAGE)
		return 0;
	log_err("remote swap: spill file %s of slot %" PRIu64 ": %s",
		write ? "write" : "read", i, n < 0 ? strerror(errno) : "short");
	return -EIO;
}

static void spill_forget(struct remote_backend *rb, uint64_t i)
{
	struct slot *s = &rb->slots[i];

	if (!s->spilled)
		return;
	s->spilled = 0;
	if (rb->gsize) {
		hold_release(rb, i);
		return;
	}
	atomic_fetch_sub(&rb->spilled_now, 1);
	/* give the file's blocks back; failure only costs disk space */
	(void)fallocate(rb->spill_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			(off_t)(i * PAGE), PAGE);
}

/* Mirror: store both copies at once (one round trip of wall time, not
 * two). Each copy goes where it lives if that node is usable, else to a new
 * node picked as in place(). done[r] tells which copies are stored; the
 * others are left to slot_write's one-by-one path (retries, other nodes,
 * the stale-leftover fix in node_op). Caller holds the stripe. */
static void mirror_parallel(struct remote_backend *rb, uint64_t i, uint64_t v,
			    const void *page, bool done[2])
{
	struct slot *s = &rb->slots[i];
	bool exclude[CONFIG_MAX_NODES] = { false };
	int tgt[2] = { -1, -1 }, rc[2] = { -1, -1 }, drop[2] = { -1, -1 };
	struct rconn *c[2] = { NULL, NULL };

	for (unsigned r = 0; r < 2; r++) {
		if (copy_valid(rb, s, r) && usable(rb, s->n[r]) &&
		    !over_offer(rb, s->n[r])) {
			tgt[r] = s->n[r];
			exclude[tgt[r]] = true;
		}
	}
	for (unsigned r = 0; r < 2; r++) {
		if (tgt[r] >= 0)
			continue;
		tgt[r] = pick(rb, exclude);
		if (tgt[r] < 0)
			return;
		exclude[tgt[r]] = true;
	}
	/* Take the two connections in node order: no two threads can then
	 * each hold one and wait for the other's. */
	unsigned lo = tgt[0] < tgt[1] ? 0 : 1, hi = 1 - lo;
	int e;
	if (!(c[lo] = conn_get(rb, (unsigned)tgt[lo], &e)))
		return;
	if (!(c[hi] = conn_get(rb, (unsigned)tgt[hi], &e))) {
		pthread_mutex_unlock(&c[lo]->lock);
		return;
	}
	for (unsigned r = 0; r < 2; r++)
		rc[r] = cluster_client_page_store_start(c[r]->cl, i, v, page);
	for (unsigned r = 0; r < 2; r++) {
		if (!rc[r])
			rc[r] = cluster_client_wait(c[r]->cl);
		if (rc[r] == -ENOSPC)
			atomic_store(&rb->nodes[tgt[r]].free_pages, 0);
	}
	for (unsigned r = 0; r < 2; r++) {
		conn_put(rb, (unsigned)tgt[r], c[r], rc[r]);
		if (rc[r])
			continue;
		struct rnode *nd = &rb->nodes[tgt[r]];
		atomic_fetch_add(&nd->stores, 1);
		if (s->n[r] != tgt[r] || !copy_valid(rb, s, r)) {
			/* a new placement: the old copy was on a node now
			 * down or restarted (nothing there to drop), or on
			 * one over its offer (dropped: the write moved it) */
			if (s->n[r] != NO_NODE && copy_valid(rb, s, r) &&
			    usable(rb, s->n[r]))
				drop[r] = s->n[r];
			if (s->n[r] != NO_NODE)
				atomic_fetch_sub(&rb->nodes[s->n[r]].held, 1);
			atomic_fetch_add(&nd->placed, 1);
			atomic_fetch_add(&nd->held, 1);
			atomic_fetch_sub(&nd->free_pages, 1);
			s->n[r] = (uint8_t)tgt[r];
			s->g[r] = (uint8_t)atomic_load(&nd->gen);
		}
		done[r] = true;
	}
	/* old copies, once neither connection is held */
	for (unsigned r = 0; r < 2; r++)
		if (drop[r] >= 0)
			(void)node_op(rb, (unsigned)drop[r], OP_DROP, i, v, NULL);
}

/* --- parity modes (see remote_backend.h and cluster/parity.h) -------------
 * Lock order: a slot's stripe, then a parity-pool entry (or a trim
 * scratch), then a group's lock stripe; connections inside those. Nobody
 * holds two pool entries; only write_slots, trim_pages and
 * recover_regroup hold several stripes, and write_slots' close_batch and
 * overwrite_batch, trim_pages' trim_groups and recover_regroup several
 * group locks, each set taken in index order
 * (nobody else takes a second one, or waits for one holding a
 * connection). Every
 * change of a grouped slot's node or version happens under its group's
 * lock, so a group's member list read under that lock is consistent with
 * the nodes' contents and the parity page. */

static pthread_mutex_t *glock(struct remote_backend *rb, uint64_t gid)
{
	return &rb->glocks[gid % GSTRIPES];
}

static bool member_ok(struct remote_backend *rb, const struct parity_member *m)
{
	return m->node != NO_NODE &&
	       (uint8_t)atomic_load(&rb->nodes[m->node].gen) == m->gen &&
	       usable(rb, m->node);
}

static bool parity_ok(struct remote_backend *rb, const struct parity_group *g)
{
	return g->state == PG_CLOSED && !g->parity_lost && g->pn != PARITY_NO_NODE &&
	       (uint8_t)atomic_load(&rb->nodes[g->pn].gen) == g->pgen &&
	       usable(rb, g->pn);
}

enum pop { POP_UPDATE, POP_STORE, POP_FETCH, POP_DROP };

static int parity_op(struct remote_backend *rb, unsigned i, enum pop op,
		     uint64_t key, uint64_t version, void *page)
{
	int rc;
	struct rconn *c = conn_get(rb, i, &rc);

	if (!c)
		return rc;
	switch (op) {
	case POP_UPDATE:
		rc = cluster_client_parity_update(c->cl, key, version, page);
		break;
	case POP_STORE:
		rc = cluster_client_parity_store(c->cl, key, version, page);
		break;
	case POP_FETCH:
		rc = cluster_client_parity_fetch(c->cl, key, page, NULL);
		break;
	case POP_DROP:
		rc = cluster_client_parity_drop(c->cl, key, version);
		break;
	}
	conn_put(rb, i, c, rc);
	return rc;
}

/* Nodes a page of group g may not go to: its members' nodes and, with
 * centralised parity, the parity node (it holds no data while alive). */
static void group_exclude(struct remote_backend *rb, const struct parity_group *g,
			  bool *exclude)
{
	for (unsigned k = 0; k < g->nmem; k++)
		if (g->m[k].node != NO_NODE)
			exclude[g->m[k].node] = true;
	if (g->state == PG_CLOSED && g->pn != PARITY_NO_NODE)
		exclude[g->pn] = true;
	if (rb->pnode >= 0)
		exclude[rb->pnode] = true;
}

/* The node for a closing group's parity page, outside the nodes in
 * exclude (which it may add to): the parity node while it can take it,
 * else any. -1: none. */
static int parity_node_pick(struct remote_backend *rb, bool *exclude)
{
	if (rb->pnode >= 0 && !exclude[rb->pnode] && usable(rb, (unsigned)rb->pnode) &&
	    !over_offer(rb, (unsigned)rb->pnode))
		return rb->pnode;
	if (rb->pnode >= 0)
		exclude[rb->pnode] = true;
	return pick(rb, exclude);
}

/* Store parity page `page` of group g on a node outside the group: the
 * dedicated parity node when there is one and it is usable, else any.
 * A node that held an earlier state of it drops it first (a parity update
 * cut by a transport error may or may not have been applied). Caller
 * holds the group's lock. */
static int group_parity_store(struct remote_backend *rb, struct parity_group *g,
			      const void *page)
{
	bool exclude[CONFIG_MAX_NODES] = { false };
	int rc = -ENOSPC;
	uint8_t oldpn = g->pn;

	for (unsigned k = 0; k < g->nmem; k++)
		if (g->m[k].node != NO_NODE)
			exclude[g->m[k].node] = true;
	bool member[CONFIG_MAX_NODES];
	memcpy(member, exclude, sizeof(member));
	for (unsigned tries = 0; tries < rb->nn; tries++) {
		/* the parity node gone: parity goes to a node outside the
		 * group (IV.B.4; until it comes back) */
		int pn = parity_node_pick(rb, exclude);
		if (pn < 0)
			break;
		/* a store, not an update: it replaces whatever an earlier
		 * attempt that timed out may have left there */
		rc = parity_op(rb, (unsigned)pn, POP_STORE, g->pkey, ++g->pver, (void *)page);
		if (!rc) {
			if (oldpn != PARITY_NO_NODE && oldpn != pn) {
				atomic_fetch_sub(&rb->nodes[oldpn].held, 1);
				if (usable(rb, oldpn))
					(void)parity_op(rb, oldpn, POP_DROP, g->pkey,
							UINT64_MAX, NULL);
			}
			if (oldpn != pn)
				atomic_fetch_add(&rb->nodes[pn].held, 1);
			g->pn = (uint8_t)pn;
			g->pgen = (uint8_t)atomic_load(&rb->nodes[pn].gen);
			g->parity_lost = 0;
			atomic_fetch_add(&rb->parity_sends, 1);
			return 0;
		}
		exclude[pn] = true;
	}
	if (oldpn != PARITY_NO_NODE)
		atomic_fetch_sub(&rb->nodes[oldpn].held, 1);
	g->pn = PARITY_NO_NODE;
	g->parity_lost = 1;
	atomic_fetch_add(&rb->parity_errors, 1);
	/* retried by the refresher, backing off (it used to run a whole
	 * recovery pass at once, and again, logging every group each time:
	 * thousands of lines a second while the cluster had no room) */
	bool outside_up = false;
	for (unsigned i = 0; i < rb->nn; i++)
		outside_up |= !member[i] && usable(rb, i);
	atomic_fetch_add(outside_up ? &rb->short_parity : &rb->short_nodes, 1);
	atomic_store(&rb->retry_due, 1);
	log_debug("remote swap: parity group %" PRIu64 ": no node took its parity "
		  "page (%s)", g->pkey & 0xffffffff, strerror(-rc));
	short_log(rb);
	return rc;
}

/* Recompute group g's parity from its members (IV.B.4) and store it.
 * Caller holds the group's lock. */
static int group_parity_rebuild(struct remote_backend *rb, struct parity_group *g)
{
	uint8_t acc[PAGE], pg[PARITY_MAX_N][PAGE], node[PARITY_MAX_N];
	struct cluster_fetch f[PARITY_MAX_N], tmp[PARITY_MAX_N];
	unsigned from[PARITY_MAX_N];
	bool all = true;

	if (g->state != PG_CLOSED)
		return 0;
	/* every member at once; then judged in member order */
	for (unsigned k = 0; k < g->nmem; k++) {
		const struct parity_member *m = &g->m[k];
		node[k] = m->node;
		f[k] = (struct cluster_fetch){ .kind = FK_DATA, .key = m->slot,
					       .version = m->version, .page = pg[k],
					       .rc = member_ok(rb, m) ? 0 : -EHOSTDOWN };
		all = all && !f[k].rc;
	}
	if (all)
		fetch_batch(rb, f, node, g->nmem, tmp, from);
	memset(acc, 0, PAGE);
	for (unsigned k = 0; k < g->nmem; k++) {
		const struct parity_member *m = &g->m[k];
		int rc = f[k].rc;
		if (rc) {
			g->parity_lost = 1;
			log_err("remote swap: parity group %" PRIu64 ": member slot %"
				PRIu64 " unreadable (%s) while its parity is lost: "
				"the group is unprotected", g->pkey & 0xffffffff,
				m->slot, strerror(-rc));
			return -EIO;
		}
		xor_into(acc, pg[k], PAGE);
	}
	int rc = group_parity_store(rb, g, acc);
	if (!rc)
		atomic_fetch_add(&rb->parity_rebuilds, 1);
	return rc;
}

/* Apply delta to group g's parity page. Members already reflect the
 * change; if the parity node fails, the page is recomputed from them.
 * Caller holds the group's lock. */
static void group_apply(struct remote_backend *rb, struct parity_group *g,
			const void *delta)
{
	if (g->state == PG_OPEN) {
		xor_into(g->local, delta, PAGE);
		return;
	}
	if (parity_ok(rb, g) &&
	    parity_op(rb, g->pn, POP_UPDATE, g->pkey, ++g->pver, (void *)delta) == 0) {
		atomic_fetch_add(&rb->parity_updates, 1);
		return;
	}
	(void)group_parity_rebuild(rb, g);
}

/* The page of member `slot` of group g from the parity page and the other
 * members. Caller holds the group's lock. */
static int group_reconstruct(struct remote_backend *rb, struct parity_group *g,
			     uint64_t slot, void *out)
{
	uint8_t pg[PARITY_MAX_N][PAGE], node[PARITY_MAX_N + 1];
	struct cluster_fetch r[PARITY_MAX_N + 1], tmp[PARITY_MAX_N + 1];
	unsigned n = 0, who[PARITY_MAX_N], from[PARITY_MAX_N + 1];

	if (g->state == PG_OPEN)
		memcpy(out, g->local, PAGE);
	else if (!parity_ok(rb, g))
		return -EIO;
	/* a member we cannot ask dooms it before any I/O */
	for (unsigned k = 0; k < g->nmem; k++) {
		const struct parity_member *m = &g->m[k];
		if (m->slot == slot)
			continue;
		if (!member_ok(rb, m)) {
			rebuild_failed(rb, slot, m->slot, -EHOSTDOWN);
			return -EIO;
		}
		who[n] = k;
		node[n] = m->node;
		r[n] = (struct cluster_fetch){ .kind = FK_DATA, .key = m->slot,
					       .version = m->version, .page = pg[n] };
		n++;
	}
	/* the parity page and every other member at once */
	unsigned nr = n;
	if (g->state != PG_OPEN) {
		node[nr] = g->pn;
		r[nr++] = (struct cluster_fetch){ .kind = FK_PARITY, .key = g->pkey,
						  .page = out };
	}
	if (nr)
		fetch_batch(rb, r, node, nr, tmp, from);
	if (nr > n && r[n].rc)
		return -EIO;
	for (unsigned k = 0; k < n; k++) {
		if (r[k].rc) {
			rebuild_failed(rb, slot, g->m[who[k]].slot, r[k].rc);
			return -EIO;
		}
		xor_into(out, pg[k], PAGE);
	}
	atomic_fetch_add(&rb->reconstructs, 1);
	return 0;
}

/* Close an open group: its parity page leaves the client's buffer for the
 * parity node. Caller holds the pool entry and the group's lock. */
static void group_close(struct remote_backend *rb, struct parity_group *g)
{
	g->state = PG_CLOSED;
	g->pn = PARITY_NO_NODE;
	(void)group_parity_store(rb, g, g->local);
	g->local = NULL;
}

/* Take member idx (slot i, contents `old`, NULL: unknown) out of group
 * gid. Frees the group when its last member leaves. Caller holds slot i's
 * stripe and the group's lock. */
static void group_remove(struct remote_backend *rb, uint64_t gid, unsigned idx,
			 const void *old)
{
	struct parity_group *g = parity_group_at(&rb->pt, gid);

	rb->slot_grp[g->m[idx].slot] = 0;
	parity_member_remove(g, idx);
	if (g->state == PG_OPEN) {
		if (old)
			xor_into(g->local, old, PAGE);
		return;
	}
	if (!g->nmem) {
		if (g->pn != PARITY_NO_NODE) {
			atomic_fetch_sub(&rb->nodes[g->pn].held, 1);
			if (usable(rb, g->pn))
				(void)parity_op(rb, g->pn, POP_DROP, g->pkey, UINT64_MAX, NULL);
		}
		parity_group_free(&rb->pt, (uint32_t)gid);
		return;
	}
	if (old)
		group_apply(rb, g, old);        /* old ^ zeros */
	else
		(void)group_parity_rebuild(rb, g);
	if (parity_group_sparse(g, rb->gsize))
		atomic_store(&rb->merge_needed, 1);
}

/* Lock one of n mutexes, the first at `first`, each `stride` bytes
 * after the one before (a member of each entry of an array): a free one
 * if any, else the next in turn (*rr). Returns its index. */
static unsigned lock_one(pthread_mutex_t *first, size_t stride, unsigned n,
			 atomic_uint *rr)
{
	unsigned start = atomic_fetch_add(rr, 1);
	pthread_mutex_t *at;

	for (unsigned k = 0; k < n; k++) {
		unsigned x = (start + k) % n;
		at = (pthread_mutex_t *)((char *)first + x * stride);
		if (pthread_mutex_trylock(at) == 0)
			return x;
	}
	at = (pthread_mutex_t *)((char *)first + start % n * stride);
	pthread_mutex_lock(at);
	return start % n;
}

/* A parity-pool entry, locked: a free one if any, else the next in turn. */
static struct ppool *pool_take(struct remote_backend *rb)
{
	return &rb->pool[lock_one(&rb->pool[0].lock, sizeof(rb->pool[0]), POOL,
				  &rb->pool_rr)];
}

/* A fresh open group; says so when the table had to grow for it (groups
 * got small: few nodes left). -ENOSPC at the table's end. */
static int64_t group_alloc(struct remote_backend *rb, uint8_t *buf)
{
	uint32_t had = parity_table_size(&rb->pt);
	int64_t gid = parity_group_alloc(&rb->pt, buf);
	uint32_t now = parity_table_size(&rb->pt);
	if (now > had)
		log_info("remote swap: parity group table grown to %u groups "
			 "(%" PRIu64 " KiB): groups got small", now,
			 parity_table_bytes(&rb->pt) >> 10);
	return gid;
}

/* Put slot i (version v, contents page) into an open group, on a node
 * outside it. have: a node already holding this version of the page
 * (kept if the group allows), or -1. Caller holds slot i's stripe. */
static int group_add(struct remote_backend *rb, uint64_t i, uint64_t v,
		     const void *page, int have)
{
	struct slot *s = &rb->slots[i];
	struct ppool *p = pool_take(rb);
	int rc = -ENOSPC;

	for (unsigned attempt = 0; attempt < 3; attempt++) {
		if (p->gid < 0) {
			p->gid = group_alloc(rb, p->buf);
			if (p->gid < 0) {
				atomic_store(&rb->merge_needed, 1);
				log_warn("remote swap: every parity group is in use; "
					 "merging sparse ones");
				rc = -ENOSPC;
				break;
			}
		}
		uint64_t gid = (uint64_t)p->gid;
		struct parity_group *g = parity_group_at(&rb->pt, gid);
		bool exclude[CONFIG_MAX_NODES] = { false };
		int node = -1;

		pthread_mutex_lock(glock(rb, gid));
		group_exclude(rb, g, exclude);
		if (have >= 0 && !exclude[have] && usable(rb, (unsigned)have)) {
			node = have;
		} else {
			for (unsigned tries = 0; tries < rb->nn; tries++) {
				int idx = pick(rb, exclude);
				if (idx < 0)
					break;
				rc = node_op(rb, (unsigned)idx, OP_STORE, i, v, (void *)page);
				if (!rc) {
					node = idx;
					break;
				}
				exclude[idx] = true;
			}
		}
		if (node < 0) {
			pthread_mutex_unlock(glock(rb, gid));
			if (g->nmem == 0) {
				rc = rc == -ENOSPC || rc == 0 ? -ENOSPC : -EIO;
				break;
			}
			/* every node left is in the group: close it early and
			 * try a fresh one */
			pthread_mutex_lock(glock(rb, gid));
			group_close(rb, g);
			pthread_mutex_unlock(glock(rb, gid));
			p->gid = -1;
			continue;
		}
		if (node != have) {
			struct rnode *nd = &rb->nodes[node];
			atomic_fetch_add(&nd->placed, 1);
			atomic_fetch_add(&nd->held, 1);
			atomic_fetch_sub(&nd->free_pages, 1);
			if (have >= 0) {
				atomic_fetch_sub(&rb->nodes[have].held, 1);
				if (usable(rb, (unsigned)have))
					(void)node_op(rb, (unsigned)have, OP_DROP, i, v, NULL);
			}
		}
		s->n[0] = (uint8_t)node;
		s->g[0] = (uint8_t)atomic_load(&rb->nodes[node].gen);
		(void)parity_member_add(g, rb->gsize, i, v, s->n[0], s->g[0]);
		xor_into(g->local, page, PAGE);
		rb->slot_grp[i] = (uint32_t)gid + 1;
		/* full, or no node left that is not in it (but for the one
		 * its parity page needs, when the parity node cannot take
		 * it: dead, or giving memory back) */
		bool full = g->nmem >= rb->gsize;
		if (!full) {
			bool pnode_ok = rb->pnode >= 0 && usable(rb, (unsigned)rb->pnode) &&
					!over_offer(rb, (unsigned)rb->pnode);
			memset(exclude, 0, sizeof(exclude));
			group_exclude(rb, g, exclude);
			full = pick_count(rb, exclude) <= (pnode_ok ? 0u : 1u);
		}
		if (full) {
			group_close(rb, g);
			p->gid = -1;
		}
		pthread_mutex_unlock(glock(rb, gid));
		rc = 0;
		break;
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

/* Slot s, member idx of group g, now lives on node n, stored there under
 * its generation gen: the slot map, the group and the placement counters
 * say so (its old node, if any, holds one page less of ours). Caller
 * holds the slot's stripe and the group's lock. */
static void pslot_moved(struct remote_backend *rb, struct slot *s,
			struct parity_group *g, int idx, unsigned n, uint8_t gen)
{
	if (s->n[0] != NO_NODE)
		atomic_fetch_sub(&rb->nodes[s->n[0]].held, 1);
	atomic_fetch_add(&rb->nodes[n].held, 1);
	atomic_fetch_add(&rb->nodes[n].placed, 1);
	atomic_fetch_sub(&rb->nodes[n].free_pages, 1);
	s->n[0] = (uint8_t)n;
	s->g[0] = gen;
	g->m[idx].node = s->n[0];
	g->m[idx].gen = s->g[0];
}

/* Give slot i, rebuilt (contents page; member idx of group gid, whose
 * node is lost), a new home: the same group, on a node outside it (no
 * parity change); failing that, an open group. Caller holds the stripe
 * and the group's lock; returns with the group's lock released. 0 even
 * when no node took it (the caller has the page; later reads will not). */
static int pslot_rehome(struct remote_backend *rb, uint64_t i, uint64_t gid,
			int idx, const void *page)
{
	struct slot *s = &rb->slots[i];
	struct parity_group *g = parity_group_at(&rb->pt, gid);

	bool exclude[CONFIG_MAX_NODES] = { false };
	group_exclude(rb, g, exclude);
	for (unsigned tries = 0; tries < rb->nn; tries++) {
		int n = pick(rb, exclude);
		if (n < 0)
			break;
		if (node_op(rb, (unsigned)n, OP_STORE, i, s->version, (void *)page) == 0) {
			pslot_moved(rb, s, g, idx, (unsigned)n,
				    (uint8_t)atomic_load(&rb->nodes[n].gen));
			pthread_mutex_unlock(glock(rb, gid));
			atomic_fetch_add(&rb->rehomes, 1);
			return 0;
		}
		exclude[n] = true;
	}
	/* No node outside the group: leave it for an open group. If no
	 * node takes it there either, it is held in our memory (room for it
	 * reserved first); with no room in the hold either, it stays in its
	 * group as it was, lost but recoverable, for a later read or pass
	 * (taken out, it would be lost for good). */
	if (!hold_reserve(rb)) {
		pthread_mutex_unlock(glock(rb, gid));
		atomic_fetch_add(&rb->short_kept, 1);
		short_log(rb);
		return 0;
	}
	if (s->n[0] != NO_NODE)
		atomic_fetch_sub(&rb->nodes[s->n[0]].held, 1);
	s->n[0] = NO_NODE;
	group_remove(rb, gid, (unsigned)idx, page);
	pthread_mutex_unlock(glock(rb, gid));
	if (group_add(rb, i, s->version, page, -1) == 0) {
		hold_unreserve(rb);
		atomic_fetch_add(&rb->rehomes, 1);
	} else {
		hold_put(rb, i, page);
		short_log(rb);
	}
	return 0;
}

/* Read slot i (mapped, not spilled); a page whose node is lost is rebuilt
 * from its group and stored again on a node outside the group. Caller
 * holds the stripe. */
static int pslot_read(struct remote_backend *rb, uint64_t i, void *page)
{
	struct slot *s = &rb->slots[i];

	if (copy_valid(rb, s, 0) && usable(rb, s->n[0])) {
		int rc = node_op(rb, s->n[0], OP_FETCH, i, s->version, page);
		if (rc == 0)
			return 0;
		/* The node has the page but could not read it (its flash
		 * failed): drop it there, the rebuilt page goes elsewhere. */
		if (rc != -ENOENT && !is_transport_error(rc) &&
		    node_op(rb, s->n[0], OP_DROP, i, s->version, NULL) == 0)
			atomic_fetch_add(&rb->nodes[s->n[0]].free_pages, 1);
	}
	uint64_t gid = rb->slot_grp[i] - 1;
	struct parity_group *g = parity_group_at(&rb->pt, gid);
	pthread_mutex_lock(glock(rb, gid));
	int idx = parity_member_find(g, i);
	if (idx < 0 || group_reconstruct(rb, g, i, page)) {
		pthread_mutex_unlock(glock(rb, gid));
		lost_read(rb, i, s->version, "is lost and could not be rebuilt");
		return -EIO;
	}
	return pslot_rehome(rb, i, gid, idx, page);
}

/* Take mapped slot i out of its group and off its node; `known`: its
 * contents if the caller has them. Caller holds the stripe. */
static void pslot_unmap(struct remote_backend *rb, uint64_t i)
{
	struct slot *s = &rb->slots[i];
	uint8_t old[PAGE];
	uint64_t gid = rb->slot_grp[i] - 1;
	struct parity_group *g = parity_group_at(&rb->pt, gid);

	pthread_mutex_lock(glock(rb, gid));
	int idx = parity_member_find(g, i);
	bool on_node = copy_valid(rb, s, 0) && usable(rb, s->n[0]);
	bool have = (on_node && node_op(rb, s->n[0], OP_FETCH, i, s->version, old) == 0) ||
		    (idx >= 0 && group_reconstruct(rb, g, i, old) == 0);
	if (idx >= 0)
		group_remove(rb, gid, (unsigned)idx, have ? old : NULL);
	pthread_mutex_unlock(glock(rb, gid));
	if (s->n[0] != NO_NODE) {
		atomic_fetch_sub(&rb->nodes[s->n[0]].held, 1);
		if (on_node && node_op(rb, s->n[0], OP_DROP, i, UINT64_MAX, NULL) == 0)
			atomic_fetch_add(&rb->nodes[s->n[0]].free_pages, 1);
	}
	s->n[0] = NO_NODE;
	rb->slot_grp[i] = 0;
}

/* On node j, slot i's page of version old_v into old and the new one
 * (version v) in its place, in one round trip: both requests pipelined on
 * one connection, which the node serves in order, so the fetch sees the
 * old page. 0 only if both succeeded. Any failure leaves the caller to
 * pslot_write's fallback, which is right whatever the node did with the
 * store: it reads the old page only at version old_v (else rebuilds it
 * from the group, without this node) and drops the slot's copy. */
static int node_fetch_store(struct remote_backend *rb, unsigned j, uint64_t i,
			    uint64_t old_v, void *old, uint64_t v, const void *page)
{
	struct rnode *nd = &rb->nodes[j];
	int rf, rs;
	struct rconn *c = conn_get(rb, j, &rf);

	if (!c)
		return rf;
	rf = cluster_client_page_fetch_start(c->cl, i, old_v);
	rs = rf ? rf : cluster_client_page_store_start(c->cl, i, v, page);
	if (!rf)
		rf = cluster_client_wait_fetch(c->cl, old, NULL);
	if (!rs)
		rs = cluster_client_wait(c->cl);
	if (!rf)
		atomic_fetch_add(&nd->fetches, 1);
	if (rs == -ENOSPC)
		atomic_store(&nd->free_pages, 0);
	else if (!rs)
		atomic_fetch_add(&nd->stores, 1);
	conn_put(rb, j, c, is_transport_error(rf) ? rf : rs);
	return rf ? rf : rs;
}

/* On node j, slot i from version old_v to v (contents page), the node
 * sending old ^ new to group g's parity node before it answers (see
 * cluster_client_page_overwrite for the returns). Any failure but
 * -EREMOTEIO leaves the caller to pslot_write's fallback, which is right
 * whatever the node did (see node_fetch_store). Caller holds the group's
 * lock. */
/* Node j's answer rc to an overwrite of slot i (group g): counted, and
 * logged when the parity update did not surely happen. */
static void overwrite_count(struct remote_backend *rb, unsigned j, uint64_t i,
			    const struct parity_group *g, int rc,
			    const struct cluster_client *cl)
{
	struct rnode *nd = &rb->nodes[j];

	if (rc == 0 || rc == -EREMOTEIO)
		atomic_fetch_add(&nd->stores, 1);
	if (rc == -EREMOTEIO) {
		/* a batch's entry has a status, not a text of its own */
		const char *why = cl ? cluster_client_last_error(cl) : "";
		log_warn("remote swap: node %u stored slot %" PRIu64 " but could not "
			 "update its parity (%s); recomputing parity group %" PRIu64,
			 nd->id, i, why && why[0] ? why : "the parity node refused or "
			 "did not answer", g->pkey & 0xffffffff);
	}
}

/* An overwrite to version v of slot s, member idx of group g, that the
 * node stored (rc 0 or -EREMOTEIO): the group and the slot say so, and a
 * parity page that may have missed the delta is recomputed. Caller holds
 * the slot's stripe and the group's lock. */
static void overwrite_apply(struct remote_backend *rb, struct parity_group *g,
			    int idx, struct slot *s, uint64_t v, int rc)
{
	g->pver++;
	g->m[idx].version = v;
	s->version = v;
	if (rc == 0)
		atomic_fetch_add(&rb->parity_updates, 1);
	else    /* stored; the delta may be lost */
		(void)group_parity_rebuild(rb, g);
}

static int node_overwrite(struct remote_backend *rb, unsigned j, uint64_t i,
			  uint64_t v, uint64_t old_v, const struct parity_group *g,
			  const void *page)
{
	int rc;
	struct rconn *c = conn_get(rb, j, &rc);

	if (!c)
		return rc;
	rc = cluster_client_page_overwrite(c->cl, i, v, old_v, rb->nodes[g->pn].id,
					   g->pkey, g->pver + 1, page);
	overwrite_count(rb, j, i, g, rc, c->cl);
	conn_put(rb, j, c, rc);
	return rc;
}

/* Write slot i. An in-use slot is overwritten where it lives and old^new
 * reaches its group's parity before we return; a new slot (or one whose
 * node is lost) joins an open group. Caller holds the stripe. */
static int pslot_write(struct remote_backend *rb, uint64_t i, const void *page)
{
	struct slot *s = &rb->slots[i];
	uint64_t v = s->version + 1;
	bool was_mapped = slot_mapped(s);
	uint8_t old[PAGE];
	int rc;

	if (s->spilled) {
		/* Held in our memory (no node had room for it): placed now
		 * if a node takes it, else the held page takes the write (a
		 * newer write always wins; the slot never reads older data). */
		rc = group_add(rb, i, v, page, -1);
		s->version = v;
		if (rc == 0) {
			spill_forget(rb, i);
			atomic_fetch_add(&rb->hold_placed, 1);
		} else {
			(void)spill_io(rb, true, i, (void *)page);
		}
		return 0;
	}
	if (was_mapped) {
		uint64_t gid = rb->slot_grp[i] - 1;
		struct parity_group *g = parity_group_at(&rb->pt, gid);
		pthread_mutex_lock(glock(rb, gid));
		int idx = parity_member_find(g, i);
		bool there = idx >= 0 && copy_valid(rb, s, 0) && usable(rb, s->n[0]);
		if (there && parity_ok(rb, g)) {
			/* the node forwards old ^ new to the parity node */
			rc = node_overwrite(rb, s->n[0], i, v, s->version, g, page);
			if (rc == 0 || rc == -EREMOTEIO) {
				overwrite_apply(rb, g, idx, s, v, rc);
				pthread_mutex_unlock(glock(rb, gid));
				return 0;
			}
		} else if (there &&
			   node_fetch_store(rb, s->n[0], i, s->version, old, v, page) == 0) {
			/* an open group (its parity is our buffer), or its
			 * parity page lost: we apply old ^ new ourselves */
			g->m[idx].version = v;
			xor_into(old, page, PAGE);      /* old ^ new */
			group_apply(rb, g, old);
			s->version = v;
			pthread_mutex_unlock(glock(rb, gid));
			return 0;
		}
		pthread_mutex_unlock(glock(rb, gid));
		/* Its node is lost: out of the group (contents rebuilt to
		 * XOR them out), then in again as a new page. */
		pslot_unmap(rb, i);
	}
	rc = group_add(rb, i, v, page, -1);
	s->version = v;
	if (!was_mapped && !rc)
		atomic_fetch_add(&rb->mapped, 1);
	if (was_mapped && rc)
		atomic_fetch_sub(&rb->mapped, 1);
	if (rc)
		atomic_fetch_add(&rb->write_errors, 1);
	return rc;
}

/* Write one whole slot. Caller holds the stripe. */
static int slot_write(struct remote_backend *rb, uint64_t i, const void *page)
{
	struct slot *s = &rb->slots[i];
	uint64_t v = s->version + 1;
	bool was_mapped = slot_mapped(s);
	bool done[2] = { false, false };
	int rc = 0;

	if (rb->gsize) {
		rc = pslot_write(rb, i, page);
		if (!rc)
			s->lost = 0;
		return rc;
	}
	if (rb->copies == 2)
		mirror_parallel(rb, i, v, page, done);
	for (unsigned r = 0; r < rb->copies; r++) {
		if (done[r])
			continue;
		int old = copy_valid(rb, s, r) ? s->n[r] : -1;
		/* An in-use slot is overwritten where it lives (Nswap),
		 * unless that node is giving memory back. */
		if (old >= 0 && usable(rb, (unsigned)old) && !over_offer(rb, (unsigned)old) &&
		    node_op(rb, (unsigned)old, OP_STORE, i, v, (void *)page) == 0)
			continue;
		if (s->n[r] != NO_NODE)
			atomic_fetch_sub(&rb->nodes[s->n[r]].held, 1);
		uint8_t oldgen = s->g[r];
		s->n[r] = NO_NODE;
		int prc = place(rb, i, r, v, (void *)page);
		if (prc && old >= 0 && usable(rb, (unsigned)old) &&
		    node_op(rb, (unsigned)old, OP_STORE, i, v, (void *)page) == 0) {
			/* no room elsewhere: it stays on the shrinking node */
			atomic_fetch_add(&rb->nodes[old].held, 1);
			s->n[r] = (uint8_t)old;
			s->g[r] = oldgen;
			continue;
		}
		if (prc) {
			rc = prc;
			continue;
		}
		/* The old copy is garbage now; drop it if its node answers. */
		if (old >= 0 && old != s->n[r] && usable(rb, (unsigned)old))
			(void)node_op(rb, (unsigned)old, OP_DROP, i, v, NULL);
	}
	if (rc == -ENOSPC && rb->spill_fd >= 0) {
		/* No node has room: the page goes to the local spill file
		 * (Nswap swaps to disk only then), whole, and its remote
		 * copies written above are dropped. */
		slot_unmap_remote(rb, i);
		rc = spill_io(rb, true, i, (void *)page);
		if (!rc) {
			if (!s->spilled)
				atomic_fetch_add(&rb->spilled_now, 1);
			s->spilled = 1;
			atomic_fetch_add(&rb->spills, 1);
		}
	} else if (!rc) {
		spill_forget(rb, i);
	}
	s->version = v;
	if (!was_mapped && slot_mapped(s))
		atomic_fetch_add(&rb->mapped, 1);
	if (was_mapped && !slot_mapped(s))
		atomic_fetch_sub(&rb->mapped, 1);
	if (rc)
		atomic_fetch_add(&rb->write_errors, 1);
	else
		s->lost = 0;
	return rc;
}

/* Read one whole slot (zeros if never written). Caller holds the stripe. */
static int slot_read(struct remote_backend *rb, uint64_t i, void *page)
{
	struct slot *s = &rb->slots[i];
	int got = -1;
	bool lost[2] = { false, false };
	bool answered[2] = { false, false };   /* failed, but the node replied */

	if (s->lost) {
		atomic_fetch_add(&rb->read_errors, 1);
		return -EIO;
	}
	if (!slot_mapped(s)) {
		memset(page, 0, PAGE);
		atomic_fetch_add(&rb->zero_reads, 1);
		return 0;
	}
	if (s->spilled)
		return spill_io(rb, false, i, page);
	if (rb->gsize)
		return pslot_read(rb, i, page);
	for (unsigned r = 0; r < rb->copies; r++) {
		if (!copy_valid(rb, s, r)) {
			lost[r] = true;
			continue;
		}
		if (got >= 0) {
			/* a copy on a node now down or dead is lost too */
			if (!usable(rb, s->n[r]))
				lost[r] = true;
			continue;
		}
		int rc = usable(rb, s->n[r]) ?
			 node_op(rb, s->n[r], OP_FETCH, i, s->version, page) : -EHOSTDOWN;
		if (!rc) {
			got = (int)r;
		} else {
			lost[r] = true;
			answered[r] = rc != -EHOSTDOWN && rc != -ENOENT &&
				      !is_transport_error(rc);
			if (r + 1 < rb->copies)
				atomic_fetch_add(&rb->failovers, 1);
			log_debug("remote swap: slot %" PRIu64 " copy on node %u: %s",
				  i, rb->nodes[s->n[r]].id, strerror(-rc));
		}
	}
	if (got < 0) {
		lost_read(rb, i, s->version, "has no copy that could be read");
		return -EIO;
	}
	/* Restore redundancy now, while we hold the page. */
	for (unsigned r = 0; r < rb->copies; r++) {
		if (!lost[r] || (int)r == got)
			continue;
		/* On failure the slot stays degraded (one copy) and the next
		 * read tries again. */
		if (s->n[r] != NO_NODE) {
			atomic_fetch_sub(&rb->nodes[s->n[r]].held, 1);
			/* The node has the page but could not read it (its
			 * flash failed): drop it there, or it stays as
			 * garbage if the new copy goes elsewhere or fails. */
			if (answered[r] && usable(rb, s->n[r]) &&
			    node_op(rb, s->n[r], OP_DROP, i, s->version, NULL) == 0)
				atomic_fetch_add(&rb->nodes[s->n[r]].free_pages, 1);
		}
		s->n[r] = NO_NODE;
		if (place(rb, i, r, s->version, page) == 0)
			atomic_fetch_add(&rb->remirrors, 1);
	}
	return 0;
}

static int check_range(struct remote_backend *rb, uint64_t off, uint64_t len)
{
	uint64_t size = rb->nslots * PAGE;
	return off > size || len > size - off ? -EINVAL : 0;
}

static pthread_mutex_t *stripe(struct remote_backend *rb, uint64_t i)
{
	return &rb->stripes[i % STRIPES];
}

int remote_read(void *priv, void *buf, uint64_t off, uint32_t len)
{
	struct remote_backend *rb = priv;
	uint8_t page[PAGE];
	int rc = check_range(rb, off, len);

	if (rc)
		return rc;
	atomic_fetch_add(&rb->reads, 1);
	while (len) {
		uint64_t i = off / PAGE;
		uint32_t in = (uint32_t)(off % PAGE);
		uint32_t n = PAGE - in < len ? PAGE - in : len;
		pthread_mutex_lock(stripe(rb, i));
		if (in == 0 && n == PAGE)
			rc = slot_read(rb, i, buf);
		else if (!(rc = slot_read(rb, i, page)))
			memcpy(buf, page + in, n);
		pthread_mutex_unlock(stripe(rb, i));
		if (rc)
			return rc;
		buf = (uint8_t *)buf + n;
		off += n;
		len -= n;
	}
	return 0;
}

/* Write or zero (buf NULL) a byte range. */
/* --- many whole pages at once ---------------------------------------------
 * The kernel swaps out in runs of pages (~75 per NBD write here). Page by
 * page, each costs a round trip to its node, one after the other. A run's
 * pages that need nothing but a store are stored together instead, one
 * PAGE_STORE_MANY per node (store_batch), all nodes at once:
 *  - without redundancy: an in-use slot on its node (overwritten in place,
 *    as slot_write does), a new one on a node pick() gives;
 *  - with parity: a new slot into an open group, as group_add does: the
 *    run's new pages fill the pool entry's open groups in turn, each page
 *    on a node outside its group, and the groups that fill up are closed
 *    (their parity page sent) once their members are in.
 * Every other page (mirror, in-use slots with parity, spilled slots) and
 * any page whose store failed or whose plan no longer holds goes
 * slot_write's way afterwards, which handles every case. The run's
 * stripes are held throughout, taken in stripe order. */
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

/* Mirror: both copies of slot s's page go with the run, where they live
 * (an in-use slot whose two nodes are usable and within their offers), or
 * for a new slot to two nodes picked as place() does. Anything else (a
 * copy lost, a node giving memory back, no room) is left to slot_write's
 * way (w->node stays -1). */
static void wb_plan_mirror(struct remote_backend *rb, const struct slot *s,
			   struct wb_plan *w)
{
	if (slot_mapped(s)) {
		for (unsigned r = 0; r < 2; r++)
			if (!copy_valid(rb, s, r) || !usable(rb, s->n[r]) ||
			    over_offer(rb, s->n[r]))
				return;
		w->node = s->n[0];
		w->node2 = s->n[1];
		w->inplace = true;
		return;
	}
	bool exclude[CONFIG_MAX_NODES] = { false };
	int a = pick(rb, exclude);
	if (a < 0)
		return;
	exclude[a] = true;
	int b = pick(rb, exclude);
	if (b < 0)
		return;
	w->node = a;
	w->node2 = b;
}

static int cmp_u16(const void *a, const void *b)
{
	return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

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

/* Plan slot w->i's new page into the pool entry p's open groups (parity).
 * Returns false if the page must go slot_write's way. Caller holds the
 * stripes and p->lock. */
static bool wb_plan_parity(struct remote_backend *rb, struct ppool *p,
			   struct wb_groups *G, struct wb_plan *w)
{
	for (unsigned attempt = 0; attempt < 2; attempt++) {
		bool fresh = false;
		if (p->gid < 0) {
			if (G->n >= WBATCH)
				return false;   /* close_batch sends at most that many */
			/* no buffer yet: the pool entry's one buffer may
			 * still be the parity of the group before it, whose
			 * members go in at commit */
			p->gid = group_alloc(rb, NULL);
			if (p->gid < 0) {
				atomic_store(&rb->merge_needed, 1);
				return false;
			}
			fresh = true;
		}
		if (!G->n || G->gid[G->n - 1] != p->gid) {
			G->gid[G->n] = p->gid;
			memset(G->node[G->n], 0, sizeof(G->node[G->n]));
			G->cnt[G->n] = 0;
			G->full[G->n] = false;
			G->fresh[G->n] = fresh;
			G->n++;
		}
		unsigned k = G->n - 1;
		struct parity_group *g = parity_group_at(&rb->pt, p->gid);
		bool exclude[CONFIG_MAX_NODES] = { false };
		pthread_mutex_lock(glock(rb, (uint64_t)p->gid));
		group_exclude(rb, g, exclude);
		unsigned nmem = g->nmem;
		pthread_mutex_unlock(glock(rb, (uint64_t)p->gid));
		for (unsigned j = 0; j < CONFIG_MAX_NODES; j++)
			exclude[j] = exclude[j] || G->node[k][j];
		int node = pick(rb, exclude);
		if (node < 0) {
			if (nmem + G->cnt[k] == 0)
				return false;
			/* nobody left outside it: close it, take a new one */
			G->full[k] = true;
			p->gid = -1;
			continue;
		}
		G->node[k][node] = true;
		G->cnt[k]++;
		w->node = node;
		w->gid = G->gid[k];
		/* full, or no node left that is not in it (group_add's rule) */
		exclude[node] = true;
		bool pnode_ok = rb->pnode >= 0 && usable(rb, (unsigned)rb->pnode) &&
				!over_offer(rb, (unsigned)rb->pnode);
		if (nmem + G->cnt[k] >= rb->gsize ||
		    pick_count(rb, exclude) <= (pnode_ok ? 0u : 1u)) {
			G->full[k] = true;
			p->gid = -1;
		}
		return true;
	}
	return false;
}

/* The overwrites of overwrite_batch that can go (node set), one
 * PAGE_OVERWRITE_MANY per node, every node's sent before any answer is
 * taken; each one's answer into rcs[c] (-EAGAIN: not sent). Caller holds
 * the groups' locks. */
static void overwrite_send(struct remote_backend *rb, struct wb_plan *w,
			   const unsigned *cand, unsigned nc, const uint64_t *pv,
			   int *rcs)
{
	/* each node's overwrites one run in o, in the run's order */
	struct cluster_overwrite o[WBATCH];
	unsigned oc[WBATCH], first[CONFIG_MAX_NODES + 1] = { 0 };
	unsigned no[CONFIG_MAX_NODES] = { 0 };
	struct rconn *cn[CONFIG_MAX_NODES] = { NULL };
	int crc[CONFIG_MAX_NODES] = { 0 };

	for (unsigned c = 0; c < nc; c++)
		if (w[cand[c]].node >= 0)
			first[w[cand[c]].node + 1]++;
	for (unsigned j = 0; j < rb->nn; j++)
		first[j + 1] += first[j];
	for (unsigned c = 0; c < nc; c++) {
		struct wb_plan *x = &w[cand[c]];
		if (x->node < 0)
			continue;
		const struct parity_group *g = parity_group_at(&rb->pt, x->gid);
		const struct slot *s = &rb->slots[x->i];
		unsigned j = (unsigned)x->node, at = first[j] + no[j]++;
		oc[at] = c;
		o[at] = (struct cluster_overwrite){
			.page_id = x->i, .version = s->version + 1,
			.old_version = s->version, .group = g->pkey,
			.parity_version = pv[c], .parity_node = rb->nodes[g->pn].id,
			.page = x->page };
	}
	for (unsigned j = 0; j < rb->nn; j++) {
		if (!no[j] || !(cn[j] = conn_get(rb, j, &crc[j])))
			continue;
		crc[j] = cluster_client_overwrite_many_start(cn[j]->cl, &o[first[j]], no[j]);
	}
	for (unsigned j = 0; j < rb->nn; j++) {
		if (!cn[j])
			continue;
		if (!crc[j])
			crc[j] = cluster_client_wait_overwrite_many(cn[j]->cl, &o[first[j]],
								    no[j]);
		for (unsigned at = first[j]; at < first[j] + no[j]; at++) {
			unsigned c = oc[at];
			rcs[c] = crc[j] ? crc[j] : o[at].rc;
			overwrite_count(rb, j, w[cand[c]].i,
					parity_group_at(&rb->pt, w[cand[c]].gid), rcs[c],
					cn[j]->cl);
		}
		conn_put(rb, j, cn[j], crc[j]);
	}
}

/* The run's in-use slots with parity: each overwritten on its node, which
 * forwards old ^ new to the group's parity node (as pslot_write's
 * PAGE_OVERWRITE does), all at once: one PAGE_OVERWRITE_MANY per node,
 * every node at the same time, each node's deltas one PARITY_UPDATE_MANY
 * per parity node. The groups' locks are held throughout, taken in lock-stripe
 * order. Members of one group (on distinct nodes) go at once too, each
 * delta with the next parity version: the parity node XORs them in
 * whatever order they come (XOR commutes; it keeps the highest version).
 * Whatever does not work out is left (node -1) for pslot_write, which is
 * right whatever the node did (see node_fetch_store). See the lock order
 * at the top of the parity section. */
static void overwrite_batch(struct remote_backend *rb, struct wb_plan *w, unsigned n)
{
	bool used[GSTRIPES] = { false };
	unsigned cand[WBATCH], nc = 0;
	int midx[WBATCH];
	int rcs[WBATCH];
	uint64_t pv[WBATCH];    /* the parity version its delta carries */

	for (unsigned k = 0; k < n; k++) {
		struct slot *s = &rb->slots[w[k].i];
		if (w[k].node != -1 || !slot_mapped(s) || !rb->slot_grp[w[k].i])
			continue;
		uint64_t gid = rb->slot_grp[w[k].i] - 1;
		used[gid % GSTRIPES] = true;
		w[k].gid = (int64_t)gid;
		cand[nc++] = k;
	}
	if (nc < 2) {
		for (unsigned c = 0; c < nc; c++)
			w[cand[c]].gid = -1;
		return;
	}
	for (unsigned x = 0; x < GSTRIPES; x++)
		if (used[x])
			pthread_mutex_lock(&rb->glocks[x]);
	/* which can go: as pslot_write's first case */
	unsigned ok = 0;
	for (unsigned c = 0; c < nc; c++) {
		struct wb_plan *x = &w[cand[c]];
		struct slot *s = &rb->slots[x->i];
		struct parity_group *g = parity_group_at(&rb->pt, x->gid);
		midx[c] = parity_member_find(g, x->i);
		rcs[c] = -EAGAIN;
		pv[c] = 0;
		if (midx[c] >= 0 && copy_valid(rb, s, 0) && usable(rb, s->n[0]) &&
		    parity_ok(rb, g)) {
			x->node = s->n[0];
			pv[c] = g->pver + 1;
			for (unsigned e = 0; e < c; e++)
				if (w[cand[e]].gid == x->gid && pv[e] >= pv[c])
					pv[c] = pv[e] + 1;
			ok++;
		}
	}
	if (ok)
		overwrite_send(rb, w, cand, nc, pv, rcs);
	/* results: a group's version past every delta sent (some may have
	 * arrived whatever the answer); a member stored has its new
	 * version; a parity page that may have missed a delta is recomputed
	 * once all are in */
	for (unsigned c = 0; c < nc; c++) {
		struct parity_group *g = parity_group_at(&rb->pt, w[cand[c]].gid);
		if (pv[c] > g->pver)
			g->pver = pv[c];
	}
	for (unsigned c = 0; c < nc; c++) {
		struct wb_plan *x = &w[cand[c]];
		struct slot *s = &rb->slots[x->i];
		struct parity_group *g = parity_group_at(&rb->pt, x->gid);
		if (rcs[c] == 0 || rcs[c] == -EREMOTEIO) {
			g->m[midx[c]].version = s->version + 1;
			s->version++;
			if (rcs[c] == 0)
				atomic_fetch_add(&rb->parity_updates, 1);
			x->node = -2;   /* done */
		} else {
			x->node = -1;
		}
	}
	for (unsigned c = 0; c < nc; c++) {
		bool again = false;
		for (unsigned e = 0; e < c; e++)
			again |= rcs[e] == -EREMOTEIO && w[cand[e]].gid == w[cand[c]].gid;
		if (rcs[c] == -EREMOTEIO && !again)
			(void)group_parity_rebuild(rb, parity_group_at(&rb->pt, w[cand[c]].gid));
	}
	for (unsigned c = 0; c < nc; c++)
		w[cand[c]].gid = -1;
	for (unsigned x = GSTRIPES; x-- > 0;)
		if (used[x])
			pthread_mutex_unlock(&rb->glocks[x]);
}

/* Group q will not use the parity page sent with its run: counted, and
 * dropped from its node unless a store of the right one replaces it. */
static void spec_drop(struct remote_backend *rb, const struct wb_groups *G, unsigned q,
		      uint64_t pkey, bool drop)
{
	if (G->spec[q] < 0 || G->spec_rc[q])
		return;
	atomic_fetch_add(&rb->spec_redone, 1);
	if (drop && usable(rb, G->spec_node[q]))
		(void)parity_op(rb, G->spec_node[q], POP_DROP, pkey, UINT64_MAX, NULL);
}

/* The parity pages of the groups a run fills, as planned (the group's
 * buffer, zeros for a fresh one, XOR the run's pages planned into it),
 * added to the run's stores st[*ns..], so that they travel with the data
 * pages: one round trip for both, where sending them once the data pages
 * are in took two. close_batch keeps such a page only if the group's
 * parity, when it closes, is the same bytes (else a store failed, or a
 * trim or an overwrite changed the group meanwhile: it sends the right
 * one). At most
 * FRAME_BATCH_MAX requests per node. Caller holds the stripes and the
 * pool entry. */
static void spec_parity(struct remote_backend *rb, struct wb_groups *G,
			const struct wb_plan *w, unsigned n, struct store_req *st,
			unsigned *ns)
{
	unsigned per[CONFIG_MAX_NODES] = { 0 };

	for (unsigned k = 0; k < *ns; k++)
		per[st[k].node]++;
	for (unsigned q = 0; q < G->n; q++) {
		G->spec[q] = -1;
		if (!G->full[q])
			continue;
		struct parity_group *g = parity_group_at(&rb->pt, G->gid[q]);
		bool exclude[CONFIG_MAX_NODES] = { false };
		pthread_mutex_lock(glock(rb, (uint64_t)G->gid[q]));
		if (G->fresh[q] || !g->local)
			memset(G->spar[q], 0, PAGE);
		else
			memcpy(G->spar[q], g->local, PAGE);
		for (unsigned k = 0; k < g->nmem; k++)
			if (g->m[k].node != NO_NODE)
				exclude[g->m[k].node] = true;
		G->spec_ver[q] = g->pver + 1;
		uint64_t pkey = g->pkey;
		pthread_mutex_unlock(glock(rb, (uint64_t)G->gid[q]));
		for (unsigned k = 0; k < n; k++)
			if (w[k].st >= 0 && w[k].gid == G->gid[q]) {
				xor_into(G->spar[q], w[k].page, PAGE);
				exclude[w[k].node] = true;
			}
		int pn = parity_node_pick(rb, exclude);
		if (pn < 0 || per[pn] >= FRAME_BATCH_MAX)
			continue;
		per[pn]++;
		G->spec[q] = (int)*ns;
		G->spec_node[q] = (uint8_t)pn;
		/* before the store: a restart after it makes the page lost */
		G->spec_gen[q] = (uint8_t)atomic_load(&rb->nodes[pn].gen);
		st[(*ns)++] = (struct store_req){ .slot = pkey, .version = G->spec_ver[q],
						  .page = G->spar[q], .node = (uint8_t)pn,
						  .kind = FK_PARITY };
	}
}

/* The groups of a run that filled up (G->full, their parity in G->par):
 * closed. A group whose parity page went with the run's data pages
 * (spec_parity) keeps it if it is the group's parity as it came out;
 * the others' pages are sent now, at once, one PAGE_STORE_MANY per
 * parity node (a fresh group's parity page does not exist on any node
 * yet, so storing it is what group_close's first parity update does).
 * Their locks are held throughout, in lock-stripe order. A group whose
 * page no node took goes group_close's way. */
static void close_batch(struct remote_backend *rb, struct wb_groups *G)
{
	bool used[GSTRIPES] = { false };
	struct store_req st[WBATCH + 1];
	int sq[WBATCH + 1];
	unsigned ns = 0;

	for (unsigned q = 0; q < G->n; q++)
		if (G->full[q])
			used[G->gid[q] % GSTRIPES] = true;
	for (unsigned x = 0; x < GSTRIPES; x++)
		if (used[x])
			pthread_mutex_lock(&rb->glocks[x]);
	for (unsigned q = 0; q < G->n; q++) {
		sq[q] = -1;
		if (!G->full[q])
			continue;
		struct parity_group *g = parity_group_at(&rb->pt, G->gid[q]);
		if (!g->nmem) {
			/* trims emptied it meanwhile */
			spec_drop(rb, G, q, g->pkey, true);
			g->local = NULL;
			parity_group_free(&rb->pt, (uint32_t)G->gid[q]);
			G->full[q] = false;
			continue;
		}
		bool exclude[CONFIG_MAX_NODES] = { false };
		for (unsigned k = 0; k < g->nmem; k++)
			if (g->m[k].node != NO_NODE)
				exclude[g->m[k].node] = true;
		g->state = PG_CLOSED;
		g->pn = PARITY_NO_NODE;
		unsigned sn = G->spec[q] >= 0 ? G->spec_node[q] : 0;
		/* the group as it is now, under its lock (a trim or an
		 * overwrite may have changed it since the commit) */
		bool spec_ok = G->spec[q] >= 0 && !G->spec_rc[q] &&
			       G->spec_ver[q] == g->pver + 1 && !exclude[sn] &&
			       usable(rb, sn) &&
			       (uint8_t)atomic_load(&rb->nodes[sn].gen) == G->spec_gen[q] &&
			       !memcmp(G->spar[q], g->local, PAGE);
		/* past the version sent with the run, whatever came of it: a
		 * store sent now must replace it */
		if (G->spec[q] >= 0 && g->pver < G->spec_ver[q])
			g->pver = G->spec_ver[q];
		if (spec_ok) {
			/* the page sent with the run is this group's parity,
			 * on a node outside it, still there */
			sq[q] = -2;
			atomic_fetch_add(&rb->spec_kept, 1);
			continue;
		}
		int pn = parity_node_pick(rb, exclude);
		if (G->spec[q] >= 0)    /* sn is only set then */
			spec_drop(rb, G, q, g->pkey, pn < 0 || (unsigned)pn != sn);
		if (pn < 0)
			continue;
		sq[q] = (int)ns;
		st[ns++] = (struct store_req){ .slot = g->pkey, .version = g->pver + 1,
					       .page = g->local, .node = (uint8_t)pn,
					       .kind = FK_PARITY };
	}
	if (ns)
		store_batch(rb, st, ns);
	for (unsigned q = 0; q < G->n; q++) {
		if (!G->full[q])
			continue;
		struct parity_group *g = parity_group_at(&rb->pt, G->gid[q]);
		/* past the version sent, whatever came of it: a page that
		 * arrived after all is overwritten by any later store */
		if (sq[q] >= 0)
			g->pver++;
		if (sq[q] == -2 || (sq[q] >= 0 && st[sq[q]].rc == 0)) {
			unsigned pn = sq[q] == -2 ? G->spec_node[q] : st[sq[q]].node;
			atomic_fetch_add(&rb->nodes[pn].held, 1);
			g->pn = (uint8_t)pn;
			g->pgen = sq[q] == -2 ? G->spec_gen[q] :
				  (uint8_t)atomic_load(&rb->nodes[pn].gen);
			g->parity_lost = 0;
			g->local = NULL;
			atomic_fetch_add(&rb->parity_sends, 1);
		} else {
			(void)group_parity_store(rb, g, g->local);
			g->local = NULL;
		}
		/* fewer members than planned (a store failed): merged later */
		if (parity_group_sparse(g, rb->gsize))
			atomic_store(&rb->merge_needed, 1);
	}
	for (unsigned x = GSTRIPES; x-- > 0;)
		if (used[x])
			pthread_mutex_unlock(&rb->glocks[x]);
}

/* Lock the stripes of slots[0..n) (n <= WBATCH), each once, in stripe
 * order (the order every path that holds several takes them in); their
 * indexes go to order[], the count is returned for stripes_unlock. */
static unsigned stripes_lock(struct remote_backend *rb, const uint64_t *slots,
			     unsigned n, uint16_t *order)
{
	unsigned u = 0;

	for (unsigned k = 0; k < n; k++)
		order[k] = (uint16_t)(slots[k] % STRIPES);
	qsort(order, n, sizeof(order[0]), cmp_u16);
	for (unsigned k = 0; k < n; k++)
		if (!u || order[u - 1] != order[k])
			order[u++] = order[k];
	for (unsigned k = 0; k < u; k++)
		pthread_mutex_lock(&rb->stripes[order[k]]);
	return u;
}

static void stripes_unlock(struct remote_backend *rb, const uint16_t *order, unsigned u)
{
	for (unsigned k = u; k-- > 0;)
		pthread_mutex_unlock(&rb->stripes[order[k]]);
}

/* Slots slots[0..n) (n <= WBATCH, distinct), whole pages page[k]. Caller
 * holds their stripes (stripes_lock). */
static int write_slots(struct remote_backend *rb, const uint64_t *slots,
		       const uint8_t *const *page, unsigned n)
{
	struct wb_plan w[WBATCH];
	struct store_req st[NODE_BATCH_MAX];
	unsigned ns = 0;
	struct ppool *p = NULL;
	struct wb_groups *G = NULL;
	int rc = 0;

	if (rb->gsize) {
		p = pool_take(rb);
		G = p->wb;      /* allocated at open */
		G->n = 0;
	}
	/* plan */
	for (unsigned k = 0; k < n; k++) {
		uint64_t i = slots[k];
		struct slot *s = &rb->slots[i];
		w[k] = (struct wb_plan){ .i = i, .page = page[k], .node = -1, .gid = -1,
					 .st = -1, .node2 = -1, .st2 = -1 };
		if (s->spilled)
			continue;
		if (rb->copies == 2) {
			wb_plan_mirror(rb, s, &w[k]);
		} else if (rb->gsize) {
			if (!p || slot_mapped(s) || rb->slot_grp[i] ||
			    !wb_plan_parity(rb, p, G, &w[k]))
				w[k].node = -1;
		} else if (slot_mapped(s)) {
			int old = copy_valid(rb, s, 0) ? s->n[0] : -1;
			if (old >= 0 && usable(rb, (unsigned)old) && !over_offer(rb, (unsigned)old)) {
				w[k].node = old;
				w[k].inplace = true;
			}
		} else if (s->n[0] == NO_NODE) {
			bool exclude[CONFIG_MAX_NODES] = { false };
			w[k].node = pick(rb, exclude);
		}
		if (w[k].node >= 0) {
			/* before the store: a restart after it makes the
			 * copy lost, not valid */
			w[k].gen = (uint8_t)atomic_load(&rb->nodes[w[k].node].gen);
			w[k].st = (int)ns;
			st[ns++] = (struct store_req){ .slot = i, .version = s->version + 1,
						       .page = w[k].page, .node = (uint8_t)w[k].node };
		}
		if (w[k].node2 >= 0) {
			w[k].gen2 = (uint8_t)atomic_load(&rb->nodes[w[k].node2].gen);
			w[k].st2 = (int)ns;
			st[ns++] = (struct store_req){ .slot = i, .version = s->version + 1,
						       .page = w[k].page, .node = (uint8_t)w[k].node2 };
		}
	}
	/* store (mirror: both copies; parity: the pages of the groups the
	 * run fills too) */
	if (G)
		spec_parity(rb, G, w, n, st, &ns);
	if (ns)
		node_batch(rb, BO_STORE, st, ns);
	for (unsigned q = 0; G && q < G->n; q++)
		if (G->spec[q] >= 0)
			G->spec_rc[q] = st[G->spec[q]].rc;
	/* commit: without parity page by page; with parity group by group
	 * (they share the pool entry's buffer: each is closed, its parity
	 * page sent, before the next one's members go in) */
	for (unsigned q = 0; q < (G ? G->n : 1); q++) {
		struct parity_group *g = G ? parity_group_at(&rb->pt, G->gid[q]) : NULL;
		if (G && G->fresh[q]) {
			/* the group before it is closed: the buffer is its */
			pthread_mutex_lock(glock(rb, (uint64_t)G->gid[q]));
			memset(p->buf, 0, PAGE);
			g->local = p->buf;
			pthread_mutex_unlock(glock(rb, (uint64_t)G->gid[q]));
		}
		for (unsigned k = 0; k < n; k++) {
			struct wb_plan *x = &w[k];
			if (x->st < 0 || (G && x->gid != G->gid[q]))
				continue;
			struct slot *s = &rb->slots[x->i];
			struct rnode *nd = &rb->nodes[x->node];
			uint64_t v = s->version + 1;
			if (st[x->st].rc || (x->st2 >= 0 && st[x->st2].rc)) {
				/* mirror: a new slot's copy that did go in is
				 * garbage (slot_write places both again) */
				if (!x->inplace && x->st2 >= 0) {
					if (!st[x->st].rc)
						(void)node_op(rb, (unsigned)x->node, OP_DROP,
							      x->i, v, NULL);
					if (!st[x->st2].rc)
						(void)node_op(rb, (unsigned)x->node2, OP_DROP,
							      x->i, v, NULL);
				}
				x->st = -1;     /* slot_write's way */
				continue;
			}
			if (g) {
				uint8_t gen = x->gen;
				pthread_mutex_lock(glock(rb, (uint64_t)x->gid));
				int arc = parity_member_add(g, rb->gsize, x->i, v,
							    (uint8_t)x->node, gen);
				if (!arc) {
					xor_into(g->local, x->page, PAGE);
					rb->slot_grp[x->i] = (uint32_t)x->gid + 1;
					s->n[0] = (uint8_t)x->node;
					s->g[0] = gen;
				}
				pthread_mutex_unlock(glock(rb, (uint64_t)x->gid));
				if (arc) {
					/* the group changed under us (a member
					 * moved to that node): our copy is garbage */
					(void)node_op(rb, (unsigned)x->node, OP_DROP, x->i, v, NULL);
					x->st = -1;
					continue;
				}
			} else if (!x->inplace) {
				s->n[0] = (uint8_t)x->node;
				s->g[0] = x->gen;
				if (x->node2 >= 0) {
					struct rnode *nd2 = &rb->nodes[x->node2];
					s->n[1] = (uint8_t)x->node2;
					s->g[1] = x->gen2;
					atomic_fetch_add(&nd2->placed, 1);
					atomic_fetch_add(&nd2->held, 1);
					atomic_fetch_sub(&nd2->free_pages, 1);
				}
			}
			if (!x->inplace) {
				atomic_fetch_add(&nd->placed, 1);
				atomic_fetch_add(&nd->held, 1);
				atomic_fetch_sub(&nd->free_pages, 1);
				atomic_fetch_add(&rb->mapped, 1);
			}
			s->version = v;
			s->lost = 0;
			x->node = -2;   /* done */
		}
		if (G && G->full[q]) {
			/* filled up: it keeps its parity in a buffer of its
			 * own until close_batch sends it (the pool entry's
			 * goes to the next group); or nothing went in after
			 * all: it is freed (a later page opens another) */
			pthread_mutex_lock(glock(rb, (uint64_t)G->gid[q]));
			if (g->nmem) {
				memcpy(G->par[q], p->buf, PAGE);
				g->local = G->par[q];
			} else {
				spec_drop(rb, G, q, g->pkey, true);
				parity_group_free(&rb->pt, (uint32_t)G->gid[q]);
				G->full[q] = false;
			}
			pthread_mutex_unlock(glock(rb, (uint64_t)G->gid[q]));
		}
	}
	if (G) {
		close_batch(rb, G);
		pthread_mutex_unlock(&p->lock);
	}
	if (rb->gsize)
		overwrite_batch(rb, w, n);
	/* everything else, one page at a time */
	for (unsigned k = 0; k < n; k++)
		if (w[k].node != -2) {
			int r = slot_write(rb, w[k].i, w[k].page);
			if (r && !rc)
				rc = r;
		}
	return rc;
}

/* Slots i0 .. i0+n-1 (n <= WBATCH), whole pages from buf (NULL: zeros). */
static int write_pages(struct remote_backend *rb, const uint8_t *buf, uint64_t i0,
		       unsigned n)
{
	static const uint8_t zeros[PAGE];
	uint64_t slots[WBATCH];
	const uint8_t *page[WBATCH];
	uint16_t order[WBATCH];

	for (unsigned k = 0; k < n; k++) {
		slots[k] = i0 + k;
		page[k] = buf ? buf + (size_t)k * PAGE : zeros;
	}
	unsigned u = stripes_lock(rb, slots, n, order);
	int rc = write_slots(rb, slots, page, n);
	stripes_unlock(rb, order, u);
	return rc;
}

static int write_range(struct remote_backend *rb, const void *buf, uint64_t off,
		       uint64_t len)
{
	static const uint8_t zeros[PAGE];
	uint8_t page[PAGE];
	int rc = 0;

	while (len) {
		uint64_t i = off / PAGE;
		uint32_t in = (uint32_t)(off % PAGE);
		uint32_t n = PAGE - in < len ? PAGE - in : (uint32_t)len;
		if (in == 0 && len >= 2 * PAGE) {
			/* a run of whole pages */
			uint64_t k = len / PAGE < WBATCH ? len / PAGE : WBATCH;
			rc = write_pages(rb, buf, i, (unsigned)k);
			if (rc)
				return rc;
			if (buf)
				buf = (const uint8_t *)buf + k * PAGE;
			off += k * PAGE;
			len -= k * PAGE;
			continue;
		}
		pthread_mutex_lock(stripe(rb, i));
		if (in == 0 && n == PAGE) {
			rc = slot_write(rb, i, buf ? buf : zeros);
		} else if (!(rc = slot_read(rb, i, page))) {
			/* a partial slot: read-modify-write */
			if (buf)
				memcpy(page + in, buf, n);
			else
				memset(page + in, 0, n);
			rc = slot_write(rb, i, page);
		}
		pthread_mutex_unlock(stripe(rb, i));
		if (rc)
			return rc;
		if (buf)
			buf = (const uint8_t *)buf + n;
		off += n;
		len -= n;
	}
	return 0;
}

int remote_write(void *priv, const void *buf, uint64_t off, uint32_t len)
{
	struct remote_backend *rb = priv;
	int rc = check_range(rb, off, len);

	if (rc)
		return rc;
	atomic_fetch_add(&rb->writes, 1);
	return write_range(rb, buf, off, len);
}

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

/* A trim chunk's requests, sent at once by node_batch_mixed: the parity
 * updates of the groups it cut (ur[u] in r, for group g[uq[u]] of the
 * scratch) and the drops of its pages and of emptied groups' parity
 * pages; used[]: the group locks trim_groups took, held until
 * trim_groups_done. */
struct trim_reqs {
	struct store_req r[NODE_BATCH_MAX];
	unsigned n, nu;
	unsigned ur[TRIM_BATCH], uq[TRIM_BATCH];
	bool used[GSTRIPES];
};

/* The grouped slots of a trim chunk out of their parity groups, as
 * group_remove does one by one, with the group locks taken here and held
 * until trim_groups_done: the old pages that an open group's buffer or a
 * closed group's parity needs are fetched at once (none when every
 * member of the group goes); the deltas for the parity nodes and the
 * drops of emptied groups' parity pages go into R, for the caller to
 * send with the data pages' drops (the usual trim, whole groups, then
 * costs one round trip, as without parity; one that cuts groups two:
 * the fetch, then the deltas and the drops together - a trimmed page is
 * not needed once its delta is made, and if the delta is lost the
 * parity is recomputed from the members that stay). done[k]: slot k
 * left its group here; the others (a copy not readable, a fetch that
 * failed) are left to pslot_unmap. Caller holds the stripes. */
static void trim_groups(struct remote_backend *rb, uint64_t i0, unsigned n,
			struct trim_scratch *t, bool *done, struct trim_reqs *R)
{
	bool *used = R->used;
	int tg[TRIM_BATCH];             /* slot k's entry in t->g, or -1 */
	unsigned ng = 0, nf = 0;

	for (unsigned k = 0; k < n; k++) {
		const struct slot *s = &rb->slots[i0 + k];
		tg[k] = -1;
		if (!slot_mapped(s) || s->spilled || !rb->slot_grp[i0 + k] ||
		    !copy_valid(rb, s, 0) || !usable(rb, s->n[0]))
			continue;
		uint64_t gid = rb->slot_grp[i0 + k] - 1;
		unsigned q = 0;
		while (q < ng && t->g[q].gid != gid)
			q++;
		if (q == ng) {  /* its delta is zeroed when needed, below */
			struct trim_group *x = &t->g[ng++];
			x->gid = gid;
			x->cut = 0;
			x->need_old = x->failed = false;
		}
		tg[k] = (int)q;
		used[gid % GSTRIPES] = true;
	}
	if (!ng)
		return;
	for (unsigned x = 0; x < GSTRIPES; x++)
		if (used[x])
			pthread_mutex_lock(&rb->glocks[x]);
	for (unsigned k = 0; k < n; k++) {
		if (tg[k] < 0)
			continue;
		struct parity_group *g = parity_group_at(&rb->pt, t->g[tg[k]].gid);
		if (parity_member_find(g, i0 + k) < 0)
			tg[k] = -1;     /* not where the map says: the slow way */
		else
			t->g[tg[k]].cut++;
	}
	/* which old pages are needed: only where members stay, for an open
	 * group's buffer or a closed group's parity (an open group left
	 * empty gets a zero buffer) */
	for (unsigned q = 0; q < ng; q++) {
		struct trim_group *x = &t->g[q];
		const struct parity_group *g = parity_group_at(&rb->pt, x->gid);
		x->need_old = x->cut < g->nmem && (g->state == PG_OPEN || parity_ok(rb, g));
	}
	for (unsigned k = 0; k < n; k++) {
		const struct slot *s = &rb->slots[i0 + k];
		if (tg[k] < 0 || !t->g[tg[k]].need_old)
			continue;
		t->node[nf] = s->n[0];
		t->f[nf] = (struct cluster_fetch){ .kind = FK_DATA, .key = i0 + k,
						   .version = s->version, .page = t->old[nf] };
		nf++;
	}
	if (nf) {
		unsigned slot_of[TRIM_BATCH];
		for (unsigned e = 0; e < nf; e++)
			slot_of[e] = (unsigned)(t->f[e].key - i0);
		fetch_batch(rb, t->f, t->node, nf, t->tmp, t->from);
		for (unsigned e = 0; e < nf; e++)
			if (t->f[e].rc)
				t->g[tg[slot_of[e]]].failed = true;
	}
	/* out of their groups; a group with a failed fetch wholly the slow way */
	for (unsigned q = 0; q < ng; q++)
		if (t->g[q].need_old)
			memset(t->g[q].delta, 0, PAGE);
	for (unsigned k = 0, e = 0; k < n; k++) {
		if (tg[k] < 0)
			continue;
		struct trim_group *x = &t->g[tg[k]];
		const uint8_t *old = NULL;
		if (x->need_old)
			old = t->old[e++];
		if (x->failed)
			continue;
		struct parity_group *g = parity_group_at(&rb->pt, x->gid);
		rb->slot_grp[i0 + k] = 0;
		parity_member_remove(g, (unsigned)parity_member_find(g, i0 + k));
		if (old)
			xor_into(g->state == PG_OPEN ? g->local : x->delta, old, PAGE);
		done[k] = true;
	}
	/* the closed groups' parity: deltas, or the page dropped */
	for (unsigned q = 0; q < ng; q++) {
		struct trim_group *x = &t->g[q];
		struct parity_group *g = parity_group_at(&rb->pt, x->gid);
		if (!x->failed && g->state == PG_OPEN && !g->nmem)
			memset(g->local, 0, PAGE);
		if (x->failed || g->state == PG_OPEN)
			continue;
		if (!g->nmem) {
			if (g->pn != PARITY_NO_NODE) {
				atomic_fetch_sub(&rb->nodes[g->pn].held, 1);
				if (usable(rb, g->pn))
					R->r[R->n++] = (struct store_req){ .slot = g->pkey,
						.version = UINT64_MAX, .node = g->pn,
						.kind = FK_PARITY, .op = BO_DROP };
			}
			parity_group_free(&rb->pt, (uint32_t)x->gid);
			continue;
		}
		if (x->need_old) {
			R->uq[R->nu] = q;
			R->ur[R->nu++] = R->n;
			R->r[R->n++] = (struct store_req){ .slot = g->pkey, .version = ++g->pver,
							   .page = x->delta, .node = g->pn,
							   .kind = FK_PARITY,
							   .op = BO_PARITY_UPDATE };
		} else {
			(void)group_parity_rebuild(rb, g);
		}
		if (parity_group_sparse(g, rb->gsize))
			atomic_store(&rb->merge_needed, 1);
	}
}

/* After R went: the cut groups whose delta did not arrive get their
 * parity recomputed from the members; the group locks are released. */
static void trim_groups_done(struct remote_backend *rb, const struct trim_scratch *t,
			     struct trim_reqs *R)
{
	for (unsigned u = 0; u < R->nu; u++) {
		if (R->r[R->ur[u]].rc == 0)
			atomic_fetch_add(&rb->parity_updates, 1);
		else    /* the delta may be lost: recomputed from the members */
			(void)group_parity_rebuild(rb, parity_group_at(&rb->pt, t->g[R->uq[u]].gid));
	}
	for (unsigned x = GSTRIPES; x-- > 0;)
		if (R->used[x])
			pthread_mutex_unlock(&rb->glocks[x]);
}

/* Trim slots i0 .. i0+n-1 (n <= TRIM_BATCH): unmapped, their copies
 * dropped in one PAGE_DROP_MANY per node (and, with parity, out of their
 * groups: trim_groups, with a scratch of rb->tscr, allocated at open:
 * nothing is allocated on the I/O path of a swap device). */
static void trim_pages(struct remote_backend *rb, uint64_t i0, unsigned n)
{
	uint16_t order[TRIM_BATCH];
	uint64_t slots[TRIM_BATCH] = { 0 };
	bool done[TRIM_BATCH] = { false };
	struct trim_reqs R;
	struct tscratch *t = NULL;

	R.n = R.nu = 0;
	memset(R.used, 0, sizeof(R.used));
	for (unsigned k = 0; k < n; k++)
		slots[k] = i0 + k;
	unsigned u = stripes_lock(rb, slots, n, order);
	if (rb->gsize) {
		t = &rb->tscr[lock_one(&rb->tscr[0].lock, sizeof(rb->tscr[0]), POOL,
				       &rb->tscr_rr)];
		trim_groups(rb, i0, n, t->t, done, &R);
	}
	for (unsigned k = 0; k < n; k++) {
		uint64_t i = i0 + k;
		struct slot *s = &rb->slots[i];
		s->lost = 0;            /* trimmed: zeros are right */
		if (!slot_mapped(s))
			continue;       /* the version stays: a late copy can
					 * never pass for current */
		if (rb->gsize && !done[k] && !s->spilled)
			continue;       /* pslot_unmap's, below: it takes group locks */
		for (unsigned r = 0; r < rb->copies; r++) {
			if (s->n[r] == NO_NODE)
				continue;
			atomic_fetch_sub(&rb->nodes[s->n[r]].held, 1);
			if (copy_valid(rb, s, r) && usable(rb, s->n[r]))
				R.r[R.n++] = (struct store_req){ .slot = i, .version = UINT64_MAX,
								 .node = s->n[r], .kind = FK_DATA,
								 .op = BO_DROP };
			s->n[r] = NO_NODE;
		}
		spill_forget(rb, i);
		atomic_fetch_sub(&rb->mapped, 1);
	}
	if (R.n)
		node_batch_mixed(rb, R.r, R.n);
	for (unsigned x = 0; x < R.n; x++)     /* parity stores never count */
		if (R.r[x].op == BO_DROP && R.r[x].rc == 0 && R.r[x].kind == FK_DATA)
			atomic_fetch_add(&rb->nodes[R.r[x].node].free_pages, 1);
	if (t) {
		trim_groups_done(rb, t->t, &R);
		pthread_mutex_unlock(&t->lock);
	}
	for (unsigned k = 0; rb->gsize && k < n; k++) {
		uint64_t i = i0 + k;
		if (done[k] || !slot_mapped(&rb->slots[i]))
			continue;
		pslot_unmap(rb, i);     /* out of its group, its copy dropped */
		spill_forget(rb, i);
		atomic_fetch_sub(&rb->mapped, 1);
	}
	stripes_unlock(rb, order, u);
}

/* slot_grp[i] without its stripe (writers store it plainly under the
 * stripe): only for picking a trim batch's end, where a stale value
 * costs a group cut in two, nothing more. */
static uint32_t grp_peek(struct remote_backend *rb, uint64_t i)
{
	return __atomic_load_n(&rb->slot_grp[i], __ATOMIC_RELAXED);
}

int remote_trim(void *priv, uint64_t off, uint64_t len)
{
	struct remote_backend *rb = priv;
	int rc = check_range(rb, off, len);

	if (rc)
		return rc;
	atomic_fetch_add(&rb->trims, 1);
	/* Partial slots at the edges keep their other bytes. */
	uint64_t first = (off + PAGE - 1) / PAGE, end = (off + len) / PAGE;
	if (first >= end)
		return write_range(rb, NULL, off, len);
	if (off % PAGE && (rc = write_range(rb, NULL, off, first * PAGE - off)))
		return rc;
	if ((off + len) % PAGE &&
	    (rc = write_range(rb, NULL, end * PAGE, off + len - end * PAGE)))
		return rc;
	for (uint64_t i = first, e; i < end; i = e) {
		e = end - i < TRIM_BATCH ? end : i + TRIM_BATCH;
		/* A run fills its groups in slot order, so a group's members
		 * are mostly neighbours: a batch ends before a group that
		 * would straddle its end, for the next to take it whole (a
		 * group cut in two costs a fetch of the pages that stay and
		 * a parity update; the kernel discards hundreds of slots at
		 * once, so an arbitrary end cut one group per batch). A
		 * glance without the lock: it only picks the boundary. */
		while (rb->gsize && e < end && e - i > TRIM_BATCH / 2 &&
		       grp_peek(rb, e - 1) && grp_peek(rb, e - 1) == grp_peek(rb, e))
			e--;
		trim_pages(rb, i, (unsigned)(e - i));
	}
	return 0;
}

int remote_flush(void *priv)
{
	/* Every write is stored on its node(s) before it is acknowledged. */
	(void)priv;
	return 0;
}

/* --- the capacity table ---------------------------------------------------- */

static int refresh_from(struct remote_backend *rb, unsigned i)
{
	static _Thread_local struct frame_node tab[FRAME_MAX_NODES];
	unsigned n = 0;
	int rc;
	struct rconn *c = conn_get(rb, i, &rc);

	if (!c)
		return rc;
	rc = cluster_client_node_table(c->cl, tab, FRAME_MAX_NODES, &n);
	conn_put(rb, i, c, rc);
	if (rc)
		return rc;
	for (unsigned k = 0; k < n; k++) {
		for (unsigned j = 0; j < rb->nn; j++) {
			struct rnode *nd = &rb->nodes[j];
			if (nd->id != tab[k].node_id)
				continue;
			/* "unknown": the node we asked has not heard from it
			 * yet, which says nothing either way. */
			if (tab[k].state == FN_UNKNOWN)
				break;
			bool alive = tab[k].state == FN_ALIVE || tab[k].state == FN_SELF;
			if (alive && tab[k].state != FN_SELF &&
			    atomic_load(&nd->declared_dead) &&
			    (!tab[k].incarnation ||
			     tab[k].incarnation == atomic_load(&nd->dead_inc)))
				alive = false;          /* stale news, see rnode */
			if (alive && tab[k].incarnation)
				saw_incarnation(rb, j, tab[k].incarnation);
			if (alive)
				atomic_store(&nd->declared_dead, 0);
			int was = atomic_exchange(&nd->alive, alive);
			if (!was && alive)
				log_info("remote swap: node %u is alive (per node %u)",
					 nd->id, rb->nodes[i].id);
			if (was && !alive) {
				atomic_store(&nd->dead_inc, atomic_load(&nd->incarnation));
				atomic_store(&nd->declared_dead, 1);
				log_warn("remote swap: node %u is dead (per node %u)%s",
					 nd->id, rb->nodes[i].id, rb->copies > 1 ?
					 ": re-mirroring its pages" : "");
				atomic_store(&rb->rebuild_needed, 1);
			}
			/* A peer that has not had a heartbeat with this
			 * node's capacity yet reports 0 offered: no news,
			 * which must not overwrite the node's own report. */
			/* (A node that shrank to nothing offers 0 too, but
			 * its report carries its MemAvailable.) */
			if (tab[k].state != FN_SELF && !tab[k].cap.offered &&
			    !tab[k].cap.mem_available)
				break;
			uint64_t fr = tab[k].cap.offered > tab[k].cap.used ?
				      (tab[k].cap.offered - tab[k].cap.used) / PAGE : 0;
			uint64_t ov = tab[k].cap.used > tab[k].cap.offered ?
				      (tab[k].cap.used - tab[k].cap.offered + PAGE - 1) / PAGE : 0;
			atomic_store(&nd->free_pages, (int_fast64_t)fr);
			int_fast64_t was_ov = atomic_exchange(&nd->over_pages,
							      (int_fast64_t)ov);
			if (!was_ov && ov)
				log_info("remote swap: node %u holds %" PRIu64 " pages "
					 "over its offer: migrating ours away", nd->id, ov);
		}
	}
	return 0;
}

/* Ask the first node that answers, starting from a rotating one. */
static int refresh(struct remote_backend *rb)
{
	static atomic_uint start;
	unsigned s = atomic_fetch_add(&start, 1);
	int rc = -EHOSTUNREACH;

	for (unsigned k = 0; k < rb->nn; k++) {
		unsigned i = (s + k) % rb->nn;
		if (!rb->nodes[i].target ||
		    clock_now_ns() < atomic_load(&rb->nodes[i].down_until_ns))
			continue;
		if ((rc = refresh_from(rb, i)) == 0)
			return 0;
	}
	return rc;
}

static bool stopping(struct remote_backend *rb)
{
	pthread_mutex_lock(&rb->lock);
	bool s = rb->stopping;
	pthread_mutex_unlock(&rb->lock);
	return s;
}

/* Recovery after a node death (mirror): every slot with a copy on a node
 * that is no longer alive is read through slot_read, which serves it from
 * the surviving copy and places a new one. Runs while I/O goes on; each
 * slot is handled under its stripe like any request. */
static void rebuild(struct remote_backend *rb)
{
	uint8_t page[PAGE];
	uint64_t fixed = 0, failed = 0;

	for (uint64_t i = 0; i < rb->nslots; i++) {
		if (i % 4096 == 0 && stopping(rb))
			return;
		pthread_mutex_lock(stripe(rb, i));
		struct slot *s = &rb->slots[i];
		bool hit = false;
		for (unsigned r = 0; r < rb->copies; r++)
			if (s->n[r] != NO_NODE && (!copy_valid(rb, s, r) ||
			    !atomic_load(&rb->nodes[s->n[r]].alive)))
				hit = true;
		if (hit) {
			if (slot_read(rb, i, page) == 0)
				fixed++;
			else
				failed++;
		}
		pthread_mutex_unlock(stripe(rb, i));
	}
	atomic_fetch_add(&rb->rebuild_passes, 1);
	if (fixed || failed)
		log_info("remote swap: rebuild pass: %" PRIu64 " slots re-mirrored, %"
			 PRIu64 " could not be", fixed, failed);
}


static uint64_t group_dissolve(struct remote_backend *rb, uint32_t gid,
			       const uint64_t *slots, unsigned n);

/* Does a node holding a member of g have room (so that regrouping g's
 * members can free a node for a parity page)? Caller holds g's lock. */
static bool group_room_inside(struct remote_backend *rb, const struct parity_group *g)
{
	for (unsigned k = 0; k < g->nmem; k++)
		if (g->m[k].node != NO_NODE && pickable(rb, g->m[k].node))
			return true;
	return false;
}

/* Parity recovery after a node death: every slot on a node no longer
 * alive is rebuilt from its group and re-homed; then every closed group
 * whose parity page was on such a node gets it recomputed. Runs while I/O
 * goes on. Slots are shared out among RECOVER_THREADS workers.
 *
 * A worker takes lost slots RECOVER_BATCH at a time, in three steps, so
 * that the pages a batch needs travel in a few PAGE_FETCH_MANY requests
 * (one per node and 64 pages) instead of one request per page:
 *  1. plan, under each slot's stripe and group lock: note the group as it
 *     is (members, versions, parity node and version) and what to fetch;
 *  2. fetch everything, holding no lock (fetch_batch);
 *  3. rebuild, under the stripe and group lock again: if the slot and
 *     its group are exactly as planned, the fetched pages are a
 *     consistent set (every change to a member or the parity page happens
 *     under the group's lock and moves a version), so parity ^ members is
 *     the page; pick its new node, outside the group;
 *  4. store the batch's pages, one request per node (store_batch);
 *  5. record each new home, under the locks, if still nothing changed
 *     (else drop the copy just stored).
 * Anything else (a write, trim, merge or a read's own rebuild in between,
 * a fetch or store that failed, an open group, no node outside the group)
 * goes the single-slot way, pslot_read, which a read would take too. */
#define RECOVER_BATCH 32
_Static_assert(RECOVER_BATCH <= RECOVER_STORES_MAX, "a batch's stores fit store_batch");
#define RECOVER_FETCHES (RECOVER_BATCH * (PARITY_MAX_N + 1))
_Static_assert(RECOVER_FETCHES <= FETCH_BATCH_NODE, "a batch fits fetch_batch");

struct recover_arg {
	struct remote_backend *rb;
	unsigned k;
	uint64_t fixed, failed, held;
};

struct recover_job {
	uint64_t i, version, gid;
	uint8_t n0, g0;                 /* the lost copy's node and generation */
	struct parity_group snap;       /* the group at planning */
	unsigned first, cnt;            /* its fetches; the parity page first */
	uint8_t gen;                    /* the new node's generation */
	int st;                         /* its store request; -1: none */
};

struct recover_buf {
	struct recover_job job[RECOVER_BATCH];
	struct cluster_fetch f[RECOVER_FETCHES], tmp[RECOVER_FETCHES];
	unsigned from[RECOVER_FETCHES];
	uint8_t node[RECOVER_FETCHES];
	uint8_t pages[RECOVER_FETCHES][PAGE];
	uint8_t page[PAGE];
	struct store_req st[RECOVER_BATCH];
};

static bool slot_lost(struct remote_backend *rb, const struct slot *s)
{
	return s->n[0] != NO_NODE && (!copy_valid(rb, s, 0) ||
				      !atomic_load(&rb->nodes[s->n[0]].alive));
}

static bool group_same(const struct parity_group *a, const struct parity_group *b)
{
	if (a->state != b->state || a->nmem != b->nmem || a->pn != b->pn ||
	    a->pgen != b->pgen || a->parity_lost != b->parity_lost ||
	    a->pkey != b->pkey || a->pver != b->pver)
		return false;
	for (unsigned k = 0; k < a->nmem; k++)
		if (a->m[k].slot != b->m[k].slot || a->m[k].version != b->m[k].version ||
		    a->m[k].node != b->m[k].node || a->m[k].gen != b->m[k].gen)
			return false;
	return true;
}

/* The old way, one slot: under its stripe, if still lost. */
static void recover_one(struct remote_backend *rb, uint64_t i, struct recover_arg *a,
			uint8_t *page)
{
	pthread_mutex_lock(stripe(rb, i));
	if (slot_lost(rb, &rb->slots[i])) {
		if (pslot_read(rb, i, page) == 0)
			a->fixed++;
		else
			a->failed++;
	}
	pthread_mutex_unlock(stripe(rb, i));
}

/* Step 1 for slot i: 1 planned (job filled, fetches added at b->f[*nf]),
 * 0 not lost, -1 not batchable (recover_one it). */
static int recover_plan(struct remote_backend *rb, uint64_t i,
			struct recover_buf *b, struct recover_job *j, unsigned *nf)
{
	struct slot *s = &rb->slots[i];
	int ret = -1;

	pthread_mutex_lock(stripe(rb, i));
	if (!slot_lost(rb, s)) {
		pthread_mutex_unlock(stripe(rb, i));
		return 0;
	}
	if (!rb->slot_grp[i]) {
		pthread_mutex_unlock(stripe(rb, i));
		return -1;
	}
	uint64_t gid = rb->slot_grp[i] - 1;
	struct parity_group *g = parity_group_at(&rb->pt, gid);
	pthread_mutex_lock(glock(rb, gid));
	bool ok = parity_member_find(g, i) >= 0 && parity_ok(rb, g);
	for (unsigned k = 0; ok && k < g->nmem; k++)
		if (g->m[k].slot != i && !member_ok(rb, &g->m[k]))
			ok = false;
	if (ok) {
		*j = (struct recover_job){ .i = i, .version = s->version, .gid = gid,
					   .n0 = s->n[0], .g0 = s->g[0], .snap = *g,
					   .first = *nf };
		unsigned x = *nf;
		b->node[x] = g->pn;
		b->f[x] = (struct cluster_fetch){ .kind = FK_PARITY, .key = g->pkey,
						  .page = b->pages[x] };
		x++;
		for (unsigned k = 0; k < g->nmem; k++) {
			if (g->m[k].slot == i)
				continue;
			b->node[x] = g->m[k].node;
			b->f[x] = (struct cluster_fetch){ .kind = FK_DATA,
				.key = g->m[k].slot, .version = g->m[k].version,
				.page = b->pages[x] };
			x++;
		}
		*nf = x;
		j->cnt = *nf - j->first;
		ret = 1;
	}
	pthread_mutex_unlock(glock(rb, gid));
	pthread_mutex_unlock(stripe(rb, i));
	return ret;
}

/* Step 3 for one planned slot: if it and its group are as planned and
 * every fetch worked, rebuild the page in place of the parity page and
 * pick its new node outside the group (store request *st; 1); with no
 * node outside the group, it is left to recover_regroup (2). Otherwise
 * the single-slot way, now (0). */
static int recover_prepare(struct remote_backend *rb, struct recover_buf *b,
			   struct recover_job *j, struct recover_arg *a,
			   struct store_req *st)
{
	struct slot *s = &rb->slots[j->i];
	int ret = 0;

	pthread_mutex_lock(stripe(rb, j->i));
	if (!slot_lost(rb, s)) {
		/* rebuilt by a read meanwhile */
		pthread_mutex_unlock(stripe(rb, j->i));
		return 0;
	}
	struct parity_group *g = parity_group_at(&rb->pt, j->gid);
	pthread_mutex_lock(glock(rb, j->gid));
	bool same = s->version == j->version && s->n[0] == j->n0 && s->g[0] == j->g0 &&
		    rb->slot_grp[j->i] == j->gid + 1 && group_same(g, &j->snap);
	for (unsigned k = 0; same && k < j->cnt; k++)
		same = b->f[j->first + k].rc == 0;
	if (!same) {
		pthread_mutex_unlock(glock(rb, j->gid));
		if (pslot_read(rb, j->i, b->page) == 0)
			a->fixed++;
		else
			a->failed++;
		pthread_mutex_unlock(stripe(rb, j->i));
		return 0;
	}
	uint8_t *page = b->pages[j->first];     /* the parity page */
	for (unsigned k = 1; k < j->cnt; k++)
		xor_into(page, b->pages[j->first + k], PAGE);
	atomic_fetch_add(&rb->reconstructs, 1);
	bool exclude[CONFIG_MAX_NODES] = { false };
	group_exclude(rb, g, exclude);
	int node = pick(rb, exclude);
	if (node >= 0) {
		*st = (struct store_req){ .slot = j->i, .version = j->version,
					  .page = page, .node = (uint8_t)node };
		j->gen = (uint8_t)atomic_load(&rb->nodes[node].gen);
		pthread_mutex_unlock(glock(rb, j->gid));
		ret = 1;
	} else {
		/* No node outside the group (N + 1 data nodes, one lost): out
		 * of it and into an open group, with the batch's others
		 * (recover_regroup; the page stays where it was rebuilt). If
		 * no node takes it there, it is held in our memory: room for
		 * it is reserved now; without room it stays in its group,
		 * degraded but recoverable, for a read or the next pass
		 * (taken out, it would be lost). */
		pthread_mutex_unlock(glock(rb, j->gid));
		if (hold_reserve(rb)) {
			ret = 2;
		} else {
			a->failed++;
			atomic_fetch_add(&rb->short_kept, 1);
		}
	}
	pthread_mutex_unlock(stripe(rb, j->i));
	return ret;
}

/* Step 3b, the batch's slots with no node outside their group (N + 1 data
 * nodes, one lost: every group spans them all). Each leaves its group
 * and joins an open one, as pslot_rehome does for one, but the batch at
 * once. Under the slots' stripes and the old groups' locks, every job
 * still as planned is taken out of its group, the rebuilt pages going to
 * the parity nodes as deltas (old ^ zeros), one PARITY_UPDATE_MANY per
 * node. The group locks released, the pages are written as new ones:
 * write_slots places them into open groups with one PAGE_STORE_MANY per
 * node, the parity pages of the groups they fill in the same requests. A
 * job that changed meanwhile goes the single-slot way. */
static void recover_regroup(struct remote_backend *rb, struct recover_buf *b,
			    const unsigned *jk, unsigned n, struct recover_arg *a)
{
	uint64_t slots[RECOVER_BATCH], ws[RECOVER_BATCH];
	const uint8_t *pages[RECOVER_BATCH];
	uint16_t order[RECOVER_BATCH];
	bool used[GSTRIPES] = { false }, ok[RECOVER_BATCH];
	/* up: the deltas, then (below) the parity pages' drops of dr */
	struct store_req up[2 * RECOVER_BATCH], dr[RECOVER_BATCH];
	uint64_t ugid[RECOVER_BATCH];
	unsigned nu = 0, nd = 0, nw = 0;

	for (unsigned k = 0; k < n; k++) {
		slots[k] = b->job[jk[k]].i;
		used[b->job[jk[k]].gid % GSTRIPES] = true;
	}
	unsigned u = stripes_lock(rb, slots, n, order);
	for (unsigned x = 0; x < GSTRIPES; x++)
		if (used[x])
			pthread_mutex_lock(&rb->glocks[x]);
	for (unsigned k = 0; k < n; k++) {
		const struct recover_job *j = &b->job[jk[k]];
		struct slot *s = &rb->slots[j->i];
		struct parity_group *g = parity_group_at(&rb->pt, j->gid);
		int idx = -1;
		/* a second lost member of one group fails group_same here
		 * once the first has left it */
		ok[k] = slot_lost(rb, s) && s->version == j->version && s->n[0] == j->n0 &&
			s->g[0] == j->g0 && rb->slot_grp[j->i] == j->gid + 1 &&
			group_same(g, &j->snap) && (idx = parity_member_find(g, j->i)) >= 0;
		if (!ok[k]) {
			hold_unreserve(rb);     /* recover_prepare's, for it */
			continue;
		}
		atomic_fetch_sub(&rb->nodes[s->n[0]].held, 1);
		s->n[0] = NO_NODE;
		atomic_fetch_sub(&rb->mapped, 1);       /* written again below */
		rb->slot_grp[j->i] = 0;
		parity_member_remove(g, (unsigned)idx);
		const uint8_t *page = b->pages[j->first];
		ws[nw] = j->i;
		pages[nw++] = page;
		if (!g->nmem) {
			/* its last member: the parity page goes with it */
			atomic_fetch_sub(&rb->nodes[g->pn].held, 1);
			if (usable(rb, g->pn))
				dr[nd++] = (struct store_req){ .slot = g->pkey,
					.version = UINT64_MAX, .node = g->pn, .kind = FK_PARITY };
			parity_group_free(&rb->pt, (uint32_t)j->gid);
			continue;
		}
		ugid[nu] = j->gid;
		up[nu++] = (struct store_req){ .slot = g->pkey, .version = ++g->pver,
					       .page = page, .node = g->pn, .kind = FK_PARITY,
					       .op = BO_PARITY_UPDATE };
		if (parity_group_sparse(g, rb->gsize))
			atomic_store(&rb->merge_needed, 1);
	}
	/* one round trip for both (the drops are of emptied groups) */
	for (unsigned x = 0; x < nd; x++) {
		up[nu + x] = dr[x];
		up[nu + x].op = BO_DROP;
	}
	if (nu + nd)
		node_batch_mixed(rb, up, nu + nd);
	for (unsigned x = 0; x < nu; x++) {
		if (up[x].rc == 0)
			atomic_fetch_add(&rb->parity_updates, 1);
		else    /* the delta may be lost: recomputed from the members */
			(void)group_parity_rebuild(rb, parity_group_at(&rb->pt, ugid[x]));
	}
	for (unsigned x = GSTRIPES; x-- > 0;)
		if (used[x])
			pthread_mutex_unlock(&rb->glocks[x]);
	if (nw)
		(void)write_slots(rb, ws, pages, nw);
	for (unsigned k = 0; k < nw; k++) {
		struct slot *s = &rb->slots[ws[k]];
		if (slot_mapped(s)) {
			hold_unreserve(rb);
			atomic_fetch_add(&rb->rehomes, 1);
			atomic_fetch_add(&rb->rebuilt_batched, 1);
			atomic_fetch_add(&rb->rebuilt_regrouped, 1);
			a->fixed++;
			continue;
		}
		/* No node took it (the cluster is short of room; write_slots
		 * counted a failed write): it was rebuilt and is held in our
		 * memory, in the room recover_prepare reserved, until a node
		 * takes it. Dropping it here lost it for good. */
		atomic_fetch_sub(&rb->write_errors, 1);
		atomic_fetch_add(&rb->mapped, 1);
		hold_put(rb, ws[k], pages[k]);
		a->held++;
	}
	for (unsigned k = 0; k < n; k++) {
		struct slot *s = &rb->slots[b->job[jk[k]].i];
		if (ok[k] || !slot_lost(rb, s))
			continue;
		if (pslot_read(rb, b->job[jk[k]].i, b->page) == 0)
			a->fixed++;
		else
			a->failed++;
	}
	stripes_unlock(rb, order, u);
}

/* Step 5, after the stores: the slot's new home is recorded if nothing
 * changed meanwhile; a copy stored for nothing is dropped again. */
static void recover_finish(struct remote_backend *rb, struct recover_buf *b,
			   const struct recover_job *j, const struct store_req *st,
			   struct recover_arg *a)
{
	struct slot *s = &rb->slots[j->i];
	bool dropit = false;

	pthread_mutex_lock(stripe(rb, j->i));
	struct parity_group *g = parity_group_at(&rb->pt, j->gid);
	pthread_mutex_lock(glock(rb, j->gid));
	bool same = slot_lost(rb, s) && s->version == j->version && s->n[0] == j->n0 &&
		    s->g[0] == j->g0 && rb->slot_grp[j->i] == j->gid + 1 &&
		    group_same(g, &j->snap);
	int idx = same && !st->rc ? parity_member_find(g, j->i) : -1;
	if (idx >= 0) {
		pslot_moved(rb, s, g, idx, st->node, j->gen);
		pthread_mutex_unlock(glock(rb, j->gid));
		atomic_fetch_add(&rb->rehomes, 1);
		atomic_fetch_add(&rb->rebuilt_batched, 1);
		a->fixed++;
	} else {
		pthread_mutex_unlock(glock(rb, j->gid));
		/* our copy is garbage unless a read's rebuild put this very
		 * version on the same node */
		dropit = !st->rc && !(s->n[0] == st->node && s->version == j->version);
		if (slot_lost(rb, s)) {
			if (pslot_read(rb, j->i, b->page) == 0)
				a->fixed++;
			else
				a->failed++;
		}
	}
	if (dropit && usable(rb, st->node))
		(void)node_op(rb, st->node, OP_DROP, j->i, j->version, NULL);
	pthread_mutex_unlock(stripe(rb, j->i));
}

static void *recover_worker(void *arg)
{
	struct recover_arg *a = arg;
	struct remote_backend *rb = a->rb;
	struct recover_buf *b = malloc(sizeof(*b));
	uint8_t page[PAGE];

	for (uint64_t i = a->k; i < rb->nslots && !stopping(rb);) {
		unsigned nj = 0, nf = 0;
		/* plan a batch (a slot the batch cannot take is done at once) */
		for (; i < rb->nslots && nj < RECOVER_BATCH; i += RECOVER_THREADS) {
			if (i % 4096 < RECOVER_THREADS && stopping(rb))
				break;
			int r = b ? recover_plan(rb, i, b, &b->job[nj], &nf) : -1;
			if (r > 0)
				nj++;
			else if (r < 0)
				recover_one(rb, i, a, page);
		}
		if (!nj)
			continue;
		fetch_batch(rb, b->f, b->node, nf, b->tmp, b->from);
		unsigned ns = 0, nr = 0, jk[RECOVER_BATCH];
		for (unsigned k = 0; k < nj; k++) {
			struct recover_job *j = &b->job[k];
			int r = recover_prepare(rb, b, j, a, &b->st[ns]);
			j->st = r == 1 ? (int)ns++ : -1;
			if (r == 2)
				jk[nr++] = k;
		}
		store_batch(rb, b->st, ns);
		for (unsigned k = 0; k < nj; k++)
			if (b->job[k].st >= 0)
				recover_finish(rb, b, &b->job[k], &b->st[b->job[k].st], a);
		if (nr)
			recover_regroup(rb, b, jk, nr, a);
	}
	free(b);
	return NULL;
}

static void parity_recover(struct remote_backend *rb)
{
	struct recover_arg args[RECOVER_THREADS];
	pthread_t th[RECOVER_THREADS];
	bool started[RECOVER_THREADS];
	uint64_t fixed = 0, failed = 0, held = 0, groups = 0, regrouped = 0;
	uint64_t t0 = clock_now_ns();

	for (unsigned k = 0; k < RECOVER_THREADS; k++) {
		args[k] = (struct recover_arg){ .rb = rb, .k = k };
		started[k] = pthread_create(&th[k], NULL, recover_worker, &args[k]) == 0;
		if (!started[k])
			recover_worker(&args[k]);       /* no thread: do it here */
	}
	for (unsigned k = 0; k < RECOVER_THREADS; k++) {
		if (started[k])
			pthread_join(th[k], NULL);
		fixed += args[k].fixed;
		failed += args[k].failed;
		held += args[k].held;
	}
	uint64_t dt = clock_now_ns() - t0;
	if (stopping(rb))
		return;
	for (uint32_t gid = 0; gid < parity_table_size(&rb->pt); gid++) {
		pthread_mutex_lock(glock(rb, gid));
		struct parity_group *g = parity_group_at(&rb->pt, gid);
		uint64_t slots[PARITY_MAX_N];
		unsigned n = 0;
		if (g->state == PG_CLOSED && g->nmem && (g->parity_lost ||
		    g->pn == PARITY_NO_NODE ||
		    (uint8_t)atomic_load(&rb->nodes[g->pn].gen) != g->pgen ||
		    !atomic_load(&rb->nodes[g->pn].alive))) {
			/* no node can take anything: do not fetch every
			 * member of every such group for nothing (retried
			 * later, backing off) */
			bool none[CONFIG_MAX_NODES] = { false };
			int rc = -ENOSPC;
			if (pick_count(rb, none)) {
				rc = group_parity_rebuild(rb, g);
			} else {
				atomic_fetch_add(&rb->short_parity, 1);
				atomic_store(&rb->retry_due, 1);
			}
			groups += rc == 0;
			/* No node outside the group for its parity (N + 1
			 * nodes for groups of N, one lost): a member on a
			 * node with room leaves for an open group, and its
			 * node takes the parity page (recomputed then). */
			for (unsigned k = 0; rc == -ENOSPC && k < g->nmem && !n; k++)
				if (g->m[k].node != NO_NODE && pickable(rb, g->m[k].node))
					slots[n++] = g->m[k].slot;
		}
		pthread_mutex_unlock(glock(rb, gid));
		if (n && group_dissolve(rb, gid, slots, n))
			regrouped++;
	}
	if (regrouped)
		log_info("remote swap: %" PRIu64 " parity groups regrouped: no node "
			 "outside them could take their parity page", regrouped);
	atomic_fetch_add(&rb->rebuild_passes, 1);
	atomic_fetch_add(&rb->rebuilt_pages, fixed);
	if (fixed)
		atomic_fetch_add(&rb->rebuild_ns, dt);
	if (fixed || failed || held || groups)
		log_info("remote swap: recovery pass: %" PRIu64 " pages rebuilt from "
			 "parity (%.3f ms/page), %" PRIu64 " rebuilt and held in "
			 "nvswapd's memory (no node had room), %" PRIu64 " could not be "
			 "(left in their groups), %" PRIu64 " parity pages recomputed",
			 fixed, fixed ? dt / 1e6 / (double)fixed : 0.0, held, failed,
			 groups);
	short_log(rb);
}

/* Move the members `slots` of closed group gid into open groups: XORed out
 * of its parity page, into the parity-logging buffer; the data stays
 * where it is unless the open group already has a page there. The group
 * (and its parity page) is freed when its last member leaves. Returns how
 * many moved. Takes each slot's stripe, then the group's lock. */
static uint64_t group_dissolve(struct remote_backend *rb, uint32_t gid,
			       const uint64_t *slots, unsigned n)
{
	struct parity_group *g = parity_group_at(&rb->pt, gid);
	uint8_t page[PAGE];
	uint64_t moved = 0;

	for (unsigned k = 0; k < n; k++) {
		uint64_t j = slots[k];
		struct slot *s = &rb->slots[j];
		pthread_mutex_lock(stripe(rb, j));
		pthread_mutex_lock(glock(rb, gid));
		int idx = rb->slot_grp[j] == gid + 1 && g->state == PG_CLOSED ?
			  parity_member_find(g, j) : -1;
		int node = s->n[0];
		/* room in the hold first: a page that leaves its group
		 * and finds no other is held, never dropped; without that
		 * room it stays where it is */
		if (idx >= 0 && copy_valid(rb, s, 0) && usable(rb, s->n[0]) &&
		    hold_reserve(rb)) {
			if (node_op(rb, s->n[0], OP_FETCH, j, s->version, page) != 0) {
				hold_unreserve(rb);
				pthread_mutex_unlock(glock(rb, gid));
				pthread_mutex_unlock(stripe(rb, j));
				continue;
			}
			group_remove(rb, gid, (unsigned)idx, page);
			pthread_mutex_unlock(glock(rb, gid));
			if (group_add(rb, j, s->version, page, node) == 0) {
				hold_unreserve(rb);
				moved++;
			} else {
				/* nowhere to go: held in our memory */
				atomic_fetch_sub(&rb->nodes[node].held, 1);
				s->n[0] = NO_NODE;
				if (usable(rb, (unsigned)node))
					(void)node_op(rb, (unsigned)node, OP_DROP, j,
						      s->version, NULL);
				hold_put(rb, j, page);
				short_log(rb);
			}
		} else {
			pthread_mutex_unlock(glock(rb, gid));
		}
		pthread_mutex_unlock(stripe(rb, j));
	}
	return moved;
}

/* Merge sparse closed groups: their members move into open groups. */
static void parity_merge(struct remote_backend *rb)
{
	uint64_t moved = 0;

	for (uint32_t gid = 0; gid < parity_table_size(&rb->pt); gid++) {
		uint64_t slots[PARITY_MAX_N];
		unsigned n = 0;
		if (gid % 4096 == 0 && stopping(rb))
			return;
		pthread_mutex_lock(glock(rb, gid));
		struct parity_group *g = parity_group_at(&rb->pt, gid);
		if (parity_group_sparse(g, rb->gsize))
			for (n = 0; n < g->nmem; n++)
				slots[n] = g->m[n].slot;
		pthread_mutex_unlock(glock(rb, gid));
		moved += group_dissolve(rb, gid, slots, n);
	}
	atomic_fetch_add(&rb->merged_pages, moved);
	if (moved)
		log_debug("remote swap: %" PRIu64 " pages of sparse parity groups merged",
			  moved);
}

/* --- migration off shrinking nodes ---------------------------------------
 * A node whose report shows it holding more than it offers (the operator
 * shrank it, `nvcachectl shrink`, or local processes need its memory)
 * gives memory back: our pages there move to nodes with room. Nswap's
 * MIGRATE -> UPDATE -> INVALIDATE, done by the owner alone, since only
 * the owner knows the slot map and the parity groups: fetch the page from
 * the shrinking node, store it on a node with room (outside the slot's
 * other copy, or outside its parity group), point the map and the group
 * member at the new copy, then drop the old one. The contents do not
 * change, so no parity page does; parity pages held there move whole.
 * Each slot is handled under its stripe (and its group's lock) like any
 * request, so I/O goes on; a write to a slot on such a node moves it too
 * (slot_write). The pass stops for a node once it is within its offer, per
 * its own live report, asked again every MIGRATE_RECHECK pages moved. */
#define MIGRATE_RECHECK 256

/* Parity modes: move slot i (one copy, a member of a group) off node j.
 * 1: moved, 0: nothing to move, <0: left where it is. Caller holds the
 * stripe. */
static int migrate_pslot(struct remote_backend *rb, uint64_t i, unsigned j,
			 uint8_t *page)
{
	struct slot *s = &rb->slots[i];

	if (s->n[0] != j || !copy_valid(rb, s, 0) || !rb->slot_grp[i])
		return 0;
	uint64_t gid = rb->slot_grp[i] - 1;
	struct parity_group *g = parity_group_at(&rb->pt, gid);
	pthread_mutex_lock(glock(rb, gid));
	int idx = parity_member_find(g, i);
	int rc = idx < 0 ? 0 : node_op(rb, j, OP_FETCH, i, s->version, page);
	if (idx < 0 || rc) {
		pthread_mutex_unlock(glock(rb, gid));
		return rc;
	}
	/* Same group, a node outside it: the group's parity stays right. */
	bool exclude[CONFIG_MAX_NODES] = { false };
	group_exclude(rb, g, exclude);
	exclude[j] = true;
	for (unsigned tries = 0; tries < rb->nn; tries++) {
		int n = pick(rb, exclude);
		if (n < 0)
			break;
		if (node_op(rb, (unsigned)n, OP_STORE, i, s->version, page) == 0) {
			pslot_moved(rb, s, g, idx, (unsigned)n,
				    (uint8_t)atomic_load(&rb->nodes[n].gen));
			pthread_mutex_unlock(glock(rb, gid));
			(void)node_op(rb, j, OP_DROP, i, s->version, NULL);
			return 1;
		}
		exclude[n] = true;
	}
	/* Every node with room is in the group already: the page leaves it
	 * (XORed out of its parity) for an open group; room in the hold is
	 * reserved first (without it, the page stays where it is). */
	if (!hold_reserve(rb)) {
		pthread_mutex_unlock(glock(rb, gid));
		return -ENOSPC;
	}
	atomic_fetch_sub(&rb->nodes[j].held, 1);
	s->n[0] = NO_NODE;
	group_remove(rb, gid, (unsigned)idx, page);
	pthread_mutex_unlock(glock(rb, gid));
	if (group_add(rb, i, s->version, page, -1) == 0) {
		hold_unreserve(rb);
		(void)node_op(rb, j, OP_DROP, i, s->version, NULL);
		return 1;
	}
	/* No node has room: it stays where it is, in an open group
	 * (group_add keeps it on j, or moves it and drops the copy on j). */
	atomic_fetch_add(&rb->nodes[j].held, 1);
	if (group_add(rb, i, s->version, page, (int)j) == 0) {
		hold_unreserve(rb);
		return s->n[0] == j ? -ENOSPC : 1;
	}
	/* Not even there (no group can take it): held in our memory. */
	atomic_fetch_sub(&rb->nodes[j].held, 1);
	(void)node_op(rb, j, OP_DROP, i, s->version, NULL);
	hold_put(rb, i, page);
	short_log(rb);
	return -ENOSPC;
}

/* Move slot i's copy on node j elsewhere: 1 moved, 0 nothing to move, <0
 * left where it is. Caller holds the stripe. */
static int migrate_slot(struct remote_backend *rb, uint64_t i, unsigned j,
			uint8_t *page)
{
	struct slot *s = &rb->slots[i];

	if (s->spilled)
		return 0;
	if (rb->gsize)
		return migrate_pslot(rb, i, j, page);
	for (unsigned r = 0; r < rb->copies; r++) {
		if (s->n[r] != j || !copy_valid(rb, s, r))
			continue;
		int rc = node_op(rb, j, OP_FETCH, i, s->version, page);
		unsigned o = 1 - r;
		if (rc && rb->copies == 2 && copy_valid(rb, s, o) && usable(rb, s->n[o]))
			rc = node_op(rb, s->n[o], OP_FETCH, i, s->version, page);
		if (rc)
			return rc;
		uint8_t gen = s->g[r];
		s->n[r] = NO_NODE;
		rc = place_avoid(rb, i, r, s->version, page, (int)j);
		if (rc) {
			s->n[r] = (uint8_t)j;
			s->g[r] = gen;
			return rc;
		}
		atomic_fetch_sub(&rb->nodes[j].held, 1);
		(void)node_op(rb, j, OP_DROP, i, s->version, NULL);
		return 1;
	}
	return 0;
}

/* Move group gid's parity page off node j, whole: 1 moved, 0 nothing to
 * move, <0 left where it is. */
static int migrate_parity(struct remote_backend *rb, uint32_t gid, unsigned j,
			  uint8_t *page)
{
	struct parity_group *g = parity_group_at(&rb->pt, gid);
	int rc = 0;

	pthread_mutex_lock(glock(rb, gid));
	if (g->state != PG_CLOSED || !g->nmem || g->pn != j || !parity_ok(rb, g))
		goto out;
	if ((rc = parity_op(rb, j, POP_FETCH, g->pkey, 0, page)) != 0)
		goto out;
	bool exclude[CONFIG_MAX_NODES] = { false };
	for (unsigned k = 0; k < g->nmem; k++)
		if (g->m[k].node != NO_NODE)
			exclude[g->m[k].node] = true;
	exclude[j] = true;
	rc = -ENOSPC;
	for (unsigned tries = 0; tries < rb->nn; tries++) {
		int pn = parity_node_pick(rb, exclude);
		if (pn < 0)
			break;
		/* A parity update adds into what is there: no leftover of
		 * an earlier state of this group may be. */
		(void)parity_op(rb, (unsigned)pn, POP_DROP, g->pkey, UINT64_MAX, NULL);
		if (parity_op(rb, (unsigned)pn, POP_UPDATE, g->pkey, ++g->pver, page) == 0) {
			atomic_fetch_add(&rb->nodes[pn].held, 1);
			atomic_fetch_add(&rb->nodes[pn].placed, 1);
			atomic_fetch_sub(&rb->nodes[pn].free_pages, 1);
			atomic_fetch_sub(&rb->nodes[j].held, 1);
			g->pn = (uint8_t)pn;
			g->pgen = (uint8_t)atomic_load(&rb->nodes[pn].gen);
			(void)parity_op(rb, j, POP_DROP, g->pkey, UINT64_MAX, NULL);
			rc = 1;
			break;
		}
		exclude[pn] = true;
	}
	if (rc == -ENOSPC && group_room_inside(rb, g)) {
		/* Every node with room holds a member: the group is broken
		 * up, its members regrouped into open groups (which close
		 * early enough to leave a node for their parity), and its
		 * parity page dropped with it. */
		uint64_t slots[PARITY_MAX_N];
		unsigned n = g->nmem;
		for (unsigned k = 0; k < n; k++)
			slots[k] = g->m[k].slot;
		pthread_mutex_unlock(glock(rb, gid));
		group_dissolve(rb, gid, slots, n);
		pthread_mutex_lock(glock(rb, gid));
		rc = g->state == PG_CLOSED && g->pn == j ? -ENOSPC : 1;
	}
out:
	pthread_mutex_unlock(glock(rb, gid));
	return rc;
}

/* How many pages node j still has to give back, per its own live report
 * (0 when it is within its offer, gone, or holds none of ours). */
static int_fast64_t migrate_budget(struct remote_backend *rb, unsigned j)
{
	if (!usable(rb, j) || atomic_load(&rb->nodes[j].held) <= 0)
		return 0;
	if (refresh_from(rb, j) != 0)
		return 0;
	return atomic_load(&rb->nodes[j].over_pages);
}

/* Count one migration step off node j: rc > 0 a page moved, rc < 0 it
 * failed; no room elsewhere, or node j no longer answering, ends this
 * pass for j (budget 0). */
static void mig_count(struct remote_backend *rb, unsigned j, int rc, const char *what,
		      int_fast64_t *budget, uint64_t *moved, uint64_t *failed)
{
	if (rc > 0) {
		(*moved)++;
		(*budget)--;
	} else if (rc < 0) {
		(*failed)++;
		if (rc == -ENOSPC || !usable(rb, j)) {
			log_warn("remote swap: moving %s off node %u stopped: %s", what,
				 rb->nodes[j].id, rc == -ENOSPC ?
				 "no other node has room" : "it stopped answering");
			*budget = 0;
		}
	}
}

static void migrate(struct remote_backend *rb)
{
	int_fast64_t budget[CONFIG_MAX_NODES];
	uint64_t moved[CONFIG_MAX_NODES], since[CONFIG_MAX_NODES];
	uint8_t page[PAGE];
	unsigned todo = 0;
	bool cut = false;
	uint64_t failed = 0, t0 = clock_now_ns();

	for (unsigned j = 0; j < rb->nn; j++) {
		moved[j] = since[j] = 0;
		budget[j] = rb->nodes[j].target && over_offer(rb, j) &&
			    t0 >= rb->nodes[j].mig_idle_until_ns ?
			    migrate_budget(rb, j) : 0;
		todo += budget[j] > 0;
	}
	if (!todo)
		return;
	for (uint64_t i = 0; i < rb->nslots && todo; i++) {
		if (i % 4096 == 0 && stopping(rb))
			return;
		/* a node died: its recovery goes first (this thread runs
		 * it); the next pass picks up where the node still is over */
		if (i % 256 == 0 && (rb->copies > 1 || rb->gsize) &&
		    atomic_load(&rb->rebuild_needed)) {
			cut = true;
			break;
		}
		pthread_mutex_lock(stripe(rb, i));
		for (unsigned j = 0; j < rb->nn; j++) {
			if (budget[j] <= 0)
				continue;
			int rc = migrate_slot(rb, i, j, page);
			mig_count(rb, j, rc, "pages", &budget[j], &moved[j], &failed);
			if (rc > 0 && ++since[j] >= MIGRATE_RECHECK) {
				since[j] = 0;
				budget[j] = migrate_budget(rb, j);
			}
			if (budget[j] <= 0)
				todo--;
		}
		pthread_mutex_unlock(stripe(rb, i));
	}
	for (uint32_t gid = 0; gid < parity_table_size(&rb->pt) && todo; gid++) {
		if (gid % 4096 == 0 && stopping(rb))
			return;
		if (gid % 256 == 0 && atomic_load(&rb->rebuild_needed)) {
			cut = true;
			break;
		}
		for (unsigned j = 0; j < rb->nn; j++) {
			if (budget[j] <= 0)
				continue;
			int rc = migrate_parity(rb, gid, j, page);
			mig_count(rb, j, rc, "parity pages", &budget[j], &moved[j], &failed);
			if (budget[j] <= 0)
				todo--;
		}
	}
	uint64_t dt = clock_now_ns() - t0, total = 0;
	for (unsigned j = 0; j < rb->nn; j++) {
		if (!moved[j] && budget[j] > 0 && !cut) {
			log_debug("remote swap: node %u is over its offer but holds "
				  "none of our pages", rb->nodes[j].id);
			rb->nodes[j].mig_idle_until_ns = clock_now_ns() + 10 * DOWN_NS;
		}
		if (!moved[j])
			continue;
		total += moved[j];
		log_info("remote swap: migration pass: %" PRIu64 " pages moved off node "
			 "%u in %.0f ms (%.3f ms/page)%s", moved[j], rb->nodes[j].id,
			 dt / 1e6, dt / 1e6 / (double)moved[j],
			 atomic_load(&rb->nodes[j].held) > 0 ? "" : ", none of ours left there");
	}
	atomic_fetch_add(&rb->migrate_passes, 1);
	atomic_fetch_add(&rb->migrations, total);
	atomic_fetch_add(&rb->migrate_failures, failed);
	if (total)
		atomic_fetch_add(&rb->migrate_ns, dt);
}

/* Nodes that did not answer at open: once they are alive, the pages of
 * an earlier device with our owner id go, and they may take ours. */
static void reset_late_nodes(struct remote_backend *rb)
{
	for (unsigned i = 0; i < rb->nn; i++) {
		struct rnode *nd = &rb->nodes[i];
		if (!nd->target || atomic_load(&nd->reset_done) || !atomic_load(&nd->alive) ||
		    clock_now_ns() < atomic_load(&nd->down_until_ns))
			continue;
		int e;
		struct rconn *c = conn_get(rb, i, &e);
		if (!c)
			continue;
		e = cluster_client_owner_reset(c->cl);
		conn_put(rb, i, c, e);
		if (!e) {
			atomic_store(&nd->reset_done, 1);
			log_info("remote swap: node %u answers now: it takes pages from here on",
				 nd->id);
		}
	}
}

/* Place held pages on the nodes, now that one may have room: each, under
 * its stripe, joins an open group as a new page would. Stops at the first
 * that no node takes. Returns how many were placed. */
static uint64_t hold_retry(struct remote_backend *rb)
{
	uint64_t placed = 0;
	bool none[CONFIG_MAX_NODES] = { false };

	for (uint32_t x = 0; atomic_load(&rb->held_now) && !stopping(rb); x++) {
		pthread_mutex_lock(&rb->hold_lock);
		bool more = x < rb->hold_n;
		uint64_t i = more ? rb->hold_slot[x] : 0;
		bool used = more && rb->slots[i].hold == x + 1;
		pthread_mutex_unlock(&rb->hold_lock);
		if (!more || !pick_count(rb, none))
			break;
		if (!used)
			continue;
		pthread_mutex_lock(stripe(rb, i));
		struct slot *s = &rb->slots[i];
		int rc = 0;
		if (s->spilled && s->hold == x + 1) {
			rc = group_add(rb, i, s->version, hold_page(rb, x), -1);
			if (!rc) {
				spill_forget(rb, i);
				atomic_fetch_add(&rb->hold_placed, 1);
				placed++;
			}
		}
		pthread_mutex_unlock(stripe(rb, i));
		if (rc)
			break;
	}
	if (atomic_load(&rb->held_now))
		atomic_store(&rb->retry_due, 1);
	if (placed)
		log_info("remote swap: %" PRIu64 " held pages placed on the nodes, %"
			 PRIu64 " still held in nvswapd's memory", placed,
			 (uint64_t)atomic_load(&rb->held_now));
	return placed;
}

static void *refresher_main(void *arg)
{
	struct remote_backend *rb = arg;

	for (;;) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += rb->refresh_ms / 1000;
		ts.tv_nsec += (long)(rb->refresh_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&rb->lock);
		while (!rb->stopping &&
		       pthread_cond_timedwait(&rb->cond, &rb->lock, &ts) != ETIMEDOUT)
			;
		bool stop = rb->stopping;
		pthread_mutex_unlock(&rb->lock);
		if (stop)
			break;
		if (refresh(rb))
			log_debug("remote swap: no node answered the table refresh");
		reset_late_nodes(rb);
		/* Short of room (a parity page or a page that no node took):
		 * try again, the delay doubling (up to RETRY_MAX_NS) while
		 * nothing gets placed; a node death's own pass is not held
		 * back by this. */
		bool retry = false;
		uint64_t placed = 0, rebuilds0 = 0;
		if (rb->gsize) {
			/* room appeared (a node came back or grew): no waiting */
			bool none[CONFIG_MAX_NODES] = { false };
			bool room = pick_count(rb, none) > 0;
			if (room && !rb->had_room) {
				rb->retry_at_ns = 0;
				rb->retry_ns = RETRY_MIN_NS;
			}
			rb->had_room = room;
		}
		if (rb->gsize && atomic_load(&rb->retry_due) &&
		    clock_now_ns() >= rb->retry_at_ns) {
			atomic_store(&rb->retry_due, 0);
			retry = true;
			rebuilds0 = atomic_load(&rb->parity_rebuilds);
			placed = hold_retry(rb);
			atomic_store(&rb->rebuild_needed, 1);
		}
		atomic_store(&rb->recovering, 1);
		if (rb->gsize && atomic_exchange(&rb->rebuild_needed, 0))
			parity_recover(rb);
		else if (rb->copies > 1 && atomic_exchange(&rb->rebuild_needed, 0))
			rebuild(rb);
		atomic_store(&rb->recovering, 0);
		if (retry) {
			/* progress: a held page placed, a parity page
			 * recomputed and stored */
			bool progress = placed ||
					atomic_load(&rb->parity_rebuilds) != rebuilds0;
			if (!atomic_load(&rb->retry_due) || progress)
				rb->retry_ns = RETRY_MIN_NS;
			else if ((rb->retry_ns *= 2) > RETRY_MAX_NS)
				rb->retry_ns = RETRY_MAX_NS;
			rb->retry_at_ns = clock_now_ns() + rb->retry_ns;
			short_log(rb);
		}
		if (rb->gsize && atomic_exchange(&rb->merge_needed, 0))
			parity_merge(rb);
		migrate(rb);
	}
	return NULL;
}

/* --- open / close / stats -------------------------------------------------- */

int remote_open(struct remote_backend **out, const struct remote_opts *o)
{
	struct remote_backend *rb;
	int rc;

	if (!o->size || o->size % PAGE) {
		log_err("remote swap: size must be a non-zero multiple of 4 KiB");
		return -EINVAL;
	}
	if (o->redundancy > REMOTE_PARITY_DIST) {
		log_err("remote swap: unknown redundancy mode");
		return -EINVAL;
	}
	bool par = o->redundancy == REMOTE_PARITY || o->redundancy == REMOTE_PARITY_DIST;
	if (par && o->spill_path) {
		log_err("remote swap: a spill file is not supported with parity "
			"redundancy (spilled pages would sit outside their groups); "
			"use mirror or none with --flash");
		return -EINVAL;
	}
	if (par && o->parity_group && (o->parity_group < 2 ||
				       o->parity_group > PARITY_MAX_N)) {
		log_err("remote swap: parity group size %u: use 2..%u",
			o->parity_group, PARITY_MAX_N);
		return -EINVAL;
	}
	if (o->cfg->n_nodes > NO_NODE) {
		log_err("remote swap: too many nodes");
		return -EINVAL;
	}
	rb = calloc(1, sizeof(*rb));
	if (!rb)
		return -ENOMEM;
	rb->cfg = *o->cfg;
	rb->self = o->self_node;
	rb->owner = o->owner ? o->owner : o->self_node;
	rb->nslots = o->size / PAGE;
	rb->red = o->redundancy;
	rb->copies = o->redundancy == REMOTE_MIRROR ? 2 : 1;
	rb->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 3000;
	rb->refresh_ms = o->refresh_ms ? o->refresh_ms : 500;
	rb->spill_fd = -1;
	rb->pnode = -1;
	for (unsigned k = 0; k < POOL; k++) {
		pthread_mutex_init(&rb->pool[k].lock, NULL);
		pthread_mutex_init(&rb->tscr[k].lock, NULL);
		rb->pool[k].gid = -1;
	}
	for (unsigned k = 0; k < GSTRIPES; k++)
		pthread_mutex_init(&rb->glocks[k], NULL);
	pthread_mutex_init(&rb->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&rb->cond, &ca);
	pthread_condattr_destroy(&ca);
	for (unsigned i = 0; i < STRIPES; i++)
		pthread_mutex_init(&rb->stripes[i], NULL);
	pthread_mutex_init(&rb->hold_lock, NULL);
	rb->retry_ns = RETRY_MIN_NS;
	/* the hold: 1/16 of the device, at least 64 MiB, at most 256 MiB */
	{
		uint64_t h = rb->nslots / 16;
		h = h < HOLD_MIN_PAGES ? HOLD_MIN_PAGES : h > HOLD_MAX_PAGES ? HOLD_MAX_PAGES : h;
		rb->hold_max = (uint32_t)(h < rb->nslots ? h : rb->nslots);
	}
	rb->slots = malloc(rb->nslots * sizeof(*rb->slots));
	if (!rb->slots) {
		remote_close(rb);
		return -ENOMEM;
	}
	/* Versions start at a random base for each open: a page of another
	 * device under our key (a second nvswapd given our --node and
	 * export name, or leftovers of an earlier run not yet dropped) then
	 * never has the version we ask for, and reads fail -ESTALE (EIO)
	 * instead of returning its bytes as ours. Both used to count from
	 * 0: a second device's pages read back as the first's, silently. */
	uint32_t r32 = 0;
	if (getrandom(&r32, sizeof(r32), 0) != (ssize_t)sizeof(r32))
		r32 = (uint32_t)clock_now_ns() ^ (uint32_t)getpid();
	uint64_t vbase = (uint64_t)(r32 | 1) << 31;
	for (uint64_t i = 0; i < rb->nslots; i++) {
		rb->slots[i].version = vbase;
		rb->slots[i].n[0] = rb->slots[i].n[1] = NO_NODE;
		rb->slots[i].g[0] = rb->slots[i].g[1] = 0;
		rb->slots[i].spilled = 0;
		rb->slots[i].lost = 0;
		rb->slots[i].hold = 0;
	}
	if (o->spill_path) {
		struct statfs sfs;
		rb->spill_fd = open(o->spill_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (rb->spill_fd < 0) {
			rc = -errno;
			log_err("remote swap: spill file %s: %s", o->spill_path, strerror(-rc));
			remote_close(rb);
			return rc;
		}
		if ((rc = spill_lock(rb->spill_fd, o->spill_path)) < 0) {
			remote_close(rb);
			return rc;
		}
		if (fstatfs(rb->spill_fd, &sfs) == 0 &&
		    (sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC)) {
			log_err("remote swap: spill file %s is on tmpfs: swap backed by "
				"tmpfs deadlocks the kernel; put it on a disk", o->spill_path);
			remote_close(rb);
			return -EINVAL;
		}
		if (ftruncate(rb->spill_fd, (off_t)o->size) < 0) {
			rc = -errno;
			log_err("remote swap: spill file %s: %s", o->spill_path, strerror(-rc));
			remote_close(rb);
			return rc;
		}
	}
	unsigned targets = 0;
	rb->nn = rb->cfg.n_nodes;
	for (unsigned i = 0; i < rb->nn; i++) {
		struct rnode *nd = &rb->nodes[i];
		nd->cn = &rb->cfg.nodes[i];
		nd->id = nd->cn->id;
		nd->target = nd->id != rb->self;
		/* parity modes: a recovery worker holds one connection on
		 * every node of a group at once (fetch_batch), and there
		 * are RECOVER_THREADS of them beside the I/O threads */
		nd->nconn = o->conns_per_node ? o->conns_per_node :
			    o->redundancy == REMOTE_PARITY ||
			    o->redundancy == REMOTE_PARITY_DIST ? RECOVER_THREADS + 4 : 4;
		nd->conns = calloc(nd->nconn, sizeof(*nd->conns));
		if (!nd->conns) {
			remote_close(rb);
			return -ENOMEM;
		}
		for (unsigned k = 0; k < nd->nconn; k++)
			pthread_mutex_init(&nd->conns[k].lock, NULL);
		atomic_store(&nd->alive, nd->target);
		targets += nd->target;
	}
	if (rb->copies > targets) {
		log_err("remote swap: mirror needs at least two other nodes in the "
			"cluster file");
		remote_close(rb);
		return -EINVAL;
	}
	if (par) {
		/* data nodes: every target but the parity node (centralised) */
		unsigned data = targets - (o->redundancy == REMOTE_PARITY);
		unsigned want = o->parity_group ? o->parity_group : 4;
		if (targets < 3) {
			log_err("remote swap: parity needs at least three other nodes "
				"in the cluster file");
			remote_close(rb);
			return -EINVAL;
		}
		rb->gsize = want;
		if (o->redundancy == REMOTE_PARITY_DIST && data - 1 < rb->gsize)
			rb->gsize = data - 1;   /* a node outside each group */
		if (o->redundancy == REMOTE_PARITY && data < rb->gsize)
			rb->gsize = data;
		if (rb->gsize < 2)
			rb->gsize = 2;
		if (rb->gsize != want)
			log_warn("remote swap: parity groups of %u pages (%u nodes "
				 "for data)", rb->gsize, data);
		if (o->redundancy == REMOTE_PARITY)
			for (unsigned i = 0; i < rb->nn && rb->pnode < 0; i++)
				if (rb->nodes[i].target)
					rb->pnode = (int)i;
		/* Every live group has a page; sparse ones get merged, so
		 * half a group per slot is room enough while groups hold
		 * two or more. With few nodes left groups shrink to one
		 * member (its parity page is then a mirror): the table
		 * grows, up to a group per slot and the open ones. */
		uint64_t ng = rb->nslots / 2 + 64, maxg = rb->nslots + POOL + 64;
		rb->slot_grp = calloc(rb->nslots, sizeof(*rb->slot_grp));
		if (!rb->slot_grp || maxg >= UINT32_MAX ||
		    parity_table_init(&rb->pt, (uint32_t)ng, (uint32_t)maxg, rb->gsize)) {
			remote_close(rb);
			return -ENOMEM;
		}
		/* write_pages' scratch, now: nothing is allocated on the
		 * swap-out path (mlockall: it would be locked, when memory
		 * is short) */
		for (unsigned k = 0; k < POOL; k++)
			if (!(rb->pool[k].wb = malloc(sizeof(*rb->pool[k].wb))) ||
			    !(rb->tscr[k].t = malloc(sizeof(*rb->tscr[k].t)))) {
				remote_close(rb);
				return -ENOMEM;
			}
	}
	/* Each node's own report of its capacity, to start with; and a clean
	 * slate: pages an earlier device with our owner id left are dropped. */
	rc = -EHOSTUNREACH;
	for (unsigned i = 0; i < rb->nn; i++) {
		if (!rb->nodes[i].target || refresh_from(rb, i) != 0)
			continue;
		rc = 0;
		int e;
		struct rconn *c = conn_get(rb, i, &e);
		if (c) {
			e = cluster_client_owner_reset(c->cl);
			conn_put(rb, i, c, e);
			if (!e)
				atomic_store(&rb->nodes[i].reset_done, 1);
		}
	}
	if (rc) {
		log_err("remote swap: no node of the cluster answers (%s)", strerror(-rc));
		remote_close(rb);
		return -EHOSTUNREACH;
	}
	if ((rc = pthread_create(&rb->refresher, NULL, refresher_main, rb))) {
		remote_close(rb);
		return -rc;
	}
	rb->refresher_started = true;
	log_info("remote swap: %" PRIu64 " slots over %u nodes, redundancy %s",
		 rb->nslots, targets, red_name(rb->red));
	if (rb->pnode >= 0)
		log_info("remote swap: parity node %u, groups of %u pages",
			 rb->nodes[rb->pnode].id, rb->gsize);
	else if (rb->gsize)
		log_info("remote swap: parity spread over the nodes, groups of %u pages",
			 rb->gsize);
	*out = rb;
	return 0;
}

/* At a device's stop: swap does not outlive it, so its pages on the
 * nodes are garbage. They used to stay, holding the nodes' memory until a
 * device with the same key started again, maybe never (five stopped
 * devices left 234 of 320 MiB used, and a new one got ENOSPC). A node
 * that does not answer now drops them when that key next starts. */
static void drop_all_pages(struct remote_backend *rb)
{
	unsigned done = 0, tried = 0;

	for (unsigned i = 0; i < rb->nn; i++) {
		struct rnode *nd = &rb->nodes[i];
		if (!nd->target || !nd->conns || !atomic_load(&nd->reset_done) ||
		    !atomic_load(&nd->alive))
			continue;
		tried++;
		int e;
		struct rconn *c = conn_take(rb, i, &e, false);
		if (!c)
			continue;
		e = cluster_client_owner_reset(c->cl);
		conn_put(rb, i, c, e);
		if (e)
			log_warn("remote swap: node %u: could not drop our pages at "
				 "stop (%s); they go when this device starts again",
				 nd->id, strerror(-e));
		else
			done++;
	}
	if (tried)
		log_info("remote swap: our pages dropped on %u of %u nodes", done,
			 tried);
}

void remote_close(struct remote_backend *rb)
{
	if (!rb)
		return;
	pthread_mutex_lock(&rb->lock);
	rb->stopping = true;
	pthread_cond_broadcast(&rb->cond);
	pthread_mutex_unlock(&rb->lock);
	if (rb->refresher_started) {
		pthread_join(rb->refresher, NULL);
		drop_all_pages(rb);
	}
	for (unsigned i = 0; i < rb->nn; i++) {
		struct rnode *nd = &rb->nodes[i];
		for (unsigned k = 0; nd->conns && k < nd->nconn; k++) {
			cluster_client_close(nd->conns[k].cl);
			pthread_mutex_destroy(&nd->conns[k].lock);
		}
		free(nd->conns);
	}
	for (unsigned i = 0; i < STRIPES; i++)
		pthread_mutex_destroy(&rb->stripes[i]);
	if (rb->hold_chunk)
		for (uint32_t c = 0; c * HOLD_CHUNK < rb->hold_n; c++)
			free(rb->hold_chunk[c]);
	free(rb->hold_chunk);
	free(rb->hold_slot);
	free(rb->hold_free);
	pthread_mutex_destroy(&rb->hold_lock);
	if (rb->spill_fd >= 0)
		close(rb->spill_fd);
	pthread_cond_destroy(&rb->cond);
	pthread_mutex_destroy(&rb->lock);
	free(rb->slots);
	free(rb->slot_grp);
	parity_table_fini(&rb->pt);
	for (unsigned k = 0; k < POOL; k++) {
		pthread_mutex_destroy(&rb->pool[k].lock);
		pthread_mutex_destroy(&rb->tscr[k].lock);
		free(rb->pool[k].wb);
		free(rb->tscr[k].t);
	}
	for (unsigned k = 0; k < GSTRIPES; k++)
		pthread_mutex_destroy(&rb->glocks[k]);
	memset(rb->cfg.secret, 0, sizeof(rb->cfg.secret));
	free(rb);
}

void remote_destroy(void *priv)
{
	remote_close(priv);
}

/* How much is not redundant right now: slots with a copy missing or on a
 * node no longer alive, closed groups whose parity page is lost or on
 * such a node. Zero once recovery has caught up with every death: what an
 * operator waits for before taking another node down. Each slot and group
 * is read under its lock, one at a time (no nesting, so no lock order). */
struct degraded {
	uint64_t slots, groups;
};

static bool node_gone(struct remote_backend *rb, uint8_t n, uint8_t gen)
{
	return n == NO_NODE || (uint8_t)atomic_load(&rb->nodes[n].gen) != gen ||
	       !atomic_load(&rb->nodes[n].alive);
}

static struct degraded count_degraded(struct remote_backend *rb)
{
	struct degraded d = { 0, 0 };

	for (uint64_t i = 0; i < rb->nslots; i++) {
		pthread_mutex_lock(stripe(rb, i));
		const struct slot *s = &rb->slots[i];
		if (s->spilled && rb->gsize)
			d.slots++;      /* held: on no node, in no group */
		else if (slot_mapped(s) && !s->spilled)
			for (unsigned r = 0; r < rb->copies; r++)
				if (node_gone(rb, s->n[r], s->g[r])) {
					d.slots++;
					break;
				}
		pthread_mutex_unlock(stripe(rb, i));
	}
	for (uint32_t gid = 0; gid < parity_table_size(&rb->pt); gid++) {
		pthread_mutex_lock(glock(rb, gid));
		const struct parity_group *g = parity_group_at(&rb->pt, gid);
		bool bad = g->state == PG_CLOSED && g->nmem &&
			   (g->parity_lost || node_gone(rb, g->pn, g->pgen));
		for (unsigned k = 0; k < g->nmem && g->state != PG_FREE; k++)
			bad |= node_gone(rb, g->m[k].node, g->m[k].gen) ||
			       (g->state == PG_CLOSED && g->m[k].node == g->pn);
		d.groups += bad;
		pthread_mutex_unlock(glock(rb, gid));
	}
	return d;
}

ssize_t remote_stats(void *priv, char *out, size_t outlen)
{
	struct remote_backend *rb = priv;
	size_t len = 0;
#define OUT(...) do { \
	int w_ = snprintf(out + len, outlen > len ? outlen - len : 0, __VA_ARGS__); \
	if (w_ > 0) len += (size_t)w_; \
} while (0)
	OUT("remote_redundancy: %s\n", red_name(rb->red));
	OUT("remote_slots: %" PRIu64 "\n", rb->nslots);
	OUT("remote_slots_mapped: %" PRIu64 "\n", (uint64_t)atomic_load(&rb->mapped));
	OUT("remote_reads: %" PRIu64 "\nremote_writes: %" PRIu64 "\nremote_trims: %" PRIu64 "\n",
	    (uint64_t)atomic_load(&rb->reads), (uint64_t)atomic_load(&rb->writes),
	    (uint64_t)atomic_load(&rb->trims));
	OUT("remote_zero_reads: %" PRIu64 "\n", (uint64_t)atomic_load(&rb->zero_reads));
	OUT("remote_failovers: %" PRIu64 "\nremote_remirrors: %" PRIu64 "\n",
	    (uint64_t)atomic_load(&rb->failovers), (uint64_t)atomic_load(&rb->remirrors));
	OUT("remote_rebuild_passes: %" PRIu64 "\n", (uint64_t)atomic_load(&rb->rebuild_passes));
	uint64_t mig = atomic_load(&rb->migrations);
	OUT("remote_migrations: %" PRIu64 "\nremote_migration_passes: %" PRIu64
	    "\nremote_migration_failures: %" PRIu64 "\nremote_migration_ms_per_page: %.4f\n",
	    mig, (uint64_t)atomic_load(&rb->migrate_passes),
	    (uint64_t)atomic_load(&rb->migrate_failures),
	    mig ? atomic_load(&rb->migrate_ns) / 1e6 / (double)mig : 0.0);
	struct degraded dg = count_degraded(rb);
	OUT("remote_slots_degraded: %" PRIu64 "\n", dg.slots);
	OUT("remote_recovery_pending: %d\n", (rb->copies > 1 || rb->gsize) &&
	    (atomic_load(&rb->rebuild_needed) || atomic_load(&rb->recovering)));
	if (rb->gsize) {
		OUT("parity_groups_unprotected: %" PRIu64 "\n", dg.groups);
		uint64_t used = parity_groups_used(&rb->pt);
		uint64_t mapped = atomic_load(&rb->mapped);
		uint64_t rp = atomic_load(&rb->rebuilt_pages);
		/* client RAM for redundancy: the group table, the slot ->
		 * group map and the parity-logging buffers */
		uint64_t local = parity_table_bytes(&rb->pt) +
				 rb->nslots * sizeof(uint32_t) + sizeof(rb->pool);
		OUT("parity_group_size: %u\n", rb->gsize);
		if (rb->pnode >= 0)
			OUT("parity_node: %u\n", rb->nodes[rb->pnode].id);
		OUT("parity_groups: %" PRIu64 "\n", used);
		OUT("parity_sends: %" PRIu64 "\nparity_updates: %" PRIu64
		    "\nparity_rebuilds: %" PRIu64 "\nparity_errors: %" PRIu64 "\n",
		    (uint64_t)atomic_load(&rb->parity_sends),
		    (uint64_t)atomic_load(&rb->parity_updates),
		    (uint64_t)atomic_load(&rb->parity_rebuilds),
		    (uint64_t)atomic_load(&rb->parity_errors));
		/* of the parity sends, those whose page went with its run's
		 * data pages; and pages so sent that the group could not use
		 * (sent again once the run was in) */
		OUT("parity_sends_with_data: %" PRIu64 "\nparity_sends_redone: %" PRIu64
		    "\n", (uint64_t)atomic_load(&rb->spec_kept),
		    (uint64_t)atomic_load(&rb->spec_redone));
		OUT("parity_reconstructs: %" PRIu64 "\nparity_rehomes: %" PRIu64
		    "\nparity_merged_pages: %" PRIu64 "\n",
		    (uint64_t)atomic_load(&rb->reconstructs),
		    (uint64_t)atomic_load(&rb->rehomes),
		    (uint64_t)atomic_load(&rb->merged_pages));
		OUT("parity_rebuilt_pages: %" PRIu64 "\nparity_rebuild_ms_per_page: %.4f\n",
		    rp, rp ? atomic_load(&rb->rebuild_ns) / 1e6 / (double)rp : 0.0);
		/* of those, rebuilt by the batched path (the rest one by one,
		 * because something changed under the batch) */
		OUT("parity_rebuilt_batched: %" PRIu64 "\n",
		    (uint64_t)atomic_load(&rb->rebuilt_batched));
		/* of those, moved into open groups (no node outside their
		 * own: recover_regroup) */
		OUT("parity_rebuilt_regrouped: %" PRIu64 "\n",
		    (uint64_t)atomic_load(&rb->rebuilt_regrouped));
		OUT("parity_client_bytes: %" PRIu64 "\nparity_client_bytes_per_page: %.1f\n",
		    local, mapped ? (double)local / (double)mapped : 0.0);
		OUT("parity_node_bytes_per_page: %.1f\n",
		    mapped ? (double)used * PAGE / (double)mapped : 0.0);
	}
	if (rb->gsize) {
		/* pages no node had room for, held in our memory (also in
		 * remote_slots_degraded); the hold's cap; pages held so far,
		 * and placed on a node later */
		pthread_mutex_lock(&rb->hold_lock);
		uint64_t hb = (uint64_t)rb->hold_n * PAGE;
		pthread_mutex_unlock(&rb->hold_lock);
		OUT("remote_slots_held: %" PRIu64 "\nremote_hold_bytes: %" PRIu64
		    "\nremote_hold_max_bytes: %" PRIu64 "\nremote_holds: %" PRIu64
		    "\nremote_holds_placed: %" PRIu64 "\nremote_short_of_room: %d\n",
		    (uint64_t)atomic_load(&rb->held_now), hb,
		    (uint64_t)rb->hold_max * PAGE, (uint64_t)atomic_load(&rb->holds),
		    (uint64_t)atomic_load(&rb->hold_placed), atomic_load(&rb->retry_due));
	}
	OUT("remote_spill: %s\n", rb->spill_fd >= 0 ? "yes" : "no");
	OUT("remote_spills: %" PRIu64 "\nremote_slots_spilled: %" PRIu64 "\n",
	    (uint64_t)atomic_load(&rb->spills), (uint64_t)atomic_load(&rb->spilled_now));
	OUT("remote_read_errors: %" PRIu64 "\nremote_write_errors: %" PRIu64 "\n",
	    (uint64_t)atomic_load(&rb->read_errors), (uint64_t)atomic_load(&rb->write_errors));
	for (unsigned i = 0; i < rb->nn; i++) {
		struct rnode *nd = &rb->nodes[i];
		if (!nd->target)
			continue;
		OUT("remote_node.%u: %s free_pages=%" PRId64 " held=%" PRId64 " placed=%" PRIu64
		    " stores=%" PRIu64 " fetches=%" PRIu64 " errors=%" PRIu64
		    " over_offer=%" PRId64 "\n",
		    nd->id, !atomic_load(&nd->alive) ? "dead" : usable(rb, i) ? "up" : "down",
		    (int64_t)atomic_load(&nd->free_pages), (int64_t)atomic_load(&nd->held),
		    (uint64_t)atomic_load(&nd->placed),
		    (uint64_t)atomic_load(&nd->stores), (uint64_t)atomic_load(&nd->fetches),
		    (uint64_t)atomic_load(&nd->errors),
		    (int64_t)atomic_load(&nd->over_pages));
	}
#undef OUT
	return (ssize_t)(len < outlen ? len : outlen);
}
