/* tracelog.h - the live store's access log: every page access a tierstore
 * presents to its policy, and every page it frees (TRIM), written to an nvt
 * file (pmem/nvt.h, flags NVT_F_PAGES | NVT_F_STORE | NVT_F_FREES) that
 * nvsim replays through any policy and
 * memory size ("record a live workload, replay it": docs/tiering.md).
 *
 * The swap I/O path must neither allocate nor wait on file I/O. So a
 * record goes into a preallocated single-producer, single-consumer ring
 * (a few stores, no lock, no system call), and a background thread drains
 * the ring into the file (gzip when the name ends in ".gz"). When the ring
 * is full the record is dropped and counted: the I/O never waits for the
 * log.
 *
 * Threads: trace_ring_push / tracelog_add have one caller at a time (the
 * tierstore calls it under its lock, which also makes the log's order the
 * order the policy saw); trace_ring_pop has one caller at a time (the
 * drain thread); the counters may be read from any thread. */
#pragma once
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A record's address: page * TRACELOG_PAGE + the offset in the page. */
#define TRACELOG_PAGE 4096u

/* --- the ring ------------------------------------------------------------ */

/* The producer's and the consumer's fields sit on separate cache lines,
 * and each side re-reads the other's index only when it must, so the
 * cores do not pass a line back and forth on every record. */
struct trace_ring {
	_Atomic uint64_t head;      /* next slot to fill = records accepted */
	_Atomic uint64_t dropped;   /* records refused: ring full */
	uint64_t tail_seen;         /* the producer's last look at tail */
	char pad0[64];
	_Atomic uint64_t tail;      /* next slot to drain; the consumer's */
	char pad1[64];
	uint64_t mask;              /* capacity - 1; set at init */
	uint64_t *slot;
};

/* cap: a power of two >= 2. The slots are allocated and touched here, so
 * pushing never faults. 0, -EINVAL or -ENOMEM. */
int trace_ring_init(struct trace_ring *r, size_t cap);
void trace_ring_destroy(struct trace_ring *r);
/* false when the ring is full: the record is dropped and counted. */
bool trace_ring_push(struct trace_ring *r, uint64_t v);
/* Up to n records, oldest first. Returns how many. */
size_t trace_ring_pop(struct trace_ring *r, uint64_t *out, size_t n);
/* Records accepted and dropped so far (any thread). */
void trace_ring_counts(const struct trace_ring *r, uint64_t *pushed,
		       uint64_t *dropped);

/* --- the log --------------------------------------------------------------- */

#define TRACELOG_RING_DEFAULT (1u << 18)   /* records: 2 MiB, about 5 s of
					    * 4 KiB I/O at 50k IOPS */

struct tracelog;

/* Create path (an unwritable place is refused here, logged with the path
 * and the reason) and start the drain thread. ring_records: a power of
 * two, 0 = TRACELOG_RING_DEFAULT. 0 or -errno. */
int tracelog_open(struct tracelog **out, const char *path,
		  size_t ring_records);
/* One access of page: len bytes at byte in of it (in + len <= 4096,
 * len >= 1); write or read. Never blocks, never allocates. */
void tracelog_add(struct tracelog *tl, uint64_t page, uint32_t in,
		  uint32_t len, bool write);
/* The page's contents are gone (a TRIM): the policy forgot it, and a
 * replay must too, or it keeps the page in memory the live store had
 * freed. Counted as a record. Never blocks, never allocates. */
void tracelog_free(struct tracelog *tl, uint64_t page);
/* records: accesses and frees logged (in the file once drained);
 * dropped: records lost (ring full, or the file failed). */
void tracelog_counts(struct tracelog *tl, uint64_t *records,
		     uint64_t *dropped);
/* Stop the thread after it has drained the ring, flush and close the
 * file. No tracelog_add may run any more. Returns the first write error
 * (-EIO etc.) or 0; the file's path and counts are logged. */
int tracelog_close(struct tracelog *tl);
