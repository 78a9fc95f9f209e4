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

/* RAM each page of the export costs whatever its tier, allocated (and,
 * under mlockall, locked) at start: the store's tables (tier 1, slot 4,
 * read and write counts 8, lost 1 byte) and the policy's page entry (one
 * 64-byte cache line). A lower bound (ranking policies add more), so
 * that a start is refused only when it surely cannot fit. */
#define META_PER_PAGE 78ULL
/* Each MRAM or DRAM frame: its free-list and retired-list entries. */
#define META_PER_FRAME 8ULL

/* What must live in RAM: the DRAM tier (locked at start), the MRAM tier
 * (a locked mapping, of a tmpfs file by default) and the tables. Its
 * refusal says which part to shrink. An export larger than RAM is fine
 * as long as these fit: the rest lives in the flash file. */
static int ram_check(const struct nbd_store_opts *o, uint64_t mram,
		     uint64_t dram)
{
	uint64_t pages = o->size / TIERSTORE_PAGE;
	uint64_t meta = pages * META_PER_PAGE +
			(mram + dram) / TIERSTORE_PAGE * META_PER_FRAME;
	uint64_t need = mram + dram + meta;

	char hint[160];

	if (!o->ram || need <= o->ram)
		return 0;
	if (meta >= o->ram)
		snprintf(hint, sizeof(hint), "the tables alone do not fit: "
			 "give a --size of at most about %llu GiB",
			 (unsigned long long)(o->ram / META_PER_PAGE *
					      TIERSTORE_PAGE >> 30));
	else
		snprintf(hint, sizeof(hint), "give a smaller --dram (and "
			 "--mram) with --flash FILE: the rest of the export "
			 "spills there");
	log_err("tiered store: needs at least %llu MiB of RAM (DRAM tier %llu "
		"MiB, MRAM tier %llu MiB, per-page tables %llu MiB for %llu "
		"pages), more than this machine's %llu MiB; %s",
		(unsigned long long)(need >> 20),
		(unsigned long long)(dram >> 20),
		(unsigned long long)(mram >> 20),
		(unsigned long long)(meta >> 20), (unsigned long long)pages,
		(unsigned long long)(o->ram >> 20), hint);
	return -ENOMEM;
}

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
	int rc = ram_check(o, mram, dram);
	if (rc < 0)
		return rc;
	uint64_t meta = o->size / TIERSTORE_PAGE * META_PER_PAGE;
	if (meta + dram >= (1ULL << 30))
		log_info("reserving %llu MiB of RAM (per-page tables %llu MiB, "
			 "DRAM tier %llu MiB): a while for this size; SIGTERM "
			 "stops it", (unsigned long long)((meta + dram) >> 20),
			 (unsigned long long)(meta >> 20),
			 (unsigned long long)(dram >> 20));
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
	rc = tierstore_open(&ts, &to);
	if (rc < 0)
		return rc;
	if (to.mram_pages && o->nvram_path)
		snprintf(nvram_path, sizeof(nvram_path), "%s", o->nvram_path);
	be->ops = &store_ops;
	be->priv = ts;
	be->size = o->size;
	return 0;
}
