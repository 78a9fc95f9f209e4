/* proto.c - NBD protocol decisions as pure functions; see proto.h.
 * Every length read from the wire is checked against the bytes actually
 * present before use. */
#include "nbd/proto.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

static void put16(uint8_t *p, uint16_t v) { v = htobe16(v); memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { v = htobe32(v); memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { v = htobe64(v); memcpy(p, &v, 8); }
static uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return be16toh(v); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return be32toh(v); }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return be64toh(v); }

void nbd_greeting_build(uint8_t out[NBD_GREETING_LEN])
{
	put64(out, NBD_MAGIC);
	put64(out + 8, NBD_IHAVEOPT);
	put16(out + 16, NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
}

int nbd_client_flags_parse(const uint8_t in[NBD_CLIENT_FLAGS_LEN],
			   bool *no_zeroes)
{
	uint32_t f = get32(in);

	if (f & ~(uint32_t)(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES))
		return -EPROTO;
	*no_zeroes = f & NBD_FLAG_C_NO_ZEROES;
	return 0;
}

int nbd_opt_hdr_parse(const uint8_t in[NBD_OPT_HDR_LEN], uint32_t *opt,
		      uint32_t *len)
{
	if (get64(in) != NBD_IHAVEOPT)
		return -EPROTO;
	*opt = get32(in + 8);
	*len = get32(in + 12);
	return 0;
}

/* Output cursor for option replies; overflow cannot happen with the caps in
 * proto.h, but is checked so that a mistake truncates instead of smashing. */
struct out {
	uint8_t *p;
	size_t cap, len;
	bool overflow;
};

static uint8_t *out_take(struct out *o, size_t n)
{
	if (o->overflow || o->cap - o->len < n) {
		o->overflow = true;
		return NULL;
	}
	uint8_t *p = o->p + o->len;
	o->len += n;
	return p;
}

/* One option reply header + payload; returns where the payload goes. */
static uint8_t *rep(struct out *o, uint32_t opt, uint32_t type, uint32_t len)
{
	uint8_t *p = out_take(o, 20 + (size_t)len);
	if (!p)
		return NULL;
	put64(p, NBD_REP_MAGIC);
	put32(p + 8, opt);
	put32(p + 12, type);
	put32(p + 16, len);
	return p + 20;
}

/* An error reply with a message for the human at the client. */
static void rep_err(struct out *o, uint32_t opt, uint32_t type, const char *msg)
{
	size_t n = strlen(msg);
	uint8_t *p = rep(o, opt, type, (uint32_t)n);
	if (p)
		memcpy(p, msg, n);
}

static bool name_matches(const struct nbd_export *exp, const uint8_t *name,
			 uint32_t n)
{
	if (n == 0)
		return true;
	return strlen(exp->name) == n && memcmp(exp->name, name, n) == 0;
}

static void info_export(struct out *o, uint32_t opt,
			const struct nbd_export *exp)
{
	uint8_t *p = rep(o, opt, NBD_REP_INFO, 12);
	if (!p)
		return;
	put16(p, NBD_INFO_EXPORT);
	put64(p + 2, exp->size);
	put16(p + 10, exp->tflags);
}

static void info_string(struct out *o, uint32_t opt, uint16_t type,
			const char *s)
{
	size_t n = strlen(s);
	if (n > NBD_NAME_MAX)
		n = NBD_NAME_MAX;
	uint8_t *p = rep(o, opt, NBD_REP_INFO, (uint32_t)(2 + n));
	if (!p)
		return;
	put16(p, type);
	memcpy(p + 2, s, n);
}

static void info_block_size(struct out *o, uint32_t opt,
			    const struct nbd_export *exp)
{
	uint8_t *p = rep(o, opt, NBD_REP_INFO, 14);
	if (!p)
		return;
	put16(p, NBD_INFO_BLOCK_SIZE);
	put32(p + 2, exp->min_block);
	put32(p + 6, exp->pref_block);
	put32(p + 10, exp->max_block);
}

/* OPT_INFO / OPT_GO: u32 name length, name, u16 n, n x u16 info types. */
static enum nbd_opt_action opt_info(const struct nbd_export *exp, uint32_t opt,
				    const uint8_t *data, uint32_t len,
				    struct out *o)
{
	uint32_t nlen;
	uint16_t nreq;

	if (len < 6) {
		rep_err(o, opt, NBD_REP_ERR_INVALID, "option too short");
		return NBD_OPT_CONTINUE;
	}
	nlen = get32(data);
	if (nlen > len - 6) {
		rep_err(o, opt, NBD_REP_ERR_INVALID,
			"name length exceeds option length");
		return NBD_OPT_CONTINUE;
	}
	nreq = get16(data + 4 + nlen);
	if ((uint64_t)len != 4ULL + nlen + 2 + 2ULL * nreq) {
		rep_err(o, opt, NBD_REP_ERR_INVALID,
			"info request count does not match option length");
		return NBD_OPT_CONTINUE;
	}
	if (!name_matches(exp, data + 4, nlen)) {
		rep_err(o, opt, NBD_REP_ERR_UNKNOWN, "no such export");
		return NBD_OPT_CONTINUE;
	}
	bool want_name = false, want_desc = false, want_bs = false;
	for (uint16_t i = 0; i < nreq; i++) {
		switch (get16(data + 4 + nlen + 2 + 2 * i)) {
		case NBD_INFO_NAME: want_name = true; break;
		case NBD_INFO_DESCRIPTION: want_desc = true; break;
		case NBD_INFO_BLOCK_SIZE: want_bs = true; break;
		default: break; /* unknown requests are ignored (spec) */
		}
	}
	info_export(o, opt, exp);
	if (want_name)
		info_string(o, opt, NBD_INFO_NAME, exp->name);
	if (want_desc && exp->description)
		info_string(o, opt, NBD_INFO_DESCRIPTION, exp->description);
	/* Sent only on request: nbd-client never asks, and a client that did
	 * not ask is expected to keep to 512-byte alignment and 32 MiB. */
	if (want_bs)
		info_block_size(o, opt, exp);
	rep(o, opt, NBD_REP_ACK, 0);
	return opt == NBD_OPT_GO ? NBD_OPT_TRANSMIT : NBD_OPT_CONTINUE;
}

enum nbd_opt_action nbd_opt_handle(const struct nbd_export *exp,
				   bool no_zeroes, uint32_t opt,
				   const uint8_t *data, uint32_t len,
				   uint8_t *buf, size_t cap, size_t *out_len)
{
	struct out o = { .p = buf, .cap = cap };
	enum nbd_opt_action act = NBD_OPT_CONTINUE;

	if (!data && opt == NBD_OPT_EXPORT_NAME) {
		/* Cannot be answered with an error: the spec says close. */
		act = NBD_OPT_CLOSE;
		goto done;
	}
	if (!data) {
		rep_err(&o, opt, NBD_REP_ERR_TOO_BIG, "option too long");
		goto done;
	}
	switch (opt) {
	case NBD_OPT_EXPORT_NAME:
		if (!name_matches(exp, data, len)) {
			act = NBD_OPT_CLOSE;
			break;
		}
		uint8_t *p = out_take(&o, no_zeroes ? 10 : 134);
		if (!p)
			break;
		put64(p, exp->size);
		put16(p + 8, exp->tflags);
		if (!no_zeroes)
			memset(p + 10, 0, 124);
		act = NBD_OPT_TRANSMIT;
		break;
	case NBD_OPT_ABORT:
		rep(&o, opt, NBD_REP_ACK, 0);
		act = NBD_OPT_CLOSE;
		break;
	case NBD_OPT_LIST:
		if (len != 0) {
			rep_err(&o, opt, NBD_REP_ERR_INVALID,
				"OPT_LIST takes no data");
			break;
		}
		size_t n = strlen(exp->name);
		uint8_t *q = rep(&o, opt, NBD_REP_SERVER, (uint32_t)(4 + n));
		if (q) {
			put32(q, (uint32_t)n);
			memcpy(q + 4, exp->name, n);
		}
		rep(&o, opt, NBD_REP_ACK, 0);
		break;
	case NBD_OPT_INFO:
	case NBD_OPT_GO:
		act = opt_info(exp, opt, data, len, &o);
		break;
	default:
		rep_err(&o, opt, NBD_REP_ERR_UNSUP, "option not supported");
		break;
	}
done:
	if (o.overflow) {
		/* Cannot happen with the documented caps; fail safe. */
		o.len = 0;
		act = NBD_OPT_CLOSE;
	}
	*out_len = o.len;
	return act;
}

int nbd_req_parse(const uint8_t in[NBD_REQ_LEN], struct nbd_req *r)
{
	if (get32(in) != NBD_REQUEST_MAGIC)
		return -EPROTO;
	r->flags = get16(in + 4);
	r->type = get16(in + 6);
	r->cookie = get64(in + 8);
	r->offset = get64(in + 16);
	r->len = get32(in + 24);
	return 0;
}

uint32_t nbd_req_check(const struct nbd_req *r, const struct nbd_export *exp)
{
	uint16_t allowed;
	bool payload = false;

	/* FUA is valid on every command once SEND_FUA is advertised (the
	 * spec: the server accepts it even where it means nothing). */
	switch (r->type) {
	case NBD_CMD_READ:
		allowed = NBD_CMD_FLAG_FUA;
		payload = true;
		break;
	case NBD_CMD_WRITE:
		allowed = NBD_CMD_FLAG_FUA;
		payload = true;
		break;
	case NBD_CMD_TRIM:
		allowed = NBD_CMD_FLAG_FUA;
		break;
	case NBD_CMD_WRITE_ZEROES:
		allowed = NBD_CMD_FLAG_FUA | NBD_CMD_FLAG_NO_HOLE;
		break;
	case NBD_CMD_FLUSH:
	case NBD_CMD_DISC:
		return r->flags & ~(uint16_t)NBD_CMD_FLAG_FUA ? NBD_EINVAL : 0;
	default:
		return NBD_EINVAL;
	}
	if (r->flags & ~allowed)
		return NBD_EINVAL;
	if (exp->min_block > 1 &&
	    ((r->offset | r->len) & (exp->min_block - 1)))
		return NBD_EINVAL;
	if (payload && r->len > exp->max_block)
		return NBD_EINVAL;
	if (r->offset > exp->size || r->len > exp->size - r->offset) {
		/* The spec: ENOSPC for writes past the end, EINVAL otherwise. */
		if (r->type == NBD_CMD_WRITE || r->type == NBD_CMD_WRITE_ZEROES)
			return NBD_ENOSPC;
		return NBD_EINVAL;
	}
	return 0;
}

void nbd_reply_build(uint8_t out[NBD_REPLY_LEN], uint32_t error,
		     uint64_t cookie)
{
	put32(out, NBD_SIMPLE_REPLY_MAGIC);
	put32(out + 4, error);
	put64(out + 8, cookie);
}

const char *nbd_cmd_name(uint16_t type, char *buf, size_t len)
{
	switch (type) {
	case NBD_CMD_READ: return "READ";
	case NBD_CMD_WRITE: return "WRITE";
	case NBD_CMD_DISC: return "DISC";
	case NBD_CMD_FLUSH: return "FLUSH";
	case NBD_CMD_TRIM: return "TRIM";
	case NBD_CMD_WRITE_ZEROES: return "WRITE_ZEROES";
	default:
		snprintf(buf, len, "cmd#%u", type);
		return buf;
	}
}
