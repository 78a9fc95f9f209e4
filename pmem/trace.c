/* trace.c - lackey and nvt trace reading (see trace.h; the nvt writer is
 * pmem/nvt.c). The input is untrusted: every length and number is
 * checked, and a bad byte stops the read with a message naming where it
 * is. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "common/crc32c.h"
#include "common/log.h"
#include "pmem/trace.h"

#define TR_BUF (1u << 20)

struct trace_reader {
	gzFile gz;
	const uint8_t *mem;      /* trace_open_mem */
	size_t memlen, mempos;
	uint8_t *buf;
	size_t len, pos;
	bool eof;
	bool cut;                /* eof is a gzip stream cut short (tr_cut) */
	enum trace_format fmt;
	uint32_t flags;
	uint64_t line;           /* lackey: lines consumed */
	uint64_t base;           /* nvt: input offset of buf[0] */
	uint64_t prev;           /* nvt: previous address */
	int err;                 /* nvt: an error after records, for the
				  * next call (sticky) */
	/* nvt with NVT_F_END: the end record must come, and its count and
	 * CRC match; the CRC covers what is consumed (buf[crc_pos..pos)) */
	bool want_end, summing;
	uint32_t crc;
	size_t crc_pos;
	uint64_t nrec;
	uint64_t fsize;
	const char *name;
};

static int tr_fill(struct trace_reader *r)
{
	if (r->summing) {
		r->crc = crc32c(r->crc, r->buf + r->crc_pos, r->pos - r->crc_pos);
		r->crc_pos = 0;
	}
	if (r->pos > 0) {
		memmove(r->buf, r->buf + r->pos, r->len - r->pos);
		r->base += r->pos;
		r->len -= r->pos;
		r->pos = 0;
	}
	while (!r->eof && r->len < TR_BUF) {
		size_t want = TR_BUF - r->len;
		if (r->mem) {
			size_t n = r->memlen - r->mempos;
			if (n > want)
				n = want;
			memcpy(r->buf + r->len, r->mem + r->mempos, n);
			r->mempos += n;
			r->len += n;
			if (r->mempos == r->memlen)
				r->eof = true;
			continue;
		}
		int n = gzread(r->gz, r->buf + r->len, (unsigned)want);
		if (n < 0) {
			int e;
			const char *msg = gzerror(r->gz, &e);
			log_err("trace %s: read failed: %s", r->name, msg);
			return -EIO;
		}
		if (n == 0) {
			/* zlib ends a stream cut short like a whole one and
			 * tells them apart only here: Z_BUF_ERROR is input
			 * that ended inside the gzip stream (a copy cut off,
			 * a log whose writer was killed). */
			int e;
			gzerror(r->gz, &e);
			r->cut = e == Z_BUF_ERROR;
			r->eof = true;
			break;
		}
		r->len += (size_t)n;
	}
	return 0;
}

/* The end of a cut gzip stream, once the records before it are out: an
 * error, not the end of the trace (a copy cut off, a log whose writer was
 * killed, must not pass for a whole run). */
static int tr_cut(const struct trace_reader *r)
{
	log_err("trace %s: truncated: the gzip stream ends early, after %llu "
		"bytes of data", r->name, (unsigned long long)(r->base + r->len));
	return -EIO;
}

