/* node_overwrite.c - page overwrites: the local store, then the parity delta
 * forwarded to the parity node, pipelined per connection. */
#include "cluster/node_int.h"

static int ow_end(struct inbound *ib, const struct ow_pending *p, int rc,
		  const char *err, struct frame_hdr *r);

/* For tests only: NVCACHED_TEST_STALL_FORWARD=ID:MS:N (read at start)
 * has node ID stall every Nth overwrite (PAGE_OVERWRITE or _MANY) for MS
 * ms between its local store and sending its delta on: the owner's
 * request times out (a transport error, the delta's fate unknown to it)
 * and the delta reaches the parity node after the owner's fallback, as
 * from a node that hung mid-request (tests/system/cluster_parity_unsure.sh). */
static void test_stall_forward(struct node *n)
{
	if (n->stall_every &&
	    atomic_fetch_add(&n->ow_count, 1) % n->stall_every == n->stall_every - 1) {
		log_warn("test mode: an overwrite stalls %u ms", n->stall_ms);
		usleep(n->stall_ms * 1000);
	}
}

/* A PAGE_OVERWRITE_MANY's working state (allocated at the first one):
 * the deltas, and their parity updates in runs, one run per parity node
 * (a fan-out, cluster/fanout.h, over the forwarding handles). */
struct ow_many {
	uint8_t deltas[FRAME_BATCH_MAX][PAGESTORE_PAGE];
	struct cluster_store s[FRAME_BATCH_MAX];
	unsigned idx[FRAME_BATCH_MAX];  /* s[x]'s entry number */
	/* parity node j's (config index) run: s[first[j] .. first[j+1]) */
	unsigned first[CONFIG_MAX_NODES + 1];
	char err[CONFIG_MAX_NODES][200];        /* its failure, in words */
	struct inbound *ib;
	struct batch_entry *res;
};

static struct cluster_client *ow_fwd_get(void *ctx, unsigned j, int *rc)
{
	struct ow_many *om = ctx;

	om->err[j][0] = '\0';
	/* nodes in index order, holding none before: may wait */
	return fwd_lease(&om->ib->fwd, j, om->ib->req.owner, true, rc, om->err[j],
			 sizeof(om->err[j]));
}

static int ow_fwd_send(void *ctx, unsigned j, struct cluster_client *cl)
{
	struct ow_many *om = ctx;

	return cluster_client_parity_update_many_start(cl, &om->s[om->first[j]],
						       om->first[j + 1] - om->first[j]);
}

/* Parity node j's answers into res: FS_PARITY_LOST where a delta was not
 * surely taken (logged once per parity node). */
static int ow_fwd_wait(void *ctx, unsigned j, struct cluster_client *cl, int rc)
{
	struct ow_many *om = ctx;
	struct inbound *ib = om->ib;
	struct node *n = ib->node;
	char *err = om->err[j];

	if (!rc)
		rc = cluster_client_wait_parity_update_many(cl, &om->s[om->first[j]],
							    om->first[j + 1] - om->first[j]);
	if (rc && cl && !err[0])
		snprintf(err, sizeof(om->err[j]), "%s", cluster_client_last_error(cl));
	unsigned lost = 0;
	int first = 0;
	for (unsigned x = om->first[j]; x < om->first[j + 1]; x++) {
		int frc = rc ? rc : om->s[x].rc;
		if (!frc) {
			atomic_fetch_add(&n->forwards, 1);
			continue;
		}
		first = first ? first : frc;
		lost++;
		atomic_fetch_add(&n->forward_errors, 1);
		om->res[om->idx[x]].status = FS_PARITY_LOST;
	}
	if (lost)
		log_warn("%s: %u overwrites of owner %" PRIu64 " stored, but node %u "
			 "did not take their parity updates (%s%s%s): the owner "
			 "recomputes those groups", ib->c.peer, lost, ib->req.owner,
			 n->cfg.nodes[j].id, strerror(-first), err[0] ? ": " : "", err);
	return rc;
}

static void ow_fwd_put(void *ctx, unsigned j, struct cluster_client *cl, int rc)
{
	struct ow_many *om = ctx;

	(void)cl;
	fwd_failed(&om->ib->fwd, j, rc);
	fwd_put(&om->ib->fwd, j);
}

static const struct fanout_ops ow_fwd_ops = {
	ow_fwd_get, ow_fwd_send, ow_fwd_wait, ow_fwd_put
};

/* A PAGE_OVERWRITE_MANY request: each entry as a PAGE_OVERWRITE (old page
 * out, new one in), in order; then the deltas, one PARITY_UPDATE_MANY per
 * parity node; then one reply with a status per entry. The request is
 * refused whole when an entry names a parity node that is not in the
 * cluster file, or this node. */
