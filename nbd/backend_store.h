/* backend_store.h - the NBD backend over the node-local tiered page store
 * (pmem/tierstore.h): MRAM + DRAM + optional flash, pages placed by a
 * tiering policy. Thread-safe (the store locks). */
#pragma once
#include "nbd/backend.h"

#include <stdbool.h>

struct nbd_store_opts {
	uint64_t size;           /* export bytes, a multiple of 4 KiB */
	uint64_t mram;           /* bytes (capped at size) */
	uint64_t dram;           /* bytes; with !dram_set: size - mram */
	bool dram_set;
	const char *flash_path;  /* or NULL */
	const char *nvram_path;  /* the MRAM file */
	const char *policy;
	const char *trace_path;  /* access log for nvsim (--trace-out), or NULL */
	const char *profile_path;/* a previous run's access log (--profile) */
	uint64_t ram;            /* bytes of RAM this machine has, or 0 (no
				  * check): a store whose locked tiers and
				  * per-page tables exceed it is refused */
};

/* 0 or -errno (logged; -ENOMEM, before any allocation, for a store that
 * cannot fit in o->ram). Fills be; be->ops->destroy closes the store. */
int nbd_backend_store_create(struct nbd_backend *be,
			     const struct nbd_store_opts *o);
