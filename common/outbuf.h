/* outbuf.h - text written piece by piece into a fixed buffer: the stats
 * replies of the control sockets ("key: value\n" lines).
 *
 * Rules: len counts every byte asked for, written or not, so a reply that
 * does not fit is seen (outbuf_len > cap) instead of silently cut
 * mid-line; what is in the buffer is always NUL-terminated when cap > 0. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct outbuf {
	char *p;
	size_t cap;
	size_t len;
};

static inline struct outbuf outbuf_of(char *p, size_t cap)
{
	struct outbuf o = { p, cap, 0 };

	if (cap)
		p[0] = '\0';
	return o;
}

/* Append printf-formatted text; what does not fit is dropped. */
void outbuf_printf(struct outbuf *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Append the line "key: v". */
void outbuf_u64(struct outbuf *o, const char *key, uint64_t v);
/* Append a line "key: v" for each of n counters, in order. */
struct outbuf_kv {
	const char *key;
	uint64_t v;
};
void outbuf_u64s(struct outbuf *o, const struct outbuf_kv *kv, size_t n);

/* The length a control handler returns: the bytes in the buffer (at most
 * cap - 1, as snprintf leaves room for the NUL). */
ssize_t outbuf_done(const struct outbuf *o);
