/* policy_lowpower.c - the paper's profile-based paging (Hosogaya et al.,
 * Figure 2) and its first step, MRAM-fixed.
 *
 * "mram-fixed": the hottest pages (by the aged epoch profile, see
 * policy_core.h) are pinned in MRAM and never swapped out; every other page
 * lives in DRAM under LRU swapping, and may borrow an MRAM frame that no hot
 * page needs. A page that stops being hot stays in MRAM, unpinned, until a
 * hot page needs its frame; it then goes down to DRAM (or to flash, if it
 * is older than DRAM's least recently used page).
 *
 * "lowpower": the same while the MRAM hit rate (accesses served by MRAM /
 * all accesses, over the last epoch) stays >= Thr = alpha * MRAM /
 * (MRAM+DRAM); below it, locality is too poor for pinning to pay and
 * MRAM+DRAM become one LRU-swapped memory (no promotions, pinned pages
 * evictable). Decided at every epoch boundary.
 *
 * Both: clean pages with a valid flash copy are dropped, not written (the
 * core's pc_evict). O(1) per access; O(pages) per epoch for the ranking. */
#include "pmem/policy_core.h"

enum { LP_PIN = 1, LP_LOOSE = 2, LP_DRAM = 3 };

struct lp_policy {
	struct policy base;
	struct pc_list pin;     /* MRAM, hot when they entered (LRU order) */
	struct pc_list loose;   /* MRAM, not hot */
	struct pc_list dram;
	uint32_t hot_min;       /* profile value of the hottest MRAM-th page */
	bool dynamic;           /* lowpower (switches) vs mram-fixed */
	bool unified;           /* current mode: one LRU memory */
	double thr;
	uint64_t win_mram, win_all;  /* counters at the last decision */
};

static struct pc_list *lp_list(struct lp_policy *l, uint8_t tag)
{
	return tag == LP_PIN ? &l->pin : tag == LP_LOOSE ? &l->loose : &l->dram;
}

static void lp_unlink(struct policy *p, uint32_t i)
{
	struct lp_policy *l = (struct lp_policy *)p;
	struct pc_page *g = pc_pg(&p->pc, i);
	if (g->list)
		pc_list_del(&p->pc, lp_list(l, g->list), i);
}

static int lp_init_common(struct policy *p, bool dynamic)
{
	struct lp_policy *l = (struct lp_policy *)p;
	pc_list_init(&l->pin);
	pc_list_init(&l->loose);
	pc_list_init(&l->dram);
	l->hot_min = UINT32_MAX;
	l->dynamic = dynamic;
	l->unified = false;
	uint64_t tot = p->cfg.mram_pages + p->cfg.dram_pages;
	l->thr = p->cfg.alpha * (double)p->cfg.mram_pages / (double)tot;
	return 0;
}

static int lp_init_fixed(struct policy *p)
{
	return lp_init_common(p, false);
}

static int lp_init_dynamic(struct policy *p)
{
	return lp_init_common(p, true);
}

static bool lp_hot(const struct lp_policy *l, const struct pc_page *g)
{
	return g->prof >= l->hot_min;
}

/* The older (less recently used) of two candidates, either may be NIL. */
static uint32_t lp_older(struct pc *pc, uint32_t a, uint32_t b)
{
	if (a == PC_NIL)
		return b;
	if (b == PC_NIL)
		return a;
	return pc_pg(pc, a)->last <= pc_pg(pc, b)->last ? a : b;
}

static void lp_evict(struct lp_policy *l, uint32_t v)
{
	lp_unlink(&l->base, v);
	pc_evict(&l->base.pc, v);
}

/* Pin hot page i into MRAM (the pinned list has room). */
static void lp_promote(struct lp_policy *l, uint32_t i)
{
	struct pc *pc = &l->base.pc;
	if (pc_full(pc, TIER_MRAM)) {
		/* Some MRAM page is loose, since pins < capacity. */
		uint32_t v = pc_list_tail(&l->loose);
		bool room = !pc_full(pc, TIER_DRAM);
		if (!room) {
			uint32_t t = pc_list_tail(&l->dram);
			if (t == i)
				t = pc_pg(pc, t)->prev;
			if (t != PC_NIL && pc_pg(pc, t)->last < pc_pg(pc, v)->last) {
				lp_evict(l, t);
				room = true;
			}
		}
		lp_unlink(&l->base, v);
		if (room) {
			pc_bring(pc, v, TIER_DRAM);
			pc_list_push(pc, &l->dram, LP_DRAM, v);
		} else {
			pc_evict(pc, v);
		}
	}
	lp_unlink(&l->base, i);
	pc_bring(pc, i, TIER_MRAM);
	pc_list_push(pc, &l->pin, LP_PIN, i);
}

