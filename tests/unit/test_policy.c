/* test_policy.c - every tiering policy against the rules of policy.h (a
 * shadow copy of the tiers replays each move and checks it), plus
 * hand-made traces whose right answer is known. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <cmocka.h>

#include "pmem/policy.h"

/* --- allocation counting (live path must not allocate) -------------------
 * Interposes malloc & co. in this executable; not under ASan, whose own
 * interceptors own the heap there. */
#if defined(__SANITIZE_ADDRESS__)
#define COUNT_ALLOCS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COUNT_ALLOCS 0
#endif
#endif
#ifndef COUNT_ALLOCS
#define COUNT_ALLOCS 1
#endif

#if COUNT_ALLOCS
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
static int alloc_counting;
static unsigned long alloc_calls;
void *malloc(size_t n)
{
	if (alloc_counting)
		alloc_calls++;
	return __libc_malloc(n);
}
void *calloc(size_t a, size_t b)
{
	if (alloc_counting)
		alloc_calls++;
	return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n)
{
	if (alloc_counting)
		alloc_calls++;
	return __libc_realloc(p, n);
}
#endif

static const char *const names[] = { "lru", "mram-fixed", "lowpower",
				     "adaptive" };
#define NNAMES (sizeof(names) / sizeof(names[0]))

/* --- shadow tiers -------------------------------------------------------- */
#define SH_MAX 4096
struct shadow {
	uint64_t keys[SH_MAX];
	uint8_t tier[SH_MAX], dirty[SH_MAX], flash[SH_MAX];
	unsigned n;
	uint64_t used[2], cap[2];
	uint64_t writes, drops, loads, migrations;
};

static unsigned sh_idx(struct shadow *s, uint64_t key)
{
	for (unsigned i = 0; i < s->n; i++)
		if (s->keys[i] == key)
			return i;
	assert_true(s->n < SH_MAX);
	s->keys[s->n] = key;
	s->tier[s->n] = TIER_NONE;
	s->dirty[s->n] = s->flash[s->n] = 0;
	return s->n++;
}

/* The page's contents are gone (a TRIM): forgotten by policy and shadow. */
static void sh_forget(struct policy *p, struct shadow *s, uint64_t key)
{
	policy_forget(p, key);
	unsigned i = sh_idx(s, key);
	if (s->tier[i] < TIER_FLASH)
		s->used[s->tier[i]]--;
	s->tier[i] = TIER_NONE;
	s->flash[i] = s->dirty[i] = 0;
	assert_int_equal(policy_where(p, key), TIER_NONE);
}

/* One access through policy and shadow, checking every rule. */
static enum tier sh_access(struct policy *p, struct shadow *s, uint64_t key,
			   bool write)
{
	struct tier_move mv[POLICY_MAX_MOVES];
	enum tier served = TIER_NONE;
	unsigned n = policy_access(p, key, write, mv, &served);
	assert_true(n <= POLICY_MAX_MOVES);
	for (unsigned k = 0; k < n; k++) {
		unsigned i = sh_idx(s, mv[k].page);
		assert_int_equal(mv[k].from, s->tier[i]);
		assert_int_not_equal(mv[k].from, mv[k].to);
		if (s->tier[i] < TIER_FLASH)
			s->used[s->tier[i]]--;
		switch (mv[k].kind) {
		case MOVE_LOAD:
			assert_int_equal(mv[k].from, TIER_FLASH);
			assert_true(mv[k].to < TIER_FLASH);
			s->loads++;
			break;
		case MOVE_PLACE:
			assert_int_equal(mv[k].from, TIER_NONE);
			assert_true(mv[k].to < TIER_FLASH);
			s->flash[i] = 0;
			s->dirty[i] = 0;
			break;
		case MOVE_MIGRATE:
			assert_true(mv[k].from < TIER_FLASH && mv[k].to < TIER_FLASH);
			s->migrations++;
			break;
		case MOVE_WRITE:
			assert_true(mv[k].from < TIER_FLASH);
			assert_int_equal(mv[k].to, TIER_FLASH);
			/* Only when needed: dirty or no flash copy. */
			assert_true(s->dirty[i] || !s->flash[i]);
			s->flash[i] = 1;
			s->dirty[i] = 0;
			s->writes++;
			break;
		case MOVE_DROP:
			assert_true(mv[k].from < TIER_FLASH);
			assert_int_equal(mv[k].to, TIER_FLASH);
			assert_true(!s->dirty[i] && s->flash[i]);
			s->drops++;
			break;
		default:
			fail_msg("bad move kind %u", mv[k].kind);
		}
		s->tier[i] = mv[k].to;
		if (s->tier[i] < TIER_FLASH) {
			s->used[s->tier[i]]++;
			assert_true(s->used[s->tier[i]] <= s->cap[s->tier[i]]);
		}
	}
	unsigned i = sh_idx(s, key);
	assert_true(served == TIER_MRAM || served == TIER_DRAM);
	assert_int_equal(s->tier[i], served);
	assert_int_equal(policy_where(p, key), served);
	if (write)
		s->dirty[i] = 1;
	return served;
}

