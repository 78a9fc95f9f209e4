/* test_tracelog.c - the live store's access log: the ring (drops counted
 * when full, order kept, across wrap-around and threads), the log written
 * by its thread and read back as nvt, an unwritable place refused, and the
 * tierstore logging exactly the accesses its policy sees. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "pmem/tierstore.h"
#include "pmem/tracelog.h"
#include "pmem/trace.h"

#define PG 4096

static void ring_overflow_drops_and_keeps_order(void **state)
{
	struct trace_ring r;
	uint64_t out[16];
	(void)state;
	assert_int_equal(trace_ring_init(&r, 8), 0);
	for (uint64_t v = 0; v < 12; v++)
		assert_int_equal(trace_ring_push(&r, v), v < 8);
	uint64_t pushed, dropped;
	trace_ring_counts(&r, &pushed, &dropped);
	assert_int_equal(pushed, 8);
	assert_int_equal(dropped, 4);
	assert_int_equal(trace_ring_pop(&r, out, 5), 5);
	for (uint64_t v = 0; v < 5; v++)
		assert_int_equal(out[v], v);
	/* Room again: 5 more fit (wrapping), the sixth is dropped. */
	for (uint64_t v = 100; v < 106; v++)
		assert_int_equal(trace_ring_push(&r, v), v < 105);
	trace_ring_counts(&r, &pushed, &dropped);
	assert_int_equal(dropped, 5);
	assert_int_equal(trace_ring_pop(&r, out, 16), 8);
	uint64_t want[] = { 5, 6, 7, 100, 101, 102, 103, 104 };
	for (size_t k = 0; k < 8; k++)
		assert_int_equal(out[k], want[k]);
	assert_int_equal(trace_ring_pop(&r, out, 16), 0);
	/* Many laps around a small ring. */
	for (uint64_t v = 0; v < 1000; v++) {
		assert_true(trace_ring_push(&r, v));
		assert_int_equal(trace_ring_pop(&r, out, 16), 1);
		assert_int_equal(out[0], v);
	}
	trace_ring_counts(&r, &pushed, &dropped);
	assert_int_equal(pushed, 1013);
	assert_int_equal(dropped, 5);
	trace_ring_destroy(&r);
	assert_int_equal(trace_ring_init(&r, 0), -EINVAL);
	assert_int_equal(trace_ring_init(&r, 1), -EINVAL);
	assert_int_equal(trace_ring_init(&r, 6), -EINVAL);
}

#define SPSC_N 300000u

static void *producer(void *arg)
{
	struct trace_ring *r = arg;
	for (uint64_t v = 0; v < SPSC_N;)
		if (trace_ring_push(r, v))
			v++;
	return NULL;
}

/* One producer, one consumer, a small ring: every value arrives once, in
 * order (the drops of a full ring are retried by this producer). */
static void ring_two_threads(void **state)
{
	struct trace_ring r;
	pthread_t t;
	uint64_t out[64], next = 0;
	(void)state;
	assert_int_equal(trace_ring_init(&r, 64), 0);
	assert_int_equal(pthread_create(&t, NULL, producer, &r), 0);
	while (next < SPSC_N) {
		size_t n = trace_ring_pop(&r, out, 64);
		for (size_t k = 0; k < n; k++)
			assert_int_equal(out[k], next++);
	}
	pthread_join(t, NULL);
	uint64_t pushed, dropped;
	trace_ring_counts(&r, &pushed, &dropped);
	assert_int_equal(pushed, SPSC_N);
	trace_ring_destroy(&r);
}

static size_t read_nvt(const char *path, struct trace_rec *recs, size_t n,
		       uint32_t *flags)
{
	struct trace_reader *rd;
	uint64_t instr = 0;
	size_t got = 0;
	assert_int_equal(trace_open(&rd, path, TRACE_NVT), 0);
	*flags = trace_flags(rd);
	for (;;) {
		ssize_t k = trace_read(rd, recs + got, n - got, &instr);
		assert_true(k >= 0);
		if (k == 0 || got + (size_t)k == n) {
			got += (size_t)k;
			break;
		}
		got += (size_t)k;
	}
	trace_close(rd);
	assert_int_equal(instr, 0);
	return got;
}

static void log_roundtrip(void **state)
{
	char path[64];
	struct tracelog *tl;
	uint64_t rec, drop;
	static struct trace_rec got[5002];
	uint32_t flags;
	(void)state;
	for (int gz = 0; gz < 2; gz++) {
		snprintf(path, sizeof(path), "/var/tmp/nvtest-tl-%d.nvt%s",
			 (int)getpid(), gz ? ".gz" : "");
		assert_int_equal(tracelog_open(&tl, path, 0), 0);
		for (uint64_t k = 0; k < 5000; k++) {
			uint32_t in = (uint32_t)(k % 3) * 512;
			tracelog_add(tl, k * 7919 % 100003, in,
				     k % 3 ? 512 : PG - in, k & 1);
		}
		tracelog_add(tl, (1ull << 38) + 5, 4095, 1, true);
		tracelog_free(tl, (1ull << 38) + 5);
		tracelog_counts(tl, &rec, &drop);
		assert_int_equal(rec, 5002);
		assert_int_equal(drop, 0);
		assert_int_equal(tracelog_close(tl), 0);
		assert_int_equal(read_nvt(path, got, 5002, &flags), 5002);
		assert_int_equal(flags, NVT_F_PAGES | NVT_F_STORE | NVT_F_FREES);
		for (uint64_t k = 0; k < 5000; k++) {
			uint32_t in = (uint32_t)(k % 3) * 512;
			assert_int_equal(got[k].addr, (k * 7919 % 100003) * PG + in);
			assert_int_equal(got[k].size, k % 3 ? 512 : PG - in);
			assert_int_equal(got[k].op, k & 1 ? TRACE_S : TRACE_L);
		}
		assert_int_equal(got[5000].addr, ((1ull << 38) + 5) * PG + 4095);
		assert_int_equal(got[5000].size, 1);
		/* the free: a record of its own, not an access of 4096 bytes */
		assert_int_equal(got[5001].op, TRACE_FREE);
		assert_int_equal(got[5001].addr, ((1ull << 38) + 5) * PG);
		assert_int_equal(got[5001].size, 0);
		unlink(path);
	}
}

