/* forward.c - a node's forwarding handles; see forward.h. */
#include "cluster/forward.h"

#include "cluster/client.h"
#include "common/outbuf.h"

#include <errno.h>
#include <inttypes.h>

static int fwd_open(void *ctx, unsigned pn, struct cluster_client **out, char *err,
		    size_t errlen)
{
	const struct fwd_target *t = ctx;

	return cluster_client_open_node(out, t->cfg, t->cfg->nodes[pn].id, 0, 0,
					t->timeout_ms, err, errlen);
}

static void fwd_close(void *ctx, struct cluster_client *cl)
{
	(void)ctx;
	cluster_client_close(cl);
}

static const struct peerpool_ops fwd_pool_ops = { fwd_open, fwd_close };

int fwd_pool_create(struct peerpool **out, const struct fwd_target *t,
		    unsigned per_node)
{
	return peerpool_create(out, t->cfg->n_nodes, per_node, &fwd_pool_ops,
			       (void *)t);
}

struct cluster_client *fwd_lease(struct fwd_leases *f, unsigned pn, uint64_t owner,
				 bool wait, int *rc, char *err, size_t errlen)
{
	struct peerpool_lease *l = &f->l[pn];

	if (!l->cl) {
		*rc = peerpool_get(f->pool, pn, wait ? f->wait_ms : 0, l, err, errlen);
		if (*rc)
			return NULL;
	}
	cluster_client_set_owner(l->cl, owner);
	return l->cl;
}

void fwd_failed(struct fwd_leases *f, unsigned pn, int rc)
{
	if (f->l[pn].cl && (rc == -ECONNRESET || rc == -EPIPE || rc == -ETIMEDOUT ||
			    rc == -ENOTCONN || rc == -EPROTO)) {
		peerpool_put(f->pool, &f->l[pn], true);
		f->gen[pn]++;
	}
}

void fwd_put(struct fwd_leases *f, unsigned pn)
{
	if (f->l[pn].cl)
		peerpool_put(f->pool, &f->l[pn], cluster_client_pending(f->l[pn].cl) != 0);
}

void fwd_put_all(struct fwd_leases *f)
{
	for (unsigned k = 0; k < CONFIG_MAX_NODES; k++)
		fwd_put(f, k);
}

void fwd_stats_print(struct peerpool *p, unsigned per_node, struct outbuf *o)
{
	struct peerpool_stats ps;

	peerpool_stats_read(p, &ps);
	outbuf_printf(o, "forward_conns: %u\nforward_conns_per_node: %u\n"
		      "forward_conns_opened: %" PRIu64 "\nforward_conn_waits: %" PRIu64 "\n"
		      "forward_conn_wait_timeouts: %" PRIu64 "\n", ps.handles, per_node,
		      ps.opens, ps.waits, ps.wait_timeouts);
}
