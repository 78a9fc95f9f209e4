/* trace.h - memory-access traces for nvsim and the live store's --profile:
 * reading valgrind lackey output
 * and the project's compact binary format "nvt".
 *
 * Both inputs may be gzip-compressed (zlib reads plain files too).
 *
 * lackey (valgrind --tool=lackey --trace-mem=yes --log-file=F): lines
 * "I  addr,size" (an instruction fetch: only counted), " L addr,size",
 * " S addr,size", " M addr,size" (hex address, decimal size); valgrind's own
 * "==pid== ..." lines are skipped. Anything else is an error naming the line.
 *
 * nvt: the format and its writer are pmem/nvt.h (the live store writes
 * nvt too).
 *
 * Threads: a reader belongs to one thread. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "pmem/nvt.h"

enum trace_format { TRACE_AUTO, TRACE_LACKEY, TRACE_NVT };

struct trace_reader;

/* Open path ("-" = stdin). fmt TRACE_AUTO looks at the first bytes. */
int trace_open(struct trace_reader **out, const char *path,
	       enum trace_format fmt);
/* Up to n records into recs; instructions seen are added to *instr.
 * Returns the count, 0 at the end, or -EINVAL (malformed input, logged
 * with the line or byte offset) / -EIO. nvt: the good records before an
 * error come first; the error is returned by the next call, and every
 * call after it. */
ssize_t trace_read(struct trace_reader *r, struct trace_rec *recs, size_t n,
		   uint64_t *instr);
enum trace_format trace_format_of(const struct trace_reader *r);
uint32_t trace_flags(const struct trace_reader *r);
/* Fraction of the input file consumed so far, 0..1; -1 when unknown (a
 * pipe, a memory image). */
double trace_progress(const struct trace_reader *r);
void trace_close(struct trace_reader *r);

/* nvt from an in-memory buffer (fuzzing, tests): same rules as a file. */
int trace_open_mem(struct trace_reader **out, const void *buf, size_t len,
		   enum trace_format fmt);
