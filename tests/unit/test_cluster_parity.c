/* test_cluster_parity.c - parity group bookkeeping (cluster/parity.h): the
 * XOR arithmetic (rebuild any member from parity and the others), an
 * overwrite's delta, a TRIM taking a page out of its group, merging two
 * sparse groups into one, member rules and the group table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <cmocka.h>

#include "cluster/parity.h"

#define P PARITY_PAGE

static void fill(uint8_t *p, unsigned seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (unsigned k = 0; k < P; k++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[k] = (uint8_t)x;
	}
}

/* parity = XOR of pages[0..n) */
static void parity_of(uint8_t *par, uint8_t pages[][P], unsigned n)
{
	memset(par, 0, P);
	for (unsigned k = 0; k < n; k++) {
		uint8_t zero[P] = { 0 }, d[P];
		parity_delta(d, zero, pages[k]);        /* a page joins */
		for (unsigned b = 0; b < P; b++)
			par[b] ^= d[b];
	}
}

/* Every member comes back from the parity page and the others. */
static void check_rebuild(const uint8_t *par, uint8_t pages[][P], unsigned n)
{
	for (unsigned lost = 0; lost < n; lost++) {
		const void *others[PARITY_MAX_N];
		unsigned m = 0;
		uint8_t out[P];
		for (unsigned k = 0; k < n; k++)
			if (k != lost)
				others[m++] = pages[k];
		parity_reconstruct(out, par, others, m);
		assert_memory_equal(out, pages[lost], P);
	}
}

static void test_xor_rebuild(void **st)
{
	uint8_t pages[4][P], par[P];
	(void)st;
	for (unsigned k = 0; k < 4; k++)
		fill(pages[k], k + 1);
	parity_of(par, pages, 4);
	check_rebuild(par, pages, 4);
	/* a wrong parity page does not give the member back */
	par[17] ^= 1;
	const void *others[3] = { pages[1], pages[2], pages[3] };
	uint8_t out[P];
	parity_reconstruct(out, par, others, 3);
	assert_memory_not_equal(out, pages[0], P);
}

static void test_overwrite_delta(void **st)
{
	uint8_t pages[4][P], par[P], nw[P], d[P];
	(void)st;
	for (unsigned k = 0; k < 4; k++)
		fill(pages[k], k + 10);
	parity_of(par, pages, 4);
	fill(nw, 99);
	parity_delta(d, pages[2], nw);  /* what reaches the parity node */
	for (unsigned b = 0; b < P; b++)
		par[b] ^= d[b];
	memcpy(pages[2], nw, P);
	check_rebuild(par, pages, 4);
}

static void test_trim_out(void **st)
{
	struct parity_group g;
	uint8_t pages[3][P], par[P], zero[P] = { 0 }, d[P];
	(void)st;
	memset(&g, 0, sizeof(g));
	g.state = PG_CLOSED;
	for (unsigned k = 0; k < 3; k++) {
		fill(pages[k], k + 20);
		assert_int_equal(parity_member_add(&g, 4, 100 + k, 1, (uint8_t)k, 0), 0);
	}
	parity_of(par, pages, 3);
	/* TRIM slot 100: its contents leave the parity page */
	int idx = parity_member_find(&g, 100);
	assert_int_equal(idx, 0);
	parity_delta(d, pages[0], zero);
	for (unsigned b = 0; b < P; b++)
		par[b] ^= d[b];
	parity_member_remove(&g, (unsigned)idx);
	assert_int_equal(g.nmem, 2);
	assert_int_equal(parity_member_find(&g, 100), -ENOENT);
	assert_true(parity_member_find(&g, 101) >= 0);
	assert_true(parity_member_find(&g, 102) >= 0);
	check_rebuild(par, pages + 1, 2);
	assert_true(parity_group_sparse(&g, 4));        /* 2 of 4 left */
	/* the last ones out leave a zero parity page */
	parity_delta(d, pages[1], zero);
	for (unsigned b = 0; b < P; b++)
		par[b] ^= d[b];
	parity_delta(d, pages[2], zero);
	for (unsigned b = 0; b < P; b++)
		par[b] ^= d[b];
	assert_memory_equal(par, zero, P);
}

