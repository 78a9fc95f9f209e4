/* node.c - the nodes as we see them: liveness (the node table, down
 * times, restarts seen by incarnation), their capacity, and the pool of
 * client connections to each. */
#include "cluster/remote/rb.h"

uint64_t rb_rng_next(void)
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
bool rb_is_transport_error(int rc)
{
	return rc == -ECONNRESET || rc == -EPIPE || rc == -ETIMEDOUT ||
	       rc == -ENOTCONN || rc == -EPROTO;
}

bool rb_usable(struct remote_backend *rb, unsigned i)
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
bool rb_copy_valid(struct remote_backend *rb, const struct slot *s, unsigned r)
{
	return s->n[r] != NO_NODE &&
	       (uint8_t)atomic_load(&rb->nodes[s->n[r]].gen) == s->g[r];
}

static void mark_down(struct remote_backend *rb, unsigned i, int rc)
{
	struct rnode *nd = &rb->nodes[i];
	uint64_t was = atomic_exchange(&nd->down_until_ns, clock_now_ns() + DOWN_NS);

	atomic_fetch_add(&nd->errors, 1);
	if (was >= clock_now_ns())
		return;
	/* A node that stays away is retried every second: one warning a
	 * minute, with the count of the others, not one a retry. */
	char note[96];
	if (log_limit(&nd->down_log, 60, note, sizeof(note)))
		log_warn("remote swap: node %u unreachable (%s); using the "
			 "others%s", nd->id, strerror(-rc), note);
	(void)rb;
}

/* A locked connection to node i, connected; NULL with *rc on failure. */
/* A connection to node i, waiting for one to be free unless !wait (then
 * NULL with *rc -EBUSY when all are taken). */
struct rconn *rb_conn_take(struct remote_backend *rb, unsigned i, int *rc, bool wait)
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

struct rconn *rb_conn_get(struct remote_backend *rb, unsigned i, int *rc)
{
	return rb_conn_take(rb, i, rc, true);
}

/* After an operation on c: drop a broken connection. */
void rb_conn_put(struct remote_backend *rb, unsigned i, struct rconn *c, int rc)
{
	if (rb_is_transport_error(rc)) {
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

int rb_refresh_from(struct remote_backend *rb, unsigned i)
{
	static _Thread_local struct frame_node tab[FRAME_MAX_NODES];
	unsigned n = 0;
	int rc;
	struct rconn *c = rb_conn_get(rb, i, &rc);

	if (!c)
		return rc;
	rc = cluster_client_node_table(c->cl, tab, FRAME_MAX_NODES, &n);
	rb_conn_put(rb, i, c, rc);
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
			/* back from a declared death, same process: a
			 * partition healed; its stale copies are dropped */
			if (alive && atomic_exchange(&nd->declared_dead, 0) &&
			    atomic_load(&nd->incarnation) == atomic_load(&nd->dead_inc))
				atomic_store(&nd->stale, 1);
			int was = atomic_exchange(&nd->alive, alive);
			if (!was && alive) {
				log_info("remote swap: node %u is alive (per node %u)",
					 nd->id, rb->nodes[i].id);
				atomic_store(&rb->widen_needed, 1);
			}
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
int rb_refresh(struct remote_backend *rb)
{
	static atomic_uint start;
	unsigned s = atomic_fetch_add(&start, 1);
	int rc = -EHOSTUNREACH;

	for (unsigned k = 0; k < rb->nn; k++) {
		unsigned i = (s + k) % rb->nn;
		if (!rb->nodes[i].target ||
		    clock_now_ns() < atomic_load(&rb->nodes[i].down_until_ns))
			continue;
		if ((rc = rb_refresh_from(rb, i)) == 0)
			return 0;
	}
	return rc;
}

/* Nodes that did not answer at open: once they are alive, the pages of
 * an earlier device with our owner id go, and they may take ours. */
void rb_reset_late_nodes(struct remote_backend *rb)
{
	for (unsigned i = 0; i < rb->nn; i++) {
		struct rnode *nd = &rb->nodes[i];
		if (!nd->target || atomic_load(&nd->reset_done) || !atomic_load(&nd->alive) ||
		    clock_now_ns() < atomic_load(&nd->down_until_ns))
			continue;
		int e;
		struct rconn *c = rb_conn_get(rb, i, &e);
		if (!c)
			continue;
		e = cluster_client_owner_reset(c->cl);
		rb_conn_put(rb, i, c, e);
		if (!e) {
			atomic_store(&nd->reset_done, 1);
			log_info("remote swap: node %u answers now: it takes pages from here on",
				 nd->id);
		}
	}
}
