/* test_ckpt.c - the double-buffered checkpoint area: commit and reopen,
 * torn data and torn records fall back to the previous version, foreign
 * and busy files are refused, and a crash test that kills a child at every
 * persist point of a run of commits in turn. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "pmem/ckpt.h"

#define DATA (3 * 4096 + 100)
#define EXTRA 64u

#define SHM_SCRATCH "ckpt"
#include "shm_scratch.h"
#include "crash_point.h"
static struct ckpt_geom geom(void)
{
	struct ckpt_geom g = { .data_size = DATA, .live_size = 8192,
			       .extra_max = EXTRA, .rank = 1, .nranks = 4 };
	strcpy(g.job, "job");
	strcpy(g.name, "win0");
	return g;
}

static void pattern(uint8_t *buf, size_t len, uint64_t v)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(v * 31 + i * 7 + (i >> 9));
}

/* Commit version v (data and extra from pattern) into the next slot. */
static void commit_v(struct ckpt *c, uint64_t v)
{
	static uint8_t buf[DATA];
	int s = ckpt_next_slot(c);

	assert_int_equal(ckpt_begin(c, s), 0);
	pattern(buf, DATA, v);
	ckpt_write(c, s, 0, buf, DATA / 2);
	ckpt_write(c, s, DATA / 2, buf + DATA / 2, DATA - DATA / 2);
	pattern(ckpt_extra(c, s), EXTRA, v + 1000);
	assert_int_equal(ckpt_commit(c, s, v, v - 1, EXTRA), 0);
}

static bool slot_is(struct ckpt *c, int s, uint64_t v)
{
	static uint8_t buf[DATA];
	uint8_t ex[EXTRA];

	pattern(buf, DATA, v);
	pattern(ex, EXTRA, v + 1000);
	return !memcmp(ckpt_data(c, s), buf, DATA) && !memcmp(ckpt_extra(c, s), ex, EXTRA);
}

static void commit_reopen(void **state)
{
	struct ckpt_geom g = geom();
	struct ckpt_version v[CKPT_SLOTS];
	struct ckpt *c;
	(void)state;

	assert_int_equal(ckpt_create(&c, path, &g, NULL), 0);
	assert_int_equal(ckpt_versions(c, v), 0);
	assert_non_null(ckpt_live(c));
	memset(ckpt_live(c), 0x5a, 8192);
	for (uint64_t i = 1; i <= 3; i++)
		commit_v(c, i);
	/* a version not newer than what is held is refused */
	assert_int_equal(ckpt_commit(c, ckpt_next_slot(c), 2, 0, 0), -EINVAL);
	ckpt_close(c);

	assert_int_equal(ckpt_open(&c, path, true, NULL), 0);
	assert_int_equal(ckpt_geom(c)->data_size, DATA);
	assert_int_equal(ckpt_geom(c)->rank, 1);
	assert_string_equal(ckpt_geom(c)->name, "win0");
	assert_int_equal(ckpt_versions(c, v), 2);
	assert_int_equal(v[0].version, 3);
	assert_int_equal(v[0].consistent, 2);
	assert_int_equal(v[1].version, 2);
	assert_true(slot_is(c, v[0].slot, 3));
	assert_true(slot_is(c, v[1].slot, 2));
	assert_int_equal(ckpt_find(c, 2), v[1].slot);
	assert_int_equal(ckpt_find(c, 1), -ENOENT);
	assert_int_equal(ckpt_next_slot(c), v[1].slot);
	assert_int_equal(((uint8_t *)ckpt_live(c))[8191], 0x5a);
	/* a restart back to 2 drops 3 and writes the next version over it */
	ckpt_drop_newer(c, 2);
	assert_int_equal(ckpt_versions(c, v), 1);
	assert_int_equal(v[0].version, 2);
	commit_v(c, 3);
	ckpt_close(c);
	assert_int_equal(ckpt_open(&c, path, true, NULL), 0);
	assert_int_equal(ckpt_versions(c, v), 2);
	assert_int_equal(v[0].version, 3);
	assert_true(slot_is(c, v[0].slot, 3));
	ckpt_close(c);
}

