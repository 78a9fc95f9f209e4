/* test_cluster_peerpool.c - the forwarding connection pool
 * (cluster/peerpool.h), driven through fake handles: a peer never has
 * more than size handles, idle ones are reused, a broken one is closed
 * and its place reopened, a failed open frees its place, a get with
 * wait 0 says -EAGAIN and a waiting one -ETIMEDOUT, a waiter is woken by
 * a handle given back (from another thread), a dropped peer's idle
 * handles close at once and its leased ones when given back, and a
 * thread pool of "inbound connections" holding leases in index order
 * while they wait never deadlocks with all handles out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include <cmocka.h>

#include "cluster/peerpool.h"

/* handles are tokens: (peer << 8 | serial) + 1 as a pointer; never
 * dereferenced by the pool */
struct fake {
	atomic_uint opens, closes, serial;
	atomic_int open_rc;             /* non-zero: the next opens fail */
	atomic_uint live[4];            /* handles open now, per peer */
	atomic_uint max_live[4];
};

static int fake_open(void *ctx, unsigned peer, struct cluster_client **out,
		     char *err, size_t errlen)
{
	struct fake *f = ctx;
	int rc = atomic_load(&f->open_rc);

	if (rc) {
		snprintf(err, errlen, "refused");
		return rc;
	}
	unsigned s = atomic_fetch_add(&f->serial, 1);
	*out = (struct cluster_client *)(uintptr_t)(((peer << 8) | (s & 0xff)) + 1);
	atomic_fetch_add(&f->opens, 1);
	unsigned live = atomic_fetch_add(&f->live[peer], 1) + 1;
	unsigned m = atomic_load(&f->max_live[peer]);
	while (live > m && !atomic_compare_exchange_weak(&f->max_live[peer], &m, live))
		;
	return 0;
}

static void fake_close(void *ctx, struct cluster_client *cl)
{
	struct fake *f = ctx;
	unsigned peer = (unsigned)(((uintptr_t)cl - 1) >> 8);

	atomic_fetch_add(&f->closes, 1);
	atomic_fetch_sub(&f->live[peer], 1);
}

static const struct peerpool_ops fake_ops = { fake_open, fake_close };

static void test_bounds_and_reuse(void **state)
{
	(void)state;
	struct fake f = { 0 };
	struct peerpool *p;
	struct peerpool_lease l[3];
	char err[128];

	assert_int_equal(peerpool_create(&p, 2, 0, &fake_ops, &f), -EINVAL);
	assert_int_equal(peerpool_create(&p, 2, PEERPOOL_MAX_SIZE + 1, &fake_ops, &f), -EINVAL);
	assert_int_equal(peerpool_create(&p, 2, 2, &fake_ops, &f), 0);
	assert_int_equal(peerpool_get(p, 1, 0, &l[0], err, sizeof(err)), 0);
	assert_int_equal(peerpool_get(p, 1, 0, &l[1], err, sizeof(err)), 0);
	assert_ptr_not_equal(l[0].cl, l[1].cl);
	/* both leased: no third, now or after a wait */
	assert_int_equal(peerpool_get(p, 1, 0, &l[2], err, sizeof(err)), -EAGAIN);
	assert_null(l[2].cl);
	assert_int_equal(peerpool_get(p, 1, 50, &l[2], err, sizeof(err)), -ETIMEDOUT);
	assert_non_null(strstr(err, "busy"));
	/* the other peer has its own places */
	assert_int_equal(peerpool_get(p, 0, 0, &l[2], err, sizeof(err)), 0);
	peerpool_put(p, &l[2], false);
	assert_null(l[2].cl);
	/* given back: reused, not reopened */
	struct cluster_client *back = l[0].cl;
	peerpool_put(p, &l[0], false);
	assert_int_equal(peerpool_get(p, 1, 0, &l[0], err, sizeof(err)), 0);
	assert_ptr_equal(l[0].cl, back);
	assert_int_equal(f.opens, 3);
	/* broken: closed, and its place opened anew */
	peerpool_put(p, &l[0], true);
	assert_int_equal(f.closes, 1);
	assert_int_equal(peerpool_get(p, 1, 0, &l[0], err, sizeof(err)), 0);
	assert_ptr_not_equal(l[0].cl, back);
	assert_int_equal(f.opens, 4);

	struct peerpool_stats st;
	peerpool_stats_read(p, &st);
	assert_int_equal(st.handles, 3);        /* 2 to peer 1, 1 idle to 0 */
	assert_int_equal(st.leased, 2);
	assert_int_equal(st.waits, 1);
	assert_int_equal(st.wait_timeouts, 1);
	peerpool_put(p, &l[0], false);
	peerpool_put(p, &l[1], false);
	peerpool_put(p, &l[1], false);          /* nothing leased: no-op */
	peerpool_destroy(p);
	assert_int_equal(f.opens, f.closes);
	assert_int_equal(f.max_live[1], 2);
}

static void test_open_fails(void **state)
{
	(void)state;
	struct fake f = { 0 };
	struct peerpool *p;
	struct peerpool_lease l;
	char err[128] = "";

	assert_int_equal(peerpool_create(&p, 1, 1, &fake_ops, &f), 0);
	f.open_rc = -ECONNREFUSED;
	assert_int_equal(peerpool_get(p, 0, 100, &l, err, sizeof(err)), -ECONNREFUSED);
	assert_string_equal(err, "refused");
	assert_null(l.cl);
	/* the failed open left its place free: no wait, a new open */
	f.open_rc = 0;
	assert_int_equal(peerpool_get(p, 0, 0, &l, err, sizeof(err)), 0);
	struct peerpool_stats st;
	peerpool_stats_read(p, &st);
	assert_int_equal(st.open_errors, 1);
	assert_int_equal(st.opens, 1);
	peerpool_put(p, &l, false);
	peerpool_destroy(p);
	assert_int_equal(f.closes, 1);
}

