/* fuzz_trace.c - libFuzzer target for nvsim's trace readers: any bytes,
 * read as auto-detected lackey text or nvt, then through the L2 filter and
 * the page splitter. Must never crash, hang or read out of bounds. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/log.h"
#include "tools/nvsim_cache.h"
#include "pmem/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct l2 *l2;
	static int quiet;
	if (!quiet) {
		log_init("fuzz_trace", LOG_LVL_ERR);
		quiet = 1;
	}
	if (!l2 && l2_create(&l2, 1 << 16, 64, 2, 4096) < 0)
		abort();
	for (int fmt = TRACE_AUTO; fmt <= TRACE_NVT; fmt++) {
		struct trace_reader *r;
		if (trace_open_mem(&r, data, size, (enum trace_format)fmt) < 0)
			continue;
		struct trace_rec recs[64];
		struct mem_event ev[2 * (TRACE_MAX_SIZE / 64 + 2)];
		uint64_t instr = 0;
		ssize_t n;
		while ((n = trace_read(r, recs, 64, &instr)) > 0)
			for (ssize_t k = 0; k < n; k++) {
				l2_access(l2, &recs[k], ev);
				l2_bypass(l2, &recs[k], ev);
			}
		trace_close(r);
	}
	return 0;
}
