/* wparity.c - write batching with parity (see write.c): a run's new pages
 * planned into open groups, its in-use slots overwritten in one request
 * per node, the parity pages of the groups it fills sent with it. */
#include "cluster/remote/rb.h"

/* Plan slot w->i's new page into the pool entry p's open groups (parity).
 * Returns false if the page must go slot_write's way. Caller holds the
 * stripes and p->lock. */
static bool wb_plan_parity(struct remote_backend *rb, struct ppool *p,
			   struct wb_groups *G, struct wb_plan *w)
{
	for (unsigned attempt = 0; attempt < 2; attempt++) {
		bool fresh = false;
		if (p->gid < 0) {
			if (G->n >= WBATCH)
				return false;   /* close_batch sends at most that many */
			/* no buffer yet: the pool entry's one buffer may
			 * still be the parity of the group before it, whose
			 * members go in at commit */
			p->gid = rb_group_alloc(rb, NULL);
			if (p->gid < 0) {
				atomic_store(&rb->merge_needed, 1);
				return false;
			}
			fresh = true;
		}
		if (!G->n || G->gid[G->n - 1] != p->gid) {
			G->gid[G->n] = p->gid;
			memset(G->node[G->n], 0, sizeof(G->node[G->n]));
			G->cnt[G->n] = 0;
			G->full[G->n] = false;
			G->fresh[G->n] = fresh;
			G->n++;
		}
		unsigned k = G->n - 1;
		struct parity_group *g = parity_group_at(&rb->pt, p->gid);
		bool exclude[CONFIG_MAX_NODES] = { false };
		pthread_mutex_lock(rb_glock(rb, (uint64_t)p->gid));
		rb_group_exclude(rb, g, exclude);
		unsigned nmem = g->nmem;
		pthread_mutex_unlock(rb_glock(rb, (uint64_t)p->gid));
		for (unsigned j = 0; j < CONFIG_MAX_NODES; j++)
			exclude[j] = exclude[j] || G->node[k][j];
		int node = rb_pick(rb, exclude);
		if (node < 0) {
			if (nmem + G->cnt[k] == 0)
				return false;
			/* nobody left outside it: close it, take a new one */
			G->full[k] = true;
			p->gid = -1;
			continue;
		}
		G->node[k][node] = true;
		G->cnt[k]++;
		w->node = node;
		w->gid = G->gid[k];
		/* full, or no node left that is not in it (group_add's rule) */
		exclude[node] = true;
		bool pnode_ok = rb->pnode >= 0 && rb_usable(rb, (unsigned)rb->pnode) &&
				!rb_over_offer(rb, (unsigned)rb->pnode);
		if (nmem + G->cnt[k] >= rb->gsize ||
		    rb_pick_count(rb, exclude) <= (pnode_ok ? 0u : 1u)) {
			G->full[k] = true;
			p->gid = -1;
		}
		return true;
	}
	return false;
}

/* overwrite_send's fan-out: node j's overwrites are o[first[j] ..
 * first[j+1]), each for candidate oc[] of the run */
struct ow_fan {
	struct rb_fan fan;
	struct wb_plan *w;
	const unsigned *cand;
	int *rcs;
	struct cluster_overwrite o[WBATCH];
	unsigned oc[WBATCH], first[CONFIG_MAX_NODES + 1];
};

static int ow_send(void *ctx, unsigned j, struct cluster_client *cl)
{
	struct ow_fan *x = ctx;

	return cluster_client_overwrite_many_start(cl, &x->o[x->first[j]],
						   x->first[j + 1] - x->first[j]);
}

/* Node j's answers into rcs; nothing for a node that could not be asked
 * (its entries stay -EAGAIN, not sent). */
static int ow_wait(void *ctx, unsigned j, struct cluster_client *cl, int rc)
{
	struct ow_fan *x = ctx;
	struct remote_backend *rb = x->fan.rb;

	if (!cl)
		return rc;
	if (!rc)
		rc = cluster_client_wait_overwrite_many(cl, &x->o[x->first[j]],
							x->first[j + 1] - x->first[j]);
	for (unsigned at = x->first[j]; at < x->first[j + 1]; at++) {
		unsigned c = x->oc[at];
		const struct wb_plan *p = &x->w[x->cand[c]];
		x->rcs[c] = rc ? rc : x->o[at].rc;
		rb_overwrite_count(rb, j, p->i, parity_group_at(&rb->pt, p->gid),
				   x->rcs[c], cl);
	}
	return rc;
}

static const struct fanout_ops ow_ops = { rb_fan_get, ow_send, ow_wait, rb_fan_put };

