/* request.c - requests to the nodes: many at once (grouped per node,
 * every node's sent before any answer is taken) and one at a time. */
#include "cluster/remote/rb.h"

/* The pool's side of a fan-out (cluster/fanout.h): a connection to node
 * j taken from its pool (not for a node that is not usable now, unless
 * f->any) and given back, dropped after a transport error. */
struct cluster_client *rb_fan_get(void *ctx, unsigned j, int *rc)
{
	struct rb_fan *f = ctx;

	if (!f->any && !rb_usable(f->rb, j)) {
		*rc = -EHOSTDOWN;
		return NULL;
	}
	f->c[j] = rb_conn_get(f->rb, j, rc);
	return f->c[j] ? f->c[j]->cl : NULL;
}

void rb_fan_put(void *ctx, unsigned j, struct cluster_client *cl, int rc)
{
	struct rb_fan *f = ctx;

	(void)cl;
	rb_conn_put(f->rb, j, f->c[j], rc);
}

/* fetch_batch's fan-out: node j's entries are tmp[first[j] .. first[j+1]) */
struct fetch_fan {
	struct rb_fan fan;
	struct cluster_fetch *tmp;
	unsigned first[CONFIG_MAX_NODES + 1];
};

static unsigned fetch_chunk(unsigned left)
{
	return left < FRAME_BATCH_MAX ? left : FRAME_BATCH_MAX;
}

static int fetch_send(void *ctx, unsigned j, struct cluster_client *cl)
{
	struct fetch_fan *x = ctx;
	int rc = 0;

	for (unsigned k = x->first[j]; k < x->first[j + 1] && !rc; k += FRAME_BATCH_MAX)
		rc = cluster_client_fetch_many_start(cl, &x->tmp[k],
						     fetch_chunk(x->first[j + 1] - k));
	return rc;
}

static int fetch_wait(void *ctx, unsigned j, struct cluster_client *cl, int rc)
{
	struct fetch_fan *x = ctx;

	/* take every reply that is due, even after an error */
	for (unsigned k = x->first[j]; cl && k < x->first[j + 1]; k += FRAME_BATCH_MAX) {
		if (!cluster_client_pending(cl))
			break;
		int wrc = cluster_client_wait_fetch_many(cl, &x->tmp[k],
							 fetch_chunk(x->first[j + 1] - k));
		if (wrc && !rc)
			rc = wrc;
	}
	return rc;
}

static const struct fanout_ops fetch_ops = {
	rb_fan_get, fetch_send, fetch_wait, rb_fan_put
};

void rb_fetch_batch(struct remote_backend *rb, struct cluster_fetch *f,
		    const uint8_t *node, unsigned n, struct cluster_fetch *tmp,
		    unsigned *from)
{
	struct fetch_fan x = { .fan = { .rb = rb }, .tmp = tmp };
	bool busy[CONFIG_MAX_NODES] = { false };
	int crc[CONFIG_MAX_NODES] = { 0 };

	/* each node's share goes out as PAGE_FETCH_MANY requests of up to
	 * FRAME_BATCH_MAX entries, pipelined on one connection */
	fanout_group(node, n, rb->nn, x.first, from);
	for (unsigned k = 0; k < n; k++)
		tmp[k] = f[from[k]];
	for (unsigned j = 0; j < rb->nn; j++) {
		unsigned cnt = x.first[j + 1] - x.first[j];
		if (cnt > FETCH_BATCH_NODE)
			abort();        /* callers batch at most that much */
		busy[j] = cnt > 0;
	}
	fanout_run(&fetch_ops, &x, busy, rb->nn, crc);
	for (unsigned j = 0; j < rb->nn; j++)
		for (unsigned k = x.first[j]; k < x.first[j + 1]; k++) {
			struct cluster_fetch *d = &f[from[k]];
			d->rc = crc[j] ? crc[j] : tmp[k].rc;
			d->version_out = tmp[k].version_out;
			if (!d->rc && d->kind == FK_DATA)
				atomic_fetch_add(&rb->nodes[j].fetches, 1);
		}
}

