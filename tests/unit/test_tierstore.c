/* test_tierstore.c - the tiered page store: zeros for pages never written,
 * data surviving moves between MRAM, DRAM and flash, sub-page
 * read-modify-write, TRIM freeing pages, counters, refused setups, and
 * zero-copy maps: the bytes pread gives, frames kept from reuse until the
 * map is given back; a failing flash that loses only its pages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "flash_fail.h"
#include "tier_files.h"

#include "pmem/tierstore.h"

#define PG 4096

static char shmflash[64];   /* a flash file on tmpfs, refused */

static int setup(void **s)
{
	(void)s;
	tier_files_name("ts");
	snprintf(shmflash, sizeof(shmflash), "/dev/shm/nvtest-ts-%d.flash", (int)getpid());
	return 0;
}

static int teardown(void **s)
{
	(void)s;
	tier_files_remove();
	unlink(shmflash);
	return 0;
}

static struct tierstore *open_store(uint64_t pages, uint64_t m, uint64_t d,
				    bool with_flash)
{
	struct tierstore_opts o = {
		.pages = pages, .mram_pages = m, .dram_pages = d,
		.nvram_path = nvram, .flash_path = with_flash ? flash : NULL,
		.policy = "lru",
	};
	struct tierstore *ts;
	assert_int_equal(tierstore_open(&ts, &o), 0);
	return ts;
}

static void zeros_and_rmw(void **s)
{
	(void)s;
	struct tierstore *ts = open_store(64, 8, 56, false);
	uint8_t b[3 * PG], want[3 * PG];
	struct tierstore_stats st;

	memset(b, 0xaa, sizeof(b));
	assert_int_equal(tierstore_pread(ts, b, 5 * PG, sizeof(b)), 0);
	for (size_t i = 0; i < sizeof(b); i++)
		assert_int_equal(b[i], 0);
	tierstore_get_stats(ts, &st);
	assert_int_equal(st.pages_used[TIER_MRAM] + st.pages_used[TIER_DRAM], 0);
	assert_int_equal(st.zero_reads, 3);

	/* A 512-byte write into a fresh page: the rest reads as zeros. */
	memset(b, 0x5c, 512);
	assert_int_equal(tierstore_pwrite(ts, b, 10 * PG + 1024, 512), 0);
	assert_int_equal(tierstore_pread(ts, want, 10 * PG, PG), 0);
	for (unsigned i = 0; i < PG; i++)
		assert_int_equal(want[i], i >= 1024 && i < 1536 ? 0x5c : 0);
	/* A write straddling pages. */
	tier_fill(b, 1, 1);
	assert_int_equal(tierstore_pwrite(ts, b, 20 * PG + 3584, 2 * PG), 0);
	assert_int_equal(tierstore_pread(ts, want, 20 * PG + 3584, 2 * PG), 0);
	assert_memory_equal(want, b, 2 * PG);
	tierstore_get_stats(ts, &st);
	assert_int_equal(st.pages_used[TIER_MRAM] + st.pages_used[TIER_DRAM], 4);

	uint32_t r, w;
	tierstore_page_counts(ts, 10, &r, &w);
	assert_int_equal(w, 1);
	assert_int_equal(r, 1);
	assert_int_not_equal(tierstore_page_tier(ts, 10), TIER_NONE);
	assert_int_equal(tierstore_page_tier(ts, 11), TIER_NONE);

	/* Out of range. */
	assert_int_equal(tierstore_pread(ts, b, 64 * PG - 512, 1024), -EINVAL);
	assert_int_equal(tierstore_pwrite(ts, b, UINT64_MAX - 100, 512), -EINVAL);
	assert_int_equal(tierstore_trim(ts, 60 * PG, 8 * PG), -EINVAL);

	/* TRIM: whole pages freed, partial edges zeroed. */
	assert_int_equal(tierstore_trim(ts, 20 * PG + 3584 + 512, 2 * PG - 1024), 0);
	assert_int_equal(tierstore_pread(ts, want, 20 * PG + 3584, 2 * PG), 0);
	assert_memory_equal(want, b, 512);
	for (unsigned i = 512; i < 2 * PG - 512; i++)
		assert_int_equal(want[i], 0);
	assert_memory_equal(want + 2 * PG - 512, b + 2 * PG - 512, 512);
	assert_int_equal(tierstore_page_tier(ts, 21), TIER_NONE);
	assert_int_equal(tierstore_trim(ts, 0, 64 * PG), 0);
	tierstore_get_stats(ts, &st);
	assert_int_equal(st.pages_used[TIER_MRAM] + st.pages_used[TIER_DRAM], 0);
	assert_int_equal(tierstore_pread(ts, want, 10 * PG, PG), 0);
	for (unsigned i = 0; i < PG; i++)
		assert_int_equal(want[i], 0);
	tierstore_close(ts);
}