static void test_drop(void **state)
{
	(void)state;
	struct fake f = { 0 };
	struct peerpool *p;
	struct peerpool_lease a, b;
	char err[128];

	assert_int_equal(peerpool_create(&p, 1, 2, &fake_ops, &f), 0);
	assert_int_equal(peerpool_get(p, 0, 0, &a, err, sizeof(err)), 0);
	assert_int_equal(peerpool_get(p, 0, 0, &b, err, sizeof(err)), 0);
	peerpool_put(p, &b, false);             /* idle */
	peerpool_drop(p, 0);
	assert_int_equal(f.closes, 1);          /* the idle one, at once */
	assert_int_equal(f.live[0], 1);
	peerpool_put(p, &a, false);             /* leased before the drop */
	assert_int_equal(f.closes, 2);
	assert_int_equal(f.live[0], 0);
	/* a new lease opens anew, and is kept when given back */
	assert_int_equal(peerpool_get(p, 0, 0, &a, err, sizeof(err)), 0);
	peerpool_put(p, &a, false);
	assert_int_equal(f.live[0], 1);
	peerpool_destroy(p);
	assert_int_equal(f.live[0], 0);
}

/* A waiter is woken by a handle given back from another thread. */
struct giver {
	struct peerpool *p;
	struct peerpool_lease *l;
};

static void *give_back_later(void *arg)
{
	struct giver *g = arg;

	usleep(50 * 1000);
	peerpool_put(g->p, g->l, false);
	return NULL;
}

static void test_waiter_woken(void **state)
{
	(void)state;
	struct fake f = { 0 };
	struct peerpool *p;
	struct peerpool_lease a, b;
	char err[128];
	pthread_t t;

	assert_int_equal(peerpool_create(&p, 1, 1, &fake_ops, &f), 0);
	assert_int_equal(peerpool_get(p, 0, 0, &a, err, sizeof(err)), 0);
	struct cluster_client *cl = a.cl;
	struct giver g = { p, &a };
	assert_int_equal(pthread_create(&t, NULL, give_back_later, &g), 0);
	assert_int_equal(peerpool_get(p, 0, 5000, &b, err, sizeof(err)), 0);
	assert_ptr_equal(b.cl, cl);
	pthread_join(t, NULL);
	peerpool_put(p, &b, false);
	peerpool_destroy(p);
	assert_int_equal(f.opens, 1);
}

/* Many threads, each leasing handles to a few peers the way nvcached's
 * inbound connections do (a batch: peers in index order, waiting while
 * holding lower ones; or a pipeline: without waiting, giving all back
 * when none is free), with 2 handles per peer: all finish (no deadlock),
 * no peer ever had more than 2 open, and no lease timed out. */
#define STRESS_THREADS 12
#define STRESS_ROUNDS 300
struct stress {
	struct peerpool *p;
	unsigned seed;
	atomic_uint *timeouts;
};

static void *stress_main(void *arg)
{
	struct stress *s = arg;
	struct peerpool_lease l[4];
	char err[128];

	memset(l, 0, sizeof(l));
	for (unsigned r = 0; r < STRESS_ROUNDS; r++) {
		unsigned want = (s->seed = s->seed * 1103515245 + 12345) >> 16;
		if (r & 1) {    /* a batch: index order, may wait */
			for (unsigned j = 0; j < 4; j++)
				if (want & (1u << j) &&
				    peerpool_get(s->p, j, 10000, &l[j], err, sizeof(err)) == -ETIMEDOUT)
					atomic_fetch_add(s->timeouts, 1);
		} else {        /* a pipeline: any order, never waits holding */
			for (unsigned k = 0; k < 4; k++) {
				unsigned j = (want >> (2 * k + 4)) & 3;
				if (l[j].cl)
					continue;
				if (peerpool_get(s->p, j, 0, &l[j], err, sizeof(err)) == -EAGAIN) {
					for (unsigned x = 0; x < 4; x++)
						peerpool_put(s->p, &l[x], false);
					if (peerpool_get(s->p, j, 10000, &l[j], err, sizeof(err)))
						atomic_fetch_add(s->timeouts, 1);
				}
			}
		}
		usleep(want % 200);
		for (unsigned j = 0; j < 4; j++)
			peerpool_put(s->p, &l[j], (want % 17) == 0);
	}
	return NULL;
}

static void test_no_deadlock(void **state)
{
	(void)state;
	struct fake f = { 0 };
	struct peerpool *p;
	pthread_t t[STRESS_THREADS];
	struct stress s[STRESS_THREADS];
	atomic_uint timeouts = 0;

	assert_int_equal(peerpool_create(&p, 4, 2, &fake_ops, &f), 0);
	for (unsigned i = 0; i < STRESS_THREADS; i++) {
		s[i] = (struct stress){ p, i * 7919 + 1, &timeouts };
		assert_int_equal(pthread_create(&t[i], NULL, stress_main, &s[i]), 0);
	}
	for (unsigned i = 0; i < STRESS_THREADS; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(timeouts, 0);
	for (unsigned j = 0; j < 4; j++)
		assert_true(f.max_live[j] <= 2);
	struct peerpool_stats st;
	peerpool_stats_read(p, &st);
	assert_int_equal(st.leased, 0);
	assert_true(st.waits > 0);      /* the pool was full at times */
	peerpool_destroy(p);
	assert_int_equal(f.opens, f.closes);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bounds_and_reuse),
		cmocka_unit_test(test_open_fails),
		cmocka_unit_test(test_drop),
		cmocka_unit_test(test_waiter_woken),
		cmocka_unit_test(test_no_deadlock),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