static int batch_start(struct cluster_client *cl, enum batch_op op,
		       const struct cluster_store *cs, unsigned n)
{
	switch (op) {
	case BO_STORE: return cluster_client_store_many_start(cl, cs, n);
	case BO_PARITY_UPDATE: return cluster_client_parity_update_many_start(cl, cs, n);
	default: return cluster_client_drop_many_start(cl, cs, n);
	}
}

static int batch_wait(struct cluster_client *cl, enum batch_op op,
		      struct cluster_store *cs, unsigned n)
{
	switch (op) {
	case BO_STORE: return cluster_client_wait_store_many(cl, cs, n);
	case BO_PARITY_UPDATE: return cluster_client_wait_parity_update_many(cl, cs, n);
	default: return cluster_client_wait_drop_many(cl, cs, n);
	}
}

/* node_batch_mixed's fan-out: node j's requests of kind o are
 * cs[first[b] .. first[b+1]) for b = j * BO_COUNT + o; todo maps them back
 * to st. */
enum { MIXED_KEYS = CONFIG_MAX_NODES * BO_COUNT };
_Static_assert(MIXED_KEYS <= 256, "a node and kind fit a fanout_group key");
struct mixed_fan {
	struct rb_fan fan;
	struct store_req *st;
	struct cluster_store cs[NODE_BATCH_MAX];
	unsigned todo[NODE_BATCH_MAX];
	unsigned first[MIXED_KEYS + 1];
	int crc[MIXED_KEYS];
	bool sent[MIXED_KEYS];
};

static int mixed_send(void *ctx, unsigned j, struct cluster_client *cl)
{
	struct mixed_fan *x = ctx;

	for (unsigned b = j * BO_COUNT; b < (j + 1) * BO_COUNT; b++) {
		unsigned cnt = x->first[b + 1] - x->first[b];
		if (!cnt)
			continue;
		if (cnt > FRAME_BATCH_MAX)
			x->crc[b] = -E2BIG;     /* callers keep within it */
		else if (!(x->crc[b] = batch_start(cl, (enum batch_op)(b % BO_COUNT),
						    &x->cs[x->first[b]], cnt)))
			x->sent[b] = true;
	}
	return 0;
}

static int mixed_wait(void *ctx, unsigned j, struct cluster_client *cl, int rc)
{
	struct mixed_fan *x = ctx;
	struct remote_backend *rb = x->fan.rb;
	unsigned b0 = j * BO_COUNT;
	int trc = 0;            /* the first transport error, for conn_put */

	for (unsigned b = b0; b < b0 + BO_COUNT; b++) {
		unsigned cnt = x->first[b + 1] - x->first[b];
		if (!cl && cnt)         /* no connection: each kind fails */
			x->crc[b] = cnt > FRAME_BATCH_MAX ? -E2BIG : rc;
		if (!x->sent[b])
			continue;
		/* the answers come in the order the requests went */
		int wrc = batch_wait(cl, (enum batch_op)(b - b0), &x->cs[x->first[b]], cnt);
		if (wrc)
			x->crc[b] = wrc;
	}
	/* the first (later ones say only that the handle broke) */
	for (unsigned b = b0; b < b0 + BO_COUNT && cl && !trc; b++)
		if (rb_is_transport_error(x->crc[b]))
			trc = x->crc[b];
	for (unsigned k = x->first[b0]; k < x->first[b0 + BO_COUNT]; k++) {
		struct store_req *r = &x->st[x->todo[k]];
		int b = (int)(b0 + r->op);
		int rrc = x->crc[b] ? x->crc[b] : x->cs[k].rc;
		r->rc = rrc;
		if (r->op != BO_STORE)
			continue;
		if (rrc == -ENOSPC)
			atomic_store(&rb->nodes[j].free_pages, 0);
		else if (!rrc && r->kind == FK_DATA)
			atomic_fetch_add(&rb->nodes[j].stores, 1);
	}
	return trc;
}

