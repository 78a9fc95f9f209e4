/* memwatch.h - adaptive capacity: how much memory this node offers for
 * other nodes' pages, from its own MemAvailable (Nswap grows its cache while
 * RAM is idle and gives it back when local processes need it).
 *
 *   offer = min(mem_cap, used + MemAvailable - reserve)
 *
 * Pages already held are part of "used" (their memory is no longer in
 * MemAvailable), so the store grows by what is idle beyond the reserve and,
 * when MemAvailable falls under the reserve, the offer drops below what is
 * held: new stores are refused and the excess is what should migrate away.
 * Pure functions; no state. */
#pragma once
#include <stdint.h>

/* Parse MemTotal and MemAvailable (bytes) from a /proc/meminfo-format
 * file. 0 or -errno (-EINVAL: the fields are missing). */
int memwatch_read(const char *path, uint64_t *total, uint64_t *available);
/* This process's resident memory in bytes (/proc/self/statm): what the
 * pages held really cost, beside their count. 0 or -errno. */
int memwatch_rss(uint64_t *bytes);
/* The offer in bytes. mem_cap 0 = no cap from the cluster file. */
uint64_t memwatch_offer(uint64_t mem_cap, uint64_t available, uint64_t reserve,
			uint64_t used);
/* The default reserve: 10% of MemTotal, at least 256 MiB. */
uint64_t memwatch_default_reserve(uint64_t total);