/* Two sparse groups merge into an open one: each moved page is XORed out
 * of its old parity page (which ends as zeros) and into the new buffer. */
static void test_merge(void **st)
{
	struct parity_table t;
	uint8_t buf[P], pa[P], pb[P], zero[P] = { 0 }, pages[4][P];
	(void)st;
	assert_int_equal(parity_table_init(&t, 8, 8, 4), 0);
	int64_t a = parity_group_alloc(&t, NULL), b = parity_group_alloc(&t, NULL);
	assert_true(a >= 0 && b >= 0 && a != b);
	struct parity_group *ga = parity_group_at(&t, (uint32_t)a), *gb = parity_group_at(&t, (uint32_t)b);
	ga->state = gb->state = PG_CLOSED;
	for (unsigned k = 0; k < 4; k++)
		fill(pages[k], k + 40);
	/* a: pages 0,1 on nodes 1,2; b: pages 2,3 on nodes 3,4 */
	assert_int_equal(parity_member_add(ga, 4, 0, 1, 1, 0), 0);
	assert_int_equal(parity_member_add(ga, 4, 1, 1, 2, 0), 0);
	assert_int_equal(parity_member_add(gb, 4, 2, 1, 3, 0), 0);
	assert_int_equal(parity_member_add(gb, 4, 3, 1, 4, 0), 0);
	parity_of(pa, pages, 2);
	parity_of(pb, pages + 2, 2);
	assert_true(parity_group_sparse(ga, 4) && parity_group_sparse(gb, 4));
	int64_t c = parity_group_alloc(&t, buf);
	assert_true(c >= 0);
	struct parity_group *gc = parity_group_at(&t, (uint32_t)c);
	assert_int_equal(gc->state, PG_OPEN);
	assert_memory_equal(buf, zero, P);
	struct parity_group *src[2] = { ga, gb };
	uint8_t *spar[2] = { pa, pb };
	for (unsigned s = 0; s < 2; s++) {
		while (src[s]->nmem) {
			struct parity_member m = src[s]->m[0];
			uint8_t d[P];
			parity_delta(d, pages[m.slot], zero);
			for (unsigned k = 0; k < P; k++)
				spar[s][k] ^= d[k];
			parity_member_remove(src[s], 0);
			assert_int_equal(parity_member_add(gc, 4, m.slot, m.version,
							   m.node, m.gen), 0);
			parity_delta(d, zero, pages[m.slot]);
			for (unsigned k = 0; k < P; k++)
				buf[k] ^= d[k];
		}
	}
	assert_memory_equal(pa, zero, P);
	assert_memory_equal(pb, zero, P);
	assert_int_equal(gc->nmem, 4);
	check_rebuild(buf, pages, 4);
	/* the merged group is full: a fifth page does not fit */
	assert_int_equal(parity_member_add(gc, 4, 9, 1, 5, 0), -ENOSPC);
	parity_table_fini(&t);
}

static void test_member_rules(void **st)
{
	struct parity_group g;
	(void)st;
	memset(&g, 0, sizeof(g));
	g.state = PG_OPEN;
	assert_int_equal(parity_member_add(&g, 3, 1, 1, 5, 0), 0);
	/* every member on a different node */
	assert_int_equal(parity_member_add(&g, 3, 2, 1, 5, 0), -EEXIST);
	assert_true(parity_group_has_node(&g, 5));
	assert_false(parity_group_has_node(&g, 6));
	assert_int_equal(parity_member_add(&g, 3, 2, 1, 6, 0), 0);
	assert_int_equal(parity_member_add(&g, 3, 3, 1, 7, 0), 0);
	assert_int_equal(parity_member_add(&g, 3, 4, 1, 8, 0), -ENOSPC);
	/* an open group is never "sparse": it is still filling */
	parity_member_remove(&g, 0);
	parity_member_remove(&g, 0);
	assert_false(parity_group_sparse(&g, 3));
	g.state = PG_CLOSED;
	assert_true(parity_group_sparse(&g, 3));
	parity_member_remove(&g, 7);    /* out of range: no change */
	assert_int_equal(g.nmem, 1);
}