/* A flash that fails (writes past 64 KiB of the file refused by
 * RLIMIT_FSIZE, as a full file system would): the pages whose write-back
 * failed are lost and read as -EIO, never as other bytes; every other
 * page reads right, the store stays in step with its policy and goes on
 * working, and a lost page written again, or trimmed, is good again. */
static void flash_error_loses_only_those_pages(void **s)
{
	(void)s;
	struct tierstore *ts = open_store(128, 4, 4, true);
	static uint8_t b[PG], r[PG];
	struct tierstore_stats st;
	bool lost[128];
	unsigned nlost = 0;

	flash_fail_begin(16 * 4096);
	for (uint64_t p = 0; p < 128; p++) {
		tier_fill(b, p, 1);
		assert_int_equal(tierstore_pwrite(ts, b, p * PG, PG), 0);
	}
	for (uint64_t p = 0; p < 128; p++) {
		tier_fill(b, p, 1);
		int rc = tierstore_pread(ts, r, p * PG, PG);
		assert_true(rc == 0 || rc == -EIO);
		if (rc == 0)
			assert_memory_equal(r, b, PG);
		lost[p] = rc == -EIO;
		nlost += lost[p];
	}
	flash_fail_end();
	tierstore_get_stats(ts, &st);
	assert_true(nlost > 0 && nlost < 128);
	assert_int_equal(st.pages_lost, nlost);
	assert_true(st.flash_errors >= nlost);
	/* A partial write of a lost page has nothing to merge into. */
	uint64_t l = 0;
	while (!lost[l])
		l++;
	assert_int_equal(tierstore_pwrite(ts, b, l * PG + 8, 8), -EIO);
	/* Written whole, or trimmed: good again. */
	for (uint64_t p = 0; p < 128; p++) {
		if (!lost[p])
			continue;
		tier_fill(b, p, 2);
		if (p % 2)
			assert_int_equal(tierstore_pwrite(ts, b, p * PG, PG), 0);
		else
			assert_int_equal(tierstore_trim(ts, p * PG, PG), 0);
	}
	for (uint64_t p = 0; p < 128; p++) {
		tier_fill(b, p, lost[p] ? 2 : 1);
		if (lost[p] && p % 2 == 0)
			memset(b, 0, PG);
		assert_int_equal(tierstore_pread(ts, r, p * PG, PG), 0);
		assert_memory_equal(r, b, PG);
	}
	tierstore_get_stats(ts, &st);
	assert_int_equal(st.pages_lost, 0);
	tierstore_close(ts);
}

/* A READ whose send went out short maps its pages again (seen): a page
 * lost in between (its write-back failed, and it came back without its
 * bytes) must give -EIO there too, not the frame's zeros. */
