/* test_common.c - CRC32C vectors, XOR, size parsing, log rate limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/clock.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "common/opts.h"
#include "common/outbuf.h"
#include "common/xor.h"

static void crc_known_vectors(void **state)
{
	unsigned char zeros[32] = { 0 };
	(void)state;
	/* RFC 3720 appendix B.4 test vectors. */
	assert_int_equal(crc32c(0, "123456789", 9), 0xE3069283);
	assert_int_equal(crc32c(0, zeros, 32), 0x8A9136AA);
	/* Continuation equals one pass. */
	assert_int_equal(crc32c(crc32c(0, "12345", 5), "6789", 4), 0xE3069283);
	/* Long buffers (three streams at once) equal the same bytes taken in
	 * pieces too short for that, at any length and alignment. */
	static unsigned char big[100000];
	for (unsigned i = 0; i < sizeof(big); i++)
		big[i] = (unsigned char)(i * 2654435761u >> 13);
	for (size_t len = 12280; len < sizeof(big); len = len * 3 / 2 + 1) {
		size_t at = len % 7;
		uint32_t one = crc32c(0, big + at, len), bits = 0;
		for (size_t off = 0; off < len; off += 1000)
			bits = crc32c(bits, big + at + off, len - off < 1000 ? len - off : 1000);
		assert_int_equal(one, bits);
	}
}

static uint32_t crc_bitwise(uint32_t crc, const unsigned char *p, size_t len)
{
	crc = ~crc;
	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = crc & 1 ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
	}
	return ~crc;
}

/* Every implementation this CPU has (table, one and three SSE4.2 streams,
 * AVX-512 folding) equals a bit-by-bit CRC, at every length up to 3,000
 * bytes (both sides of each path's threshold) and at long ones, at any
 * alignment and starting register; crc32c is one of them. */
static void crc_every_path_bitwise(void **state)
{
	static unsigned char buf[140000];
	unsigned seed = 7, ran = 0;
	(void)state;
	for (unsigned i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)rand_r(&seed);
	for (int v = 0; v < 4; v++) {
		uint32_t got;
		if (crc32c_variant(v, 0, buf, 1, &got) == -ENOTSUP)
			continue;
		ran++;
		for (size_t k = 0; k < 3200; k++) {
			size_t len = k < 3000 ? k : 3000 + (size_t)rand_r(&seed) % 136000;
			size_t at = (size_t)rand_r(&seed) % 64;
			uint32_t crc = (uint32_t)rand_r(&seed) * 2654435761u;
			assert_int_equal(crc32c_variant(v, crc, buf + at, len, &got), 0);
			assert_int_equal(got, crc_bitwise(crc, buf + at, len));
			if (k % 97 == 0)
				assert_int_equal(crc32c(crc, buf + at, len), got);
		}
	}
	assert_true(ran >= 1);
	uint32_t x;
	assert_int_equal(crc32c_variant(4, 0, buf, 1, &x), -EINVAL);
}

static void xor_roundtrip(void **state)
{
	unsigned char a[4099], b[4099], c[4099];
	(void)state;
	for (unsigned i = 0; i < sizeof(a); i++) {
		a[i] = (unsigned char)(i * 7);
		b[i] = (unsigned char)(i * 13 + 1);
	}
	memcpy(c, a, sizeof(a));
	xor_into(c, b, sizeof(c));
	for (unsigned i = 0; i < sizeof(a); i++)
		assert_int_equal(c[i], a[i] ^ b[i]);
	xor_into(c, b, sizeof(c));
	assert_memory_equal(c, a, sizeof(a));
}