/* The table grows by chunks when every group is in use, up to its max;
 * groups already handed out keep their address (other threads hold them). */
static void test_table_grows(void **st)
{
	struct parity_table t;
	const uint32_t max = 2 * PARITY_CHUNK + 5;
	(void)st;
	assert_int_equal(parity_table_init(&t, 4, 3, 4), -EINVAL);
	assert_int_equal(parity_table_init(&t, 3, max, 4), 0);
	uint64_t bytes0 = parity_table_bytes(&t);
	bool *seen = calloc(max, sizeof(*seen));
	assert_non_null(seen);
	struct parity_group *first = NULL;
	for (uint32_t k = 0; k < max; k++) {
		int64_t id = parity_group_alloc(&t, NULL);
		assert_true(id >= 0 && id < max);
		assert_false(seen[id]);
		seen[id] = true;
		struct parity_group *g = parity_group_at(&t, (uint32_t)id);
		assert_int_equal(g->state, PG_OPEN);
		g->nmem = 1;    /* in use: must survive growth untouched */
		if (!first)
			first = g;
		assert_true(parity_table_size(&t) >= k + 1);
	}
	assert_int_equal(parity_table_size(&t), max);
	assert_int_equal(parity_group_alloc(&t, NULL), -ENOSPC);
	assert_int_equal(parity_groups_used(&t), max);
	assert_ptr_equal(parity_group_at(&t, 0), first);
	assert_int_equal(first->nmem, 1);
	assert_true(parity_table_bytes(&t) > bytes0);
	/* a freed id is reused before anything else */
	parity_group_free(&t, 7);
	assert_int_equal(parity_group_alloc(&t, NULL), 7);
	free(seen);
	parity_table_fini(&t);
}

static void test_table(void **st)
{
	struct parity_table t;
	uint8_t buf[P];
	(void)st;
	assert_int_equal(parity_table_init(&t, 4, 4, 1), -EINVAL);
	assert_int_equal(parity_table_init(&t, 4, 4, PARITY_MAX_N + 1), -EINVAL);
	assert_int_equal(parity_table_init(&t, 3, 3, 4), 0);
	int64_t id[3];
	for (unsigned k = 0; k < 3; k++)
		assert_true((id[k] = parity_group_alloc(&t, NULL)) >= 0);
	assert_int_equal(parity_group_alloc(&t, NULL), -ENOSPC);
	assert_int_equal(parity_groups_used(&t), 3);
	uint64_t key = parity_group_at(&t, (uint32_t)id[1])->pkey;
	parity_group_free(&t, (uint32_t)id[1]);
	assert_int_equal(parity_groups_used(&t), 2);
	memset(buf, 0xaa, P);
	int64_t again = parity_group_alloc(&t, buf);
	assert_int_equal(again, id[1]);
	/* a reused id gets a new key: no old parity page can be mistaken */
	assert_true(parity_group_at(&t, (uint32_t)again)->pkey != key);
	assert_int_equal(parity_group_at(&t, (uint32_t)again)->pkey & 0xffffffff, (uint64_t)again);
	assert_int_equal(buf[0], 0);    /* the buffer starts as zeros */
	assert_int_equal(parity_group_at(&t, (uint32_t)again)->pn, PARITY_NO_NODE);
	parity_table_fini(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_xor_rebuild),
		cmocka_unit_test(test_overwrite_delta),
		cmocka_unit_test(test_trim_out),
		cmocka_unit_test(test_merge),
		cmocka_unit_test(test_member_rules),
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_table_grows),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
