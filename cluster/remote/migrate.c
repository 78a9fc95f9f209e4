/* migrate.c - migration off shrinking nodes.
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
#include "cluster/remote/rb.h"

#define MIGRATE_RECHECK 256

/* Parity modes: move slot i (one copy, a member of a group) off node j
 * (see struct rb_mode). */
int rb_parity_migrate_slot(struct remote_backend *rb, uint64_t i, unsigned j,
			   uint8_t *page)
{
	struct slot *s = &rb->slots[i];

	if (s->n[0] != j || !rb_copy_valid(rb, s, 0) || !rb->slot_grp[i])
		return 0;
	uint64_t gid = rb->slot_grp[i] - 1;
	struct parity_group *g = parity_group_at(&rb->pt, gid);
	pthread_mutex_lock(rb_glock(rb, gid));
	int idx = parity_member_find(g, i);
	int rc = idx < 0 ? 0 : rb_node_op(rb, j, OP_FETCH, i, s->version, page);
	if (idx < 0 || rc) {
		pthread_mutex_unlock(rb_glock(rb, gid));
		return rc;
	}
	/* Same group, a node outside it: the group's parity stays right. */
	bool exclude[CONFIG_MAX_NODES] = { false };
	rb_group_exclude(rb, g, exclude);
	exclude[j] = true;
	for (unsigned tries = 0; tries < rb->nn; tries++) {
		int n = rb_pick(rb, exclude);
		if (n < 0)
			break;
		if (rb_node_op(rb, (unsigned)n, OP_STORE, i, s->version, page) == 0) {
			rb_pslot_moved(rb, s, g, idx, (unsigned)n,
				       (uint8_t)atomic_load(&rb->nodes[n].gen));
			pthread_mutex_unlock(rb_glock(rb, gid));
			(void)rb_node_op(rb, j, OP_DROP, i, s->version, NULL);
			return 1;
		}
		exclude[n] = true;
	}
	/* Every node with room is in the group already: the page leaves it
	 * (XORed out of its parity) for an open group; room in the hold is
	 * reserved first (without it, the page stays where it is). */
	if (!rb_hold_reserve(rb, i)) {
		pthread_mutex_unlock(rb_glock(rb, gid));
		return -ENOSPC;
	}
	atomic_fetch_sub(&rb->nodes[j].held, 1);
	s->n[0] = NO_NODE;
	rb_group_remove(rb, gid, (unsigned)idx, page);
	pthread_mutex_unlock(rb_glock(rb, gid));
	if (rb_group_add(rb, i, s->version, page, -1) == 0) {
		rb_hold_unreserve(rb, i);
		(void)rb_node_op(rb, j, OP_DROP, i, s->version, NULL);
		return 1;
	}
	/* No node has room: it stays where it is, in an open group
	 * (group_add keeps it on j, or moves it and drops the copy on j). */
	atomic_fetch_add(&rb->nodes[j].held, 1);
	if (rb_group_add(rb, i, s->version, page, (int)j) == 0) {
		rb_hold_unreserve(rb, i);
		return s->n[0] == j ? -ENOSPC : 1;
	}
	/* Not even there (no group can take it): held in our memory. */
	atomic_fetch_sub(&rb->nodes[j].held, 1);
	(void)rb_node_op(rb, j, OP_DROP, i, s->version, NULL);
	(void)rb_hold_put(rb, i, page);
	rb_short_log(rb);
	return -ENOSPC;
}

/* Redundancy none and mirror: move slot i's copy on node j elsewhere
 * (see struct rb_mode). */
