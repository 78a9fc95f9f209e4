/* parity.c - parity group bookkeeping and XOR arithmetic; see parity.h. */
#include "cluster/parity.h"

#include "common/xor.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint32_t chunks_for(uint32_t groups)
{
	return (uint32_t)(((uint64_t)groups + PARITY_CHUNK - 1) / PARITY_CHUNK);
}

/* Make ids n..upto-1 exist (their chunks allocated) and free, lowest
 * first on the stack. Caller holds the lock (or is init). */
static int table_extend(struct parity_table *t, uint32_t upto)
{
	uint32_t n = atomic_load_explicit(&t->n, memory_order_relaxed);
	for (uint32_t c = n / PARITY_CHUNK; c < chunks_for(upto); c++)
		if (!t->chunk[c] && !(t->chunk[c] = calloc(PARITY_CHUNK, sizeof(**t->chunk))))
			return -ENOMEM;
	/* the stack pops from its end: push the highest id first */
	for (uint32_t id = upto; id-- > n;)
		t->free[t->nfree++] = id;
	atomic_store_explicit(&t->n, upto, memory_order_release);
	return 0;
}

int parity_table_init(struct parity_table *t, uint32_t ngroups,
		      uint32_t max_groups, unsigned gsize)
{
	memset(t, 0, sizeof(*t));
	if (gsize < 2 || gsize > PARITY_MAX_N || !ngroups || max_groups < ngroups)
		return -EINVAL;
	t->chunk = calloc(chunks_for(max_groups), sizeof(*t->chunk));
	t->free = malloc((size_t)max_groups * sizeof(*t->free));
	t->max = max_groups;
	t->gsize = gsize;
	pthread_mutex_init(&t->lock, NULL);
	if (!t->chunk || !t->free || table_extend(t, ngroups)) {
		parity_table_fini(t);
		return -ENOMEM;
	}
	return 0;
}

void parity_table_fini(struct parity_table *t)
{
	if (!t->free && !t->chunk)
		return;
	if (t->chunk)
		for (uint32_t c = 0; c < chunks_for(t->max); c++)
			free(t->chunk[c]);
	free(t->chunk);
	free(t->free);
	pthread_mutex_destroy(&t->lock);
	memset(t, 0, sizeof(*t));
}

uint64_t parity_table_bytes(struct parity_table *t)
{
	uint64_t chunks = chunks_for(parity_table_size(t));
	return chunks * PARITY_CHUNK * sizeof(struct parity_group) +
	       (uint64_t)t->max * sizeof(*t->free);
}

int64_t parity_group_alloc(struct parity_table *t, uint8_t *local)
{
	pthread_mutex_lock(&t->lock);
	uint32_t n = atomic_load_explicit(&t->n, memory_order_relaxed);
	if (!t->nfree && (n >= t->max ||
	    table_extend(t, n + PARITY_CHUNK < t->max ? n + PARITY_CHUNK : t->max) ||
	    !t->nfree)) {
		pthread_mutex_unlock(&t->lock);
		return -ENOSPC;
	}
	if (n != atomic_load_explicit(&t->n, memory_order_relaxed))
		t->grows++;
	uint32_t id = t->free[--t->nfree];
	uint32_t ep = ++t->epoch;
	pthread_mutex_unlock(&t->lock);
	struct parity_group *g = parity_group_at(t, id);
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
	struct parity_group *g = parity_group_at(t, id);
	g->state = PG_FREE;
	g->nmem = 0;
	g->local = NULL;
	pthread_mutex_lock(&t->lock);
	t->free[t->nfree++] = id;
	pthread_mutex_unlock(&t->lock);
}

uint32_t parity_groups_used(struct parity_table *t)
{
	pthread_mutex_lock(&t->lock);
	uint32_t u = atomic_load(&t->n) - t->nfree;
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
