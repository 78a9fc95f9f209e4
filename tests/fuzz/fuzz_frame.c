/* fuzz_frame.c - libFuzzer target for the cluster frame decoder: any bytes
 * must decode to a frame or an error, never crash or read out of bounds.
 * A frame that decodes must survive re-encoding and decode to the same
 * header (the encoder runs the decoder's checks too). A batch frame's
 * payload (fetch, store, parity update, overwrite or drop many) then goes
 * through the batch codec (cluster/batch.h), which must accept or refuse
 * every entry without reading past the payload.
 *
 * Mutated inputs almost never carry a valid CRC, which would stop the fuzzer
 * at the CRC check; so each input is decoded twice: as given, and with its
 * CRC field recomputed, which lets mutations reach the header checks. */
#include "cluster/batch.h"
#include "cluster/frame.h"
#include "common/crc32c.h"

#include <stdlib.h>
#include <string.h>

static uint8_t out[FRAME_MAX_HEAD + FRAME_MAX_PAYLOAD];
static uint8_t fixed[FRAME_MAX_HEAD + FRAME_MAX_PAYLOAD];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one(const uint8_t *data, size_t size);
static void batch_check(const struct frame_hdr *h, const uint8_t *pl);
static void store_check(const struct frame_hdr *h, const uint8_t *pl);
static void overwrite_check(const struct frame_hdr *h, const uint8_t *pl);
static void drop_check(const struct frame_hdr *h, const uint8_t *pl);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t hl, plen;

	one(data, size);
	if (size < FRAME_PREFIX || size > sizeof(fixed) ||
	    frame_prefix_parse(data, &hl, &plen, NULL) != 0 ||
	    (size_t)FRAME_PREFIX + hl + plen > size)
		return 0;
	memcpy(fixed, data, size);
	uint32_t crc = crc32c(crc32c(0, fixed, 12), fixed + FRAME_PREFIX,
			      (size_t)hl + plen);
	fixed[12] = (uint8_t)(crc >> 24);
	fixed[13] = (uint8_t)(crc >> 16);
	fixed[14] = (uint8_t)(crc >> 8);
	fixed[15] = (uint8_t)crc;
	one(fixed, size);
	return 0;
}

static void one(const uint8_t *data, size_t size)
{
	static struct frame_hdr a, b;
	const uint8_t *pl = NULL, *pl2 = NULL;
	uint32_t hl, plen;

	if (size >= FRAME_PREFIX)
		(void)frame_prefix_parse(data, &hl, &plen, NULL);
	ssize_t n = frame_decode(data, size, &a, &pl, NULL);
	if (n <= 0)
		return;
	if ((size_t)n > size)
		abort();
	ssize_t m = frame_encode(&a, pl, out, sizeof(out));
	if (m <= 0)
		abort();
	if (a.payload_len)
		memcpy(out + m, pl, a.payload_len);
	if (frame_decode(out, (size_t)m + a.payload_len, &b, &pl2, NULL) !=
	    m + (ssize_t)a.payload_len)
		abort();
	if (memcmp(&a, &b, sizeof(a)) != 0)
		abort();
	if (a.payload_len && memcmp(pl, pl2, a.payload_len) != 0)
		abort();
	if (a.type == FT_PAGE_FETCH_MANY && a.status == FS_OK)
		batch_check(&a, pl);
	if ((a.type == FT_PAGE_STORE_MANY || a.type == FT_PARITY_UPDATE_MANY) &&
	    a.status == FS_OK)
		store_check(&a, pl);
	if (a.type == FT_PAGE_OVERWRITE_MANY && a.status == FS_OK)
		overwrite_check(&a, pl);
	if (a.type == FT_PAGE_DROP_MANY && a.status == FS_OK)
		drop_check(&a, pl);
}

