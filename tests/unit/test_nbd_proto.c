/* test_nbd_proto.c - the NBD protocol decisions as byte strings: greeting,
 * client flags, every option's reply, request checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <endian.h>
#include <errno.h>
#include <string.h>
#include <cmocka.h>

#include "nbd/proto.h"

static const struct nbd_export xp = {
	.name = "swap", .description = "d", .size = 1 << 20,
	.tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH,
	.min_block = 512, .pref_block = 4096, .max_block = 65536,
};

static uint32_t be32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return be32toh(v); }
static uint16_t be16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return be16toh(v); }
static uint64_t be64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return be64toh(v); }

static uint8_t out[NBD_OPT_REPLY_MAX];

/* Walk option replies: the type of reply i, or 0 past the end. */
static uint32_t rep_type(const uint8_t *o, size_t n, unsigned i, uint32_t *len,
			 const uint8_t **data)
{
	size_t at = 0;
	for (;;) {
		if (at + 20 > n)
			return 0;
		assert_int_equal(be64(o + at), NBD_REP_MAGIC);
		uint32_t l = be32(o + at + 16);
		if (i-- == 0) {
			if (len) *len = l;
			if (data) *data = o + at + 20;
			return be32(o + at + 12);
		}
		at += 20 + l;
	}
}