/* The overwrites of overwrite_batch that can go (node set), one
 * PAGE_OVERWRITE_MANY per node, every node's sent before any answer is
 * taken; each one's answer into rcs[c] (-EAGAIN: not sent). Caller holds
 * the groups' locks. */
static void overwrite_send(struct remote_backend *rb, struct wb_plan *w,
			   const unsigned *cand, unsigned nc, const uint64_t *pv,
			   int *rcs)
{
	struct ow_fan x = { .fan = { .rb = rb, .any = true }, .w = w, .cand = cand,
			    .rcs = rcs };
	uint8_t key[WBATCH] = { 0 };
	unsigned go[WBATCH], ng = 0, order[WBATCH];
	bool busy[CONFIG_MAX_NODES];

	for (unsigned c = 0; c < nc; c++)
		if (w[cand[c]].node >= 0) {
			key[ng] = (uint8_t)w[cand[c]].node;
			go[ng++] = c;
		}
	/* each node's overwrites one run in o, in the run's order */
	fanout_group(key, ng, rb->nn, x.first, order);
	for (unsigned at = 0; at < ng; at++) {
		unsigned c = go[order[at]];
		struct wb_plan *p = &w[cand[c]];
		const struct parity_group *g = parity_group_at(&rb->pt, p->gid);
		const struct slot *s = &rb->slots[p->i];
		x.oc[at] = c;
		x.o[at] = (struct cluster_overwrite){
			.page_id = p->i, .version = s->version + 1,
			.old_version = s->version, .group = g->pkey,
			.parity_version = pv[c], .parity_node = rb->nodes[g->pn].id,
			.page = p->page };
	}
	for (unsigned j = 0; j < rb->nn; j++)
		busy[j] = x.first[j + 1] > x.first[j];
	fanout_run(&ow_ops, &x, busy, rb->nn, NULL);
}

/* The run's in-use slots with parity: each overwritten on its node, which
 * forwards old ^ new to the group's parity node (as pslot_write's
 * PAGE_OVERWRITE does), all at once: one PAGE_OVERWRITE_MANY per node,
 * every node at the same time, each node's deltas one PARITY_UPDATE_MANY
 * per parity node. The groups' locks are held throughout, taken in lock-stripe
 * order. Members of one group (on distinct nodes) go at once too, each
 * delta with the next parity version: the parity node XORs them in
 * whatever order they come (XOR commutes; it keeps the highest version).
 * Whatever does not work out is left (node -1) for pslot_write, which is
 * right whatever the node did (see node_fetch_store). See the lock order
 * at the top of the parity section. */
static void overwrite_batch(struct remote_backend *rb, struct wb_plan *w, unsigned n)
{
	bool used[GSTRIPES] = { false };
	unsigned cand[WBATCH], nc = 0;
	int midx[WBATCH];
	int rcs[WBATCH];
	uint64_t pv[WBATCH];    /* the parity version its delta carries */

	for (unsigned k = 0; k < n; k++) {
		struct slot *s = &rb->slots[w[k].i];
		if (w[k].node != -1 || !rb_slot_mapped(s) || !rb->slot_grp[w[k].i])
			continue;
		uint64_t gid = rb->slot_grp[w[k].i] - 1;
		used[gid % GSTRIPES] = true;
		w[k].gid = (int64_t)gid;
		cand[nc++] = k;
	}
	if (nc < 2) {
		for (unsigned c = 0; c < nc; c++)
			w[cand[c]].gid = -1;
		return;
	}
	for (unsigned x = 0; x < GSTRIPES; x++)
		if (used[x])
			pthread_mutex_lock(&rb->glocks[x]);
	/* which can go: as pslot_write's first case */
	unsigned ok = 0;
	for (unsigned c = 0; c < nc; c++) {
		struct wb_plan *x = &w[cand[c]];
		struct slot *s = &rb->slots[x->i];
		struct parity_group *g = parity_group_at(&rb->pt, x->gid);
		midx[c] = parity_member_find(g, x->i);
		rcs[c] = -EAGAIN;
		pv[c] = 0;
		if (midx[c] >= 0 && rb_copy_valid(rb, s, 0) && rb_usable(rb, s->n[0]) &&
		    rb_parity_ok(rb, g)) {
			x->node = s->n[0];
			pv[c] = g->pver + 1;
			for (unsigned e = 0; e < c; e++)
				if (w[cand[e]].gid == x->gid && pv[e] >= pv[c])
					pv[c] = pv[e] + 1;
			ok++;
		}
	}
	if (ok)
		overwrite_send(rb, w, cand, nc, pv, rcs);
	/* results: a group's version past every delta sent (some may have
	 * arrived whatever the answer); a member stored has its new
	 * version; a parity page that may have missed a delta is recomputed
	 * once all are in */
	for (unsigned c = 0; c < nc; c++) {
		struct parity_group *g = parity_group_at(&rb->pt, w[cand[c]].gid);
		if (pv[c] > g->pver)
			g->pver = pv[c];
	}
	for (unsigned c = 0; c < nc; c++) {
		struct wb_plan *x = &w[cand[c]];
		struct slot *s = &rb->slots[x->i];
		struct parity_group *g = parity_group_at(&rb->pt, x->gid);
		if (rcs[c] == 0 || rcs[c] == -EREMOTEIO) {
			g->m[midx[c]].version = s->version + 1;
			s->version++;
			if (rcs[c] == 0)
				atomic_fetch_add(&rb->parity_updates, 1);
			x->node = -2;   /* done */
		} else {
			x->node = -1;
		}
	}
	for (unsigned c = 0; c < nc; c++) {
		bool again = false;
		for (unsigned e = 0; e < c; e++)
			again |= rcs[e] == -EREMOTEIO && w[cand[e]].gid == w[cand[c]].gid;
		if (rcs[c] == -EREMOTEIO && !again)
			(void)rb_group_parity_rebuild(rb, parity_group_at(&rb->pt, w[cand[c]].gid));
	}
	for (unsigned c = 0; c < nc; c++)
		w[cand[c]].gid = -1;
	for (unsigned x = GSTRIPES; x-- > 0;)
		if (used[x])
			pthread_mutex_unlock(&rb->glocks[x]);
}