static struct policy *mk(const char *name, uint64_t mram, uint64_t dram,
			 uint64_t max_pages, uint64_t epoch, struct shadow *s)
{
	struct policy_config cfg = { .mram_pages = mram, .dram_pages = dram,
				     .max_pages = max_pages, .alpha = 0.9,
				     .epoch = epoch };
	struct policy *p = NULL;
	int rc = policy_create(&p, name, &cfg);
	if (rc == -ENOENT)
		return NULL;   /* not (yet) built: caller skips */
	assert_int_equal(rc, 0);
	if (s) {
		memset(s, 0, sizeof(*s));
		s->cap[TIER_MRAM] = mram;
		s->cap[TIER_DRAM] = dram;
	}
	return p;
}

static uint64_t rnd_state = 88172645463325252ull;
static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

/* --- tests ---------------------------------------------------------------- */

static void create_errors(void **state)
{
	struct policy *p = (struct policy *)1;
	struct policy_config cfg = { .mram_pages = 4, .dram_pages = 4,
				     .alpha = 0.9 };
	(void)state;
	assert_int_equal(policy_create(&p, "nope", &cfg), -ENOENT);
	assert_null(p);
	cfg.mram_pages = cfg.dram_pages = 0;
	assert_int_equal(policy_create(&p, "lru", &cfg), -EINVAL);
	assert_non_null(strstr(policy_names(), "lru"));
	assert_non_null(strstr(policy_names(), "lowpower"));
}

/* Random mixes of hot and cold pages, writes and forgets: every rule holds
 * at every step, in live (max_pages) and nvsim (64-bit keys) modes. */
static void rules_hold_everywhere(void **state)
{
	(void)state;
	static struct shadow s;
	const uint64_t sizes[][2] = { { 4, 12 }, { 12, 4 }, { 1, 1 }, { 8, 0 },
				      { 0, 8 }, { 30, 40 } };
	for (unsigned k = 0; k < NNAMES; k++) {
		for (unsigned z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
			for (int live = 0; live < 2; live++) {
				struct policy *p = mk(names[k], sizes[z][0],
						      sizes[z][1],
						      live ? 200 : 0, 97, &s);
				if (!p)
					continue;
				for (unsigned a = 0; a < 20000; a++) {
					uint64_t r = rnd();
					uint64_t pg = (r & 3) ? (r >> 8) % 10
							      : (r >> 8) % 200;
					if (!live)
						pg = pg * 0x9E3779B97F4A7C15ull + 7;
					if ((r & 0xff) == 1) {
						sh_forget(p, &s, pg);
						continue;
					}
					sh_access(p, &s, pg, (r >> 4) % 3 == 0);
				}
				struct policy_counters c;
				policy_get_counters(p, &c);
				assert_int_equal(c.accesses, c.reads + c.writes);
				assert_int_equal(c.accesses,
						 c.served[0] + c.served[1]);
				assert_int_equal(c.writes_back, s.writes);
				assert_int_equal(c.drops, s.drops);
				assert_int_equal(c.loads, s.loads);
				assert_int_equal(c.migrations, s.migrations);
				policy_destroy(p);
			}
		}
	}
}

