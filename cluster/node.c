/* node.c - the cluster node: listener, page service, heartbeats, failure
 * detector and adaptive capacity; see node.h.
 *
 * Every inbound connection must pass the shared-secret handshake
 * (auth.h) within NODE_AUTH_TIMEOUT_MS. After it, each frame is a request
 * answered with one reply; a bad frame (conn_recv's -EBADMSG, -EMSGSIZE,
 * -EPROTO) is logged with the peer's address, answered with an ERROR frame
 * and the connection closed: the stream cannot be trusted past it, and
 * the node goes on serving everyone else. */
#include "cluster/node.h"

#include "cluster/auth.h"
#include "cluster/batch.h"
#include "cluster/client.h"
#include "cluster/conn.h"
#include "cluster/fcache.h"
#include "cluster/fanout.h"
#include "cluster/lockserve.h"
#include "cluster/forward.h"
#include "cluster/membership.h"
#include "cluster/memwatch.h"
#include "cluster/pagestore.h"
#include "pmem/tierstore.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/fdlimit.h"
#include "common/log.h"
#include "common/outbuf.h"
#include "common/xor.h"
#include "common/opts.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Small stacks: under mlockall(MCL_FUTURE) every thread's whole stack is
 * locked. A connection thread's deepest path is frame_encode (~70 KiB). */
#define CONN_STACK (512 * 1024)
#define SMALL_STACK (256 * 1024)

static int start_thread(pthread_t *t, size_t stack, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, stack);
	int rc = pthread_create(t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return -rc;
}

struct peer_link {
	struct node *node;
	const struct cluster_node *cn;
	pthread_t thread;
	bool started;
	struct conn *c;         /* the outbound connection, owned by thread */
};

struct node {
	struct cluster_config cfg;
	const struct cluster_node *me;
	uint32_t self;
	uint64_t incarnation;
	uint32_t hb_ms, timeout_ms;
	uint64_t reserve;
	char meminfo[256];
	unsigned max_conns;
	unsigned peer_conns;    /* forwarding connections per peer (fwd) */
	int listen_fd;
	int stop_pipe[2];

	struct membership *mb;
	struct pagestore *ps;
	struct locksvc *locks;  /* the file locks this node is home of */
	struct fcache *fc;      /* the file cache (node_opts.fcache), or NULL */
	/* the connections that forward parity deltas, peer_conns to each
	 * other node (by config index), shared by every inbound connection */
	struct peerpool *fwd;
	struct fwd_target fwd_to;

	pthread_mutex_t lock;   /* guards everything below */
	pthread_cond_t cond;    /* stop, conns_active changes */
	bool stopping;
	unsigned conns_active;
	/* max_conns connection slots. A slot's thread is joinable: when it
	 * ends it leaves its slot marked ended, and the slot's next user
	 * (accept_one) or node_stop joins it, so that no thread is still
	 * unwinding when main returns (LeakSanitizer's exit-time check
	 * cannot run beside one). */
	struct conn_slot {
		int fd;         /* -1: no connection (to shut down at stop) */
		/* taken, from accept_one until its thread's very last step
		 * (conn_slot_release): the fd goes -1 before the close, but
		 * the slot is not free before the thread is done with it */
		bool busy;
		bool thread;    /* a thread ran in this slot and is not joined */
		pthread_t t;
	} *slots;
	uint64_t mem_total, mem_available, offer, limit_override;
	uint64_t mem_offer;     /* what memwatch alone would offer */
	uint64_t tier_bytes;    /* tiered store: its page space, the offer
				 * (memory is reserved for it at start) */
	/* The operator's shrink (node_ctl "shrink SIZE"): the offer is
	 * capped at shrink_cap, 0 included; the page owners migrate the
	 * excess away. shrink_pending: not yet down to it (logged once
	 * reached). */
	bool shrunk, shrink_pending;
	uint64_t shrink_cap;
	bool meminfo_warned;

	pthread_t acceptor, monitor;
	bool acceptor_started, monitor_started;
	unsigned n_links;
	struct peer_link links[CONFIG_MAX_NODES];

	/* test only: every stall_every-th overwrite stalls stall_ms before
	 * its delta goes on (test_stall_forward); 0: none */
	unsigned stall_every, stall_ms;
	atomic_uint_fast64_t ow_count;
	atomic_uint_fast64_t conns_total, auth_failures, bad_frames,
		conns_refused, heartbeats_in, heartbeats_out, requests,
		forwards, forward_errors;
	/* "refused peer" lines, one limit per kind of refusal (what the
	 * peer claims and why it was refused, hashed): a peer retrying the
	 * same wrong secret is held back, a different refusal still shows. */
	struct log_limit auth_log[16];
};

uint64_t node_incarnation(const struct node *n)
{
	return n->incarnation;
}

static uint64_t now_ns(void)
{
	return clock_now_ns();
}

/* Wait up to ms for stop; true if stopping. */
static bool node_sleep(struct node *n, uint32_t ms)
{
	struct timespec ts;

	clock_deadline(&ts, (uint64_t)ms * 1000000ULL);
	pthread_mutex_lock(&n->lock);
	while (!n->stopping &&
	       pthread_cond_timedwait(&n->cond, &n->lock, &ts) != ETIMEDOUT)
		;
	bool s = n->stopping;
	pthread_mutex_unlock(&n->lock);
	return s;
}

static bool node_stopping(struct node *n)
{
	pthread_mutex_lock(&n->lock);
	bool s = n->stopping;
	pthread_mutex_unlock(&n->lock);
	return s;
}

static void self_capacity(struct node *n, struct frame_capacity *cap)
{
	uint64_t pages = pagestore_pages(n->ps);

	pthread_mutex_lock(&n->lock);
	cap->offered = n->offer;
	cap->mem_available = n->mem_available;
	pthread_mutex_unlock(&n->lock);
	cap->used = pages * PAGESTORE_PAGE;
}

/* Any proof of life from node id (a handshake, a heartbeat, a reply).
 * Logs membership changes. Returns the membership result. */
static int node_heard(struct node *n, uint32_t id, uint64_t inc,
		      const struct frame_capacity *cap)
{
	uint64_t old = 0;
	int ev = membership_heard(n->mb, id, inc, cap, now_ns(), &old);

	switch (ev) {
	case MB_UP:
		log_info("node %u is alive (incarnation %" PRIu64 ")", id, inc);
		break;
	case MB_BACK:
		log_info("node %u is alive again (same incarnation %" PRIu64
			 ": it was unreachable, not restarted)", id, inc);
		break;
	case MB_REJOIN:
		log_info("node %u rejoined with a new incarnation %" PRIu64
			 " (was %" PRIu64 "): it restarted, pages it held are gone",
			 id, inc, old);
		break;
	default:
		break;
	}
	return ev;
}

/* --- memory and the failure detector ----------------------------------- */

static void update_capacity(struct node *n)
{
	uint64_t total = 0, avail = 0;
	int rc = memwatch_read(n->meminfo, &total, &avail);
	uint64_t used = pagestore_pages(n->ps) * PAGESTORE_PAGE;
	pthread_mutex_lock(&n->lock);
	if (rc) {
		if (!n->meminfo_warned)
			log_warn("cannot read %s (%s): keeping the last capacity offer",
				 n->meminfo, strerror(-rc));
		n->meminfo_warned = true;
	} else {
		n->meminfo_warned = false;
		n->mem_total = total;
		n->mem_available = avail;
		uint64_t reserve = n->reserve ? n->reserve :
				   memwatch_default_reserve(total);
		uint64_t cap = n->me->mem;
		if (n->limit_override && (!cap || n->limit_override < cap))
			cap = n->limit_override;
		/* A tiered store's memory is reserved already: it offers
		 * its page space, not what memory is idle. */
		uint64_t mo = !n->tier_bytes ? memwatch_offer(cap, avail, reserve, used) :
			      cap && cap < n->tier_bytes ? cap : n->tier_bytes;
		/* mem=0: a node that swaps to the others and holds nothing for
		 * them (it offered all its idle memory: 0 read as no cap) */
		if (n->me->mem_given && !n->me->mem)
			mo = 0;
		if (!n->tier_bytes && mo < n->mem_offer && mo < used)
			log_info("local processes need memory: offer down to %" PRIu64
				 " MiB, below the %" PRIu64 " MiB held (new pages "
				 "refused, the owners migrate the excess away)",
				 mo >> 20, used >> 20);
		n->mem_offer = mo;
	}
	uint64_t offer = n->mem_offer;
	if (n->shrunk && offer > n->shrink_cap)
		offer = n->shrink_cap;
	n->offer = offer;
	if (n->shrink_pending && used <= offer) {
		n->shrink_pending = false;
		log_info("shrink done: %" PRIu64 " KiB held, within the %" PRIu64
			 " KiB cap", used >> 10, n->shrink_cap >> 10);
	}
	pthread_mutex_unlock(&n->lock);
	pagestore_set_limit(n->ps, offer / PAGESTORE_PAGE);
}

