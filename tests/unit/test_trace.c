/* test_trace.c - trace formats (lackey parsing, nvt round trip, every bad
 * input the readers refuse) and the L2 filter nvsim puts in front of the
 * policies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>
#include <fcntl.h>
#include <cmocka.h>

#include "tools/nvsim_cache.h"
#include "pmem/trace.h"

static ssize_t read_all(struct trace_reader *r, struct trace_rec *recs,
			size_t n, uint64_t *instr)
{
	size_t got = 0;
	for (;;) {
		ssize_t k = trace_read(r, recs + got, n - got, instr);
		if (k <= 0)
			return k < 0 ? k : (ssize_t)got;
		got += (size_t)k;
	}
}

static void lackey_parses(void **state)
{
	const char *txt =
		"--123-- Reading syms from /bin/ls\n"   /* valgrind -v */
		"==123== Lackey, an example Valgrind tool\n"
		"I  04001234,3\n"
		" L 1ffefff8,8\n"
		"I  04001237,5\n"
		" S 0x7ff000010,4\n"
		" M 00601040,16\r\n"
		"==123== \n"
		" L ffffffffffffffc0,64";   /* no final newline */
	struct trace_reader *r;
	struct trace_rec recs[8];
	uint64_t instr = 0;
	(void)state;
	assert_int_equal(trace_open_mem(&r, txt, strlen(txt), TRACE_AUTO), 0);
	assert_int_equal(trace_format_of(r), TRACE_LACKEY);
	assert_int_equal(read_all(r, recs, 8, &instr), 4);
	assert_int_equal(instr, 2);
	assert_int_equal(recs[0].op, TRACE_L);
	assert_int_equal(recs[0].addr, 0x1ffefff8);
	assert_int_equal(recs[0].size, 8);
	assert_int_equal(recs[1].op, TRACE_S);
	assert_int_equal(recs[1].addr, 0x7ff000010);
	assert_int_equal(recs[2].op, TRACE_M);
	assert_int_equal(recs[2].size, 16);
	assert_int_equal(recs[3].addr, 0xffffffffffffffc0ull);
	trace_close(r);
}

static void lackey_rejects(void **state)
{
	const char *bad[] = {
		"hello world\n", " L 1234\n", " L ,8\n", " X 1234,8\n",
		" L 12g4,8\n", " L 1234,0\n", " L 1234,99999\n",
		" L 11112222333344445,8\n", " L 1234,8x\n", "L\n",
	};
	(void)state;
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		struct trace_reader *r;
		struct trace_rec recs[4];
		uint64_t instr = 0;
		assert_int_equal(trace_open_mem(&r, bad[k], strlen(bad[k]),
						TRACE_LACKEY), 0);
		assert_int_equal(trace_read(r, recs, 4, &instr), -EINVAL);
		trace_close(r);
	}
}

/* Thousands of lines in every spelling lackey's grammar allows, so that
 * most are read by the one-pass parser for valgrind's own spelling and the
 * rest, in the same stream, by the general one: both must give the same
 * records; then a bad line deep in the stream stops it right there. */