/* policy_access_idx with nvsim's numbering (profile pages first, then in
 * order of first access), and with wrong guesses, decides exactly as
 * policy_access: the same moves and tiers at every step, with and without
 * a profile, forgets included; and it tells the page's place back. */
static void numbered_access_same_as_lookup(void **state)
{
	enum { KEYS = 400 };
	static uint64_t keys[KEYS];
	uint64_t x = 0x2545F4914F6CDD1Dull;   /* its own stream: the tests
					       * after it keep theirs */
	(void)state;
	for (unsigned k = 0; k < NNAMES; k++) {
		for (int prof = 0; prof < 2; prof++) {
			struct policy *p[3];
			for (int v = 0; v < 3; v++)
				p[v] = mk(names[k], 6, 20, 0, 300, NULL);
			unsigned nkeys = 0;
			if (prof) {
				for (uint64_t i = 0; i < 80; i++) {
					uint64_t key = (i * 7 + 3) * 0x9E3779B97F4A7C15ull;
					keys[nkeys++] = key;
					for (int v = 0; v < 3; v++)
						assert_int_equal(policy_set_profile(p[v], key, 1 + i % 9), 0);
				}
			}
			for (unsigned a = 0; a < 20000; a++) {
				x ^= x << 13;
				x ^= x >> 7;
				x ^= x << 17;
				uint64_t r = x;
				uint64_t pg = (r & 3) ? (r >> 8) % 15 : (r >> 8) % 250;
				uint64_t key = pg * 0x9E3779B97F4A7C15ull + 3;
				bool w = (r >> 4) % 3 == 0;
				if ((r & 0xff) == 1) {
					for (int v = 0; v < 3; v++)
						policy_forget(p[v], key);
					continue;
				}
				uint32_t num = 0;
				while (num < nkeys && keys[num] != key)
					num++;
				if (num == nkeys) {
					assert_true(nkeys < KEYS);
					keys[nkeys++] = key;
				}
				struct tier_move mv[3][POLICY_MAX_MOVES];
				enum tier t[3];
				unsigned n[3];
				uint32_t right = num, wrong = (uint32_t)(r >> 20) % 400;
				n[0] = policy_access(p[0], key, w, mv[0], &t[0]);
				n[1] = policy_access_idx(p[1], key, &right, w, mv[1], &t[1]);
				n[2] = policy_access_idx(p[2], key, &wrong, w, mv[2], &t[2]);
				assert_int_equal(right, num);
				assert_int_equal(wrong, num);
				for (int v = 1; v < 3; v++) {
					assert_int_equal(n[v], n[0]);
					assert_int_equal(t[v], t[0]);
					for (unsigned m = 0; m < n[0]; m++) {
						assert_int_equal(mv[v][m].page, mv[0][m].page);
						assert_int_equal(mv[v][m].from, mv[0][m].from);
						assert_int_equal(mv[v][m].to, mv[0][m].to);
						assert_int_equal(mv[v][m].kind, mv[0][m].kind);
					}
				}
			}
			for (int v = 0; v < 3; v++)
				policy_destroy(p[v]);
		}
	}
}

/* LRU evicts the least recently used page; a clean page whose flash copy
 * is valid is dropped, a dirty one written. */
