/* policy_adaptive.c - "adaptive", nvcache's own policy. It keeps the paper's
 * idea (hot pages in MRAM, everything else LRU-swapped) and replaces each of
 * its fixed choices with a measured one:
 *
 *  - Heat (HeMem): separate read and write counts, weighted by what MRAM
 *    saves over DRAM per access in the paper's Table 2 (reads 4.88 nJ,
 *    writes 3.64 nJ, both 7.5 ns: weights 4 and 3), halved every epoch
 *    (MEMTIS cooling), lazily: a page's counts are aged when next touched.
 *  - Hot threshold (MEMTIS): a log2 histogram of heats, kept exact under the
 *    lazy cooling (halving every count moves every page down one bucket, so
 *    the whole histogram shifts); the threshold is the lowest bucket whose
 *    pages, with all hotter ones, still fit in MRAM.
 *  - Migrate only when it pays: a DRAM page moves up only if its heat beats
 *    the MRAM page it displaces by the price of the copies (in accesses at
 *    the 7.5 ns MRAM saves, over a few epochs) - a hysteresis band that also
 *    stops ping-pong (TPP's concern); a page must be hot, i.e. touched
 *    repeatedly, before it is even considered (two-touch filter).
 *    One DRAM frame is kept free so a swap between tiers needs no flash I/O.
 *  - What MRAM keeps (the paper's MRAM-hit-rate switch, measured instead of
 *    guessed): three modes - nothing protected; hot and warm MRAM pages
 *    protected from eviction; or a pin set, as online mram-fixed: each
 *    epoch the MRAM-full of hottest pages is ranked, pinned in MRAM and
 *    never evicted, which survives sweeps larger than memory that cool
 *    every page's heat (MG's V-cycles). Three sampled shadows (1 page in
 *    2^s, capacities scaled) run this very policy held in each mode over
 *    the same stream; each epoch, their decayed modelled times decide the
 *    mode (set dueling, as in the DIP cache policy), with a 3% hysteresis
 *    band.
 *  - Clean-first eviction: among the least recently used unprotected pages,
 *    a clean page with a valid flash copy goes first (a drop costs nothing,
 *    a write-back 64 us), if it has been used no more often than the page
 *    LRU would evict (see ad_victim).
 * O(1) per access; the shadows use preallocated tables in live mode. In
 * nvsim, where the shadows see every page, the policy stands in for the
 * shadow of its mode until it first leaves that mode (ad_fork: one
 * O(pages) copy then, in an epoch step). */
#include <errno.h>
#include <string.h>

#include "pmem/policy_core.h"

enum { AD_MRAM = 1, AD_DRAM = 2, AD_PINNED = 3 };   /* list tags */
/* What the policy keeps in MRAM, chosen each epoch by its shadows. */
enum ad_mode {
	AD_OFF,          /* nothing protected: LRU plus paid promotions */
	AD_PROTECT,      /* hot and warm pages protected from eviction */
	AD_PIN,          /* online mram-fixed: a ranked pin set in MRAM */
	AD_MODES
};
#define AD_KNOWN 1u           /* flags: page counted in the histogram */
#define AD_PINF 2u            /* flags: in the pin set (ranked each epoch) */
#define AD_BUCKETS 48
#define AD_NONE AD_BUCKETS     /* threshold: nothing is hot */
#define AD_SCAN 8              /* victim candidates looked at */
#define AD_CLEAN_WINDOW 4      /* how far past LRU a clean page may be */
/* Heat surplus (weighted, aged counts) a promotion must show: one copy is
 * 64 lines x 37.5 ns = 320 accesses x 7.5 ns; aged counts are ~2x the
 * per-epoch rate, weights ~3.5; amortised over ~8 epochs. */
#define AD_PAY_MOVE 560
#define AD_PAY_SWAP 1120
#define AD_T_EVERY 4096        /* accesses between threshold refreshes */
#define AD_PIN_HOLD 3          /* epochs a profile's pinning holds */
#define AD_SHADOW_MIN 1024     /* pages a shadow should have at least */

struct ad_policy {
	struct policy base;
	struct pc_list mram, dram;
	struct pc_list pin;        /* AD_PIN: pinned pages in MRAM */
	uint64_t hist[AD_BUCKETS];
	uint32_t e;                /* epochs so far */
	unsigned thr;              /* hot bucket threshold */
	uint32_t pending;          /* hot DRAM page that found no free frame */
	enum ad_mode mode;
	struct policy *sh[AD_MODES]; /* shadows, one held in each mode */
	int force;                 /* shadows: -1 = decide, else the mode */
	uint64_t sh_cost[AD_MODES];  /* their modelled time at the last epoch */
	double sh_avg[AD_MODES];   /* decayed sums of their epoch costs */
	int won;                   /* the last duel's winner (ad_duel) */
	unsigned s;                /* sample 1 page in 2^s */
	uint64_t since_thr;
	uint64_t pay_move, pay_swap; /* ad_pay's, this epoch (ad_set_pay) */
	/* A shadow that sees every page (s == 0) sees the very stream and
	 * epochs its policy does, so its heat bookkeeping (counts, stamps,
	 * histogram, threshold) would be the same: it takes them from src,
	 * the policy, whose page for the access in progress is src_pg,
	 * instead of keeping them itself. NULL: its own. */
	const struct ad_policy *src;
	const struct pc_page *src_pg;
	/* nvsim, s == 0: until its first change of mode the policy is, page
	 * for page, the shadow held in its mode (same stream, capacities,
	 * epochs and code), so that shadow is not run: the policy stands in
	 * for it (its costs, ad_duel) until the change, where it is forked
	 * off as a copy (ad_fork, O(pages) once). A quarter of the work an
	 * access while it lasts. -1: none. */
	int alias;
};