static void lackey_long_mixed(void **state)
{
	enum { N = 5000 };
	size_t cap = (size_t)N * 48 + 64, len = 0;
	char *txt = malloc(cap);
	struct trace_rec *want = calloc(N, sizeof(*want));
	struct trace_rec *got = calloc(N + 1, sizeof(*got));
	uint64_t instr_want = 0, instr = 0, x = 88172645463325252ull;
	size_t nwant = 0;
	(void)state;
	assert_non_null(txt);
	assert_non_null(want);
	assert_non_null(got);
	for (int i = 0; i < N; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		uint64_t addr = x >> (x & 31);
		unsigned size = 1 + (unsigned)(x >> 40) % 64, form = (x >> 50) % 8;
		char op = "ILSM"[(x >> 56) & 3];
		const char *lead = op == 'I' ? "I  " : op == 'L' ? " L " :
				   op == 'S' ? " S " : " M ";
		const char *fmt = "%s%llx,%u\n";
		if (form == 1)
			fmt = "%s0x%llx,%u\n";
		else if (form == 2)
			fmt = "%s%016llX,%u\r\n";
		else if (form == 3)
			fmt = "%s   %llx,%u\n";
		else if (form == 4)
			fmt = "==1== %s%llx,%u\n";   /* a valgrind line: skipped */
		len += (size_t)snprintf(txt + len, cap - len, fmt, lead,
					(unsigned long long)addr, size);
		if (form == 4)
			continue;
		if (op == 'I') {
			instr_want++;
			continue;
		}
		want[nwant].op = op == 'L' ? TRACE_L : op == 'S' ? TRACE_S : TRACE_M;
		want[nwant].addr = addr;
		want[nwant].size = size;
		nwant++;
	}
	struct trace_reader *r;
	assert_int_equal(trace_open_mem(&r, txt, len, TRACE_LACKEY), 0);
	assert_int_equal(read_all(r, got, N + 1, &instr), (ssize_t)nwant);
	assert_int_equal(instr, instr_want);
	for (size_t k = 0; k < nwant; k++) {
		assert_int_equal(got[k].op, want[k].op);
		assert_int_equal(got[k].addr, want[k].addr);
		assert_int_equal(got[k].size, want[k].size);
	}
	trace_close(r);

	/* A size one past the limit in the middle: the records before it
	 * come out, then the error. */
	size_t cut = len / 2;
	while (txt[cut - 1] != '\n')
		cut--;
	char bad[64];
	int bl = snprintf(bad, sizeof(bad), " L 1000,%u\n", TRACE_MAX_SIZE + 1);
	memmove(txt + cut + (size_t)bl, txt + cut, len - cut);
	memcpy(txt + cut, bad, (size_t)bl);
	len += (size_t)bl;
	assert_int_equal(trace_open_mem(&r, txt, len, TRACE_LACKEY), 0);
	size_t before = 0;
	ssize_t k;
	while ((k = trace_read(r, got, 1, &instr)) == 1)
		before++;
	assert_int_equal(k, -EINVAL);
	assert_true(before > 0 && before < nwant);
	assert_int_equal(got[0].addr, want[before - 1].addr);
	trace_close(r);
	free(txt);
	free(want);
	free(got);
}

