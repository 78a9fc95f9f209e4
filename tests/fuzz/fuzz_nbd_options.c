/* fuzz_nbd_options.c - libFuzzer target for the NBD option haggling
 * decisions (nbd_opt_handle) and request checks (nbd_req_parse/check):
 * any bytes give a well-framed answer that fits its buffer. */
#include <endian.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nbd/proto.h"

static uint8_t out[NBD_OPT_REPLY_MAX];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 5)
		return 0;
	struct nbd_export exp = {
		.name = (data[0] & 1) ? "swap" : "", .size = 1 << 20,
		.tflags = 1, .min_block = 512, .pref_block = 4096,
		.max_block = 1 << 16,
	};
	uint32_t opt;
	memcpy(&opt, data + 1, 4);
	opt = be32toh(opt) & 0x1f;   /* mostly known options */
	const uint8_t *d = data + 5;
	size_t n = size - 5;
	bool big = n > NBD_OPT_DATA_MAX;
	size_t len;
	enum nbd_opt_action act = nbd_opt_handle(&exp, data[0] & 2, opt,
						 big ? NULL : d, (uint32_t)n,
						 out, sizeof(out), &len);
	if (len > sizeof(out))
		abort();
	/* Replies other than EXPORT_NAME's are a chain of framed messages
	 * whose lengths add up exactly. */
	if (opt != NBD_OPT_EXPORT_NAME) {
		size_t at = 0;
		while (at < len) {
			uint32_t l;
			if (len - at < 20)
				abort();
			memcpy(&l, out + at + 16, 4);
			at += 20 + be32toh(l);
		}
		if (at != len)
			abort();
	} else if (act == NBD_OPT_TRANSMIT && len != 10 && len != 134) {
		abort();
	}
	/* The same bytes as a request header. */
	if (size >= NBD_REQ_LEN) {
		struct nbd_req r;
		if (nbd_req_parse(data, &r) == 0) {
			uint32_t e = nbd_req_check(&r, &exp);
			if (e == 0 && r.type != NBD_CMD_FLUSH && r.type != NBD_CMD_DISC &&
			    (r.offset + r.len > exp.size || r.offset + r.len < r.offset))
				abort();
		}
	}
	return 0;
}
