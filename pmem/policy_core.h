/* policy_core.h - the machinery every tiering policy shares (private to
 * pmem/policy*.c): the page table, intrusive LRU lists, the per-page access
 * counters and epoch profile, and the helpers that emit moves while keeping
 * tier occupancy and the policy counters right.
 *
 * Page table: with max_pages != 0 (live store) it is one preallocated array
 * indexed by page number; with max_pages == 0 (nvsim) page keys are hashed
 * (open addressing) to indices of a growing array. Everything refers to
 * pages by 32-bit index, never by pointer, because the nvsim array moves
 * when it grows.
 *
 * Profile: every access bumps the page's epoch count (cur, and reads or
 * writes). Policies that rank pages call pc_profile_step() at each epoch
 * boundary: prof = prof/2 + cur (an exponentially aged profile, i.e. "the
 * previous epochs"), and it returns the profile value of the K-th hottest
 * page, so "hot" is prof >= that value. That step is O(pages) per epoch,
 * amortised O(1) per access when epoch >= pages.
 *
 * Threads: none; the owning policy's caller serialises. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "pmem/policy.h"

#define PC_NIL UINT32_MAX

/* One cache line (aligned, 64 bytes): a policy's access to a page touches
 * most of it, and its list neighbours' links; at 56 bytes most pages
 * straddled two lines. */
struct pc_page {
	_Alignas(64) uint64_t key; /* page number */
	uint64_t last;         /* pc clock at the last access (LRU order) */
	uint32_t prev, next;   /* links in the list named by .list */
	uint32_t cur;          /* accesses in this epoch */
	uint32_t prof;         /* aged profile, updated at epoch steps */
	uint32_t reads, writes;/* aged read/write counts (adaptive) */
	uint32_t stamp;        /* adaptive: epoch of the last count update */
	uint8_t tier;          /* enum tier */
	uint8_t dirty;         /* modified since its flash copy was made */
	uint8_t flash;         /* a flash copy exists (valid unless dirty) */
	uint8_t list;          /* which policy list holds it, 0 = none */
	uint8_t flags;         /* policy-private bits */
	uint8_t hb;            /* adaptive: heat bucket recorded at stamp */
	uint32_t aux;          /* policy-private */
};

struct pc_list {
	uint32_t head, tail;   /* head = most recent */
	uint64_t len;
};

struct pc {
	struct pc_page *pg;
	uint32_t n, cap;               /* entries in use / allocated */
	uint32_t *ht;                  /* nvsim: open-addressing index */
	uint64_t ht_mask;
	bool no_grow;                  /* pc_init_fixed_hash */
	bool big;                      /* pg and scratch from bigmem_alloc */
	uint32_t *scratch;             /* profile ranking; NULL if unused */
	uint64_t max_pages;
	uint64_t clock;                /* accesses so far */
	uint64_t used[2], capy[2];     /* MRAM, DRAM frames used / capacity */
	struct tier_move *mv;          /* output of the current access */
	unsigned nmv;
	struct policy_counters *ctr;
};

/* want_scratch: the policy ranks pages (pc_profile_step). Allocates the
 * whole table when max_pages != 0. Returns 0 or -ENOMEM / -EINVAL. */
int pc_init(struct pc *pc, const struct policy_config *cfg,
	    struct policy_counters *ctr, bool want_scratch);
/* A hashed table (64-bit keys) preallocated for `reserve` pages that never
 * grows: pc_get returns PC_NIL once it is full. For sampled shadows on the
 * live path. */
int pc_init_fixed_hash(struct pc *pc, const struct policy_config *cfg,
		       struct policy_counters *ctr, uint32_t reserve,
		       bool want_scratch);
void pc_fini(struct pc *pc);
/* nvsim tables only (max_pages == 0, growing): make dst's page table an
 * exact copy of src's (entries, index, clock, tier occupancy), as if dst
 * had seen every access src has; dst keeps its counters pointer,
 * capacities and scratch. Allocates; -ENOMEM leaves dst as it was. */
int pc_copy(struct pc *dst, const struct pc *src);
/* Index of page, or PC_NIL when unknown. */
uint32_t pc_find(const struct pc *pc, uint64_t page);
/* Index of page, inserting a TIER_NONE entry when unknown. PC_NIL when the
 * page is out of range (live) or memory ran out (nvsim). */
uint32_t pc_get(struct pc *pc, uint64_t page);

static inline struct pc_page *pc_pg(struct pc *pc, uint32_t i)
{
	return &pc->pg[i];
}

