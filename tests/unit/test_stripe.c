/* test_stripe.c - the stripe map: round robin ownership, auto unit, pieces
 * that never cross a stripe boundary, bad parameters refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <cmocka.h>

#include "fs/stripe.h"

#define MiB (1ull << 20)
#define KiB (1ull << 10)

static void round_robin(void **state)
{
	struct stripe_map m;
	struct stripe_loc l;
	(void)state;

	assert_int_equal(stripe_map_init(&m, MiB, 4, 0, 0, 64 * KiB), 0);
	for (uint64_t s = 0; s < 12; s++) {
		assert_int_equal(stripe_owner(&m, s * MiB), s % 4);
		assert_int_equal(stripe_owner(&m, s * MiB + MiB - 1), s % 4);
	}
	/* a range starting inside stripe 2 is cut at its end */
	stripe_locate(&m, 2 * MiB + 1000, 5 * MiB, &l);
	assert_int_equal(l.mgr, 2);
	assert_int_equal(l.stripe, 2);
	assert_int_equal(l.off, 1000);
	assert_int_equal(l.len, MiB - 1000);
	stripe_locate(&m, 3 * MiB, 100, &l);
	assert_int_equal(l.mgr, 3);
	assert_int_equal(l.len, 100);
	/* the first manager rotates small files over the managers */
	assert_int_equal(stripe_map_init(&m, MiB, 4, 6, 0, 64 * KiB), 0);
	assert_int_equal(stripe_owner(&m, 0), 2);
	assert_int_equal(stripe_owner(&m, 2 * MiB), 0);
	/* one manager owns everything */
	assert_int_equal(stripe_map_init(&m, MiB, 1, 99, 0, 64 * KiB), 0);
	assert_int_equal(stripe_owner(&m, 12345 * MiB + 7), 0);
}

static void pieces_cover_range(void **state)
{
	struct stripe_map m;
	(void)state;

	assert_int_equal(stripe_map_init(&m, 256 * KiB, 3, 1, 0, 64 * KiB), 0);
	uint64_t off = 100000, len = 5 * MiB + 17, done = 0;
	while (done < len) {
		struct stripe_loc l;
		stripe_locate(&m, off + done, len - done, &l);
		assert_true(l.len > 0);
		assert_true(l.off + l.len <= m.unit);
		assert_int_equal(l.mgr, stripe_owner(&m, off + done));
		assert_int_equal(l.mgr, stripe_owner(&m, off + done + l.len - 1));
		done += l.len;
	}
	assert_int_equal(done, len);
}

static void auto_unit(void **state)
{
	struct stripe_map m;
	(void)state;

	/* 10 MiB over 4 managers: 2.5 MiB rounded up to 64 KiB blocks */
	assert_int_equal(stripe_map_init(&m, 0, 4, 0, 10 * MiB, 64 * KiB), 0);
	assert_int_equal(m.unit, 2560 * KiB);
	assert_int_equal(stripe_owner(&m, 10 * MiB - 1), 3);
	/* uneven sizes round up so that nmgr parts cover the file */
	assert_int_equal(stripe_map_init(&m, 0, 3, 0, 1000000, 4096), 0);
	assert_true(m.unit * 3 >= 1000000);
	assert_int_equal(m.unit % 4096, 0);
	assert_int_equal(stripe_owner(&m, 999999), 2);
	/* an empty file gets one block */
	assert_int_equal(stripe_map_init(&m, 0, 4, 0, 0, 64 * KiB), 0);
	assert_int_equal(m.unit, 64 * KiB);
}

static void bad_parameters(void **state)
{
	struct stripe_map m;
	(void)state;

	assert_int_equal(stripe_map_init(&m, MiB, 0, 0, 0, 4096), -EINVAL);
	assert_int_equal(stripe_map_init(&m, MiB, 1, 0, 0, 0), -EINVAL);
	assert_int_equal(stripe_map_init(&m, 100000, 2, 0, 0, 65536), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_robin),
		cmocka_unit_test(pieces_cover_range),
		cmocka_unit_test(auto_unit),
		cmocka_unit_test(bad_parameters),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
