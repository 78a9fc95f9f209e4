/* batch.h - the payloads of PAGE_FETCH_MANY, PAGE_STORE_MANY,
 * PARITY_UPDATE_MANY, PAGE_OVERWRITE_MANY and PAGE_DROP_MANY requests and
 * of their replies: many page fetches or stores in one frame, so that
 * a recovery pass reads all it needs from a node, and stores the pages it
 * rebuilt there, with one request instead of one per page (each request
 * costs two system calls, a wake-up and a header on both sides; a page
 * costs a copy).
 *
 * Request payload: n entries of FRAME_BATCH_ENTRY bytes (big-endian)
 *   0  u64 key      page id (kind DATA) or parity group (kind PARITY)
 *   8  u64 version  the version asked for; 0: whatever is stored
 *  16  u8  kind     enum frame_kind
 *  17  7 bytes, zero
 * Reply payload (status OK): n results of FRAME_BATCH_ENTRY bytes, in the
 * request's order, then n pages of FRAME_PAGE_SIZE bytes:
 *   0  u64 key      as asked
 *   8  u64 version  the stored version (0 when the status says not found)
 *  16  u8  kind     as asked
 *  17  u8  status   enum frame_status of this one fetch
 *  18  6 bytes, zero
 * A page whose fetch failed is sent as zeros.
 *
 * PAGE_STORE_MANY is the mirror image: its request carries n entries as
 * above (key, version to store, kind), then the n pages; its reply (status
 * OK) n results as above, without pages. An entry's status says how its
 * store went (a full node: FS_NO_SPACE), the request as a whole succeeds.
 *
 * PARITY_UPDATE_MANY is a PAGE_STORE_MANY of kind PARITY entries (key =
 * group, version = parity version, page = the XOR delta to apply).
 * PAGE_DROP_MANY's request carries PAGE_FETCH_MANY's entries (version: drop
 * if the stored one is not newer), its reply a PAGE_STORE_MANY's.
 *
 * PAGE_OVERWRITE_MANY's request carries n entries of FRAME_OW_ENTRY bytes,
 * then the n new pages:
 *   0  u64 key             page id (kind DATA)
 *   8  u64 version         the new version
 *  16  u64 old_version     the version being replaced
 *  24  u64 group           its parity group
 *  32  u64 parity_version  for the group's parity update
 *  40  u32 parity_node     the node holding the group's parity page
 *  44  4 bytes, zero
 * its reply (status OK) n results as PAGE_STORE_MANY's (kind DATA, the new
 * version), each with PAGE_OVERWRITE's status.
 *
 * 1 <= n <= FRAME_BATCH_MAX; frame_decode checks the payload lengths,
 * these functions the contents. Pure functions, thread-safe. */
#pragma once
#include <stdint.h>

#include "cluster/frame.h"

struct batch_entry {
	uint64_t key;
	uint64_t version;
	uint32_t kind;          /* enum frame_kind */
	uint32_t status;        /* results only: enum frame_status */
};

/* Payload lengths for n entries. */
static inline uint32_t batch_request_len(unsigned n)
{
	return n * FRAME_BATCH_ENTRY;
}
static inline uint32_t batch_reply_len(unsigned n)
{
	return n * (FRAME_BATCH_ENTRY + FRAME_PAGE_SIZE);
}

/* Encode n request entries into out (batch_request_len(n) bytes). */
void batch_request_put(uint8_t *out, const struct batch_entry *e, unsigned n);
/* Decode a request payload of len bytes into e (room for FRAME_BATCH_MAX);
 * *n gets the count. 0, or -EPROTO with *why: a length that is not a whole
 * number of entries or over the cap, an unknown kind, reserved bytes set. */
int batch_request_get(const uint8_t *p, uint32_t len, struct batch_entry *e,
		      unsigned *n, const char **why);

/* PAGE_STORE_MANY: request and reply payload lengths for n entries; the
 * request's page k (after batch_request_put of its entries at out). */
static inline uint32_t batch_store_len(unsigned n)
{
	return batch_reply_len(n);
}
static inline uint32_t batch_store_reply_len(unsigned n)
{
	return batch_request_len(n);
}
static inline uint8_t *batch_store_page(uint8_t *out, unsigned n, unsigned k)
{
	return out + (uint64_t)n * FRAME_BATCH_ENTRY + (uint64_t)k * FRAME_PAGE_SIZE;
}
/* Decode a PAGE_STORE_MANY request payload of len bytes: entries into e
 * (room for FRAME_BATCH_MAX), *n, *pages at the first page. 0, or -EPROTO
 * with *why, as batch_request_get. */
int batch_store_get(const uint8_t *p, uint32_t len, struct batch_entry *e,
		    unsigned *n, const uint8_t **pages, const char **why);
/* Decode result k of a PAGE_STORE_MANY reply payload p for n entries (len
 * bytes). 0, or -EPROTO with *why, as batch_result_get. */
int batch_store_result_get(const uint8_t *p, uint32_t len, unsigned n, unsigned k,
			   struct batch_entry *r, const char **why);

/* Result k of n into a reply payload out (batch_reply_len(n) bytes; for a
 * PAGE_STORE_MANY reply, batch_store_reply_len(n)). */
void batch_result_put(uint8_t *out, unsigned k, const struct batch_entry *r);
/* Page k of n in a reply payload. */
static inline uint8_t *batch_reply_page(uint8_t *out, unsigned n, unsigned k)
{
	return out + (uint64_t)n * FRAME_BATCH_ENTRY + (uint64_t)k * FRAME_PAGE_SIZE;
}
/* Decode result k of a reply payload p for n entries (len bytes). 0, or
 * -EPROTO with *why (wrong length, unknown kind or status, reserved bytes
 * set); *page points at its page. */
int batch_result_get(const uint8_t *p, uint32_t len, unsigned n, unsigned k,
		     struct batch_entry *r, const uint8_t **page, const char **why);

/* One PAGE_OVERWRITE_MANY request entry. */
struct batch_ow {
	uint64_t key, version, old_version, group, parity_version;
	uint32_t parity_node;
};

/* PAGE_OVERWRITE_MANY request payload length for n entries, and its page k
 * (after batch_ow_put of its entries at out); the reply's length is
 * batch_store_reply_len(n). */
static inline uint32_t batch_ow_len(unsigned n)
{
	return n * (FRAME_OW_ENTRY + FRAME_PAGE_SIZE);
}
static inline uint8_t *batch_ow_page(uint8_t *out, unsigned n, unsigned k)
{
	return out + (uint64_t)n * FRAME_OW_ENTRY + (uint64_t)k * FRAME_PAGE_SIZE;
}
/* Encode n overwrite entries into out (n * FRAME_OW_ENTRY bytes). */
void batch_ow_put(uint8_t *out, const struct batch_ow *e, unsigned n);
/* Decode a PAGE_OVERWRITE_MANY request payload of len bytes: entries into
 * e (room for FRAME_BATCH_MAX), *n, *pages at the first page. 0, or
 * -EPROTO with *why: not 1..64 whole entries with their pages, a parity
 * node id over FRAME_MAX_NODE_ID, reserved bytes set. */
int batch_ow_get(const uint8_t *p, uint32_t len, struct batch_ow *e,
		 unsigned *n, const uint8_t **pages, const char **why);
