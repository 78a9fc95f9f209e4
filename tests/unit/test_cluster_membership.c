/* test_cluster_membership.c - the failure detector and node table (time is
 * passed in), the page store's version rules, and the capacity offer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <cmocka.h>

#include "cluster/membership.h"
#include "cluster/memwatch.h"
#include "cluster/pagestore.h"

#define MS 1000000ULL

static struct cluster_config cfg;

static struct membership *make(void)
{
	char err[128];
	struct membership *mb;
	assert_int_equal(config_parse_text("secret s\nnode 1 h:1\nnode 2 h:2\n"
					   "node 3 h:3\n", "t", &cfg, err,
					   sizeof(err)), 0);
	assert_int_equal(membership_create(&mb, &cfg, 1, 1000 * MS), 0);
	return mb;
}

/* A node that itself stood still (SIGSTOP, a paused VM) longer than the
 * timeout gives its peers a fresh timeout instead of a death verdict: the
 * silence was its own, their heartbeats still unread in its sockets. */
static void own_stall_kills_no_peer(void **state)
{
	struct membership *mb = make();   /* timeout 1000 ms */
	uint32_t dead[4];
	struct member m;
	(void)state;

	assert_int_equal(membership_heard(mb, 2, 500, NULL, 10 * MS, NULL), MB_UP);
	for (uint64_t t = 250; t <= 1000; t += 250)
		assert_int_equal(membership_tick(mb, t * MS, dead, 4), 0);
	/* next tick 2 s late: no verdict, node 2 still alive */
	assert_int_equal(membership_tick(mb, 3000 * MS, dead, 4), 0);
	membership_get(mb, 2, &m);
	assert_int_equal(m.state, FN_ALIVE);
	assert_int_equal(membership_tick(mb, 3250 * MS, dead, 4), 0);
	assert_int_equal(membership_tick(mb, 3750 * MS, dead, 4), 0);
	/* still silent a whole timeout after that: dead after all */
	assert_int_equal(membership_tick(mb, 4001 * MS, dead, 4), 1);
	assert_int_equal(dead[0], 2);
	membership_destroy(mb);
}

static void heard_dead_back_rejoin(void **state)
{
	struct membership *mb = make();
	struct frame_capacity cap = { 100, 10, 1000 };
	struct member m;
	uint32_t dead[4];
	uint64_t old;
	(void)state;

	assert_int_equal(membership_check(mb, 1, 5), -ENOENT); /* ourselves */
	assert_int_equal(membership_check(mb, 9, 5), -ENOENT); /* not listed */
	assert_int_equal(membership_heard(mb, 2, 500, &cap, 10 * MS, NULL), MB_UP);
	assert_int_equal(membership_heard(mb, 2, 500, NULL, 20 * MS, NULL), MB_NONE);
	assert_int_equal(membership_get(mb, 2, &m), 0);
	assert_int_equal(m.state, FN_ALIVE);
	assert_true(m.cap.offered == 100); /* kept when a report has none */
	/* node 3 never heard from: stays unknown, never "dies" */
	assert_int_equal(membership_tick(mb, 1000 * MS, dead, 4), 0);
	/* exactly at the timeout: still alive; past it: dead, reported once */
	assert_int_equal(membership_tick(mb, 1020 * MS, dead, 4), 0);
	assert_int_equal(membership_tick(mb, 1021 * MS, dead, 4), 1);
	assert_int_equal(dead[0], 2);
	assert_int_equal(membership_tick(mb, 5000 * MS, dead, 4), 0);
	membership_get(mb, 2, &m);
	assert_int_equal(m.state, FN_DEAD);
	assert_true(m.deaths == 1);
	/* same incarnation: it was unreachable */
	assert_int_equal(membership_heard(mb, 2, 500, NULL, 5001 * MS, NULL), MB_BACK);
	/* a new incarnation: a restart */
	assert_int_equal(membership_heard(mb, 2, 900, &cap, 5002 * MS, &old), MB_REJOIN);
	assert_true(old == 500);
	/* the old incarnation is now refused */
	assert_int_equal(membership_check(mb, 2, 500), -ESTALE);
	assert_int_equal(membership_heard(mb, 2, 500, NULL, 5003 * MS, NULL), -ESTALE);
	assert_int_equal(membership_check(mb, 2, 900), 0);
	membership_get(mb, 2, &m);
	assert_true(m.rejoins == 1 && m.incarnation == 900 && m.prev_incarnation == 500);

	struct frame_node tab[8];
	struct frame_capacity self = { 7, 8, 9 };
	unsigned alive, dn, unknown;
	assert_int_equal(membership_snapshot(mb, 5503 * MS, 42, &self, tab, 8), 3);
	assert_int_equal(tab[0].state, FN_SELF);
	assert_true(tab[0].incarnation == 42 && tab[0].cap.offered == 7);
	assert_int_equal(tab[1].state, FN_ALIVE);
	assert_true(tab[1].age_ms == 501);
	assert_int_equal(tab[2].state, FN_UNKNOWN);
	membership_counts(mb, &alive, &dn, &unknown);
	assert_int_equal(alive, 1);
	assert_int_equal(dn, 0);
	assert_int_equal(unknown, 1);
	membership_destroy(mb);
}

