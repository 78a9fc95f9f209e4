/* stripe.h - which cache manager owns which byte of a file. A file is cut
 * into stripes of `unit` bytes dealt round robin over the managers, like a
 * parallel file system (DESIGN.md "The file system"); with stripe_unit=auto
 * each manager gets one equal part of the file (the paper's layout).
 * Pure arithmetic, no state: any thread. */
#pragma once
#include <stdint.h>

struct stripe_map {
	uint64_t unit;   /* stripe unit in bytes, a multiple of align */
	uint32_t nmgr;   /* number of cache managers, >= 1 */
	uint32_t first;  /* manager of stripe 0 (spreads small files) */
};

/* unit 0 means "auto": one equal part of file_size per manager, rounded up
 * to align (the cache block size); a file of size 0 gets align.
 * Returns 0 or -EINVAL (nmgr 0, align 0, unit not a multiple of align). */
int stripe_map_init(struct stripe_map *m, uint64_t unit, uint32_t nmgr,
		    uint32_t first, uint64_t file_size, uint32_t align);

struct stripe_loc {
	uint32_t mgr;     /* owning manager */
	uint64_t stripe;  /* stripe number in the file */
	uint64_t off;     /* offset inside the stripe */
	uint64_t len;     /* bytes of the asked range inside this stripe */
};

/* The piece of [off, off+len) that starts at off (len > 0). */
void stripe_locate(const struct stripe_map *m, uint64_t off, uint64_t len,
		   struct stripe_loc *out);
/* The manager owning the byte at off. */
uint32_t stripe_owner(const struct stripe_map *m, uint64_t off);