/* Lists (tag identifies the list in page.list; nonzero). Inline: they are
 * most of every policy's hit path (adaptive runs four policies an access
 * with its shadows). */
static inline void pc_list_init(struct pc_list *l)
{
	l->head = l->tail = PC_NIL;
	l->len = 0;
}

static inline void pc_list_push(struct pc *pc, struct pc_list *l, uint8_t tag,
				uint32_t i)
{
	struct pc_page *g = &pc->pg[i];
	g->prev = PC_NIL;
	g->next = l->head;
	if (l->head != PC_NIL)
		pc->pg[l->head].prev = i;
	else
		l->tail = i;
	l->head = i;
	g->list = tag;
	l->len++;
}

static inline void pc_list_push_tail(struct pc *pc, struct pc_list *l,
				     uint8_t tag, uint32_t i)
{
	struct pc_page *g = &pc->pg[i];
	g->next = PC_NIL;
	g->prev = l->tail;
	if (l->tail != PC_NIL)
		pc->pg[l->tail].next = i;
	else
		l->head = i;
	l->tail = i;
	g->list = tag;
	l->len++;
}

static inline void pc_list_del(struct pc *pc, struct pc_list *l, uint32_t i)
{
	struct pc_page *g = &pc->pg[i];
	if (g->prev != PC_NIL)
		pc->pg[g->prev].next = g->next;
	else
		l->head = g->next;
	if (g->next != PC_NIL)
		pc->pg[g->next].prev = g->prev;
	else
		l->tail = g->prev;
	g->prev = g->next = PC_NIL;
	g->list = 0;
	l->len--;
}
static inline uint32_t pc_list_tail(const struct pc_list *l)
{
	return l->tail;
}

/* Moves. pc_evict: memory page -> FLASH, WRITE or DROP (clean with a valid
 * flash copy). pc_bring: page -> memory tier `to` (PLACE/LOAD/MIGRATE).
 * Both keep used[] and the counters; list membership is the caller's.
 * Inline, as the lists: every fault makes one or two. */
static inline void pc_emit(struct pc *pc, uint64_t page, enum tier from,
			   enum tier to, enum move_kind kind)
{
	/* A policy bug must not overrun the caller's array; the unit tests
	 * check that no access ever needs this many. */
	if (pc->nmv >= POLICY_MAX_MOVES)
		return;
	struct tier_move *m = &pc->mv[pc->nmv++];
	m->page = page;
	m->from = (uint8_t)from;
	m->to = (uint8_t)to;
	m->kind = (uint8_t)kind;
}

static inline void pc_evict(struct pc *pc, uint32_t i)
{
	struct pc_page *g = &pc->pg[i];
	enum tier from = (enum tier)g->tier;
	if (g->dirty || !g->flash) {
		pc_emit(pc, g->key, from, TIER_FLASH, MOVE_WRITE);
		pc->ctr->writes_back++;
	} else {
		pc_emit(pc, g->key, from, TIER_FLASH, MOVE_DROP);
		pc->ctr->drops++;
	}
	pc->used[from]--;
	g->tier = TIER_FLASH;
	g->dirty = 0;
	g->flash = 1;
}

static inline void pc_bring(struct pc *pc, uint32_t i, enum tier to)
{
	struct pc_page *g = &pc->pg[i];
	enum tier from = (enum tier)g->tier;
	if (from == to)
		return;
	if (from == TIER_NONE) {
		pc_emit(pc, g->key, from, to, MOVE_PLACE);
		pc->ctr->places++;
		g->dirty = 0;
		g->flash = 0;
	} else if (from == TIER_FLASH) {
		pc_emit(pc, g->key, from, to, MOVE_LOAD);
		pc->ctr->loads++;
	} else {
		pc_emit(pc, g->key, from, to, MOVE_MIGRATE);
		pc->ctr->migrations++;
		pc->used[from]--;
	}
	pc->used[to]++;
	g->tier = (uint8_t)to;
}

static inline bool pc_full(const struct pc *pc, enum tier t)
{
	return pc->used[t] >= pc->capy[t];
}

/* Epoch step (see top): age every profile (unless !age: a fixed profile
 * from policy_set_profile), return the profile value of the k-th hottest
 * page (>= 1), or UINT32_MAX when k == 0 or nothing was accessed. */
uint32_t pc_profile_step(struct pc *pc, uint64_t k, bool age);
/* For a policy that ranks by its own measure: the scratch array, room for
 * every page in the table (nvsim reallocates it here, and may return NULL
 * when memory ran out: rank nothing then); fill it with nonzero values,
 * n of them, and pc_kth() gives the k-th largest (>= 1), or UINT32_MAX
 * when k == 0, n == 0 or there is no scratch. pc_kth reorders scratch. */