static void pagestore_rules(void **state)
{
	struct pagestore *ps;
	struct pagestore_stats st;
	static uint8_t a[PAGESTORE_PAGE], b[PAGESTORE_PAGE], got[PAGESTORE_PAGE];
	struct pagestore_key k = { 1, FK_DATA, 10 }, k2 = { 2, FK_DATA, 10 };
	struct pagestore_key pk = { 1, FK_PARITY, 10 };
	uint64_t v;
	(void)state;

	memset(a, 0xa5, sizeof(a));
	memset(b, 0x3c, sizeof(b));
	assert_int_equal(pagestore_open(&ps, 3, 4), 0);
	assert_int_equal(pagestore_store(ps, &k, 5, a), 0);
	assert_int_equal(pagestore_store(ps, &k, 4, b), -ESTALE);
	assert_int_equal(pagestore_store(ps, &k, 5, a), 0); /* retry */
	assert_int_equal(pagestore_fetch(ps, &k, 0, got, &v), 0);
	assert_memory_equal(got, a, sizeof(a));
	assert_true(v == 5);
	assert_int_equal(pagestore_fetch(ps, &k2, 0, got, &v), -ENOENT);
	assert_int_equal(pagestore_store(ps, &k2, 1, b), 0);
	assert_int_equal(pagestore_xor(ps, &pk, 1, a), 0);
	/* full (3 pages): a new key is refused, an overwrite is not */
	struct pagestore_key k3 = { 3, FK_DATA, 1 };
	assert_int_equal(pagestore_store(ps, &k3, 1, a), -ENOSPC);
	assert_int_equal(pagestore_xor(ps, &(struct pagestore_key){ 3, FK_PARITY, 1 },
				       1, a), -ENOSPC);
	assert_int_equal(pagestore_store(ps, &k2, 2, a), 0);
	assert_int_equal(pagestore_xor(ps, &pk, 2, b), 0);
	assert_int_equal(pagestore_fetch(ps, &pk, 0, got, &v), 0);
	for (int i = 0; i < PAGESTORE_PAGE; i++)
		assert_int_equal(got[i], 0xa5 ^ 0x3c);
	pagestore_get_stats(ps, &st);
	assert_true(st.pages == 3 && st.data_pages == 2 && st.parity_pages == 1);
	assert_true(st.nospace_refused == 2 && st.stale_refused == 1);
	assert_true(st.owners == 2); /* 1 (a page and a parity page) and 2 */
	/* lowering the limit frees nothing; raising it admits again */
	pagestore_set_limit(ps, 1);
	pagestore_get_stats(ps, &st);
	assert_true(st.pages == 3 && st.limit == 1);
	assert_int_equal(pagestore_drop_owner(ps, 1), 2);
	assert_int_equal(pagestore_fetch(ps, &k, 0, got, NULL), -ENOENT);
	assert_int_equal(pagestore_fetch(ps, &k2, 2, got, NULL), 0);
	assert_int_equal(pagestore_store(ps, &k, 1, a), -ENOSPC);
	pagestore_get_stats(ps, &st);
	assert_true(st.owners == 1);
	pagestore_set_limit(ps, 100);
	/* many keys in few buckets */
	for (uint64_t i = 0; i < 90; i++) {
		struct pagestore_key kk = { 9, FK_DATA, i * 1024 };
		assert_int_equal(pagestore_store(ps, &kk, i + 1, a), 0);
	}
	for (uint64_t i = 0; i < 90; i++) {
		struct pagestore_key kk = { 9, FK_DATA, i * 1024 };
		assert_int_equal(pagestore_fetch(ps, &kk, i + 1, got, NULL), 0);
		assert_int_equal(pagestore_drop(ps, &kk, i), -ESTALE);
		assert_int_equal(pagestore_drop(ps, &kk, i + 1), 0);
	}
	assert_int_equal(pagestore_store(ps, &(struct pagestore_key){ 1, 7, 1 }, 1, a),
			 -EINVAL);
	pagestore_get_stats(ps, &st);
	assert_true(st.owners == 1 && st.owners_untracked_pages == 0);
	assert_int_equal(pagestore_drop(ps, &k2, 2), 0);
	pagestore_get_stats(ps, &st);
	assert_true(st.owners == 0 && st.pages == 0);
	pagestore_close(ps);

	/* more owners than are counted one by one: the rest together */
	assert_int_equal(pagestore_open(&ps, 1000, 1024), 0);
	for (uint64_t o = 1; o <= PAGESTORE_MAX_OWNERS + 2; o++)
		assert_int_equal(pagestore_store(ps, &(struct pagestore_key){ o, FK_DATA, 1 },
						 1, a), 0);
	pagestore_get_stats(ps, &st);
	assert_true(st.owners == PAGESTORE_MAX_OWNERS + 1);
	assert_true(st.owners_untracked_pages == 2);
	for (uint64_t o = 1; o <= PAGESTORE_MAX_OWNERS + 2; o++)
		assert_int_equal(pagestore_drop_owner(ps, o), 1);
	pagestore_get_stats(ps, &st);
	assert_true(st.owners == 0 && st.owners_untracked_pages == 0 && st.pages == 0);
	pagestore_close(ps);
}