static void *monitor_main(void *arg)
{
	struct node *n = arg;
	uint32_t step = n->hb_ms / 2 ? n->hb_ms / 2 : 1;
	uint32_t dead[CONFIG_MAX_NODES];
	uint64_t last_mem = 0;

	while (!node_sleep(n, step)) {
		unsigned nd = membership_tick(n->mb, now_ns(), dead, CONFIG_MAX_NODES);
		for (unsigned i = 0; i < nd; i++) {
			const struct cluster_node *cn = config_node_find(&n->cfg, dead[i]);
			log_warn("node %u declared dead: no heartbeat for %u ms",
				 dead[i], n->timeout_ms);
			if (cn)
				peerpool_drop(n->fwd, (unsigned)(cn - n->cfg.nodes));
			/* its mounts' file locks stay while their connections
			 * do: its nvcached alone may have died
			 * (lockserve_watch ends those of a dead node) */
		}
		if (n->fc && n->cfg.n_nodes > 1) {
			/* the node whose shadow this is: down (dead, or not
			 * heard from since we started) for long, its
			 * replicas are written back here (fcache.h) */
			unsigned me = (unsigned)(n->me - n->cfg.nodes);
			unsigned prev = (me + n->cfg.n_nodes - 1) % n->cfg.n_nodes;
			struct member m;
			if (membership_get(n->mb, n->cfg.nodes[prev].id, &m) == 0)
				fcache_owner_down(n->fc, prev, m.state == FN_DEAD ||
						  m.state == FN_UNKNOWN);
			/* our shadow: with replicas=2, writes go on without
			 * it once it is dead (fcache.h) */
			unsigned next = (me + 1) % n->cfg.n_nodes;
			if (membership_get(n->mb, n->cfg.nodes[next].id, &m) == 0)
				fcache_shadow_down(n->fc, m.state == FN_DEAD ||
						   m.state == FN_UNKNOWN, n->timeout_ms);
		}
		if (now_ns() - last_mem >= (uint64_t)n->hb_ms * 1000000ULL) {
			update_capacity(n);
			last_mem = now_ns();
		}
	}
	return NULL;
}

/* --- outbound: heartbeats to one other node ----------------------------- */

static void link_close(struct peer_link *l)
{
	struct node *n = l->node;

	pthread_mutex_lock(&n->lock);
	conn_close(l->c);
	pthread_mutex_unlock(&n->lock);
}

static int link_open(struct peer_link *l, const char **why)
{
	struct node *n = l->node;
	struct auth_identity me = { n->self, n->incarnation, n->cfg.secret,
				    n->cfg.secret_len };
	struct auth_peer peer;
	int rc;

	rc = conn_connect(l->c, l->cn->host, l->cn->port, (int)n->hb_ms);
	if (rc) {
		*why = strerror(-rc);
		return rc;
	}
	rc = auth_client(l->c, &me, &peer, why);
	if (!rc && peer.node_id != l->cn->id) {
		*why = "a different node answers at this address (check the cluster file)";
		rc = -EPROTO;
	}
	if (!rc && membership_check(n->mb, peer.node_id, peer.incarnation) == -ESTALE) {
		*why = "it answers with an incarnation older than one already seen";
		rc = -ESTALE;
	}
	if (rc) {
		if (!*why || !**why)
			*why = strerror(-rc);
		link_close(l);
		return rc;
	}
	node_heard(n, peer.node_id, peer.incarnation, NULL);
	return 0;
}

static void *link_main(void *arg)
{
	struct peer_link *l = arg;
	struct node *n = l->node;
	bool up = false;
	int last_err = 0;
	uint64_t seq = 0;
	struct frame_hdr *h = calloc(1, sizeof(*h)), *r = calloc(1, sizeof(*r));

	if (!h || !r) {
		log_err("node %u: out of memory for the heartbeat link", l->cn->id);
		free(h);
		free(r);
		return NULL;
	}
	while (!node_stopping(n)) {
		const char *why = "";
		int rc;
		if (!up) {
			rc = link_open(l, &why);
			if (rc) {
				/* Log a failure once, not every interval. */
				if (rc != last_err)
					log_info("node %u (%s:%u): no heartbeat link: %s",
						 l->cn->id, l->cn->host, l->cn->port, why);
				last_err = rc;
				if (node_sleep(n, n->hb_ms))
					break;
				continue;
			}
			up = true;
			last_err = 0;
			log_debug("heartbeat link to node %u up", l->cn->id);
		}
		memset(h, 0, sizeof(*h));
		h->type = FT_HEARTBEAT;
		h->request_id = ++seq;
		h->node_id = n->self;
		h->incarnation = n->incarnation;
		h->hb_seq = seq;
		h->hb_interval_ms = n->hb_ms;
		self_capacity(n, &h->cap);
		rc = conn_send(l->c, h, NULL);
		if (!rc)
			rc = conn_recv(l->c, r, NULL, &why);
		if (!rc && (r->type != FT_HEARTBEAT || !r->reply ||
			    r->request_id != seq || r->status != FS_OK)) {
			why = r->status == FS_STALE ? "it no longer knows us under this incarnation" :
			      "unexpected reply";
			rc = -EPROTO;
		}
		if (rc) {
			log_info("node %u: heartbeat link lost: %s", l->cn->id,
				 why && *why ? why : strerror(-rc));
			link_close(l);
			up = false;
			last_err = rc;
			continue;
		}
		atomic_fetch_add(&n->heartbeats_out, 1);
		node_heard(n, l->cn->id, r->incarnation, NULL);
		if (node_sleep(n, n->hb_ms))
			break;
	}
	if (up)
		link_close(l);
	free(h);
	free(r);
	return NULL;
}

/* --- inbound: the page service ------------------------------------------ */

/* An overwrite whose delta is on its way to the parity node: what its
 * reply and its log line need. A connection keeps up to OW_PIPE of them:
 * a swapping node sends runs of overwrites on one connection, and waiting
 * for each parity node's answer before reading the next request made that
 * run two round trips per page. Replies still leave in request order. */
#define OW_PIPE 8
struct ow_pending {
	uint64_t request_id, owner, page_id, group, version;
	uint32_t kind;
	unsigned pn;            /* the parity node's index in the config */
	unsigned gen;           /* fwd.gen[pn] when its delta was sent */
};

struct inbound {
	struct node *node;
	struct conn c;
	int slot;
	struct auth_peer peer;
	struct frame_hdr req, rep;
	uint8_t page[PAGESTORE_PAGE];
	/* NODE_STATS: the snapshot a request at offset 0 took (allocated
	 * then; later chunks are read from it, so they agree). */
	char *stats;
	size_t stats_len;
	/* The batches (PAGE_FETCH_MANY, PAGE_STORE_MANY, ...): the reply
	 * payload; PAGE_OVERWRITE_MANY: the deltas (each allocated at the
	 * first need: not every peer sends them) */
	uint8_t *batch;
	struct ow_many *om;
	/* FT_FILE_* but READ: the reply's bytes (allocated at the first) */
	uint8_t *fbuf;
	/* FT_FILE_READ: the reply's bytes where they are in NVRAM, pinned
	 * until sent */
	struct fcache_read frd;
	/* PAGE_OVERWRITE: the handles to parity nodes leased from the
	 * node's pool while this connection has overwrites in flight
	 * (cluster/forward.h); given back by ow_flush */
	struct fwd_leases fwd;
	/* Overwrites whose parity updates are in flight, oldest first, and
	 * the frame their replies are made in (ow_flush) */
	struct ow_pending ow[OW_PIPE];
	unsigned now;
	struct frame_hdr orep;
	/* FILE_LOCK: the mount session this connection carries */
	struct lockserve_conn lk;
	/* file requests: the mount run this connection holds at the file
	 * cache (fcache_mount_conn), 0: none yet */
	uint64_t finst;
};

static ssize_t ctl_stats(struct node *n, char *out, size_t outlen);

/* The connection holds its mount's run at the file cache until it ends;
 * keepalive ends it if the mount's machine goes silent (as for locks). */
static void mount_bind(struct node *n, struct inbound *ib)
{
	fcache_mount_conn(n->fc, ib->finst, true);
	lockserve_watch(ib->c.fd);
}

/* One chunk of the stats text for a NODE_STATS request at offset off;
 * fills r's payload fields and returns the payload (or NULL with *rc). */
static const void *serve_stats(struct inbound *ib, uint64_t off, int *rc)
{
	struct frame_hdr *r = &ib->rep;

	if (off == 0 || !ib->stats) {
		if (!ib->stats && !(ib->stats = malloc(FRAME_MAX_STATS))) {
			*rc = -ENOMEM;
			return NULL;
		}
		ssize_t k = ctl_stats(ib->node, ib->stats, FRAME_MAX_STATS);
		ib->stats_len = k > 0 ? (size_t)k : 0;
	}
	if (off > ib->stats_len) {
		*rc = -ENOENT;
		snprintf(r->text, sizeof(r->text), "stats offset %" PRIu64
			 " past the end (%zu bytes)", off, ib->stats_len);
		return NULL;
	}
	size_t left = ib->stats_len - (size_t)off;
	r->page_id = off;
	r->version = ib->stats_len;
	r->payload_len = (uint32_t)(left < FRAME_STATS_CHUNK ? left : FRAME_STATS_CHUNK);
	*rc = 0;
	return r->payload_len ? ib->stats + off : NULL;
}

static uint32_t status_of(int rc);
static void reply_status(struct frame_hdr *r, int rc);
static int ow_end(struct inbound *ib, const struct ow_pending *p, int rc,
		  const char *err, struct frame_hdr *r);

/* A batch request that did not decode (rc, why): logged, and said in the
 * reply. Else the connection's reply buffer for it (NULL, *rc -ENOMEM). */
static uint8_t *batch_reply_buf(struct inbound *ib, const char *what, int *rc,
				const char *why)
{
	if (*rc) {
		log_warn("%s: refused a %s request: %s", ib->c.peer, what, why);
		snprintf(ib->rep.text, sizeof(ib->rep.text), "%s", why);
		return NULL;
	}
	if (!ib->batch && !(ib->batch = malloc(FRAME_MAX_CONN_PAYLOAD)))
		*rc = -ENOMEM;
	return ib->batch;
}

/* A PAGE_FETCH_MANY request: every entry fetched in order into one reply
 * payload (cluster/batch.h); an entry that fails carries its own status
 * and a zero page, the request as a whole succeeds. */