static struct pc_list *ad_list(struct ad_policy *a, uint8_t tag)
{
	return tag == AD_MRAM ? &a->mram : tag == AD_PINNED ? &a->pin : &a->dram;
}

static unsigned ad_bucket(uint64_t h)
{
	return h ? (unsigned)(64 - __builtin_clzll(h)) : 0;
}

static uint32_t ad_age(const struct ad_policy *a, const struct pc_page *g)
{
	return a->e - g->stamp;
}

/* Histogram position of a page now (the shifted view). */
static unsigned ad_pos(const struct ad_policy *a, const struct pc_page *g)
{
	uint32_t k = ad_age(a, g);
	return g->hb > k ? g->hb - k : 0;
}

static uint64_t ad_heat(const struct ad_policy *a, const struct pc_page *g)
{
	uint32_t k = ad_age(a, g);
	if (k > 31)
		return 0;
	return 4 * (uint64_t)(g->reads >> k) + 3 * (uint64_t)(g->writes >> k);
}

/* Aged access count, reads and writes alike: how likely a page is to be
 * used again, for comparing eviction candidates (unweighted: the question
 * is reuse, not what MRAM would save on it). */
static uint64_t ad_uses(const struct ad_policy *a, const struct pc_page *g)
{
	uint32_t k = ad_age(a, g);
	if (k > 31)
		return 0;
	return (uint64_t)(g->reads >> k) + (g->writes >> k);
}

static bool ad_hot(const struct ad_policy *a, const struct pc_page *g)
{
	return a->thr < AD_NONE && ad_pos(a, g) >= a->thr;
}

/* Protected from eviction (when protecting): hot pages, and every MRAM
 * page still warm (touched within its heat's lifetime) - the paper's
 * pinned MRAM, minus the pages that have gone cold. */
static bool ad_kept(const struct ad_policy *a, const struct pc_page *g)
{
	if (a->thr >= AD_NONE)
		return false;
	unsigned pos = ad_pos(a, g);
	return pos >= a->thr || (g->tier == TIER_MRAM && pos > 0);
}

static void ad_touch(struct ad_policy *a, struct pc_page *g, bool write)
{
	if (!(g->flags & AD_KNOWN)) {
		g->flags |= AD_KNOWN;
		g->stamp = a->e;
		g->hb = 0;
		g->reads = g->writes = 0;
		a->hist[0]++;
	}
	unsigned pos = ad_pos(a, g);
	uint32_t k = ad_age(a, g);
	g->reads = k > 31 ? 0 : g->reads >> k;
	g->writes = k > 31 ? 0 : g->writes >> k;
	g->stamp = a->e;
	if (write) {
		if (g->writes != UINT32_MAX)
			g->writes++;
	} else if (g->reads != UINT32_MAX) {
		g->reads++;
	}
	unsigned nb = ad_bucket(4 * (uint64_t)g->reads + 3 * (uint64_t)g->writes);
	if (nb >= AD_BUCKETS)
		nb = AD_BUCKETS - 1;
	a->hist[pos]--;
	a->hist[nb]++;
	g->hb = (uint8_t)nb;
}

/* A shared shadow's ad_touch (see src): the counts its policy's own touch
 * just made of the page, and the threshold refreshed after it. Its
 * histogram is left unkept: only ad_threshold reads it. */
static void ad_touch_shared(struct ad_policy *a, struct pc_page *g)
{
	const struct pc_page *m = a->src_pg;
	g->flags |= AD_KNOWN;
	g->reads = m->reads;
	g->writes = m->writes;
	g->stamp = m->stamp;
	g->hb = m->hb;
	a->thr = a->src->thr;
}

static void ad_threshold(struct ad_policy *a)
{
	uint64_t sum = 0, cap = a->base.cfg.mram_pages;
	unsigned t = AD_NONE;
	for (unsigned b = AD_BUCKETS - 1; b >= 1; b--) {
		sum += a->hist[b];
		if (sum > cap)
			break;
		t = b;
	}
	a->thr = t;
	a->since_thr = 0;
}

static bool ad_pinned(const struct ad_policy *a, const struct pc_page *g)
{
	return a->mode == AD_PIN && (g->flags & AD_PINF);
}

static void ad_push(struct ad_policy *a, uint32_t i, enum tier t)
{
	struct pc *pc = &a->base.pc;
	if (t == TIER_DRAM)
		pc_list_push(pc, &a->dram, AD_DRAM, i);
	else if (ad_pinned(a, pc_pg(pc, i)))
		pc_list_push(pc, &a->pin, AD_PINNED, i);
	else
		pc_list_push(pc, &a->mram, AD_MRAM, i);
}

/* A page moved down from MRAM starts again at DRAM's recent end, as
 * mram-fixed's demotions do. It was in memory and is likely wanted again
 * (in AD_PIN it is a borrower that a pinned page displaced); at the cold
 * end it would be the next victim before every older DRAM page. Measured:
 * cg-small, oracle pin set, MRAM 3.3 + DRAM 6.5 MiB: 208 flash reads at
 * the cold end, 8 (as mram-fixed) here. */
