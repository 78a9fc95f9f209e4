/* test_cluster_fanout.c - requests to several nodes at once
 * (cluster/fanout.h), driven through fake connections: grouping keeps
 * each node's entries in order, every send comes before any wait, nodes
 * go in index order, a node whose get fails is still waited for (with
 * the get's error) but never put, and results come back per node. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <cmocka.h>

#include "cluster/fanout.h"

static void test_group(void **state)
{
	(void)state;
	const uint8_t key[] = { 2, 0, 2, 1, 0, 2 };
	unsigned first[4], order[6];

	fanout_group(key, 6, 3, first, order);
	assert_int_equal(first[0], 0);
	assert_int_equal(first[1], 2);
	assert_int_equal(first[2], 3);
	assert_int_equal(first[3], 6);
	const unsigned want[] = { 1, 4, 3, 0, 2, 5 };   /* stable per key */
	assert_memory_equal(order, want, sizeof(want));
	fanout_group(key, 0, 3, first, order);
	assert_int_equal(first[3], 0);
}

/* a fake: "connections" are tokens; a log of what happened, in order */
struct fake {
	char log[64];
	unsigned n;
	int get_rc[4];          /* non-zero: get fails with it */
	int send_rc[4], wait_rc[4];
	int waited_with[4];
	bool put[4];
	int put_rc[4];
};
static char tokens[4];

static void note(struct fake *f, char what, unsigned j)
{
	f->log[f->n++] = what;
	f->log[f->n++] = (char)('0' + j);
}

static struct cluster_client *f_get(void *ctx, unsigned j, int *rc)
{
	struct fake *f = ctx;
	note(f, 'g', j);
	if (f->get_rc[j]) {
		*rc = f->get_rc[j];
		return NULL;
	}
	return (struct cluster_client *)&tokens[j];
}

static int f_send(void *ctx, unsigned j, struct cluster_client *cl)
{
	struct fake *f = ctx;
	assert_ptr_equal(cl, &tokens[j]);
	note(f, 's', j);
	return f->send_rc[j];
}

static int f_wait(void *ctx, unsigned j, struct cluster_client *cl, int rc)
{
	struct fake *f = ctx;
	note(f, 'w', j);
	f->waited_with[j] = rc;
	if (!cl)
		return rc;
	return rc ? rc : f->wait_rc[j];
}

static void f_put(void *ctx, unsigned j, struct cluster_client *cl, int rc)
{
	struct fake *f = ctx;
	assert_ptr_equal(cl, &tokens[j]);
	note(f, 'p', j);
	f->put[j] = true;
	f->put_rc[j] = rc;
}

static const struct fanout_ops ops = { f_get, f_send, f_wait, f_put };

static void test_run(void **state)
{
	(void)state;
	struct fake f = { .get_rc = { 0, -EHOSTDOWN, 0, 0 },
			  .send_rc = { 0, 0, -EPIPE, 0 },
			  .wait_rc = { -ENOENT, 0, 0, 0 } };
	const bool busy[4] = { true, true, true, false };
	int rc[4] = { 1, 1, 1, 1 };

	fanout_run(&ops, &f, busy, 4, rc);
	/* every get and send first, in node order; then wait and put each */
	assert_string_equal(f.log, "g0s0g1g2s2w0p0w1w2p2");
	assert_int_equal(rc[0], -ENOENT);
	assert_int_equal(rc[1], -EHOSTDOWN);    /* the get's error */
	assert_int_equal(f.waited_with[1], -EHOSTDOWN);
	assert_false(f.put[1]);                 /* no connection to give back */
	assert_int_equal(rc[2], -EPIPE);        /* the send's error, waited */
	assert_int_equal(f.waited_with[2], -EPIPE);
	assert_int_equal(f.put_rc[2], -EPIPE);
	assert_int_equal(rc[3], 1);             /* not busy: untouched */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_group),
		cmocka_unit_test(test_run),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
