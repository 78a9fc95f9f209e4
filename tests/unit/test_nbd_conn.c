/* test_nbd_conn.c - the connection state machine driven by hand, over the
 * flat backend: bytes trickle in (1 byte at a time, odd chunks), sends
 * complete partially, requests larger than both buffers stream through;
 * then the same with zero-copy READs (a fake send_direct that sends short
 * and finds the socket full now and then). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <endian.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "nbd/backend_flat.h"
#include "nbd/conn.h"

#define SIZE (8u << 20)

static struct nbd_export xp = {
	.name = "t", .size = SIZE,
	.tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_TRIM,
	.min_block = 512, .pref_block = 4096, .max_block = 32u << 20,
};
static struct nbd_backend be;
static struct nbd_stats stats;
static struct nbd_conn_ctx ctx = { .exp = &xp, .be = &be, .stats = &stats };
static struct nbd_conn c;

static uint8_t *outb;     /* everything the server sent */
static size_t outn, outcap = 64u << 20, outpos;
static unsigned rnd = 12345;

static unsigned next_rand(void)
{
	rnd = rnd * 1103515245u + 12345u;
	return rnd >> 8;
}

static unsigned direct_calls;

/* send_direct: every third call finds the socket full, the others send a
 * random part of what they are given. */
static ssize_t fake_send(struct nbd_conn *cc, const struct iovec *iov,
			 unsigned n)
{
	size_t total = 0, sent = 0;
	assert_ptr_equal(cc, &c);
	assert_true(n >= 1 && n <= 1 + NBD_CONN_DIRECT_PAGES);
	if (++direct_calls % 3 == 0)
		return -EAGAIN;
	for (unsigned i = 0; i < n; i++)
		total += iov[i].iov_len;
	assert_true(total > 0);
	size_t want = 1 + next_rand() % total;
	for (unsigned i = 0; i < n && sent < want; i++) {
		size_t k = iov[i].iov_len < want - sent ? iov[i].iov_len
							 : want - sent;
		assert_true(outn + k <= outcap);
		memcpy(outb + outn, iov[i].iov_base, k);
		outn += k;
		sent += k;
	}
	return (ssize_t)sent;
}

/* Take what the server queued, in randomly sized partial sends. */
static void drain(void)
{
	const uint8_t *p;
	size_t len;
	for (;;) {
		while (nbd_conn_send_next(&c, &p, &len)) {
			size_t n = 1 + next_rand() % len;
			assert_true(outn + n <= outcap);
			memcpy(outb + outn, p, n);
			outn += n;
			nbd_conn_sent(&c, n);
			nbd_conn_process(&c);
		}
		if (!nbd_conn_want_writable(&c))
			break;
		nbd_conn_writable(&c);   /* the "socket" has room again */
		nbd_conn_process(&c);
	}
}

static void feed(const void *data, size_t len, size_t chunk)
{
	const uint8_t *d = data;
	while (len) {
		uint8_t *p;
		size_t room;
		nbd_conn_recv_space(&c, &p, &room);
		if (room == 0) {
			drain();
			nbd_conn_recv_space(&c, &p, &room);
			assert_true(room > 0);
		}
		size_t n = len < chunk ? len : chunk;
		if (n > room)
			n = room;
		memcpy(p, d, n);
		nbd_conn_received(&c, n);
		nbd_conn_process(&c);
		assert_false(nbd_conn_dead(&c));
		drain();
		d += n;
		len -= n;
	}
}

static const uint8_t *take(size_t n)
{
	assert_true(outpos + n <= outn);
	const uint8_t *p = outb + outpos;
	outpos += n;
	return p;
}

static uint32_t be32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return be32toh(v); }
static uint64_t be64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return be64toh(v); }

static void req(uint8_t *b, uint16_t type, uint16_t flags, uint64_t cookie,
		uint64_t off, uint32_t len)
{
	uint32_t m = htobe32(NBD_REQUEST_MAGIC), l = htobe32(len);
	uint16_t f = htobe16(flags), t = htobe16(type);
	uint64_t ck = htobe64(cookie), o = htobe64(off);
	memcpy(b, &m, 4); memcpy(b + 4, &f, 2); memcpy(b + 6, &t, 2);
	memcpy(b + 8, &ck, 8); memcpy(b + 16, &o, 8); memcpy(b + 24, &l, 4);
}

