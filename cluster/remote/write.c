/* write.c - reads and writes of byte ranges; whole-page runs go out
 * batched, one request per node. */
#include "cluster/remote/rb.h"

int remote_read(void *priv, void *buf, uint64_t off, uint32_t len)
{
	struct remote_backend *rb = priv;
	uint8_t page[PAGE];
	int rc = rb_check_range(rb, off, len);

	if (rc)
		return rc;
	atomic_fetch_add(&rb->reads, 1);
	while (len) {
		uint64_t i = off / PAGE;
		uint32_t in = (uint32_t)(off % PAGE);
		uint32_t n = PAGE - in < len ? PAGE - in : len;
		pthread_mutex_lock(rb_stripe(rb, i));
		if (in == 0 && n == PAGE)
			rc = rb_slot_read(rb, i, buf);
		else if (!(rc = rb_slot_read(rb, i, page)))
			memcpy(buf, page + in, n);
		pthread_mutex_unlock(rb_stripe(rb, i));
		if (rc)
			return rc;
		buf = (uint8_t *)buf + n;
		off += n;
		len -= n;
	}
	return 0;
}

/* Many whole pages at once.
 * The kernel swaps out in runs of pages (~75 per NBD write here). Page by
 * page, each costs a round trip to its node, one after the other. A run's
 * pages that need nothing but a store are stored together instead, one
 * PAGE_STORE_MANY per node (store_batch), all nodes at once:
 *  - without redundancy: an in-use slot on its node (overwritten in place,
 *    as slot_write does), a new one on a node rb_pick() gives;
 *  - with parity: a new slot into an open group, as group_add does: the
 *    run's new pages fill the pool entry's open groups in turn, each page
 *    on a node outside its group, and the groups that fill up are closed
 *    (their parity page sent) once their members are in.
 * Every other page (mirror, in-use slots with parity, spilled slots) and
 * any page whose store failed or whose plan no longer holds goes
 * slot_write's way afterwards, which handles every case. The run's
 * stripes are held throughout, taken in stripe order. */

/* Mirror: both copies of slot s's page go with the run, where they live
 * (an in-use slot whose two nodes are usable and within their offers), or
 * for a new slot to two nodes picked as rb_place() does. Anything else (a
 * copy lost, a node giving memory back, no room) is left to slot_write's
 * way (w->node stays -1). */
static void wb_plan_mirror(struct remote_backend *rb, const struct slot *s,
			   struct wb_plan *w)
{
	if (rb_slot_mapped(s)) {
		for (unsigned r = 0; r < 2; r++)
			if (!rb_copy_valid(rb, s, r) || !rb_usable(rb, s->n[r]) ||
			    rb_over_offer(rb, s->n[r]))
				return;
		w->node = s->n[0];
		w->node2 = s->n[1];
		w->inplace = true;
		return;
	}
	bool exclude[CONFIG_MAX_NODES] = { false };
	int a = rb_pick(rb, exclude);
	if (a < 0)
		return;
	exclude[a] = true;
	int b = rb_pick(rb, exclude);
	if (b < 0)
		return;
	w->node = a;
	w->node2 = b;
}

/* Slots slots[0..n) (n <= WBATCH, distinct), whole pages page[k]. Caller
 * holds their stripes (stripes_lock). */
