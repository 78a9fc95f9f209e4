/* model.h - the time/energy model of Hosogaya et al. (their Section 3.2 and
 * Tables 1-2): turns counts of memory accesses and page moves into an
 * estimated execution time and memory-system energy. Used by nvsim and by
 * the live tiered store (nvcachectl stats).
 *
 *   time   = cpu + sum(memory accesses x delay of the tier that served them)
 *          + flash reads x read delay + flash writes x write delay
 *          + MRAM<->DRAM migrations (64 line reads + 64 line writes)
 *   energy = dynamic (every access, flash op and the page copies a swap
 *            implies: a load writes the page into memory, a write-back reads
 *            it out) + standby power of the installed MRAM and DRAM x time.
 *
 * As in the paper: the memory side of a swap is hidden behind the flash
 * delay (costs energy, no time), a clean page that is dropped instead of
 * written costs nothing, and flash has no standby power. cpu is the
 * instruction count (lackey "I" lines) x cpu_ns_per_instruction, the
 * "computation time independent from memory accesses".
 *
 * Threads: all functions are pure over their arguments. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "pmem/policy.h"

struct model_params {
	/* per L2 line (line_bytes) access to memory */
	double dram_read_ns, dram_write_ns, mram_read_ns, mram_write_ns;
	double dram_read_nj, dram_write_nj, mram_read_nj, mram_write_nj;
	/* per page (page_bytes) flash access */
	double flash_read_ns, flash_write_ns, flash_read_nj, flash_write_nj;
	/* standby power, microwatts per MiB installed (flash: none) */
	double dram_standby_uw_mb, mram_standby_uw_mb;
	double cpu_ns_per_instruction;
	/* The L2 whose misses reach memory (nvsim): direct mapped when
	 * l2_ways == 1 (the paper's Table 1). */
	uint64_t l2_bytes, line_bytes, l2_ways, page_bytes;
};

/* The paper's Tables 1 and 2 (and cpu 0.5 ns per instruction). */
void model_params_default(struct model_params *mp);
/* Set one parameter by name ("dram_read_ns", ...). -ENOENT unknown key,
 * -EINVAL bad value (negative, not a number, sizes not a power of two). */
int model_params_set(struct model_params *mp, const char *key,
		     const char *value);
/* Read "key = value" lines ('#' comments, blank lines) over the current
 * values. Errors (-errno) are logged with file and line. */
int model_params_load(struct model_params *mp, const char *path);
/* Write every parameter as "key = value" lines; returns bytes (like
 * snprintf). */
int model_params_format(const struct model_params *mp, char *buf, size_t len);

/* What happened, in model units. */
struct model_counts {
	uint64_t line_reads[2], line_writes[2];  /* by MRAM, DRAM */
	uint64_t flash_reads, flash_writes;      /* pages */
	uint64_t migrate_in[2];                  /* pages migrated into tier */
	uint64_t loads_in[2];                    /* pages loaded into tier */
	uint64_t writes_from[2];                 /* pages written back from tier */
	uint64_t instructions;
};

/* Count `lines` line accesses served by tier (MRAM or DRAM). */
static inline void model_count_access(struct model_counts *c, enum tier t,
				      int write, uint64_t lines)
{
	if (t > TIER_DRAM)
		return;
	if (write)
		c->line_writes[t] += lines;
	else
		c->line_reads[t] += lines;
}

/* Count one move a policy asked for. */
void model_count_move(struct model_counts *c, const struct tier_move *m);

/* A load of the accessed page when the access overwrites it whole reads
 * nothing from flash (the live store skips it, flash_loads_skipped): the
 * callers leave it out of the counts. */
static inline bool model_load_skipped(const struct tier_move *m,
				      uint64_t accessed, bool whole_write)
{
	return whole_write && m->kind == MOVE_LOAD && m->page == accessed;
}

struct model_result {
	double time_s, energy_j;
	double cpu_s, mem_s, flash_s, migrate_s;
	double dynamic_j, standby_j;
};

void model_estimate(const struct model_params *mp,
		    const struct model_counts *c, uint64_t mram_bytes,
		    uint64_t dram_bytes, struct model_result *out);

/* "key: value" lines for a daemon's stats reply (nvcachectl stats):
 * model_time_s, model_energy_j and their parts. Returns bytes written
 * (at most len - 1, NUL-terminated), like snprintf. For the live store:
 * keep a struct model_counts under the store's lock, call
 * model_count_access(served, write, bytes / line_bytes) per page access
 * and model_count_move() per move applied, and append this. */
int model_stats_format(const struct model_params *mp,
		       const struct model_counts *c, uint64_t mram_bytes,
		       uint64_t dram_bytes, char *out, size_t len);
