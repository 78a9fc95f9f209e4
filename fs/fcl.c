/* fcl.c - the connections to the cluster's file cache managers; see fcl.h. */
#include "fs/fcl.h"

#include "cluster/conn.h"
#include "cluster/client.h"
#include "cluster/config.h"
#include "cluster/fcache.h"
#include "common/clock.h"
#include "common/log.h"
#include "fs/stripe.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define POOL 4
#define CALL_TIMEOUT_MS 30000
#define FCL_WAIT_STEP_MS 200

struct fcl_node {
	uint32_t id;
	pthread_mutex_t lk;
	pthread_cond_t cv;
	struct cluster_client *idle[POOL];
	unsigned nidle, nopen;
	uint64_t inc;          /* the node's incarnation we talk to */
	bool reclaiming;       /* a thread counts our opens there again */
	bool lost;             /* hung up: connect again (fcl_watch) */
	struct log_limit down_log;
	/* since when no call reaches it (0: one did last); whether the
	 * wait for it, and the giving up, were logged (fcl_wait_up) */
	_Atomic uint64_t down_since;
	atomic_bool told_wait, gave_up;
	atomic_uint_fast64_t back_ns;   /* when an outage last ended */
};

struct fcl_reclaim {
	struct cluster_client *cl;
	uint64_t inst;   /* the mount's (struct fcl) */
	int rc;
};

struct fcl {
	struct cluster_config cfg;
	uint32_t self;
	/* this mount's run, random: in every file request but ATTACH
	 * (digest), so that a home releases the opens of a mount whose
	 * connections all ended (it died) (cluster/fcache.h) */
	uint64_t inst;
	atomic_uint_fast64_t tokens;   /* fcl_open_token's last */
	uint64_t unit;
	uint32_t n;
	fcl_restart_fn restart_fn;
	void *restart_arg;
	struct fcl_node nodes[CONFIG_MAX_NODES];
	struct fcl_drops *drops;   /* fcl_drops_start's */
};

uint32_t fcl_nodes(const struct fcl *c) { return c->n; }
const struct cluster_config *fcl_config(const struct fcl *c) { return &c->cfg; }
uint32_t fcl_block(const struct fcl *c) { (void)c; return 64 * 1024; }

uint32_t fcl_owner(const struct fcl *c, uint64_t gid, uint64_t blk, uint64_t unit)
{
	struct stripe_map m;

	if (stripe_map_init(&m, unit, c->n, (uint32_t)(gid % c->n), 0,
			    fcl_block(c)) < 0)
		return 0;
	return stripe_owner(&m, blk * fcl_block(c));
}

uint64_t fcl_auto_unit(const struct fcl *c, uint64_t size)
{
	struct stripe_map m;

	if (!size || stripe_map_init(&m, 0, c->n, 0, size, fcl_block(c)) < 0)
		return FCL_UNIT_EMPTY;
	/* (a file of over n TiB: the largest unit a home keeps) */
	uint64_t max = (uint64_t)FCACHE_UNIT_MAX * fcl_block(c);
	return m.unit > max ? max : m.unit;
}

uint32_t fcl_node_id(const struct fcl *c, uint32_t idx) { return c->nodes[idx].id; }
uint64_t fcl_unit(const struct fcl *c) { return c->unit; }

uint32_t fcl_shadow(const struct fcl *c, uint32_t idx)
{
	return (idx + 1) % c->n;
}

uint32_t fcl_home(const struct fcl *c, uint64_t gid)
{
	return (uint32_t)(gid % c->n);
}

static bool transport_error(int rc)
{
	return rc == -ECONNRESET || rc == -EPIPE || rc == -ETIMEDOUT ||
	       rc == -ENOTCONN || rc == -EPROTO || rc == -ECONNREFUSED;
}

static void conn_put(struct fcl_node *nd, struct cluster_client *cl, bool broken);

/* A new connection to node idx found a new incarnation: the node
 * restarted, and what it kept in DRAM for this mount (the open counts of
 * the files it is home of) is counted again, on cl, before any other
 * thread talks to it (conn_get waits meanwhile). 0, or -EIO when cl
 * broke midway (the next connection does it again). */