static void ad_push_down(struct ad_policy *a, uint32_t i)
{
	pc_list_push(&a->base.pc, &a->dram, AD_DRAM, i);
}

static void ad_unlink(struct policy *p, uint32_t i)
{
	struct ad_policy *a = (struct ad_policy *)p;
	struct pc_page *g = pc_pg(&p->pc, i);
	if (g->list)
		pc_list_del(&p->pc, ad_list(a, g->list), i);
}

static void ad_reset(struct policy *p, uint32_t i)
{
	struct ad_policy *a = (struct ad_policy *)p;
	struct pc_page *g = pc_pg(&p->pc, i);
	if (!(g->flags & AD_KNOWN))
		return;
	if (!a->src) {
		a->hist[ad_pos(a, g)]--;
		a->hist[0]++;
	}
	g->hb = 0;
	g->stamp = a->e;
	/* New contents: unranked until the next epoch; but a whole-run
	 * profile already ranks what the page will hold. */
	if (!a->base.fixed_profile)
		g->flags &= ~AD_PINF;
	if (a->sh[0])
		for (int k = 0; k < AD_MODES; k++)
			if (k != a->alias)
				policy_forget(a->sh[k], g->key);
}

static uint32_t ad_older(struct pc *pc, uint32_t x, uint32_t y)
{
	if (x == PC_NIL)
		return y;
	if (y == PC_NIL)
		return x;
	return pc_pg(pc, x)->last <= pc_pg(pc, y)->last ? x : y;
}

static uint64_t ad_last(struct pc *pc, uint32_t i)
{
	return i == PC_NIL ? UINT64_MAX : pc_pg(pc, i)->last;
}

/* The page to evict from memory: LRU order over both tiers, protected hot
 * pages passed over (when protecting), and in place of LRU's victim (the
 * first unprotected candidate) a clean page among the next few, if it has
 * been used no more often than that victim. Never `keep`.
 *
 * Why the use count: clean-first does not save a write, it defers one (a
 * dirty page is written whenever it leaves). It gains a hit if the dirty
 * page is used again before it leaves, and it risks a fault on the clean
 * page evicted in its place, so it pays only when the clean page is no
 * likelier to be used again. Recency cannot tell them apart: in a cyclic
 * pass over a region that exactly fits memory, the clean pages just
 * behind a few dirty ones at the LRU end are about as old as those, and
 * they are precisely the next pages the pass needs. Taking them made
 * every access of every later pass a fault (sim_live_trace.sh's replay:
 * 5120 flash reads at 4 MiB where LRU has 1024). Frequency can: those
 * pages have been used more often than dirty pages written once and never
 * touched again, and a reused page's count keeps growing while a cold
 * one's only falls with aging, so even a cold page written many times is
 * overtaken within a few passes. The comparison is with LRU's victim, not
 * with every dirty page passed over: the point is never to evict a page
 * more used than the one LRU would take; a cold clean page in place of a
 * hot LRU victim (protection off) is still a better choice. */
static uint32_t ad_victim(struct ad_policy *a, uint32_t keep)
{
	struct pc *pc = &a->base.pc;
	uint32_t cm = a->mram.tail, cd = a->dram.tail;
	/* ad_older(cm, cd) with the candidates' `last` at hand (moving a
	 * page to its list's head below leaves every `last` as it was);
	 * UINT64_MAX stands for no candidate. */
	uint64_t lm = ad_last(pc, cm), ld = ad_last(pc, cd);
	uint32_t first = PC_NIL, any = PC_NIL;
	uint64_t ufirst = 0;           /* uses of LRU's victim, `first` */
	unsigned seen = 0;
	for (unsigned step = 0; step < AD_SCAN; step++) {
		uint32_t c;
		struct pc_page *g;
		if (lm <= ld) {
			c = cm;
			if (c == PC_NIL)
				break;
			g = pc_pg(pc, c);
			cm = g->prev;
			lm = ad_last(pc, cm);
		} else {
			c = cd;
			g = pc_pg(pc, c);
			cd = g->prev;
			ld = ad_last(pc, cd);
		}
		if (c == keep)
			continue;
		if (any == PC_NIL)
			any = c;
		if (a->mode == AD_PROTECT && ad_kept(a, g)) {
			/* Second chance while hot: to the head of its list,
			 * so hot pages never clog the tail (pinning, but
			 * only as long as they stay hot). */
			uint8_t tag = g->list;
			struct pc_list *l = ad_list(a, tag);
			pc_list_del(pc, l, c);
			pc_list_push(pc, l, tag, c);
			if (any == c)
				any = PC_NIL;
			continue;
		}
		bool clean = g->flash && !g->dirty;
		if (first == PC_NIL) {
			if (clean)
				return c;
			first = c;
			ufirst = ad_uses(a, g);
		} else if (clean && ad_uses(a, g) <= ufirst) {
			return c;
		}
		if (++seen >= AD_CLEAN_WINDOW)
			break;
	}
	if (first != PC_NIL)
		return first;
	if (any != PC_NIL)
		return any;
	/* Everything looked at was hot: the least recently used goes. */
	uint32_t v = ad_older(pc, a->mram.tail, a->dram.tail);
	if (v == keep)
		v = ad_older(pc, pc_pg(pc, a->mram.tail == keep ? keep : a->dram.tail)->prev,
			     a->mram.tail == keep ? a->dram.tail : a->mram.tail);
	/* Only pinned pages in memory (no DRAM): one of them must go. */
	if (v == PC_NIL)
		v = a->pin.tail == keep ? pc_pg(pc, keep)->prev : a->pin.tail;
	return v;
}

