/* test_pagestore.c - a node's page store, in DRAM and tiered: the version
 * rules and parity XOR the same in both; tiered, pages beyond memory live
 * on flash and come back intact, the page space is the capacity (new keys
 * beyond it refused, dropped slots reused), and a flash that fails loses
 * only the pages it failed for: -EIO for them, never other bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "flash_fail.h"
#include "tier_files.h"

#include "cluster/pagestore.h"
#include "pmem/tierstore.h"

#define PG PAGESTORE_PAGE

static int setup(void **s)
{
	(void)s;
	tier_files_name("ps");
	return 0;
}

static int teardown(void **s)
{
	(void)s;
	tier_files_remove();
	return 0;
}

static struct pagestore *open_tiered(uint64_t pages, uint64_t m, uint64_t d,
				     const char *policy)
{
	struct tierstore_opts o = {
		.pages = pages, .mram_pages = m, .dram_pages = d,
		.nvram_path = nvram, .flash_path = flash, .policy = policy,
	};
	struct pagestore *ps;
	assert_int_equal(pagestore_open_tiered(&ps, 64, &o), 0);
	return ps;
}

static struct pagestore *open_mode(bool tiered)
{
	struct pagestore *ps;
	if (tiered)
		return open_tiered(64, 4, 4, "lru");
	assert_int_equal(pagestore_open(&ps, 64, 64), 0);
	return ps;
}

/* The same rules whichever way the pages are kept. */
static void versions_and_parity_in_both_modes(void **s)
{
	(void)s;
	static uint8_t a[PG], b[PG], got[PG], want[PG];
	for (int tiered = 0; tiered < 2; tiered++) {
		struct pagestore *ps = open_mode(tiered);
		struct pagestore_key k = { 7, FK_DATA, 100 };
		uint64_t v;
		tier_fill(a, 100, 1);
		tier_fill(b, 100, 2);
		assert_int_equal(pagestore_store(ps, &k, 5, a), 0);
		assert_int_equal(pagestore_fetch(ps, &k, 5, got, &v), 0);
		assert_int_equal(v, 5);
		assert_memory_equal(got, a, PG);
		assert_int_equal(pagestore_store(ps, &k, 4, b), -ESTALE);
		assert_int_equal(pagestore_fetch(ps, &k, 6, got, NULL), -ESTALE);
		assert_int_equal(pagestore_store(ps, &k, 6, b), 0);
		assert_int_equal(pagestore_fetch(ps, &k, 0, got, NULL), 0);
		assert_memory_equal(got, b, PG);
		assert_int_equal(pagestore_drop(ps, &k, 5), -ESTALE);
		assert_int_equal(pagestore_drop(ps, &k, 6), 0);
		assert_int_equal(pagestore_fetch(ps, &k, 0, got, NULL), -ENOENT);

		/* Parity: a new parity page is the XOR of no pages (zeros). */
		struct pagestore_key p = { 7, FK_PARITY, 3 };
		assert_int_equal(pagestore_xor(ps, &p, 1, a), 0);
		assert_int_equal(pagestore_xor(ps, &p, 2, b), 0);
		for (unsigned i = 0; i < PG; i++)
			want[i] = a[i] ^ b[i];
		assert_int_equal(pagestore_fetch(ps, &p, 0, got, &v), 0);
		assert_memory_equal(got, want, PG);
		assert_int_equal(v, 2);
		/* A dropped slot reused for a new parity page reads as zeros
		 * again, not as the old page. */
		assert_int_equal(pagestore_drop(ps, &p, 2), 0);
		assert_int_equal(pagestore_xor(ps, &p, 3, a), 0);
		assert_int_equal(pagestore_fetch(ps, &p, 0, got, NULL), 0);
		assert_memory_equal(got, a, PG);
		/* A delta sent before the page's last whole store (its
		 * owner rebuilt it without that delta) is refused, the page
		 * left as it was: applied, it corrupted the page (a node
		 * that stalled ran its queued overwrites after the owner
		 * had rebuilt the group's parity). Later deltas apply in any
		 * order: XOR commutes, and several data nodes forward them. */
		assert_int_equal(pagestore_store(ps, &p, 9, b), 0);
		assert_int_equal(pagestore_xor(ps, &p, 8, a), -ESTALE);
		assert_int_equal(pagestore_xor(ps, &p, 9, a), -ESTALE);
		assert_int_equal(pagestore_fetch(ps, &p, 0, got, &v), 0);
		assert_memory_equal(got, b, PG);
		assert_int_equal(v, 9);
		assert_int_equal(pagestore_xor(ps, &p, 11, a), 0);
		assert_int_equal(pagestore_xor(ps, &p, 10, b), 0);   /* overtaken */
		assert_int_equal(pagestore_fetch(ps, &p, 0, got, &v), 0);
		assert_memory_equal(got, a, PG);                      /* b^a^b */
		assert_int_equal(v, 11);
		assert_int_equal(pagestore_store(ps, &p, 12, a), 0);

		for (uint64_t id = 0; id < 10; id++) {
			struct pagestore_key o = { 9, FK_DATA, id };
			tier_fill(a, id, 3);
			assert_int_equal(pagestore_store(ps, &o, 1, a), 0);
		}
		assert_int_equal(pagestore_drop_owner(ps, 9), 10);
		struct pagestore_stats st;
		pagestore_get_stats(ps, &st);
		assert_int_equal(st.pages, 1);   /* the parity page of owner 7 */
		assert_int_equal(st.stale_refused, 3 + 2); /* 3 data, 2 parity */
		char txt[4096];
		ssize_t n = pagestore_tier_stats(ps, txt, sizeof(txt));
		assert_true(tiered ? n > 0 && strstr(txt, "policy: lru\n") : n == 0);
		pagestore_close(ps);
	}
}

