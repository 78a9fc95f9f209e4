/* nvt.h - the project's compact binary memory-access trace format, "nvt",
 * and its writer. nvsim (pmem/trace.h reads nvt and valgrind lackey text)
 * replays these traces; the live tiered store (pmem/tracelog.h) writes its
 * own page accesses in the same format, so a recorded swap workload can be
 * replayed through every policy and memory size.
 *
 * nvt, version 1 (all integers LEB128 varints unless said otherwise):
 *   header: 8 bytes "NVTRACE1", u32 little-endian flags, u32 reserved (0)
 *   records: v = varint; kind = v & 3
 *     kind 3: instructions executed since the previous record = v >> 2
 *     kind 0/1/2 (L/S/M): sc = (v >> 2) & 7, d = v >> 5
 *        sc < 7: size = 1 << sc, address = previous address + unzigzag(d)
 *        sc == 7: size = varint, address = varint (absolute), d == 0
 *   The previous address starts at 0. The file ends after a whole record;
 *   with NVT_F_END (every file this writer makes) that record is the end
 *   record: kind 0 with sc == 7 and size 0, then varint N, the count of
 *   access and free records before it, then the CRC32C (4 bytes, little
 *   endian) of every byte from the end of the header to the end of N.
 *   With NVT_F_FREES, kind 2 with sc == 7 and size 0 is a free record: the
 *   NVT_FREE_BYTES at address (absolute, as above) lost their contents (a
 *   TRIM of a live store's page). Only in memory-level files
 *   (NVT_F_PAGES): a cache in front would still hold dirty lines of it.
 * Flags:
 *   NVT_F_PAGES - records are memory-level accesses that bypass the L2
 *     filter (L = read, S = write of `size` bytes at `addr`): the output of
 *     `nvsim convert --l2`, and the live store's access log.
 *   NVT_F_STORE - (with NVT_F_PAGES) each record is one access of a page
 *     store, as a tierstore presents it to its policy: a replay weighs an
 *     access as the page it moves (policy_config.access_lines), as the
 *     live store does, not as one cache line.
 *   NVT_F_FREES - the file may hold free records (the live store's log:
 *     a swap device's TRIMs free pages). A reader that does not know the
 *     flag refuses the file rather than misread it.
 *   NVT_F_END - the file closes with an end record (above). A file cut
 *     short (a writer killed, a copy interrupted) or changed is then an
 *     error, not a shorter trace: without it a plain file cut at a record
 *     boundary read as a whole one. Readers report flags without it.
 * A file is gzip-compressed when its name ends in ".gz"; readers take both.
 *
 * Threads: a writer belongs to one thread. */
#pragma once
#include <stdint.h>

#define NVT_MAGIC "NVTRACE1"
#define NVT_HEADER_BYTES 16
#define NVT_F_PAGES 1u
#define NVT_F_STORE 2u
#define NVT_F_FREES 4u
#define NVT_FREE_BYTES 4096u
#define NVT_F_END 8u
#define NVT_F_KNOWN (NVT_F_PAGES | NVT_F_STORE | NVT_F_FREES | NVT_F_END)
#define TRACE_MAX_SIZE 4096u   /* largest single access accepted */

/* TRACE_FREE: the page holding addr was freed (size 0; NVT_F_FREES). */
enum trace_op { TRACE_L = 0, TRACE_S = 1, TRACE_M = 2, TRACE_FREE = 3 };

struct trace_rec {
	uint64_t addr;
	uint32_t size;   /* 1 .. TRACE_MAX_SIZE; 0 for TRACE_FREE */
	uint8_t op;      /* enum trace_op */
};

struct trace_writer;
/* Create path; gzip-compressed when it ends in ".gz". 0, or -errno (logged
 * with the path: "cannot create: Permission denied"). */
int trace_writer_open(struct trace_writer **out, const char *path,
		      uint32_t flags);
/* Compress for speed (gzip level 1, not 6) from here on: for a log written
 * while the workload it records runs. No effect on a plain file. */
int trace_writer_fast(struct trace_writer *w);
/* 0, -EINVAL (bad op or size, or a TRACE_FREE into a file opened without
 * NVT_F_FREES: nothing written) or the first write error seen so far
 * (-EIO). Buffered: errors may surface on a later call. */
int trace_write(struct trace_writer *w, const struct trace_rec *rec);
int trace_write_instr(struct trace_writer *w, uint64_t n);
/* Write the end record, flush and close; returns the first error seen
 * (-EIO etc.). */
int trace_writer_close(struct trace_writer *w);