static void nvt_roundtrip(void **state)
{
	char path[] = "/tmp/test_trace.XXXXXX";
	struct trace_rec in[] = {
		{ 0x1000, 8, TRACE_L }, { 0x1008, 8, TRACE_S },
		{ 0x0ff8, 4, TRACE_M }, { 0xffffffffffffff00ull, 64, TRACE_L },
		{ 0x10, 3, TRACE_S },            /* odd size: escape */
		{ 0x8000000000000000ull, 4096, TRACE_L },
		{ 0, 1, TRACE_L },
	};
	size_t n = sizeof(in) / sizeof(in[0]);
	struct trace_writer *w;
	(void)state;
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	for (int gz = 0; gz < 2; gz++) {
		char p[64];
		snprintf(p, sizeof(p), "%s%s", path, gz ? ".gz" : "");
		assert_int_equal(trace_writer_open(&w, p, gz ? NVT_F_PAGES : 0), 0);
		assert_int_equal(trace_write_instr(w, 5), 0);
		for (size_t k = 0; k < n; k++) {
			assert_int_equal(trace_write(w, &in[k]), 0);
			if (k == 2)
				trace_write_instr(w, 7);
		}
		assert_int_equal(trace_writer_close(w), 0);
		struct trace_reader *r;
		struct trace_rec out[16];
		uint64_t instr = 0;
		assert_int_equal(trace_open(&r, p, TRACE_AUTO), 0);
		assert_int_equal(trace_format_of(r), TRACE_NVT);
		assert_int_equal(trace_flags(r), gz ? NVT_F_PAGES : 0);
		assert_int_equal(read_all(r, out, 16, &instr), (ssize_t)n);
		assert_int_equal(instr, 12);
		for (size_t k = 0; k < n; k++) {
			assert_int_equal(out[k].addr, in[k].addr);
			assert_int_equal(out[k].size, in[k].size);
			assert_int_equal(out[k].op, in[k].op);
		}
		trace_close(r);
		unlink(p);
	}
	struct trace_rec bad = { 0, 0, TRACE_L };
	struct trace_rec freed = { 0x5000, 0, TRACE_FREE };
	assert_int_equal(trace_writer_open(&w, path, 0), 0);
	assert_int_equal(trace_write(w, &bad), -EINVAL);
	/* a free record only where the header says readers must expect it */
	assert_int_equal(trace_write(w, &freed), -EINVAL);
	trace_writer_close(w);
	/* with NVT_F_FREES it comes back as written, between accesses */
	struct trace_rec fin[] = { { 0x5008, 8, TRACE_S }, freed, { 0x5010, 8, TRACE_L } };
	assert_int_equal(trace_writer_open(&w, path, NVT_F_PAGES | NVT_F_FREES), 0);
	for (size_t k = 0; k < 3; k++)
		assert_int_equal(trace_write(w, &fin[k]), 0);
	assert_int_equal(trace_writer_close(w), 0);
	{
		struct trace_reader *rf;
		struct trace_rec out[4];
		uint64_t instr = 0;
		assert_int_equal(trace_open(&rf, path, TRACE_AUTO), 0);
		assert_int_equal(trace_flags(rf), NVT_F_PAGES | NVT_F_FREES);
		assert_int_equal(read_all(rf, out, 4, &instr), 3);
		for (size_t k = 0; k < 3; k++) {
			assert_int_equal(out[k].addr, fin[k].addr);
			assert_int_equal(out[k].size, fin[k].size);
			assert_int_equal(out[k].op, fin[k].op);
		}
		trace_close(rf);
	}
	unlink(path);
	struct trace_reader *r;
	assert_int_equal(trace_open(&r, path, TRACE_AUTO), -ENOENT);
}

/* Read a whole nvt image: the records, or the error it ends with. */
static ssize_t read_image(const uint8_t *img, size_t len)
{
	struct trace_reader *r;
	struct trace_rec recs[64];
	uint64_t instr = 0;
	ssize_t n = 0, k;
	if (trace_open_mem(&r, img, len, TRACE_AUTO) < 0)
		return -EINVAL;
	while ((k = trace_read(r, recs, 64, &instr)) > 0)
		n += k;
	trace_close(r);
	return k < 0 ? k : n;
}

/* A written file ends with an end record: cut anywhere, changed in any
 * byte, or with bytes after it, it is an error, never a shorter or
 * different trace. (A plain file cut at a record boundary read as a whole
 * one: a log whose nvswapd was killed, a convert interrupted.) */
static void nvt_end_record(void **state)
{
	char path[] = "/tmp/test_trace.XXXXXX";
	struct trace_writer *w;
	(void)state;
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(trace_writer_open(&w, path, NVT_F_PAGES), 0);
	const size_t n = 3000;
	for (size_t k = 0; k < n; k++) {
		struct trace_rec rec = { 0x10000 + (k * 7919 % 977) * 64, 64,
					 k % 3 ? TRACE_L : TRACE_S };
		assert_int_equal(trace_write(w, &rec), 0);
		if (k % 100 == 0)
			trace_write_instr(w, k + 1);
	}
	assert_int_equal(trace_writer_close(w), 0);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	static uint8_t img[1 << 16];
	ssize_t len = read(fd, img, sizeof(img) - 1);
	close(fd);
	unlink(path);
	assert_true(len > 16 && len < (ssize_t)sizeof(img) - 1);
	assert_true(img[8] & NVT_F_END);
	assert_int_equal(read_image(img, (size_t)len), (ssize_t)n);
	for (ssize_t cut = 16; cut < len; cut++)
		assert_true(read_image(img, (size_t)cut) < 0);
	for (ssize_t at = 16; at < len; at++) {
		img[at] ^= 0x55;
		assert_true(read_image(img, (size_t)len) < 0);
		img[at] ^= 0x55;
	}
	img[len] = 0;
	assert_true(read_image(img, (size_t)len + 1) < 0);
	/* A file of an older writer (no NVT_F_END) still reads. */
	static const uint8_t old[] = "NVTRACE1\x01\0\0\0\0\0\0\0\x1c\x08\x10";
	assert_int_equal(read_image(old, 19), 1);
}