/* Group q will not use the parity page sent with its run: counted, and
 * dropped from its node unless a store of the right one replaces it. */
static void spec_drop(struct remote_backend *rb, const struct wb_groups *G, unsigned q,
		      uint64_t pkey, bool drop)
{
	if (G->spec[q] < 0 || G->spec_rc[q])
		return;
	atomic_fetch_add(&rb->spec_redone, 1);
	if (drop && rb_usable(rb, G->spec_node[q]))
		(void)rb_node_op(rb, G->spec_node[q], OP_PARITY_DROP, pkey, UINT64_MAX, NULL);
}

/* The parity pages of the groups a run fills, as planned (the group's
 * buffer, zeros for a fresh one, XOR the run's pages planned into it),
 * added to the run's stores st[*ns..], so that they travel with the data
 * pages: one round trip for both, where sending them once the data pages
 * are in would take two. close_batch keeps such a page only if the group's
 * parity, when it closes, is the same bytes (else a store failed, or a
 * trim or an overwrite changed the group meanwhile: it sends the right
 * one). At most
 * FRAME_BATCH_MAX requests per node. Caller holds the stripes and the
 * pool entry. */
static void spec_parity(struct remote_backend *rb, struct wb_groups *G,
			const struct wb_plan *w, unsigned n, struct store_req *st,
			unsigned *ns)
{
	unsigned per[CONFIG_MAX_NODES] = { 0 };

	for (unsigned k = 0; k < *ns; k++)
		per[st[k].node]++;
	for (unsigned q = 0; q < G->n; q++) {
		G->spec[q] = -1;
		if (!G->full[q])
			continue;
		struct parity_group *g = parity_group_at(&rb->pt, G->gid[q]);
		bool exclude[CONFIG_MAX_NODES] = { false };
		pthread_mutex_lock(rb_glock(rb, (uint64_t)G->gid[q]));
		if (G->fresh[q] || !g->local)
			memset(G->spar[q], 0, PAGE);
		else
			memcpy(G->spar[q], g->local, PAGE);
		for (unsigned k = 0; k < g->nmem; k++)
			if (g->m[k].node != NO_NODE)
				exclude[g->m[k].node] = true;
		G->spec_ver[q] = g->pver + 1;
		uint64_t pkey = g->pkey;
		pthread_mutex_unlock(rb_glock(rb, (uint64_t)G->gid[q]));
		for (unsigned k = 0; k < n; k++)
			if (w[k].st >= 0 && w[k].gid == G->gid[q]) {
				xor_into(G->spar[q], w[k].page, PAGE);
				exclude[w[k].node] = true;
			}
		int pn = rb_parity_node_pick(rb, exclude);
		if (pn < 0 || per[pn] >= FRAME_BATCH_MAX)
			continue;
		per[pn]++;
		G->spec[q] = (int)*ns;
		G->spec_node[q] = (uint8_t)pn;
		/* before the store: a restart after it makes the page lost */
		G->spec_gen[q] = (uint8_t)atomic_load(&rb->nodes[pn].gen);
		st[(*ns)++] = (struct store_req){ .slot = pkey, .version = G->spec_ver[q],
						  .page = G->spar[q], .node = (uint8_t)pn,
						  .kind = FK_PARITY };
	}
}

