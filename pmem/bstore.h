/* bstore.h - a crash-consistent keyed block store in an NVRAM region: the
 * persistent allocator and index that nvcachefs (and later the tiered store
 * and the cluster's cache managers) keep their data in.
 *
 * Model: key (object id, block index) -> one fixed-size block with a valid
 * length and a dirty flag; plus a small table of per-object records (a file's
 * identity: size, a file handle, a path).
 *
 * Layout in the region (all offsets fixed by the geometry):
 *   superblock (4 KiB: magic, version, geometry, a tag, CRC32C)
 *   object table: nobjs slots x 2 records of 512 B (A/B, sequence numbered)
 *   block table:  nblocks slots x 2 records of 64 B (A/B, sequence numbered)
 *   data:         nblocks x block_size
 * Every record carries a CRC32C and a global sequence number; the newer valid
 * record of a slot is the slot's state, a torn record fails its CRC and is
 * ignored. Changing a block's data is copy-on-write: the new contents go to a
 * free block (region_stream, no flush), the data is persisted, then the new
 * block's record is persisted (the commit point), then the old block's
 * records are cleared. A crash at any point leaves either the old or the new
 * version, never a mix. Recovery keeps, per key, the record with the highest
 * sequence number and frees the rest. Metadata-only changes (valid length,
 * clean/dirty) write the other record of the same slot.
 *
 * The allocator is the block table itself: a block is in use exactly when it
 * has a valid record; the free list and the key index are rebuilt in DRAM at
 * open. When no block is free, a write evicts the least recently used clean,
 * unpinned block; when every block is dirty it fails with -ENOSPC and the
 * caller writes something back (back-pressure).
 *
 * Threads: every function may be called from any thread. One mutex guards
 * the DRAM index; writes to the same key are serialised by a striped key
 * lock; reads copy out of a pinned block without holding any lock. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pmem/region.h"

#define BSTORE_HANDLE_MAX 128
#define BSTORE_PATH_MAX 328
#define BSTORE_TAG_MAX 256

struct bstore;

struct bstore_geom {
	uint32_t block_size; /* power of two, 4 KiB .. 4 MiB */
	uint32_t nobjs;      /* object table slots */
	uint64_t nblocks;    /* data blocks */
};

/* A per-object record. id is assigned by bstore_obj_create (never 0). */
struct bstore_obj {
	uint64_t id;
	uint64_t size;        /* the object's logical size */
	uint32_t uflags;      /* the caller's flags, stored as given */
	uint32_t handle_type; /* e.g. a struct file_handle's type */
	uint32_t handle_len;  /* <= BSTORE_HANDLE_MAX */
	uint8_t handle[BSTORE_HANDLE_MAX];
	char path[BSTORE_PATH_MAX]; /* NUL-terminated, may be empty */
	/* the caller's value (a time, say), stored as given; 0 in a record
	 * written before stores kept it */
	uint64_t utime;
};

/* What a block holds, as seen by read/write. version changes with every
 * commit of the block (data or metadata). */
struct bstore_binfo {
	uint32_t valid;
	bool dirty;
	uint64_t version;
};

struct bstore_stats {
	uint64_t blocks_total, blocks_used, blocks_dirty;
	uint64_t objs_total, objs_used;
	uint64_t evictions;
	uint64_t block_size;
};

/* The geometry for a cache of about cache_bytes of data. */
void bstore_geom_for_size(uint64_t cache_bytes, uint32_t block_size,
			  struct bstore_geom *g);
/* Bytes of region a geometry needs. */
uint64_t bstore_region_size(const struct bstore_geom *g);

struct bstore_open_opts {
	struct bstore_geom geom;
	struct region_opts region; /* size and create are set by bstore */
	bool create;               /* format a missing or all-zero file */
	bool drop_clean;           /* forget clean blocks found at open */
	const char *tag;           /* stored at format; compared at reopen */
};

/* Open (and recover) or format the store in the file at path.
 * Errors: -EMEDIUMTYPE: the file holds something else, another geometry
 * or another tag (logged with the details; nothing is changed); the errors
 * of region_open. */
int bstore_open(struct bstore **out, const char *path,
		const struct bstore_open_opts *o);
void bstore_close(struct bstore *bs);
struct region *bstore_region(struct bstore *bs);
const struct bstore_geom *bstore_geom(const struct bstore *bs);

/* Objects. create fills o->id; -ENOSPC when the table is full. update
 * commits a new version of the record with o->id; -ENOENT if unknown. */
int bstore_obj_create(struct bstore *bs, struct bstore_obj *o);
int bstore_obj_update(struct bstore *bs, const struct bstore_obj *o);
int bstore_obj_get(struct bstore *bs, uint64_t id, struct bstore_obj *o);
/* Drop the object and all its blocks (dirty ones too), crash-atomically:
 * the object is first marked dead, so recovery finishes the job. */
int bstore_obj_delete(struct bstore *bs, uint64_t id);
/* The same, only while it holds no dirty block (the look and the drop in
 * one step: a write committing a dirty block meanwhile keeps it):
 * -EBUSY otherwise. A write to the dropped id fails (-ENOENT). */