static void lru_order_and_clean_skip(void **state)
{
	static struct shadow s;
	(void)state;
	struct policy *p = mk("lru", 2, 2, 0, 1000, &s);
	struct policy_counters c;
	for (uint64_t pg = 0; pg < 4; pg++)
		sh_access(p, &s, pg, false);
	/* Memory full. Touch 0 so 1 is the LRU page. */
	sh_access(p, &s, 0, false);
	sh_access(p, &s, 4, false);
	assert_int_equal(policy_where(p, 1), TIER_FLASH);
	policy_get_counters(p, &c);
	/* Page 1 had no flash copy: it had to be written. */
	assert_int_equal(c.writes_back, 1);
	/* Bring 1 back (a load), never write it, push it out again. */
	sh_access(p, &s, 1, false);
	policy_get_counters(p, &c);
	assert_int_equal(c.loads, 1);
	assert_int_equal(policy_where(p, 2), TIER_FLASH); /* 2 was LRU */
	for (uint64_t pg = 5; pg < 9; pg++)
		sh_access(p, &s, pg, false);
	assert_int_equal(policy_where(p, 1), TIER_FLASH);
	policy_get_counters(p, &c);
	assert_int_equal(c.drops, 1);     /* page 1: clean, copy valid */
	/* Now dirty it: the next eviction must write. */
	sh_access(p, &s, 1, true);
	uint64_t wb = c.writes_back;
	for (uint64_t pg = 10; pg < 14; pg++)
		sh_access(p, &s, pg, false);
	policy_get_counters(p, &c);
	assert_int_equal(policy_where(p, 1), TIER_FLASH);
	assert_true(c.writes_back >= wb + 1);
	assert_int_equal(c.drops, 1);
	policy_destroy(p);
}

/* A hot set that fits MRAM, among many cold pages: after warm-up every
 * access to a hot page is served from MRAM (not for lru, whose placement
 * is an accident of timing). */
static void hot_set_lands_in_mram(void **state)
{
	static struct shadow s;
	(void)state;
	for (unsigned k = 1; k < NNAMES; k++) {
		struct policy *p = mk(names[k], 4, 8, 0, 2000, &s);
		if (!p)
			continue;
		uint64_t hot_served = 0, hot_mram = 0;
		for (unsigned a = 0; a < 40000; a++) {
			uint64_t r = rnd();
			bool hot = (r % 10) < 8;
			uint64_t pg = hot ? (r >> 8) % 4 : 100 + (r >> 8) % 60;
			enum tier t = sh_access(p, &s, pg, (r >> 5) % 4 == 0);
			if (a >= 20000 && hot) {
				hot_served++;
				hot_mram += t == TIER_MRAM;
			}
		}
		print_message("%s: %lu/%lu hot accesses from MRAM\n", names[k],
			      (unsigned long)hot_mram, (unsigned long)hot_served);
		assert_int_equal(hot_mram, hot_served);
		policy_destroy(p);
	}
}

/* Low locality with phases: 20 pages used evenly, then another 20, each
 * phase one profiling epoch long (the profile always lags). Memory
 * holds exactly 20. Pinning the old phase's pages in MRAM costs faults
 * that LRU does not pay; lowpower notices the low MRAM hit rate. */
static void mram_fixed_loses_on_low_locality(void **state)
{
	static struct shadow s;
	uint64_t loads[NNAMES] = { 0 };
	(void)state;
	for (unsigned k = 0; k < NNAMES; k++) {
		struct policy *p = mk(names[k], 8, 12, 0, 4000, &s);
		struct policy_counters c;
		for (unsigned ph = 0; ph < 6; ph++)
			for (unsigned a = 0; a < 4000; a++)
				sh_access(p, &s, ph * 20 + rnd() % 20, false);
		policy_get_counters(p, &c);
		loads[k] = c.loads + c.places;
		print_message("%s: %lu faults\n", names[k],
			      (unsigned long)loads[k]);
		policy_destroy(p);
	}
	assert_true(loads[1] > loads[0] + loads[0] / 2);   /* mram-fixed loses */
	assert_true(loads[2] < loads[1]);                  /* lowpower less so */
	assert_true(loads[3] < loads[2]);                  /* adaptive: less */
}

/* An oracle profile (policy_set_profile) pins the hottest pages in MRAM
 * from their first touch, even after cold pages came first and could have
 * filled MRAM: almost no migrations. adaptive ranks its pin set by the
 * profile too and starts pinned. Too late once accesses have been made;
 * ignored by lru. */