static void torn_falls_back(void **state)
{
	struct ckpt_geom g = geom();
	struct ckpt_version v[CKPT_SLOTS];
	struct ckpt *c;
	(void)state;

	assert_int_equal(ckpt_create(&c, path, &g, NULL), 0);
	commit_v(c, 1);
	commit_v(c, 2);
	int s2 = ckpt_find(c, 2);
	((uint8_t *)ckpt_data(c, s2))[DATA - 1] ^= 1; /* a torn data page */
	ckpt_close(c);

	/* unverified, only the record is checked: version 2 is believed */
	assert_int_equal(ckpt_open(&c, path, false, NULL), 0);
	assert_int_equal(ckpt_versions(c, v), 2);
	ckpt_close(c);
	/* verified: the checksum catches it and version 1 is the newest */
	assert_int_equal(ckpt_open(&c, path, true, NULL), 0);
	assert_int_equal(ckpt_versions(c, v), 1);
	assert_int_equal(v[0].version, 1);
	assert_true(slot_is(c, v[0].slot, 1));
	assert_int_equal(ckpt_next_slot(c), s2);
	/* a torn commit record: ignored even unverified */
	commit_v(c, 2);
	((uint8_t *)ckpt_data(c, 0) - 4096)[s2 * 2048 + 3] ^= 0x10; /* record s2 */
	ckpt_close(c);
	assert_int_equal(ckpt_open(&c, path, false, NULL), 0);
	assert_int_equal(ckpt_versions(c, v), 1);
	assert_int_equal(v[0].version, 1);
	ckpt_close(c);
}

static void refuses_foreign_and_busy(void **state)
{
	struct ckpt_geom g = geom();
	struct ckpt *c, *c2;
	(void)state;

	int fd = open(path, O_RDWR | O_CREAT, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 65536), 0);
	assert_int_equal(pwrite(fd, "hello", 5, 0), 5);
	close(fd);
	assert_int_equal(ckpt_open(&c, path, true, NULL), -EMEDIUMTYPE);

	assert_int_equal(ckpt_create(&c, path, &g, NULL), 0);
	/* the same file while it is open: another job of the same name */
	assert_int_equal(ckpt_open(&c2, path, false, NULL), -EBUSY);
	assert_int_equal(ckpt_create(&c2, path, &g, NULL), -EBUSY);
	ckpt_close(c);
	assert_int_equal(ckpt_open(&c2, path, false, NULL), 0);
	ckpt_close(c2);

	g.rank = 4; /* rank >= nranks */
	assert_int_equal(ckpt_create(&c, path, &g, NULL), -EINVAL);
	g = geom();
	assert_int_equal(ckpt_create(&c, "/nonexistent-dir/x", &g, NULL), -ENOENT);
}

/* ---- crash test ---- */

#define NCOMMITS 5

/* The child's script: create the area ("c"), then NCOMMITS commits
 * ("x" each). */
static int commit_script(void *arg, int fd)
{
	struct ckpt_geom g = geom();
	struct ckpt *c;
	(void)arg;

	if (ckpt_create(&c, path, &g, NULL))
		return 2;
	if (write(fd, "c", 1) != 1)
		return 3;
	for (uint64_t v = 1; v <= NCOMMITS; v++) {
		commit_v(c, v);
		if (write(fd, "x", 1) != 1)
			return 3;
	}
	ckpt_close(c);
	return 0;
}

