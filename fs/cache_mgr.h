/* cache_mgr.h - the one interface between the file system and "the cache
 * manager that owns this stripe". On one node there is one local manager
 * (cache_local.c, an NVRAM block store); the cluster plugs remote managers
 * in behind the same ops without touching the FUSE code.
 *
 * Units: a file's data is addressed in cache blocks (block index = file
 * offset / block size); a block lies inside one stripe, so it has exactly one
 * owning manager (stripe.h). Every call is synchronous: write returns once
 * the data is persistent in the manager's NVRAM (the paper's synchronous
 * mode). Errors are -errno: -ENOENT (block or object not cached), -ENOSPC
 * (every block dirty: write something back and retry), -EEXIST (see
 * CM_IF_ABSENT), -EIO.
 *
 * Threads: every op may be called from any thread concurrently. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "pmem/bstore.h"

#define CM_DIRTY     1u /* the bytes are newer than the backing file */
#define CM_IF_ABSENT 2u /* install only if the block is not cached */
#define CM_NEED_OLD  4u /* without base: -ENODATA if the block is absent
			 * (its bytes around the write are in the backing
			 * file: fetch them and write again with them) */
#define CM_GEN       8u /* the backing bytes (base, or the bytes of a
			 * CM_IF_ABSENT install) were read after gen was
			 * taken: -ESTALE if the block is absent and was
			 * evicted or dropped since (bstore_block_gen) */

struct cache_mgr;

struct cache_mgr_ops {
	/* per-file records (identity, size) the manager keeps for recovery */
	int (*obj_create)(struct cache_mgr *m, struct bstore_obj *o);
	int (*obj_update)(struct cache_mgr *m, const struct bstore_obj *o);
	int (*obj_delete)(struct cache_mgr *m, uint64_t obj);
	int (*obj_get)(struct cache_mgr *m, uint64_t obj, struct bstore_obj *o);
	size_t (*obj_list)(struct cache_mgr *m, uint64_t *ids, size_t max);
	/* data */
	int (*read)(struct cache_mgr *m, uint64_t obj, uint64_t blk,
		    uint32_t off, void *buf, uint32_t len,
		    struct bstore_binfo *bi);
	/* the new bytes come from src (memory, or a stream copied straight
	 * into place); base/base_len: the block's backing bytes, used if it
	 * is absent */
	int (*write)(struct cache_mgr *m, uint64_t obj, uint64_t blk,
		     uint32_t off, const struct bstore_src *src, uint32_t len,
		     const void *base, uint32_t base_len, unsigned flags,
		     uint32_t gen, struct bstore_binfo *bi);
	/* the block's absence token for CM_GEN: take it before reading the
	 * block from the backing file */
	uint32_t (*gen)(struct cache_mgr *m, uint64_t obj, uint64_t blk);
	int (*info)(struct cache_mgr *m, uint64_t obj, uint64_t blk,
		    struct bstore_binfo *bi);
	/* optional zero-copy read of a local block: pin it, get its bytes;
	 * NULL for managers whose data is not in this address space */
	int (*pin)(struct cache_mgr *m, uint64_t obj, uint64_t blk,
		   const void **data, uint32_t *token, struct bstore_binfo *bi);
	void (*unpin)(struct cache_mgr *m, uint32_t token);
	/* the block at version is now in the backing file: mark it clean */
	int (*flush)(struct cache_mgr *m, uint64_t obj, uint64_t blk,
		     uint64_t version);
	/* keep only the first keep bytes of the block (0: drop it) */
	int (*drop)(struct cache_mgr *m, uint64_t obj, uint64_t blk,
		    uint32_t keep);
	/* block indexes of the object (dirty ones only if dirty_only) */
	size_t (*blocks)(struct cache_mgr *m, uint64_t obj, int dirty_only,
			 uint64_t *idx, size_t max);
	void (*stats)(struct cache_mgr *m, struct bstore_stats *st);
	void (*close)(struct cache_mgr *m);
};

struct cache_mgr {
	const struct cache_mgr_ops *ops;
	void *priv;
	uint32_t block_size;
};

/* The local manager: an NVRAM block store in the file at path. The tag is
 * the backing directory, so a store is never written back elsewhere.
 * Errors as bstore_open (each logged). */
int cache_local_open(struct cache_mgr **out, const char *path,
		     const struct bstore_open_opts *o);
