/* trace.h - memory-access traces for nvsim: reading valgrind lackey output
 * and the project's compact binary format "nvt", writing nvt.
 *
 * Both inputs may be gzip-compressed (zlib reads plain files too).
 *
 * lackey (valgrind --tool=lackey --trace-mem=yes --log-file=F): lines
 * "I  addr,size" (an instruction fetch: only counted), " L addr,size",
 * " S addr,size", " M addr,size" (hex address, decimal size); valgrind's own
 * "==pid== ..." lines are skipped. Anything else is an error naming the line.
 *
 * nvt, version 1 (all integers LEB128 varints unless said otherwise):
 *   header: 8 bytes "NVTRACE1", u32 little-endian flags, u32 reserved (0)
 *   records: v = varint; kind = v & 3
 *     kind 3: instructions executed since the previous record = v >> 2
 *     kind 0/1/2 (L/S/M): sc = (v >> 2) & 7, d = v >> 5
 *        sc < 7: size = 1 << sc, address = previous address + unzigzag(d)
 *        sc == 7: size = varint, address = varint (absolute), d == 0
 *   The previous address starts at 0. The file ends after a whole record.
 * Flags: NVT_F_PAGES - records are memory-level accesses that bypass the
 * L2 filter (the live store's own access log: L = read, S = write of
 * `size` bytes at `addr`, usually whole pages).
 *
 * Threads: a reader or writer belongs to one thread. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define NVT_MAGIC "NVTRACE1"
#define NVT_F_PAGES 1u
#define TRACE_MAX_SIZE 4096u   /* largest single access accepted */

enum trace_op { TRACE_L = 0, TRACE_S = 1, TRACE_M = 2 };
enum trace_format { TRACE_AUTO, TRACE_LACKEY, TRACE_NVT };

struct trace_rec {
	uint64_t addr;
	uint32_t size;   /* 1 .. TRACE_MAX_SIZE */
	uint8_t op;      /* enum trace_op */
};

struct trace_reader;

/* Open path ("-" = stdin). fmt TRACE_AUTO looks at the first bytes. */
int trace_open(struct trace_reader **out, const char *path,
	       enum trace_format fmt);
/* Up to n records into recs; instructions seen are added to *instr.
 * Returns the count, 0 at the end, or -EINVAL (malformed input, logged
 * with the line or byte offset) / -EIO. */
ssize_t trace_read(struct trace_reader *r, struct trace_rec *recs, size_t n,
		   uint64_t *instr);
enum trace_format trace_format_of(const struct trace_reader *r);
uint32_t trace_flags(const struct trace_reader *r);
/* Fraction of the input file consumed so far, 0..1 (0 for pipes). */
double trace_progress(const struct trace_reader *r);
void trace_close(struct trace_reader *r);

/* nvt from an in-memory buffer (fuzzing, tests): same rules as a file. */
int trace_open_mem(struct trace_reader **out, const void *buf, size_t len,
		   enum trace_format fmt);

struct trace_writer;
/* Create path; gzip-compressed when it ends in ".gz". */
int trace_writer_open(struct trace_writer **out, const char *path,
		      uint32_t flags);
int trace_write(struct trace_writer *w, const struct trace_rec *rec);
int trace_write_instr(struct trace_writer *w, uint64_t n);
/* Flush and close; returns the first error seen (-EIO etc.). */
int trace_writer_close(struct trace_writer *w);