static void capacity_offer(void **state)
{
	const uint64_t M = 1ULL << 20;
	char path[] = "/tmp/nvmeminfo.XXXXXX";
	uint64_t total = 0, avail = 0;
	(void)state;

	/* idle memory beyond the reserve is offered, on top of what is held */
	assert_true(memwatch_offer(0, 1000 * M, 200 * M, 0) == 800 * M);
	assert_true(memwatch_offer(0, 1000 * M, 200 * M, 50 * M) == 850 * M);
	/* capped by mem= */
	assert_true(memwatch_offer(300 * M, 1000 * M, 200 * M, 0) == 300 * M);
	/* local pressure: below the reserve the offer falls under what is held */
	assert_true(memwatch_offer(0, 150 * M, 200 * M, 100 * M) == 50 * M);
	assert_true(memwatch_offer(0, 50 * M, 200 * M, 100 * M) == 0);
	assert_true(memwatch_default_reserve(1000 * M) == 256 * M);
	assert_true(memwatch_default_reserve(10000 * M) == 1000 * M);

	int fd = mkstemp(path);
	assert_true(fd >= 0);
	const char *text = "MemTotal:       16000000 kB\nMemFree:  1 kB\n"
			   "MemAvailable:    8000000 kB\n";
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	assert_int_equal(memwatch_read(path, &total, &avail), 0);
	assert_true(total == 16000000ULL * 1024 && avail == 8000000ULL * 1024);
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, "MemTotal: 5 kB\n", 15), 15);
	close(fd);
	assert_int_equal(memwatch_read(path, &total, &avail), -EINVAL);
	unlink(path);
	assert_int_equal(memwatch_read(path, &total, &avail), -ENOENT);
	assert_int_equal(memwatch_read("/proc/meminfo", &total, &avail), 0);
	assert_true(total > 0 && avail <= total);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(heard_dead_back_rejoin),
		cmocka_unit_test(own_stall_kills_no_peer),
		cmocka_unit_test(pagestore_rules),
		cmocka_unit_test(capacity_offer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