static void expect_reply(uint64_t cookie, uint32_t err)
{
	const uint8_t *r = take(16);
	assert_int_equal(be32(r), NBD_SIMPLE_REPLY_MAGIC);
	assert_int_equal(be32(r + 4), err);
	assert_int_equal(be64(r + 8), cookie);
}

static int setup(void **s)
{
	(void)s;
	outb = malloc(outcap);
	assert_non_null(outb);
	assert_int_equal(nbd_backend_flat_create(&be, SIZE), 0);
	assert_int_equal(nbd_conn_init(&c, &ctx), 0);
	return 0;
}

static int teardown(void **s)
{
	(void)s;
	nbd_conn_free(&c);
	be.ops->destroy(be.priv);
	free(outb);
	return 0;
}

static void handshake(size_t chunk)
{
	uint8_t h[64];
	outn = outpos = 0;
	nbd_conn_start(&c, 1);
	drain();
	assert_memory_equal(take(16), "NBDMAGICIHAVEOPT", 16);
	take(2);
	/* flags, then an over-cap unknown option, then GO "t" */
	memcpy(h, "\0\0\0\3IHAVEOPT\0\0\0\x63\0\0\x27\x10", 20);
	feed(h, 20, chunk);
	uint8_t *junk = calloc(1, 10000);
	feed(junk, 10000, chunk * 97);
	free(junk);
	const uint8_t *r = take(20);
	assert_int_equal(be32(r + 12), NBD_REP_ERR_TOO_BIG);
	take(be32(r + 16));
	memcpy(h, "IHAVEOPT\0\0\0\7\0\0\0\x09\0\0\0\1t\0\1\0\3", 25);
	feed(h, 25, chunk);
	assert_true(c.transmitting);
	r = take(20);
	assert_int_equal(be32(r + 12), NBD_REP_INFO);
	take(be32(r + 16));
	r = take(20);
	assert_int_equal(be32(r + 12), NBD_REP_INFO);   /* block size */
	assert_int_equal(be32(r + 20 + 2), 512);
	take(be32(r + 16));
	r = take(20);
	assert_int_equal(be32(r + 12), NBD_REP_ACK);
}

static void stream_big_requests(void **s)
{
	(void)s;
	handshake(1);
	size_t n = 3u << 20;  /* larger than both buffers */
	uint8_t *data = malloc(28 + n), *h = data;
	for (size_t i = 0; i < n; i++)
		data[28 + i] = (uint8_t)(next_rand());
	req(h, NBD_CMD_WRITE, NBD_CMD_FLAG_FUA, 7, 4096 + 512, (uint32_t)n);
	feed(data, 28 + n, 7001);
	expect_reply(7, 0);

	uint8_t r[28];
	req(r, NBD_CMD_READ, 0, 8, 4096 + 512, (uint32_t)n);
	feed(r, 28, 28);
	drain();
	expect_reply(8, 0);
	assert_memory_equal(take(n), data + 28, n);

	/* 20 pipelined reads in one go: replies in order, right data. */
	uint8_t many[20 * 28];
	for (unsigned i = 0; i < 20; i++)
		req(many + 28 * i, NBD_CMD_READ, 0, 100 + i, 4096 + 512 + 4096 * i, 4096);
	feed(many, sizeof(many), sizeof(many));
	for (unsigned i = 0; i < 20; i++) {
		expect_reply(100 + i, 0);
		assert_memory_equal(take(4096), data + 28 + 4096 * i, 4096);
	}
	/* Small, large, small pipelined: the large READ (zero-copy when
	 * offered) goes after the first small reply, before the second. */
	uint8_t mix[3 * 28];
	req(mix, NBD_CMD_READ, 0, 150, 4096, 4096);
	req(mix + 28, NBD_CMD_READ, 0, 151, 4096 + 512, 300 * 1024);
	req(mix + 56, NBD_CMD_READ, 0, 152, 8192, 512);
	feed(mix, sizeof(mix), sizeof(mix));
	drain();
	expect_reply(150, 0);
	take(4096);
	expect_reply(151, 0);
	assert_memory_equal(take(300 * 1024), data + 28, 300 * 1024);
	expect_reply(152, 0);
	assert_memory_equal(take(512), data + 28 + 8192 - 4096 - 512, 512);

	/* Errors keep the stream in sync: a refused WRITE's payload is
	 * skipped, the next request is served. */
	req(data, NBD_CMD_WRITE, 0, 200, SIZE, 8192);
	feed(data, 28 + 8192, 333);
	expect_reply(200, NBD_ENOSPC);
	req(r, NBD_CMD_TRIM, 0, 201, 4096, 8192);
	feed(r, 28, 5);
	expect_reply(201, 0);
	req(r, NBD_CMD_READ, 0, 202, 4096, 4096);
	feed(r, 28, 28);
	expect_reply(202, 0);
	const uint8_t *z = take(4096);
	for (unsigned i = 0; i < 4096; i++)
		assert_int_equal(z[i], 0);
	assert_int_equal(outpos, outn);
	free(data);

	/* DISC: closing, nothing more sent. */
	req(r, NBD_CMD_DISC, 0, 300, 0, 0);
	feed(r, 28, 28);
	assert_true(nbd_conn_closing(&c));
	assert_int_equal(outpos, outn);
	nbd_conn_stop(&c);
	assert_int_equal(atomic_load(&stats.conns_active), 0);
}

