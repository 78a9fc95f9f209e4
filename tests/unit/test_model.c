/* test_model.c - the time/energy model: the paper's Table 2 as defaults,
 * the parameter file, and hand-computed estimates. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>
#include <cmocka.h>

#include "pmem/model.h"

static void defaults_are_table2(void **state)
{
	struct model_params mp;
	(void)state;
	model_params_default(&mp);
	assert_true(mp.dram_read_ns == 22.5 && mp.dram_write_ns == 22.5);
	assert_true(mp.mram_read_ns == 15 && mp.mram_write_ns == 15);
	assert_true(mp.dram_read_nj == 6.24 && mp.dram_write_nj == 6.24);
	assert_true(mp.mram_read_nj == 1.36 && mp.mram_write_nj == 2.60);
	assert_true(mp.flash_read_ns == 35000 && mp.flash_write_ns == 64000);
	assert_true(mp.flash_read_nj == 7000 && mp.flash_write_nj == 12800);
	assert_true(mp.dram_standby_uw_mb == 867 && mp.mram_standby_uw_mb == 469);
	assert_int_equal(mp.l2_bytes, 1 << 20);
	assert_int_equal(mp.line_bytes, 64);
	assert_int_equal(mp.l2_ways, 1);
	assert_int_equal(mp.page_bytes, 4096);
}

static void set_and_errors(void **state)
{
	struct model_params mp;
	(void)state;
	model_params_default(&mp);
	assert_int_equal(model_params_set(&mp, "dram_read_ns", "30"), 0);
	assert_true(mp.dram_read_ns == 30);
	assert_int_equal(model_params_set(&mp, "nope", "1"), -ENOENT);
	assert_int_equal(model_params_set(&mp, "dram_read_ns", "-1"), -EINVAL);
	assert_int_equal(model_params_set(&mp, "dram_read_ns", "abc"), -EINVAL);
	assert_int_equal(model_params_set(&mp, "dram_read_ns", "nan"), -EINVAL);
	assert_int_equal(model_params_set(&mp, "l2_bytes", "1000"), -EINVAL);
	assert_int_equal(model_params_set(&mp, "l2_bytes", "262144"), 0);
	assert_int_equal(mp.l2_bytes, 262144);
}

static void file_roundtrip_and_bad_lines(void **state)
{
	struct model_params a, b;
	char path[] = "/tmp/test_model.XXXXXX", buf[4096];
	(void)state;
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	model_params_default(&a);
	a.mram_write_nj = 3.5;
	int n = model_params_format(&a, buf, sizeof(buf));
	assert_true(n > 0 && (size_t)n < sizeof(buf));
	assert_int_equal(write(fd, buf, (size_t)n), n);
	close(fd);
	model_params_default(&b);
	assert_int_equal(model_params_load(&b, path), 0);
	assert_memory_equal(&a, &b, sizeof(a));

	FILE *f = fopen(path, "w");
	fputs("# comment\n\nmram_read_ns = 10 # trailing\nbogus_key = 1\n", f);
	fclose(f);
	model_params_default(&b);
	assert_int_equal(model_params_load(&b, path), -ENOENT);
	f = fopen(path, "w");
	fputs("mram_read_ns 10\n", f);
	fclose(f);
	assert_int_equal(model_params_load(&b, path), -EINVAL);
	f = fopen(path, "w");
	fputs("line_bytes = 8192\n", f);   /* bigger than a page */
	fclose(f);
	model_params_default(&b);
	assert_int_equal(model_params_load(&b, path), -EINVAL);
	unlink(path);
	assert_int_equal(model_params_load(&b, path), -ENOENT);
}

#define NEAR(x, y) assert_true(dabs((x) - (y)) <= 1e-9 * (dabs(y) + 1e-12))
static double dabs(double v) { return v < 0 ? -v : v; }

