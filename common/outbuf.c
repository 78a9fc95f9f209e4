/* outbuf.c - see outbuf.h. */
#include "common/outbuf.h"

#include <stdarg.h>
#include <stdio.h>

void outbuf_printf(struct outbuf *o, const char *fmt, ...)
{
	va_list ap;
	size_t room = o->len < o->cap ? o->cap - o->len : 0;

	va_start(ap, fmt);
	int w = vsnprintf(room ? o->p + o->len : NULL, room, fmt, ap);
	va_end(ap);
	if (w > 0)
		o->len += (size_t)w;
}

void outbuf_u64(struct outbuf *o, const char *key, uint64_t v)
{
	outbuf_printf(o, "%s: %llu\n", key, (unsigned long long)v);
}

void outbuf_u64s(struct outbuf *o, const struct outbuf_kv *kv, size_t n)
{
	for (size_t i = 0; i < n; i++)
		outbuf_u64(o, kv[i].key, kv[i].v);
}

ssize_t outbuf_done(const struct outbuf *o)
{
	if (!o->cap)
		return 0;
	return (ssize_t)(o->len < o->cap ? o->len : o->cap - 1);
}