/* The groups of a run that filled up (G->full, their parity in G->par):
 * closed. A group whose parity page went with the run's data pages
 * (spec_parity) keeps it if it is the group's parity as it came out;
 * the others' pages are sent now, at once, one PAGE_STORE_MANY per
 * parity node (a fresh group's parity page does not exist on any node
 * yet, so storing it is what group_close's first parity update does).
 * Their locks are held throughout, in lock-stripe order. A group whose
 * page no node took goes group_close's way. */
static void close_batch(struct remote_backend *rb, struct wb_groups *G)
{
	bool used[GSTRIPES] = { false };
	struct store_req st[WBATCH + 1];
	int sq[WBATCH + 1];
	unsigned ns = 0;

	for (unsigned q = 0; q < G->n; q++)
		if (G->full[q])
			used[G->gid[q] % GSTRIPES] = true;
	for (unsigned x = 0; x < GSTRIPES; x++)
		if (used[x])
			pthread_mutex_lock(&rb->glocks[x]);
	for (unsigned q = 0; q < G->n; q++) {
		sq[q] = -1;
		if (!G->full[q])
			continue;
		struct parity_group *g = parity_group_at(&rb->pt, G->gid[q]);
		if (!g->nmem) {
			/* trims emptied it meanwhile */
			spec_drop(rb, G, q, g->pkey, true);
			g->local = NULL;
			parity_group_free(&rb->pt, (uint32_t)G->gid[q]);
			G->full[q] = false;
			continue;
		}
		bool exclude[CONFIG_MAX_NODES] = { false };
		for (unsigned k = 0; k < g->nmem; k++)
			if (g->m[k].node != NO_NODE)
				exclude[g->m[k].node] = true;
		g->state = PG_CLOSED;
		g->pn = PARITY_NO_NODE;
		unsigned sn = G->spec[q] >= 0 ? G->spec_node[q] : 0;
		/* the group as it is now, under its lock (a trim or an
		 * overwrite may have changed it since the commit) */
		bool spec_ok = G->spec[q] >= 0 && !G->spec_rc[q] &&
			       G->spec_ver[q] == g->pver + 1 && !exclude[sn] &&
			       rb_usable(rb, sn) &&
			       (uint8_t)atomic_load(&rb->nodes[sn].gen) == G->spec_gen[q] &&
			       !memcmp(G->spar[q], g->local, PAGE);
		/* past the version sent with the run, whatever came of it: a
		 * store sent now must replace it */
		if (G->spec[q] >= 0 && g->pver < G->spec_ver[q])
			g->pver = G->spec_ver[q];
		if (spec_ok) {
			/* the page sent with the run is this group's parity,
			 * on a node outside it, still there */
			sq[q] = -2;
			atomic_fetch_add(&rb->spec_kept, 1);
			continue;
		}
		int pn = rb_parity_node_pick(rb, exclude);
		if (G->spec[q] >= 0)    /* sn is only set then */
			spec_drop(rb, G, q, g->pkey, pn < 0 || (unsigned)pn != sn);
		if (pn < 0)
			continue;
		sq[q] = (int)ns;
		st[ns++] = (struct store_req){ .slot = g->pkey, .version = g->pver + 1,
					       .page = g->local, .node = (uint8_t)pn,
					       .kind = FK_PARITY };
	}
	if (ns)
		rb_store_batch(rb, st, ns);
	for (unsigned q = 0; q < G->n; q++) {
		if (!G->full[q])
			continue;
		struct parity_group *g = parity_group_at(&rb->pt, G->gid[q]);
		/* past the version sent, whatever came of it: a page that
		 * arrived after all is overwritten by any later store */
		if (sq[q] >= 0)
			g->pver++;
		if (sq[q] == -2 || (sq[q] >= 0 && st[sq[q]].rc == 0)) {
			unsigned pn = sq[q] == -2 ? G->spec_node[q] : st[sq[q]].node;
			atomic_fetch_add(&rb->nodes[pn].held, 1);
			g->pn = (uint8_t)pn;
			g->pgen = sq[q] == -2 ? G->spec_gen[q] :
				  (uint8_t)atomic_load(&rb->nodes[pn].gen);
			g->parity_lost = 0;
			g->local = NULL;
			atomic_fetch_add(&rb->parity_sends, 1);
		} else {
			(void)rb_group_parity_store(rb, g, g->local);
			g->local = NULL;
		}
		/* fewer members than planned (a store failed): merged later */
		if (parity_group_sparse(g, rb->gsize))
			atomic_store(&rb->merge_needed, 1);
	}
	for (unsigned x = GSTRIPES; x-- > 0;)
		if (used[x])
			pthread_mutex_unlock(&rb->glocks[x]);
}

