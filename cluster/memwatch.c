/* memwatch.c - MemAvailable and the capacity offer; see memwatch.h. */
#include "cluster/memwatch.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int memwatch_rss(uint64_t *bytes)
{
	FILE *f = fopen("/proc/self/statm", "re");
	uint64_t size, resident;

	if (!f)
		return -errno;
	int got = fscanf(f, "%" SCNu64 " %" SCNu64, &size, &resident);
	fclose(f);
	if (got != 2)
		return -EINVAL;
	*bytes = resident * (uint64_t)sysconf(_SC_PAGESIZE);
	return 0;
}

int memwatch_read(const char *path, uint64_t *total, uint64_t *available)
{
	FILE *f = fopen(path, "re");
	char line[256];
	int have = 0;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		uint64_t kb;
		if (sscanf(line, "MemTotal: %" SCNu64 " kB", &kb) == 1) {
			*total = kb * 1024;
			have |= 1;
		} else if (sscanf(line, "MemAvailable: %" SCNu64 " kB", &kb) == 1) {
			*available = kb * 1024;
			have |= 2;
		}
	}
	fclose(f);
	return have == 3 ? 0 : -EINVAL;
}

uint64_t memwatch_offer(uint64_t mem_cap, uint64_t available, uint64_t reserve,
			uint64_t used)
{
	uint64_t offer;

	if (available >= reserve)
		offer = used + (available - reserve);
	else
		offer = used > reserve - available ? used - (reserve - available) : 0;
	if (mem_cap && offer > mem_cap)
		offer = mem_cap;
	return offer;
}

uint64_t memwatch_default_reserve(uint64_t total)
{
	uint64_t r = total / 10;
	return r < (256ULL << 20) ? 256ULL << 20 : r;
}
