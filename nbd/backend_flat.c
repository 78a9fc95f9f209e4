/* backend_flat.c - the simplest backend: one anonymous mapping the size of
 * the export, no tiers, no counters (`--store flat`). It measures the
 * protocol path alone, which tells how much of nvswapd's time the tiered
 * store costs. nvswapd's mlockall(MCL_FUTURE) faults in and locks the
 * whole mapping as it is made (1 GiB resident at start for --size 1G),
 * so the export must fit in RAM: nvswapd refuses it otherwise. TRIM
 * zeroes without giving memory back. */
#include "nbd/backend_flat.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct flat {
	uint8_t *base;
	uint64_t size;
};

static int flat_read(void *priv, void *buf, uint64_t off, uint32_t len)
{
	struct flat *f = priv;
	memcpy(buf, f->base + off, len);
	return 0;
}

/* One iovec into the mapping. Nothing to pin: pages never move here. */
static int flat_read_map(void *priv, uint64_t off, uint32_t len,
			 struct iovec *iov, unsigned max, size_t *mapped,
			 uint64_t *seen)
{
	struct flat *f = priv;
	(void)seen;     /* no policy here */
	if (!max)
		return 0;
	iov[0].iov_base = f->base + off;
	iov[0].iov_len = len;
	*mapped = len;
	return 1;
}

static void flat_read_unmap(void *priv)
{
	(void)priv;
}

static int flat_write(void *priv, const void *buf, uint64_t off, uint32_t len)
{
	struct flat *f = priv;
	memcpy(f->base + off, buf, len);
	return 0;
}

static int flat_zero(void *priv, uint64_t off, uint64_t len)
{
	struct flat *f = priv;
	memset(f->base + off, 0, len);
	return 0;
}

static int flat_flush(void *priv)
{
	(void)priv;
	return 0;
}

static ssize_t flat_stats(void *priv, char *out, size_t len)
{
	(void)priv;
	(void)len;
	(void)out;
	return 0;
}

static void flat_destroy(void *priv)
{
	struct flat *f = priv;
	munmap(f->base, f->size);
	free(f);
}

static const struct nbd_backend_ops flat_ops = {
	.read = flat_read, .write = flat_write,
	.read_map = flat_read_map, .read_unmap = flat_read_unmap,
	.trim = flat_zero,
	.zero = flat_zero, .flush = flat_flush, .stats = flat_stats,
	.destroy = flat_destroy,
};

int nbd_backend_flat_create(struct nbd_backend *be, uint64_t size)
{
	struct flat *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->size = size;
	f->base = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (f->base == MAP_FAILED) {
		free(f);
		return -ENOMEM;
	}
	be->ops = &flat_ops;
	be->priv = f;
	be->size = size;
	return 0;
}
