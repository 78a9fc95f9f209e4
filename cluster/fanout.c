/* fanout.c - requests to several nodes at once; see fanout.h. */
#include "cluster/fanout.h"

#include <stddef.h>
#include <string.h>

void fanout_group(const uint8_t *key, unsigned n, unsigned nkeys,
		  unsigned *first, unsigned *order)
{
	unsigned at[FANOUT_MAX_NODES];

	memset(first, 0, (nkeys + 1) * sizeof(*first));
	for (unsigned k = 0; k < n; k++)
		first[key[k] + 1]++;
	for (unsigned j = 0; j < nkeys; j++)
		first[j + 1] += first[j];
	memcpy(at, first, nkeys * sizeof(*first));
	for (unsigned k = 0; k < n; k++)
		order[at[key[k]]++] = k;
}

void fanout_run(const struct fanout_ops *ops, void *ctx, const bool *busy,
		unsigned n, int *rc)
{
	struct cluster_client *cl[FANOUT_MAX_NODES];
	int r[FANOUT_MAX_NODES];

	for (unsigned j = 0; j < n; j++) {
		if (!busy[j])
			continue;
		r[j] = 0;
		cl[j] = ops->get(ctx, j, &r[j]);
		if (cl[j])
			r[j] = ops->send(ctx, j, cl[j]);
	}
	for (unsigned j = 0; j < n; j++) {
		if (!busy[j])
			continue;
		r[j] = ops->wait(ctx, j, cl[j], r[j]);
		if (cl[j] && ops->put)
			ops->put(ctx, j, cl[j], r[j]);
		if (rc)
			rc[j] = r[j];
	}
}