static void estimates_by_hand(void **state)
{
	struct model_params mp;
	struct model_counts c;
	struct model_result r;
	(void)state;
	model_params_default(&mp);

	/* 1000 DRAM reads, 500 MRAM writes, nothing installed. */
	memset(&c, 0, sizeof(c));
	model_count_access(&c, TIER_DRAM, 0, 1000);
	model_count_access(&c, TIER_MRAM, 1, 500);
	model_estimate(&mp, &c, 0, 0, &r);
	NEAR(r.time_s, (1000 * 22.5 + 500 * 15) * 1e-9);
	NEAR(r.energy_j, (1000 * 6.24 + 500 * 2.60) * 1e-9);

	/* A flash load into DRAM: 35 us, 7000 nJ + 64 DRAM line writes of
	 * energy (the copy's time hides behind the flash). A write-back from
	 * MRAM: 64 us, 12800 nJ + 64 MRAM reads. A drop: nothing. */
	memset(&c, 0, sizeof(c));
	struct tier_move ld = { 1, TIER_FLASH, TIER_DRAM, MOVE_LOAD };
	struct tier_move wb = { 2, TIER_MRAM, TIER_FLASH, MOVE_WRITE };
	struct tier_move dr = { 3, TIER_DRAM, TIER_FLASH, MOVE_DROP };
	struct tier_move pl = { 4, TIER_NONE, TIER_DRAM, MOVE_PLACE };
	model_count_move(&c, &ld);
	model_count_move(&c, &wb);
	model_count_move(&c, &dr);
	model_count_move(&c, &pl);
	assert_int_equal(c.flash_reads, 1);
	assert_int_equal(c.flash_writes, 1);
	model_estimate(&mp, &c, 0, 0, &r);
	NEAR(r.time_s, (35000 + 64000) * 1e-9);
	NEAR(r.energy_j, (7000 + 64 * 6.24 + 12800 + 64 * 1.36) * 1e-9);

	/* A migration DRAM -> MRAM: 64 DRAM reads + 64 MRAM writes. */
	memset(&c, 0, sizeof(c));
	struct tier_move mg = { 5, TIER_DRAM, TIER_MRAM, MOVE_MIGRATE };
	model_count_move(&c, &mg);
	model_estimate(&mp, &c, 0, 0, &r);
	NEAR(r.time_s, 64 * (22.5 + 15) * 1e-9);
	NEAR(r.energy_j, 64 * (6.24 + 2.60) * 1e-9);

	/* Standby: 1 s of compute with 2 MiB DRAM and 4 MiB MRAM. */
	memset(&c, 0, sizeof(c));
	c.instructions = 2000000000ull;   /* x 0.5 ns = 1 s */
	model_estimate(&mp, &c, 4 << 20, 2 << 20, &r);
	NEAR(r.time_s, 1.0);
	NEAR(r.energy_j, (2 * 867 + 4 * 469) * 1e-6);
	NEAR(r.standby_j, r.energy_j);
}

static void stats_lines(void **state)
{
	struct model_params mp;
	struct model_counts c;
	char buf[512], small[20];
	(void)state;
	model_params_default(&mp);
	memset(&c, 0, sizeof(c));
	model_count_access(&c, TIER_DRAM, 0, 1000000);
	int n = model_stats_format(&mp, &c, 0, 0, buf, sizeof(buf));
	assert_true(n > 0 && (size_t)n < sizeof(buf));
	assert_non_null(strstr(buf, "model_time_s: 0.022500\n"));
	assert_non_null(strstr(buf, "model_energy_j: 0.006240\n"));
	n = model_stats_format(&mp, &c, 0, 0, small, sizeof(small));
	assert_int_equal(n, sizeof(small) - 1);
	assert_int_equal(strlen(small), sizeof(small) - 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(defaults_are_table2),
		cmocka_unit_test(set_and_errors),
		cmocka_unit_test(file_roundtrip_and_bad_lines),
		cmocka_unit_test(estimates_by_hand),
		cmocka_unit_test(stats_lines),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