static int restarted(struct fcl *c, uint32_t idx, struct cluster_client *cl,
		     uint64_t was)
{
	struct fcl_node *nd = &c->nodes[idx];
	struct fcl_reclaim r = { .cl = cl, .inst = c->inst };

	log_info("cluster: node %u restarted; counting this mount's open files "
		 "there again", nd->id);
	if (c->restart_fn)
		c->restart_fn(c->restart_arg, idx, &r);
	pthread_mutex_lock(&nd->lk);
	nd->reclaiming = false;
	if (transport_error(r.rc))
		nd->inc = was;
	pthread_cond_broadcast(&nd->cv);
	pthread_mutex_unlock(&nd->lk);
	return transport_error(r.rc) ? -EIO : 0;
}

/* A connection to nd opened, or a call on one answered: it is up (an
 * outage's start forgotten, its end logged if requests waited for it). */
static void node_up(struct fcl_node *nd)
{
	if (!atomic_load(&nd->down_since) && !atomic_load(&nd->gave_up) &&
	    !atomic_load(&nd->told_wait))
		return;
	uint64_t down = atomic_exchange(&nd->down_since, 0);
	bool told = atomic_exchange(&nd->told_wait, false);
	atomic_store(&nd->back_ns, clock_now_ns());
	if (atomic_exchange(&nd->gave_up, false) || (down && told))
		log_info("cluster: node %u answers again, after %.1f s: requests "
			 "to it go on", nd->id, down ? (double)(clock_now_ns() - down) / 1e9 : 0.0);
}

static int conn_get(struct fcl *c, struct fcl_node *nd, struct cluster_client **out)
{
	char err[256];

	pthread_mutex_lock(&nd->lk);
	while (nd->reclaiming || (!nd->nidle && nd->nopen == POOL))
		pthread_cond_wait(&nd->cv, &nd->lk);
	if (nd->nidle) {
		*out = nd->idle[--nd->nidle];
		pthread_mutex_unlock(&nd->lk);
		return 0;
	}
	nd->nopen++;
	pthread_mutex_unlock(&nd->lk);
	int rc = cluster_client_open_node(out, &c->cfg, nd->id, 0, 0,
					  CALL_TIMEOUT_MS, err, sizeof(err));
	if (rc) {
		uint64_t none = 0;
		atomic_compare_exchange_strong(&nd->down_since, &none, clock_now_ns());
		char note[96];
		if (log_limit(&nd->down_log, 10, note, sizeof(note)))
			log_warn("cluster: node %u: %s%s", nd->id, err, note);
		pthread_mutex_lock(&nd->lk);
		nd->nopen--;
		pthread_cond_signal(&nd->cv);
		pthread_mutex_unlock(&nd->lk);
		return rc;
	}
	uint64_t inc = cluster_client_incarnation(*out);
	node_up(nd);
	pthread_mutex_lock(&nd->lk);
	uint64_t was = nd->inc;
	bool again = was && was != inc;
	nd->inc = inc;
	nd->lost = false;
	nd->reclaiming = again;
	pthread_mutex_unlock(&nd->lk);
	if (again && restarted(c, (uint32_t)(nd - c->nodes), *out, was) < 0) {
		conn_put(nd, *out, true);
		return -EIO;
	}
	return 0;
}

static void conn_put(struct fcl_node *nd, struct cluster_client *cl, bool broken)
{
	if (!broken)
		node_up(nd);
	pthread_mutex_lock(&nd->lk);
	if (broken) {
		cluster_client_close(cl);
		nd->nopen--;
	} else {
		nd->idle[nd->nidle++] = cl;
	}
	pthread_cond_signal(&nd->cv);
	pthread_mutex_unlock(&nd->lk);
}


/* fcl_call, and *down: the node could not be reached (no connection,
 * or it broke twice), as opposed to an answer. */
static int call_one(struct fcl *c, uint32_t idx, uint32_t type,
		    const struct frame_fop *f, const struct iovec *pl, unsigned npl,
		    struct frame_fop *rf, void *buf, size_t buflen, bool *down)
{
	struct fcl_node *nd = &c->nodes[idx];
	struct cluster_client *cl;
	int rc;

