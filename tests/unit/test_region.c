/* test_region.c - libpmem2 regions: create, persist, reopen, errors. */
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

#include "pmem/region.h"

#define SHM_SCRATCH "region"
#include "shm_scratch.h"
static void create_persist_reopen(void **state)
{
	struct region_opts o = { .size = 1 << 20, .create = true };
	struct region *r;
	(void)state;

	assert_int_equal(region_open(&r, path, &o), 0);
	assert_int_equal(region_size(r), 1 << 20);
	assert_true(region_on_tmpfs(r));
	assert_string_equal(region_granularity(r), "page");
	char *base = region_base(r);
	region_write(r, base + 4096, "hello nvram", 12);
	/* counted while armed (a point never reached), not otherwise */
	region_crash_at(UINT64_MAX);
	region_persist(r, base + 4096, 12);
	assert_int_equal(region_persist_points(), 1);
	region_crash_at(0);
	region_persist(r, base + 4096, 12);
	assert_int_equal(region_persist_points(), 0);
	region_close(r);

	struct region_opts o2 = { 0 };
	assert_int_equal(region_open(&r, path, &o2), 0);
	assert_int_equal(region_size(r), 1 << 20);
	char out[12];
	region_read(r, out, (char *)region_base(r) + 4096, 12);
	assert_string_equal(out, "hello nvram");
	region_close(r);
}

static void refuses_bad_files(void **state)
{
	struct region_opts o = { 0 };
	struct region *r;
	(void)state;

	assert_int_equal(region_open(&r, "/nonexistent/dir/x", &o), -ENOENT);
	assert_int_equal(region_open(&r, path, &o), -ENOENT);
	assert_int_equal(region_open(&r, "/dev/shm", &o), -EISDIR);
	/* A new file needs a size. */
	o.create = true;
	assert_int_equal(region_open(&r, path, &o), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(create_persist_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(refuses_bad_files, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