/* A ring of 2 against a producer that never waits: some records are
 * dropped; every one is either in the file or counted, and the file keeps
 * the order they came in. */
static void log_overflow(void **state)
{
	char path[64];
	struct tracelog *tl;
	uint64_t rec, drop;
	static struct trace_rec got[200000];
	uint32_t flags;
	(void)state;
	snprintf(path, sizeof(path), "/var/tmp/nvtest-tl-%d.nvt", (int)getpid());
	assert_int_equal(tracelog_open(&tl, path, 2), 0);
	for (uint64_t k = 0; k < 200000; k++)
		tracelog_add(tl, k, 0, PG, false);
	assert_int_equal(tracelog_close(tl), 0);
	/* tracelog_close freed tl: the counts come from the file. */
	size_t n = read_nvt(path, got, 200000, &flags);
	assert_true(n >= 2 && n < 200000);
	for (size_t k = 1; k < n; k++)
		assert_true(got[k].addr > got[k - 1].addr);
	unlink(path);
	/* Counts while open. */
	assert_int_equal(tracelog_open(&tl, path, 2), 0);
	for (uint64_t k = 0; k < 100000; k++)
		tracelog_add(tl, k, 0, PG, true);
	tracelog_counts(tl, &rec, &drop);
	assert_int_equal(rec + drop, 100000);
	assert_true(drop > 0);
	assert_int_equal(tracelog_close(tl), 0);
	n = read_nvt(path, got, 200000, &flags);
	assert_int_equal(n, rec);
	unlink(path);
}

static void log_unwritable(void **state)
{
	struct tracelog *tl = (void *)1;
	(void)state;
	assert_int_equal(tracelog_open(&tl, "/nonexistent-nvtest/x.nvt", 0),
			 -ENOENT);
	assert_null(tl);
	assert_int_equal(tracelog_open(&tl, "/var/tmp", 0), -EISDIR);
}

/* The store logs what its policy sees: every access of a written page,
 * sub-page ones with their bytes; reads of pages never written (zeros, no
 * policy call) are not logged. */
static void store_logs_policy_accesses(void **state)
{
	char path[64], nvram[64];
	static uint8_t buf[8 * PG];
	struct trace_rec got[64];
	uint32_t flags;
	(void)state;
	snprintf(path, sizeof(path), "/var/tmp/nvtest-tl-%d.nvt.gz", (int)getpid());
	snprintf(nvram, sizeof(nvram), "/dev/shm/nvtest-tl-%d.mram", (int)getpid());
	struct tierstore_opts o = {
		.pages = 64, .mram_pages = 4, .dram_pages = 60,
		.nvram_path = nvram, .policy = "lru", .trace_path = path,
	};
	struct tierstore *ts;
	struct tierstore_stats st;
	assert_int_equal(tierstore_open(&ts, &o), 0);
	memset(buf, 0xab, sizeof(buf));
	assert_int_equal(tierstore_pwrite(ts, buf, 0, 4 * PG), 0);        /* 4 */
	assert_int_equal(tierstore_pread(ts, buf, 10 * PG, PG), 0);       /* 0: zeros */
	assert_int_equal(tierstore_pread(ts, buf, PG + 512, 2 * PG), 0);  /* 3 */
	assert_int_equal(tierstore_pwrite(ts, buf, 7 * PG + 1024, 512), 0); /* 1 */
	tierstore_get_stats(ts, &st);
	assert_int_equal(st.trace_records, 8);
	assert_int_equal(st.trace_dropped, 0);
	char txt[4096];
	assert_true(tierstore_stats_format(ts, txt, sizeof(txt)) > 0);
	assert_non_null(strstr(txt, "\ntrace_records: 8\ntrace_dropped: 0\n"));
	tierstore_close(ts);
	unlink(nvram);
	assert_int_equal(read_nvt(path, got, 64, &flags), 8);
	struct trace_rec want[] = {
		{ 0, PG, TRACE_S }, { PG, PG, TRACE_S }, { 2 * PG, PG, TRACE_S },
		{ 3 * PG, PG, TRACE_S }, { PG + 512, PG - 512, TRACE_L },
		{ 2 * PG, PG, TRACE_L }, { 3 * PG, 512, TRACE_L },
		{ 7 * PG + 1024, 512, TRACE_S },
	};
	for (size_t k = 0; k < 8; k++) {
		assert_int_equal(got[k].addr, want[k].addr);
		assert_int_equal(got[k].size, want[k].size);
		assert_int_equal(got[k].op, want[k].op);
	}
	unlink(path);
	/* Refused where it cannot be written. */
	o.trace_path = "/nonexistent-nvtest/x.nvt";
	assert_int_equal(tierstore_open(&ts, &o), -ENOENT);
	unlink(nvram);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ring_overflow_drops_and_keeps_order),
		cmocka_unit_test(ring_two_threads),
		cmocka_unit_test(log_roundtrip),
		cmocka_unit_test(log_overflow),
		cmocka_unit_test(log_unwritable),
		cmocka_unit_test(store_logs_policy_accesses),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
