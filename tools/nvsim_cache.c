/* nvsim_cache.c - set-associative write-back L2 filter (see nvsim_cache.h). */
#include <errno.h>
#include <stdlib.h>

#include "tools/nvsim_cache.h"

struct l2 {
	uint64_t *tag;        /* line number + 1; 0 = invalid */
	uint64_t *stamp;      /* LRU among ways (ways > 1) */
	uint8_t *dirty;
	uint64_t sets, ways, clock;
	unsigned line_shift, page_shift;
	uint64_t hits, misses, writebacks;
};

static unsigned ilog2(uint64_t v)
{
	return 63u - (unsigned)__builtin_clzll(v);
}

static int pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

int l2_create(struct l2 **out, uint64_t size, uint64_t line, uint64_t ways,
	      uint64_t page)
{
	if (!pow2(size) || !pow2(line) || !pow2(ways) || !pow2(page) ||
	    line > page || line * ways > size)
		return -EINVAL;
	struct l2 *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	uint64_t n = size / line;
	c->ways = ways;
	c->sets = n / ways;
	c->line_shift = ilog2(line);
	c->page_shift = ilog2(page);
	c->tag = calloc(n, sizeof(uint64_t));
	c->stamp = calloc(n, sizeof(uint64_t));
	c->dirty = calloc(n, 1);
	if (!c->tag || !c->stamp || !c->dirty) {
		l2_destroy(c);
		return -ENOMEM;
	}
	*out = c;
	return 0;
}

void l2_destroy(struct l2 *c)
{
	if (!c)
		return;
	free(c->tag);
	free(c->stamp);
	free(c->dirty);
	free(c);
}

static inline unsigned l2_line(struct l2 *c, uint64_t ln, int store,
			       struct mem_event *ev)
{
	uint64_t base = (ln & (c->sets - 1)) * c->ways;
	uint64_t w, victim = base;
	c->clock++;
	for (w = base; w < base + c->ways; w++) {
		if (c->tag[w] == ln + 1) {
			c->hits++;
			c->dirty[w] |= (uint8_t)store;
			c->stamp[w] = c->clock;
			return 0;
		}
		if (c->stamp[w] < c->stamp[victim])
			victim = w;
	}
	unsigned n = 0;
	c->misses++;
	if (c->tag[victim] && c->dirty[victim]) {
		uint64_t old = c->tag[victim] - 1;
		ev[n].page = old >> (c->page_shift - c->line_shift);
		ev[n].lines = 1;
		ev[n].write = 1;
		ev[n].freed = 0;
		ev[n].whole = 0;
		n++;
		c->writebacks++;
	}
	ev[n].page = ln >> (c->page_shift - c->line_shift);
	ev[n].lines = 1;
	ev[n].write = 0;
	ev[n].freed = 0;
	ev[n].whole = 0;
	n++;
	c->tag[victim] = ln + 1;
	c->dirty[victim] = (uint8_t)store;
	c->stamp[victim] = c->clock;
	return n;
}

unsigned l2_access(struct l2 *c, const struct trace_rec *rec,
		   struct mem_event *ev)
{
	if (rec->op == TRACE_FREE)
		return 0;
	uint64_t first = rec->addr >> c->line_shift;
	uint64_t last = (rec->addr + rec->size - 1) >> c->line_shift;
	int store = rec->op != TRACE_L;
	unsigned n = 0;
	if (last < first)   /* wrapped past 2^64: clamp to the top line */
		last = UINT64_MAX >> c->line_shift;
	for (uint64_t ln = first; ln <= last; ln++)
		n += l2_line(c, ln, store, ev + n);
	return n;
}

unsigned l2_bypass(const struct l2 *c, const struct trace_rec *rec,
		   struct mem_event *ev)
{
	uint64_t end = rec->addr + rec->size;
	if (end < rec->addr)
		end = UINT64_MAX;
	uint64_t psize = 1ull << c->page_shift, lsize = 1ull << c->line_shift;
	unsigned n = 0;
	if (rec->op == TRACE_FREE) {
		/* every page of ours wholly inside the freed bytes; a larger
		 * page of ours keeps its other contents, and lives on */
		uint64_t last = rec->addr + (NVT_FREE_BYTES - 1);   /* inclusive */
		if (last < rec->addr)
			last = UINT64_MAX;
		for (uint64_t a = (rec->addr + psize - 1) & ~(psize - 1);
		     a >= rec->addr && a <= last && last - a >= psize - 1; a += psize)
			ev[n++] = (struct mem_event){ .page = a >> c->page_shift, .freed = 1 };
		return n;
	}
	for (uint64_t a = rec->addr; a < end;) {
		uint64_t pend = (a | (psize - 1)) + 1;
		uint64_t e = pend < end && pend != 0 ? pend : end;
		ev[n].page = a >> c->page_shift;
		ev[n].lines = (uint32_t)((e - a + lsize - 1) >> c->line_shift);
		ev[n].write = rec->op != TRACE_L;
		ev[n].freed = 0;
		ev[n].whole = e - a == psize;
		n++;
		if (e == end)
			break;
		a = e;
	}
	return n;
}

void l2_stats(const struct l2 *c, uint64_t *hits, uint64_t *misses,
	      uint64_t *writebacks)
{
	*hits = c->hits;
	*misses = c->misses;
	*writebacks = c->writebacks;
}
