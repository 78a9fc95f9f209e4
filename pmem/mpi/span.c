/* span.c - window memory copied into checkpoints, with its written pages
 * tracked; see span.h. */
#include "pmem/mpi/span.h"

#include "pmem/wtrack.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PAGE 4096ul

static uintptr_t span_lo(const struct span *sp)
{
	return (uintptr_t)sp->base & ~(PAGE - 1);
}

static uintptr_t span_hi(const struct span *sp)
{
	return ((uintptr_t)sp->base + sp->size + PAGE - 1) & ~(PAGE - 1);
}

int span_track(struct span *sp)
{
	uintptr_t lo = span_lo(sp), hi = span_hi(sp);
	int rc;

	if (!sp->size)
		return -EINVAL;
	sp->npages = (hi - lo) / PAGE;
	sp->trk = (uint8_t *)lo;
	sp->dirty_cur = calloc((sp->npages + 63) / 64, 8);
	sp->dirty_prev = calloc((sp->npages + 63) / 64, 8);
	rc = !sp->dirty_cur || !sp->dirty_prev ? -ENOMEM :
	     wtrack_open(&sp->wt, sp->trk, hi - lo);
	if (rc)
		span_untrack(sp);
	return rc;
}

void span_untrack(struct span *sp)
{
	wtrack_close(sp->wt);
	free(sp->dirty_cur);
	free(sp->dirty_prev);
	sp->wt = NULL;
	sp->dirty_cur = sp->dirty_prev = NULL;
}

bool span_shares_page(const struct span *a, const struct span *b)
{
	return a->size && b->size && span_lo(a) < span_hi(b) && span_lo(b) < span_hi(a);
}

void span_collect(struct span *sp)
{
	uint64_t words = (sp->npages + 63) / 64, *t;

	if (!sp->wt)
		return;
	memset(sp->dirty_cur, 0, words * 8);
	if (wtrack_collect(sp->wt, sp->dirty_cur) < 0)
		memset(sp->dirty_cur, 0xff, words * 8);
	t = sp->dirty_prev;
	sp->dirty_prev = sp->dirty_cur;
	sp->dirty_cur = t;
}

uint64_t span_copy(struct span *sp, struct ckpt *ck, int slot, uint64_t off,
		   bool written_only)
{
	uint8_t *end = sp->base + sp->size;
	uint64_t copied = 0;

	if (!written_only || !sp->wt) {
		ckpt_write(ck, slot, off, sp->base, sp->size);
		return sp->size;
	}
	for (uint64_t p = 0; p < sp->npages; p++) {
		if (!((sp->dirty_prev[p / 64] | sp->dirty_cur[p / 64]) >> (p % 64) & 1))
			continue;
		uint8_t *a = sp->trk + p * PAGE, *b = a + PAGE;
		if (a < sp->base)
			a = sp->base;
		if (b > end)
			b = end;
		ckpt_write(ck, slot, off + (uint64_t)(a - sp->base), a, (uint64_t)(b - a));
		copied += (uint64_t)(b - a);
	}
	return copied;
}