	*down = true;
	/* a connection the node closed (a restart) fails at once: one retry
	 * on a fresh one */
	struct frame_fop fi = *f;
	if (type != FT_FILE_ATTACH)
		fi.digest = c->inst;
	for (int tries = 0; tries < 2; tries++) {
		rc = conn_get(c, nd, &cl);
		if (rc)
			return -EIO;
		rc = cluster_client_file_call(cl, type, &fi, pl, npl, rf, buf, buflen);
		bool broken = transport_error(rc);
		if (broken)
			log_warn("cluster: node %u: %s: %s", nd->id,
				 frame_type_name(type), cluster_client_last_error(cl)[0] ?
				 cluster_client_last_error(cl) : strerror(-rc));
		conn_put(nd, cl, broken);
		if (!broken) {
			*down = false;
			return rc;
		}
	}
	return -EIO;
}

uint32_t fcl_nodes_down(struct fcl *c)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < c->n; i++) {
		struct fcl_node *nd = &c->nodes[i];
		pthread_mutex_lock(&nd->lk);
		bool lost = nd->lost;
		pthread_mutex_unlock(&nd->lk);
		if (lost || atomic_load(&nd->down_since) || atomic_load(&nd->gave_up))
			n++;
	}
	return n;
}

uint64_t fcl_open_token(struct fcl *c)
{
	return atomic_fetch_add(&c->tokens, 1) + 1;
}

bool fcl_wait_up(struct fcl *c, uint32_t idx, uint32_t wait_ms, uint64_t *since)
{
	if (idx >= c->n)
		return false;
	struct fcl_node *nd = &c->nodes[idx];
	uint64_t down = 0, now = clock_now_ns();
	/* a request that failed as the node came back (another thread's
	 * call found it up meanwhile): tried again at once, nothing said */
	uint64_t back = atomic_load(&nd->back_ns);
	if (!*since && back && now - back < 500000000ull) {
		*since = now;
		return true;
	}
	/* down from here on, if no failed connect said so first (a
	 * connection that broke): its end is then logged too */
	if (atomic_compare_exchange_strong(&nd->down_since, &down, now))
		down = now;   /* else down holds the earlier start */
	if (!*since)
		*since = down && down < now ? down : now;
	if (now - *since >= (uint64_t)wait_ms * 1000000ull) {
		if (!atomic_exchange(&nd->gave_up, true))
			log_err("cluster: node %u down for %.1f s (down_wait): the "
				"requests that need it fail (EIO) until it answers again",
				nd->id, (double)(now - *since) / 1e9);
		return false;
	}
	if (!atomic_exchange(&nd->told_wait, true))
		log_warn("cluster: node %u is down: the requests that need it wait "
			 "for it, %.0f s at most (down_wait)", nd->id, wait_ms / 1e3);
	usleep(FCL_WAIT_STEP_MS * 1000);
	return true;
}

int fcl_call(struct fcl *c, uint32_t idx, uint32_t type,
	     const struct frame_fop *f, const struct iovec *pl, unsigned npl,
	     struct frame_fop *rf, void *buf, size_t buflen)
{
	bool down;
	return call_one(c, idx, type, f, pl, npl, rf, buf, buflen, &down);
}

int fcl_call_down(struct fcl *c, uint32_t idx, uint32_t type,
		  const struct frame_fop *f, const struct iovec *pl, unsigned npl,
		  struct frame_fop *rf, bool *down)
{
	return call_one(c, idx, type, f, pl, npl, rf, NULL, 0, down);
}

/* fcl_call_many's rounds: every node with requests to do gets up to a
 * pipeline's depth of them sent on its connection, then the replies are
 * taken node by node, so the nodes work at once. Connections are taken in
 * node order (a thread holds at most one of each pool, and threads never
 * wait for each other's in a cycle). A transport error leaves the node's
 * requests not answered at rc 1. */
