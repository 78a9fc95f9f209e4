/* write.c - reads and writes of byte ranges; whole-page runs go out
 * batched, one request per node. */
#include "cluster/remote/rb.h"

/* Read one whole slot (zeros if never written). Caller holds the stripe. */
int rb_slot_read(struct remote_backend *rb, uint64_t i, void *page)
{
	struct slot *s = &rb->slots[i];

	if (s->lost) {
		atomic_fetch_add(&rb->read_errors, 1);
		return -EIO;
	}
	if (!rb_slot_mapped(s)) {
		memset(page, 0, PAGE);
		atomic_fetch_add(&rb->zero_reads, 1);
		return 0;
	}
	if (s->spilled)
		return rb->mode->spill_io(rb, false, i, page);
	return rb->mode->slot_read(rb, i, page);
}

/* Write one whole slot. Caller holds the stripe. */
static int slot_write(struct remote_backend *rb, uint64_t i, const void *page)
{
	int rc = rb->mode->slot_write(rb, i, page);

	if (!rc)
		rb->slots[i].lost = 0;
	return rc;
}

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

/* The run's plans, each left to slot_write's way until planned. */
void rb_wb_init(struct wb_plan *w, const uint64_t *slots, const uint8_t *const *page,
		unsigned n)
{
	for (unsigned k = 0; k < n; k++)
		w[k] = (struct wb_plan){ .i = slots[k], .page = page[k], .node = -1,
					 .gid = -1, .st = -1, .node2 = -1, .st2 = -1 };
}

/* w's store requests into st[*ns..] (none while w->node is -1). */
void rb_wb_request(struct remote_backend *rb, struct wb_plan *w,
		   struct store_req *st, unsigned *ns)
{
	uint64_t v = rb->slots[w->i].version + 1;

	if (w->node >= 0) {
		/* before the store: a restart after it makes the copy lost,
		 * not valid */
		w->gen = (uint8_t)atomic_load(&rb->nodes[w->node].gen);
		w->st = (int)*ns;
		st[(*ns)++] = (struct store_req){ .slot = w->i, .version = v,
						  .page = w->page, .node = (uint8_t)w->node };
	}
	if (w->node2 >= 0) {
		w->gen2 = (uint8_t)atomic_load(&rb->nodes[w->node2].gen);
		w->st2 = (int)*ns;
		st[(*ns)++] = (struct store_req){ .slot = w->i, .version = v,
						  .page = w->page, .node = (uint8_t)w->node2 };
	}
}

/* x's page is stored as planned and the slot map says where: counted, and
 * the slot's version moves on. */
void rb_wb_done(struct remote_backend *rb, struct wb_plan *x)
{
	struct slot *s = &rb->slots[x->i];

	if (!x->inplace) {
		struct rnode *nd = &rb->nodes[x->node];
		atomic_fetch_add(&nd->placed, 1);
		atomic_fetch_add(&nd->held, 1);
		atomic_fetch_sub(&nd->free_pages, 1);
		atomic_fetch_add(&rb->mapped, 1);
	}
	s->version++;
	s->lost = 0;
	x->node = -2;   /* done */
}

/* The run's pages that did not go with it, one at a time. */
int rb_wb_rest(struct remote_backend *rb, const struct wb_plan *w, unsigned n)
{
	int rc = 0;

	for (unsigned k = 0; k < n; k++)
		if (w[k].node != -2) {
			int r = slot_write(rb, w[k].i, w[k].page);
			if (r && !rc)
				rc = r;
		}
	return rc;
}

/* None and mirror: slot s's page goes with the run where it lives (an
 * in-use slot on usable nodes within their offers), or for a new slot to
 * the node(s) pick() gives. Anything else is left to slot_write's way
 * (w->node stays -1). */
static void wb_plan_copies(struct remote_backend *rb, const struct slot *s,
			   struct wb_plan *w)
{
	if (rb->copies == 2) {
		wb_plan_mirror(rb, s, w);
	} else if (rb_slot_mapped(s)) {
		int old = rb_copy_valid(rb, s, 0) ? s->n[0] : -1;
		if (old >= 0 && rb_usable(rb, (unsigned)old) && !rb_over_offer(rb, (unsigned)old)) {
			w->node = old;
			w->inplace = true;
		}
	} else if (s->n[0] == NO_NODE) {
		bool exclude[CONFIG_MAX_NODES] = { false };
		w->node = rb_pick(rb, exclude);
	}
}

/* Redundancy none and mirror: slots slots[0..n) (n <= WBATCH, distinct),
 * whole pages page[k] (see struct rb_mode). */
int rb_copies_write_slots(struct remote_backend *rb, const uint64_t *slots,
			  const uint8_t *const *page, unsigned n)
{
	struct wb_plan w[WBATCH];
	struct store_req st[NODE_BATCH_MAX];
	unsigned ns = 0;

	/* plan */
	rb_wb_init(w, slots, page, n);
	for (unsigned k = 0; k < n; k++) {
		if (!rb->slots[w[k].i].spilled)
			wb_plan_copies(rb, &rb->slots[w[k].i], &w[k]);
		rb_wb_request(rb, &w[k], st, &ns);
	}
	/* store (mirror: both copies) */
	if (ns)
		rb_node_batch(rb, BO_STORE, st, ns);
	/* commit, page by page */
	for (unsigned k = 0; k < n; k++) {
		struct wb_plan *x = &w[k];
		if (x->st < 0)
			continue;
		struct slot *s = &rb->slots[x->i];
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
		if (!x->inplace) {
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
		rb_wb_done(rb, x);
	}
	return rb_wb_rest(rb, w, n);
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
	int rc = rb->mode->write_slots(rb, slots, page, n);
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
			rc = slot_write(rb, i, buf ? buf : zeros);
		} else if (!(rc = rb_slot_read(rb, i, page))) {
			/* a partial slot: read-modify-write */
			if (buf)
				memcpy(page + in, buf, n);
			else
				memset(page + in, 0, n);
			rc = slot_write(rb, i, page);
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
