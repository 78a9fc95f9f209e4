/* backend_store.c - NBD backend calls mapped onto the tiered page store. */
#include "nbd/backend_store.h"

#include "common/log.h"
#include "pmem/tierstore.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int st_read(void *priv, void *buf, uint64_t off, uint32_t len)
{
	return tierstore_pread(priv, buf, off, len);
}

static int st_read_map(void *priv, uint64_t off, uint32_t len,
		       struct iovec *iov, unsigned max, size_t *mapped,
		       uint64_t *seen)
{
	return tierstore_read_map(priv, off, len, iov, max, mapped, seen);
}

static void st_read_unmap(void *priv)
{
	tierstore_read_unmap(priv);
}

static int st_write(void *priv, const void *buf, uint64_t off, uint32_t len)
{
	return tierstore_pwrite(priv, buf, off, len);
}

/* TRIM and WRITE_ZEROES are the same here: a freed page reads as zeros,
 * and freeing is what lets `swapon --discard=pages` give memory back. */
static int st_trim(void *priv, uint64_t off, uint64_t len)
{
	return tierstore_trim(priv, off, len);
}

static int st_flush(void *priv)
{
	/* Every write is in the store before it is acknowledged; the store
	 * is volatile by design (swap contents die with the kernel). */
	(void)priv;
	return 0;
}

static ssize_t st_stats(void *priv, char *out, size_t len)
{
	return tierstore_stats_format(priv, out, len);
}

/* The MRAM file's contents mean nothing once the daemon is gone (swap
 * does not outlive it), so the file is removed rather than left holding
 * tmpfs memory. */
static char nvram_path[4096];

static void st_destroy(void *priv)
{
	tierstore_close(priv);
	if (nvram_path[0])
		unlink(nvram_path);
}

static const struct nbd_backend_ops store_ops = {
	.read = st_read, .write = st_write,
	.read_map = st_read_map, .read_unmap = st_read_unmap,
	.trim = st_trim, .zero = st_trim,
	.flush = st_flush, .stats = st_stats, .destroy = st_destroy,
};

int nbd_backend_store_create(struct nbd_backend *be,
			     const struct nbd_store_opts *o)
{
	uint64_t mram = o->mram < o->size ? o->mram : o->size;
	uint64_t dram = o->dram_set ? o->dram : o->size - mram;
	struct tierstore *ts;

	if (mram % TIERSTORE_PAGE || dram % TIERSTORE_PAGE) {
		log_err("--mram and --dram must be multiples of 4 KiB");
		return -EINVAL;
	}
	struct tierstore_opts to = {
		.pages = o->size / TIERSTORE_PAGE,
		.mram_pages = mram / TIERSTORE_PAGE,
		.dram_pages = dram / TIERSTORE_PAGE,
		.nvram_path = o->nvram_path,
		.flash_path = o->flash_path,
		.policy = o->policy,
		.trace_path = o->trace_path,
		.profile_path = o->profile_path,
	};
	int rc = tierstore_open(&ts, &to);
	if (rc < 0)
		return rc;
	if (to.mram_pages && o->nvram_path)
		snprintf(nvram_path, sizeof(nvram_path), "%s", o->nvram_path);
	be->ops = &store_ops;
	be->priv = ts;
	be->size = o->size;
	return 0;
}