static void call_round(struct fcl *c, struct fcl_req *r, unsigned n, bool *more)
{
	struct cluster_client *cl[CONFIG_MAX_NODES] = { 0 };
	bool broken[CONFIG_MAX_NODES] = { 0 };
	unsigned *order = calloc(n ? n : 1, sizeof(*order)), no = 0;

	*more = false;
	if (!order)
		return;
	/* this round's requests, node by node, into order; then sent, those
	 * sent kept in order (in place: never more than were picked). Their
	 * WRITEs but each node's last say more follow (FRAME_FILE_RUN: the
	 * replies come together) */
	unsigned np = 0, left[CONFIG_MAX_NODES] = { 0 };
	for (uint32_t i = 0; i < c->n; i++)
		for (unsigned k = 0; k < n; k++) {
			if (r[k].idx != i || r[k].rc != 1)
				continue;
			if (left[i] == CLUSTER_CLIENT_MAX_INFLIGHT) {
				*more = true;
				continue;
			}
			left[i]++;
			order[np++] = k;
		}
	for (unsigned j = 0; j < np; j++) {
		unsigned k = order[j];
		uint32_t i = r[k].idx;
		struct frame_fop f = r[k].f;
		bool follows = --left[i] != 0;
		if (follows && r[k].type == FT_FILE_WRITE)
			f.flags |= FRAME_FILE_RUN;
		if (broken[i])
			continue;
		if (!cl[i] && conn_get(c, &c->nodes[i], &cl[i])) {
			r[k].rc = -EIO;
			r[k].down = true;
			continue;
		}
		if (cluster_client_file_start(cl[i], r[k].type, &f, r[k].pl,
					      r[k].npl, follows)) {
			broken[i] = true;
			continue;
		}
		order[no++] = k;
	}
	for (unsigned j = 0; j < no; j++) {
		struct fcl_req *q = &r[order[j]];
		if (broken[q->idx])
			continue;
		int rc = cluster_client_file_wait(cl[q->idx], &q->rf, q->buf, q->buflen);
		if (transport_error(rc))
			broken[q->idx] = true;
		else
			q->rc = rc;
	}
	for (uint32_t i = 0; i < c->n; i++)
		if (cl[i])
			conn_put(&c->nodes[i], cl[i], broken[i]);
	free(order);
}

void fcl_call_many(struct fcl *c, struct fcl_req *r, unsigned n)
{
	bool more = true;

	for (unsigned k = 0; k < n; k++) {
		r[k].rc = r[k].idx < c->n ? 1 : -EINVAL;
		r[k].down = false;
		if (r[k].type != FT_FILE_ATTACH)
			r[k].f.digest = c->inst;
	}
	while (more)
		call_round(c, r, n, &more);
	/* what a broken connection left: one at a time, reconnecting */
	for (unsigned k = 0; k < n; k++)
		if (r[k].rc == 1)
			r[k].rc = call_one(c, r[k].idx, r[k].type, &r[k].f, r[k].pl,
					   r[k].npl, &r[k].rf, r[k].buf, r[k].buflen,
					   &r[k].down);
}

void fcl_on_restart(struct fcl *c, fcl_restart_fn fn, void *arg)
{
	c->restart_fn = fn;
	c->restart_arg = arg;
}

int fcl_reclaim_call(struct fcl_reclaim *r, uint32_t type,
		     const struct frame_fop *f, const struct iovec *pl,
		     unsigned npl, struct frame_fop *rf)
{
	if (transport_error(r->rc))
		return r->rc;
	struct frame_fop fi = *f;
	fi.digest = r->inst;
	int rc = cluster_client_file_call(r->cl, type, &fi, pl, npl, rf, NULL, 0);
	if (transport_error(rc))
		r->rc = rc;
	return rc;
}

void fcl_watch(struct fcl *c)
{
	for (uint32_t i = 0; i < c->n; i++) {
		struct fcl_node *nd = &c->nodes[i];
		struct cluster_client *gone[POOL];
		unsigned ng = 0;
		pthread_mutex_lock(&nd->lk);
		for (unsigned k = 0; k < nd->nidle;) {
			if (cluster_client_hung_up(nd->idle[k])) {
				gone[ng++] = nd->idle[k];
				nd->idle[k] = nd->idle[--nd->nidle];
				nd->nopen--;
			} else {
				k++;
			}
		}
		if (ng) {
			nd->lost = true;
			pthread_cond_broadcast(&nd->cv);
		}
		bool again = nd->lost;
		pthread_mutex_unlock(&nd->lk);
		for (unsigned k = 0; k < ng; k++)
			cluster_client_close(gone[k]);
		struct cluster_client *cl;
		/* a new connection finds the new incarnation (conn_get) */
		if (again && conn_get(c, nd, &cl) == 0)
			conn_put(nd, cl, false);
	}
}

