/* test_fmarks.c - dirty marks at an owner and its shadow
 * (cluster/fmarks.h): a shadow's table answers UNKNOWN until the owner's
 * whole list came (SYNC_BEGIN ... SYNC_END), DIRTY for a marked block,
 * clean otherwise; a CLEAR takes out only marks not set again after its
 * sequence number (a write after the write-back's take-out keeps its
 * mark, whatever order the messages come in); SYNC_BEGIN forgets an
 * owner's marks and no other's; hostile requests are refused; a full
 * table makes the owner not synced. Then the owner's told set: stripes,
 * each block once, listed whole while writers run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cluster/fmarks.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static int mark(struct fmark_tab *t, uint32_t owner, uint32_t flags,
		uint64_t obj, uint64_t blk, uint64_t seq, const uint64_t *list,
		uint32_t n, uint32_t *rf)
{
	struct frame_fop f = { .obj = obj, .blk = blk, .size = seq, .off = owner,
			       .flags = flags, .len = n * 8 };
	uint32_t dummy;
	return fmark_tab_apply(t, &f, (const uint8_t *)list, rf ? rf : &dummy);
}

static void shadow_table(void **state)
{
	struct fmark_tab *t;
	uint32_t rf;
	(void)state;

	assert_int_equal(fmark_tab_new(&t), 0);
	/* nothing known of owner 1 yet */
	assert_int_equal(fmark_tab_query(t, 1, 7, 0), FRAME_SHADOW_UNKNOWN);
	assert_int_equal(mark(t, 1, FRAME_MARK_PING, 0, 0, 0, NULL, 0, &rf), 0);
	assert_int_equal(rf, 0);
	/* its list: two blocks of object 7, then the end */
	uint64_t list[] = { 3, 1 };
	assert_int_equal(mark(t, 1, FRAME_MARK_SYNC_BEGIN, 0, 0, 0, NULL, 0, NULL), 0);
	assert_int_equal(mark(t, 1, FRAME_MARK_SET, 7, 0, 10, list, 2, NULL), 0);
	assert_int_equal(fmark_tab_query(t, 1, 7, 3), FRAME_SHADOW_UNKNOWN);
	assert_int_equal(mark(t, 1, FRAME_MARK_SYNC_END, 0, 0, 0, NULL, 0, &rf), 0);
	assert_int_equal(rf, FRAME_MARK_SYNCED);
	assert_int_equal(fmark_tab_query(t, 1, 7, 3), FRAME_SHADOW_DIRTY);
	assert_int_equal(fmark_tab_query(t, 1, 7, 1), FRAME_SHADOW_DIRTY);
	assert_int_equal(fmark_tab_query(t, 1, 7, 2), 0);
	assert_int_equal(fmark_tab_query(t, 1, 8, 3), 0);
	/* another owner's state is its own */
	assert_int_equal(fmark_tab_query(t, 2, 7, 3), FRAME_SHADOW_UNKNOWN);

	/* a write-back took block 3 out at seq 20; a writer marked it
	 * again at 21 and that SET came first: the CLEAR leaves it */
	assert_int_equal(mark(t, 1, FRAME_MARK_SET, 7, 3, 21, NULL, 0, NULL), 0);
	uint64_t three = 3, one = 1;
	assert_int_equal(mark(t, 1, FRAME_MARK_CLEAR, 7, 0, 20, &three, 1, NULL), 0);
	assert_int_equal(fmark_tab_query(t, 1, 7, 3), FRAME_SHADOW_DIRTY);
	/* block 1 was marked at 10: cleared */
	assert_int_equal(mark(t, 1, FRAME_MARK_CLEAR, 7, 0, 20, &one, 1, NULL), 0);
	assert_int_equal(fmark_tab_query(t, 1, 7, 1), 0);
	assert_int_equal(fmark_tab_count(t), 1);
	/* an object dropped: all its marks */
	assert_int_equal(mark(t, 1, FRAME_MARK_CLEAR_OBJ, 7, 0, 0, NULL, 0, NULL), 0);
	assert_int_equal(fmark_tab_query(t, 1, 7, 3), 0);

	/* owner 2's marks survive owner 1's resync */
	assert_int_equal(mark(t, 2, FRAME_MARK_SYNC_BEGIN | FRAME_MARK_SET |
			      FRAME_MARK_SYNC_END, 9, 5, 1, NULL, 0, NULL), 0);
	assert_int_equal(mark(t, 1, FRAME_MARK_SET, 9, 5, 30, NULL, 0, NULL), 0);
	assert_int_equal(mark(t, 1, FRAME_MARK_SYNC_BEGIN, 0, 0, 0, NULL, 0, NULL), 0);
	assert_int_equal(fmark_tab_query(t, 1, 9, 5), FRAME_SHADOW_UNKNOWN);
	assert_int_equal(mark(t, 1, FRAME_MARK_SYNC_END, 0, 0, 0, NULL, 0, NULL), 0);
	assert_int_equal(fmark_tab_query(t, 1, 9, 5), 0);
	assert_int_equal(fmark_tab_query(t, 2, 9, 5), FRAME_SHADOW_DIRTY);

	/* hostile: an owner index past the table, unknown flags, a list
	 * on a PING, a list of a length that is no multiple of 8 */
	assert_int_equal(mark(t, FMARK_OWNERS, FRAME_MARK_SET, 1, 1, 1, NULL, 0, NULL),
			 -EPROTO);
	assert_int_equal(mark(t, 1, 1u << 20, 1, 1, 1, NULL, 0, NULL), -EPROTO);
	assert_int_equal(mark(t, 1, FRAME_MARK_PING, 1, 1, 1, list, 2, NULL), -EPROTO);
	struct frame_fop f = { .obj = 1, .off = 1, .flags = FRAME_MARK_CLEAR, .len = 12 };
	assert_int_equal(fmark_tab_apply(t, &f, (const uint8_t *)list, &rf), -EPROTO);
	assert_int_equal(fmark_tab_query(t, FMARK_OWNERS + 5, 1, 1), FRAME_SHADOW_UNKNOWN);
	fmark_tab_free(t);
}