static void stream_big_requests_direct(void **s)
{
	ctx.send_direct = fake_send;
	direct_calls = 0;
	stream_big_requests(s);
	ctx.send_direct = NULL;
	assert_true(direct_calls > 10);
}

static void bad_magic_kills(void **s)
{
	(void)s;
	handshake(13);
	uint8_t r[28];
	req(r, NBD_CMD_READ, 0, 1, 0, 512);
	r[0] ^= 1;
	uint8_t *p;
	size_t room;
	nbd_conn_recv_space(&c, &p, &room);
	memcpy(p, r, 28);
	nbd_conn_received(&c, 28);
	nbd_conn_process(&c);
	assert_true(nbd_conn_dead(&c));
	nbd_conn_stop(&c);
}

/* The buckets' edges: sizes up to 4 KiB, then each power of two to
 * 256 KiB, then larger; passes of 1, 2-3, 4-7, ... 64 and more. */
static void shape_buckets(void **s)
{
	(void)s;
	static const struct { uint64_t len; unsigned bucket; } sizes[] = {
		{ 512, 0 }, { 4096, 0 }, { 4097, 1 }, { 131072, 5 },
		{ 262144, 6 }, { 262145, 7 }, { 32u << 20, 7 },
	}, depths[] = {
		{ 1, 0 }, { 2, 1 }, { 3, 1 }, { 4, 2 }, { 63, 5 }, { 64, 6 },
		{ 100000, 6 },
	};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		assert_int_equal(nbd_size_bucket(sizes[i].len), sizes[i].bucket);
	for (size_t i = 0; i < sizeof(depths) / sizeof(depths[0]); i++)
		assert_int_equal(nbd_depth_bucket((unsigned)depths[i].len),
				 depths[i].bucket);
}

/* Requests that arrive together count as one pass of that many; each is
 * counted in its command's size bucket. */
static void shape_counted(void **s)
{
	(void)s;
	handshake(4096);
	memset(&stats, 0, sizeof(stats));
	size_t n = 5 * 28 + 8192;
	uint8_t *b = calloc(1, n), *p = b;
	req(p, NBD_CMD_READ, 0, 1, 0, 4096); p += 28;
	req(p, NBD_CMD_READ, 0, 2, 4096, 512); p += 28;
	req(p, NBD_CMD_WRITE, 0, 3, 8192, 8192); p += 28 + 8192;
	req(p, NBD_CMD_READ, 0, 4, 0, 131072); p += 28;
	req(p, NBD_CMD_TRIM, 0, 5, 0, 1u << 20);
	feed(b, n, n);
	free(b);
	assert_int_equal(stats.read_sizes[0], 2);
	assert_int_equal(stats.read_sizes[5], 1);
	assert_int_equal(stats.write_sizes[1], 1);
	assert_int_equal(stats.trim_sizes[7], 1);
	assert_int_equal(stats.depth[2], 1);   /* one pass of 5 */
	assert_int_equal(stats.depth_max, 5);
	/* one more request alone: a pass of 1 */
	uint8_t r[28];
	req(r, NBD_CMD_FLUSH, 0, 6, 0, 0);
	feed(r, 28, 28);
	assert_int_equal(stats.depth[0], 1);
	assert_int_equal(stats.depth_max, 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(stream_big_requests),
		cmocka_unit_test(stream_big_requests_direct),
		cmocka_unit_test(bad_magic_kills),
		cmocka_unit_test(shape_buckets),
		cmocka_unit_test(shape_counted),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
