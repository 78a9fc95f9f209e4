/* groups.c - parity groups (cluster/parity.h): their parity pages stored,
 * updated, rebuilt and used to reconstruct a member; members added to the
 * open groups (the parity-logging buffers) and taken out. */
#include "cluster/remote/rb.h"

pthread_mutex_t *rb_glock(struct remote_backend *rb, uint64_t gid)
{
	return &rb->glocks[gid % GSTRIPES];
}

bool rb_member_ok(struct remote_backend *rb, const struct parity_member *m)
{
	return m->node != NO_NODE &&
	       (uint8_t)atomic_load(&rb->nodes[m->node].gen) == m->gen &&
	       rb_usable(rb, m->node);
}

bool rb_parity_ok(struct remote_backend *rb, const struct parity_group *g)
{
	return g->state == PG_CLOSED && !g->parity_lost && g->pn != PARITY_NO_NODE &&
	       (uint8_t)atomic_load(&rb->nodes[g->pn].gen) == g->pgen &&
	       rb_usable(rb, g->pn);
}

/* Nodes a page of group g may not go to: its members' nodes and, with
 * centralised parity, the parity node (it holds no data while alive). */
void rb_group_exclude(struct remote_backend *rb, const struct parity_group *g,
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
int rb_parity_node_pick(struct remote_backend *rb, bool *exclude)
{
	if (rb->pnode >= 0 && !exclude[rb->pnode] && rb_usable(rb, (unsigned)rb->pnode) &&
	    !rb_over_offer(rb, (unsigned)rb->pnode))
		return rb->pnode;
	if (rb->pnode >= 0)
		exclude[rb->pnode] = true;
	return rb_pick(rb, exclude);
}

/* Store parity page `page` of group g on a node outside the group: the
 * dedicated parity node when there is one and it is usable, else any.
 * A node that held an earlier state of it drops it first (a parity update
 * cut by a transport error may or may not have been applied). Caller
 * holds the group's lock. */
int rb_group_parity_store(struct remote_backend *rb, struct parity_group *g,
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
		int pn = rb_parity_node_pick(rb, exclude);
		if (pn < 0)
			break;
		/* a store, not an update: it replaces whatever an earlier
		 * attempt that timed out may have left there */
		rc = rb_node_op(rb, (unsigned)pn, OP_PARITY_STORE, g->pkey, ++g->pver, (void *)page);
		if (!rc) {
			if (oldpn != PARITY_NO_NODE && oldpn != pn) {
				atomic_fetch_sub(&rb->nodes[oldpn].held, 1);
				if (rb_usable(rb, oldpn))
					(void)rb_node_op(rb, oldpn, OP_PARITY_DROP, g->pkey,
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
	/* retried by the refresher, backing off, and said in short_log's
	 * one warning a minute: never a pass or a line per group while the
	 * cluster has no room */
	bool outside_up = false;
	for (unsigned i = 0; i < rb->nn; i++)
		outside_up |= !member[i] && rb_usable(rb, i);
	atomic_fetch_add(outside_up ? &rb->short_parity : &rb->short_nodes, 1);
	atomic_store(&rb->retry_due, 1);
	log_debug("remote swap: parity group %" PRIu64 ": no node took its parity "
		  "page (%s)", g->pkey & 0xffffffff, strerror(-rc));
	rb_short_log(rb);
	return rc;
}

/* Recompute group g's parity from its members (IV.B.4) and store it.
 * Caller holds the group's lock. */
int rb_group_parity_rebuild(struct remote_backend *rb, struct parity_group *g)
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
					       .rc = rb_member_ok(rb, m) ? 0 : -EHOSTDOWN };
		all = all && !f[k].rc;
	}
	if (all)
		rb_fetch_batch(rb, f, node, g->nmem, tmp, from);
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
	int rc = rb_group_parity_store(rb, g, acc);
	if (!rc)
		atomic_fetch_add(&rb->parity_rebuilds, 1);
	return rc;
}

/* Apply delta to group g's parity page. Members already reflect the
 * change; if the parity node fails, the page is recomputed from them.
 * Caller holds the group's lock. */
void rb_group_apply(struct remote_backend *rb, struct parity_group *g,
		    const void *delta)
{
	if (g->state == PG_OPEN) {
		xor_into(g->local, delta, PAGE);
		return;
	}
	if (rb_parity_ok(rb, g) &&
	    rb_node_op(rb, g->pn, OP_PARITY_UPDATE, g->pkey, ++g->pver, (void *)delta) == 0) {
		atomic_fetch_add(&rb->parity_updates, 1);
		return;
	}
	(void)rb_group_parity_rebuild(rb, g);
}

/* The page of member `slot` of group g from the parity page and the other
 * members. Caller holds the group's lock. */
int rb_group_reconstruct(struct remote_backend *rb, struct parity_group *g,
			 uint64_t slot, void *out)
{
	uint8_t pg[PARITY_MAX_N][PAGE], node[PARITY_MAX_N + 1];
	struct cluster_fetch r[PARITY_MAX_N + 1], tmp[PARITY_MAX_N + 1];
	unsigned n = 0, who[PARITY_MAX_N], from[PARITY_MAX_N + 1];

	if (g->state == PG_OPEN)
		memcpy(out, g->local, PAGE);
	else if (!rb_parity_ok(rb, g))
		return -EIO;
	/* a member we cannot ask dooms it before any I/O */
	for (unsigned k = 0; k < g->nmem; k++) {
		const struct parity_member *m = &g->m[k];
		if (m->slot == slot)
			continue;
		if (!rb_member_ok(rb, m)) {
			rb_rebuild_failed(rb, slot, m->slot, -EHOSTDOWN);
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
		rb_fetch_batch(rb, r, node, nr, tmp, from);
	if (nr > n && r[n].rc)
		return -EIO;
	for (unsigned k = 0; k < n; k++) {
		if (r[k].rc) {
			rb_rebuild_failed(rb, slot, g->m[who[k]].slot, r[k].rc);
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
	(void)rb_group_parity_store(rb, g, g->local);
	g->local = NULL;
}

/* Take member idx (slot i, contents `old`, NULL: unknown) out of group
 * gid. Frees the group when its last member leaves. Caller holds slot i's
 * stripe and the group's lock. */
void rb_group_remove(struct remote_backend *rb, uint64_t gid, unsigned idx,
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
			if (rb_usable(rb, g->pn))
				(void)rb_node_op(rb, g->pn, OP_PARITY_DROP, g->pkey, UINT64_MAX, NULL);
		}
		parity_group_free(&rb->pt, (uint32_t)gid);
		return;
	}
	if (old)
		rb_group_apply(rb, g, old);        /* old ^ zeros */
	else
		(void)rb_group_parity_rebuild(rb, g);
	if (parity_group_sparse(g, rb->gsize))
		atomic_store(&rb->merge_needed, 1);
}

/* A parity-pool entry, locked: a free one if any, else the next in turn. */
struct ppool *rb_pool_take(struct remote_backend *rb)
{
	return &rb->pool[rb_lock_one(&rb->pool[0].lock, sizeof(rb->pool[0]), POOL,
				     &rb->pool_rr)];
}

/* A fresh open group; says so when the table had to grow for it (groups
 * got small: few nodes left). -ENOSPC at the table's end. */
int64_t rb_group_alloc(struct remote_backend *rb, uint8_t *buf)
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
int rb_group_add(struct remote_backend *rb, uint64_t i, uint64_t v,
		 const void *page, int have)
{
	struct slot *s = &rb->slots[i];
	struct ppool *p = rb_pool_take(rb);
	int rc = -ENOSPC;

	for (unsigned attempt = 0; attempt < 3; attempt++) {
		if (p->gid < 0) {
			p->gid = rb_group_alloc(rb, p->buf);
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

		pthread_mutex_lock(rb_glock(rb, gid));
		rb_group_exclude(rb, g, exclude);
		if (have >= 0 && !exclude[have] && rb_usable(rb, (unsigned)have)) {
			node = have;
		} else {
			for (unsigned tries = 0; tries < rb->nn; tries++) {
				int idx = rb_pick(rb, exclude);
				if (idx < 0)
					break;
				rc = rb_node_op(rb, (unsigned)idx, OP_STORE, i, v, (void *)page);
				if (!rc) {
					node = idx;
					break;
				}
				exclude[idx] = true;
			}
		}
		if (node < 0) {
			pthread_mutex_unlock(rb_glock(rb, gid));
			if (g->nmem == 0) {
				rc = rc == -ENOSPC || rc == 0 ? -ENOSPC : -EIO;
				break;
			}
			/* every node left is in the group: close it early and
			 * try a fresh one */
			pthread_mutex_lock(rb_glock(rb, gid));
			group_close(rb, g);
			pthread_mutex_unlock(rb_glock(rb, gid));
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
				if (rb_usable(rb, (unsigned)have))
					(void)rb_node_op(rb, (unsigned)have, OP_DROP, i, v, NULL);
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
			bool pnode_ok = rb->pnode >= 0 && rb_usable(rb, (unsigned)rb->pnode) &&
					!rb_over_offer(rb, (unsigned)rb->pnode);
			memset(exclude, 0, sizeof(exclude));
			rb_group_exclude(rb, g, exclude);
			full = rb_pick_count(rb, exclude) <= (pnode_ok ? 0u : 1u);
		}
		if (full) {
			group_close(rb, g);
			p->gid = -1;
		}
		pthread_mutex_unlock(rb_glock(rb, gid));
		rc = 0;
		break;
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

/* Parity modes at open (see struct rb_mode): the group size for the nodes
 * there are, the parity node ("parity": the lowest id other than ours),
 * the group table and the write and trim scratch. */
int rb_parity_open(struct remote_backend *rb, const struct remote_opts *o,
		   unsigned targets)
{
	/* data nodes: every target but the parity node (centralised) */
	unsigned data = targets - (o->redundancy == REMOTE_PARITY);
	unsigned want = o->parity_group ? o->parity_group : 4;

	if (targets < 3) {
		log_err("remote swap: parity needs at least three other nodes "
			"in the cluster file");
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
	/* Every live group has a page; sparse ones get merged, so half a
	 * group per slot is room enough while groups hold two or more. With
	 * few nodes left groups shrink to one member (its parity page is
	 * then a mirror): the table grows, up to a group per slot and the
	 * open ones. */
	uint64_t ng = rb->nslots / 2 + 64, maxg = rb->nslots + POOL + 64;
	rb->slot_grp = calloc(rb->nslots, sizeof(*rb->slot_grp));
	if (!rb->slot_grp || maxg >= UINT32_MAX ||
	    parity_table_init(&rb->pt, (uint32_t)ng, (uint32_t)maxg, rb->gsize))
		return -ENOMEM;
	/* write_pages' scratch, now: nothing is allocated on the swap-out
	 * path (mlockall: it would be locked, when memory is short) */
	for (unsigned k = 0; k < POOL; k++)
		if (!(rb->pool[k].wb = malloc(sizeof(*rb->pool[k].wb))) ||
		    !(rb->tscr[k].t = malloc(sizeof(*rb->tscr[k].t))))
			return -ENOMEM;
	return 0;
}