const void *serve_overwrite_many(struct inbound *ib, const uint8_t *payload,
				 int *rc)
{
	struct node *n = ib->node;
	struct frame_hdr *q = &ib->req, *r = &ib->rep;
	struct batch_ow e[FRAME_BATCH_MAX];
	struct batch_entry res[FRAME_BATCH_MAX];
	unsigned pidx[FRAME_BATCH_MAX], cnt = 0;
	const uint8_t *pages;
	const char *why = "";

	*rc = batch_ow_get(payload, q->payload_len, e, &cnt, &pages, &why);
	for (unsigned k = 0; !*rc && k < cnt; k++) {
		const struct cluster_node *pn = config_node_find(&n->cfg, e[k].parity_node);
		if (!pn || e[k].parity_node == n->self) {
			why = pn ? "overwrite-many request: the parity node is this node" :
				   "overwrite-many request: a parity node not in the cluster file";
			*rc = -EPROTO;
		} else {
			pidx[k] = (unsigned)(pn - n->cfg.nodes);
		}
	}
	if (!batch_reply_buf(ib, "overwrite-many", rc, why))
		return NULL;
	if (!ib->om && !(ib->om = malloc(sizeof(*ib->om)))) {
		*rc = -ENOMEM;
		return NULL;
	}
	struct ow_many *om = ib->om;
	uint8_t pkey[FRAME_BATCH_MAX] = { 0 };     /* parity node per entry */
	unsigned go[FRAME_BATCH_MAX], order[FRAME_BATCH_MAX], ng = 0;
	bool busy[CONFIG_MAX_NODES];
	/* the local part; each stored entry's delta goes to its parity node */
	for (unsigned k = 0; k < cnt; k++) {
		struct pagestore_key key = { q->owner, FK_DATA, e[k].key };
		const uint8_t *pg = pages + (size_t)k * PAGESTORE_PAGE;
		int lrc = pagestore_fetch(n->ps, &key, e[k].old_version, om->deltas[k], NULL);
		if (!lrc)
			lrc = pagestore_store(n->ps, &key, e[k].version, pg);
		res[k] = (struct batch_entry){ e[k].key, e[k].version, FK_DATA,
					       status_of(lrc) };
		if (lrc)
			continue;
		xor_into(om->deltas[k], pg, PAGESTORE_PAGE);
		pkey[ng] = (uint8_t)pidx[k];
		go[ng++] = k;
	}
	/* one run per parity node, entries in request order */
	fanout_group(pkey, ng, n->cfg.n_nodes, om->first, order);
	for (unsigned x = 0; x < ng; x++) {
		unsigned k = go[order[x]];
		om->idx[x] = k;
		om->s[x] = (struct cluster_store){ FK_PARITY, e[k].group, e[k].parity_version,
						   om->deltas[k], 0 };
	}
	for (unsigned j = 0; j < n->cfg.n_nodes; j++)
		busy[j] = om->first[j + 1] > om->first[j];
	om->ib = ib;
	om->res = res;
	test_stall_forward(n);
	fanout_run(&ow_fwd_ops, om, busy, n->cfg.n_nodes, NULL);
	for (unsigned k = 0; k < cnt; k++)
		batch_result_put(ib->batch, k, &res[k]);
	r->payload_len = batch_store_reply_len(cnt);
	return ib->batch;
}

/* A PAGE_OVERWRITE request: the page stored at old_version out, the new
 * one in, old ^ new to the parity node, then the reply (Nswap: the node
 * that stores an in-use page forwards the XOR, so that the swapping node
 * spends one round trip). 0, -ESTALE/-ENOENT (nothing stored), or
 * -EREMOTEIO: stored, but the parity node did not surely take the delta
 * (the owner recomputes that parity page).
 *
 * In two halves, so that a connection can have several in flight (see
 * ow_flush): ow_begin does the local part and sends the delta (1), or
 * fails (the reply's rc, its text in ib->rep); ow_end takes the parity
 * node's answer (rc: the wait's) into reply r. */
static int ow_begin(struct inbound *ib, const struct pagestore_key *key,
		    const uint8_t *payload, struct ow_pending *p)
{
	struct node *n = ib->node;
	struct frame_hdr *q = &ib->req, *r = &ib->rep;
	const struct cluster_node *pn = config_node_find(&n->cfg, q->peer_node);

	*p = (struct ow_pending){ q->request_id, q->owner, q->page_id,
				  q->parity_group, q->version, q->kind, 0, 0 };
	if (!pn || q->peer_node == n->self) {
		snprintf(r->text, sizeof(r->text), "parity node %u is %s", q->peer_node,
			 pn ? "this node" : "not in the cluster file");
		return -EPROTO;
	}
	p->pn = (unsigned)(pn - n->cfg.nodes);
	int rc = pagestore_fetch(n->ps, key, q->old_version, ib->page, NULL);
	if (rc)
		return rc;
	rc = pagestore_store(n->ps, key, q->version, payload);
	if (rc)
		return rc;
	xor_into(ib->page, payload, PAGESTORE_PAGE);
	test_stall_forward(n);
	char err[256] = "";
	/* ow_room gave back what this connection held if it had to wait */
	struct cluster_client *cl = fwd_lease(&ib->fwd, p->pn, q->owner, true, &rc, err,
					      sizeof(err));
	if (!cl)
		return ow_end(ib, p, rc, err, r);
	p->gen = ib->fwd.gen[p->pn];
	rc = cluster_client_parity_update_start(cl, q->parity_group,
						q->parity_version, ib->page);
	return rc ? ow_end(ib, p, rc, NULL, r) : 1;
}