uint32_t *pc_scratch(struct pc *pc);
uint32_t pc_kth(struct pc *pc, uint64_t n, uint64_t k);

/* The policy object: a policy's own struct starts with this. */
struct policy;
struct policy_ops {
	const char *name;
	size_t size;          /* of the policy's struct */
	bool ranks;           /* calls pc_profile_step (needs scratch) */
	bool own_rank;        /* ranks by its own measure with pc_scratch
				* (needs scratch) */
	/* Optional: policy_set_profile stored `count` as page i's prof (the
	 * policy then takes profiles although it does not rank by
	 * pc_profile_step; adaptive hands them on to its shadows). */
	int (*profile)(struct policy *p, uint32_t i, uint64_t count);
	int (*init)(struct policy *p);           /* after pc_init */
	void (*fini)(struct policy *p);          /* optional */
	/* Serve an access to page index i: emit moves, return the tier. */
	enum tier (*access)(struct policy *p, uint32_t i, bool write);
	/* Forget: take page i (in a memory tier) off the policy's lists. */
	void (*unlink)(struct policy *p, uint32_t i);
	void (*epoch)(struct policy *p);         /* every cfg.epoch accesses */
	/* Optional: page i is forgotten (any tier), before its counts reset. */
	void (*reset)(struct policy *p, uint32_t i);
};

struct policy {
	const struct policy_ops *ops;
	struct policy_config cfg;
	struct policy_counters ctr;
	struct pc pc;
	bool fixed_profile;   /* policy_set_profile was used */
	uint64_t epoch_left;  /* accesses until the next epoch step */
};

static inline void pc_sat_inc(uint32_t *v)
{
	if (*v != UINT32_MAX)
		(*v)++;
}

/* The access path every policy shares (policy_access_idx's, once the page
 * is found): an access to the page at table index i (PC_NIL: it has
 * none), served by `access`, which is p->ops->access. Inline so that a
 * caller naming the access function itself gets it inlined: adaptive
 * drives its three shadows this way, four policies an access. */
static inline unsigned pc_access_at(struct policy *p, uint32_t i, bool write,
				    struct tier_move *moves, enum tier *served,
				    enum tier (*access)(struct policy *p,
							uint32_t i, bool write))
{
	struct pc *pc = &p->pc;
	pc->mv = moves;
	pc->nmv = 0;
	if (i == PC_NIL) {
		/* Out of range (live) or out of memory (nvsim): the caller
		 * sees TIER_NONE and no moves. */
		*served = TIER_NONE;
		return 0;
	}
	pc->clock++;
	struct pc_page *g = pc_pg(pc, i);
	pc_sat_inc(&g->cur);
	enum tier t = access(p, i, write);
	g = pc_pg(pc, i);
	g->last = pc->clock;
	if (write)
		g->dirty = 1;
	p->ctr.accesses++;
	if (write)
		p->ctr.writes++;
	else
		p->ctr.reads++;
	if (t < TIER_FLASH)
		p->ctr.served[t]++;
	/* A countdown, not accesses % epoch: a division per access was a
	 * tenth of a shadowed policy's time. */
	if (--p->epoch_left == 0) {
		p->epoch_left = p->cfg.epoch;
		if (p->ops->epoch)
			p->ops->epoch(p);
	}
	*served = t;
	return pc->nmv;
}

/* Index of page given a guess of it (see policy_access_idx), inserting it
 * as pc_get does when the guess is wrong. */
static inline uint32_t pc_get_at(struct pc *pc, uint64_t page, uint32_t guess)
{
	if (guess < pc->n && pc->pg[guess].key == page)
		return guess;
	return pc_get(pc, page);
}

/* Create a policy from its ops; reserve != 0 (with cfg->max_pages == 0)
 * makes a non-growing hashed table for that many pages (sampled shadows). */
int policy_create_ops(struct policy **out, const struct policy_ops *ops,
		      const struct policy_config *cfg, uint32_t reserve);

/* Default cfg.epoch when 0 is given (at least max_pages, see policy.c). */
#define POLICY_DEFAULT_EPOCH (1u << 16)

extern const struct policy_ops policy_lru_ops;
extern const struct policy_ops policy_mram_fixed_ops;
extern const struct policy_ops policy_lowpower_ops;
extern const struct policy_ops policy_adaptive_ops;