int rb_write_slots(struct remote_backend *rb, const uint64_t *slots,
		   const uint8_t *const *page, unsigned n)
{
	struct wb_plan w[WBATCH];
	struct store_req st[NODE_BATCH_MAX];
	unsigned ns = 0;
	struct ppool *p = NULL;
	struct wb_groups *G = NULL;
	int rc = 0;

	if (rb->gsize) {
		p = rb_pool_take(rb);
		G = p->wb;      /* allocated at open */
		G->n = 0;
	}
	/* plan */
	for (unsigned k = 0; k < n; k++) {
		uint64_t i = slots[k];
		struct slot *s = &rb->slots[i];
		w[k] = (struct wb_plan){ .i = i, .page = page[k], .node = -1, .gid = -1,
					 .st = -1, .node2 = -1, .st2 = -1 };
		if (s->spilled)
			continue;
		if (rb->copies == 2) {
			wb_plan_mirror(rb, s, &w[k]);
		} else if (rb->gsize) {
			if (!p || rb_slot_mapped(s) || rb->slot_grp[i] ||
			    !rb_wb_plan_parity(rb, p, G, &w[k]))
				w[k].node = -1;
		} else if (rb_slot_mapped(s)) {
			int old = rb_copy_valid(rb, s, 0) ? s->n[0] : -1;
			if (old >= 0 && rb_usable(rb, (unsigned)old) && !rb_over_offer(rb, (unsigned)old)) {
				w[k].node = old;
				w[k].inplace = true;
			}
		} else if (s->n[0] == NO_NODE) {
			bool exclude[CONFIG_MAX_NODES] = { false };
			w[k].node = rb_pick(rb, exclude);
		}
		if (w[k].node >= 0) {
			/* before the store: a restart after it makes the
			 * copy lost, not valid */
			w[k].gen = (uint8_t)atomic_load(&rb->nodes[w[k].node].gen);
			w[k].st = (int)ns;
			st[ns++] = (struct store_req){ .slot = i, .version = s->version + 1,
						       .page = w[k].page, .node = (uint8_t)w[k].node };
		}
		if (w[k].node2 >= 0) {
			w[k].gen2 = (uint8_t)atomic_load(&rb->nodes[w[k].node2].gen);
			w[k].st2 = (int)ns;
			st[ns++] = (struct store_req){ .slot = i, .version = s->version + 1,
						       .page = w[k].page, .node = (uint8_t)w[k].node2 };
		}
	}
	/* store (mirror: both copies; parity: the pages of the groups the
	 * run fills too) */
	if (G)
		rb_spec_parity(rb, G, w, n, st, &ns);
	if (ns)
		rb_node_batch(rb, BO_STORE, st, ns);
	for (unsigned q = 0; G && q < G->n; q++)
		if (G->spec[q] >= 0)
			G->spec_rc[q] = st[G->spec[q]].rc;
	/* commit: without parity page by page; with parity group by group
	 * (they share the pool entry's buffer: each is closed, its parity
	 * page sent, before the next one's members go in) */
	for (unsigned q = 0; q < (G ? G->n : 1); q++) {
		struct parity_group *g = G ? parity_group_at(&rb->pt, G->gid[q]) : NULL;
		if (G && G->fresh[q]) {
			/* the group before it is closed: the buffer is its */
			pthread_mutex_lock(rb_glock(rb, (uint64_t)G->gid[q]));
			memset(p->buf, 0, PAGE);
			g->local = p->buf;
			pthread_mutex_unlock(rb_glock(rb, (uint64_t)G->gid[q]));
		}
		for (unsigned k = 0; k < n; k++) {
			struct wb_plan *x = &w[k];
			if (x->st < 0 || (G && x->gid != G->gid[q]))
				continue;
			struct slot *s = &rb->slots[x->i];
			struct rnode *nd = &rb->nodes[x->node];
			uint64_t v = s->version + 1;
			if (st[x->st].rc || (x->st2 >= 0 && st[x->st2].rc)) {
				/* mirror: a new slot's copy that did go in is
				 * garbage (slot_write places both again) */
				if (!x->inplace && x->st2 >= 0) {
					if (!st[x->st].rc)
						(void)rb_node_op(rb, (unsigned)x->node, OP_DROP,
								 x->i, v, NULL);
					if (!st[x->st2].rc)
						(void)rb_node_op(rb, (unsigned)x->node2, OP_DROP,
								 x->i, v, NULL);
				}
				x->st = -1;     /* slot_write's way */
				continue;
			}
			if (g) {
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
					/* the group changed under us (a member
					 * moved to that node): our copy is garbage */
					(void)rb_node_op(rb, (unsigned)x->node, OP_DROP, x->i, v, NULL);
					x->st = -1;
					continue;
				}
			} else if (!x->inplace) {
				s->n[0] = (uint8_t)x->node;
				s->g[0] = x->gen;
				if (x->node2 >= 0) {
					struct rnode *nd2 = &rb->nodes[x->node2];
					s->n[1] = (uint8_t)x->node2;
					s->g[1] = x->gen2;
					atomic_fetch_add(&nd2->placed, 1);
					atomic_fetch_add(&nd2->held, 1);
					atomic_fetch_sub(&nd2->free_pages, 1);
				}
			}
			if (!x->inplace) {
				atomic_fetch_add(&nd->placed, 1);
				atomic_fetch_add(&nd->held, 1);
				atomic_fetch_sub(&nd->free_pages, 1);
				atomic_fetch_add(&rb->mapped, 1);
			}
			s->version = v;
			s->lost = 0;
			x->node = -2;   /* done */
		}
		if (G && G->full[q]) {
			/* filled up: it keeps its parity in a buffer of its
			 * own until close_batch sends it (the pool entry's
			 * goes to the next group); or nothing went in after
			 * all: it is freed (a later page opens another) */
			pthread_mutex_lock(rb_glock(rb, (uint64_t)G->gid[q]));
			if (g->nmem) {
				memcpy(G->par[q], p->buf, PAGE);
				g->local = G->par[q];
			} else {
				rb_spec_drop(rb, G, q, g->pkey, true);
				parity_group_free(&rb->pt, (uint32_t)G->gid[q]);
				G->full[q] = false;
			}
			pthread_mutex_unlock(rb_glock(rb, (uint64_t)G->gid[q]));
		}
	}
	if (G) {
		rb_close_batch(rb, G);
		pthread_mutex_unlock(&p->lock);
	}
	if (rb->gsize)
		rb_overwrite_batch(rb, w, n);
	/* everything else, one page at a time */
	for (unsigned k = 0; k < n; k++)
		if (w[k].node != -2) {
			int r = rb_slot_write(rb, w[k].i, w[k].page);
			if (r && !rc)
				rc = r;
		}
	return rc;
}

