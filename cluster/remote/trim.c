/* trim.c - TRIM: a range's slots unmapped in batches, their copies dropped
 * in one request per node and, with parity, taken out of their groups. */
#include "cluster/remote/rb.h"

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
		if (!rb_slot_mapped(s) || s->spilled || !rb->slot_grp[i0 + k] ||
		    !rb_copy_valid(rb, s, 0) || !rb_usable(rb, s->n[0]))
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
		x->need_old = x->cut < g->nmem && (g->state == PG_OPEN || rb_parity_ok(rb, g));
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
		rb_fetch_batch(rb, t->f, t->node, nf, t->tmp, t->from);
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
				if (rb_usable(rb, g->pn))
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
			(void)rb_group_parity_rebuild(rb, g);
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
			(void)rb_group_parity_rebuild(rb, parity_group_at(&rb->pt, t->g[R->uq[u]].gid));
	}
	for (unsigned x = GSTRIPES; x-- > 0;)
		if (R->used[x])
			pthread_mutex_unlock(&rb->glocks[x]);
}

/* Slot i, mapped and in no group, unmapped: the drops of its copies
 * into R, to be sent with the chunk's others (trim_send). */
static void trim_unmap(struct remote_backend *rb, uint64_t i, struct trim_reqs *R)
{
	struct slot *s = &rb->slots[i];

	for (unsigned r = 0; r < rb->copies; r++) {
		if (s->n[r] == NO_NODE)
			continue;
		atomic_fetch_sub(&rb->nodes[s->n[r]].held, 1);
		if (rb_copy_valid(rb, s, r) && rb_usable(rb, s->n[r]))
			R->r[R->n++] = (struct store_req){ .slot = i, .version = UINT64_MAX,
							   .node = s->n[r], .kind = FK_DATA,
							   .op = BO_DROP };
		s->n[r] = NO_NODE;
	}
	rb->mode->spill_forget(rb, i);
	atomic_fetch_sub(&rb->mapped, 1);
}

/* R's requests, one per node and kind, all at once. */
static void trim_send(struct remote_backend *rb, struct trim_reqs *R)
{
	if (R->n)
		rb_node_batch_mixed(rb, R->r, R->n);
	for (unsigned x = 0; x < R->n; x++)    /* parity stores never count */
		if (R->r[x].op == BO_DROP && R->r[x].rc == 0 && R->r[x].kind == FK_DATA)
			atomic_fetch_add(&rb->nodes[R->r[x].node].free_pages, 1);
}

/* Lock the stripes of slots i0 .. i0+n-1 (see rb_stripes_lock). */
static unsigned trim_lock(struct remote_backend *rb, uint64_t i0, unsigned n,
			  uint16_t *order)
{
	uint64_t slots[TRIM_BATCH] = { 0 };

	for (unsigned k = 0; k < n; k++)
		slots[k] = i0 + k;
	return rb_stripes_lock(rb, slots, n, order);
}

/* Redundancy none and mirror: trim slots i0 .. i0+n-1 (n <= TRIM_BATCH):
 * unmapped, their copies dropped in one PAGE_DROP_MANY per node. */
void rb_copies_trim_slots(struct remote_backend *rb, uint64_t i0, unsigned n)
{
	uint16_t order[TRIM_BATCH];
	struct trim_reqs R;

	R.n = R.nu = 0;
	unsigned u = trim_lock(rb, i0, n, order);
	for (unsigned k = 0; k < n; k++) {
		struct slot *s = &rb->slots[i0 + k];
		s->lost = 0;            /* trimmed: zeros are right */
		if (rb_slot_mapped(s))  /* else the version stays: a late copy
					 * can never pass for current */
			trim_unmap(rb, i0 + k, &R);
	}
	trim_send(rb, &R);
	rb_stripes_unlock(rb, order, u);
}

/* Parity modes: trim slots i0 .. i0+n-1 (n <= TRIM_BATCH): out of their
 * groups (trim_groups, with a scratch of rb->tscr, allocated at open:
 * nothing is allocated on the I/O path of a swap device), their copies
 * dropped in one PAGE_DROP_MANY per node with the parity updates. */
void rb_parity_trim_slots(struct remote_backend *rb, uint64_t i0, unsigned n)
{
	uint16_t order[TRIM_BATCH];
	bool done[TRIM_BATCH] = { false };
	struct trim_reqs R;

	R.n = R.nu = 0;
	memset(R.used, 0, sizeof(R.used));
	unsigned u = trim_lock(rb, i0, n, order);
	struct tscratch *t = &rb->tscr[rb_lock_one(&rb->tscr[0].lock, sizeof(rb->tscr[0]),
						   POOL, &rb->tscr_rr)];
	trim_groups(rb, i0, n, t->t, done, &R);
	for (unsigned k = 0; k < n; k++) {
		struct slot *s = &rb->slots[i0 + k];
		s->lost = 0;            /* trimmed: zeros are right */
		if (!rb_slot_mapped(s))
			continue;       /* the version stays (see above) */
		if (!done[k] && !s->spilled)
			continue;       /* pslot_unmap's, below: it takes group locks */
		trim_unmap(rb, i0 + k, &R);
	}
	trim_send(rb, &R);
	trim_groups_done(rb, t->t, &R);
	pthread_mutex_unlock(&t->lock);
	for (unsigned k = 0; k < n; k++) {
		uint64_t i = i0 + k;
		if (done[k] || !rb_slot_mapped(&rb->slots[i]))
			continue;
		rb_pslot_unmap(rb, i);     /* out of its group, its copy dropped */
		rb_hold_forget(rb, i);
		atomic_fetch_sub(&rb->mapped, 1);
	}
	rb_stripes_unlock(rb, order, u);
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
	int rc = rb_check_range(rb, off, len);

	if (rc)
		return rc;
	atomic_fetch_add(&rb->trims, 1);
	/* Partial slots at the edges keep their other bytes. */
	uint64_t first = (off + PAGE - 1) / PAGE, end = (off + len) / PAGE;
	if (first >= end)
		return rb_write_range(rb, NULL, off, len);
	if (off % PAGE && (rc = rb_write_range(rb, NULL, off, first * PAGE - off)))
		return rc;
	if ((off + len) % PAGE &&
	    (rc = rb_write_range(rb, NULL, end * PAGE, off + len - end * PAGE)))
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
		while (rb->slot_grp && e < end && e - i > TRIM_BATCH / 2 &&
		       grp_peek(rb, e - 1) && grp_peek(rb, e - 1) == grp_peek(rb, e))
			e--;
		rb->mode->trim_slots(rb, i, (unsigned)(e - i));
	}
	return 0;
}