/* The second half; err: what failed, when not the forwarding
 * connection's own last error. 0 or -EREMOTEIO. */
static int ow_end(struct inbound *ib, const struct ow_pending *p, int rc,
		  const char *err, struct frame_hdr *r)
{
	struct node *n = ib->node;
	struct cluster_client *cl = fwd_held(&ib->fwd, p->pn);
	char why[256] = "";

	if (err)
		snprintf(why, sizeof(why), "%s", err);
	else if (rc && cl)
		snprintf(why, sizeof(why), "%s", cluster_client_last_error(cl));
	fwd_failed(&ib->fwd, p->pn, rc);
	if (rc) {
		uint32_t pid = n->cfg.nodes[p->pn].id;
		atomic_fetch_add(&n->forward_errors, 1);
		log_warn("%s: overwrite of page %" PRIu64 " of owner %" PRIu64 " stored, "
			 "but node %u did not take its parity update (%s%s%s): the owner "
			 "recomputes parity group %" PRIu64, ib->c.peer, p->page_id,
			 p->owner, pid, strerror(-rc), why[0] ? ": " : "", why,
			 p->group);
		snprintf(r->text, sizeof(r->text), "node %u: %s", pid, strerror(-rc));
		return -EREMOTEIO;
	}
	atomic_fetch_add(&n->forwards, 1);
	return 0;
}

/* One at a time (nothing of this connection's in flight). */
int serve_overwrite(struct inbound *ib, const struct pagestore_key *key,
		    const uint8_t *payload)
{
	struct ow_pending p;
	int rc = ow_begin(ib, key, payload, &p);
	if (rc == 1)
		rc = ow_end(ib, &p, cluster_client_wait(fwd_held(&ib->fwd, p.pn)), NULL,
			    &ib->rep);
	fwd_put_all(&ib->fwd);
	return rc;
}

/* The replies of the overwrites in flight, in order: each waits for its
 * parity node's answer. 0, or the send's error (the connection is done). */
int ow_flush(struct inbound *ib)
{
	struct node *n = ib->node;
	struct frame_hdr *r = &ib->orep;
	int err = 0;

	for (unsigned k = 0; k < ib->now; k++) {
		const struct ow_pending *p = &ib->ow[k];
		/* its handle failed and was closed (by a later overwrite):
		 * the delta's fate is unknown, and a new handle's reply is
		 * another's */
		struct cluster_client *cl = ib->fwd.gen[p->pn] == p->gen ?
					    fwd_held(&ib->fwd, p->pn) : NULL;
		/* -ECANCELED: no reason to close a newer handle (fwd_failed) */
		int rc = cl ? cluster_client_wait(cl) : -ECANCELED;
		memset(r, 0, sizeof(*r));
		r->type = FT_PAGE_OVERWRITE;
		r->reply = true;
		r->request_id = p->request_id;
		r->node_id = n->self;
		r->incarnation = n->incarnation;
		r->kind = p->kind;
		r->owner = p->owner;
		r->page_id = p->page_id;
		r->parity_group = p->group;
		r->version = p->version;
		rc = ow_end(ib, p, rc, cl ? NULL : "its connection failed earlier", r);
		reply_status(r, rc);
		if (!err)
			err = conn_send(&ib->c, r, NULL);
	}
	ib->now = 0;
	fwd_put_all(&ib->fwd);
	return err;
}

/* Before an overwrite joins the pipeline: a connection with overwrites in
 * flight leases its parity node's handle without waiting, and when none is
 * free it flushes first, giving back all it holds (peerpool.h: a holder
 * never waits on a peer of lower index, so one waiting holds nothing). 0,
 * or ow_flush's error. */
int ow_room(struct inbound *ib)
{
	struct node *n = ib->node;
	const struct cluster_node *pn = config_node_find(&n->cfg, ib->req.peer_node);
	char err[256];
	int rc;

	if (!ib->now || !pn || ib->req.peer_node == n->self)
		return 0;
	unsigned j = (unsigned)(pn - n->cfg.nodes);
	if (fwd_held(&ib->fwd, j) ||
	    fwd_lease(&ib->fwd, j, ib->req.owner, false, &rc, err, sizeof(err)))
		return 0;
	return ow_flush(ib);
}

/* An overwrite, pipelined: 1 when it is in flight (its reply comes from
 * ow_flush), else 0 with ib->rep its reply (it failed before the parity
 * node was asked: that reply must wait for the ones in flight). */
int ow_pipe(struct inbound *ib, const uint8_t *payload)
{
	struct frame_hdr *q = &ib->req;
	struct pagestore_key key = { q->owner, q->kind, q->page_id };

	reply_init(ib);
	node_count_request(ib->node, q->type);
	int rc = ow_begin(ib, &key, payload, &ib->ow[ib->now]);
	if (rc == 1) {
		ib->now++;
		return 1;
	}
	reply_status(&ib->rep, rc);
	return 0;
}