/* Page i (DRAM, hot) moves to MRAM when that pays. */
/* A copy pays back over the accesses still to come; with no better
 * guess, expect the run to last about as long again as it has so far
 * (up to 8 epochs): early on, only very hot pages move. */
static uint64_t ad_pay(const struct ad_policy *a, uint64_t base)
{
	uint32_t h = a->e < 1 ? 1 : a->e > 8 ? 8 : a->e;
	/* An access moving n lines saves n times what a line access does. */
	uint64_t pay = base * 8 / h / a->base.cfg.access_lines;
	return pay ? pay : 1;
}

/* What a promotion must show this epoch: the divisions once an epoch
 * instead of at every hot DRAM hit. */
static void ad_set_pay(struct ad_policy *a)
{
	a->pay_move = ad_pay(a, AD_PAY_MOVE);
	a->pay_swap = ad_pay(a, AD_PAY_SWAP);
}

static void ad_maybe_promote(struct ad_policy *a, uint32_t i)
{
	struct pc *pc = &a->base.pc;
	uint64_t h = ad_heat(a, pc_pg(pc, i));
	if (!pc_full(pc, TIER_MRAM)) {
		if (h >= a->pay_move) {
			pc_list_del(pc, &a->dram, i);
			pc_bring(pc, i, TIER_MRAM);
			ad_push(a, i, TIER_MRAM);
		}
		return;
	}
	/* Not even against a page of no heat: the usual case, and then the
	 * candidates need no look. */
	if (h < a->pay_swap)
		return;
	/* Swap with the coldest of the least recently used MRAM pages. */
	uint32_t v = PC_NIL, c = a->mram.tail;
	uint64_t hv = UINT64_MAX;
	for (unsigned k = 0; k < 4 && c != PC_NIL; k++, c = pc_pg(pc, c)->prev) {
		uint64_t hc = ad_heat(a, pc_pg(pc, c));
		if (hc < hv) {
			hv = hc;
			v = c;
		}
	}
	if (v == PC_NIL || ad_hot(a, pc_pg(pc, v)) ||
	    h < hv + a->pay_swap)
		return;
	if (pc_full(pc, TIER_DRAM)) {
		/* No frame to swap through: done at the next fault that
		 * frees a DRAM frame anyway (no extra flash I/O). */
		a->pending = i;
		return;
	}
	pc_list_del(pc, &a->mram, v);
	pc_bring(pc, v, TIER_DRAM);
	ad_push_down(a, v);
	pc_list_del(pc, &a->dram, i);
	pc_bring(pc, i, TIER_MRAM);
	ad_push(a, i, TIER_MRAM);
}

/* The shadows see 1 page in 2^s, chosen by a hash of its number. */
static bool ad_sampled(const struct ad_policy *a, uint64_t key)
{
	uint64_t h = key * 0x9E3779B97F4A7C15ull;
	return a->sh[0] && (a->s == 0 || (h >> (64 - a->s)) == 0);
}

/* The shadows number their sample alike (ad_profile gives each the same
 * pages): the page's place in their tables, kept in its aux, saves each
 * of them the lookup (policy_access_idx; a stale guess is only slower). */
static inline enum tier ad_shadow_access(struct policy *p, uint32_t i,
					 bool write);

static void ad_shadow(struct ad_policy *a, struct pc_page *g, bool write)
{
	if (!ad_sampled(a, g->key))
		return;
	struct tier_move mv[POLICY_MAX_MOVES];
	enum tier t;
	uint32_t at = g->aux;
	for (int k = 0; k < AD_MODES; k++) {
		if (k == a->alias)
			continue;
		struct policy *s = a->sh[k];
		uint32_t i = pc_get_at(&s->pc, g->key, at);
		((struct ad_policy *)s)->src_pg = g;
		/* policy_access_idx, with the call to the access inlined */
		pc_access_at(s, i, write, mv, &t, ad_shadow_access);
		at = i;
	}
	g->aux = at;
}

/* Pinned page i (off every list, not in MRAM) goes to MRAM, where the pin
 * set has room. A full MRAM still holds an unpinned page (the pin set is
 * smaller than MRAM); its least recently used one goes down to DRAM, or to
 * flash when it is older than DRAM's least recently used page (as
 * mram-fixed does: there is no frame to swap through). */
static void ad_pin_up(struct ad_policy *a, uint32_t i)
{
	struct pc *pc = &a->base.pc;
	uint32_t v = a->mram.tail;
	if (pc_full(pc, TIER_MRAM) && v != PC_NIL) {
		bool room = !pc_full(pc, TIER_DRAM);
		uint32_t t = a->dram.tail;
		if (!room && t != PC_NIL &&
		    pc_pg(pc, t)->last < pc_pg(pc, v)->last) {
			ad_unlink(&a->base, t);
			pc_evict(pc, t);
			room = true;
		}
		pc_list_del(pc, &a->mram, v);
		if (room) {
			pc_bring(pc, v, TIER_DRAM);
			ad_push_down(a, v);
		} else {
			pc_evict(pc, v);
		}
	}
	pc_bring(pc, i, TIER_MRAM);
	pc_list_push(pc, &a->pin, AD_PINNED, i);
}