static const void *serve_fetch_many(struct inbound *ib, const uint8_t *payload,
				    int *rc)
{
	struct frame_hdr *q = &ib->req, *r = &ib->rep;
	struct batch_entry e[FRAME_BATCH_MAX];
	const char *why = "";
	unsigned n;

	*rc = batch_request_get(payload, q->payload_len, e, &n, &why);
	if (!batch_reply_buf(ib, "fetch-many", rc, why))
		return NULL;
	for (unsigned k = 0; k < n; k++) {
		struct pagestore_key key = { q->owner, e[k].kind, e[k].key };
		uint8_t *pg = batch_reply_page(ib->batch, n, k);
		uint64_t have = 0;
		int frc = pagestore_fetch(ib->node->ps, &key, e[k].version, pg, &have);
		if (frc)
			memset(pg, 0, PAGESTORE_PAGE);
		e[k].version = frc == -ENOENT ? 0 : have;
		e[k].status = status_of(frc);
		batch_result_put(ib->batch, k, &e[k]);
	}
	r->payload_len = batch_reply_len(n);
	return ib->batch;
}

/* A PAGE_STORE_MANY request (xor false): every entry stored in order,
 * each result with its own status (a full node refuses the rest with
 * FS_NO_SPACE); or a PARITY_UPDATE_MANY (xor true): every entry, of kind
 * PARITY, its delta XORed into its parity page, as a PARITY_UPDATE would
 * answer it. The request as a whole succeeds. */
static const void *serve_store_many(struct inbound *ib, const uint8_t *payload,
				    bool xor, int *rc)
{
	struct frame_hdr *q = &ib->req, *r = &ib->rep;
	struct batch_entry e[FRAME_BATCH_MAX];
	const uint8_t *pages;
	const char *why = "";
	unsigned n;

	*rc = batch_store_get(payload, q->payload_len, e, &n, &pages, &why);
	for (unsigned k = 0; xor && !*rc && k < n; k++)
		if (e[k].kind != FK_PARITY) {
			why = "parity-update-many request: an entry not of kind PARITY";
			*rc = -EPROTO;
		}
	if (!batch_reply_buf(ib, xor ? "parity-update-many" : "store-many", rc, why))
		return NULL;
	for (unsigned k = 0; k < n; k++) {
		struct pagestore_key key = { q->owner, e[k].kind, e[k].key };
		const uint8_t *pg = pages + (size_t)k * PAGESTORE_PAGE;
		int src = xor ? pagestore_xor(ib->node->ps, &key, e[k].version, pg) :
				pagestore_store(ib->node->ps, &key, e[k].version, pg);
		e[k].status = status_of(src);
		batch_result_put(ib->batch, k, &e[k]);
	}
	r->payload_len = batch_store_reply_len(n);
	return ib->batch;
}

/* A PAGE_DROP_MANY request: every entry dropped in order (a page or a
 * parity page), each result with its own status, as a PAGE_DROP would
 * answer it. */
static const void *serve_drop_many(struct inbound *ib, const uint8_t *payload, int *rc)
{
	struct frame_hdr *q = &ib->req, *r = &ib->rep;
	struct batch_entry e[FRAME_BATCH_MAX];
	const char *why = "";
	unsigned n;

	*rc = batch_request_get(payload, q->payload_len, e, &n, &why);
	if (!batch_reply_buf(ib, "drop-many", rc, why))
		return NULL;
	for (unsigned k = 0; k < n; k++) {
		struct pagestore_key key = { q->owner, e[k].kind, e[k].key };
		e[k].status = status_of(pagestore_drop(ib->node->ps, &key, e[k].version));
		batch_result_put(ib->batch, k, &e[k]);
	}
	r->payload_len = batch_store_reply_len(n);
	return ib->batch;
}

/* For tests only: NVCACHED_TEST_STALL_FORWARD=ID:MS:N (read at start)
 * has node ID stall every Nth overwrite (PAGE_OVERWRITE or _MANY) for MS
 * ms between its local store and sending its delta on: the owner's
 * request times out (a transport error, the delta's fate unknown to it)
 * and the delta reaches the parity node after the owner's fallback, as
 * from a node that hung mid-request (tests/system/cluster_parity_unsure.sh). */
static void test_stall_forward(struct node *n)
{
	if (n->stall_every &&
	    atomic_fetch_add(&n->ow_count, 1) % n->stall_every == n->stall_every - 1) {
		log_warn("test mode: an overwrite stalls %u ms", n->stall_ms);
		usleep(n->stall_ms * 1000);
	}
}

/* A PAGE_OVERWRITE_MANY's working state (allocated at the first one):
 * the deltas, and their parity updates in runs, one run per parity node
 * (a fan-out, cluster/fanout.h, over the forwarding handles). */
struct ow_many {
	uint8_t deltas[FRAME_BATCH_MAX][PAGESTORE_PAGE];
	struct cluster_store s[FRAME_BATCH_MAX];
	unsigned idx[FRAME_BATCH_MAX];  /* s[x]'s entry number */
	/* parity node j's (config index) run: s[first[j] .. first[j+1]) */
	unsigned first[CONFIG_MAX_NODES + 1];
	char err[CONFIG_MAX_NODES][200];        /* its failure, in words */
	struct inbound *ib;
	struct batch_entry *res;
};

static struct cluster_client *ow_fwd_get(void *ctx, unsigned j, int *rc)
{
	struct ow_many *om = ctx;

	om->err[j][0] = '\0';
	/* nodes in index order, holding none before: may wait */
	return fwd_lease(&om->ib->fwd, j, om->ib->req.owner, true, rc, om->err[j],
			 sizeof(om->err[j]));
}

static int ow_fwd_send(void *ctx, unsigned j, struct cluster_client *cl)
{
	struct ow_many *om = ctx;

	return cluster_client_parity_update_many_start(cl, &om->s[om->first[j]],
						       om->first[j + 1] - om->first[j]);
}

/* Parity node j's answers into res: FS_PARITY_LOST where a delta was not
 * surely taken (logged once per parity node). */
static int ow_fwd_wait(void *ctx, unsigned j, struct cluster_client *cl, int rc)
{
	struct ow_many *om = ctx;
	struct inbound *ib = om->ib;
	struct node *n = ib->node;
	char *err = om->err[j];

	if (!rc)
		rc = cluster_client_wait_parity_update_many(cl, &om->s[om->first[j]],
							    om->first[j + 1] - om->first[j]);
	if (rc && cl && !err[0])
		snprintf(err, sizeof(om->err[j]), "%s", cluster_client_last_error(cl));
	unsigned lost = 0;
	int first = 0;
	for (unsigned x = om->first[j]; x < om->first[j + 1]; x++) {
		int frc = rc ? rc : om->s[x].rc;
		if (!frc) {
			atomic_fetch_add(&n->forwards, 1);
			continue;
		}
		first = first ? first : frc;
		lost++;
		atomic_fetch_add(&n->forward_errors, 1);
		om->res[om->idx[x]].status = FS_PARITY_LOST;
	}
	if (lost)
		log_warn("%s: %u overwrites of owner %" PRIu64 " stored, but node %u "
			 "did not take their parity updates (%s%s%s): the owner "
			 "recomputes those groups", ib->c.peer, lost, ib->req.owner,
			 n->cfg.nodes[j].id, strerror(-first), err[0] ? ": " : "", err);
	return rc;
}

static void ow_fwd_put(void *ctx, unsigned j, struct cluster_client *cl, int rc)
{
	struct ow_many *om = ctx;

	(void)cl;
	fwd_failed(&om->ib->fwd, j, rc);
	fwd_put(&om->ib->fwd, j);
}

static const struct fanout_ops ow_fwd_ops = {
	ow_fwd_get, ow_fwd_send, ow_fwd_wait, ow_fwd_put
};

/* A PAGE_OVERWRITE_MANY request: each entry as a PAGE_OVERWRITE (old page
 * out, new one in), in order; then the deltas, one PARITY_UPDATE_MANY per
 * parity node; then one reply with a status per entry. The request is
 * refused whole when an entry names a parity node that is not in the
 * cluster file, or this node. */
static const void *serve_overwrite_many(struct inbound *ib, const uint8_t *payload,
					int *rc)
{
	struct node *n = ib->node;
	struct frame_hdr *q = &ib->req, *r = &ib->rep;
	struct batch_ow e[FRAME_BATCH_MAX];
	struct batch_entry res[FRAME_BATCH_MAX];
	unsigned pidx[FRAME_BATCH_MAX], cnt = 0;
	const uint8_t *pages;
	const char *why = "";

	*rc = batch_ow_get(payload, q->payload_len, e, &cnt, &pages, &why);
	for (unsigned k = 0; !*rc && k < cnt; k++) {
		const struct cluster_node *pn = config_node_find(&n->cfg, e[k].parity_node);
		if (!pn || e[k].parity_node == n->self) {
			why = pn ? "overwrite-many request: the parity node is this node" :
				   "overwrite-many request: a parity node not in the cluster file";
			*rc = -EPROTO;
		} else {
			pidx[k] = (unsigned)(pn - n->cfg.nodes);
		}
	}
	if (!batch_reply_buf(ib, "overwrite-many", rc, why))
		return NULL;
	if (!ib->om && !(ib->om = malloc(sizeof(*ib->om)))) {
		*rc = -ENOMEM;
		return NULL;
	}
	struct ow_many *om = ib->om;
	uint8_t pkey[FRAME_BATCH_MAX] = { 0 };     /* parity node per entry */
	unsigned go[FRAME_BATCH_MAX], order[FRAME_BATCH_MAX], ng = 0;
	bool busy[CONFIG_MAX_NODES];
	/* the local part; each stored entry's delta goes to its parity node */
	for (unsigned k = 0; k < cnt; k++) {
		struct pagestore_key key = { q->owner, FK_DATA, e[k].key };
		const uint8_t *pg = pages + (size_t)k * PAGESTORE_PAGE;
		int lrc = pagestore_fetch(n->ps, &key, e[k].old_version, om->deltas[k], NULL);
		if (!lrc)
			lrc = pagestore_store(n->ps, &key, e[k].version, pg);
		res[k] = (struct batch_entry){ e[k].key, e[k].version, FK_DATA,
					       status_of(lrc) };
		if (lrc)
			continue;
		xor_into(om->deltas[k], pg, PAGESTORE_PAGE);
		pkey[ng] = (uint8_t)pidx[k];
		go[ng++] = k;
	}
	/* one run per parity node, entries in request order */
	fanout_group(pkey, ng, n->cfg.n_nodes, om->first, order);
	for (unsigned x = 0; x < ng; x++) {
		unsigned k = go[order[x]];
		om->idx[x] = k;
		om->s[x] = (struct cluster_store){ FK_PARITY, e[k].group, e[k].parity_version,
						   om->deltas[k], 0 };
	}
	for (unsigned j = 0; j < n->cfg.n_nodes; j++)
		busy[j] = om->first[j + 1] > om->first[j];
	om->ib = ib;
	om->res = res;
	test_stall_forward(n);
	fanout_run(&ow_fwd_ops, om, busy, n->cfg.n_nodes, NULL);
	for (unsigned k = 0; k < cnt; k++)
		batch_result_put(ib->batch, k, &res[k]);
	r->payload_len = batch_store_reply_len(cnt);
	return ib->batch;
}