/* 512 pages in 32 of memory: most on flash, all back intact; the page
 * space is the capacity; dropped slots are reused. */
static void tiered_spills_and_reuses_slots(void **s)
{
	(void)s;
	static uint8_t a[PG], got[PG];
	struct pagestore *ps = open_tiered(512, 8, 24, "adaptive");
	for (uint64_t id = 0; id < 512; id++) {
		struct pagestore_key k = { 1, FK_DATA, id * 7919 };
		tier_fill(a, id, 1);
		assert_int_equal(pagestore_store(ps, &k, 1, a), 0);
	}
	struct pagestore_key more = { 1, FK_DATA, 1 };
	assert_int_equal(pagestore_store(ps, &more, 1, a), -ENOSPC);
	for (uint64_t id = 0; id < 512; id++) {
		struct pagestore_key k = { 1, FK_DATA, id * 7919 };
		tier_fill(a, id, 1);
		assert_int_equal(pagestore_fetch(ps, &k, 1, got, NULL), 0);
		assert_memory_equal(got, a, PG);
	}
	char txt[4096];
	assert_true(pagestore_tier_stats(ps, txt, sizeof(txt)) > 0);
	assert_non_null(strstr(txt, "flash_pages: 480\n"));
	assert_non_null(strstr(txt, "flash_errors: 0\n"));
	for (uint64_t id = 0; id < 16; id++) {
		struct pagestore_key k = { 1, FK_DATA, id * 7919 };
		assert_int_equal(pagestore_drop(ps, &k, 1), 0);
	}
	for (uint64_t id = 0; id < 16; id++) {
		struct pagestore_key k = { 2, FK_DATA, id };
		tier_fill(a, 1000 + id, 2);
		assert_int_equal(pagestore_store(ps, &k, 1, a), 0);
	}
	assert_int_equal(pagestore_store(ps, &more, 1, a), -ENOSPC);
	for (uint64_t id = 16; id < 512; id += 31) {
		struct pagestore_key k = { 1, FK_DATA, id * 7919 };
		tier_fill(a, id, 1);
		assert_int_equal(pagestore_fetch(ps, &k, 1, got, NULL), 0);
		assert_memory_equal(got, a, PG);
	}
	pagestore_close(ps);
}

/* A flash that fails (here: writes past 64 KiB of the file, refused by
 * RLIMIT_FSIZE): the pages whose write-back failed are lost, and only
 * they: each fetch gives exactly the stored bytes or -EIO, never other
 * bytes; the store goes on working, and a lost page stored again (once
 * the flash works) reads back right. */
static void tiered_flash_error_loses_only_those_pages(void **s)
{
	(void)s;
	static uint8_t a[PG], got[PG];
	bool lost[128] = { false };
	unsigned nlost = 0;
	char txt[4096];
	struct pagestore *ps = open_tiered(128, 4, 4, "lru");
	flash_fail_begin(16 * 4096);
	for (uint64_t id = 0; id < 128; id++) {
		struct pagestore_key k = { 1, FK_DATA, id };
		tier_fill(a, id, 1);
		assert_int_equal(pagestore_store(ps, &k, 1, a), 0);
	}
	for (uint64_t id = 0; id < 128; id++) {
		struct pagestore_key k = { 1, FK_DATA, id };
		tier_fill(a, id, 1);
		int rc = pagestore_fetch(ps, &k, 1, got, NULL);
		assert_true(rc == 0 || rc == -EIO);
		if (rc == 0)
			assert_memory_equal(got, a, PG);
		lost[id] = rc == -EIO;
		nlost += lost[id];
	}
	flash_fail_end();
	assert_true(nlost > 0 && nlost < 128);
	assert_true(pagestore_tier_stats(ps, txt, sizeof(txt)) > 0);
	assert_non_null(strstr(txt, "flash_errors: "));
	assert_null(strstr(txt, "flash_errors: 0\n"));
	/* The owner stores the lost pages again: all 128 read back right. */
	for (uint64_t id = 0; id < 128; id++) {
		struct pagestore_key k = { 1, FK_DATA, id };
		tier_fill(a, id, 1);
		if (lost[id])
			assert_int_equal(pagestore_store(ps, &k, 2, a), 0);
	}
	for (uint64_t id = 0; id < 128; id++) {
		struct pagestore_key k = { 1, FK_DATA, id };
		tier_fill(a, id, 1);
		assert_int_equal(pagestore_fetch(ps, &k, 0, got, NULL), 0);
		assert_memory_equal(got, a, PG);
	}
	assert_true(pagestore_tier_stats(ps, txt, sizeof(txt)) > 0);
	assert_non_null(strstr(txt, "pages_lost: 0\n"));
	pagestore_close(ps);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(versions_and_parity_in_both_modes),
		cmocka_unit_test(tiered_spills_and_reuses_slots),
		cmocka_unit_test(tiered_flash_error_loses_only_those_pages),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