static void oracle_profile_pins_from_start(void **state)
{
	static struct shadow s;
	(void)state;
	for (unsigned k = 0; k < NNAMES; k++) {
		struct policy *p = mk(names[k], 4, 8, 0, 500, &s);
		for (uint64_t pg = 0; pg < 64; pg++)
			assert_int_equal(policy_set_profile(p, pg, pg < 4 ? 1000 : 10), 0);
		uint64_t hot_mram = 0, hot = 0;
		for (uint64_t pg = 60; pg < 64; pg++)
			sh_access(p, &s, pg, false);
		for (unsigned a = 0; a < 5000; a++) {
			uint64_t r = rnd();
			uint64_t pg = (r % 10) < 8 ? (r >> 8) % 4 : 4 + (r >> 8) % 60;
			if (a == 100) {
				/* the hot pages freed (a TRIM in a replayed
				 * log) and written again: the whole-run
				 * profile still ranks them hot */
				for (uint64_t h = 0; h < 4; h++)
					sh_forget(p, &s, h);
			}
			enum tier t = sh_access(p, &s, pg, false);
			if (pg < 4) {
				hot++;
				hot_mram += t == TIER_MRAM;
			}
		}
		struct policy_counters c;
		policy_get_counters(p, &c);
		if (k >= 1) {   /* mram-fixed, lowpower, adaptive */
			assert_int_equal(hot_mram, hot);
			/* at most a page that took a freed hot page's MRAM
			 * frame moves out again, once per freed page */
			assert_true(c.migrations <= 4);
		}
		assert_int_equal(policy_set_profile(p, 1, 5), -EBUSY);
		policy_destroy(p);
	}
	struct policy *p = mk("lowpower", 4, 8, 100, 500, NULL);
	assert_int_equal(policy_set_profile(p, 100, 5), -ERANGE);
	policy_destroy(p);
}

/* Everything fits and every page is about as hot as any other: adaptive
 * must not pay for copies that cannot pay back. */
static void adaptive_migrates_only_when_it_pays(void **state)
{
	static struct shadow s;
	(void)state;
	struct policy *p = mk("adaptive", 16, 48, 0, 2000, &s);
	for (unsigned a = 0; a < 40000; a++)
		sh_access(p, &s, rnd() % 64, false);
	struct policy_counters c;
	policy_get_counters(p, &c);
	print_message("adaptive: %lu migrations\n", (unsigned long)c.migrations);
	assert_true(c.migrations <= 4);
	assert_int_equal(c.loads, 0);
	policy_destroy(p);
}

/* A cyclic pass over a region that exactly fits memory, after a
 * sequential write of 4x as much (the live-trace replay of
 * sim_live_trace.sh, scaled down): the first pass loads the region, the
 * later ones must hit, as they do for lru. Clean-first eviction used to
 * thrash here: the last few dirty pages of the write stay at the LRU end,
 * and passing over them took the clean region pages just behind them,
 * which are exactly the next ones the pass needs (every access of every
 * pass a fault). Also with the cold pages written several times (more
 * than the region's pages have been used when the passes start), and
 * with MRAM in the memory. */
