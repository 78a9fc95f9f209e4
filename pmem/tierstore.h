/* tierstore.h - the tiered page store behind nvswapd (and later nvcached):
 * a flat space of 4 KiB pages kept in MRAM (a libpmem2 region, locked),
 * DRAM (anonymous memory, locked) or FLASH (a spill file written with
 * io_uring). Where each page lives is the tiering policy's decision
 * (pmem/policy.h): every access is presented to it and its moves are
 * applied in order, with real copies, before the access is served.
 *
 * Semantics: a page never written, or trimmed, reads as zeros and holds no
 * memory. Byte ranges need not be page-aligned: a partial page is
 * read-modify-written. The contents are volatile: a new store starts empty
 * (swap never outlives the kernel that wrote it), so MRAM writes are not
 * persisted one by one.
 *
 * No allocation after tierstore_open(): slot tables, free lists, per-page
 * counters and the policy's own tables are all sized then, so the swap I/O
 * path never allocates. The flash file holds page N at offset N * 4096
 * (sparse; trimmed pages are punched out).
 *
 * Threads: every function may be called from any thread; one mutex guards
 * the policy, the slot tables and the page contents, so that a page moving
 * between tiers is never read half-copied. tierstore_read_map() hands out
 * frames past that mutex: see there for what keeps them stable. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "pmem/policy.h"

#define TIERSTORE_PAGE 4096U

struct tierstore;

struct tierstore_opts {
	uint64_t pages;          /* size of the page space */
	uint64_t mram_pages;     /* MRAM tier capacity (0 allowed) */
	uint64_t dram_pages;     /* DRAM tier capacity */
	const char *nvram_path;  /* MRAM file; required when mram_pages > 0 */
	const char *flash_path;  /* spill file, or NULL: then mram + dram
				  * must hold every page */
	const char *policy;      /* "lru", ... (policy_names()) */
	double alpha;            /* lowpower's factor; 0 = 0.9 (the paper) */
	uint32_t mram_lat_ns;    /* emulated MRAM latency per access, 0 = off */
	const char *trace_path;  /* access log (pmem/tracelog.h): every access
				  * presented to the policy, as nvt; or NULL */
	size_t trace_ring;       /* its ring, records; 0 = the default */
	const char *profile_path;/* a previous run's access log (trace_path
				  * of that run): each page's access count
				  * becomes the policy's profile (the paper's
				  * profiling run); or NULL */
};

struct tierstore_stats {
	uint64_t pages_used[TIER_COUNT];   /* MRAM, DRAM, FLASH */
	uint64_t pages_cap[TIER_COUNT];    /* FLASH: the page space, or 0 */
	uint64_t reads, writes;            /* page accesses */
	uint64_t zero_reads;               /* reads of pages never written */
	uint64_t trims;                    /* pages freed by TRIM/zeroing */
	uint64_t migrations;               /* MRAM <-> DRAM copies */
	uint64_t loads, writebacks, drops; /* flash in, flash out, clean drop */
	uint64_t served_mram, served_dram;
	uint64_t flash_errors;
	uint64_t pages_lost;               /* now unreadable: their bytes went
					    * with a failed flash write-back */
	uint64_t pages_unread;             /* their flash load failed; the copy
					    * there is kept, the read retried */
	uint64_t reloads;                  /* of those, read at a later try
					    * while still in memory */
	uint64_t loads_skipped;            /* loads of pages about to be
					    * written whole: no flash read */
	uint64_t trace_records, trace_dropped;   /* the access log's */
	uint64_t profile_pages;            /* pages profile_path gave a count
					    * (lru ignores them) */
};

/* Open a store. Errors (logged with what to change): -EINVAL (bad sizes,
 * no flash file while memory is smaller than the page space, a flash file
 * on tmpfs, a profile that is not an access log or is this run's log too),
 * -ENOENT (unknown policy),
 * -ENOMEM, -EIO and open/map errors (an access log that cannot be created,
 * a profile that cannot be read: its path and the reason). */
int tierstore_open(struct tierstore **out, const struct tierstore_opts *o);
/* Also flushes and closes the access log. */
void tierstore_close(struct tierstore *ts);

/* Byte-range I/O inside the page space. 0 or -EINVAL (out of range),
 * -EIO (flash I/O failed; logged). A failed flash write-back loses that
 * one page: reads of it (and partial writes) fail with -EIO until it is
 * written whole or trimmed (stats pages_lost). A failed flash read keeps
 * the page's flash copy: accesses to it fail with -EIO while the read
 * fails again, and succeed once it works (stats pages_unread, reloads).
 * Every other page, and the store, go on working. */
int tierstore_pread(struct tierstore *ts, void *buf, uint64_t off, size_t len);
int tierstore_pwrite(struct tierstore *ts, const void *buf, uint64_t off,
		     size_t len);

/* Zero-copy read: the accesses to [off, off + len) are presented to the
 * policy as tierstore_pread() presents them, then iov[] is filled with
 * where the bytes are now (adjacent frames merged; a page never written
 * points at a shared zero page). Maps at most max pages; *mapped says how
 * many bytes from off were mapped (fewer than len when max was reached, or
 * when the request is larger than memory and its own later pages evicted
 * an earlier one). Returns the iovec count, or -EINVAL, -EIO, -EOPNOTSUPP
 * (emulated MRAM latency: use tierstore_pread(), which charges it).
 *
 * After a return > 0 the caller MUST call tierstore_read_unmap(), soon
 * and on the same thread, and call no other tierstore function between:
 * until then no mapped frame is given to another page (a frame freed
 * meanwhile is retired, and reused only once no map is out), so a send
 * straight from the iovecs never carries another page's bytes. A write
 * to a mapped page itself may still change bytes being sent, as with any
 * overlapping read and write.
 *
 * *seen (in/out, per READ; start it at the READ's offset): the bytes below
 * it were presented to the policy by an earlier map of the same READ
 * whose send went out short; pieces there still in memory are not counted
 * again (page reads, heat, --trace-out). Set to the end of what this call
 * presented. */
int tierstore_read_map(struct tierstore *ts, uint64_t off, size_t len,
		       struct iovec *iov, unsigned max, size_t *mapped,
		       uint64_t *seen);
void tierstore_read_unmap(struct tierstore *ts);
/* The range reads as zeros afterwards; every whole page in it is freed
 * (policy_forget, memory slot back to its tier, flash copy punched out). */
int tierstore_trim(struct tierstore *ts, uint64_t off, uint64_t len);

void tierstore_get_stats(struct tierstore *ts, struct tierstore_stats *st);
/* Where page is, and how often it was read / written (saturating). */
enum tier tierstore_page_tier(struct tierstore *ts, uint64_t page);
void tierstore_page_counts(struct tierstore *ts, uint64_t page,
			   uint32_t *reads, uint32_t *writes);
const char *tierstore_policy_name(const struct tierstore *ts);
/* "key: value" lines for the control socket. Returns bytes written. */
ssize_t tierstore_stats_format(struct tierstore *ts, char *out, size_t len);
