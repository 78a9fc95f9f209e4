/* fanout.c - requests to the nodes: many at once (grouped per node,
 * every node's sent before any answer is taken) and one at a time. */
#include "cluster/remote/rb.h"

void rb_fetch_batch(struct remote_backend *rb, struct cluster_fetch *f,
		    const uint8_t *node, unsigned n, struct cluster_fetch *tmp,
		    unsigned *from)
{
	unsigned first[CONFIG_MAX_NODES + 1] = { 0 };
	struct rconn *c[CONFIG_MAX_NODES] = { NULL };
	int crc[CONFIG_MAX_NODES] = { 0 };

	/* group the entries by node: tmp[first[j] .. first[j+1]) */
	for (unsigned k = 0; k < n; k++)
		first[node[k] + 1]++;
	for (unsigned j = 0; j < CONFIG_MAX_NODES; j++)
		first[j + 1] += first[j];
	{
		unsigned at[CONFIG_MAX_NODES];
		memcpy(at, first, sizeof(at));
		for (unsigned k = 0; k < n; k++) {
			from[at[node[k]]] = k;
			tmp[at[node[k]]++] = f[k];
		}
	}
	for (unsigned j = 0; j < rb->nn; j++) {
		unsigned cnt = first[j + 1] - first[j];
		if (!cnt)
			continue;
		if (cnt > FETCH_BATCH_NODE)
			abort();        /* callers batch at most that much */
		if (!rb_usable(rb, j)) {
			crc[j] = -EHOSTDOWN;
			continue;
		}
		if (!(c[j] = rb_conn_get(rb, j, &crc[j])))
			continue;
		for (unsigned k = first[j]; k < first[j + 1] && !crc[j]; k += FRAME_BATCH_MAX) {
			unsigned m = first[j + 1] - k < FRAME_BATCH_MAX ?
				     first[j + 1] - k : FRAME_BATCH_MAX;
			crc[j] = cluster_client_fetch_many_start(c[j]->cl, &tmp[k], m);
		}
	}
	for (unsigned j = 0; j < rb->nn; j++) {
		if (!c[j])
			continue;
		/* take every reply that is due, even after an error */
		for (unsigned k = first[j]; k < first[j + 1]; k += FRAME_BATCH_MAX) {
			unsigned m = first[j + 1] - k < FRAME_BATCH_MAX ?
				     first[j + 1] - k : FRAME_BATCH_MAX;
			if (!cluster_client_pending(c[j]->cl))
				break;
			int rc = cluster_client_wait_fetch_many(c[j]->cl, &tmp[k], m);
			if (rc && !crc[j])
				crc[j] = rc;
		}
		rb_conn_put(rb, j, c[j], crc[j]);
	}
	for (unsigned j = 0; j < rb->nn; j++)
		for (unsigned k = first[j]; k < first[j + 1]; k++) {
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

/* Requests of several kinds at once (st[k].op each): one request per
 * node and kind, every one sent (pipelined on the node's connection)
 * before any answer is taken, so the set costs one round trip. At most
 * FRAME_BATCH_MAX of one kind per node (callers keep within it). */
void rb_node_batch_mixed(struct remote_backend *rb, struct store_req *st, unsigned n)
{
	enum { NB = CONFIG_MAX_NODES * BO_COUNT };   /* node j, kind o: j * BO_COUNT + o */
	struct cluster_store cs[NODE_BATCH_MAX];
	unsigned todo[NODE_BATCH_MAX];
	unsigned first[NB + 1] = { 0 };
	struct rconn *c[CONFIG_MAX_NODES] = { NULL };
	int crc[NB] = { 0 };
	bool sent[NB] = { false };

	/* group by node and kind: cs[first[b] .. first[b+1]), todo maps back */
	for (unsigned k = 0; k < n; k++)
		first[st[k].node * BO_COUNT + st[k].op + 1]++;
	for (unsigned b = 0; b < NB; b++)
		first[b + 1] += first[b];
	{
		unsigned at[NB];
		memcpy(at, first, sizeof(at));
		for (unsigned k = 0; k < n; k++) {
			unsigned x = at[st[k].node * BO_COUNT + st[k].op]++;
			todo[x] = k;
			cs[x] = (struct cluster_store){ .kind = st[k].kind, .key = st[k].slot,
							.version = st[k].version,
							.page = st[k].page };
		}
	}
	for (unsigned j = 0; j < rb->nn; j++) {
		unsigned b0 = j * BO_COUNT;
		if (first[b0 + BO_COUNT] == first[b0])
			continue;
		int rc = 0;
		if (!rb_usable(rb, j))
			rc = -EHOSTDOWN;
		else
			c[j] = rb_conn_get(rb, j, &rc);
		for (unsigned b = b0; b < b0 + BO_COUNT; b++) {
			unsigned cnt = first[b + 1] - first[b];
			if (!cnt)
				continue;
			if (cnt > FRAME_BATCH_MAX)
				crc[b] = -E2BIG;        /* callers keep within it */
			else if (!c[j])
				crc[b] = rc;
			else if (!(crc[b] = batch_start(c[j]->cl, (enum batch_op)(b - b0),
							 &cs[first[b]], cnt)))
				sent[b] = true;
		}
	}
	for (unsigned j = 0; j < rb->nn; j++) {
		unsigned b0 = j * BO_COUNT;
		int trc = 0;            /* the first transport error, for conn_put */
		for (unsigned b = b0; b < b0 + BO_COUNT && c[j]; b++) {
			if (!sent[b])
				continue;
			/* the answers come in the order the requests went */
			int rc = batch_wait(c[j]->cl, (enum batch_op)(b - b0),
					    &cs[first[b]], first[b + 1] - first[b]);
			if (rc)
				crc[b] = rc;
		}
		/* the first (later ones say only that the handle broke) */
		for (unsigned b = b0; b < b0 + BO_COUNT && c[j] && !trc; b++)
			if (rb_is_transport_error(crc[b]))
				trc = crc[b];
		if (c[j])
			rb_conn_put(rb, j, c[j], trc);
		for (unsigned x = first[b0]; x < first[b0 + BO_COUNT]; x++) {
			struct store_req *r = &st[todo[x]];
			int b = (int)(b0 + r->op);
			int rc = crc[b] ? crc[b] : cs[x].rc;
			r->rc = rc;
			if (r->op != BO_STORE)
				continue;
			if (rc == -ENOSPC)
				atomic_store(&rb->nodes[j].free_pages, 0);
			else if (!rc && r->kind == FK_DATA)
				atomic_fetch_add(&rb->nodes[j].stores, 1);
		}
	}
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
	}
	rb_conn_put(rb, i, c, rc);
	return rc;
}

int rb_parity_op(struct remote_backend *rb, unsigned i, enum pop op,
		 uint64_t key, uint64_t version, void *page)
{
	int rc;
	struct rconn *c = rb_conn_get(rb, i, &rc);

	if (!c)
		return rc;
	switch (op) {
	case POP_UPDATE:
		rc = cluster_client_parity_update(c->cl, key, version, page);
		break;
	case POP_STORE:
		rc = cluster_client_parity_store(c->cl, key, version, page);
		break;
	case POP_FETCH:
		rc = cluster_client_parity_fetch(c->cl, key, page, NULL);
		break;
	case POP_DROP:
		rc = cluster_client_parity_drop(c->cl, key, version);
		break;
	}
	rb_conn_put(rb, i, c, rc);
	return rc;
}