/* Past FMARK_MAX marks the owner is no longer synced: UNKNOWN, never a
 * missing mark answered "clean". */
static void shadow_full(void **state)
{
	struct fmark_tab *t;
	static uint64_t list[FRAME_MARK_MAX_BLOCKS];
	(void)state;

	assert_int_equal(fmark_tab_new(&t), 0);
	assert_int_equal(mark(t, 0, FRAME_MARK_SYNC_BEGIN | FRAME_MARK_SYNC_END,
			      0, 0, 0, NULL, 0, NULL), 0);
	int rc = 0;
	for (uint64_t b = 0; !rc && b < FMARK_MAX + 2 * FRAME_MARK_MAX_BLOCKS;
	     b += FRAME_MARK_MAX_BLOCKS) {
		for (uint32_t k = 0; k < FRAME_MARK_MAX_BLOCKS; k++)
			list[k] = b + k;
		rc = mark(t, 0, FRAME_MARK_SET, 1, 0, 1, list, FRAME_MARK_MAX_BLOCKS, NULL);
	}
	assert_int_equal(rc, -ENOSPC);
	assert_int_equal(fmark_tab_query(t, 0, 1, 0), FRAME_SHADOW_UNKNOWN);
	assert_int_equal(fmark_tab_query(t, 0, 2, 0), FRAME_SHADOW_UNKNOWN);
	fmark_tab_free(t);
}

struct each_ctx {
	uint64_t n, sum;
};

static void count_one(void *arg, uint64_t obj, uint64_t blk)
{
	struct each_ctx *c = arg;
	c->n++;
	c->sum += obj * 1000 + blk;
}

struct writer {
	struct fmark_sent *s;
	uint64_t obj;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	for (uint64_t b = 0; b < 2000; b++) {
		fmark_sent_lock(w->s, w->obj, b % 500);
		if (!fmark_sent_has(w->s, w->obj, b % 500))
			assert_int_equal(fmark_sent_add(w->s, w->obj, b % 500), 0);
		fmark_sent_unlock(w->s, w->obj, b % 500);
	}
	return NULL;
}

static void owner_set(void **state)
{
	struct fmark_sent *s;
	(void)state;

	assert_int_equal(fmark_sent_new(&s), 0);
	uint64_t a = fmark_next_seq(s), b = fmark_next_seq(s);
	assert_true(b > a);
	assert_int_equal(fmark_last_seq(s), b);
	/* four writers of four objects at once, 500 blocks each, every
	 * block written four times: each is in once */
	pthread_t t[4];
	struct writer w[4];
	for (int i = 0; i < 4; i++) {
		w[i] = (struct writer){ s, (uint64_t)i + 1 };
		assert_int_equal(pthread_create(&t[i], NULL, writer_main, &w[i]), 0);
	}
	struct each_ctx mid = { 0, 0 };
	fmark_sent_each(s, count_one, &mid);   /* while they run: no crash */
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(fmark_sent_count(s), 2000);
	struct each_ctx c = { 0, 0 };
	assert_int_equal(fmark_sent_each(s, count_one, &c), 2000);
	/* sum over objects 1..4 of (obj * 1000 * 500 + 0 + ... + 499) */
	assert_int_equal(c.sum, 10 * 1000 * 500 + 4 * (499 * 500 / 2));
	fmark_sent_lock(s, 1, 7);
	fmark_sent_remove(s, 1, 7);
	assert_false(fmark_sent_has(s, 1, 7));
	fmark_sent_unlock(s, 1, 7);
	fmark_sent_drop_obj(s, 2);
	assert_int_equal(fmark_sent_count(s), 2000 - 1 - 500);
	fmark_sent_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(shadow_table),
		cmocka_unit_test(shadow_full),
		cmocka_unit_test(owner_set),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