static void crash_at_every_persist_point(void **state)
{
	int crashes = 0;
	(void)state;

	for (uint64_t n = 1; n < 200; n++) {
		bool through;
		unlink(path);
		int got = crash_point_run(n, commit_script, NULL, NCOMMITS + 1, &through);
		if (through)
			break; /* ran to the end without reaching point n */
		crashes++;
		struct ckpt *c;
		int rc = ckpt_open(&c, path, true, NULL);
		if (got == 0) {
			/* killed while creating: no area, or an empty one */
			if (rc == 0) {
				struct ckpt_version v[CKPT_SLOTS];
				assert_int_equal(ckpt_versions(c, v), 0);
				ckpt_close(c);
			}
			continue;
		}
		assert_int_equal(rc, 0);
		uint64_t done = (uint64_t)got - 1; /* commits that returned */
		struct ckpt_version v[CKPT_SLOTS];
		int nv = ckpt_versions(c, v);
		/* the last returned commit is always there; the one in flight
		 * may be there too if it passed its commit point */
		if (done > 0) {
			assert_true(ckpt_find(c, done) >= 0);
			assert_true(slot_is(c, ckpt_find(c, done), done));
		}
		for (int i = 0; i < nv; i++) {
			if (v[i].version + 1 < done || v[i].version > done + 1) {
				fprintf(stderr, "crash at %llu after %llu commits: holds %llu\n",
					(unsigned long long)n, (unsigned long long)done,
					(unsigned long long)v[i].version);
				fail();
			}
			assert_true(slot_is(c, v[i].slot, v[i].version));
		}
		/* and the area goes on working */
		commit_v(c, done + 2);
		ckpt_close(c);
	}
	fprintf(stderr, "ckpt crash test: %d crash points checked\n", crashes);
	assert_true(crashes >= 2 + 3 * NCOMMITS);
}

/* The data CRC, computed while ckpt_write copies in order (over several
 * chunks), finished by commit after a partial in-order write and the rest
 * stored directly, or read whole after writes out of order: each version
 * verifies at reopen (and copies out verified, ckpt_read_verify), and a
 * byte changed behind the CRC does not. */
static void crc_while_copying(void **state)
{
	enum { BIG = 200 * 1024 + 12 };
	struct ckpt_geom g = geom();
	struct ckpt_version v[CKPT_SLOTS];
	static uint8_t buf[BIG];
	struct ckpt *c;
	(void)state;

	g.data_size = BIG;
	g.live_size = 0;
	for (int how = 0; how < 3; how++) {
		assert_int_equal(ckpt_create(&c, path, &g, NULL), 0);
		int s = ckpt_next_slot(c);
		assert_int_equal(ckpt_begin(c, s), 0);
		pattern(buf, BIG, 7 + how);
		if (how == 0) {
			ckpt_write(c, s, 0, buf, BIG);
		} else if (how == 1) {
			ckpt_write(c, s, 0, buf, 70000);
			memcpy((uint8_t *)ckpt_data(c, s) + 70000, buf + 70000, BIG - 70000);
		} else {
			ckpt_write(c, s, 100000, buf + 100000, BIG - 100000);
			ckpt_write(c, s, 0, buf, 100000);
		}
		assert_int_equal(ckpt_commit(c, s, 5, 4, 0), 0);
		ckpt_close(c);
		assert_int_equal(ckpt_open(&c, path, true, NULL), 0);
		assert_int_equal(ckpt_versions(c, v), 1);
		assert_int_equal(v[0].version, 5);
		assert_memory_equal(ckpt_data(c, v[0].slot), buf, BIG);
		static uint8_t out[BIG];
		assert_int_equal(ckpt_read_verify(c, v[0].slot, out), 0);
		assert_memory_equal(out, buf, BIG);
		((uint8_t *)ckpt_data(c, v[0].slot))[BIG - 1] ^= 1;
		assert_int_equal(ckpt_read_verify(c, v[0].slot, out), -EBADMSG);
		assert_int_equal(ckpt_versions(c, v), 0);
		ckpt_close(c);
		assert_int_equal(ckpt_open(&c, path, true, NULL), 0);
		assert_int_equal(ckpt_versions(c, v), 0);
		ckpt_close(c);
		unlink(path);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(commit_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(crc_while_copying, setup, teardown),
		cmocka_unit_test_setup_teardown(torn_falls_back, setup, teardown),
		cmocka_unit_test_setup_teardown(refuses_foreign_and_busy, setup, teardown),
		cmocka_unit_test_setup_teardown(crash_at_every_persist_point, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
