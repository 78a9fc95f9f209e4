/* pslot.c - one slot's read and write with parity: overwrites where the
 * page lives (the node forwards old ^ new to the parity page), new pages
 * into open groups, lost pages rebuilt from their group and re-homed. */
#include "cluster/remote/rb.h"

/* Slot s, member idx of group g, now lives on node n, stored there under
 * its generation gen: the slot map, the group and the placement counters
 * say so (its old node, if any, holds one page less of ours). Caller
 * holds the slot's stripe and the group's lock. */
void rb_pslot_moved(struct remote_backend *rb, struct slot *s,
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
	rb_group_exclude(rb, g, exclude);
	for (unsigned tries = 0; tries < rb->nn; tries++) {
		int n = rb_pick(rb, exclude);
		if (n < 0)
			break;
		if (rb_node_op(rb, (unsigned)n, OP_STORE, i, s->version, (void *)page) == 0) {
			rb_pslot_moved(rb, s, g, idx, (unsigned)n,
				       (uint8_t)atomic_load(&rb->nodes[n].gen));
			pthread_mutex_unlock(rb_glock(rb, gid));
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
	if (!rb_hold_reserve(rb, i)) {
		pthread_mutex_unlock(rb_glock(rb, gid));
		atomic_fetch_add(&rb->short_kept, 1);
		rb_short_log(rb);
		return 0;
	}
	if (s->n[0] != NO_NODE)
		atomic_fetch_sub(&rb->nodes[s->n[0]].held, 1);
	s->n[0] = NO_NODE;
	rb_group_remove(rb, gid, (unsigned)idx, page);
	pthread_mutex_unlock(rb_glock(rb, gid));
	if (rb_group_add(rb, i, s->version, page, -1) == 0) {
		rb_hold_unreserve(rb, i);
		atomic_fetch_add(&rb->rehomes, 1);
	} else {
		(void)rb_hold_put(rb, i, page);
		rb_short_log(rb);
	}
	return 0;
}

/* Read slot i (mapped, not spilled); a page whose node is lost is rebuilt
 * from its group and stored again on a node outside the group. Caller
 * holds the stripe. */
int rb_pslot_read(struct remote_backend *rb, uint64_t i, void *page)
{
	struct slot *s = &rb->slots[i];

	if (rb_copy_valid(rb, s, 0) && rb_usable(rb, s->n[0])) {
		int rc = rb_node_op(rb, s->n[0], OP_FETCH, i, s->version, page);
		if (rc == 0)
			return 0;
		/* The node has the page but could not read it (its flash
		 * failed): drop it there, the rebuilt page goes elsewhere. */
		if (rc != -ENOENT && !rb_is_transport_error(rc) &&
		    rb_node_op(rb, s->n[0], OP_DROP, i, s->version, NULL) == 0)
			atomic_fetch_add(&rb->nodes[s->n[0]].free_pages, 1);
	}
	uint64_t gid = rb->slot_grp[i] - 1;
	struct parity_group *g = parity_group_at(&rb->pt, gid);
	pthread_mutex_lock(rb_glock(rb, gid));
	int idx = parity_member_find(g, i);
	if (idx < 0 || rb_group_reconstruct(rb, g, i, page)) {
		pthread_mutex_unlock(rb_glock(rb, gid));
		rb_lost_read(rb, i, s->version, "is lost and could not be rebuilt");
		return -EIO;
	}
	return pslot_rehome(rb, i, gid, idx, page);
}

/* Take mapped slot i out of its group and off its node; `known`: its
 * contents if the caller has them. Caller holds the stripe. */
void rb_pslot_unmap(struct remote_backend *rb, uint64_t i)
{
	struct slot *s = &rb->slots[i];
	uint8_t old[PAGE];
	uint64_t gid = rb->slot_grp[i] - 1;
	struct parity_group *g = parity_group_at(&rb->pt, gid);

	pthread_mutex_lock(rb_glock(rb, gid));
	int idx = parity_member_find(g, i);
	bool on_node = rb_copy_valid(rb, s, 0) && rb_usable(rb, s->n[0]);
	bool have = (on_node && rb_node_op(rb, s->n[0], OP_FETCH, i, s->version, old) == 0) ||
		    (idx >= 0 && rb_group_reconstruct(rb, g, i, old) == 0);
	if (idx >= 0)
		rb_group_remove(rb, gid, (unsigned)idx, have ? old : NULL);
	pthread_mutex_unlock(rb_glock(rb, gid));
	if (s->n[0] != NO_NODE) {
		atomic_fetch_sub(&rb->nodes[s->n[0]].held, 1);
		if (on_node && rb_node_op(rb, s->n[0], OP_DROP, i, UINT64_MAX, NULL) == 0)
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
	struct rconn *c = rb_conn_get(rb, j, &rf);

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
	rb_conn_put(rb, j, c, rb_is_transport_error(rf) ? rf : rs);
	return rf ? rf : rs;
}

/* On node j, slot i from version old_v to v (contents page), the node
 * sending old ^ new to group g's parity node before it answers (see
 * cluster_client_page_overwrite for the returns). Any failure but
 * -EREMOTEIO leaves the caller to pslot_write's fallback, which is right
 * whatever the node did (see node_fetch_store). Caller holds the group's
 * lock. */
/* Node j's answer rc to an overwrite of slot i (group g): counted, and
 * logged when the parity update did not surely happen. A transport error
 * leaves it unknown whether the node stored the page and forwarded the
 * delta to the parity node: g's parity page is then taken for lost, so
 * that nothing rebuilds a page from it (it would XOR in a delta the
 * members do not show); the slot leaves the group without its old
 * contents (pslot_unmap, group_remove), which recomputes the parity from
 * the members that stay. Caller holds the group's lock. */
void rb_overwrite_count(struct remote_backend *rb, unsigned j, uint64_t i,
			struct parity_group *g, int rc,
			const struct cluster_client *cl)
{
	struct rnode *nd = &rb->nodes[j];

	if (rb_is_transport_error(rc)) {
		g->parity_lost = 1;
		atomic_fetch_add(&rb->overwrites_unsure, 1);
	}
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
		(void)rb_group_parity_rebuild(rb, g);
}

static int node_overwrite(struct remote_backend *rb, unsigned j, uint64_t i,
			  uint64_t v, uint64_t old_v, struct parity_group *g,
			  const void *page)
{
	int rc;
	struct rconn *c = rb_conn_get(rb, j, &rc);

	if (!c)
		return rc;
	rc = cluster_client_page_overwrite(c->cl, i, v, old_v, rb->nodes[g->pn].id,
					   g->pkey, g->pver + 1, page);
	rb_overwrite_count(rb, j, i, g, rc, c->cl);
	rb_conn_put(rb, j, c, rc);
	return rc;
}

/* A write of slot i (on no node, in no group) that no node took (group_add
 * gave rc): into the hold when there is a spill file, so that the write
 * succeeds while the disk has room, and the refresher places it later;
 * else rc, counted for the short-of-room warning. Caller holds the
 * stripe. */
static int pslot_spill(struct remote_backend *rb, uint64_t i, const void *page, int rc)
{
	if (rb->spill_fd < 0 || !rb_hold_reserve(rb, i)) {
		atomic_fetch_add(&rb->short_writes, 1);
		rb_short_log(rb);
		return rc;
	}
	rc = rb_hold_put(rb, i, page);
	rb_short_log(rb);
	return rc;
}

/* Write slot i. An in-use slot is overwritten where it lives and old^new
 * reaches its group's parity before we return; a new slot (or one whose
 * node is lost) joins an open group. Caller holds the stripe. */
int rb_pslot_write(struct remote_backend *rb, uint64_t i, const void *page)
{
	struct slot *s = &rb->slots[i];
	uint64_t v = s->version + 1;
	bool was_mapped = rb_slot_mapped(s);
	uint8_t old[PAGE];
	int rc;

	if (s->spilled) {
		/* Held in our memory (no node had room for it): placed now
		 * if a node takes it, else the held page takes the write (a
		 * newer write always wins; the slot never reads older data). */
		rc = rb_group_add(rb, i, v, page, -1);
		s->version = v;
		if (rc == 0) {
			rb_hold_forget(rb, i);
			atomic_fetch_add(&rb->hold_placed, 1);
		} else if ((rc = rb_hold_io(rb, true, i, (void *)page))) {
			atomic_fetch_add(&rb->write_errors, 1);
		}
		return rc;
	}
	if (was_mapped) {
		uint64_t gid = rb->slot_grp[i] - 1;
		struct parity_group *g = parity_group_at(&rb->pt, gid);
		pthread_mutex_lock(rb_glock(rb, gid));
		int idx = parity_member_find(g, i);
		bool there = idx >= 0 && rb_copy_valid(rb, s, 0) && rb_usable(rb, s->n[0]);
		if (there && rb_parity_ok(rb, g)) {
			/* the node forwards old ^ new to the parity node */
			rc = node_overwrite(rb, s->n[0], i, v, s->version, g, page);
			if (rc == 0 || rc == -EREMOTEIO) {
				overwrite_apply(rb, g, idx, s, v, rc);
				pthread_mutex_unlock(rb_glock(rb, gid));
				return 0;
			}
		} else if (there &&
			   node_fetch_store(rb, s->n[0], i, s->version, old, v, page) == 0) {
			/* an open group (its parity is our buffer), or its
			 * parity page lost: we apply old ^ new ourselves */
			g->m[idx].version = v;
			xor_into(old, page, PAGE);      /* old ^ new */
			rb_group_apply(rb, g, old);
			s->version = v;
			pthread_mutex_unlock(rb_glock(rb, gid));
			return 0;
		}
		pthread_mutex_unlock(rb_glock(rb, gid));
		/* Its node is lost: out of the group (contents rebuilt to
		 * XOR them out), then in again as a new page. */
		rb_pslot_unmap(rb, i);
	}
	rc = rb_group_add(rb, i, v, page, -1);
	s->version = v;
	if (rc)
		rc = pslot_spill(rb, i, page, rc);
	return rb_slot_written(rb, s, was_mapped, rc);
}