static void nvt_rejects(void **state)
{
	struct trace_reader *r;
	struct trace_rec recs[4];
	uint64_t instr;
	(void)state;
	/* Not nvt when nvt is asked for. */
	assert_int_equal(trace_open_mem(&r, " L 10,8\n", 8, TRACE_NVT), -EINVAL);
	/* Unknown flags. */
	unsigned char h[32] = "NVTRACE1";
	h[8] = 0x80;
	assert_int_equal(trace_open_mem(&r, h, 16, TRACE_NVT), -EINVAL);
	h[8] = 0;
	/* Truncated varint, overlong varint, bad escape size, escape with d. */
	const unsigned char *cases[] = {
		(const unsigned char *)"\x80",
		(const unsigned char *)"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f",
		(const unsigned char *)"\x1c\x00\x10",      /* size 0 */
		(const unsigned char *)"\x1c\xa1\x40\x10",  /* size 8225 */
		(const unsigned char *)"\x3c\x08\x10",      /* escape, d != 0 */
		(const unsigned char *)"\x1c\x08",          /* missing address */
	};
	const size_t lens[] = { 1, 10, 3, 4, 3, 2 };
	/* A free record (kind M, escape, size 0) in a file whose header does
	 * not announce them is an error; announced, it reads as TRACE_FREE. */
	memcpy(h + 16, "\x1e\x00\x10", 3);
	assert_int_equal(trace_open_mem(&r, h, 19, TRACE_AUTO), 0);
	assert_int_equal(trace_read(r, recs, 4, &instr), -EINVAL);
	trace_close(r);
	h[8] = NVT_F_FREES;     /* frees in a CPU-level trace: refused */
	assert_int_equal(trace_open_mem(&r, h, 19, TRACE_AUTO), -EINVAL);
	h[8] = NVT_F_PAGES | NVT_F_FREES;
	assert_int_equal(trace_open_mem(&r, h, 19, TRACE_AUTO), 0);
	assert_int_equal(trace_read(r, recs, 4, &instr), 1);
	assert_int_equal(recs[0].op, TRACE_FREE);
	assert_int_equal(recs[0].addr, 0x10);
	trace_close(r);
	h[8] = 0;
	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
		memcpy(h + 16, cases[k], lens[k]);
		instr = 0;
		assert_int_equal(trace_open_mem(&r, h, 16 + lens[k], TRACE_AUTO), 0);
		assert_int_equal(trace_read(r, recs, 4, &instr), -EINVAL);
		trace_close(r);
	}
}