int rb_copies_migrate_slot(struct remote_backend *rb, uint64_t i, unsigned j,
			   uint8_t *page)
{
	struct slot *s = &rb->slots[i];

	for (unsigned r = 0; r < rb->copies; r++) {
		if (s->n[r] != j || !rb_copy_valid(rb, s, r))
			continue;
		int rc = rb_node_op(rb, j, OP_FETCH, i, s->version, page);
		unsigned o = 1 - r;
		if (rc && rb->copies == 2 && rb_copy_valid(rb, s, o) && rb_usable(rb, s->n[o]))
			rc = rb_node_op(rb, s->n[o], OP_FETCH, i, s->version, page);
		if (rc)
			return rc;
		uint8_t gen = s->g[r];
		s->n[r] = NO_NODE;
		rc = rb_place_avoid(rb, i, r, s->version, page, (int)j);
		if (rc) {
			s->n[r] = (uint8_t)j;
			s->g[r] = gen;
			return rc;
		}
		atomic_fetch_sub(&rb->nodes[j].held, 1);
		(void)rb_node_op(rb, j, OP_DROP, i, s->version, NULL);
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

	pthread_mutex_lock(rb_glock(rb, gid));
	if (g->state != PG_CLOSED || !g->nmem || g->pn != j || !rb_parity_ok(rb, g))
		goto out;
	if ((rc = rb_node_op(rb, j, OP_PARITY_FETCH, g->pkey, 0, page)) != 0)
		goto out;
	bool exclude[CONFIG_MAX_NODES] = { false };
	for (unsigned k = 0; k < g->nmem; k++)
		if (g->m[k].node != NO_NODE)
			exclude[g->m[k].node] = true;
	exclude[j] = true;
	rc = -ENOSPC;
	for (unsigned tries = 0; tries < rb->nn; tries++) {
		int pn = rb_parity_node_pick(rb, exclude);
		if (pn < 0)
			break;
		/* A parity update adds into what is there: no leftover of
		 * an earlier state of this group may be. */
		(void)rb_node_op(rb, (unsigned)pn, OP_PARITY_DROP, g->pkey, UINT64_MAX, NULL);
		if (rb_node_op(rb, (unsigned)pn, OP_PARITY_UPDATE, g->pkey, ++g->pver, page) == 0) {
			atomic_fetch_add(&rb->nodes[pn].held, 1);
			atomic_fetch_add(&rb->nodes[pn].placed, 1);
			atomic_fetch_sub(&rb->nodes[pn].free_pages, 1);
			atomic_fetch_sub(&rb->nodes[j].held, 1);
			g->pn = (uint8_t)pn;
			g->pgen = (uint8_t)atomic_load(&rb->nodes[pn].gen);
			(void)rb_node_op(rb, j, OP_PARITY_DROP, g->pkey, UINT64_MAX, NULL);
			rc = 1;
			break;
		}
		exclude[pn] = true;
	}
	if (rc == -ENOSPC && rb_group_room_inside(rb, g)) {
		/* Every node with room holds a member: the group is broken
		 * up, its members regrouped into open groups (which close
		 * early enough to leave a node for their parity), and its
		 * parity page dropped with it. */
		uint64_t slots[PARITY_MAX_N];
		unsigned n = g->nmem;
		for (unsigned k = 0; k < n; k++)
			slots[k] = g->m[k].slot;
		pthread_mutex_unlock(rb_glock(rb, gid));
		rb_group_dissolve(rb, gid, slots, n);
		pthread_mutex_lock(rb_glock(rb, gid));
		rc = g->state == PG_CLOSED && g->pn == j ? -ENOSPC : 1;
	}
out:
	pthread_mutex_unlock(rb_glock(rb, gid));
	return rc;
}

/* How many pages node j still has to give back, per its own live report
 * (0 when it is within its offer, gone, or holds none of ours). */
static int_fast64_t migrate_budget(struct remote_backend *rb, unsigned j)
{
	if (!rb_usable(rb, j) || atomic_load(&rb->nodes[j].held) <= 0)
		return 0;
	if (rb_refresh_from(rb, j) != 0)
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
		if (rc == -ENOSPC || !rb_usable(rb, j)) {
			log_warn("remote swap: moving %s off node %u stopped: %s", what,
				 rb->nodes[j].id, rc == -ENOSPC ?
				 "no other node has room" : "it stopped answering");
			*budget = 0;
		}
	}
}

void rb_migrate(struct remote_backend *rb)
{
	int_fast64_t budget[CONFIG_MAX_NODES];
	uint64_t moved[CONFIG_MAX_NODES], since[CONFIG_MAX_NODES];
	uint8_t page[PAGE];
	unsigned todo = 0;
	bool cut = false;
	uint64_t failed = 0, t0 = clock_now_ns();

	for (unsigned j = 0; j < rb->nn; j++) {
		moved[j] = since[j] = 0;
		budget[j] = rb->nodes[j].target && rb_over_offer(rb, j) &&
			    t0 >= rb->nodes[j].mig_idle_until_ns ?
			    migrate_budget(rb, j) : 0;
		todo += budget[j] > 0;
	}
	if (!todo)
		return;
	for (uint64_t i = 0; i < rb->nslots && todo; i++) {
		if (i % 4096 == 0 && rb_stopping(rb))
			return;
		/* a node died: its recovery goes first (this thread runs
		 * it); the next pass picks up where the node still is over */
		if (i % 256 == 0 && rb->redundant &&
		    atomic_load(&rb->rebuild_needed)) {
			cut = true;
			break;
		}
		pthread_mutex_lock(rb_stripe(rb, i));
		for (unsigned j = 0; j < rb->nn; j++) {
			if (budget[j] <= 0)
				continue;
			int rc = rb->slots[i].spilled ? 0 :
				 rb->mode->migrate_slot(rb, i, j, page);
			mig_count(rb, j, rc, "pages", &budget[j], &moved[j], &failed);
			if (rc > 0 && ++since[j] >= MIGRATE_RECHECK) {
				since[j] = 0;
				budget[j] = migrate_budget(rb, j);
			}
			if (budget[j] <= 0)
				todo--;
		}
		pthread_mutex_unlock(rb_stripe(rb, i));
	}
	for (uint32_t gid = 0; gid < parity_table_size(&rb->pt) && todo; gid++) {
		if (gid % 4096 == 0 && rb_stopping(rb))
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
