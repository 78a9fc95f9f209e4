/* span.h - memory that a window checkpoints by copy (its own NVRAM, the
 * program's memory under MPI_Win_create, a region attached to a dynamic
 * window), and in incremental mode which of its pages were written in the
 * last two intervals between versions (pmem/wtrack.h).
 *
 * Why two intervals: version n+1 goes into the slot holding version n-1,
 * so the pages to copy there are those written since n-1: in the interval
 * before version n and in the one before n+1. span_collect, called once
 * per version, keeps exactly those two. A span that is not tracked (full
 * mode, or the kernel cannot) is copied whole. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "pmem/ckpt.h"

struct wtrack;

struct span {
	uint8_t *base;
	uint64_t size;
	struct wtrack *wt;        /* NULL: not tracked, copied whole */
	uint8_t *trk;             /* base rounded down to a page */
	uint64_t npages;          /* pages from trk that cover the span */
	uint64_t *dirty_cur;      /* the interval before the last one */
	uint64_t *dirty_prev;     /* the last interval */
};

/* Start tracking the span's written pages: 0, or -errno when the kernel
 * cannot (logged by wtrack) or memory is short; the span is then copied
 * whole. Every page counts as written at the first span_collect. */
int span_track(struct span *sp);
void span_untrack(struct span *sp);
/* Whether two spans have a page in common (two trackers cannot share one). */
bool span_shares_page(const struct span *a, const struct span *b);
/* Once per version, before span_copy: the pages written since the last. */
void span_collect(struct span *sp);
/* Copy the span to offset off of slot's data: all of it, or with
 * written_only (tracked spans) the pages of the last two intervals.
 * Returns the bytes copied. */
uint64_t span_copy(struct span *sp, struct ckpt *ck, int slot, uint64_t off,
		   bool written_only);
