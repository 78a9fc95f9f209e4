/* copies.c - one slot's read and write with redundancy none and mirror:
 * the copies stored at once, failover on read and re-mirroring on the
 * spot, the spill file when no node has room. */
#include "cluster/remote/rb.h"

/* Mirror: store both copies at once (one round trip of wall time, not
 * two). Each copy goes where it lives if that node is usable, else to a new
 * node picked as in rb_place(). done[r] tells which copies are stored; the
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
		if (rb_copy_valid(rb, s, r) && rb_usable(rb, s->n[r]) &&
		    !rb_over_offer(rb, s->n[r])) {
			tgt[r] = s->n[r];
			exclude[tgt[r]] = true;
		}
	}
	for (unsigned r = 0; r < 2; r++) {
		if (tgt[r] >= 0)
			continue;
		tgt[r] = rb_pick(rb, exclude);
		if (tgt[r] < 0)
			return;
		exclude[tgt[r]] = true;
	}
	/* Take the two connections in node order: no two threads can then
	 * each hold one and wait for the other's. */
	unsigned lo = tgt[0] < tgt[1] ? 0 : 1, hi = 1 - lo;
	int e;
	if (!(c[lo] = rb_conn_get(rb, (unsigned)tgt[lo], &e)))
		return;
	if (!(c[hi] = rb_conn_get(rb, (unsigned)tgt[hi], &e))) {
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
		rb_conn_put(rb, (unsigned)tgt[r], c[r], rc[r]);
		if (rc[r])
			continue;
		struct rnode *nd = &rb->nodes[tgt[r]];
		atomic_fetch_add(&nd->stores, 1);
		if (s->n[r] != tgt[r] || !rb_copy_valid(rb, s, r)) {
			/* a new placement: the old copy was on a node now
			 * down or restarted (nothing there to drop), or on
			 * one over its offer (dropped: the write moved it) */
			if (s->n[r] != NO_NODE && rb_copy_valid(rb, s, r) &&
			    rb_usable(rb, s->n[r]))
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
			(void)rb_node_op(rb, (unsigned)drop[r], OP_DROP, i, v, NULL);
}

/* Write one whole slot (see struct rb_mode). */
int rb_copies_slot_write(struct remote_backend *rb, uint64_t i, const void *page)
{
	struct slot *s = &rb->slots[i];
	uint64_t v = s->version + 1;
	bool was_mapped = rb_slot_mapped(s);
	bool done[2] = { false, false };
	int rc = 0;

	if (rb->copies == 2)
		mirror_parallel(rb, i, v, page, done);
	for (unsigned r = 0; r < rb->copies; r++) {
		if (done[r])
			continue;
		int old = rb_copy_valid(rb, s, r) ? s->n[r] : -1;
		/* An in-use slot is overwritten where it lives (Nswap),
		 * unless that node is giving memory back. */
		if (old >= 0 && rb_usable(rb, (unsigned)old) && !rb_over_offer(rb, (unsigned)old) &&
		    rb_node_op(rb, (unsigned)old, OP_STORE, i, v, (void *)page) == 0)
			continue;
		if (s->n[r] != NO_NODE)
			atomic_fetch_sub(&rb->nodes[s->n[r]].held, 1);
		uint8_t oldgen = s->g[r];
		s->n[r] = NO_NODE;
		int prc = rb_place(rb, i, r, v, (void *)page);
		if (prc && old >= 0 && rb_usable(rb, (unsigned)old) &&
		    rb_node_op(rb, (unsigned)old, OP_STORE, i, v, (void *)page) == 0) {
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
		if (old >= 0 && old != s->n[r] && rb_usable(rb, (unsigned)old))
			(void)rb_node_op(rb, (unsigned)old, OP_DROP, i, v, NULL);
	}
	if (rc == -ENOSPC && rb->spill_fd >= 0) {
		/* No node has room: the page goes to the local spill file
		 * (Nswap swaps to disk only then), whole, and its remote
		 * copies written above are dropped. */
		rb_slot_unmap_remote(rb, i);
		rc = rb_spill_io(rb, true, i, (void *)page);
		if (!rc) {
			if (!s->spilled)
				atomic_fetch_add(&rb->spilled_now, 1);
			s->spilled = 1;
			atomic_fetch_add(&rb->spills, 1);
		}
	} else if (!rc) {
		rb_spill_forget(rb, i);
	}
	s->version = v;
	return rb_slot_written(rb, s, was_mapped, rc);
}

/* Read one mapped slot, not spilled (see struct rb_mode). */
int rb_copies_slot_read(struct remote_backend *rb, uint64_t i, void *page)
{
	struct slot *s = &rb->slots[i];
	int got = -1;
	bool lost[2] = { false, false };
	bool answered[2] = { false, false };   /* failed, but the node replied */

	for (unsigned r = 0; r < rb->copies; r++) {
		if (!rb_copy_valid(rb, s, r)) {
			lost[r] = true;
			continue;
		}
		if (got >= 0) {
			/* a copy on a node now down or dead is lost too */
			if (!rb_usable(rb, s->n[r]))
				lost[r] = true;
			continue;
		}
		int rc = rb_usable(rb, s->n[r]) ?
			 rb_node_op(rb, s->n[r], OP_FETCH, i, s->version, page) : -EHOSTDOWN;
		if (!rc) {
			got = (int)r;
		} else {
			lost[r] = true;
			answered[r] = rc != -EHOSTDOWN && rc != -ENOENT &&
				      !rb_is_transport_error(rc);
			if (r + 1 < rb->copies)
				atomic_fetch_add(&rb->failovers, 1);
			log_debug("remote swap: slot %" PRIu64 " copy on node %u: %s",
				  i, rb->nodes[s->n[r]].id, strerror(-rc));
		}
	}
	if (got < 0) {
		rb_lost_read(rb, i, s->version, "has no copy that could be read");
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
			if (answered[r] && rb_usable(rb, s->n[r]) &&
			    rb_node_op(rb, s->n[r], OP_DROP, i, s->version, NULL) == 0)
				atomic_fetch_add(&rb->nodes[s->n[r]].free_pages, 1);
		}
		s->n[r] = NO_NODE;
		if (rb_place(rb, i, r, s->version, page) == 0)
			atomic_fetch_add(&rb->remirrors, 1);
	}
	return 0;
}
