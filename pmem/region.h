/* region.h - an NVRAM region: a file mapped with libpmem2, the only way any
 * part of nvcache touches persistent memory. Stores become durable through
 * region_persist() (or the flush + drain pair); everything else is volatile.
 *
 * Emulated hardware: no machine here has persistent memory, so the latency,
 * flush cost and bandwidth of the seed papers' NVRAM platforms can be added
 * as options (all off by default). region_read()/region_write() charge them.
 *
 * Crash testing: every persist is a numbered "persist point". With
 * region_crash_at(N) (or NVCACHE_CRASH_AT=N in the environment) the process
 * kills itself with SIGKILL just before persist point N, so a test can crash
 * a child at each point in turn and check recovery.
 *
 * Threads: any thread may call any function on an open region; the region
 * does no locking of its contents (callers own their layout). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct region;

struct region_opts {
	uint64_t size;        /* bytes; 0 = use the existing file's size */
	bool create;          /* create (or grow) the file when needed */
	bool lock;            /* mlock the mapping (swap path: never page it out) */
	uint32_t lat_ns;      /* emulated extra latency per read/write call */
	uint32_t flush_ns;    /* emulated cost per persisted cache line */
	uint64_t bw_bps;      /* emulated bandwidth, bytes/s; 0 = unlimited */
};

/* Map path. Errors: -ENOENT (missing and !create), -EACCES, -EINVAL (size 0
 * for a new file, or a file that is not regular), -ENOSPC, -ENOMEM, -EIO
 * (libpmem2 refused; the reason is logged). */
int region_open(struct region **out, const char *path,
		const struct region_opts *opts);
void region_close(struct region *r);

void *region_base(const struct region *r);
uint64_t region_size(const struct region *r);
/* "page" or "cache-line" or "byte": what libpmem2 said persisting costs. */
const char *region_granularity(const struct region *r);
/* true when the mapping's file lives on tmpfs (/dev/shm): it survives a
 * process crash, not a power loss. */
bool region_on_tmpfs(const struct region *r);

/* Durability. addr..addr+len must lie inside the region. */
void region_persist(struct region *r, const void *addr, size_t len);
void region_flush(struct region *r, const void *addr, size_t len);
void region_drain(struct region *r);
/* Copy into the region without persisting (caller persists later, once per
 * commit): the fast path for bulk data. Charges emulated write cost. */
void region_write(struct region *r, void *dst, const void *src, size_t len);
/* Like region_write, for bulk data nobody reads again soon (a checkpoint's
 * copy): stored with non-temporal stores, around the CPU caches, so the
 * copy neither reads each destination line first nor evicts the caller's
 * working set. Persist later as after region_write. */
void region_stream(struct region *r, void *dst, const void *src, size_t len);
/* Like region_write, but fill(ctx, dst, len) puts the bytes there itself
 * (read(2) from a pipe: one copy instead of two). Returns fill's result,
 * 0 or -errno; the emulated cost is charged either way. */
int region_fill(struct region *r, void *dst, uint32_t len,
		int (*fill)(void *ctx, void *dst, uint32_t len), void *ctx);
/* Copy out of the region, charging emulated read latency and bandwidth. */
void region_read(struct region *r, void *dst, const void *src, size_t len);

/* Persist points (see top). 0 disables. Process-wide. Points are counted
 * (from 0 at this call) only while armed: region_persist_points() stays
 * put otherwise; arm with a point never reached to count without a crash. */
void region_crash_at(uint64_t n);
uint64_t region_persist_points(void);
/* Crash testing of one named step between persists (a window no count of
 * persist points reaches reliably, with other threads persisting too):
 * with NVCACHE_CRASH_IN=NAME in the environment the process kills itself
 * with SIGKILL when it passes region_crash_in(NAME). Off: one compare. */
void region_crash_in(const char *name);
