/* policy.c - the policy dispatcher: creation by name, the access path every
 * policy shares (page lookup, counting, epochs), forget and counters. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pmem/policy_core.h"

static const struct policy_ops *const policy_table[] = {
	&policy_lru_ops,
	&policy_mram_fixed_ops,
	&policy_lowpower_ops,
	&policy_adaptive_ops,
};

const char *policy_names(void)
{
	return "lru,mram-fixed,lowpower,adaptive";
}

int policy_create(struct policy **out, const char *name,
		  const struct policy_config *cfg)
{
	const struct policy_ops *ops = NULL;
	*out = NULL;
	for (size_t k = 0; k < sizeof(policy_table) / sizeof(policy_table[0]); k++)
		if (name && strcmp(name, policy_table[k]->name) == 0)
			ops = policy_table[k];
	if (!ops)
		return -ENOENT;
	return policy_create_ops(out, ops, cfg, 0);
}

int policy_create_ops(struct policy **out, const struct policy_ops *ops,
		      const struct policy_config *cfg, uint32_t reserve)
{
	*out = NULL;
	if (!cfg || cfg->mram_pages + cfg->dram_pages == 0 ||
	    cfg->mram_pages >= PC_NIL || cfg->dram_pages >= PC_NIL ||
	    cfg->alpha < 0 || cfg->alpha != cfg->alpha)
		return -EINVAL;
	struct policy *p = calloc(1, ops->size);
	if (!p)
		return -ENOMEM;
	p->ops = ops;
	p->cfg = *cfg;
	/* Default epoch: short enough to follow an application's phases,
	 * and at least the page count on the live path, where ranking walks
	 * every page once per epoch (amortised O(1) per access). */
	if (!p->cfg.epoch)
		p->cfg.epoch = cfg->max_pages > POLICY_DEFAULT_EPOCH
			       ? cfg->max_pages : POLICY_DEFAULT_EPOCH;
	/* The live store presents whole pages, nvsim L2 lines. */
	p->epoch_left = p->cfg.epoch;
	if (!p->cfg.access_lines)
		p->cfg.access_lines = cfg->max_pages ? 64 : 1;
	int rc = reserve && !cfg->max_pages
		 ? pc_init_fixed_hash(&p->pc, &p->cfg, &p->ctr, reserve,
				      ops->ranks || ops->own_rank)
		 : pc_init(&p->pc, &p->cfg, &p->ctr, ops->ranks || ops->own_rank);
	if (rc == 0 && ops->init)
		rc = ops->init(p);
	if (rc < 0) {
		if (ops->fini)
			ops->fini(p);
		pc_fini(&p->pc);
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

void policy_destroy(struct policy *p)
{
	if (!p)
		return;
	if (p->ops->fini)
		p->ops->fini(p);
	pc_fini(&p->pc);
	free(p);
}

const char *policy_name(const struct policy *p)
{
	return p->ops->name;
}

int policy_set_profile(struct policy *p, uint64_t page, uint64_t count)
{
	if (p->ctr.accesses)
		return -EBUSY;
	if (!p->ops->ranks && !p->ops->profile) {
		/* Unused, but in a hashed table (nvsim's, or a live
		 * adaptive's fixed-size shadow) the page takes its place as
		 * in every other policy's (policy_access_idx). */
		if (!p->pc.max_pages && pc_get(&p->pc, page) == PC_NIL)
			return -ENOMEM;
		return 0;
	}
	if (p->pc.max_pages && page >= p->pc.max_pages)
		return -ERANGE;
	uint32_t i = pc_get(&p->pc, page);
	if (i == PC_NIL)
		return -ENOMEM;
	pc_pg(&p->pc, i)->prof = count > UINT32_MAX ? UINT32_MAX : (uint32_t)count;
	p->fixed_profile = true;
	return p->ops->profile ? p->ops->profile(p, i, count) : 0;
}

/* An access to the page at table index i (PC_NIL: it has none). */
static unsigned access_at(struct policy *p, uint32_t i, bool write,
			  struct tier_move *moves, enum tier *served)
{
	return pc_access_at(p, i, write, moves, served, p->ops->access);
}

unsigned policy_access(struct policy *p, uint64_t page, bool write,
		       struct tier_move *moves, enum tier *served)
{
	return access_at(p, pc_get(&p->pc, page), write, moves, served);
}

unsigned policy_access_idx(struct policy *p, uint64_t page, uint32_t *idx,
			   bool write, struct tier_move *moves,
			   enum tier *served)
{
	uint32_t i = pc_get_at(&p->pc, page, *idx);
	*idx = i;
	return access_at(p, i, write, moves, served);
}

void policy_forget(struct policy *p, uint64_t page)
{
	struct pc *pc = &p->pc;
	uint32_t i = pc_find(pc, page);
	if (i == PC_NIL)
		return;
	struct pc_page *g = pc_pg(pc, i);
	if (g->tier == TIER_NONE)
		return;
	if (p->ops->reset)
		p->ops->reset(p, i);
	if (g->tier == TIER_MRAM || g->tier == TIER_DRAM) {
		p->ops->unlink(p, i);
		pc->used[g->tier]--;
	}
	g->tier = TIER_NONE;
	g->dirty = 0;
	g->flash = 0;
	/* New contents, new history; but a whole-run profile (the oracle's)
	 * already counts the page's later accesses, and nothing would put
	 * its rank back: it stays. */
	g->cur = g->reads = g->writes = 0;
	if (!p->fixed_profile)
		g->prof = 0;
	p->ctr.forgets++;
}

enum tier policy_where(const struct policy *p, uint64_t page)
{
	uint32_t i = pc_find(&p->pc, page);
	return i == PC_NIL ? TIER_NONE : (enum tier)p->pc.pg[i].tier;
}

void policy_get_counters(const struct policy *p, struct policy_counters *out)
{
	*out = p->ctr;
}
