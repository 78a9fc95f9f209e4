/* policy_lru.c - "lru", the paper's Simple-LRU baseline: MRAM and DRAM are
 * one memory under a single LRU list; a faulting page takes a free frame
 * (MRAM first, it is the faster tier) or the frame of the least recently
 * used page, which goes to flash (dropped when clean with a valid flash
 * copy). Pages never move between MRAM and DRAM, so which pages end up in
 * MRAM is an accident of timing: exactly what the paper's LRU does. O(1). */
#include "pmem/policy_core.h"

#define LRU_LIST 1

struct lru_policy {
	struct policy base;
	struct pc_list lru;
};

static int lru_init(struct policy *p)
{
	struct lru_policy *l = (struct lru_policy *)p;
	pc_list_init(&l->lru);
	return 0;
}

static enum tier lru_access(struct policy *p, uint32_t i, bool write)
{
	struct lru_policy *l = (struct lru_policy *)p;
	struct pc *pc = &p->pc;
	struct pc_page *g = pc_pg(pc, i);
	(void)write;
	if (g->tier == TIER_MRAM || g->tier == TIER_DRAM) {
		pc_list_del(pc, &l->lru, i);
		pc_list_push(pc, &l->lru, LRU_LIST, i);
		return (enum tier)g->tier;
	}
	enum tier to;
	if (!pc_full(pc, TIER_MRAM)) {
		to = TIER_MRAM;
	} else if (!pc_full(pc, TIER_DRAM)) {
		to = TIER_DRAM;
	} else {
		uint32_t v = pc_list_tail(&l->lru);
		to = (enum tier)pc_pg(pc, v)->tier;
		pc_list_del(pc, &l->lru, v);
		pc_evict(pc, v);
	}
	pc_bring(pc, i, to);
	pc_list_push(pc, &l->lru, LRU_LIST, i);
	return to;
}

static void lru_unlink(struct policy *p, uint32_t i)
{
	struct lru_policy *l = (struct lru_policy *)p;
	pc_list_del(&p->pc, &l->lru, i);
}

const struct policy_ops policy_lru_ops = {
	.name = "lru",
	.size = sizeof(struct lru_policy),
	.ranks = false,
	.init = lru_init,
	.access = lru_access,
	.unlink = lru_unlink,
	.epoch = NULL,
};