/* AD_PIN, online mram-fixed: the pin set (ranked each epoch by heat) goes
 * to MRAM and is never evicted; every other page is LRU-swapped in DRAM
 * and borrows an MRAM frame only when DRAM has none free, so it does not
 * take the frames the pin set needs. */
static enum tier ad_pin_access(struct ad_policy *a, uint32_t i)
{
	struct pc *pc = &a->base.pc;
	struct pc_page *g = pc_pg(pc, i);
	bool up = (g->flags & AD_PINF) && g->tier != TIER_MRAM &&
		  a->pin.len < pc->capy[TIER_MRAM];
	if (g->tier == TIER_MRAM || g->tier == TIER_DRAM) {
		enum tier t = (enum tier)g->tier;
		pc_list_del(pc, ad_list(a, g->list), i);
		if (!up) {
			ad_push(a, i, t);
			return t;
		}
	}
	if (up) {
		ad_pin_up(a, i);
		return TIER_MRAM;
	}
	enum tier to;
	if (!pc_full(pc, TIER_DRAM)) {
		to = TIER_DRAM;
	} else if (!pc_full(pc, TIER_MRAM)) {
		to = TIER_MRAM;
	} else {
		uint32_t v = ad_victim(a, i);
		to = (enum tier)pc_pg(pc, v)->tier;
		ad_unlink(&a->base, v);
		pc_evict(pc, v);
	}
	pc_bring(pc, i, to);
	ad_push(a, i, to);
	return to;
}

static void ad_rank(struct ad_policy *a);

/* What every access starts with: page i's entry. */
static struct pc_page *ad_start(struct ad_policy *a, uint32_t i)
{
	struct policy *p = &a->base;
	if (p->fixed_profile && p->ctr.accesses == 0) {
		/* A profile from a profiling run: the pin set is known
		 * before the first access, as the paper's mram-fixed has it,
		 * and pinning is where the run starts. */
		ad_rank(a);
		if (a->force < 0) {
			a->mode = AD_PIN;
			/* No access made yet: every shadow is as created. */
			if (a->alias >= 0)
				a->alias = AD_PIN;
		}
	}
	return pc_pg(&p->pc, i);
}

static enum tier ad_fault(struct ad_policy *a, uint32_t i);

/* The access to page i, its heat counted: the moves, and where it is
 * served from. The hit path here, small enough to inline into both
 * access functions; faults in ad_fault. */
static inline enum tier ad_serve(struct ad_policy *a, uint32_t i)
{
	struct pc *pc = &a->base.pc;
	struct pc_page *g = pc_pg(pc, i);
	if (a->mode == AD_PIN)
		return ad_pin_access(a, i);

	if (g->tier == TIER_MRAM || g->tier == TIER_DRAM) {
		enum tier t = (enum tier)g->tier;
		struct pc_list *l = ad_list(a, g->list);
		pc_list_del(pc, l, i);
		ad_push(a, i, t);
		if (t == TIER_DRAM && pc->capy[TIER_MRAM] && ad_hot(a, g))
			ad_maybe_promote(a, i);
		return (enum tier)pc_pg(pc, i)->tier;
	}
	return ad_fault(a, i);
}

/* A fault (not AD_PIN). Free frames first, the fast tier first. */
static enum tier ad_fault(struct ad_policy *a, uint32_t i)
{
	struct pc *pc = &a->base.pc;
	enum tier to;
	if (!pc_full(pc, TIER_MRAM)) {
		to = TIER_MRAM;
	} else if (!pc_full(pc, TIER_DRAM)) {
		to = TIER_DRAM;
	} else {
		uint32_t v = ad_victim(a, i);
		to = (enum tier)pc_pg(pc, v)->tier;
		ad_unlink(&a->base, v);
		pc_evict(pc, v);
		uint32_t m = a->mram.tail, q = a->pending;
		a->pending = PC_NIL;
		if (to == TIER_DRAM && m != PC_NIL && q != PC_NIL && q != i &&
		    pc_pg(pc, q)->tier == TIER_DRAM && ad_hot(a, pc_pg(pc, q)) &&
		    !ad_hot(a, pc_pg(pc, m)) &&
		    ad_heat(a, pc_pg(pc, q)) >=
			    ad_heat(a, pc_pg(pc, m)) + a->pay_swap) {
			/* The freed DRAM frame lets a waiting promotion
			 * through: MRAM's LRU page down, the hot page up,
			 * the new page into the hot page's old frame. */
			pc_list_del(pc, &a->mram, m);
			pc_bring(pc, m, TIER_DRAM);
			ad_push_down(a, m);
			pc_list_del(pc, &a->dram, q);
			pc_bring(pc, q, TIER_MRAM);
			ad_push(a, q, TIER_MRAM);
		} else if (to == TIER_DRAM && m != PC_NIL &&
			   ad_hot(a, pc_pg(pc, i)) && !ad_hot(a, pc_pg(pc, m)) &&
			   ad_heat(a, pc_pg(pc, i)) >=
				   ad_heat(a, pc_pg(pc, m)) + a->pay_move) {
			/* A hot page arriving in a DRAM frame takes MRAM
			 * when MRAM's LRU page is cold enough to move down. */
			pc_list_del(pc, &a->mram, m);
			pc_bring(pc, m, TIER_DRAM);
			ad_push_down(a, m);
			to = TIER_MRAM;
		}
	}
	pc_bring(pc, i, to);
	ad_push(a, i, to);
	return to;
}