/* A PAGE_OVERWRITE request: the page stored at old_version out, the new
 * one in, old ^ new to the parity node, then the reply (Nswap: the node
 * that stores an in-use page forwards the XOR, so that the swapping node
 * spends one round trip). 0, -ESTALE/-ENOENT (nothing stored), or
 * -EREMOTEIO: stored, but the parity node did not surely take the delta
 * (the owner recomputes that parity page).
 *
 * In two halves, so that a connection can have several in flight (see
 * ow_flush): ow_begin does the local part and sends the delta (1), or
 * fails (the reply's rc, its text in ib->rep); ow_end takes the parity
 * node's answer (rc: the wait's) into reply r. */
static int ow_begin(struct inbound *ib, const struct pagestore_key *key,
		    const uint8_t *payload, struct ow_pending *p)
{
	struct node *n = ib->node;
	struct frame_hdr *q = &ib->req, *r = &ib->rep;
	const struct cluster_node *pn = config_node_find(&n->cfg, q->peer_node);

	*p = (struct ow_pending){ q->request_id, q->owner, q->page_id,
				  q->parity_group, q->version, q->kind, 0, 0 };
	if (!pn || q->peer_node == n->self) {
		snprintf(r->text, sizeof(r->text), "parity node %u is %s", q->peer_node,
			 pn ? "this node" : "not in the cluster file");
		return -EPROTO;
	}
	p->pn = (unsigned)(pn - n->cfg.nodes);
	int rc = pagestore_fetch(n->ps, key, q->old_version, ib->page, NULL);
	if (rc)
		return rc;
	rc = pagestore_store(n->ps, key, q->version, payload);
	if (rc)
		return rc;
	xor_into(ib->page, payload, PAGESTORE_PAGE);
	test_stall_forward(n);
	char err[256] = "";
	/* ow_room gave back what this connection held if it had to wait */
	struct cluster_client *cl = fwd_lease(&ib->fwd, p->pn, q->owner, true, &rc, err,
					      sizeof(err));
	if (!cl)
		return ow_end(ib, p, rc, err, r);
	p->gen = ib->fwd.gen[p->pn];
	rc = cluster_client_parity_update_start(cl, q->parity_group,
						q->parity_version, ib->page);
	return rc ? ow_end(ib, p, rc, NULL, r) : 1;
}

/* The second half; err: what failed, when not the forwarding
 * connection's own last error. 0 or -EREMOTEIO. */
static int ow_end(struct inbound *ib, const struct ow_pending *p, int rc,
		  const char *err, struct frame_hdr *r)
{
	struct node *n = ib->node;
	struct cluster_client *cl = fwd_held(&ib->fwd, p->pn);
	char why[256] = "";

	if (err)
		snprintf(why, sizeof(why), "%s", err);
	else if (rc && cl)
		snprintf(why, sizeof(why), "%s", cluster_client_last_error(cl));
	fwd_failed(&ib->fwd, p->pn, rc);
	if (rc) {
		uint32_t pid = n->cfg.nodes[p->pn].id;
		atomic_fetch_add(&n->forward_errors, 1);
		log_warn("%s: overwrite of page %" PRIu64 " of owner %" PRIu64 " stored, "
			 "but node %u did not take its parity update (%s%s%s): the owner "
			 "recomputes parity group %" PRIu64, ib->c.peer, p->page_id,
			 p->owner, pid, strerror(-rc), why[0] ? ": " : "", why,
			 p->group);
		snprintf(r->text, sizeof(r->text), "node %u: %s", pid, strerror(-rc));
		return -EREMOTEIO;
	}
	atomic_fetch_add(&n->forwards, 1);
	return 0;
}

/* One at a time (nothing of this connection's in flight). */
static int serve_overwrite(struct inbound *ib, const struct pagestore_key *key,
			   const uint8_t *payload)
{
	struct ow_pending p;
	int rc = ow_begin(ib, key, payload, &p);
	if (rc == 1)
		rc = ow_end(ib, &p, cluster_client_wait(fwd_held(&ib->fwd, p.pn)), NULL,
			    &ib->rep);
	fwd_put_all(&ib->fwd);
	return rc;
}

static int admit(void *arg, const struct auth_peer *p, const char **why)
{
	struct node *n = arg;

	if (p->node_id == 0)
		return 0; /* a client (nvswapd, tools), not a node */
	switch (membership_check(n->mb, p->node_id, p->incarnation)) {
	case 0:
		return 0;
	case -ESTALE:
		*why = "its incarnation is older than one already seen (a stale process?)";
		return -ESTALE;
	default:
		*why = p->node_id == n->self ? "it claims to be this node" :
		       "its node id is not in the cluster file";
		return -ENOENT;
	}
}

static void reply_init(struct inbound *ib)
{
	struct frame_hdr *q = &ib->req, *r = &ib->rep;

	memset(r, 0, sizeof(*r));
	r->type = q->type;
	r->reply = true;
	r->request_id = q->request_id;
	r->node_id = ib->node->self;
	r->incarnation = ib->node->incarnation;
	r->kind = q->kind;
	r->owner = q->owner;
	r->page_id = q->page_id;
	r->parity_group = q->parity_group;
	r->version = q->version;
}

static uint32_t status_of(int rc)
{
	switch (rc) {
	case 0: return FS_OK;
	case -ESTALE: return FS_STALE;
	case -ENOENT: return FS_NOT_FOUND;
	case -ENOSPC: return FS_NO_SPACE;
	case -EOPNOTSUPP: return FS_UNSUPPORTED;
	case -EPROTO: return FS_BAD_FRAME;
	case -EREMOTEIO: return FS_PARITY_LOST;
	case -EAGAIN: return FS_WOULD_BLOCK;
	case -EDEADLK: return FS_DEADLOCK;
	case -ENOLCK: return FS_NO_LOCKS;
	case -EINPROGRESS: return FS_IN_PROGRESS;
	case -EINVAL: return FS_INVALID;
	default: return FS_INTERNAL;
	}
}

/* Serve one request; fills ib->rep. Returns the payload to send (or NULL),
 * and sets *close_after when the connection must end, *drop when it must
 * end with no reply (the node stops before the request could be served:
 * the sender asks again once the node is back). */
