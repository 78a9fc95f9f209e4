/* batch.c - encode and check the payloads of the batch requests
 * (PAGE_FETCH_MANY, PAGE_STORE_MANY, PARITY_UPDATE_MANY,
 * PAGE_OVERWRITE_MANY, PAGE_DROP_MANY) and their replies; see batch.h. */
#include "cluster/batch.h"

#include <errno.h>
#include <string.h>

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	for (int i = 3; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static bool zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

void batch_request_put(uint8_t *out, const struct batch_entry *e, unsigned n)
{
	memset(out, 0, batch_request_len(n));
	for (unsigned k = 0; k < n; k++, out += FRAME_BATCH_ENTRY) {
		put_be64(out, e[k].key);
		put_be64(out + 8, e[k].version);
		out[16] = (uint8_t)e[k].kind;
	}
}

/* n request entries at p */
static int entries_get(const uint8_t *p, unsigned n, struct batch_entry *e,
		       const char **why)
{
	for (unsigned k = 0; k < n; k++, p += FRAME_BATCH_ENTRY) {
		if (p[16] >= FK_COUNT || !zero(p + 17, 7)) {
			*why = "batch request: bad kind or reserved bytes";
			return -EPROTO;
		}
		e[k] = (struct batch_entry){ .key = get_be64(p),
					     .version = get_be64(p + 8),
					     .kind = p[16] };
	}
	return 0;
}

int batch_request_get(const uint8_t *p, uint32_t len, struct batch_entry *e,
		      unsigned *n, const char **why)
{
	if (len == 0 || len % FRAME_BATCH_ENTRY ||
	    len / FRAME_BATCH_ENTRY > FRAME_BATCH_MAX) {
		*why = "fetch-many request: not 1..64 whole entries";
		return -EPROTO;
	}
	*n = len / FRAME_BATCH_ENTRY;
	return entries_get(p, *n, e, why);
}

int batch_store_get(const uint8_t *p, uint32_t len, struct batch_entry *e,
		    unsigned *n, const uint8_t **pages, const char **why)
{
	const uint32_t unit = FRAME_BATCH_ENTRY + FRAME_PAGE_SIZE;

	if (len == 0 || len % unit || len / unit > FRAME_BATCH_MAX) {
		*why = "store-many request: not 1..64 whole entries with their pages";
		return -EPROTO;
	}
	*n = len / unit;
	*pages = p + (size_t)*n * FRAME_BATCH_ENTRY;
	return entries_get(p, *n, e, why);
}

void batch_result_put(uint8_t *out, unsigned k, const struct batch_entry *r)
{
	uint8_t *p = out + (size_t)k * FRAME_BATCH_ENTRY;

	memset(p, 0, FRAME_BATCH_ENTRY);
	put_be64(p, r->key);
	put_be64(p + 8, r->version);
	p[16] = (uint8_t)r->kind;
	p[17] = (uint8_t)r->status;
}

/* result k at p */
static int result_get(const uint8_t *p, unsigned k, struct batch_entry *r,
		      const char **why)
{
	const uint8_t *q = p + (size_t)k * FRAME_BATCH_ENTRY;
	if (q[16] >= FK_COUNT || q[17] >= FS_COUNT || !zero(q + 18, 6)) {
		*why = "batch reply: bad kind, status or reserved bytes";
		return -EPROTO;
	}
	*r = (struct batch_entry){ .key = get_be64(q), .version = get_be64(q + 8),
				   .kind = q[16], .status = q[17] };
	return 0;
}

int batch_result_get(const uint8_t *p, uint32_t len, unsigned n, unsigned k,
		     struct batch_entry *r, const uint8_t **page, const char **why)
{
	if (n == 0 || n > FRAME_BATCH_MAX || k >= n || len != batch_reply_len(n)) {
		*why = "fetch-many reply of the wrong size";
		return -EPROTO;
	}
	*page = p + (size_t)n * FRAME_BATCH_ENTRY + (size_t)k * FRAME_PAGE_SIZE;
	return result_get(p, k, r, why);
}

int batch_store_result_get(const uint8_t *p, uint32_t len, unsigned n, unsigned k,
			   struct batch_entry *r, const char **why)
{
	if (n == 0 || n > FRAME_BATCH_MAX || k >= n || len != batch_store_reply_len(n)) {
		*why = "store-many reply of the wrong size";
		return -EPROTO;
	}
	return result_get(p, k, r, why);
}

void batch_ow_put(uint8_t *out, const struct batch_ow *e, unsigned n)
{
	memset(out, 0, (size_t)n * FRAME_OW_ENTRY);
	for (unsigned k = 0; k < n; k++, out += FRAME_OW_ENTRY) {
		put_be64(out, e[k].key);
		put_be64(out + 8, e[k].version);
		put_be64(out + 16, e[k].old_version);
		put_be64(out + 24, e[k].group);
		put_be64(out + 32, e[k].parity_version);
		put_be32(out + 40, e[k].parity_node);
	}
}

int batch_ow_get(const uint8_t *p, uint32_t len, struct batch_ow *e,
		 unsigned *n, const uint8_t **pages, const char **why)
{
	const uint32_t unit = FRAME_OW_ENTRY + FRAME_PAGE_SIZE;

	if (len == 0 || len % unit || len / unit > FRAME_BATCH_MAX) {
		*why = "overwrite-many request: not 1..64 whole entries with their pages";
		return -EPROTO;
	}
	*n = len / unit;
	*pages = p + (size_t)*n * FRAME_OW_ENTRY;
	for (unsigned k = 0; k < *n; k++, p += FRAME_OW_ENTRY) {
		uint32_t pn = get_be32(p + 40);
		if (pn > FRAME_MAX_NODE_ID || !zero(p + 44, 4)) {
			*why = "overwrite-many request: bad parity node or reserved bytes";
			return -EPROTO;
		}
		e[k] = (struct batch_ow){ .key = get_be64(p), .version = get_be64(p + 8),
					  .old_version = get_be64(p + 16),
					  .group = get_be64(p + 24),
					  .parity_version = get_be64(p + 32),
					  .parity_node = pn };
	}
	return 0;
}