static enum tier ad_access(struct policy *p, uint32_t i, bool write)
{
	struct ad_policy *a = (struct ad_policy *)p;
	struct pc_page *g = ad_start(a, i);
	ad_touch(a, g, write);
	/* Before the shadows, which may share the threshold. */
	if (++a->since_thr >= AD_T_EVERY)
		ad_threshold(a);
	ad_shadow(a, g, write);
	return ad_serve(a, i);
}

/* A shadow's access: as ad_access, but shadows have none of their own. */
static inline enum tier ad_shadow_access(struct policy *p, uint32_t i,
					 bool write)
{
	struct ad_policy *a = (struct ad_policy *)p;
	struct pc_page *g = ad_start(a, i);
	if (a->src) {
		ad_touch_shared(a, g);
	} else {
		ad_touch(a, g, write);
		if (++a->since_thr >= AD_T_EVERY)
			ad_threshold(a);
	}
	return ad_serve(a, i);
}

/* A shadow's modelled time so far, in ns (the paper's Table 2): flash
 * reads and writes, MRAM<->DRAM copies (64 lines read and written), and
 * the memory accesses themselves, so that where nothing goes to flash the
 * mode that serves more from MRAM wins. */
static uint64_t ad_shadow_cost(struct policy *s)
{
	struct policy_counters c;
	policy_get_counters(s, &c);
	uint64_t lines = s->cfg.access_lines;
	return c.loads * 35000 + c.writes_back * 64000 + c.migrations * 2400 +
	       (c.served[TIER_MRAM] * 30 + c.served[TIER_DRAM] * 45) * lines / 2;
}

static void ad_rank(struct ad_policy *a);
static void ad_refile(struct ad_policy *a);

/* The aliased shadow (see alias) becomes one of its own, in the policy's
 * epoch step just before the policy leaves its mode: a copy of the
 * policy's pages, lists and counters, which are the shadow's own after
 * the same accesses and the first half of the same epoch step (the
 * shadow's half, ad_epoch's for !sh[0], is finished here). PINF flags
 * ad_pin_entry_cost may have set come along; a shadow out of AD_PIN
 * never reads them. Out of memory (nvsim), that shadow goes on stale. */
static void ad_fork(struct ad_policy *a)
{
	struct ad_policy *s = (struct ad_policy *)a->sh[a->alias];
	a->alias = -1;
	if (pc_copy(&s->base.pc, &a->base.pc) < 0)
		return;
	s->base.ctr = a->base.ctr;
	s->base.epoch_left = a->base.epoch_left;
	s->mram = a->mram;
	s->dram = a->dram;
	s->pin = a->pin;
	s->e = a->e;
	s->thr = a->thr;
	s->pending = a->pending;
	s->since_thr = a->since_thr;
	s->pay_move = a->pay_move;
	s->pay_swap = a->pay_swap;
	if (s->mode == AD_PIN)
		ad_rank(s);
	if (s->mode == AD_PIN || s->pin.len)
		ad_refile(s);
}

/* A flash read (35 us) for each page of the pin set not yet in MRAM: what
 * entering AD_PIN costs beyond what the pin shadow, pinned all along,
 * shows. Each such page displaces an MRAM page down to DRAM, which pushes
 * DRAM's least recently used page out, and that one is likely read back.
 * Full scale: ad_duel brings it to its shadows' sampled one. */
static uint64_t ad_pin_entry_cost(struct ad_policy *a)
{
	struct pc *pc = &a->base.pc;
	uint64_t n = 0, in = 0;
	ad_rank(a);
	for (uint32_t i = 0; i < pc->n; i++) {
		struct pc_page *g = pc_pg(pc, i);
		if (g->flags & AD_PINF) {
			in += g->tier == TIER_MRAM;
			n += g->tier != TIER_MRAM;
		}
	}
	/* With ties the set may be larger than MRAM: only what fits moves. */
	uint64_t room = pc->capy[TIER_MRAM] > in ? pc->capy[TIER_MRAM] - in : 0;
	return (n < room ? n : room) * 35000;
}

/* Set dueling: each epoch, the mode whose shadow cost least over the
 * recent epochs, if it beats the current one clearly (3%, and for AD_PIN
 * by the cost of moving the pin set in too: without it, one epoch in
 * which the pin shadow did well switches in, and the move costs more
 * than the epochs after it save - cg-small at MRAM 2M + DRAM 4M). */
