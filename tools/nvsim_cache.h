/* nvsim_cache.h - the L2 cache in front of memory (the paper's Table 1: 1 MiB,
 * 64 B lines, direct mapped): turns a stream of CPU loads and stores into
 * the memory accesses that reach MRAM/DRAM. Write-allocate, write-back: a
 * miss reads the line from memory, evicting a dirty line writes it back.
 * nvsim runs it once per trace; its output feeds every policy and size.
 *
 * Threads: an l2 belongs to one thread. */
#pragma once
#include <stdint.h>

#include "pmem/trace.h"

/* One access reaching memory: `lines` line-sized transfers to page; or
 * (freed) the page's contents are gone, the policies forget it. idx is
 * nvsim's number for the page (policy_access_idx); the cache leaves it. */
struct mem_event {
	uint64_t page;
	uint32_t lines;
	uint32_t idx;
	uint8_t write;
	uint8_t freed;
	uint8_t whole;   /* the access covers its whole page */
};

struct l2;

/* Sizes are powers of two with line <= page, line * ways <= size.
 * Returns 0, -EINVAL or -ENOMEM. */
int l2_create(struct l2 **out, uint64_t size, uint64_t line, uint64_t ways,
	      uint64_t page);
void l2_destroy(struct l2 *c);
/* Filter one CPU access (a TRACE_FREE passes no cache: none); appends at most 2 events per line touched to ev
 * (room for 2 * (rec->size / line + 2) needed). Returns events added. */
unsigned l2_access(struct l2 *c, const struct trace_rec *rec,
		   struct mem_event *ev);
/* A memory-level record (NVT_F_PAGES traces): split into pages, no cache;
 * a TRACE_FREE is a freed event per page wholly inside its
 * NVT_FREE_BYTES (pages of 64 B at least: room for 2 * (4096 / 64 + 2)). */
unsigned l2_bypass(const struct l2 *c, const struct trace_rec *rec,
		   struct mem_event *ev);
void l2_stats(const struct l2 *c, uint64_t *hits, uint64_t *misses,
	      uint64_t *writebacks);
