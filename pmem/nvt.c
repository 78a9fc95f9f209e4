/* nvt.c - the nvt trace writer (format in nvt.h). Records are buffered
 * 64 KiB at a time and handed to zlib, which writes plain files too. */
#include "pmem/nvt.h"

#include "common/crc32c.h"
#include "common/log.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

struct trace_writer {
	gzFile gz;
	uint8_t buf[1 << 16];
	size_t len;
	uint64_t prev;
	uint64_t nrec;           /* access and free records written */
	uint32_t flags;
	uint32_t crc;            /* of the bytes after the header, so far */
	size_t crc_from;         /* buf[crc_from..len) not yet in crc */
	int err;
};

static void tw_flush(struct trace_writer *w)
{
	w->crc = crc32c(w->crc, w->buf + w->crc_from, w->len - w->crc_from);
	w->crc_from = 0;
	if (w->len && !w->err) {
		if (gzwrite(w->gz, w->buf, (unsigned)w->len) != (int)w->len)
			w->err = -EIO;
	}
	w->len = 0;
}

static void tw_varint(struct trace_writer *w, uint64_t v)
{
	if (w->len + 10 > sizeof(w->buf))
		tw_flush(w);
	while (v >= 0x80) {
		w->buf[w->len++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	w->buf[w->len++] = (uint8_t)v;
}

int trace_writer_open(struct trace_writer **out, const char *path,
		      uint32_t flags)
{
	size_t pl = strlen(path);
	bool gz = pl > 3 && strcmp(path + pl - 3, ".gz") == 0;
	struct trace_writer *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	/* "-": standard output, plain (as "-" is standard input to readers) */
	if (!strcmp(path, "-")) {
		int fd = dup(STDOUT_FILENO);
		w->gz = fd < 0 ? NULL : gzdopen(fd, "wbT");
		if (!w->gz && fd >= 0)
			close(fd);
	} else {
		w->gz = gzopen(path, gz ? "wb6" : "wbT");
	}
	if (!w->gz) {
		int e = errno ? errno : ENOMEM;
		log_err("trace %s: cannot create: %s", path, strerror(e));
		free(w);
		return -e;
	}
	flags |= NVT_F_END;
	w->flags = flags;
	memcpy(w->buf, NVT_MAGIC, 8);
	for (int i = 0; i < 4; i++)
		w->buf[8 + i] = (uint8_t)(flags >> (8 * i));
	memset(w->buf + 12, 0, 4);
	w->len = NVT_HEADER_BYTES;
	w->crc_from = NVT_HEADER_BYTES;
	*out = w;
	return 0;
}

int trace_writer_fast(struct trace_writer *w)
{
	/* Before any data reaches zlib the call only changes the level. */
	if (gzsetparams(w->gz, 1, Z_DEFAULT_STRATEGY) != Z_OK && !w->err)
		w->err = -EIO;
	return w->err;
}

int trace_write(struct trace_writer *w, const struct trace_rec *rec)
{
	if (rec->op == TRACE_FREE) {
		if (!(w->flags & NVT_F_FREES) || rec->size)
			return -EINVAL;
		tw_varint(w, 7u << 2 | TRACE_M);
		tw_varint(w, 0);
		tw_varint(w, rec->addr);
		w->prev = rec->addr;
		w->nrec++;
		return w->err;
	}
	if (rec->op > TRACE_M || rec->size == 0 || rec->size > TRACE_MAX_SIZE)
		return -EINVAL;
	uint64_t delta = rec->addr - w->prev;
	uint64_t zz = (delta << 1) ^ (0 - (delta >> 63));
	unsigned sc = 7;
	if ((rec->size & (rec->size - 1)) == 0 && rec->size <= 64)
		sc = (unsigned)__builtin_ctz(rec->size);
	if (sc < 7 && zz < (1ull << 59)) {
		tw_varint(w, zz << 5 | sc << 2 | rec->op);
	} else {
		tw_varint(w, 7u << 2 | rec->op);
		tw_varint(w, rec->size);
		tw_varint(w, rec->addr);
	}
	w->prev = rec->addr;
	w->nrec++;
	return w->err;
}

int trace_write_instr(struct trace_writer *w, uint64_t n)
{
	while (n) {
		uint64_t k = n > (UINT64_MAX >> 2) ? (UINT64_MAX >> 2) : n;
		tw_varint(w, k << 2 | 3);
		n -= k;
	}
	return w->err;
}

int trace_writer_close(struct trace_writer *w)
{
	tw_varint(w, 7u << 2 | TRACE_L);
	tw_varint(w, 0);
	tw_varint(w, w->nrec);
	if (w->len + 4 > sizeof(w->buf))
		tw_flush(w);
	uint32_t crc = crc32c(w->crc, w->buf + w->crc_from, w->len - w->crc_from);
	for (int i = 0; i < 4; i++)
		w->buf[w->len++] = (uint8_t)(crc >> (8 * i));
	w->crc_from = w->len;   /* the CRC is not in itself */
	tw_flush(w);
	int rc = w->err;
	if (gzclose(w->gz) != Z_OK && !rc)
		rc = -EIO;
	free(w);
	return rc;
}