static const void *serve(struct inbound *ib, const uint8_t *payload,
			 bool *close_after, bool *drop)
{
	struct node *n = ib->node;
	struct frame_hdr *q = &ib->req, *r = &ib->rep;
	struct pagestore_key key = { q->owner, q->kind,
				     q->kind == FK_PARITY ? q->parity_group : q->page_id };
	const void *out = NULL;
	int rc = 0;

	reply_init(ib);
	atomic_fetch_add(&n->requests, 1);
	switch (q->type) {
	case FT_HEARTBEAT:
		if (!ib->peer.node_id) {
			rc = -EOPNOTSUPP;
			break;
		}
		atomic_fetch_add(&n->heartbeats_in, 1);
		/* The authenticated identity counts, not the header's. */
		rc = node_heard(n, ib->peer.node_id, ib->peer.incarnation, &q->cap);
		if (rc == -ESTALE || rc == -ENOENT) {
			snprintf(r->text, sizeof(r->text),
				 "node %u has a newer incarnation than this connection's",
				 ib->peer.node_id);
			*close_after = true;
		}
		rc = rc < 0 ? rc : 0;
		break;
	case FT_PAGE_STORE:
	case FT_MIGRATE:
		rc = pagestore_store(n->ps, &key, q->version, payload);
		break;
	case FT_PAGE_FETCH:
		rc = pagestore_fetch(n->ps, &key, q->version, ib->page, &r->version);
		if (!rc) {
			r->payload_len = PAGESTORE_PAGE;
			out = ib->page;
		}
		break;
	case FT_PAGE_DROP:
	case FT_INVALIDATE:
		rc = pagestore_drop(n->ps, &key, q->version);
		break;
	case FT_PARITY_UPDATE:
		key.kind = FK_PARITY;
		key.id = q->parity_group;
		rc = pagestore_xor(n->ps, &key, q->version, payload);
		break;
	case FT_OWNER_RESET: {
		uint64_t k = pagestore_drop_owner(n->ps, q->owner);
		log_info("%s reset owner %" PRIu64 ": %" PRIu64 " pages dropped",
			 ib->c.peer, q->owner, k);
		break;
	}
	case FT_NODE_TABLE: {
		struct frame_capacity cap;
		self_capacity(n, &cap);
		r->n_nodes = membership_snapshot(n->mb, now_ns(), n->incarnation, &cap,
						 r->nodes, FRAME_MAX_NODES);
		break;
	}
	case FT_NODE_STATS:
		out = serve_stats(ib, q->page_id, &rc);
		break;
	case FT_PAGE_FETCH_MANY:
		out = serve_fetch_many(ib, payload, &rc);
		break;
	case FT_PAGE_STORE_MANY:
		out = serve_store_many(ib, payload, false, &rc);
		break;
	case FT_PAGE_OVERWRITE:
		rc = serve_overwrite(ib, &key, payload);
		break;
	case FT_PAGE_OVERWRITE_MANY:
		out = serve_overwrite_many(ib, payload, &rc);
		break;
	case FT_PARITY_UPDATE_MANY:
		out = serve_store_many(ib, payload, true, &rc);
		break;
	case FT_PAGE_DROP_MANY:
		out = serve_drop_many(ib, payload, &rc);
		break;
	case FT_FILE_LOCK: {
		bool had = ib->lk.on;
		rc = lockserve(n->locks, &ib->lk, &q->lk, &r->lk);
		if (!had && ib->lk.on)
			lockserve_watch(ib->c.fd);
		break;
	}
	case FT_FILE_ATTACH: case FT_FILE_OPEN: case FT_FILE_CLOSE:
	case FT_FILE_GETATTR: case FT_FILE_SETSIZE: case FT_FILE_UNLINK:
	case FT_FILE_READ: case FT_FILE_WRITE: case FT_FILE_TRUNC:
	case FT_FILE_WRITEBACK: case FT_FILE_DROP: case FT_FILE_MARK:
	case FT_FILE_SHADOW:
		if (!n->fc) {
			rc = -EOPNOTSUPP;
			snprintf(r->text, sizeof(r->text), "node %u has no file cache "
				 "(start nvcached with --cache-size)", n->self);
		} else if (q->type != FT_FILE_ATTACH && q->fop.digest &&
			   ib->finst != q->fop.digest && ib->finst) {
			rc = -EPROTO;
			snprintf(r->text, sizeof(r->text), "a file request of another "
				 "mount run on this connection");
		} else if (q->type == FT_FILE_READ) {
			if (!ib->finst && (ib->finst = q->fop.digest))
				mount_bind(n, ib);
			rc = fcache_serve_read(n->fc, q, r, &ib->frd);
		} else if (!ib->fbuf && !(ib->fbuf = malloc(FRAME_FILE_MAX_BLOCK))) {
			rc = -ENOMEM;
		} else {
			if (q->type != FT_FILE_ATTACH && !ib->finst &&
			    (ib->finst = q->fop.digest))
				mount_bind(n, ib);
			rc = fcache_serve(n->fc, q, payload, r, ib->fbuf, &out);
			*drop = rc == -ESHUTDOWN;
		}
		break;
	default:
		/* HELLO/CHALLENGE/AUTH after the handshake, UPDATE (the owner's
		 * business, not a server's) */
		rc = -EOPNOTSUPP;
		snprintf(r->text, sizeof(r->text), "%s is not served by nvcached",
			 frame_type_name(q->type));
		break;
	}
	reply_status(r, rc);
	return out;
}

/* A reply's status for rc, and its text. */
/* An error no status names is answered INTERNAL (the peer sees EIO):
 * the node says which, here and in the reply's text, for whoever looks
 * into that EIO. */
static void reply_status(struct frame_hdr *r, int rc)
{
	static struct log_limit internal_log;
	char note[96];

	r->status = status_of(rc);
	if (r->status == FS_INTERNAL && rc != -ESHUTDOWN) {   /* (that one: dropped) */
		if (!r->text[0])
			snprintf(r->text, sizeof(r->text), "%s", strerror(-rc));
		if (log_limit(&internal_log, 10, note, sizeof(note)))
			log_warn("node: a %s request failed (%s); answered INTERNAL%s",
				 frame_type_name(r->type), r->text, note);
	}
	if (rc == -ESTALE && !r->text[0])
		snprintf(r->text, sizeof(r->text), "stale version %" PRIu64, r->version);
	if (r->status == FS_OK)
		r->text[0] = 0;
	if (r->type != FT_NODE_TABLE || r->status != FS_OK)
		r->n_nodes = 0;
}

/* The replies of the overwrites in flight, in order: each waits for its
 * parity node's answer. 0, or the send's error (the connection is done). */
static int ow_flush(struct inbound *ib)
{
	struct node *n = ib->node;
	struct frame_hdr *r = &ib->orep;
	int err = 0;

	for (unsigned k = 0; k < ib->now; k++) {
		const struct ow_pending *p = &ib->ow[k];
		/* its handle failed and was closed (by a later overwrite):
		 * the delta's fate is unknown, and a new handle's reply is
		 * another's */
		struct cluster_client *cl = ib->fwd.gen[p->pn] == p->gen ?
					    fwd_held(&ib->fwd, p->pn) : NULL;
		/* -ECANCELED: no reason to close a newer handle (fwd_failed) */
		int rc = cl ? cluster_client_wait(cl) : -ECANCELED;
		memset(r, 0, sizeof(*r));
		r->type = FT_PAGE_OVERWRITE;
		r->reply = true;
		r->request_id = p->request_id;
		r->node_id = n->self;
		r->incarnation = n->incarnation;
		r->kind = p->kind;
		r->owner = p->owner;
		r->page_id = p->page_id;
		r->parity_group = p->group;
		r->version = p->version;
		rc = ow_end(ib, p, rc, cl ? NULL : "its connection failed earlier", r);
		reply_status(r, rc);
		if (!err)
			err = conn_send(&ib->c, r, NULL);
	}
	ib->now = 0;
	fwd_put_all(&ib->fwd);
	return err;
}

/* Before an overwrite joins the pipeline: a connection with overwrites in
 * flight leases its parity node's handle without waiting, and when none is
 * free it flushes first, giving back all it holds (peerpool.h: a holder
 * never waits on a peer of lower index, so one waiting holds nothing). 0,
 * or ow_flush's error. */
static int ow_room(struct inbound *ib)
{
	struct node *n = ib->node;
	const struct cluster_node *pn = config_node_find(&n->cfg, ib->req.peer_node);
	char err[256];
	int rc;

	if (!ib->now || !pn || ib->req.peer_node == n->self)
		return 0;
	unsigned j = (unsigned)(pn - n->cfg.nodes);
	if (fwd_held(&ib->fwd, j) ||
	    fwd_lease(&ib->fwd, j, ib->req.owner, false, &rc, err, sizeof(err)))
		return 0;
	return ow_flush(ib);
}

/* An overwrite, pipelined: 1 when it is in flight (its reply comes from
 * ow_flush), else 0 with ib->rep its reply (it failed before the parity
 * node was asked: that reply must wait for the ones in flight). */
static int ow_pipe(struct inbound *ib, const uint8_t *payload)
{
	struct frame_hdr *q = &ib->req;
	struct pagestore_key key = { q->owner, q->kind, q->page_id };

	reply_init(ib);
	atomic_fetch_add(&ib->node->requests, 1);
	int rc = ow_begin(ib, &key, payload, &ib->ow[ib->now]);
	if (rc == 1) {
		ib->now++;
		return 1;
	}
	reply_status(&ib->rep, rc);
	return 0;
}

/* More of a request already here (the peer sent a run)? */
static bool input_waiting(const struct inbound *ib)
{
	struct pollfd pf = { .fd = ib->c.fd, .events = POLLIN };
	return poll(&pf, 1, 0) > 0 && (pf.revents & POLLIN);
}

/* Has the peer hung up (its FIN arrived, maybe behind requests not read
 * yet)? Nobody waits for what we would answer then. */
static bool peer_hung_up(const struct inbound *ib)
{
	struct pollfd pf = { .fd = ib->c.fd, .events = POLLRDHUP };
	return poll(&pf, 1, 0) > 0 && (pf.revents & (POLLRDHUP | POLLHUP));
}

static void conn_slot_release(struct node *n, int slot)
{
	pthread_mutex_lock(&n->lock);
	n->slots[slot].fd = -1;
	n->slots[slot].busy = false;
	n->conns_active--;
	pthread_cond_broadcast(&n->cond);
	pthread_mutex_unlock(&n->lock);
}