int fcl_call_all(struct fcl *c, uint32_t type, const struct frame_fop *f)
{
	struct fcl_req r[CONFIG_MAX_NODES];
	int first = 0;

	for (uint32_t i = 0; i < c->n; i++)
		r[i] = (struct fcl_req){ .idx = i, .type = type, .f = *f };
	fcl_call_many(c, r, c->n);
	for (uint32_t i = 0; i < c->n && !first; i++)
		first = r[i].rc;
	return first;
}

/* ATTACH at node i: the digest and the backing directory's identity. */
static int attach(struct fcl *c, uint32_t i, const struct fcl_opts *o)
{
	struct fcl_node *nd = &c->nodes[i];
	struct cluster_client *cl;
	struct fcache_ident id;
	char err[256];

	int rc = fcache_ident(AT_FDCWD, o->backing, 0, &id);
	if (rc) {
		log_err("backing dir %s: no file handle (%s): a cluster mount names "
			"files by handle; not mounting", o->backing, strerror(-rc));
		return rc;
	}
	rc = cluster_client_open_node(&cl, &c->cfg, nd->id, 0, 0, 5000, err,
				      sizeof(err));
	if (rc) {
		log_err("cluster: node %u unreachable or refusing us: %s; not "
			"mounting", nd->id, err);
		return rc;
	}
	struct frame_fop f = { .obj = id.ino, .len = (uint32_t)strlen(o->backing),
			       .base_len = id.len, .handle_type = id.type,
			       .digest = config_digest(&c->cfg), .blk = o->stripe_unit,
			       .flags = o->replicas == 2 ? FRAME_FILE_REPLICAS2 : 0 };
	struct iovec iov[2] = { { (void *)o->backing, f.len }, { id.handle, id.len } };
	rc = cluster_client_file_call(cl, FT_FILE_ATTACH, &f, iov, 2, NULL, NULL, 0);
	if (rc) {
		const char *why = cluster_client_last_error(cl);
		/* a refusal's reason, without its status's name ("stale
		 * version: node 1 serves ...") */
		const char *st = frame_status_name(FS_STALE);
		size_t sl = strlen(st);
		if (!strncmp(why, st, sl) && !strncmp(why + sl, ": ", 2))
			why += sl + 2;
		log_err("cluster: node %u refuses the mount: %s; not mounting", nd->id,
			why[0] ? why : strerror(-rc));
		cluster_client_close(cl);
		return rc;
	}
	/* 5 s to refuse a mount quickly; in the pool, a call's time as on
	 * every other connection (a write held in a full cache, an fsync'ed
	 * write-back take longer than 5 s) */
	cluster_client_set_timeout(cl, CALL_TIMEOUT_MS);
	nd->idle[nd->nidle++] = cl;
	nd->nopen = 1;
	nd->inc = cluster_client_incarnation(cl);
	return 0;
}

int fcl_open(struct fcl **out, const struct fcl_opts *o)
{
	struct fcl *c = calloc(1, sizeof(*c));
	char err[512];
	int rc;

	if (!c)
		return -ENOMEM;
	rc = config_load(o->cluster, &c->cfg, err, sizeof(err));
	if (rc) {
		log_err("cluster file: %s; not mounting", err);
		free(c);
		return rc;
	}
	conn_set_congestion(c->cfg.tcp_congestion);
	if (!config_node_find(&c->cfg, o->node)) {
		log_err("cluster file %s: node %u is not in it; not mounting",
			o->cluster, o->node);
		free(c);
		return -ENOENT;
	}
	while (!c->inst && getrandom(&c->inst, sizeof(c->inst), 0) != (ssize_t)sizeof(c->inst))
		c->inst = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ o->node;
	c->self = o->node;
	c->unit = o->stripe_unit;
	c->n = c->cfg.n_nodes;
	if (o->replicas == 2 && c->n < 2) {
		log_err("cluster file %s: replicas=2 needs two nodes or more; not "
			"mounting", o->cluster);
		free(c);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < c->n; i++) {
		c->nodes[i].id = c->cfg.nodes[i].id;
		pthread_mutex_init(&c->nodes[i].lk, NULL);
		pthread_cond_init(&c->nodes[i].cv, NULL);
	}
	for (uint32_t i = 0; i < c->n; i++) {
		rc = attach(c, i, o);
		if (rc) {
			fcl_close(c);
			return rc;
		}
	}
	log_info("cluster: %u nodes attached (this is node %u), %u KiB blocks",
		 c->n, c->self, fcl_block(c) >> 10);
	*out = c;
	return 0;
}