static void l2_filters(void **state)
{
	struct l2 *c;
	struct mem_event ev[300];
	uint64_t h, m, wb;
	(void)state;
	assert_int_equal(l2_create(&c, 1000, 64, 1, 4096), -EINVAL);
	assert_int_equal(l2_create(&c, 1 << 20, 64, 1, 4096), 0);
	struct trace_rec ld = { 0x10000, 8, TRACE_L };
	/* First touch misses (one read of page 0x10), then hits. */
	assert_int_equal(l2_access(c, &ld, ev), 1);
	assert_int_equal(ev[0].page, 0x10);
	assert_int_equal(ev[0].write, 0);
	assert_int_equal(l2_access(c, &ld, ev), 0);
	/* A store hit dirties the line; a conflicting line (1 MiB apart,
	 * direct mapped) evicts it: write-back then fill. */
	struct trace_rec st = { 0x10008, 8, TRACE_S };
	assert_int_equal(l2_access(c, &st, ev), 0);
	struct trace_rec cf = { 0x10000 + (1 << 20), 8, TRACE_L };
	assert_int_equal(l2_access(c, &cf, ev), 2);
	assert_int_equal(ev[0].write, 1);
	assert_int_equal(ev[0].page, 0x10);
	assert_int_equal(ev[1].write, 0);
	assert_int_equal(ev[1].page, (0x10000 + (1 << 20)) >> 12);
	/* An access across a line boundary touches two lines. */
	struct trace_rec x = { 0x2003c, 8, TRACE_L };
	assert_int_equal(l2_access(c, &x, ev), 2);
	l2_stats(c, &h, &m, &wb);
	assert_int_equal(h, 2);
	assert_int_equal(m, 4);
	assert_int_equal(wb, 1);
	/* Memory-level records bypass the cache, split by page. */
	struct trace_rec pg = { 0x1800, 8192, TRACE_S };
	assert_int_equal(l2_bypass(c, &pg, ev), 3);
	assert_int_equal(ev[0].page, 1);
	assert_int_equal(ev[0].lines, 32);
	assert_int_equal(ev[1].lines, 64);
	assert_int_equal(ev[2].page, 3);
	assert_int_equal(ev[2].lines, 32);
	assert_int_equal(ev[2].write, 1);
	struct trace_rec top = { UINT64_MAX - 10, 64, TRACE_L };
	assert_true(l2_bypass(c, &top, ev) >= 1);
	assert_true(l2_access(c, &top, ev) >= 1);
	l2_destroy(c);
	/* 2-way: two conflicting lines both stay. */
	assert_int_equal(l2_create(&c, 1 << 20, 64, 2, 4096), 0);
	struct trace_rec a = { 0, 8, TRACE_L }, b = { 1 << 19, 8, TRACE_L };
	l2_access(c, &a, ev);
	l2_access(c, &b, ev);
	assert_int_equal(l2_access(c, &a, ev), 0);
	assert_int_equal(l2_access(c, &b, ev), 0);
	l2_destroy(c);
	/* A free (4 KiB at addr): a freed event for each page of ours wholly
	 * inside it; none through the cache; a larger page of ours lives on. */
	struct trace_rec fr = { 0x5000, 0, TRACE_FREE };
	assert_int_equal(l2_create(&c, 1 << 16, 64, 1, 4096), 0);
	assert_int_equal(l2_bypass(c, &fr, ev), 1);
	assert_int_equal(ev[0].page, 5);
	assert_int_equal(ev[0].freed, 1);
	assert_int_equal(l2_access(c, &fr, ev), 0);
	l2_destroy(c);
	assert_int_equal(l2_create(&c, 1 << 16, 64, 1, 1024), 0);
	assert_int_equal(l2_bypass(c, &fr, ev), 4);
	for (unsigned k = 0; k < 4; k++) {
		assert_int_equal(ev[k].page, 0x14 + k);
		assert_int_equal(ev[k].freed, 1);
	}
	l2_destroy(c);
	assert_int_equal(l2_create(&c, 1 << 16, 64, 1, 8192), 0);
	assert_int_equal(l2_bypass(c, &fr, ev), 0);
	struct trace_rec frtop = { UINT64_MAX - 4095, 0, TRACE_FREE };
	l2_destroy(c);
	assert_int_equal(l2_create(&c, 1 << 16, 64, 1, 4096), 0);
	assert_int_equal(l2_bypass(c, &frtop, ev), 1);   /* no wrap */
	l2_destroy(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(lackey_parses),
		cmocka_unit_test(lackey_rejects),
		cmocka_unit_test(lackey_long_mixed),
		cmocka_unit_test(nvt_roundtrip),
		cmocka_unit_test(nvt_rejects),
		cmocka_unit_test(nvt_end_record),
		cmocka_unit_test(l2_filters),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