static void remap_of_lost_page_fails(void **s)
{
	(void)s;
	struct tierstore *ts = open_store(128, 4, 4, true);
	static uint8_t b[PG], r[PG];
	struct iovec iov[4];
	size_t mapped;
	uint64_t seen = 100 * PG;

	memset(b, 0xab, PG);
	assert_int_equal(tierstore_pwrite(ts, b, 100 * PG, PG), 0);
	assert_int_equal(tierstore_read_map(ts, 100 * PG, PG, iov, 4, &mapped, &seen), 1);
	tierstore_read_unmap(ts);
	assert_int_equal(seen, 101 * PG);
	flash_fail_begin(16 * 4096);
	for (uint64_t p = 0; p < 12; p++)   /* page 100 goes out: its write fails */
		assert_int_equal(tierstore_pwrite(ts, b, p * PG, PG), 0);
	flash_fail_end();
	assert_int_equal(tierstore_pread(ts, r, 100 * PG, PG), -EIO);
	assert_int_equal(tierstore_read_map(ts, 100 * PG, PG, iov, 4, &mapped, &seen), -EIO);
	tierstore_close(ts);
}

/* A flash read that fails and then works again (here the flash file cut
 * short below the page, and its bytes put back later): the page is not
 * given up on. Accesses to it fail with -EIO while the read fails, a
 * partial write too (nothing to merge into); leaving memory meanwhile
 * writes nothing over its flash copy, although the policy counts it
 * dirty; once the read works the page has its old bytes, whether it was
 * still in memory or back on flash. */
static void flash_read_error_is_retried(void **s)
{
	(void)s;
	struct tierstore *ts = open_store(128, 4, 4, true);
	static uint8_t b[PG], r[PG], keep[PG];
	struct tierstore_stats st;
	struct stat sb;
	const uint64_t v = 127;   /* the last page: no write-back of another
				   * page lands past the cut */

	for (uint64_t p = 0; p < 128; p++) {
		tier_fill(b, p, 1);
		assert_int_equal(tierstore_pwrite(ts, b, p * PG, PG), 0);
	}
	for (uint64_t p = 0; p < 8; p++)
		assert_int_equal(tierstore_pread(ts, r, p * PG, PG), 0);
	assert_int_equal(tierstore_page_tier(ts, v), TIER_FLASH);
	int fd = open(flash, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, keep, PG, (off_t)(v * PG)), PG);
	tier_fill(b, v, 1);
	assert_memory_equal(keep, b, PG);

	for (int round = 0; round < 2; round++) {
		assert_int_equal(ftruncate(fd, (off_t)(v * PG)), 0);
		assert_int_equal(tierstore_pread(ts, r, v * PG, PG), -EIO);
		assert_int_equal(tierstore_pread(ts, r, v * PG, PG), -EIO);
		assert_int_equal(tierstore_pwrite(ts, b, v * PG + 8, 8), -EIO);
		tierstore_get_stats(ts, &st);
		assert_int_equal(st.pages_unread, 1);
		assert_int_equal(st.pages_lost, 0);
		if (round == 0) {
			/* Out of memory while unreadable: the policy says
			 * write it back (the partial write made it dirty);
			 * nothing may be written at its place. */
			for (uint64_t p = 0; p < 16; p++) {
				tier_fill(b, p, 1);
				assert_int_equal(tierstore_pread(ts, r, p * PG, PG), 0);
				assert_memory_equal(r, b, PG);
			}
			assert_int_equal(tierstore_page_tier(ts, v), TIER_FLASH);
			assert_int_equal(fstat(fd, &sb), 0);
			assert_int_equal(sb.st_size, (off_t)(v * PG));
		}
		/* The read works again: the page's old bytes, from flash
		 * (round 0) or read into the frame it has (round 1: tried
		 * again no sooner than 100 ms after a failed try). */
		assert_int_equal(pwrite(fd, keep, PG, (off_t)(v * PG)), PG);
		usleep(150000);
		assert_int_equal(tierstore_pread(ts, r, v * PG, PG), 0);
		tier_fill(b, v, 1);
		assert_memory_equal(r, b, PG);
		tierstore_get_stats(ts, &st);
		assert_int_equal(st.pages_unread, 0);
		assert_int_equal(st.pages_lost, 0);
		if (round == 1)
			assert_true(st.reloads >= 1);
		/* To flash again for the next round. */
		for (uint64_t p = 0; p < 16; p++)
			assert_int_equal(tierstore_pread(ts, r, p * PG, PG), 0);
		assert_int_equal(tierstore_page_tier(ts, v), TIER_FLASH);
	}
	/* Written whole while its flash copy cannot be read: the copy is
	 * not needed, so it is not read, and nothing fails. */
	assert_int_equal(ftruncate(fd, (off_t)(v * PG)), 0);
	struct tierstore_stats st0;
	tierstore_get_stats(ts, &st0);
	tier_fill(b, v, 3);
	assert_int_equal(tierstore_pwrite(ts, b, v * PG, PG), 0);
	tierstore_get_stats(ts, &st);
	assert_int_equal(st.flash_errors, st0.flash_errors);
	assert_int_equal(st.loads_skipped, st0.loads_skipped + 1);
	assert_int_equal(st.pages_unread, 0);
	assert_int_equal(tierstore_pread(ts, r, v * PG, PG), 0);
	assert_memory_equal(r, b, PG);
	/* A partial write works now and merges with the old bytes. */
	memset(b, 0xee, 8);
	assert_int_equal(tierstore_pwrite(ts, b, v * PG + 8, 8), 0);
	assert_int_equal(tierstore_pread(ts, r, v * PG, PG), 0);
	tier_fill(b, v, 3);
	memset(b + 8, 0xee, 8);
	assert_memory_equal(r, b, PG);
	close(fd);
	tierstore_close(ts);
}

