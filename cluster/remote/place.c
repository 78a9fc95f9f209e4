/* place.c - where a new page goes: nodes with room, not giving memory
 * back, by the power of two choices; a slot's copies placed and dropped. */
#include "cluster/remote/rb.h"

/* Does node i hold more than it offers (it is shrinking)? New pages and
 * rewrites then go elsewhere, and the migration pass moves ours off it. */
bool rb_over_offer(struct remote_backend *rb, unsigned i)
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
bool rb_pickable(struct remote_backend *rb, unsigned i)
{
	return rb_usable(rb, i) && !rb_over_offer(rb, i) &&
	       atomic_load(&rb->nodes[i].free_pages) > 0;
}

/* How many nodes not in exclude[] rb_pick() chooses from. */
unsigned rb_pick_count(struct remote_backend *rb, const bool *exclude)
{
	unsigned nc = 0;

	for (unsigned i = 0; i < rb->nn; i++)
		nc += !exclude[i] && rb_pickable(rb, i);
	return nc;
}

/* Power of two choices among usable nodes with room, not in exclude[]. */
int rb_pick(struct remote_backend *rb, const bool *exclude)
{
	unsigned cand[CONFIG_MAX_NODES], nc = 0;

	for (unsigned i = 0; i < rb->nn; i++)
		if (!exclude[i] && rb_pickable(rb, i))
			cand[nc++] = i;
	if (!nc)
		return -1;
	if (nc == 1)
		return (int)cand[0];
	unsigned a = cand[rb_rng_next() % nc];
	unsigned b = cand[rb_rng_next() % (nc - 1)];
	if (b == a)
		b = cand[nc - 1];
	return better(rb, a, b) ? (int)a : (int)b;
}

/* Store a new copy r of slot i somewhere other than the other copy and
 * node `avoid` (-1: none). Caller holds the slot's stripe. */
int rb_place_avoid(struct remote_backend *rb, uint64_t i, unsigned r,
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
		int idx = rb_pick(rb, exclude);
		if (idx < 0)
			break;
		rc = rb_node_op(rb, (unsigned)idx, OP_STORE, i, version, page);
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

int rb_place(struct remote_backend *rb, uint64_t i, unsigned r,
	     uint64_t version, void *page)
{
	return rb_place_avoid(rb, i, r, version, page, -1);
}

/* Forget the slot's copies on the nodes (dropped where the node answers). */
void rb_slot_unmap_remote(struct remote_backend *rb, uint64_t i)
{
	struct slot *s = &rb->slots[i];

	for (unsigned r = 0; r < rb->copies; r++) {
		if (s->n[r] == NO_NODE)
			continue;
		atomic_fetch_sub(&rb->nodes[s->n[r]].held, 1);
		if (rb_copy_valid(rb, s, r) && rb_usable(rb, s->n[r]) &&
		    rb_node_op(rb, s->n[r], OP_DROP, i, UINT64_MAX, NULL) == 0)
			atomic_fetch_add(&rb->nodes[s->n[r]].free_pages, 1);
		s->n[r] = NO_NODE;
	}
}