/* Slots i0 .. i0+n-1 (n <= WBATCH), whole pages from buf (NULL: zeros). */
static int write_pages(struct remote_backend *rb, const uint8_t *buf, uint64_t i0,
		       unsigned n)
{
	static const uint8_t zeros[PAGE];
	uint64_t slots[WBATCH];
	const uint8_t *page[WBATCH];
	uint16_t order[WBATCH];

	for (unsigned k = 0; k < n; k++) {
		slots[k] = i0 + k;
		page[k] = buf ? buf + (size_t)k * PAGE : zeros;
	}
	unsigned u = rb_stripes_lock(rb, slots, n, order);
	int rc = rb_write_slots(rb, slots, page, n);
	rb_stripes_unlock(rb, order, u);
	return rc;
}

int rb_write_range(struct remote_backend *rb, const void *buf, uint64_t off,
		   uint64_t len)
{
	static const uint8_t zeros[PAGE];
	uint8_t page[PAGE];
	int rc = 0;

	while (len) {
		uint64_t i = off / PAGE;
		uint32_t in = (uint32_t)(off % PAGE);
		uint32_t n = PAGE - in < len ? PAGE - in : (uint32_t)len;
		if (in == 0 && len >= 2 * PAGE) {
			/* a run of whole pages */
			uint64_t k = len / PAGE < WBATCH ? len / PAGE : WBATCH;
			rc = write_pages(rb, buf, i, (unsigned)k);
			if (rc)
				return rc;
			if (buf)
				buf = (const uint8_t *)buf + k * PAGE;
			off += k * PAGE;
			len -= k * PAGE;
			continue;
		}
		pthread_mutex_lock(rb_stripe(rb, i));
		if (in == 0 && n == PAGE) {
			rc = rb_slot_write(rb, i, buf ? buf : zeros);
		} else if (!(rc = rb_slot_read(rb, i, page))) {
			/* a partial slot: read-modify-write */
			if (buf)
				memcpy(page + in, buf, n);
			else
				memset(page + in, 0, n);
			rc = rb_slot_write(rb, i, page);
		}
		pthread_mutex_unlock(rb_stripe(rb, i));
		if (rc)
			return rc;
		if (buf)
			buf = (const uint8_t *)buf + n;
		off += n;
		len -= n;
	}
	return 0;
}

int remote_write(void *priv, const void *buf, uint64_t off, uint32_t len)
{
	struct remote_backend *rb = priv;
	int rc = rb_check_range(rb, off, len);

	if (rc)
		return rc;
	atomic_fetch_add(&rb->writes, 1);
	return rb_write_range(rb, buf, off, len);
}

int remote_flush(void *priv)
{
	/* Every write is stored on its node(s) before it is acknowledged. */
	(void)priv;
	return 0;
}