static void adaptive_cyclic_region_does_not_thrash(void **state)
{
	static struct shadow s;
	(void)state;
	static const struct { uint64_t mram, dram, epoch; unsigned fill; } cf[] = {
		{ 0, 32, 100000, 1 }, { 8, 24, 100000, 1 }, { 0, 32, 100000, 3 },
		{ 8, 24, 500, 3 },
	};
	for (unsigned c = 0; c < sizeof(cf) / sizeof(cf[0]); c++) {
		uint64_t mem = cf[c].mram + cf[c].dram, loads[2], late[2];
		for (unsigned k = 0; k < 2; k++) {
			struct policy *p = mk(k ? "adaptive" : "lru", cf[c].mram,
					      cf[c].dram, 0, cf[c].epoch, &s);
			struct policy_counters ct;
			for (unsigned w = 0; w < cf[c].fill; w++)
				for (uint64_t pg = 0; pg < 4 * mem; pg++)
					sh_access(p, &s, pg, true);
			policy_get_counters(p, &ct);
			uint64_t before = ct.loads;
			for (unsigned pass = 0; pass < 10; pass++) {
				if (pass == 5) {
					policy_get_counters(p, &ct);
					late[k] = ct.loads;
				}
				for (uint64_t pg = 2 * mem; pg < 3 * mem; pg++)
					sh_access(p, &s, pg, false);
			}
			policy_get_counters(p, &ct);
			loads[k] = ct.loads - before;
			late[k] = ct.loads - late[k];
			policy_destroy(p);
		}
		print_message("MRAM %lu + DRAM %lu, written %ux: lru %lu, adaptive %lu loads (%lu in passes 6-10)\n",
			      (unsigned long)cf[c].mram, (unsigned long)cf[c].dram,
			      cf[c].fill, (unsigned long)loads[0],
			      (unsigned long)loads[1], (unsigned long)late[1]);
		assert_int_equal(loads[0], mem);
		/* The later passes hit, whatever came before. */
		assert_int_equal(late[1], 0);
		/* Written once, the cold pages have been used less than the
		 * region's pages from the first pass on: no extra fault.
		 * Written 3x, a region page may need a few passes to count
		 * as used more often than the cold pages. */
		assert_true(loads[1] <= (cf[c].fill == 1 ? loads[0] : 4 * loads[0]));
	}
}

/* A stable pin set beats recency (MG's V-cycle sweeps, scaled down): each
 * round touches a hot set as large as MRAM once, then sweeps through
 * twice as many cold pages as memory holds. The hot pages' reuse distance
 * is longer than memory, so LRU-like placement loses them every round,
 * and their heat cools between rounds too far for protection to keep
 * them; pinning the hottest MRAM-full of pages keeps them all, as online
 * mram-fixed does. adaptive must find that placement: within a few
 * percent of mram-fixed's faults, far below lru's. */
static void adaptive_finds_stable_pin_set(void **state)
{
	static struct shadow s;
	static const char *const who[] = { "lru", "mram-fixed", "adaptive" };
	uint64_t faults[3];
	(void)state;
	for (unsigned k = 0; k < 3; k++) {
		struct policy *p = mk(who[k], 16, 16, 0, 4000, &s);
		struct policy_counters c;
		uint64_t cold = 1000, before = 0;
		for (unsigned round = 0; round < 400; round++) {
			if (round == 200) {
				policy_get_counters(p, &c);
				before = c.loads + c.places;
			}
			for (uint64_t h = 0; h < 16; h++)
				for (unsigned t = 0; t < 3; t++)
					sh_access(p, &s, h, t == 0);
			for (unsigned n = 0; n < 64; n++)
				sh_access(p, &s, cold + (round * 64 + n) % 512,
					  n % 4 == 0);
		}
		policy_get_counters(p, &c);
		faults[k] = c.loads + c.places - before;
		print_message("%s: %lu faults in rounds 200-399\n", who[k],
			      (unsigned long)faults[k]);
		policy_destroy(p);
	}
	assert_true(faults[1] < faults[0] * 9 / 10);
	assert_true(faults[2] <= faults[1] + faults[1] / 20);
}

/* adaptive's nvsim tables (growing; the policy stands in for the shadow of
 * its mode until its first change of mode, then forks it off as a copy)
 * and its live tables (preallocated, every shadow run all along) must make
 * the same decisions: the same tier and the same moves at every access of
 * a stream whose phases change the mode five times, back to the first
 * one too (a hot set under a cold stream, a new set, a cyclic sweep
 * larger than memory, random accesses). A fork that does not copy the
 * policy's tables fails here at access 152000. */
