/* policy_core.c - page table, lists, move emission and the epoch profile
 * shared by all tiering policies (see policy_core.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/bigmem.h"
#include "pmem/policy_core.h"

#define PC_MIN_CAP 1024u

/* The page array, cache-line aligned (see struct pc_page); n entries, the
 * first `keep` copied from old, which is freed. NULL (old kept) when
 * memory ran out. */
static struct pc_page *pc_pages(struct pc_page *old, uint32_t keep, uint32_t n)
{
	struct pc_page *pg = aligned_alloc(_Alignof(struct pc_page),
					   (size_t)n * sizeof(*pg));
	if (!pg)
		return NULL;
	if (keep)
		memcpy(pg, old, (size_t)keep * sizeof(*pg));
	free(old);
	return pg;
}

static void pc_page_reset(struct pc_page *g, uint64_t key)
{
	memset(g, 0, sizeof(*g));
	g->key = key;
	g->prev = g->next = PC_NIL;
	g->tier = TIER_NONE;
}

int pc_init(struct pc *pc, const struct policy_config *cfg,
	    struct policy_counters *ctr, bool want_scratch)
{
	memset(pc, 0, sizeof(*pc));
	pc->ctr = ctr;
	pc->max_pages = cfg->max_pages;
	pc->capy[TIER_MRAM] = cfg->mram_pages;
	pc->capy[TIER_DRAM] = cfg->dram_pages;
	if (cfg->max_pages) {
		/* Indices are 32-bit; PC_NIL is reserved. */
		if (cfg->max_pages >= PC_NIL)
			return -EINVAL;
		pc->cap = (uint32_t)cfg->max_pages;
		pc->n = pc->cap;
		/* A live store's whole table at once: gigabytes for a large
		 * export, made in steps a stop request cuts short (bigmem.h;
		 * page-aligned, so the entries stay cache-line aligned). */
		size_t bytes = (size_t)pc->cap * sizeof(struct pc_page);
		pc->big = bytes >= BIGMEM_PAGE_MIN;
		pc->pg = pc->big ? bigmem_alloc(bytes, NULL) :
				   pc_pages(NULL, 0, pc->cap);
		if (!pc->pg)
			return errno == EINTR ? -EINTR : -ENOMEM;
		for (uint32_t i = 0; i < pc->cap; i++) {
			if (!(i & 0xfffff) && i && bigmem_stopping()) {
				pc_fini(pc);
				return -EINTR;
			}
			pc_page_reset(&pc->pg[i], i);
		}
		if (want_scratch) {
			size_t sb = (size_t)pc->cap * sizeof(uint32_t);
			pc->scratch = pc->big ? bigmem_alloc(sb, NULL) :
						malloc(sb);
			if (!pc->scratch) {
				int err = errno == EINTR ? -EINTR : -ENOMEM;
				pc_fini(pc);
				return err;
			}
		}
		return 0;
	}
	pc->cap = PC_MIN_CAP;
	pc->pg = pc_pages(NULL, 0, pc->cap);
	pc->ht_mask = 2 * PC_MIN_CAP - 1;
	pc->ht = malloc((pc->ht_mask + 1) * sizeof(uint32_t));
	if (!pc->pg || !pc->ht) {
		pc_fini(pc);
		return -ENOMEM;
	}
	memset(pc->ht, 0xff, (pc->ht_mask + 1) * sizeof(uint32_t));
	/* nvsim's scratch is (re)allocated at each profile step. */
	return 0;
}

int pc_init_fixed_hash(struct pc *pc, const struct policy_config *cfg,
		       struct policy_counters *ctr, uint32_t reserve,
		       bool want_scratch)
{
	struct policy_config c = *cfg;
	c.max_pages = 0;
	int rc = pc_init(pc, &c, ctr, false);
	if (rc < 0)
		return rc;
	if (reserve < PC_MIN_CAP)
		reserve = PC_MIN_CAP;
	uint64_t mask = 1;
	while (mask + 1 < (uint64_t)reserve * 2)
		mask = mask * 2 + 1;
	struct pc_page *pg = pc_pages(pc->pg, pc->n, reserve);
	uint32_t *ht = malloc((mask + 1) * sizeof(uint32_t));
	if (!pg || !ht) {
		free(ht);
		if (pg)
			pc->pg = pg;
		pc_fini(pc);
		return -ENOMEM;
	}
	memset(ht, 0xff, (mask + 1) * sizeof(uint32_t));
	free(pc->ht);
	if (want_scratch) {
		pc->scratch = malloc((size_t)reserve * sizeof(uint32_t));
		if (!pc->scratch) {
			pc->pg = pg;
			pc->ht = ht;
			pc_fini(pc);
			return -ENOMEM;
		}
	}
	pc->pg = pg;
	pc->cap = reserve;
	pc->ht = ht;
	pc->ht_mask = mask;
	pc->no_grow = true;
	return 0;
}

void pc_fini(struct pc *pc)
{
	if (pc->big) {
		bigmem_free(pc->pg, (size_t)pc->cap * sizeof(*pc->pg));
		bigmem_free(pc->scratch, (size_t)pc->cap * sizeof(uint32_t));
	} else {
		free(pc->pg);
		free(pc->scratch);
	}
	free(pc->ht);
	memset(pc, 0, sizeof(*pc));
}