static void spill_to_flash_and_back(void **s)
{
	(void)s;
	/* 512 pages over 16 MRAM + 48 DRAM: most pages live on flash. */
	struct tierstore *ts = open_store(512, 16, 48, true);
	uint8_t b[PG], r[PG];
	struct tierstore_stats st;

	for (unsigned gen = 1; gen <= 2; gen++)
		for (uint64_t p = 0; p < 512; p++) {
			uint64_t q = gen == 1 ? p : (p * 37) % 512;
			tier_fill(b, q, gen);
			assert_int_equal(tierstore_pwrite(ts, b, q * PG, PG), 0);
		}
	for (unsigned round = 0; round < 2; round++)
		for (uint64_t p = 0; p < 512; p++) {
			uint64_t q = round ? 511 - p : (p * 101) % 512;
			tier_fill(b, q, 2);
			assert_int_equal(tierstore_pread(ts, r, q * PG, PG), 0);
			assert_memory_equal(r, b, PG);
		}
	tierstore_get_stats(ts, &st);
	assert_true(st.writebacks > 0);
	assert_true(st.loads > 0);
	assert_int_equal(st.flash_errors, 0);
	assert_int_equal(st.pages_used[TIER_MRAM], 16);
	assert_int_equal(st.pages_used[TIER_DRAM], 48);
	assert_int_equal(st.pages_used[TIER_FLASH], 512 - 64);
	char txt[2048];
	assert_true(tierstore_stats_format(ts, txt, sizeof(txt)) > 0);
	assert_non_null(strstr(txt, "flash_pages: 448\n"));
	assert_non_null(strstr(txt, "mram_hit_rate: "));
	/* The model's estimate: flash traffic happened, so time is spent. */
	char *mt = strstr(txt, "model_time_s: ");
	char *me = strstr(txt, "model_energy_j: ");
	assert_non_null(mt);
	assert_non_null(me);
	assert_true(strtod(mt + 14, NULL) > 0);
	assert_true(strtod(me + 16, NULL) > 0);

	/* Trim pages on flash: they read as zeros, flash count drops. */
	assert_int_equal(tierstore_trim(ts, 0, 512 * PG), 0);
	tierstore_get_stats(ts, &st);
	assert_int_equal(st.pages_used[TIER_FLASH], 0);
	assert_int_equal(st.pages_used[TIER_MRAM] + st.pages_used[TIER_DRAM], 0);
	assert_int_equal(tierstore_pread(ts, r, 300 * PG, PG), 0);
	for (unsigned i = 0; i < PG; i++)
		assert_int_equal(r[i], 0);
	/* And new data after the punch is intact. */
	tier_fill(b, 300, 9);
	assert_int_equal(tierstore_pwrite(ts, b, 300 * PG, PG), 0);
	for (uint64_t p = 0; p < 200; p++) {   /* push page 300 out */
		uint8_t t[PG];
		tier_fill(t, p, 3);
		assert_int_equal(tierstore_pwrite(ts, t, p * PG, PG), 0);
	}
	assert_int_equal(tierstore_pread(ts, r, 300 * PG, PG), 0);
	assert_memory_equal(r, b, PG);
	tierstore_close(ts);
}