static void ad_duel(struct ad_policy *a)
{
	for (int k = 0; k < AD_MODES; k++) {
		uint64_t now = ad_shadow_cost(k == a->alias ? &a->base : a->sh[k]);
		uint64_t c = now - a->sh_cost[k];
		a->sh_cost[k] = now;
		/* Decayed over ~8 epochs: the verdict follows real changes,
		 * not the phase-to-phase noise of an iterative code. */
		a->sh_avg[k] = a->sh_avg[k] * 0.875 + (double)c;
	}
	/* Compared once all are brought up to date: each other mode at
	 * what switching to it would cost, its average plus the band (and
	 * for AD_PIN the move of its set); the cheapest that beats the
	 * current mode wins. Every mode is compared, not only the one of
	 * cheapest average: when that one is AD_PIN and its entry costs too
	 * much, a clearly better third mode must still be taken. */
	double cur = a->sh_avg[a->mode], best_eff = cur;
	int best = (int)a->mode;
	/* Pinned from the start by a whole-run profile: the first epochs
	 * are a program's set-up, where pinning looks bad and is not what
	 * the profile was made for, so the pin set is held for
	 * AD_PIN_HOLD epochs: without the hold MG (oracle profile, DRAM 20%
	 * of the footprint) runs 12% behind mram-fixed and gups-small 4%;
	 * with 3 epochs both match it (cg-small at worst 1.07). */
	if (a->mode == AD_PIN && a->base.fixed_profile && a->e < AD_PIN_HOLD)
		return;
	for (int k = 0; k < AD_MODES; k++) {
		if (k == (int)a->mode || a->sh_avg[k] * 1.03 >= best_eff)
			continue;
		double eff = a->sh_avg[k] * 1.03;
		if (k == AD_PIN)   /* its cost on the shadows' 1-in-2^s scale */
			eff += (double)(ad_pin_entry_cost(a) >> a->s);
		if (eff < best_eff) {
			best_eff = eff;
			best = k;
		}
	}
	/* Pinning entered in the first AD_PIN_HOLD epochs must win two
	 * duels in a row: a pin set ranked by an epoch or two of heat is the
	 * program's set-up, as above. One good epoch of the pin shadow (5%)
	 * switched cg-small at MRAM 2.2 + DRAM 0.54 MiB into pinning at
	 * epoch 2, and the next epoch cost 17 times the off mode's: 1.41x
	 * lru over the run; 1.00x with this. (MG at MRAM 1.5 + DRAM 1 MiB
	 * pays for the wait: 0.985x to 1.074x the best other policy.) */
	int won = best;
	if (best == AD_PIN && best != (int)a->mode && a->e < AD_PIN_HOLD &&
	    a->won != AD_PIN)
		best = (int)a->mode;
	a->won = won;
	if (best != (int)a->mode && a->alias >= 0)
		ad_fork(a);
	a->mode = (enum ad_mode)best;
}

/* What the pin set is ranked by: the profile when one was given (a
 * whole-run count), else the aged heat. */
static uint64_t ad_rank_value(const struct ad_policy *a,
			      const struct pc_page *g)
{
	return a->base.fixed_profile ? g->prof : ad_heat(a, g);
}

/* The pin set: the mram_pages hottest pages by ad_rank_value (more when
 * pages tie at the last place), flagged AD_PINF; pinning stops when MRAM
 * is full of them. O(pages), once per epoch, as mram-fixed's ranking. */
static void ad_rank(struct ad_policy *a)
{
	struct pc *pc = &a->base.pc;
	uint32_t *sc = pc_scratch(pc);
	uint64_t n = 0, k = a->base.cfg.mram_pages;
	for (uint32_t i = 0; i < pc->n; i++) {
		struct pc_page *g = pc_pg(pc, i);
		uint64_t h = ad_rank_value(a, g);
		g->flags &= ~AD_PINF;
		if (h && sc)
			sc[n++] = h > UINT32_MAX ? UINT32_MAX : (uint32_t)h;
	}
	uint32_t thr = pc_kth(pc, n, k);
	if (!sc || n == 0)
		return;
	/* Every page at or above the k-th value, ties included: with many
	 * pages tied at the threshold (the pages of one vector, counted
	 * alike), the first of them to arrive take the pin slots, as in
	 * mram-fixed, rather than those first in table order. */
	for (uint32_t i = 0; i < pc->n; i++) {
		struct pc_page *g = pc_pg(pc, i);
		uint64_t h = ad_rank_value(a, g);
		if (h && h >= thr)
			g->flags |= AD_PINF;
	}
}

/* File MRAM pages again after a ranking or a change of mode: pinned ones
 * (AD_PIN only) on the pin list, the others on the MRAM list, each in
 * recency order (merged from the old lists' cold ends). */
static void ad_refile(struct ad_policy *a)
{
	struct pc *pc = &a->base.pc;
	struct pc_list src[2] = { a->mram, a->pin };
	pc_list_init(&a->mram);
	pc_list_init(&a->pin);
	for (;;) {
		uint32_t x = pc_list_tail(&src[0]), y = pc_list_tail(&src[1]);
		uint32_t v = ad_older(pc, x, y);
		if (v == PC_NIL)
			break;
		pc_list_del(pc, v == x ? &src[0] : &src[1], v);
		ad_push(a, v, TIER_MRAM);
	}
}

static void ad_epoch(struct policy *p)
{
	struct ad_policy *a = (struct ad_policy *)p;
	a->e++;
	ad_set_pay(a);
	/* A shared shadow's epoch comes in the same access as its policy's,
	 * just before; the threshold it takes at its next access is the one
	 * the policy's epoch makes. */
	if (!a->src) {
		a->hist[0] += a->hist[1];
		memmove(&a->hist[1], &a->hist[2],
			(AD_BUCKETS - 2) * sizeof(uint64_t));
		a->hist[AD_BUCKETS - 1] = 0;
		ad_threshold(a);
	}
	if (a->sh[0] && a->force < 0)
		ad_duel(a);
	if (a->mode == AD_PIN)
		ad_rank(a);
	if (a->mode == AD_PIN || a->pin.len)
		ad_refile(a);
}