static enum tier lp_access(struct policy *p, uint32_t i, bool write)
{
	struct lp_policy *l = (struct lp_policy *)p;
	struct pc *pc = &p->pc;
	struct pc_page *g = pc_pg(pc, i);
	(void)write;
	if (p->fixed_profile && p->ctr.accesses == 0)
		l->hot_min = pc_profile_step(pc, p->cfg.mram_pages, false);
	if (g->tier == TIER_MRAM || g->tier == TIER_DRAM) {
		enum tier t = (enum tier)g->tier;
		uint8_t tag = g->list;
		struct pc_list *lst = lp_list(l, tag);
		pc_list_del(pc, lst, i);
		pc_list_push(pc, lst, tag, i);
		if (t == TIER_MRAM || l->unified || !lp_hot(l, g) ||
		    l->pin.len >= pc->capy[TIER_MRAM])
			return t;
		lp_promote(l, i);
		return TIER_MRAM;
	}
	/* A fault: a hot page goes straight to MRAM when it may be pinned. */
	if (!l->unified && lp_hot(l, g) && l->pin.len < pc->capy[TIER_MRAM]) {
		lp_promote(l, i);
		return TIER_MRAM;
	}
	enum tier to;
	enum tier first = l->unified ? TIER_MRAM : TIER_DRAM;
	enum tier second = l->unified ? TIER_DRAM : TIER_MRAM;
	if (!pc_full(pc, first)) {
		to = first;
	} else if (!pc_full(pc, second)) {
		to = second;
	} else {
		uint32_t v = lp_older(pc, pc_list_tail(&l->dram),
				      pc_list_tail(&l->loose));
		if (l->unified || v == PC_NIL)
			v = lp_older(pc, v, pc_list_tail(&l->pin));
		to = (enum tier)pc_pg(pc, v)->tier;
		lp_evict(l, v);
	}
	pc_bring(pc, i, to);
	g = pc_pg(pc, i);
	if (to == TIER_DRAM)
		pc_list_push(pc, &l->dram, LP_DRAM, i);
	else
		pc_list_push(pc, lp_hot(l, g) ? &l->pin : &l->loose,
			     lp_hot(l, g) ? LP_PIN : LP_LOOSE, i);
	return to;
}

/* Re-file MRAM pages by the new ranking, keeping LRU order. */
static void lp_refile(struct lp_policy *l)
{
	struct pc *pc = &l->base.pc;
	struct pc_list pin, loose;
	pc_list_init(&pin);
	pc_list_init(&loose);
	struct pc_list *src[2] = { &l->pin, &l->loose };
	/* Merge both old lists from their tails (oldest first) so each new
	 * list ends up in recency order. */
	for (;;) {
		uint32_t a = pc_list_tail(src[0]), b = pc_list_tail(src[1]);
		uint32_t v = lp_older(pc, a, b);
		if (v == PC_NIL)
			break;
		pc_list_del(pc, v == a ? src[0] : src[1], v);
		if (lp_hot(l, pc_pg(pc, v)) && pin.len < pc->capy[TIER_MRAM])
			pc_list_push(pc, &pin, LP_PIN, v);
		else
			pc_list_push(pc, &loose, LP_LOOSE, v);
	}
	l->pin = pin;
	l->loose = loose;
}

static void lp_epoch(struct policy *p)
{
	struct lp_policy *l = (struct lp_policy *)p;
	if (l->dynamic) {
		/* The MRAM hit rate "at this point of the execution": over the
		 * epoch just ended (a rate since the start would hide a phase
		 * that thrashes behind a long good history). */
		uint64_t hm = p->ctr.served[TIER_MRAM] - l->win_mram;
		uint64_t ha = p->ctr.accesses - l->win_all;
		l->win_mram = p->ctr.served[TIER_MRAM];
		l->win_all = p->ctr.accesses;
		l->unified = (double)hm < l->thr * (double)ha;
	}
	if (p->fixed_profile)
		return;   /* ranked once, at the first access */
	l->hot_min = pc_profile_step(&p->pc, p->cfg.mram_pages, true);
	lp_refile(l);
}

const struct policy_ops policy_mram_fixed_ops = {
	.name = "mram-fixed",
	.size = sizeof(struct lp_policy),
	.ranks = true,
	.init = lp_init_fixed,
	.access = lp_access,
	.unlink = lp_unlink,
	.epoch = lp_epoch,
};

const struct policy_ops policy_lowpower_ops = {
	.name = "lowpower",
	.size = sizeof(struct lp_policy),
	.ranks = true,
	.init = lp_init_dynamic,
	.access = lp_access,
	.unlink = lp_unlink,
	.epoch = lp_epoch,
};