static void *inbound_main(void *arg)
{
	struct inbound *ib = arg;
	struct node *n = ib->node;
	struct auth_identity me = { n->self, n->incarnation, n->cfg.secret,
				    n->cfg.secret_len };
	const char *why = "";
	int rc;

	conn_set_timeout(&ib->c, NODE_AUTH_TIMEOUT_MS);
	memset(&ib->peer, 0, sizeof(ib->peer));
	rc = auth_server(&ib->c, &me, admit, n, &ib->peer, &why);
	if (rc) {
		atomic_fetch_add(&n->auth_failures, 1);
		/* A peer with the wrong secret retries (10 a second): one
		 * line every 10 s for each kind of refusal; auth_failures
		 * counts them all. */
		const char *reason = why && *why ? why : strerror(-rc);
		uint32_t kind = crc32c(ib->peer.node_id, reason, strlen(reason));
		char note[96];
		if (!node_stopping(n) &&
		    log_limit(&n->auth_log[kind % 16], 10, note, sizeof(note)))
			log_warn("refused peer %s (claims %s %u): %s; connection "
				 "closed%s", ib->c.peer,
				 ib->peer.node_id ? "node" : "client id",
				 ib->peer.node_id, reason, note);
		conn_close_after_error(&ib->c);
		goto out;
	}
	if (ib->peer.node_id)
		node_heard(n, ib->peer.node_id, ib->peer.incarnation, NULL);
	else
		log_info("client connected from %s", ib->c.peer);
	/* Authenticated peers may stay idle; keepalive finds dead ones.
	 * They may send a PAGE_STORE_MANY (the buffer for it is allocated
	 * at the first); before the handshake nobody can make us allocate. */
	conn_set_timeout(&ib->c, 0);
	conn_set_max_payload(&ib->c, FRAME_MAX_CONN_PAYLOAD);
	int one = 1;
	setsockopt(ib->c.fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));

	for (;;) {
		const uint8_t *payload;
		bool close_after = false;
		rc = conn_recv(&ib->c, &ib->req, &payload, &why);
		if (rc == -ECONNRESET || rc == -ETIMEDOUT || (rc && node_stopping(n)))
			break;
		if (rc == -EBADMSG || rc == -EMSGSIZE || rc == -EPROTO) {
			atomic_fetch_add(&n->bad_frames, 1);
			log_warn("bad frame from %s (%s %u): %s; connection closed",
				 ib->c.peer, ib->peer.node_id ? "node" : "client",
				 ib->peer.node_id, why);
			conn_send_error(&ib->c, n->self, FS_BAD_FRAME, why);
			conn_close_after_error(&ib->c);
			break;
		}
		if (rc) {
			log_info("connection from %s: %s", ib->c.peer, strerror(-rc));
			break;
		}
		if (ib->req.type == FT_ERROR) {
			log_warn("peer %s reports an error: %s (%s); connection closed",
				 ib->c.peer, frame_status_name(ib->req.status), ib->req.text);
			break;
		}
		if (ib->req.reply) {
			atomic_fetch_add(&n->bad_frames, 1);
			log_warn("unexpected reply frame from %s; connection closed",
				 ib->c.peer);
			conn_send_error(&ib->c, n->self, FS_BAD_FRAME,
					"a reply where a request was expected");
			break;
		}
		/* Requests left in the socket by a peer that has hung up
		 * (this node stood still: SIGSTOP, a paused VM, and the
		 * sender timed out): it gave up on them and handled their
		 * pages another way. Served now, a store or a parity delta
		 * would undo that; a late delta XORed into a parity page
		 * already right, and the next failure rebuilt wrong bytes. */
		if (peer_hung_up(ib)) {
			log_info("%s hung up with requests not yet served: dropped "
				 "(the sender gave up on them)", ib->c.peer);
			break;
		}
		/* Overwrites go on while more requests wait: their parity
		 * updates overlap; anything else waits for their replies. */
		if (ib->req.type == FT_PAGE_OVERWRITE && ib->req.kind == FK_DATA &&
		    ow_room(ib))
			break;
		if (ib->req.type == FT_PAGE_OVERWRITE && ib->req.kind == FK_DATA &&
		    ow_pipe(ib, payload)) {
			if (ib->now < OW_PIPE && input_waiting(ib))
				continue;
			if (ow_flush(ib))
				break;
			continue;
		}
		if (ib->req.type == FT_PAGE_OVERWRITE && ib->req.kind == FK_DATA) {
			/* failed before its parity node was asked */
			if (ow_flush(ib) || conn_send(&ib->c, &ib->rep, NULL))
				break;
			continue;
		}
		if (ow_flush(ib))
			break;
		bool drop = false;
		const void *out = serve(ib, payload, &close_after, &drop);
		if (drop)
			break;
		if (ib->frd.niov && ib->rep.status == FS_OK)
			rc = conn_sendv(&ib->c, &ib->rep, ib->frd.iov, ib->frd.niov);
		else
			rc = conn_send(&ib->c, &ib->rep, out);
		if (n->fc)
			fcache_read_done(n->fc, &ib->frd);
		if (rc || close_after)
			break;
	}
out:
	/* Leave the slot table before closing: node_stop must never shut
	 * down an fd number that close() has already given back. */
	pthread_mutex_lock(&n->lock);
	n->slots[ib->slot].fd = -1;
	pthread_mutex_unlock(&n->lock);
	conn_close(&ib->c);
	lockserve_end(n->locks, &ib->lk);
	if (ib->finst)
		fcache_mount_conn(n->fc, ib->finst, false);
	free(ib->stats);
	free(ib->batch);
	free(ib->fbuf);
	free(ib->om);
	fwd_put_all(&ib->fwd);
	int slot = ib->slot;
	free(ib);
	conn_slot_release(n, slot);
	return NULL;
}

static void accept_one(struct node *n, int fd)
{
	int slot = -1;
	bool ended = false;
	pthread_t old;

	pthread_mutex_lock(&n->lock);
	if (!n->stopping && n->conns_active < n->max_conns) {
		for (unsigned i = 0; i < n->max_conns; i++) {
			if (!n->slots[i].busy) {
				slot = (int)i;
				break;
			}
		}
	}
	if (slot >= 0) {
		ended = n->slots[slot].thread;
		old = n->slots[slot].t;
		n->slots[slot].fd = fd;
		n->slots[slot].busy = true;
		n->slots[slot].thread = false;
		n->conns_active++;
	}
	pthread_mutex_unlock(&n->lock);
	if (slot < 0) {
		atomic_fetch_add(&n->conns_refused, 1);
		log_warn("too many connections (%u): refusing one", n->max_conns);
		close(fd);
		return;
	}
	/* The slot's previous thread has released it: it is returning. */
	if (ended)
		pthread_join(old, NULL);
	struct inbound *ib = calloc(1, sizeof(*ib));
	pthread_attr_t attr;
	if (!ib)
		goto fail;
	ib->node = n;
	ib->slot = slot;
	/* a lease waits for other leases' batches: a few round trips */
	ib->fwd = (struct fwd_leases){ .pool = n->fwd, .wait_ms = 2 * n->fwd_to.timeout_ms };
	conn_init(&ib->c, fd);
	atomic_fetch_add(&n->conns_total, 1);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, CONN_STACK);
	/* Only this thread (the acceptor) writes a slot's t, and node_stop
	 * reads it after joining the acceptor. */
	pthread_mutex_lock(&n->lock);
	int rc = pthread_create(&n->slots[slot].t, &attr, inbound_main, ib);
	n->slots[slot].thread = rc == 0;
	pthread_mutex_unlock(&n->lock);
	pthread_attr_destroy(&attr);
	if (rc == 0)
		return;
	log_err("cannot start a connection thread: %s", strerror(rc));
fail:
	free(ib);
	close(fd);
	conn_slot_release(n, slot);
}

static void *acceptor_main(void *arg)
{
	struct node *n = arg;

	for (;;) {
		struct pollfd p[2] = {
			{ .fd = n->listen_fd, .events = POLLIN },
			{ .fd = n->stop_pipe[0], .events = POLLIN },
		};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_err("poll on the listening socket: %s", strerror(errno));
			break;
		}
		if (p[1].revents)
			break;
		int fd = accept4(n->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN)
				continue;
			log_warn("accept: %s", strerror(errno));
			if (node_sleep(n, 100))
				break;
			continue;
		}
		accept_one(n, fd);
	}
	return NULL;
}

/* --- start / stop -------------------------------------------------------- */

/* The file cache's dirty marks to this node's shadow, the next node of
 * the cluster file (cluster/fmarks.h), on a handle of the forwarding
 * pool: leased for this one call (the caller holds no other lease). */
static int send_mark(void *arg, const struct frame_fop *f, const void *pl,
		     size_t len, uint32_t *rflags)
{
	struct node *n = arg;
	unsigned shadow = (unsigned)((n->me - n->cfg.nodes) + 1) % n->cfg.n_nodes;
	struct peerpool_lease l = { 0 };
	struct frame_fop rf = { 0 };
	struct iovec iov = { (void *)pl, len };
	char err[256];

	int rc = peerpool_get(n->fwd, shadow, 2000, &l, err, sizeof(err));
	if (rc)
		return rc;
	rc = cluster_client_file_call(l.cl, FT_FILE_MARK, f, &iov, len ? 1 : 0,
				      &rf, NULL, 0);
	peerpool_put(n->fwd, &l, rc == -ECONNRESET || rc == -EPIPE ||
		     rc == -ETIMEDOUT || rc == -ENOTCONN || rc == -EPROTO);
	*rflags = rf.flags;
	return rc;
}

/* fcache_call_fn: one file request to node index idx, over the pool of
 * connections to the other nodes. */
static int send_file(void *arg, uint32_t idx, uint32_t type, const struct frame_fop *f,
		     struct frame_fop *rfp)
{
	struct node *n = arg;
	struct peerpool_lease l = { 0 };
	struct frame_fop rf = { 0 };
	char err[256];

	int rc = peerpool_get(n->fwd, idx, 2000, &l, err, sizeof(err));
	if (rc)
		return rc;
	rc = cluster_client_file_call(l.cl, type, f, NULL, 0, rfp ? rfp : &rf, NULL, 0);
	peerpool_put(n->fwd, &l, rc == -ECONNRESET || rc == -EPIPE ||
		     rc == -ETIMEDOUT || rc == -ENOTCONN || rc == -EPROTO);
	return rc;
}

static int bind_listen(struct node *n)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE };
	struct addrinfo *res;
	char port[8];
	int rc = -EADDRNOTAVAIL;

	snprintf(port, sizeof(port), "%u", n->me->port);
	int g = getaddrinfo(n->me->host, port, &hints, &res);
	if (g) {
		log_err("node %u: cannot resolve %s: %s", n->self, n->me->host,
			gai_strerror(g));
		return -ENOENT;
	}
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int one = 1;
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0) {
			rc = -errno;
			close(fd);
			continue;
		}
		n->listen_fd = fd;
		rc = 0;
		break;
	}
	freeaddrinfo(res);
	if (rc)
		log_err("node %u: cannot listen on %s:%u: %s", n->self, n->me->host,
			n->me->port, strerror(-rc));
	return rc;
}