static void size_parsing(void **state)
{
	uint64_t v;
	(void)state;
	assert_int_equal(opts_parse_size("4096", &v), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(opts_parse_size("64K", &v), 0);
	assert_int_equal(v, 65536);
	assert_int_equal(opts_parse_size("256MiB", &v), 0);
	assert_int_equal(v, 256ull << 20);
	assert_int_equal(opts_parse_size("2g", &v), 0);
	assert_int_equal(v, 2ull << 30);
	assert_int_equal(opts_parse_size("", &v), -EINVAL);
	assert_int_equal(opts_parse_size("12Q", &v), -EINVAL);
	assert_int_equal(opts_parse_size("-1", &v), -EINVAL);
	assert_int_equal(opts_parse_size("99999999999T", &v), -ERANGE);
}

/* One line per interval; the next says how many were held back. */
static void log_limit_counts_held_lines(void **state)
{
	struct log_limit l = { 0 };
	char note[80];
	const uint64_t s = 1000000000ull;
	(void)state;
	assert_true(log_limit_at(&l, 10, 5 * s, note, sizeof(note)));
	assert_string_equal(note, "");
	for (int i = 0; i < 7; i++)
		assert_false(log_limit_at(&l, 10, 5 * s + (uint64_t)i * s, note,
					  sizeof(note)));
	assert_false(log_limit_at(&l, 10, 15 * s - 1, note, sizeof(note)));
	assert_true(log_limit_at(&l, 10, 15 * s, note, sizeof(note)));
	assert_string_equal(note, " (and 8 more like it since the last such line)");
	/* The count starts again after each line. */
	assert_false(log_limit_at(&l, 10, 16 * s, note, sizeof(note)));
	assert_true(log_limit_at(&l, 10, 40 * s, note, sizeof(note)));
	assert_string_equal(note, " (and 1 more like it since the last such line)");
	assert_true(log_limit_at(&l, 10, 60 * s, note, sizeof(note)));
	assert_string_equal(note, "");
}

/* A deadline lies ns ahead on the monotonic clock, with tv_nsec carried
 * into tv_sec, and a cond made by clock_cond_init times out against it
 * (a REALTIME cond would wait until 1970 + uptime, i.e. not at all). */
static void deadline_and_monotonic_cond(void **state)
{
	(void)state;
	struct timespec now, d;

	clock_gettime(CLOCK_MONOTONIC, &now);
	clock_deadline(&d, 2500000000ull);
	assert_true(d.tv_nsec >= 0 && d.tv_nsec < 1000000000L);
	int64_t diff = ((int64_t)d.tv_sec - now.tv_sec) * 1000000000ll +
		       (d.tv_nsec - now.tv_nsec);
	assert_true(diff >= 2500000000ll && diff < 2600000000ll);

	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t c;
	clock_cond_init(&c);
	uint64_t t0 = clock_now_ns();
	clock_deadline(&d, 30000000ull);
	pthread_mutex_lock(&m);
	int rc;
	while ((rc = pthread_cond_timedwait(&c, &m, &d)) == 0)
		;
	pthread_mutex_unlock(&m);
	uint64_t waited = clock_now_ns() - t0;
	assert_int_equal(rc, ETIMEDOUT);
	assert_true(waited >= 30000000ull && waited < 2000000000ull);
	pthread_cond_destroy(&c);
}

/* Text that fits is all there; text that does not is cut at the buffer,
 * NUL-terminated, and the length says how much was asked for. */
static void outbuf_fits_and_overflows(void **state)
{
	(void)state;
	char buf[16];
	struct outbuf o = outbuf_of(buf, sizeof(buf));

	outbuf_printf(&o, "a: %d\n", 1);
	outbuf_printf(&o, "bb: %s\n", "x");
	assert_string_equal(buf, "a: 1\nbb: x\n");
	assert_int_equal(outbuf_done(&o), 11);
	outbuf_printf(&o, "long: %s\n", "0123456789");
	assert_true(o.len > sizeof(buf));
	assert_int_equal(outbuf_done(&o), 15);
	assert_int_equal(strlen(buf), 15);
	assert_memory_equal(buf, "a: 1\nbb: x\nlong", 15);
	outbuf_printf(&o, "more\n");
	assert_int_equal(strlen(buf), 15);
}

/* log_to_file: every line in the file, dated; with errors copied to
 * stderr, the error line (and only it) also there. */
static void log_file_and_error_copy(void **state)
{
	(void)state;
	char path[] = "/tmp/nvtest-log-XXXXXX", errpath[] = "/tmp/nvtest-err-XXXXXX";
	int fd = mkstemp(path), efd = mkstemp(errpath), saved = dup(2);
	char buf[4096];

	assert_true(fd >= 0 && efd >= 0 && saved >= 0);
	close(fd);
	assert_int_equal(dup2(efd, 2), 2);
	log_init("t", LOG_LVL_INFO);
	assert_int_equal(log_to_file(path), 0);
	log_copy_errors_to_stderr(true);
	log_info("an info line %d", 1);
	log_err("an error line %d", 2);
	log_copy_errors_to_stderr(false);
	log_err("a later error %d", 3);
	assert_int_equal(log_to_file("/nonexistent-dir/x.log"), -ENOENT);
	dup2(saved, 2);
	close(saved);

	FILE *f = fopen(path, "r");
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	assert_non_null(strstr(buf, "t["));
	assert_non_null(strstr(buf, "info: an info line 1\n"));
	assert_non_null(strstr(buf, "error: an error line 2\n"));
	assert_non_null(strstr(buf, "error: a later error 3\n"));
	assert_true(buf[4] == '-' && buf[7] == '-' && buf[10] == ' ');   /* YYYY-MM-DD */
	n = (size_t)pread(efd, buf, sizeof(buf) - 1, 0);
	buf[n] = 0;
	assert_non_null(strstr(buf, "error: an error line 2\n"));
	assert_null(strstr(buf, "info line"));
	assert_null(strstr(buf, "later error"));
	close(efd);
	unlink(path);
	unlink(errpath);
}

/* Counter lines: "key: value", the full 64-bit range, a table in order. */
static void outbuf_u64_lines(void **state)
{
	(void)state;
	char buf[64];
	struct outbuf o = outbuf_of(buf, sizeof(buf));
	const struct outbuf_kv kv[] = { { "a", 1 }, { "b", 22 } };

	outbuf_u64(&o, "hits", 0);
	outbuf_u64(&o, "max", UINT64_MAX);
	outbuf_u64s(&o, kv, 2);
	assert_string_equal(buf, "hits: 0\nmax: 18446744073709551615\na: 1\nb: 22\n");
	assert_int_equal(outbuf_done(&o), (ssize_t)strlen(buf));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(crc_known_vectors),
		cmocka_unit_test(crc_every_path_bitwise),
		cmocka_unit_test(xor_roundtrip),
		cmocka_unit_test(size_parsing),
		cmocka_unit_test(log_limit_counts_held_lines),
		cmocka_unit_test(deadline_and_monotonic_cond),
		cmocka_unit_test(outbuf_fits_and_overflows),
		cmocka_unit_test(log_file_and_error_copy),
		cmocka_unit_test(outbuf_u64_lines),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