static void adaptive_nvsim_tables_decide_as_live(void **state)
{
	(void)state;
	/* access_lines alike: it defaults to 64 in live mode, 1 in nvsim */
	struct policy_config ca_ = { .mram_pages = 32, .dram_pages = 32,
				     .alpha = 0.9, .epoch = 2000,
				     .access_lines = 64 };
	struct policy_config cb_ = ca_;
	cb_.max_pages = 1 << 16;
	struct policy *a = NULL, *b = NULL;
	assert_int_equal(policy_create(&a, "adaptive", &ca_), 0);
	assert_int_equal(policy_create(&b, "adaptive", &cb_), 0);
	struct tier_move ma[POLICY_MAX_MOVES], mb[POLICY_MAX_MOVES];
	uint64_t n = 0;
	rnd_state = 4242;
	for (unsigned phase = 0; phase < 8; phase++)
		for (unsigned i = 0; i < 30000; i++, n++) {
			uint64_t key;
			switch (phase % 4) {
			case 0: key = i % 4 ? rnd() % 24 : 1000 + i;  /* hot + cold */
				break;
			case 1: key = 5000 + phase * 100 + rnd() % 56; /* a new set */
				break;
			case 2: key = i % 200; break;                 /* sweep */
			default: key = rnd() % 300; break;
			}
			bool w = rnd() % 3 == 0;
			enum tier ta, tb;
			unsigned ka = policy_access(a, key, w, ma, &ta);
			unsigned kb = policy_access(b, key, w, mb, &tb);
			if (ta != tb || ka != kb)
				fail_msg("access %lu (phase %u, page %lu): tier %d/%d, "
					 "%u/%u moves", (unsigned long)n, phase,
					 (unsigned long)key, ta, tb, ka, kb);
			for (unsigned k = 0; k < ka; k++)
				if (ma[k].page != mb[k].page || ma[k].from != mb[k].from ||
				    ma[k].to != mb[k].to || ma[k].kind != mb[k].kind)
					fail_msg("access %lu: move %u differs", (unsigned long)n, k);
		}
	struct policy_counters ca, cb;
	policy_get_counters(a, &ca);
	policy_get_counters(b, &cb);
	assert_memory_equal(&ca, &cb, sizeof(ca));
	policy_destroy(a);
	policy_destroy(b);
}

/* Live mode: no allocation at all after policy_create. */
static void live_path_never_allocates(void **state)
{
	(void)state;
#if COUNT_ALLOCS
	for (unsigned k = 0; k < NNAMES; k++) {
		struct tier_move mv[POLICY_MAX_MOVES];
		enum tier t;
		struct policy *p = mk(names[k], 16, 32, 1024, 256, NULL);
		if (!p)
			continue;
		alloc_calls = 0;
		alloc_counting = 1;
		for (unsigned a = 0; a < 50000; a++) {
			uint64_t r = rnd();
			policy_access(p, (r & 1) ? (r >> 8) % 40 : (r >> 8) % 1024,
				      (r >> 3) & 1, mv, &t);
			if ((r & 0x3ff) == 5)
				policy_forget(p, (r >> 12) % 1024);
		}
		alloc_counting = 0;
		assert_int_equal(alloc_calls, 0);
		/* Out of range pages are refused, not stored. */
		assert_int_equal(policy_access(p, 1024, false, mv, &t), 0);
		assert_int_equal(t, TIER_NONE);
		policy_destroy(p);
	}
#else
	skip();
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(create_errors),
		cmocka_unit_test(rules_hold_everywhere),
		cmocka_unit_test(numbered_access_same_as_lookup),
		cmocka_unit_test(lru_order_and_clean_skip),
		cmocka_unit_test(hot_set_lands_in_mram),
		cmocka_unit_test(mram_fixed_loses_on_low_locality),
		cmocka_unit_test(oracle_profile_pins_from_start),
		cmocka_unit_test(adaptive_migrates_only_when_it_pays),
		cmocka_unit_test(adaptive_cyclic_region_does_not_thrash),
		cmocka_unit_test(adaptive_finds_stable_pin_set),
		cmocka_unit_test(adaptive_nvsim_tables_decide_as_live),
		cmocka_unit_test(live_path_never_allocates),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