/* Parity modes: slots slots[0..n) (n <= WBATCH, distinct), whole pages
 * page[k] (see struct rb_mode). New slots are planned into the pool
 * entry's open groups; in-use ones are overwritten together
 * (overwrite_batch); the rest goes slot_write's way. */
int rb_parity_write_slots(struct remote_backend *rb, const uint64_t *slots,
			  const uint8_t *const *page, unsigned n)
{
	struct wb_plan w[WBATCH];
	struct store_req st[NODE_BATCH_MAX];
	unsigned ns = 0;
	struct ppool *p = rb_pool_take(rb);
	struct wb_groups *G = p->wb;    /* allocated at open */

	G->n = 0;
	/* plan */
	rb_wb_init(w, slots, page, n);
	for (unsigned k = 0; k < n; k++) {
		const struct slot *s = &rb->slots[w[k].i];
		/* a new slot (else w[k] stays for slot_write's way) */
		if (!s->spilled && !rb_slot_mapped(s) && !rb->slot_grp[w[k].i])
			(void)wb_plan_parity(rb, p, G, &w[k]);
		rb_wb_request(rb, &w[k], st, &ns);
	}
	/* store: the pages and the parity pages of the groups the run fills */
	spec_parity(rb, G, w, n, st, &ns);
	if (ns)
		rb_node_batch(rb, BO_STORE, st, ns);
	for (unsigned q = 0; q < G->n; q++)
		if (G->spec[q] >= 0)
			G->spec_rc[q] = st[G->spec[q]].rc;
	/* commit, group by group: they share the pool entry's buffer, so
	 * each is closed, its parity page sent, before the next one's
	 * members go in */
	for (unsigned q = 0; q < G->n; q++) {
		struct parity_group *g = parity_group_at(&rb->pt, G->gid[q]);
		if (G->fresh[q]) {
			/* the group before it is closed: the buffer is its */
			pthread_mutex_lock(rb_glock(rb, (uint64_t)G->gid[q]));
			memset(p->buf, 0, PAGE);
			g->local = p->buf;
			pthread_mutex_unlock(rb_glock(rb, (uint64_t)G->gid[q]));
		}
		for (unsigned k = 0; k < n; k++) {
			struct wb_plan *x = &w[k];
			if (x->st < 0 || x->gid != G->gid[q])
				continue;
			struct slot *s = &rb->slots[x->i];
			uint64_t v = s->version + 1;
			if (st[x->st].rc) {
				x->st = -1;     /* slot_write's way */
				continue;
			}
			uint8_t gen = x->gen;
			pthread_mutex_lock(rb_glock(rb, (uint64_t)x->gid));
			int arc = parity_member_add(g, rb->gsize, x->i, v,
						    (uint8_t)x->node, gen);
			if (!arc) {
				xor_into(g->local, x->page, PAGE);
				rb->slot_grp[x->i] = (uint32_t)x->gid + 1;
				s->n[0] = (uint8_t)x->node;
				s->g[0] = gen;
			}
			pthread_mutex_unlock(rb_glock(rb, (uint64_t)x->gid));
			if (arc) {
				/* the group changed under us (a member moved
				 * to that node): our copy is garbage */
				(void)rb_node_op(rb, (unsigned)x->node, OP_DROP, x->i, v, NULL);
				x->st = -1;
				continue;
			}
			rb_wb_done(rb, x);
		}
		if (G->full[q]) {
			/* filled up: it keeps its parity in a buffer of its
			 * own until close_batch sends it (the pool entry's
			 * goes to the next group); or nothing went in after
			 * all: it is freed (a later page opens another) */
			pthread_mutex_lock(rb_glock(rb, (uint64_t)G->gid[q]));
			if (g->nmem) {
				memcpy(G->par[q], p->buf, PAGE);
				g->local = G->par[q];
			} else {
				spec_drop(rb, G, q, g->pkey, true);
				parity_group_free(&rb->pt, (uint32_t)G->gid[q]);
				G->full[q] = false;
			}
			pthread_mutex_unlock(rb_glock(rb, (uint64_t)G->gid[q]));
		}
	}
	close_batch(rb, G);
	pthread_mutex_unlock(&p->lock);
	overwrite_batch(rb, w, n);
	return rb_wb_rest(rb, w, n);
}