/* Pages on flash written whole again: the store skips their flash reads
 * (flash_loads_skipped), and its model must not charge them (it charged
 * 35 us each, as nvsim did). Only writes, so the model's flash time is
 * the write-backs' 64 us each, and nothing else. */
static void whole_writes_charge_no_flash_reads(void **s)
{
	(void)s;
	struct tierstore *ts = open_store(512, 16, 48, true);
	uint8_t b[PG];
	struct tierstore_stats st;
	char txt[2048];

	for (unsigned gen = 1; gen <= 2; gen++)
		for (uint64_t p = 0; p < 512; p++) {
			tier_fill(b, p, gen);
			assert_int_equal(tierstore_pwrite(ts, b, p * PG, PG), 0);
		}
	tierstore_get_stats(ts, &st);
	assert_true(st.loads_skipped >= 512 - 64);
	assert_true(st.writebacks > 0);
	assert_true(tierstore_stats_format(ts, txt, sizeof(txt)) > 0);
	char *mf = strstr(txt, "model_flash_s: ");
	assert_non_null(mf);
	double want = (double)st.writebacks * 64e-6;
	double got = strtod(mf + 15, NULL);
	assert_true(got > want - 1e-5 && got < want + 1e-5);
	tierstore_close(ts);
}

static struct tierstore *mts;

/* Writes pages 4..7 into a full memory: the first one evicts a page and
 * needs its frame, which a map on the main thread may still be using. */
static void *writer(void *arg)
{
	uint8_t b[PG];
	(void)arg;
	for (uint64_t p = 4; p < 8; p++) {
		tier_fill(b, p, 1);
		assert_int_equal(tierstore_pwrite(mts, b, p * PG, PG), 0);
	}
	return NULL;
}