int node_start(struct node **out, const struct node_opts *o)
{
	struct node *n = calloc(1, sizeof(*n));
	int rc;

	if (!n)
		return -ENOMEM;
	n->cfg = *o->cfg;
	n->self = o->self;
	n->fc = o->fcache;
	n->me = config_node_find(&n->cfg, o->self);
	n->hb_ms = o->heartbeat_ms ? o->heartbeat_ms : NODE_DEFAULT_HEARTBEAT_MS;
	n->timeout_ms = o->timeout_ms ? o->timeout_ms : NODE_DEFAULT_TIMEOUT_MS;
	n->reserve = o->reserve;
	snprintf(n->meminfo, sizeof(n->meminfo), "%s",
		 o->meminfo ? o->meminfo : "/proc/meminfo");
	n->max_conns = o->max_conns ? o->max_conns : NODE_DEFAULT_MAX_CONNS;
	n->peer_conns = o->peer_conns ? o->peer_conns : NODE_DEFAULT_PEER_CONNS;
	const char *stall = getenv("NVCACHED_TEST_STALL_FORWARD");
	unsigned sid, sms, severy;
	if (stall && sscanf(stall, "%u:%u:%u", &sid, &sms, &severy) == 3 &&
	    sid == n->self && severy) {
		n->stall_every = severy;
		n->stall_ms = sms;
		log_warn("test mode: every %u-th overwrite stalls %u ms before its "
			 "parity delta goes on (NVCACHED_TEST_STALL_FORWARD)",
			 n->stall_every, n->stall_ms);
	}
	/* A connection takes a descriptor, and so does each forwarding one:
	 * the usual soft limit of 1024 would refuse before max_conns does
	 * (EMFILE on accept). */
	uint64_t fds = fdlimit_raise();
	uint64_t need = n->max_conns + (uint64_t)n->peer_conns * n->cfg.n_nodes + 64;
	if (fds < need)
		log_warn("open files: the limit is %llu, low for --max-conns %u "
			 "(a connection and each of the %u forwarding ones to each "
			 "node take one): raise it (ulimit -n) or lower --max-conns",
			 (unsigned long long)fds, n->max_conns, n->peer_conns);
	n->listen_fd = -1;
	n->stop_pipe[0] = n->stop_pipe[1] = -1;
	pthread_mutex_init(&n->lock, NULL);
	clock_cond_init(&n->cond);

	if (!n->me) {
		log_err("node %u is not in the cluster file", o->self);
		rc = -EINVAL;
		goto fail;
	}
	if (n->timeout_ms <= 2 * n->hb_ms) {
		log_err("heartbeat timeout %u ms must exceed two heartbeat intervals "
			"(%u ms)", n->timeout_ms, 2 * n->hb_ms);
		rc = -EINVAL;
		goto fail;
	}
	if (!n->cfg.secret_len) {
		log_err("no shared secret loaded");
		rc = -EINVAL;
		goto fail;
	}
	/* The incarnation: start time, so a restarted node is a new one. */
	n->incarnation = clock_wall_ns();

	n->slots = calloc(n->max_conns, sizeof(*n->slots));
	if (!n->slots) {
		rc = -ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < n->max_conns; i++)
		n->slots[i].fd = -1;
	/* a forward's timeout (and its connect's): short, as the owner
	 * waits behind it */
	n->fwd_to = (struct fwd_target){ &n->cfg, n->timeout_ms < 2000 ?
					 (int)n->timeout_ms : 2000 };
	if ((rc = fwd_pool_create(&n->fwd, &n->fwd_to, n->peer_conns))) {
		log_err("%u forwarding connections per node: %s (at most %u)",
			n->peer_conns, strerror(-rc), PEERPOOL_MAX_SIZE);
		goto fail;
	}
	if ((rc = membership_create(&n->mb, &n->cfg, n->self,
				    (uint64_t)n->timeout_ms * 1000000ULL)))
		goto fail;
	if ((rc = locksvc_new(&n->locks, 0)))
		goto fail;
	if (n->fc)
		locksvc_grace(n->locks, fcache_grace_end(n->fc));
	if (n->fc && n->cfg.n_nodes > 1)
		fcache_set_shadow(n->fc, (uint32_t)(n->me - n->cfg.nodes), send_mark, n);
	if (n->fc)
		fcache_set_peers(n->fc, n->cfg.n_nodes, send_file, n);
	if (o->tier) {
		n->tier_bytes = o->tier->pages * PAGESTORE_PAGE;
		n->mem_offer = n->tier_bytes;   /* until meminfo is read */
		rc = pagestore_open_tiered(&n->ps, 1 << 16, o->tier);
		if (rc == 0)
			log_info("pages kept in a tiered store: %" PRIu64 " MiB, "
				 "MRAM %" PRIu64 " MiB, DRAM %" PRIu64 " MiB%s%s, "
				 "policy %s", n->tier_bytes >> 20,
				 (o->tier->mram_pages * PAGESTORE_PAGE) >> 20,
				 (o->tier->dram_pages * PAGESTORE_PAGE) >> 20,
				 o->tier->flash_path ? ", flash " : "",
				 o->tier->flash_path ? o->tier->flash_path : "",
				 o->tier->policy);
	} else {
		rc = pagestore_open(&n->ps, 0, 1 << 16);
	}
	if (rc)
		goto fail;
	update_capacity(n);
	if (o->listen_fd >= 0)
		n->listen_fd = o->listen_fd;
	else if ((rc = bind_listen(n)))
		goto fail;
	if (pipe2(n->stop_pipe, O_CLOEXEC) < 0) {
		rc = -errno;
		goto fail;
	}
	if ((rc = start_thread(&n->acceptor, SMALL_STACK, acceptor_main, n)))
		goto fail;
	n->acceptor_started = true;
	if ((rc = start_thread(&n->monitor, SMALL_STACK, monitor_main, n)))
		goto fail;
	n->monitor_started = true;
	for (unsigned i = 0; i < n->cfg.n_nodes; i++) {
		const struct cluster_node *cn = &n->cfg.nodes[i];
		if (cn->id == n->self)
			continue;
		struct peer_link *l = &n->links[n->n_links++];
		l->node = n;
		l->cn = cn;
		l->c = calloc(1, sizeof(*l->c));
		if (!l->c) {
			rc = -ENOMEM;
			goto fail;
		}
		l->c->fd = -1;
		if ((rc = start_thread(&l->thread, CONN_STACK, link_main, l)))
			goto fail;
		l->started = true;
	}
	char sz[32];
	log_info("node %u listening on %s:%u (incarnation %" PRIu64 ", %u peers, "
		 "heartbeat %u ms, timeout %u ms, offering %s)", n->self, n->me->host,
		 n->me->port, n->incarnation, n->n_links, n->hb_ms, n->timeout_ms,
		 opts_format_size(n->offer, sz, sizeof(sz)));
	*out = n;
	return 0;
fail:
	/* the file cache's thread may be sending through n already */
	fcache_stop(n->fc);
	node_stop(n);
	return rc;
}

void node_stop(struct node *n)
{
	if (!n)
		return;
	pthread_mutex_lock(&n->lock);
	n->stopping = true;
	pthread_cond_broadcast(&n->cond);
	/* Wake every thread blocked in recv/send on a connection. */
	for (unsigned i = 0; n->slots && i < n->max_conns; i++)
		if (n->slots[i].fd >= 0)
			shutdown(n->slots[i].fd, SHUT_RDWR);
	for (unsigned i = 0; i < n->n_links; i++)
		if (n->links[i].c && n->links[i].c->fd >= 0)
			shutdown(n->links[i].c->fd, SHUT_RDWR);
	pthread_mutex_unlock(&n->lock);
	if (n->locks)
		locksvc_stop(n->locks);   /* F_SETLKW waits answer now */
	if (n->stop_pipe[1] >= 0 && write(n->stop_pipe[1], "x", 1) < 0)
		log_debug("stop pipe: %s", strerror(errno));
	if (n->acceptor_started)
		pthread_join(n->acceptor, NULL);
	if (n->monitor_started)
		pthread_join(n->monitor, NULL);
	for (unsigned i = 0; i < n->n_links; i++) {
		if (n->links[i].started)
			pthread_join(n->links[i].thread, NULL);
		free(n->links[i].c);
	}
	/* The acceptor is joined: no slot changes hands any more. Join
	 * every connection thread, the running ones once woken above. */
	for (unsigned i = 0; n->slots && i < n->max_conns; i++)
		if (n->slots[i].thread)
			pthread_join(n->slots[i].t, NULL);
	if (n->listen_fd >= 0)
		close(n->listen_fd);
	if (n->stop_pipe[0] >= 0) {
		close(n->stop_pipe[0]);
		close(n->stop_pipe[1]);
	}
	peerpool_destroy(n->fwd);
	pagestore_close(n->ps);
	locksvc_free(n->locks);
	membership_destroy(n->mb);
	free(n->slots);
	pthread_cond_destroy(&n->cond);
	pthread_mutex_destroy(&n->lock);
	memset(n->cfg.secret, 0, sizeof(n->cfg.secret));
	free(n);
}

/* --- control socket ------------------------------------------------------ */

static ssize_t ctl_peers(struct node *n, char *out, size_t outlen)
{
	static _Thread_local struct frame_node tab[FRAME_MAX_NODES];
	struct frame_capacity cap;
	struct outbuf ob = outbuf_of(out, outlen), *o = &ob;

	self_capacity(n, &cap);
	unsigned k = membership_snapshot(n->mb, now_ns(), n->incarnation, &cap, tab,
					 FRAME_MAX_NODES);
	outbuf_printf(o, "%-6s %-8s %-20s %10s %10s %10s %s\n", "node", "state", "incarnation",
		      "offer_MiB", "used_MiB", "free_MiB", "heard_ms_ago");
	for (unsigned i = 0; i < k; i++) {
		const struct frame_node *e = &tab[i];
		uint64_t fr = e->cap.offered > e->cap.used ? e->cap.offered - e->cap.used : 0;
		outbuf_printf(o, "%-6u %-8s %-20" PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64
			      " %" PRIu64 "\n", e->node_id, membership_state_name(e->state),
			      e->incarnation, e->cap.offered >> 20, e->cap.used >> 20, fr >> 20,
			      e->age_ms);
	}
	return outbuf_done(o);
}

