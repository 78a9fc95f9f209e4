/* cache_local.c - the local cache manager: cache_mgr ops over the NVRAM
 * block store of this process (pmem/bstore.h). */
#include "fs/cache_mgr.h"

#include <errno.h>
#include <stdlib.h>

static struct bstore *B(struct cache_mgr *m) { return m->priv; }

static int l_obj_create(struct cache_mgr *m, struct bstore_obj *o)
{ return bstore_obj_create(B(m), o); }
static int l_obj_update(struct cache_mgr *m, const struct bstore_obj *o)
{ return bstore_obj_update(B(m), o); }
static int l_obj_delete(struct cache_mgr *m, uint64_t obj)
{ return bstore_obj_delete(B(m), obj); }
static int l_obj_get(struct cache_mgr *m, uint64_t obj, struct bstore_obj *o)
{ return bstore_obj_get(B(m), obj, o); }
static size_t l_obj_list(struct cache_mgr *m, uint64_t *ids, size_t max)
{ return bstore_obj_list(B(m), ids, max); }

static int l_read(struct cache_mgr *m, uint64_t obj, uint64_t blk,
		  uint32_t off, void *buf, uint32_t len, struct bstore_binfo *bi)
{
	return bstore_block_read(B(m), obj, blk, off, buf, len, bi);
}

static int l_write(struct cache_mgr *m, uint64_t obj, uint64_t blk,
		   uint32_t off, const struct bstore_src *src, uint32_t len,
		   const void *base, uint32_t base_len, unsigned flags,
		   uint32_t gen, struct bstore_binfo *bi)
{
	return bstore_block_write_src(B(m), obj, blk, off, src, len, base,
				      base_len, flags, gen, bi);
}

static uint32_t l_gen(struct cache_mgr *m, uint64_t obj, uint64_t blk)
{
	return bstore_block_gen(B(m), obj, blk);
}

/* the manager's flags are the store's */
_Static_assert(CM_DIRTY == BSTORE_DIRTY && CM_IF_ABSENT == BSTORE_IF_ABSENT &&
	       CM_NEED_OLD == BSTORE_NEED_OLD && CM_GEN == BSTORE_GEN,
	       "cache_mgr flags match bstore's");

static int l_info(struct cache_mgr *m, uint64_t obj, uint64_t blk,
		  struct bstore_binfo *bi)
{
	return bstore_block_info(B(m), obj, blk, bi);
}

static int l_pin(struct cache_mgr *m, uint64_t obj, uint64_t blk,
		 const void **data, uint32_t *token, struct bstore_binfo *bi)
{
	return bstore_block_pin(B(m), obj, blk, data, token, bi);
}

static void l_unpin(struct cache_mgr *m, uint32_t token)
{
	bstore_block_unpin(B(m), token);
}

static int l_flush(struct cache_mgr *m, uint64_t obj, uint64_t blk,
		   uint64_t version)
{
	return bstore_block_clean(B(m), obj, blk, version);
}

static int l_drop(struct cache_mgr *m, uint64_t obj, uint64_t blk,
		  uint32_t keep)
{
	return bstore_block_truncate(B(m), obj, blk, keep);
}

static size_t l_blocks(struct cache_mgr *m, uint64_t obj, int dirty_only,
		       uint64_t *idx, size_t max)
{
	return bstore_obj_blocks(B(m), obj, dirty_only, idx, max);
}

static void l_stats(struct cache_mgr *m, struct bstore_stats *st)
{
	bstore_stats_get(B(m), st);
}

static void l_close(struct cache_mgr *m)
{
	bstore_close(B(m));
	free(m);
}

static const struct cache_mgr_ops local_ops = {
	.obj_create = l_obj_create, .obj_update = l_obj_update,
	.obj_delete = l_obj_delete, .obj_get = l_obj_get,
	.obj_list = l_obj_list, .read = l_read, .write = l_write, .gen = l_gen,
	.info = l_info, .pin = l_pin, .unpin = l_unpin, .flush = l_flush, .drop = l_drop,
	.blocks = l_blocks, .stats = l_stats, .close = l_close,
};

int cache_local_open(struct cache_mgr **out, const char *path,
		     const struct bstore_open_opts *o)
{
	struct cache_mgr *m = calloc(1, sizeof(*m));
	struct bstore *bs;
	int ret;

	if (!m)
		return -ENOMEM;
	ret = bstore_open(&bs, path, o);
	if (ret < 0) {
		free(m);
		return ret;
	}
	m->ops = &local_ops;
	m->priv = bs;
	m->block_size = o->geom.block_size;
	*out = m;
	return 0;
}