void fcl_close(struct fcl *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; i < c->n; i++) {
		struct fcl_node *nd = &c->nodes[i];
		for (unsigned k = 0; k < nd->nidle; k++)
			cluster_client_close(nd->idle[k]);
		pthread_mutex_destroy(&nd->lk);
		pthread_cond_destroy(&nd->cv);
	}
	free(c);
}

/* ---- drops: a WATCH outstanding at every node ---- */

struct fcl_watcher {
	struct fcl *c;
	uint32_t idx;
	pthread_t th;
	bool started;
	struct cluster_client *cl;   /* under drops->mx for the stop */
};

struct fcl_drops {
	fcl_drop_fn fn;
	void *arg;
	pthread_mutex_t mx;
	bool stop;
	struct fcl_watcher w[CONFIG_MAX_NODES];
};

static bool drops_stopping(struct fcl_drops *d)
{
	pthread_mutex_lock(&d->mx);
	bool s = d->stop;
	pthread_mutex_unlock(&d->mx);
	return s;
}

static void *watcher_main(void *arg)
{
	struct fcl_watcher *w = arg;
	struct fcl *c = w->c;
	struct fcl_drops *d = c->drops;
	uint64_t acked = 0, gids[FRAME_WATCH_MAX];   /* the reply's payload */
	char err[256];

	while (!drops_stopping(d)) {
		struct cluster_client *cl = NULL;
		if (cluster_client_open_node(&cl, &c->cfg, c->nodes[w->idx].id, 0, 0,
					     2000, err, sizeof(err)) != 0) {
			usleep(500000);
			continue;
		}
		/* a WATCH is held a few seconds (fcache_inval.c) */
		cluster_client_set_timeout(cl, CALL_TIMEOUT_MS);
		pthread_mutex_lock(&d->mx);
		w->cl = d->stop ? NULL : cl;
		pthread_mutex_unlock(&d->mx);
		int rc = 0;
		while (w->cl && !rc) {
			struct frame_fop f = { .gen = acked, .digest = c->inst }, rf = { 0 };
			rc = cluster_client_file_call(cl, FT_FILE_WATCH, &f, NULL, 0, &rf,
						      gids, sizeof(gids));
			if (rc)
				break;
			unsigned n = rf.len / 8;
			if (n)
				d->fn(d->arg, gids, n);
			acked = rf.gen;
			if (drops_stopping(d))
				break;
		}
		pthread_mutex_lock(&d->mx);
		w->cl = NULL;
		pthread_mutex_unlock(&d->mx);
		cluster_client_close(cl);
		if (rc && !drops_stopping(d))
			usleep(500000);   /* a node that went: again soon */
	}
	return NULL;
}

int fcl_drops_start(struct fcl *c, fcl_drop_fn fn, void *arg)
{
	struct fcl_drops *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	d->fn = fn;
	d->arg = arg;
	pthread_mutex_init(&d->mx, NULL);
	c->drops = d;
	for (uint32_t i = 0; i < c->n; i++) {
		d->w[i] = (struct fcl_watcher){ .c = c, .idx = i };
		int r = pthread_create(&d->w[i].th, NULL, watcher_main, &d->w[i]);
		if (r) {
			fcl_drops_stop(c);
			return -r;
		}
		d->w[i].started = true;
	}
	return 0;
}

void fcl_drops_stop(struct fcl *c)
{
	struct fcl_drops *d = c->drops;

	if (!d)
		return;
	pthread_mutex_lock(&d->mx);
	d->stop = true;
	for (uint32_t i = 0; i < c->n; i++)
		if (d->w[i].cl)
			cluster_client_shutdown(d->w[i].cl);
	pthread_mutex_unlock(&d->mx);
	for (uint32_t i = 0; i < c->n; i++)
		if (d->w[i].started)
			pthread_join(d->w[i].th, NULL);
	pthread_mutex_destroy(&d->mx);
	c->drops = NULL;
	free(d);
}