int pc_copy(struct pc *dst, const struct pc *src)
{
	if (dst->max_pages || dst->no_grow || src->max_pages || src->no_grow)
		return -EINVAL;
	struct pc_page *pg = aligned_alloc(_Alignof(struct pc_page),
					   (size_t)src->cap * sizeof(*pg));
	uint32_t *ht = malloc((src->ht_mask + 1) * sizeof(uint32_t));
	if (!pg || !ht) {
		free(pg);
		free(ht);
		return -ENOMEM;
	}
	memcpy(pg, src->pg, (size_t)src->n * sizeof(*pg));
	memcpy(ht, src->ht, (src->ht_mask + 1) * sizeof(uint32_t));
	free(dst->pg);
	free(dst->ht);
	dst->pg = pg;
	dst->ht = ht;
	dst->n = src->n;
	dst->cap = src->cap;
	dst->ht_mask = src->ht_mask;
	dst->clock = src->clock;
	dst->used[0] = src->used[0];
	dst->used[1] = src->used[1];
	return 0;
}

static inline uint64_t pc_hash(uint64_t key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdull;
	key ^= key >> 33;
	return key;
}

uint32_t pc_find(const struct pc *pc, uint64_t page)
{
	if (pc->max_pages)
		return page < pc->max_pages ? (uint32_t)page : PC_NIL;
	for (uint64_t h = pc_hash(page) & pc->ht_mask;; h = (h + 1) & pc->ht_mask) {
		uint32_t i = pc->ht[h];
		if (i == PC_NIL || pc->pg[i].key == page)
			return i;
	}
}

static int pc_grow(struct pc *pc)
{
	if (pc->n == pc->cap) {
		if (pc->cap >= PC_NIL / 2)
			return -ENOMEM;
		uint32_t ncap = pc->cap * 2;
		struct pc_page *npg = pc_pages(pc->pg, pc->n, ncap);
		if (!npg)
			return -ENOMEM;
		pc->pg = npg;
		pc->cap = ncap;
	}
	/* Keep the index at most half full. */
	if ((uint64_t)pc->n * 2 + 2 > pc->ht_mask + 1) {
		uint64_t nmask = pc->ht_mask * 2 + 1;
		uint32_t *nht = malloc((nmask + 1) * sizeof(uint32_t));
		if (!nht)
			return -ENOMEM;
		memset(nht, 0xff, (nmask + 1) * sizeof(uint32_t));
		for (uint32_t i = 0; i < pc->n; i++) {
			uint64_t h = pc_hash(pc->pg[i].key) & nmask;
			while (nht[h] != PC_NIL)
				h = (h + 1) & nmask;
			nht[h] = i;
		}
		free(pc->ht);
		pc->ht = nht;
		pc->ht_mask = nmask;
	}
	return 0;
}

uint32_t pc_get(struct pc *pc, uint64_t page)
{
	uint32_t i = pc_find(pc, page);
	if (i != PC_NIL || pc->max_pages)
		return i;
	if (pc->no_grow ? pc->n == pc->cap : pc_grow(pc) < 0)
		return PC_NIL;
	i = pc->n++;
	pc_page_reset(&pc->pg[i], page);
	uint64_t h = pc_hash(page) & pc->ht_mask;
	while (pc->ht[h] != PC_NIL)
		h = (h + 1) & pc->ht_mask;
	pc->ht[h] = i;
	return i;
}

/* k-th largest (1-based) of a[0..n), reordering a: iterative quickselect
 * with a median-of-three pivot (deterministic). */
static uint32_t pc_select_desc(uint32_t *a, uint64_t n, uint64_t k)
{
	int64_t lo = 0, hi = (int64_t)n - 1, want = (int64_t)k - 1;
	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;
		uint32_t x = a[lo], y = a[mid], z = a[hi], piv;
		if ((x >= y) == (y >= z))
			piv = y;
		else if ((y >= x) == (x >= z))
			piv = x;
		else
			piv = z;
		int64_t i = lo, j = hi;
		while (i <= j) {
			while (a[i] > piv)
				i++;
			while (a[j] < piv)
				j--;
			if (i <= j) {
				uint32_t t = a[i];
				a[i] = a[j];
				a[j] = t;
				i++;
				j--;
			}
		}
		/* Now a[lo..j] >= piv, a[i..hi] <= piv, a[j+1..i-1] == piv. */
		if (want <= j)
			hi = j;
		else if (want >= i)
			lo = i;
		else
			return piv;
	}
	return a[want];
}

uint32_t *pc_scratch(struct pc *pc)
{
	if (!pc->max_pages && !pc->no_grow) {
		/* nvsim may allocate here; on failure the caller ranks
		 * without scratch: nobody is hot this epoch, which is safe. */
		free(pc->scratch);
		pc->scratch = malloc((size_t)pc->n * sizeof(uint32_t) + 1);
	}
	return pc->scratch;
}

uint32_t pc_kth(struct pc *pc, uint64_t n, uint64_t k)
{
	if (k == 0 || n == 0 || !pc->scratch)
		return UINT32_MAX;
	if (k >= n)
		return 1;
	return pc_select_desc(pc->scratch, n, k);
}

uint32_t pc_profile_step(struct pc *pc, uint64_t k, bool age)
{
	uint64_t nz = 0;
	pc_scratch(pc);
	for (uint32_t i = 0; i < pc->n; i++) {
		struct pc_page *g = &pc->pg[i];
		uint32_t p = g->prof;
		if (age) {
			p = g->prof / 2 + g->cur;
			if (p < g->cur)   /* overflow */
				p = UINT32_MAX;
			g->prof = p;
			g->cur = 0;
		}
		if (p && pc->scratch)
			pc->scratch[nz++] = p;
	}
	return pc_kth(pc, nz, k);
}