static const struct policy_ops ad_shadow_ops[AD_MODES];

/* A profile entry: the pin shadow ranks its sample by it too; the other
 * shadows never rank, but take the page in the same place (ad_shadow). */
static int ad_profile(struct policy *p, uint32_t i, uint64_t count)
{
	struct ad_policy *a = (struct ad_policy *)p;
	uint64_t key = pc_pg(&p->pc, i)->key;
	if (!ad_sampled(a, key))
		return 0;
	for (int k = 0; k < AD_MODES; k++) {
		int rc = policy_set_profile(a->sh[k], key, count);
		/* A full shadow table (live, preallocated) just does not
		 * see that page, as with accesses: the policy itself has
		 * its count. */
		if (rc < 0 && rc != -ENOMEM)
			return rc;
	}
	return 0;
}

static int ad_init_common(struct policy *p, int force)
{
	struct ad_policy *a = (struct ad_policy *)p;
	pc_list_init(&a->mram);
	pc_list_init(&a->dram);
	pc_list_init(&a->pin);
	a->thr = AD_NONE;
	a->pending = PC_NIL;
	a->force = force;
	a->won = -1;
	a->mode = force < 0 ? AD_OFF : (enum ad_mode)force;
	a->alias = -1;
	ad_set_pay(a);
	return 0;
}

static int ad_init_shadow_off(struct policy *p)
{
	return ad_init_common(p, AD_OFF);
}

static int ad_init_shadow_on(struct policy *p)
{
	return ad_init_common(p, AD_PROTECT);
}

static int ad_init_shadow_pin(struct policy *p)
{
	return ad_init_common(p, AD_PIN);
}

static void ad_fini(struct policy *p)
{
	struct ad_policy *a = (struct ad_policy *)p;
	for (int k = 0; k < AD_MODES; k++) {
		policy_destroy(a->sh[k]);
		a->sh[k] = NULL;
	}
}

static int ad_init(struct policy *p)
{
	struct ad_policy *a = (struct ad_policy *)p;
	const struct policy_config *cfg = &p->cfg;
	ad_init_common(p, -1);
	uint64_t tot = cfg->mram_pages + cfg->dram_pages;
	a->s = 0;
	while (a->s < 6 && (tot >> (a->s + 1)) >= AD_SHADOW_MIN)
		a->s++;
	struct policy_config sc = *cfg;
	sc.mram_pages = cfg->mram_pages >> a->s;
	sc.dram_pages = cfg->dram_pages >> a->s;
	sc.max_pages = 0;
	sc.epoch = cfg->epoch >> a->s ? cfg->epoch >> a->s : 1;
	if (!cfg->mram_pages || sc.mram_pages + sc.dram_pages == 0)
		return 0;   /* nothing to protect with: plain LRU + tiering */
	/* Live: preallocated tables, twice the expected sample, never grown
	 * (a full shadow just stops learning new pages). */
	uint32_t reserve = 0;
	if (cfg->max_pages) {
		uint64_t r = (cfg->max_pages >> a->s) * 2 + 1024;
		reserve = r > (1u << 30) ? (1u << 30) : (uint32_t)r;
	}
	int rc = 0;
	for (int k = 0; k < AD_MODES && rc == 0; k++)
		rc = policy_create_ops(&a->sh[k], &ad_shadow_ops[k], &sc, reserve);
	if (rc < 0) {
		ad_fini(p);
		return rc;
	}
	if (a->s == 0)
		for (int k = 0; k < AD_MODES; k++)
			((struct ad_policy *)a->sh[k])->src = a;
	if (a->s == 0 && !cfg->max_pages)
		a->alias = AD_OFF;   /* ad_init_common's mode */
	return 0;
}

const struct policy_ops policy_adaptive_ops = {
	.name = "adaptive",
	.size = sizeof(struct ad_policy),
	.ranks = false,
	.own_rank = true,
	.init = ad_init,
	.fini = ad_fini,
	.access = ad_access,
	.unlink = ad_unlink,
	.epoch = ad_epoch,
	.reset = ad_reset,
	.profile = ad_profile,
};

/* The shadows: adaptive itself held in each mode. */
static const struct policy_ops ad_shadow_ops[AD_MODES] = {
	{ .name = "adaptive-unprotected", .size = sizeof(struct ad_policy),
	  .init = ad_init_shadow_off, .fini = ad_fini,
	  .access = ad_shadow_access, .unlink = ad_unlink, .epoch = ad_epoch,
	  .reset = ad_reset },
	{ .name = "adaptive-protected", .size = sizeof(struct ad_policy),
	  .init = ad_init_shadow_on, .fini = ad_fini,
	  .access = ad_shadow_access, .unlink = ad_unlink, .epoch = ad_epoch,
	  .reset = ad_reset },
	{ .name = "adaptive-pinned", .size = sizeof(struct ad_policy),
	  .own_rank = true, .init = ad_init_shadow_pin, .fini = ad_fini,
	  .access = ad_shadow_access, .unlink = ad_unlink, .epoch = ad_epoch,
	  .reset = ad_reset, .profile = ad_profile },
};