static ssize_t ctl_stats(struct node *n, char *out, size_t outlen)
{
	struct pagestore_stats st;
	struct frame_capacity cap;
	unsigned alive, dead, unknown;
	struct outbuf ob = outbuf_of(out, outlen), *o = &ob;

	pagestore_get_stats(n->ps, &st);
	self_capacity(n, &cap);
	membership_counts(n->mb, &alive, &dead, &unknown);
	pthread_mutex_lock(&n->lock);
	uint64_t total = n->mem_total, override = n->limit_override;
	uint64_t shrink_cap = n->shrink_cap;
	bool shrunk = n->shrunk;
	unsigned active = n->conns_active;
	pthread_mutex_unlock(&n->lock);

	outbuf_printf(o, "node: %u\n", n->self);
	outbuf_printf(o, "incarnation: %" PRIu64 "\n", n->incarnation);
	outbuf_printf(o, "listen: %s:%u\n", n->me->host, n->me->port);
	outbuf_printf(o, "heartbeat_ms: %u\ntimeout_ms: %u\n", n->hb_ms, n->timeout_ms);
	outbuf_printf(o, "nodes_alive: %u\nnodes_dead: %u\nnodes_unknown: %u\n", alive, dead, unknown);
	for (unsigned i = 0; i < n->n_links; i++) {
		struct member m;
		if (membership_get(n->mb, n->links[i].cn->id, &m))
			continue;
		uint64_t age = m.last_heard_ns && now_ns() > m.last_heard_ns ?
			       (now_ns() - m.last_heard_ns) / 1000000 : 0;
		outbuf_printf(o, "node.%u: %s incarnation=%" PRIu64 " heard_ms_ago=%" PRIu64
			      " offered=%" PRIu64 " used=%" PRIu64 " deaths=%" PRIu64
			      " rejoins=%" PRIu64 "\n", m.id, membership_state_name(m.state),
			      m.incarnation, age, m.cap.offered, m.cap.used, m.deaths, m.rejoins);
	}
	outbuf_printf(o, "mem_total_bytes: %" PRIu64 "\n", total);
	outbuf_printf(o, "mem_available_bytes: %" PRIu64 "\n", cap.mem_available);
	outbuf_printf(o, "offered_bytes: %" PRIu64 "\n", cap.offered);
	outbuf_printf(o, "limit_override_bytes: %" PRIu64 "\n", override);
	if (shrunk)
		outbuf_printf(o, "shrink_cap_bytes: %" PRIu64 "\n", shrink_cap);
	else
		outbuf_printf(o, "shrink_cap_bytes: none\n");
	outbuf_printf(o, "used_bytes: %" PRIu64 "\n", cap.used);
	/* what this daemon really occupies, pages and all (4.1 KiB per page
	 * held, plus its buffers): to compare with the offer */
	uint64_t rss = 0;
	if (memwatch_rss(&rss) == 0)
		outbuf_printf(o, "rss_bytes: %" PRIu64 "\n", rss);
	outbuf_printf(o, "over_offer_bytes: %" PRIu64 "\n",
		      cap.used > cap.offered ? cap.used - cap.offered : 0);
	outbuf_printf(o, "pages: %" PRIu64 "\npages_data: %" PRIu64 "\npages_parity: %" PRIu64 "\n",
		      st.pages, st.data_pages, st.parity_pages);
	outbuf_printf(o, "owners: %" PRIu64 "\n", st.owners);
	outbuf_printf(o, "page_stores: %" PRIu64 "\npage_fetches: %" PRIu64 "\npage_drops: %" PRIu64
		      "\nparity_updates: %" PRIu64 "\n", st.stores, st.fetches, st.drops, st.xors);
	outbuf_printf(o, "stale_refused: %" PRIu64 "\nnospace_refused: %" PRIu64
		      "\nnot_found: %" PRIu64 "\n", st.stale_refused, st.nospace_refused,
		      st.not_found);
	outbuf_printf(o, "connections_active: %u\n", active);
	outbuf_printf(o, "connections_total: %" PRIu64 "\n", (uint64_t)atomic_load(&n->conns_total));
	outbuf_printf(o, "connections_refused: %" PRIu64 "\n", (uint64_t)atomic_load(&n->conns_refused));
	outbuf_printf(o, "auth_failures: %" PRIu64 "\n", (uint64_t)atomic_load(&n->auth_failures));
	outbuf_printf(o, "bad_frames: %" PRIu64 "\n", (uint64_t)atomic_load(&n->bad_frames));
	outbuf_printf(o, "requests: %" PRIu64 "\n", (uint64_t)atomic_load(&n->requests));
	/* PAGE_OVERWRITE: parity updates sent on the owners' behalf */
	outbuf_printf(o, "parity_forwards: %" PRIu64 "\nparity_forward_errors: %" PRIu64 "\n",
		      (uint64_t)atomic_load(&n->forwards),
		      (uint64_t)atomic_load(&n->forward_errors));
	fwd_stats_print(n->fwd, n->peer_conns, o);
	outbuf_printf(o, "heartbeats_in: %" PRIu64 "\nheartbeats_out: %" PRIu64 "\n",
		      (uint64_t)atomic_load(&n->heartbeats_in),
		      (uint64_t)atomic_load(&n->heartbeats_out));
	/* the file locks this node is home of (locksvc.h) */
	struct locksvc_stats ls;
	locksvc_stats(n->locks, &ls);
	outbuf_printf(o, "file_locks: %zu\nfile_lock_waits: %zu\nfile_lock_files: %zu\n"
		      "file_lock_sessions: %zu\nfile_lock_grants: %" PRIu64
		      "\nfile_lock_deadlocks: %" PRIu64 "\nfile_locks_released: %" PRIu64 "\n",
		      ls.tab.locks, ls.tab.waits, ls.tab.files, ls.sessions,
		      ls.granted_waits, ls.deadlocks, ls.released_on_departure);
	outbuf_printf(o, "store: %s\n", n->tier_bytes ? "tiered" : "dram");
	if (n->fc && o->len < o->cap)
		o->len += fcache_stats(n->fc, o->p + o->len, o->cap - o->len);
	if (o->len < o->cap) {
		ssize_t k = pagestore_tier_stats(n->ps, o->p + o->len, o->cap - o->len);
		if (k > 0)
			o->len += (size_t)k;
	}
	return outbuf_done(o);
}

/* "shrink SIZE" (on: cap the offer at SIZE, 0 included) and "grow" /
 * "shrink none" (off). The node only lowers its offer: the pages over it
 * stay readable and writable here until their owners (nvswapd) see
 * used > offered in the node table and migrate them away. */
static ssize_t ctl_shrink(struct node *n, bool on, uint64_t v, char *out,
			  size_t outlen)
{
	struct pagestore_stats st;
	char a[32], b[32];

	pthread_mutex_lock(&n->lock);
	n->shrunk = on;
	n->shrink_cap = on ? v : 0;
	n->shrink_pending = on;
	pthread_mutex_unlock(&n->lock);
	update_capacity(n);
	pagestore_get_stats(n->ps, &st);
	uint64_t used = st.pages * PAGESTORE_PAGE;
	pthread_mutex_lock(&n->lock);
	uint64_t offer = n->offer;
	pthread_mutex_unlock(&n->lock);
	opts_format_size(used, b, sizeof(b));
	if (!on) {
		opts_format_size(offer, a, sizeof(a));
		log_info("shrink cap lifted by the operator: offering %s again "
			 "(%s held)", a, b);
		return snprintf(out, outlen, "grow: offering %s (%s held)\n", a, b);
	}
	opts_format_size(v, a, sizeof(a));
	log_info("shrink to %s by the operator: %s held, %" PRIu64 " pages to "
		 "migrate away", a, b, used > offer ?
		 (used - offer + PAGESTORE_PAGE - 1) / PAGESTORE_PAGE : 0);
	return snprintf(out, outlen, "shrink: offer capped at %s (%s held, %" PRIu64
			" pages over it; their owners migrate them away)\n", a, b,
			used > offer ? (used - offer + PAGESTORE_PAGE - 1) /
			PAGESTORE_PAGE : 0);
}

ssize_t node_ctl(void *arg, const char *cmd, char *out, size_t outlen)
{
	struct node *n = arg;

	if (!strcmp(cmd, "stats") || !strcmp(cmd, "status"))
		return ctl_stats(n, out, outlen);
	if (!strcmp(cmd, "peers"))
		return ctl_peers(n, out, outlen);
	if (!strncmp(cmd, "limit ", 6)) {
		uint64_t v;
		if (opts_parse_size(cmd + 6, &v))
			return -EINVAL;
		pthread_mutex_lock(&n->lock);
		n->limit_override = v;
		pthread_mutex_unlock(&n->lock);
		update_capacity(n);
		log_info("capacity limit set to %" PRIu64 " bytes by the operator", v);
		return snprintf(out, outlen, "limit: %" PRIu64 "\n", v);
	}
	if (!strcmp(cmd, "grow") || !strcmp(cmd, "shrink none"))
		return ctl_shrink(n, false, 0, out, outlen);
	if (!strncmp(cmd, "shrink ", 7)) {
		uint64_t v;
		if (opts_parse_size(cmd + 7, &v))
			return -EINVAL;
		return ctl_shrink(n, true, v, out, outlen);
	}
	return -ENOENT;
}