static void greeting_and_flags(void **s)
{
	uint8_t g[NBD_GREETING_LEN], f[4] = { 0, 0, 0, 3 };
	bool nz = false;
	(void)s;
	nbd_greeting_build(g);
	assert_memory_equal(g, "NBDMAGICIHAVEOPT", 16);
	assert_int_equal(be16(g + 16), NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
	assert_int_equal(nbd_client_flags_parse(f, &nz), 0);
	assert_true(nz);
	f[3] = 1;
	assert_int_equal(nbd_client_flags_parse(f, &nz), 0);
	assert_false(nz);
	f[3] = 4;   /* unknown bit: drop */
	assert_int_equal(nbd_client_flags_parse(f, &nz), -EPROTO);
	f[3] = 0; f[0] = 0x80;
	assert_int_equal(nbd_client_flags_parse(f, &nz), -EPROTO);
}

static void option_header(void **s)
{
	uint8_t h[16];
	uint32_t opt, len;
	(void)s;
	memcpy(h, "IHAVEOPT\0\0\0\7\0\0\1\0", 16);
	assert_int_equal(nbd_opt_hdr_parse(h, &opt, &len), 0);
	assert_int_equal(opt, 7);
	assert_int_equal(len, 256);
	h[0] = 'X';
	assert_int_equal(nbd_opt_hdr_parse(h, &opt, &len), -EPROTO);
}

static void opt_list_abort_unknown(void **s)
{
	size_t n;
	uint32_t l;
	const uint8_t *d;
	(void)s;
	assert_int_equal(nbd_opt_handle(&xp, true, NBD_OPT_LIST, (const uint8_t *)"", 0,
					out, sizeof(out), &n), NBD_OPT_CONTINUE);
	assert_int_equal(rep_type(out, n, 0, &l, &d), NBD_REP_SERVER);
	assert_int_equal(l, 8);
	assert_int_equal(be32(d), 4);
	assert_memory_equal(d + 4, "swap", 4);
	assert_int_equal(rep_type(out, n, 1, NULL, NULL), NBD_REP_ACK);
	assert_int_equal(rep_type(out, n, 2, NULL, NULL), 0);

	assert_int_equal(nbd_opt_handle(&xp, true, NBD_OPT_LIST, (const uint8_t *)"x", 1,
					out, sizeof(out), &n), NBD_OPT_CONTINUE);
	assert_int_equal(rep_type(out, n, 0, NULL, NULL), NBD_REP_ERR_INVALID);

	assert_int_equal(nbd_opt_handle(&xp, true, NBD_OPT_ABORT, (const uint8_t *)"", 0,
					out, sizeof(out), &n), NBD_OPT_CLOSE);
	assert_int_equal(rep_type(out, n, 0, NULL, NULL), NBD_REP_ACK);

	for (uint32_t o = 0; o < 64; o++) {
		if (o == NBD_OPT_EXPORT_NAME || o == NBD_OPT_ABORT ||
		    o == NBD_OPT_LIST || o == NBD_OPT_INFO || o == NBD_OPT_GO)
			continue;
		assert_int_equal(nbd_opt_handle(&xp, true, o, (const uint8_t *)"ab", 2,
						out, sizeof(out), &n), NBD_OPT_CONTINUE);
		assert_int_equal(rep_type(out, n, 0, NULL, NULL), NBD_REP_ERR_UNSUP);
	}
	/* Over the cap (data discarded): TOO_BIG, continue. */
	assert_int_equal(nbd_opt_handle(&xp, true, NBD_OPT_GO, NULL, 99999,
					out, sizeof(out), &n), NBD_OPT_CONTINUE);
	assert_int_equal(rep_type(out, n, 0, NULL, NULL), NBD_REP_ERR_TOO_BIG);
	assert_int_equal(nbd_opt_handle(&xp, true, NBD_OPT_EXPORT_NAME, NULL, 99999,
					out, sizeof(out), &n), NBD_OPT_CLOSE);
	assert_int_equal(n, 0);
}

static size_t go_data(uint8_t *b, const char *name, unsigned nreq,
		      const uint16_t *req)
{
	uint32_t l = htobe32((uint32_t)strlen(name));
	uint16_t k = htobe16((uint16_t)nreq);
	memcpy(b, &l, 4);
	memcpy(b + 4, name, strlen(name));
	memcpy(b + 4 + strlen(name), &k, 2);
	for (unsigned i = 0; i < nreq; i++) {
		uint16_t r = htobe16(req[i]);
		memcpy(b + 6 + strlen(name) + 2 * i, &r, 2);
	}
	return 6 + strlen(name) + 2 * nreq;
}

static void opt_go_info(void **s)
{
	uint8_t d[64];
	size_t n, dl;
	uint32_t l;
	const uint8_t *p;
	uint16_t reqs[] = { NBD_INFO_BLOCK_SIZE, NBD_INFO_NAME, 77 };
	(void)s;

	dl = go_data(d, "swap", 3, reqs);
	assert_int_equal(nbd_opt_handle(&xp, true, NBD_OPT_GO, d, (uint32_t)dl,
					out, sizeof(out), &n), NBD_OPT_TRANSMIT);
	assert_int_equal(rep_type(out, n, 0, &l, &p), NBD_REP_INFO);
	assert_int_equal(l, 12);
	assert_int_equal(be16(p), NBD_INFO_EXPORT);
	assert_int_equal(be64(p + 2), 1 << 20);
	assert_int_equal(be16(p + 10), xp.tflags);
	assert_int_equal(rep_type(out, n, 1, &l, &p), NBD_REP_INFO);
	assert_int_equal(be16(p), NBD_INFO_NAME);
	assert_memory_equal(p + 2, "swap", 4);
	assert_int_equal(rep_type(out, n, 2, &l, &p), NBD_REP_INFO);
	assert_int_equal(be16(p), NBD_INFO_BLOCK_SIZE);
	assert_int_equal(be32(p + 2), 512);
	assert_int_equal(be32(p + 6), 4096);
	assert_int_equal(be32(p + 10), 65536);
	assert_int_equal(rep_type(out, n, 3, NULL, NULL), NBD_REP_ACK);

	/* INFO: same answers, negotiation continues; "" is the default. */
	dl = go_data(d, "", 0, NULL);
	assert_int_equal(nbd_opt_handle(&xp, true, NBD_OPT_INFO, d, (uint32_t)dl,
					out, sizeof(out), &n), NBD_OPT_CONTINUE);
	assert_int_equal(rep_type(out, n, 0, NULL, NULL), NBD_REP_INFO);
	assert_int_equal(rep_type(out, n, 1, NULL, NULL), NBD_REP_ACK);

	dl = go_data(d, "other", 0, NULL);
	assert_int_equal(nbd_opt_handle(&xp, true, NBD_OPT_GO, d, (uint32_t)dl,
					out, sizeof(out), &n), NBD_OPT_CONTINUE);
	assert_int_equal(rep_type(out, n, 0, NULL, NULL), NBD_REP_ERR_UNKNOWN);

	/* Lengths that lie. */
	for (uint32_t cut = 0; cut < dl; cut++) {
		assert_int_equal(nbd_opt_handle(&xp, true, NBD_OPT_GO, d, cut,
						out, sizeof(out), &n), NBD_OPT_CONTINUE);
		assert_int_equal(rep_type(out, n, 0, NULL, NULL), NBD_REP_ERR_INVALID);
	}
	d[0] = 0xff; /* name length 4 GiB */
	assert_int_equal(nbd_opt_handle(&xp, true, NBD_OPT_GO, d, (uint32_t)dl,
					out, sizeof(out), &n), NBD_OPT_CONTINUE);
	assert_int_equal(rep_type(out, n, 0, NULL, NULL), NBD_REP_ERR_INVALID);
}

static void opt_export_name(void **s)
{
	size_t n;
	(void)s;
	assert_int_equal(nbd_opt_handle(&xp, true, NBD_OPT_EXPORT_NAME,
					(const uint8_t *)"swap", 4, out, sizeof(out), &n),
			 NBD_OPT_TRANSMIT);
	assert_int_equal(n, 10);
	assert_int_equal(be64(out), 1 << 20);
	assert_int_equal(nbd_opt_handle(&xp, false, NBD_OPT_EXPORT_NAME,
					(const uint8_t *)"", 0, out, sizeof(out), &n),
			 NBD_OPT_TRANSMIT);
	assert_int_equal(n, 134);
	assert_int_equal(nbd_opt_handle(&xp, true, NBD_OPT_EXPORT_NAME,
					(const uint8_t *)"swa", 3, out, sizeof(out), &n),
			 NBD_OPT_CLOSE);
	assert_int_equal(n, 0);
}

static struct nbd_req mk(uint16_t type, uint16_t flags, uint64_t off, uint32_t len)
{
	struct nbd_req r = { .type = type, .flags = flags, .offset = off, .len = len };
	return r;
}

static void request_checks(void **s)
{
	struct nbd_req r;
	uint8_t b[NBD_REQ_LEN] = { 0x25, 0x60, 0x95, 0x13, 0, 1, 0, 1 };
	(void)s;
	b[27] = 0x10; b[26] = 0; /* len 16 */
	assert_int_equal(nbd_req_parse(b, &r), 0);
	assert_int_equal(r.flags, 1);
	assert_int_equal(r.type, NBD_CMD_WRITE);
	assert_int_equal(r.len, 16);
	b[0] = 0;
	assert_int_equal(nbd_req_parse(b, &r), -EPROTO);

	r = mk(NBD_CMD_READ, 0, 0, 4096);
	assert_int_equal(nbd_req_check(&r, &xp), 0);
	r = mk(NBD_CMD_READ, 0, 512, 512);
	assert_int_equal(nbd_req_check(&r, &xp), 0);
	r = mk(NBD_CMD_READ, 0, 100, 512);
	assert_int_equal(nbd_req_check(&r, &xp), NBD_EINVAL);
	r = mk(NBD_CMD_WRITE, 0, 0, 100);
	assert_int_equal(nbd_req_check(&r, &xp), NBD_EINVAL);
	r = mk(NBD_CMD_READ, 0, 0, 65536 + 512);      /* over max */
	assert_int_equal(nbd_req_check(&r, &xp), NBD_EINVAL);
	r = mk(NBD_CMD_TRIM, 0, 0, 1 << 20);          /* no max for TRIM */
	assert_int_equal(nbd_req_check(&r, &xp), 0);
	r = mk(NBD_CMD_READ, 0, (1 << 20) - 512, 1024);
	assert_int_equal(nbd_req_check(&r, &xp), NBD_EINVAL);
	r = mk(NBD_CMD_WRITE, 0, (1 << 20) - 512, 1024);
	assert_int_equal(nbd_req_check(&r, &xp), NBD_ENOSPC);
	r = mk(NBD_CMD_WRITE_ZEROES, 0, 1 << 20, 512);
	assert_int_equal(nbd_req_check(&r, &xp), NBD_ENOSPC);
	r = mk(NBD_CMD_WRITE, 0, UINT64_MAX - 511, 1024); /* wraps */
	assert_int_equal(nbd_req_check(&r, &xp), NBD_ENOSPC);
	r = mk(NBD_CMD_TRIM, 0, UINT64_MAX - 511, 1024);
	assert_int_equal(nbd_req_check(&r, &xp), NBD_EINVAL);
	r = mk(NBD_CMD_READ, NBD_CMD_FLAG_FUA, 0, 512);
	assert_int_equal(nbd_req_check(&r, &xp), 0);
	r = mk(NBD_CMD_READ, 0x40, 0, 512);
	assert_int_equal(nbd_req_check(&r, &xp), NBD_EINVAL);
	r = mk(NBD_CMD_WRITE, NBD_CMD_FLAG_NO_HOLE, 0, 512);
	assert_int_equal(nbd_req_check(&r, &xp), NBD_EINVAL);
	r = mk(NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_NO_HOLE | NBD_CMD_FLAG_FUA, 0, 512);
	assert_int_equal(nbd_req_check(&r, &xp), 0);
	r = mk(NBD_CMD_FLUSH, 0, 0, 0);
	assert_int_equal(nbd_req_check(&r, &xp), 0);
	r = mk(NBD_CMD_FLUSH, 2, 0, 0);
	assert_int_equal(nbd_req_check(&r, &xp), NBD_EINVAL);
	for (uint16_t t = 5; t < 300; t++) {
		if (t == NBD_CMD_WRITE_ZEROES)
			continue;
		r = mk(t, 0, 0, 512);
		assert_int_equal(nbd_req_check(&r, &xp), NBD_EINVAL);
	}
	uint8_t rep[NBD_REPLY_LEN];
	nbd_reply_build(rep, NBD_EINVAL, 0x1122334455667788ULL);
	assert_int_equal(be32(rep), NBD_SIMPLE_REPLY_MAGIC);
	assert_int_equal(be32(rep + 4), 22);
	assert_int_equal(be64(rep + 8), 0x1122334455667788ULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(greeting_and_flags),
		cmocka_unit_test(option_header),
		cmocka_unit_test(opt_list_abort_unknown),
		cmocka_unit_test(opt_go_info),
		cmocka_unit_test(opt_export_name),
		cmocka_unit_test(request_checks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