int bstore_obj_delete_clean(struct bstore *bs, uint64_t id);
/* Ids of all objects, at most max of them; returns the total count. */
size_t bstore_obj_list(struct bstore *bs, uint64_t *ids, size_t max);
/* Number of blocks and of dirty blocks an object has. */
int bstore_obj_counts(struct bstore *bs, uint64_t id, uint64_t *nblocks,
		      uint64_t *ndirty);
/* Block indexes of an object (dirty ones only if dirty_only), ascending,
 * at most max; returns the total count. */
size_t bstore_obj_blocks(struct bstore *bs, uint64_t id, bool dirty_only,
			 uint64_t *idx, size_t max);

/* Write len bytes at off into block (obj, idx) and commit. The valid length
 * becomes max(old valid, off + len); a gap between the old valid length and
 * off reads as zeros. dirty: mark the block dirty (a clean write, e.g. from
 * a prefetch, keeps an existing dirty flag). With if_absent, fail with
 * -EEXIST when the block exists (a prefetch must never overwrite newer data).
 * Errors: -ENOENT (no such object), -EINVAL (range), -ENOSPC (every block
 * dirty or pinned). */
int bstore_block_write(struct bstore *bs, uint64_t obj, uint64_t idx,
		       uint32_t off, const void *buf, uint32_t len, bool dirty,
		       bool if_absent, struct bstore_binfo *info);
/* The same, but when the block is absent its new contents start from
 * base[0, base_len) (e.g. the backing file's bytes) before buf is laid over
 * them - atomically with respect to other writers of the block. */
int bstore_block_write_over(struct bstore *bs, uint64_t obj, uint64_t idx,
			    uint32_t off, const void *buf, uint32_t len,
			    const void *base, uint32_t base_len, bool dirty,
			    bool if_absent, struct bstore_binfo *info);
/* Where a write's new bytes come from: memory (buf), or fill, which puts
 * the next len bytes of a stream straight into the NVRAM block (a FUSE
 * request's pipe: one copy fewer than through a buffer). fill returns 0 or
 * -errno; after an error the block keeps its old contents. */
struct bstore_src {
	const void *buf;
	int (*fill)(void *ctx, void *dst, uint32_t len);
	void *ctx;
};
/* Flags of bstore_block_write_src. */
#define BSTORE_DIRTY     1u /* as dirty in bstore_block_write */
#define BSTORE_IF_ABSENT 2u /* as if_absent in bstore_block_write */
#define BSTORE_NEED_OLD  4u /* without base, an absent block (never cached,
			     * or evicted since the caller looked) is not
			     * started from zeros: -ENODATA, and the caller
			     * fetches the backing bytes and calls again with
			     * them as base */
#define BSTORE_GEN       8u /* the block's bytes from elsewhere (base, or
			     * src with BSTORE_IF_ABSENT) were read after gen
			     * was taken (bstore_block_gen): if the block is
			     * absent and has left the store since, -ESTALE;
			     * they may be older than what it held */
/* bstore_block_write_over with the bytes from src, and flags. */
int bstore_block_write_src(struct bstore *bs, uint64_t obj, uint64_t idx,
			   uint32_t off, const struct bstore_src *src,
			   uint32_t len, const void *base, uint32_t base_len,
			   unsigned flags, uint32_t gen,
			   struct bstore_binfo *info);
/* A token that changes whenever block (obj, idx) leaves the store
 * (eviction, drop, object deletion); keys may share a token, which only
 * costs a needless -ESTALE. Take it before reading the block's bytes from
 * the backing file, and install them with BSTORE_GEN: a version written
 * back and evicted while the read ran is not overwritten by older bytes. */
uint32_t bstore_block_gen(struct bstore *bs, uint64_t obj, uint64_t idx);
/* Copy len bytes at off out of the block; bytes past the valid length read
 * as zeros. -ENOENT if the block is not in the store. */
int bstore_block_read(struct bstore *bs, uint64_t obj, uint64_t idx,
		      uint32_t off, void *buf, uint32_t len,
		      struct bstore_binfo *info);
/* Zero-copy reading: pin the block (it is not reused, even if dropped or
 * rewritten meanwhile, until unpinned) and get a pointer to its data and
 * its info; *token is for bstore_block_unpin. -ENOENT if absent. The
 * caller reads at most info->valid bytes and charges no emulated cost. */
int bstore_block_pin(struct bstore *bs, uint64_t obj, uint64_t idx,
		     const void **data, uint32_t *token,
		     struct bstore_binfo *info);
void bstore_block_unpin(struct bstore *bs, uint32_t token);
int bstore_block_info(struct bstore *bs, uint64_t obj, uint64_t idx,
		      struct bstore_binfo *info);
/* Mark clean, only if the block is still at version (else -ESTALE: it was
 * written again meanwhile and stays dirty). */
int bstore_block_clean(struct bstore *bs, uint64_t obj, uint64_t idx,
		       uint64_t version);
/* Shrink the valid length to valid (no-op if already shorter); 0 drops it. */
int bstore_block_truncate(struct bstore *bs, uint64_t obj, uint64_t idx,
			  uint32_t valid);
int bstore_block_drop(struct bstore *bs, uint64_t obj, uint64_t idx);
/* Evict up to n clean unpinned blocks (least recently used first); returns
 * how many were evicted. */
uint64_t bstore_evict(struct bstore *bs, uint64_t n);

void bstore_stats_get(struct bstore *bs, struct bstore_stats *st);