static void read_map_pins_frames(void **s)
{
	(void)s;
	struct tierstore *ts = mts = open_store(16, 2, 2, true);
	struct iovec iov[8];
	uint8_t b[4 * PG], want[4 * PG];
	size_t mapped;
	uint64_t seen;
	int n;

	for (uint64_t p = 0; p < 4; p++) {
		tier_fill(b, p, 1);
		assert_int_equal(tierstore_pwrite(ts, b, p * PG, PG), 0);
	}
	/* Unaligned, across pages and into a page never written (zeros). */
	assert_int_equal(tierstore_pread(ts, want, PG + 100, 3 * PG), 0);
	seen = PG + 100;
	n = tierstore_read_map(ts, PG + 100, 3 * PG, iov, 8, &mapped, &seen);
	assert_true(n > 0);
	assert_int_equal(mapped, 3 * PG);
	size_t at = 0;
	for (int i = 0; i < n; i++) {
		memcpy(b + at, iov[i].iov_base, iov[i].iov_len);
		at += iov[i].iov_len;
	}
	assert_int_equal(at, 3 * PG);
	assert_memory_equal(b, want, 3 * PG);
	tierstore_read_unmap(ts);
	assert_true(seen == 4 * PG + 100);
	/* max pages: the rest is left to the next call. */
	seen = 0;
	n = tierstore_read_map(ts, 0, 4 * PG, iov, 2, &mapped, &seen);
	assert_true(n > 0 && n <= 2);
	assert_int_equal(mapped, 2 * PG);
	assert_true(seen == 2 * PG);
	tierstore_read_unmap(ts);
	/* A send that went out short maps the same bytes again: they were
	 * presented to the policy once, and are not counted again. */
	struct tierstore_stats st0, st1;
	tierstore_get_stats(ts, &st0);
	n = tierstore_read_map(ts, 0, 3 * PG, iov, 8, &mapped, &seen);
	assert_true(n > 0);
	tierstore_read_unmap(ts);
	tierstore_get_stats(ts, &st1);
	assert_true(st1.reads == st0.reads + 1);        /* page 2 only */
	assert_true(seen == 3 * PG);
	seen = 10 * PG;
	n = tierstore_read_map(ts, 10 * PG, PG, iov, 1, &mapped, &seen);
	assert_int_equal(n, 1);
	for (unsigned i = 0; i < PG; i++)
		assert_int_equal(((uint8_t *)iov[0].iov_base)[i], 0);
	tierstore_read_unmap(ts);
	seen = 0;
	assert_int_equal(tierstore_read_map(ts, 15 * PG, 2 * PG, iov, 8,
					    &mapped, &seen), -EINVAL);

	/* Page 0 mapped (most recently used); another thread fills memory
	 * with new pages: the evicted pages' frames must not be reused
	 * while the map is out, so page 0's bytes stay what was mapped. */
	seen = 0;
	n = tierstore_read_map(ts, 0, PG, iov, 1, &mapped, &seen);
	assert_int_equal(n, 1);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, writer, NULL), 0);
	usleep(100 * 1000);
	tier_fill(want, 0, 1);
	assert_memory_equal(iov[0].iov_base, want, PG);
	tierstore_read_unmap(ts);
	pthread_join(th, NULL);
	for (uint64_t p = 0; p < 8; p++) {
		tier_fill(want, p, 1);
		assert_int_equal(tierstore_pread(ts, b, p * PG, PG), 0);
		assert_memory_equal(b, want, PG);
	}
	struct tierstore_stats st;
	tierstore_get_stats(ts, &st);
	assert_int_equal(st.pages_used[TIER_MRAM] + st.pages_used[TIER_DRAM], 4);
	tierstore_close(ts);
}

static void refused_setups(void **s)
{
	(void)s;
	struct tierstore *ts;
	struct tierstore_opts o = {
		.pages = 64, .mram_pages = 8, .dram_pages = 8,
		.nvram_path = nvram, .policy = "lru",
	};
	/* Memory smaller than the space and no flash. */
	assert_int_equal(tierstore_open(&ts, &o), -EINVAL);
	/* Flash on tmpfs. */
	o.flash_path = shmflash;
	assert_int_equal(tierstore_open(&ts, &o), -EINVAL);
	/* Unknown policy. */
	o.flash_path = flash;
	o.policy = "nosuch";
	assert_int_equal(tierstore_open(&ts, &o), -ENOENT);
	/* No memory at all. */
	o.policy = "lru";
	o.mram_pages = o.dram_pages = 0;
	assert_int_equal(tierstore_open(&ts, &o), -EINVAL);
	/* DRAM only works (no NVRAM file needed). */
	o.dram_pages = 64;
	o.nvram_path = NULL;
	o.flash_path = NULL;
	assert_int_equal(tierstore_open(&ts, &o), 0);
	uint8_t b[PG] = { 1 };
	assert_int_equal(tierstore_pwrite(ts, b, 0, PG), 0);
	tierstore_close(ts);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(zeros_and_rmw),
		cmocka_unit_test(spill_to_flash_and_back),
		cmocka_unit_test(whole_writes_charge_no_flash_reads),
		cmocka_unit_test(flash_error_loses_only_those_pages),
		cmocka_unit_test(remap_of_lost_page_fails),
		cmocka_unit_test(flash_read_error_is_retried),
		cmocka_unit_test(read_map_pins_frames),
		cmocka_unit_test(refused_setups),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
