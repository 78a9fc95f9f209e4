/* parity.c - parity group bookkeeping and XOR arithmetic; see parity.h. */
#include "cluster/parity.h"

#include "common/xor.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int parity_table_init(struct parity_table *t, uint32_t ngroups, unsigned gsize)
{
	memset(t, 0, sizeof(*t));
	if (gsize < 2 || gsize > PARITY_MAX_N || !ngroups)
		return -EINVAL;
	t->g = calloc(ngroups, sizeof(*t->g));
	t->free = malloc(ngroups * sizeof(*t->free));
	if (!t->g || !t->free) {
		free(t->g);
		free(t->free);
		return -ENOMEM;
	}
	t->n = ngroups;
	t->gsize = gsize;
	/* lowest ids first: pop from the end */
	for (uint32_t i = 0; i < ngroups; i++)
		t->free[i] = ngroups - 1 - i;
	t->nfree = ngroups;
	pthread_mutex_init(&t->lock, NULL);
	return 0;
}

void parity_table_fini(struct parity_table *t)
{
	if (!t->g)
		return;
	free(t->g);
	free(t->free);
	pthread_mutex_destroy(&t->lock);
	memset(t, 0, sizeof(*t));
}

int64_t parity_group_alloc(struct parity_table *t, uint8_t *local)
{
	pthread_mutex_lock(&t->lock);
	if (!t->nfree) {
		pthread_mutex_unlock(&t->lock);
		return -ENOSPC;
	}
	uint32_t id = t->free[--t->nfree];
	uint32_t ep = ++t->epoch;
	pthread_mutex_unlock(&t->lock);
	struct parity_group *g = &t->g[id];
	memset(g, 0, sizeof(*g));
	g->state = PG_OPEN;
	g->pn = PARITY_NO_NODE;
	g->pkey = (uint64_t)ep << 32 | id;
	g->local = local;
	if (local)
		memset(local, 0, PARITY_PAGE);
	return id;
}

void parity_group_free(struct parity_table *t, uint32_t id)
{
	t->g[id].state = PG_FREE;
	t->g[id].nmem = 0;
	t->g[id].local = NULL;
	pthread_mutex_lock(&t->lock);
	t->free[t->nfree++] = id;
	pthread_mutex_unlock(&t->lock);
}

uint32_t parity_groups_used(struct parity_table *t)
{
	pthread_mutex_lock(&t->lock);
	uint32_t u = t->n - t->nfree;
	pthread_mutex_unlock(&t->lock);
	return u;
}

bool parity_group_has_node(const struct parity_group *g, uint8_t node)
{
	for (unsigned k = 0; k < g->nmem; k++)
		if (g->m[k].node == node)
			return true;
	return false;
}

int parity_member_add(struct parity_group *g, unsigned gsize, uint64_t slot,
		      uint64_t version, uint8_t node, uint8_t gen)
{
	if (g->nmem >= gsize || g->nmem >= PARITY_MAX_N)
		return -ENOSPC;
	if (parity_group_has_node(g, node))
		return -EEXIST;
	g->m[g->nmem++] = (struct parity_member){ slot, version, node, gen };
	return 0;
}

int parity_member_find(const struct parity_group *g, uint64_t slot)
{
	for (unsigned k = 0; k < g->nmem; k++)
		if (g->m[k].slot == slot)
			return (int)k;
	return -ENOENT;
}

void parity_member_remove(struct parity_group *g, unsigned idx)
{
	if (idx >= g->nmem)
		return;
	g->m[idx] = g->m[--g->nmem];
}

bool parity_group_sparse(const struct parity_group *g, unsigned gsize)
{
	return g->state == PG_CLOSED && g->nmem > 0 && 2u * g->nmem <= gsize;
}

void parity_delta(void *delta, const void *old_page, const void *new_page)
{
	memcpy(delta, old_page, PARITY_PAGE);
	xor_into(delta, new_page, PARITY_PAGE);
}

void parity_reconstruct(void *out, const void *parity,
			const void *const *pages, unsigned n)
{
	memcpy(out, parity, PARITY_PAGE);
	for (unsigned k = 0; k < n; k++)
		xor_into(out, pages[k], PARITY_PAGE);
}
