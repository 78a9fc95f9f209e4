/* forward.h - the handles a node forwards parity updates on (an in-use
 * overwrite's old ^ new, sent on to the group's parity node): a pool of
 * client handles to every node of the cluster file (cluster/peerpool.h,
 * whose rules hold), shared by all inbound connections, and the leases
 * one inbound connection holds from it.
 *
 * Rules:
 *  - a connection leases a node's handle at its first forward there and
 *    keeps it while replies are due on it; it gives back all it holds
 *    (fwd_put_all) once they are taken, before it waits for anything
 *    else (its next request);
 *  - with leases held, a lease waits only for a node of higher index
 *    than all held (a fan-out, cluster/fanout.h), or not at all;
 *  - a handle that failed with a transport error is given back broken
 *    (closed), and that node's generation bumped: a reply due on the old
 *    handle is never taken from a new one. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/config.h"
#include "cluster/peerpool.h"

struct outbuf;

/* What the pool's handles connect to: the cluster file's nodes, with
 * one request (and a connect) bounded by timeout_ms. */
struct fwd_target {
	const struct cluster_config *cfg;
	int timeout_ms;
};

/* per_node handles to each node of t->cfg (t must outlive the pool). */
int fwd_pool_create(struct peerpool **out, const struct fwd_target *t,
		    unsigned per_node);

/* One inbound connection's leases, by config index. */
struct fwd_leases {
	struct peerpool *pool;
	int wait_ms;                    /* how long a lease may wait */
	struct peerpool_lease l[CONFIG_MAX_NODES];
	unsigned gen[CONFIG_MAX_NODES]; /* bumped by each broken give-back */
};

/* Node pn's handle, leased now if not held (wait: whether to wait when
 * all are leased), its owner set to owner. NULL with *rc and err. */
struct cluster_client *fwd_lease(struct fwd_leases *f, unsigned pn, uint64_t owner,
				 bool wait, int *rc, char *err, size_t errlen);
/* The handle held for pn (NULL: none). */
static inline struct cluster_client *fwd_held(const struct fwd_leases *f, unsigned pn)
{
	return f->l[pn].cl;
}
/* pn's handle failed with rc: given back broken if rc says the
 * connection is done for (a transport error). */
void fwd_failed(struct fwd_leases *f, unsigned pn, int rc);
/* pn's handle given back: broken if replies are still due on it. */
void fwd_put(struct fwd_leases *f, unsigned pn);
void fwd_put_all(struct fwd_leases *f);

/* The pool's stats lines (node stats: forward_conns ...). */
void fwd_stats_print(struct peerpool *p, unsigned per_node, struct outbuf *o);
