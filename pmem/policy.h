/* policy.h - tiering policies: which pages live in MRAM, in DRAM, or on
 * FLASH. There is one implementation of each policy, and it is driven the
 * same way by the live tiered store (nvswapd, nvcached) and by the trace
 * simulator nvsim: the caller presents every page access, the policy answers
 * with the page moves to make before the access is served, and the caller
 * applies them in order (the store copies bytes, nvsim adds up the model's
 * cost). The policy is the authority on where a page is.
 *
 * Rules every policy keeps:
 *  - after policy_access() returns, the accessed page is in MRAM or DRAM
 *    (the tier it is served from is returned);
 *  - moves come in the order they must be applied, and applying them in that
 *    order never puts more pages in a tier than its capacity;
 *  - a page leaving memory for FLASH is MOVE_WRITE if it is dirty or has no
 *    valid flash copy, MOVE_DROP if its flash copy is still valid (the
 *    paper: clean pages are not written back);
 *  - with cfg.max_pages != 0 nothing is allocated after policy_create()
 *    (the live swap path must not allocate); page numbers are < max_pages.
 *    With max_pages == 0 (nvsim) page numbers are arbitrary 64-bit keys and
 *    tables grow.
 *  - deterministic: no clocks; aging runs every cfg.epoch accesses.
 *
 * Threads: a policy object is not thread-safe; its owner serialises calls. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum tier { TIER_MRAM = 0, TIER_DRAM = 1, TIER_FLASH = 2, TIER_NONE = 3 };
#define TIER_COUNT 3

struct policy_config {
	uint64_t mram_pages;   /* capacity of MRAM, pages */
	uint64_t dram_pages;   /* capacity of DRAM, pages */
	uint64_t max_pages;    /* see rules above; 0 = unbounded keys (nvsim) */
	double alpha;          /* lowpower's threshold factor (paper: 0.9) */
	uint64_t epoch;        /* accesses between profiling/aging steps;
				* 0 = max(65536, max_pages) */
	uint32_t access_lines; /* 64 B lines one access moves, for weighing
				* a migration against what it saves; 0 = 64
				* (a 4 KiB page) with max_pages, 1 without */
};

enum move_kind {
	MOVE_LOAD,      /* FLASH -> memory tier (a flash read) */
	MOVE_PLACE,     /* new page (TIER_NONE) -> memory tier, no read */
	MOVE_MIGRATE,   /* memory tier -> other memory tier (a copy) */
	MOVE_WRITE,     /* memory tier -> FLASH, written */
	MOVE_DROP,      /* memory tier -> FLASH, flash copy still valid: no I/O */
};

struct tier_move {
	uint64_t page;
	uint8_t from;   /* enum tier */
	uint8_t to;     /* enum tier */
	uint8_t kind;   /* enum move_kind */
};

/* The most moves one access can produce. */
#define POLICY_MAX_MOVES 16

struct policy_counters {
	uint64_t accesses, reads, writes;
	uint64_t served[TIER_COUNT];     /* accesses served from MRAM / DRAM */
	uint64_t loads, places, migrations, writes_back, drops, forgets;
};

struct policy;

/* Names: "lru", "mram-fixed", "lowpower", "adaptive". -ENOENT for an
 * unknown name, -EINVAL for a config the policy cannot use, -ENOMEM. */
int policy_create(struct policy **out, const char *name,
		  const struct policy_config *cfg);
void policy_destroy(struct policy *p);
const char *policy_name(const struct policy *p);
/* The comma-separated list of known policy names, for --help text. */
const char *policy_names(void);

/* Optional, before the first access: the page's access count from a
 * profiling run (the paper's profile). Policies that rank pages
 * (mram-fixed, lowpower) then rank by these counts for the whole run
 * instead of learning them epoch by epoch; adaptive ranks its pin set by
 * them (and still chooses whether to pin); lru ignores them (in nvsim the
 * page still takes its place in the table: see policy_access_idx).
 * Returns 0, -EBUSY (accesses already made), -ERANGE (page >= max_pages),
 * -ENOMEM. */
int policy_set_profile(struct policy *p, uint64_t page, uint64_t count);

/* Present one access to page. Fills moves[0..n) (n returned, at most
 * POLICY_MAX_MOVES) and *served with the memory tier the access is served
 * from once the moves are applied. */
unsigned policy_access(struct policy *p, uint64_t page, bool write,
		       struct tier_move *moves, enum tier *served);
/* policy_access for a caller that numbers pages itself: *idx is its guess
 * of the page's place in the policy's table, which is the order pages
 * first came (profile pages first, in the order given, then accesses) -
 * the same in every policy given the same pages in the same order, so
 * nvsim numbers each page once for all its policies. A right guess saves
 * the table lookup, a wrong one costs a compare; results are the same.
 * On return *idx is the page's place (UINT32_MAX when it has none). */
unsigned policy_access_idx(struct policy *p, uint64_t page, uint32_t *idx,
			   bool write, struct tier_move *moves,
			   enum tier *served);
/* The page's contents are gone (TRIM, free): it leaves every tier, its flash
 * copy too; no move is needed. */
void policy_forget(struct policy *p, uint64_t page);
/* Where the page is now (TIER_NONE if never seen or forgotten). */
enum tier policy_where(const struct policy *p, uint64_t page);
void policy_get_counters(const struct policy *p, struct policy_counters *out);