static void batch_check(const struct frame_hdr *h, const uint8_t *pl)
{
	static struct batch_entry e[FRAME_BATCH_MAX];
	static uint8_t again[FRAME_MAX_CONN_PAYLOAD];
	const char *why;
	unsigned n;

	if (!h->reply) {
		if (batch_request_get(pl, h->payload_len, e, &n, &why) == 0) {
			/* what decodes re-encodes to the same bytes */
			batch_request_put(again, e, n);
			if (n > FRAME_BATCH_MAX ||
			    memcmp(again, pl, batch_request_len(n)) != 0)
				abort();
		}
		return;
	}
	n = h->payload_len / (FRAME_BATCH_ENTRY + FRAME_PAGE_SIZE);
	for (unsigned k = 0; k < n; k++) {
		const uint8_t *page;
		if (batch_result_get(pl, h->payload_len, n, k, &e[0], &page, &why) == 0 &&
		    (page < pl || page + FRAME_PAGE_SIZE > pl + h->payload_len))
			abort();
	}
}

/* A PAGE_STORE_MANY the decoder let through: its entries re-encode to the
 * same bytes and its pages lie within the payload; a reply's results are
 * read without going past it. */
static void store_check(const struct frame_hdr *h, const uint8_t *pl)
{
	static struct batch_entry e[FRAME_BATCH_MAX];
	static uint8_t again[FRAME_MAX_CONN_PAYLOAD];
	const uint8_t *pages;
	const char *why;
	unsigned n;

	if (!h->reply) {
		if (batch_store_get(pl, h->payload_len, e, &n, &pages, &why) == 0) {
			batch_request_put(again, e, n);
			if (n > FRAME_BATCH_MAX ||
			    memcmp(again, pl, batch_request_len(n)) != 0 ||
			    pages != pl + batch_request_len(n) ||
			    pages + (size_t)n * FRAME_PAGE_SIZE != pl + h->payload_len)
				abort();
		}
		return;
	}
	n = h->payload_len / FRAME_BATCH_ENTRY;
	for (unsigned k = 0; k < n; k++)
		(void)batch_store_result_get(pl, h->payload_len, n, k, &e[0], &why);
}

/* A PAGE_OVERWRITE_MANY the decoder let through: as store_check, with the
 * overwrite entries' codec; its reply is a store batch's. */
static void overwrite_check(const struct frame_hdr *h, const uint8_t *pl)
{
	static struct batch_ow e[FRAME_BATCH_MAX];
	static uint8_t again[FRAME_BATCH_MAX * FRAME_OW_ENTRY];
	const uint8_t *pages;
	const char *why;
	unsigned n;

	if (!h->reply) {
		if (batch_ow_get(pl, h->payload_len, e, &n, &pages, &why) == 0) {
			batch_ow_put(again, e, n);
			if (n > FRAME_BATCH_MAX ||
			    memcmp(again, pl, (size_t)n * FRAME_OW_ENTRY) != 0 ||
			    pages != pl + (size_t)n * FRAME_OW_ENTRY ||
			    pages + (size_t)n * FRAME_PAGE_SIZE != pl + h->payload_len)
				abort();
		}
		return;
	}
	store_check(h, pl);
}

/* A PAGE_DROP_MANY the decoder let through: its request's entries
 * re-encode to the same bytes; its reply is a store batch's. */
static void drop_check(const struct frame_hdr *h, const uint8_t *pl)
{
	static struct batch_entry e[FRAME_BATCH_MAX];
	static uint8_t again[FRAME_BATCH_MAX * FRAME_BATCH_ENTRY];
	const char *why;
	unsigned n;

	if (!h->reply) {
		if (batch_request_get(pl, h->payload_len, e, &n, &why) == 0) {
			batch_request_put(again, e, n);
			if (n > FRAME_BATCH_MAX || batch_request_len(n) != h->payload_len ||
			    memcmp(again, pl, batch_request_len(n)) != 0)
				abort();
		}
		return;
	}
	store_check(h, pl);
}
