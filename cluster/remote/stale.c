/* stale.c - a node back from a partition: declared dead, then answering
 * again with the same incarnation (it was stopped or cut off, not
 * restarted), it still holds every copy it had. Those the slot map
 * moved elsewhere meanwhile (recovery, re-mirroring, rewrites) are stale
 * and only take its memory; they are dropped here. Safely: a data key
 * goes only while its slot's stripe is held and no copy of the slot is
 * mapped there, a parity key only while its group's lock is held and the
 * group's parity page is not there; the copies still mapped there stay
 * (they are current: nothing of ours was written there meanwhile). */
#include "cluster/remote/rb.h"

/* Drop reqs[0..n) on the node; counts what was there. */
static uint64_t drop_batch(struct remote_backend *rb, struct store_req *st, unsigned n)
{
	uint64_t dropped = 0;

	if (!n)
		return 0;
	rb_node_batch(rb, BO_DROP, st, n);
	for (unsigned k = 0; k < n; k++)
		dropped += st[k].rc == 0;
	return dropped;
}

/* Our data pages on node j that no slot maps there, FRAME_BATCH_MAX
 * slots at a time under their stripes. */
static uint64_t stale_data(struct remote_backend *rb, unsigned j)
{
	uint64_t slots[FRAME_BATCH_MAX], dropped = 0;
	struct store_req st[FRAME_BATCH_MAX];
	uint16_t order[FRAME_BATCH_MAX];

	for (uint64_t i0 = 0; i0 < rb->nslots && !rb_stopping(rb) &&
	     rb_usable(rb, j); i0 += FRAME_BATCH_MAX) {
		unsigned n = rb->nslots - i0 < FRAME_BATCH_MAX ?
			     (unsigned)(rb->nslots - i0) : FRAME_BATCH_MAX, nd = 0;
		for (unsigned k = 0; k < n; k++)
			slots[k] = i0 + k;
		unsigned u = rb_stripes_lock(rb, slots, n, order);
		for (unsigned k = 0; k < n; k++) {
			const struct slot *s = &rb->slots[i0 + k];
			if (s->n[0] != j && s->n[1] != j)
				st[nd++] = (struct store_req){ .slot = i0 + k,
					.version = UINT64_MAX, .node = (uint8_t)j,
					.kind = FK_DATA };
		}
		dropped += drop_batch(rb, st, nd);
		rb_stripes_unlock(rb, order, u);
	}
	return dropped;
}

/* Parity pages on node j of groups whose parity page is elsewhere (or
 * that are free: their last key), one group lock stripe at a time. */
static uint64_t stale_parity(struct remote_backend *rb, unsigned j)
{
	struct store_req st[FRAME_BATCH_MAX];
	uint64_t dropped = 0;
	uint32_t size = parity_table_size(&rb->pt);

	for (unsigned x = 0; x < GSTRIPES && x < size && !rb_stopping(rb); x++) {
		unsigned nd = 0;
		pthread_mutex_lock(&rb->glocks[x]);
		for (uint32_t gid = x; gid < size; gid += GSTRIPES) {
			const struct parity_group *g = parity_group_at(&rb->pt, gid);
			if (!g->pkey || (g->state != PG_FREE && g->pn == j))
				continue;
			st[nd++] = (struct store_req){ .slot = g->pkey,
				.version = UINT64_MAX, .node = (uint8_t)j, .kind = FK_PARITY };
			if (nd == FRAME_BATCH_MAX) {
				dropped += drop_batch(rb, st, nd);
				nd = 0;
			}
		}
		dropped += drop_batch(rb, st, nd);
		pthread_mutex_unlock(&rb->glocks[x]);
	}
	return dropped;
}

/* The refresher's turn: every node back from a partition has its stale
 * copies dropped (see above), once it is usable again. */
void rb_stale_drop(struct remote_backend *rb)
{
	for (unsigned j = 0; j < rb->nn; j++) {
		struct rnode *nd = &rb->nodes[j];
		if (!atomic_load(&nd->stale) || !rb_usable(rb, j))
			continue;
		atomic_store(&nd->stale, 0);
		uint64_t t0 = clock_now_ns();
		uint64_t d = stale_data(rb, j), p = stale_parity(rb, j);
		atomic_fetch_add(&rb->stale_dropped, d + p);
		log_info("remote swap: node %u is back with the same incarnation "
			 "(a partition, not a restart): %" PRIu64 " stale data pages "
			 "and %" PRIu64 " stale parity pages of ours dropped there in "
			 "%" PRIu64 " ms; the %" PRId64 " still mapped there stay",
			 nd->id, d, p, (clock_now_ns() - t0) / 1000000,
			 (int64_t)atomic_load(&nd->held));
	}
}