static const struct fanout_ops mixed_ops = {
	rb_fan_get, mixed_send, mixed_wait, rb_fan_put
};

/* Requests of several kinds at once (st[k].op each): one request per
 * node and kind, every one sent (pipelined on the node's connection)
 * before any answer is taken, so the set costs one round trip. At most
 * FRAME_BATCH_MAX of one kind per node (callers keep within it). */
void rb_node_batch_mixed(struct remote_backend *rb, struct store_req *st, unsigned n)
{
	struct mixed_fan x = { .fan = { .rb = rb }, .st = st };
	uint8_t key[NODE_BATCH_MAX] = { 0 };
	bool busy[CONFIG_MAX_NODES];

	for (unsigned k = 0; k < n; k++)
		key[k] = (uint8_t)(st[k].node * BO_COUNT + st[k].op);
	fanout_group(key, n, MIXED_KEYS, x.first, x.todo);
	for (unsigned k = 0; k < n; k++) {
		const struct store_req *r = &st[x.todo[k]];
		x.cs[k] = (struct cluster_store){ .kind = r->kind, .key = r->slot,
						  .version = r->version, .page = r->page };
	}
	for (unsigned j = 0; j < rb->nn; j++)
		busy[j] = x.first[(j + 1) * BO_COUNT] > x.first[j * BO_COUNT];
	fanout_run(&mixed_ops, &x, busy, rb->nn, NULL);
}

/* All of one kind (see node_batch_mixed). */
void rb_node_batch(struct remote_backend *rb, enum batch_op op,
		   struct store_req *st, unsigned n)
{
	for (unsigned k = 0; k < n; k++)
		st[k].op = (uint8_t)op;
	rb_node_batch_mixed(rb, st, n);
}

void rb_store_batch(struct remote_backend *rb, struct store_req *st, unsigned n)
{
	rb_node_batch(rb, BO_STORE, st, n);
}

/* One request to node i, waited for: a data page (slot: its id) or a
 * parity page (slot: the group's key) stored, fetched or dropped, or a
 * parity update (page: the delta). */
int rb_node_op(struct remote_backend *rb, unsigned i, enum op op,
	       uint64_t slot, uint64_t version, void *page)
{
	struct rnode *nd = &rb->nodes[i];
	int rc;
	struct rconn *c = rb_conn_get(rb, i, &rc);

	if (!c)
		return rc;
	switch (op) {
	case OP_STORE:
		rc = cluster_client_page_store(c->cl, slot, version, page);
		if (rc == -ESTALE) {
			/* Our versions only grow (stripe lock), so a newer copy
			 * there is a leftover of an earlier swap device with
			 * our owner id: garbage. Drop it and store again. */
			rc = cluster_client_page_drop(c->cl, slot, UINT64_MAX);
			if (!rc || rc == -ENOENT)
				rc = cluster_client_page_store(c->cl, slot, version, page);
		}
		if (rc == -ENOSPC)
			atomic_store(&nd->free_pages, 0);
		else if (!rc)
			atomic_fetch_add(&nd->stores, 1);
		break;
	case OP_FETCH:
		rc = cluster_client_page_fetch(c->cl, slot, version, page, NULL);
		if (!rc)
			atomic_fetch_add(&nd->fetches, 1);
		break;
	case OP_DROP:
		rc = cluster_client_page_drop(c->cl, slot, version);
		break;
	case OP_PARITY_UPDATE:
		rc = cluster_client_parity_update(c->cl, slot, version, page);
		break;
	case OP_PARITY_STORE:
		rc = cluster_client_parity_store(c->cl, slot, version, page);
		break;
	case OP_PARITY_FETCH:
		rc = cluster_client_parity_fetch(c->cl, slot, page, NULL);
		break;
	case OP_PARITY_DROP:
		rc = cluster_client_parity_drop(c->cl, slot, version);
		break;
	}
	rb_conn_put(rb, i, c, rc);
	return rc;
}