static int tr_start(struct trace_reader *r, enum trace_format fmt)
{
	r->buf = malloc(TR_BUF);
	if (!r->buf)
		return -ENOMEM;
	int rc = tr_fill(r);
	if (rc < 0)
		return rc;
	if (r->len >= 8 && r->len < NVT_HEADER_BYTES &&
	    memcmp(r->buf, NVT_MAGIC, 8) == 0) {
		log_err("trace %s: truncated: the nvt header is %zu of %d bytes",
			r->name, r->len, NVT_HEADER_BYTES);
		return -EINVAL;
	}
	bool is_nvt = r->len >= NVT_HEADER_BYTES && memcmp(r->buf, NVT_MAGIC, 8) == 0;
	if (fmt == TRACE_AUTO)
		fmt = is_nvt ? TRACE_NVT : TRACE_LACKEY;
	r->fmt = fmt;
	if (fmt == TRACE_NVT) {
		if (!is_nvt) {
			log_err("trace %s: not an nvt file (no %s header)",
				r->name, NVT_MAGIC);
			return -EINVAL;
		}
		const uint8_t *h = r->buf + 8;
		r->flags = (uint32_t)h[0] | (uint32_t)h[1] << 8 |
			   (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
		if (r->flags & ~NVT_F_KNOWN) {
			log_err("trace %s: unknown nvt flags 0x%x (newer writer?)",
				r->name, r->flags);
			return -EINVAL;
		}
		if ((r->flags & NVT_F_FREES) && !(r->flags & NVT_F_PAGES)) {
			log_err("trace %s: free records in a CPU-level trace (flags "
				"0x%x): not supported", r->name, r->flags);
			return -EINVAL;
		}
		r->pos = NVT_HEADER_BYTES;
		r->want_end = r->summing = (r->flags & NVT_F_END) != 0;
		r->crc_pos = NVT_HEADER_BYTES;
		r->flags &= ~NVT_F_END;
	}
	return 0;
}

int trace_open(struct trace_reader **out, const char *path,
	       enum trace_format fmt)
{
	struct trace_reader *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->name = path;
	if (strcmp(path, "-") == 0) {
		r->gz = gzdopen(0, "rb");
	} else {
		struct stat st;
		if (stat(path, &st) < 0) {
			int e = errno;
			log_err("trace %s: %s", path, strerror(e));
			free(r);
			return -e;
		}
		r->fsize = (uint64_t)st.st_size;
		r->gz = gzopen(path, "rb");
	}
	if (!r->gz) {
		int e = errno ? errno : ENOMEM;
		log_err("trace %s: %s", path, strerror(e));
		free(r);
		return -e;
	}
	gzbuffer(r->gz, 1 << 18);
	int rc = tr_start(r, fmt);
	if (rc < 0) {
		trace_close(r);
		return rc;
	}
	*out = r;
	return 0;
}

int trace_open_mem(struct trace_reader **out, const void *buf, size_t len,
		   enum trace_format fmt)
{
	struct trace_reader *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->name = "(memory)";
	r->mem = buf;
	r->memlen = len;
	r->eof = len == 0;
	int rc = tr_start(r, fmt);
	if (rc < 0) {
		trace_close(r);
		return rc;
	}
	*out = r;
	return 0;
}

void trace_close(struct trace_reader *r)
{
	if (!r)
		return;
	if (r->gz)
		gzclose(r->gz);
	free(r->buf);
	free(r);
}

enum trace_format trace_format_of(const struct trace_reader *r)
{
	return r->fmt;
}

uint32_t trace_flags(const struct trace_reader *r)
{
	return r->flags;
}

double trace_progress(const struct trace_reader *r)
{
	if (!r->gz || !r->fsize)
		return -1;
	long off = gzoffset(r->gz);
	if (off < 0)
		return -1;
	double f = (double)off / (double)r->fsize;
	/* The input read so far is ahead of the records handed out by the
	 * part of the buffer not yet consumed (1 MiB: a quarter of a small
	 * gzipped trace); scale it by the part consumed, assuming an even
	 * compression ratio. */
	if (r->base + r->len)
		f *= (double)(r->base + r->pos) / (double)(r->base + r->len);
	return f > 1 ? 1 : f;
}

/* --- lackey ---------------------------------------------------------------- */

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Parse one line [s, e). 1 = record, 0 = skipped/instruction, <0 error. */
static int lk_line(struct trace_reader *r, const char *s, const char *e,
		   struct trace_rec *rec, uint64_t *instr)
{
	if (e > s && e[-1] == '\r')
		e--;
	/* valgrind's own lines: "==pid== ..." and, with -v, "--pid-- ..."
	 * (a record line starts with a space or 'I'). */
	if (e - s >= 2 && ((s[0] == '=' && s[1] == '=') ||
			   (s[0] == '-' && s[1] == '-')))
		return 0;
	if (s == e)
		return 0;
	while (s < e && *s == ' ')
		s++;
	if (s == e)
		goto bad;
	char op = *s++;
	if (s == e || *s != ' ')
		goto bad;
	while (s < e && *s == ' ')
		s++;
	if (s + 2 <= e && s[0] == '0' && (s[1] | 0x20) == 'x')
		s += 2;
	uint64_t addr = 0;
	int digits = 0, h;
	while (s < e && (h = hexval((unsigned char)*s)) >= 0) {
		if (++digits > 16)
			goto bad;
		addr = addr << 4 | (uint64_t)h;
		s++;
	}
	if (!digits || s == e || *s != ',')
		goto bad;
	s++;
	uint32_t size = 0;
	digits = 0;
	while (s < e && *s >= '0' && *s <= '9') {
		if (++digits > 6)
			goto bad;
		size = size * 10 + (uint32_t)(*s - '0');
		s++;
	}
	if (!digits || s != e || size == 0 || size > TRACE_MAX_SIZE)
		goto bad;
	switch (op) {
	case 'I':
		(*instr)++;
		return 0;
	case 'L':
		rec->op = TRACE_L;
		break;
	case 'S':
		rec->op = TRACE_S;
		break;
	case 'M':
		rec->op = TRACE_M;
		break;
	default:
		goto bad;
	}
	rec->addr = addr;
	rec->size = size;
	return 1;
bad:
	log_err("trace %s: line %llu is not a lackey record "
		"(expected 'I|L|S|M hexaddr,size')", r->name,
		(unsigned long long)r->line);
	return -EINVAL;
}

/* Hex digit value + 1, 0 for anything else. */
static const uint8_t lk_hex[256] = {
	['0'] = 1, ['1'] = 2, ['2'] = 3, ['3'] = 4, ['4'] = 5,
	['5'] = 6, ['6'] = 7, ['7'] = 8, ['8'] = 9, ['9'] = 10,
	['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
	['A'] = 11, ['B'] = 12, ['C'] = 13, ['D'] = 14, ['E'] = 15, ['F'] = 16,
};

/* The longest line lk_fast reads: "I  " or " L ", 16 hex digits and one
 * byte past them, ',', 6 digits and one past, '\n'. */
#define LK_FAST_MIN 32

/* Lines exactly as valgrind writes them, "I  addr,size\n" and
 * " L|S|M addr,size\n", in one pass with no search for the newline first
 * (most of a trace's lines; the text parse was half of nvsim's time).
 * Needs LK_FAST_MIN bytes at s. Returns the bytes the line takes, with
 * *rec filled (*is_rec 1) or the instruction counted (*is_rec 0); or 0
 * for any other form, good or bad, which lk_line then judges - so this
 * accepts only what lk_line accepts, with the same result. */
static size_t lk_fast(const uint8_t *s, struct trace_rec *rec,
		      uint64_t *instr, int *is_rec)
{
	uint8_t op;
	if (s[0] == 'I' && s[1] == ' ' && s[2] == ' ')
		op = 'I';
	else if (s[0] == ' ' && (s[1] == 'L' || s[1] == 'S' || s[1] == 'M') &&
		 s[2] == ' ')
		op = s[1];
	else
		return 0;
	const uint8_t *p = s + 3;
	uint64_t addr = 0;
	unsigned digits = 0, h;
	while ((h = lk_hex[*p]) != 0) {
		if (++digits > 16)
			return 0;
		addr = addr << 4 | (h - 1);
		p++;
	}
	if (!digits || *p != ',')
		return 0;
	p++;
	uint32_t size = 0;
	digits = 0;
	while ((unsigned)(*p - '0') < 10u) {
		if (++digits > 6)
			return 0;
		size = size * 10 + (uint32_t)(*p - '0');
		p++;
	}
	if (!digits || *p != '\n' || size == 0 || size > TRACE_MAX_SIZE)
		return 0;
	if (op == 'I') {
		(*instr)++;
		*is_rec = 0;
	} else {
		rec->op = op == 'L' ? TRACE_L : op == 'S' ? TRACE_S : TRACE_M;
		rec->addr = addr;
		rec->size = size;
		*is_rec = 1;
	}
	return (size_t)(p + 1 - s);
}

static ssize_t lk_read(struct trace_reader *r, struct trace_rec *recs,
		       size_t n, uint64_t *instr)
{
	size_t got = 0;
	while (got < n) {
		if (r->len - r->pos >= LK_FAST_MIN) {
			int is_rec;
			size_t k = lk_fast(r->buf + r->pos, &recs[got], instr,
					   &is_rec);
			if (k) {
				r->line++;
				r->pos += k;
				got += (size_t)is_rec;
				continue;
			}
		}
		const char *s = (const char *)r->buf + r->pos;
		const char *end = (const char *)r->buf + r->len;
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		if (!nl) {
			if (!r->eof) {
				if (r->pos == 0 && r->len == TR_BUF) {
					log_err("trace %s: line %llu longer than %u bytes",
						r->name,
						(unsigned long long)r->line + 1,
						TR_BUF);
					return -EINVAL;
				}
				int rc = tr_fill(r);
				if (rc < 0)
					return rc;
				continue;
			}
			if (r->cut)   /* a line cut off is no record */
				return got ? (ssize_t)got : tr_cut(r);
			if (s == end)
				break;
			nl = end;   /* last line without newline */
		}
		r->line++;
		int rc = lk_line(r, s, nl, &recs[got], instr);
		r->pos = (size_t)(nl - (const char *)r->buf) + (nl < end);
		if (rc < 0)
			return rc;
		got += (size_t)rc;
	}
	return (ssize_t)got;
}

/* --- nvt ---------------------------------------------------------------- */

/* Decode a varint at r->pos. 0 ok, 1 clean end of input (only when
 * at_start), <0 error. */
static int nvt_varint(struct trace_reader *r, uint64_t *out, bool at_start)
{
	if (r->len - r->pos < 10 && !r->eof) {
		int rc = tr_fill(r);
		if (rc < 0)
			return rc;
	}
	if (r->pos == r->len && at_start) {
		if (r->cut)
			return tr_cut(r);
		if (r->want_end) {
			log_err("trace %s: truncated: no end record after %llu "
				"records (%llu bytes): its writer stopped before "
				"closing it, or a copy was cut short", r->name,
				(unsigned long long)r->nrec,
				(unsigned long long)(r->base + r->pos));
			return -EIO;
		}
		return 1;
	}
	uint64_t v = 0;
	for (unsigned sh = 0;; sh += 7) {
		if (r->pos == r->len) {
			log_err("trace %s: truncated record at byte %llu",
				r->name, (unsigned long long)(r->base + r->pos));
			return -EINVAL;
		}
		uint8_t b = r->buf[r->pos++];
		if (sh == 63 && b > 1) {
			log_err("trace %s: varint overflow at byte %llu",
				r->name, (unsigned long long)(r->base + r->pos));
			return -EINVAL;
		}
		v |= (uint64_t)(b & 0x7f) << sh;
		if (!(b & 0x80))
			break;
		if (sh == 63) {
			log_err("trace %s: varint too long at byte %llu",
				r->name, (unsigned long long)(r->base + r->pos));
			return -EINVAL;
		}
	}
	*out = v;
	return 0;
}

/* The end record, after its size 0: the count and CRC must match, and
 * nothing may follow. 0: the trace is whole (later reads return 0). */
static int nvt_end(struct trace_reader *r)
{
	uint64_t n;
	int rc = nvt_varint(r, &n, false);
	if (rc < 0)
		return rc;
	uint32_t crc = crc32c(r->crc, r->buf + r->crc_pos, r->pos - r->crc_pos);
	r->summing = false;
	if (r->len - r->pos < 4 && !r->eof && (rc = tr_fill(r)) < 0)
		return rc;
	if (r->len - r->pos < 4) {
		log_err("trace %s: truncated end record at byte %llu", r->name,
			(unsigned long long)(r->base + r->pos));
		return -EIO;
	}
	const uint8_t *c = r->buf + r->pos;
	uint32_t want = (uint32_t)c[0] | (uint32_t)c[1] << 8 |
			(uint32_t)c[2] << 16 | (uint32_t)c[3] << 24;
	r->pos += 4;
	if (n != r->nrec || crc != want) {
		log_err("trace %s: damaged: the end record says %llu records "
			"(CRC %08x), the file has %llu (CRC %08x)", r->name,
			(unsigned long long)n, want, (unsigned long long)r->nrec,
			crc);
		return -EIO;
	}
	if (r->len == r->pos && !r->eof && (rc = tr_fill(r)) < 0)
		return rc;
	if (r->len != r->pos || r->cut) {
		log_err("trace %s: data after the end record, at byte %llu",
			r->name, (unsigned long long)(r->base + r->pos));
		return -EIO;
	}
	r->want_end = false;
	return 0;
}

static ssize_t nvt_read(struct trace_reader *r, struct trace_rec *recs,
			size_t n, uint64_t *instr)
{
	size_t got = 0;
	if (r->err)
		return r->err;
	while (got < n) {
		uint64_t v;
		int rc = nvt_varint(r, &v, true);
		if (rc == 1)
			break;
		if (rc < 0) {
			/* The records before the error are good: they go
			 * out first (a log cut short by a crash still says
			 * what came before), the error with the next call. */
			r->err = rc;
			if (got)
				break;
			return rc;
		}
		unsigned kind = v & 3;
		if (kind == 3) {
			*instr += v >> 2;
			continue;
		}
		unsigned sc = (v >> 2) & 7;
		uint64_t d = v >> 5;
		struct trace_rec *rec = &recs[got];
		rec->op = (uint8_t)kind;
		if (sc < 7) {
			rec->size = 1u << sc;
			rec->addr = r->prev + ((d >> 1) ^ (0 - (d & 1)));
		} else {
			uint64_t size = 0, addr = 0;
			bool free_ok = kind == TRACE_M && (r->flags & NVT_F_FREES);
			bool bad = d != 0;
			if (!bad)
				rc = nvt_varint(r, &size, false);
			if (!bad && rc == 0 && size == 0 && kind == TRACE_L &&
			    r->want_end) {
				/* the end record: the trace is whole */
				rc = nvt_end(r);
				if (rc < 0) {
					r->err = rc;
					if (got)
						break;
					return rc;
				}
				break;
			}
			if (!bad && rc == 0)
				rc = nvt_varint(r, &addr, false);
			if (bad || rc < 0 || (size == 0 && !free_ok) ||
			    size > TRACE_MAX_SIZE) {
				if (rc >= 0)
					log_err("trace %s: bad record near byte %llu",
						r->name,
						(unsigned long long)(r->base + r->pos));
				r->err = -EINVAL;
				if (got)
					break;
				return -EINVAL;
			}
			rec->size = (uint32_t)size;
			rec->addr = addr;
			if (size == 0)
				rec->op = TRACE_FREE;
		}
		r->prev = rec->addr;
		got++;
		r->nrec++;
	}
	return (ssize_t)got;
}

ssize_t trace_read(struct trace_reader *r, struct trace_rec *recs, size_t n,
		   uint64_t *instr)
{
	if (r->fmt == TRACE_NVT)
		return nvt_read(r, recs, n, instr);
	return lk_read(r, recs, n, instr);
}
