/* region.c - NVRAM regions on libpmem2; see region.h. */
#include "pmem/region.h"

#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <libpmem2.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <linux/magic.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

struct region {
	int fd;
	struct pmem2_map *map;
	void *base;
	uint64_t size;
	bool locked;
	bool tmpfs;
	enum pmem2_granularity gran;
	pmem2_persist_fn persist;
	pmem2_flush_fn flush;
	pmem2_drain_fn drain;
	pmem2_memcpy_fn memcpy_fn;
	struct region_opts opts;
};

static atomic_uint_fast64_t persist_points;
static uint64_t crash_point;
static const char *crash_step;

__attribute__((constructor))
static void region_crash_env(void)
{
	const char *e = getenv("NVCACHE_CRASH_AT");
	if (e)
		crash_point = strtoull(e, NULL, 10);
	crash_step = getenv("NVCACHE_CRASH_IN");
}

void region_crash_in(const char *name)
{
	if (crash_step && !strcmp(crash_step, name)) {
		log_warn("crash test: killed in %s (NVCACHE_CRASH_IN)", name);
		raise(SIGKILL);
	}
}

void region_crash_at(uint64_t n)
{
	crash_point = n;
	atomic_store(&persist_points, 0);
}

uint64_t region_persist_points(void)
{
	return atomic_load(&persist_points);
}

/* Counted only while crash testing is armed: one counter shared by every
 * thread cost 5-6% of nvcachefs's CPU on 1 MiB writes (perf: its locked
 * add bounced between the cores). */
static void persist_point(void)
{
	if (!crash_point)
		return;
	uint64_t n = atomic_fetch_add(&persist_points, 1) + 1;
	if (n == crash_point)
		raise(SIGKILL);
}

/* persist and flush on a tmpfs file: only keep the compiler and the CPU
 * from moving stores across the persist point (see region_open). */
static void tmpfs_persist(const void *addr, size_t len)
{
	(void)addr;
	(void)len;
	atomic_thread_fence(memory_order_release);
}

/* libpmem2 returns -errno for system errors and its own PMEM2_E_* codes
 * (far below -4095) for the rest. */
static int pmem2_fail(int rc, const char *what, const char *path)
{
	log_err("NVRAM file %s: %s: %s", path, what, pmem2_errormsg());
	return rc < 0 && rc > -4096 ? rc : -EIO;
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Fault the whole mapping in now. On tmpfs every first write to a page
 * costs a fault that allocates and clears it; a cache that allocates
 * blocks round-robin would pay that on its first pass through the region
 * (measured: 4 KiB random writes at about two thirds of their steady
 * speed for the first gigabyte). Only on tmpfs: on a disk-backed file it
 * would dirty every page of the file. Not for locked regions (mlock
 * already faults them in). A file opened, not created, has its pages in
 * the page cache, written before: a read fault maps 16 of them at once
 * (fault-around), writable, as the mapping is shared and tmpfs tracks no
 * dirty pages, so reading them in costs half of writing them (200 MiB:
 * 15 against 32 ms) and a later store faults no more. A new file's pages
 * are allocated by one write fault each. */
static void region_prefault(struct region *r, const char *path, bool create)
{
	uint64_t t0 = clock_now_ns();

	if (madvise(r->base, r->size, create ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) < 0) {
		log_debug("NVRAM %s: prefault: %s (pages are faulted in on first use)",
			  path, strerror(errno));
		return;
	}
	log_info("NVRAM %s: %llu MiB faulted in in %.2f s", path,
		 (unsigned long long)(r->size >> 20), (clock_now_ns() - t0) / 1e9);
}

int region_open(struct region **out, const char *path,
		const struct region_opts *opts)
{
	struct pmem2_config *cfg = NULL;
	struct pmem2_source *src = NULL;
	struct region *r;
	struct statfs sfs;
	struct stat st;
	int flags = O_RDWR | (opts->create ? O_CREAT : 0);
	bool created = false, locked = false;
	int ret;

	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->opts = *opts;
	/* Made here, a file that then proves unusable (no room for its
	 * size) is removed, not left empty for the next try to find. */
	if (opts->create) {
		r->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		created = r->fd >= 0;
	}
	if (!created)
		r->fd = open(path, flags | O_CLOEXEC, 0600);
	if (r->fd < 0) {
		ret = -errno;
		goto fail;
	}
	/* One process per region: two daemons on one file allocate the
	 * same blocks and overwrite each other's data. The lock goes with
	 * the last descriptor (a kill -9 frees it; a fork shares it). */
	if (flock(r->fd, LOCK_EX | LOCK_NB) < 0) {
		ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
		if (ret == -EBUSY)
			log_err("NVRAM %s is in use by another process (another "
				"daemon on this file would overwrite its data)",
				path);
		goto fail;
	}
	locked = true;
	if (fstat(r->fd, &st) < 0) {
		ret = -errno;
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		goto fail;
	}
	r->size = opts->size ? opts->size : (uint64_t)st.st_size;
	if (r->size == 0) {
		ret = -EINVAL;
		goto fail;
	}
	if ((uint64_t)st.st_size < r->size) {
		if (!opts->create) {
			ret = -EINVAL;
			goto fail;
		}
		ret = posix_fallocate(r->fd, 0, (off_t)r->size);
		if (ret) {
			ret = -ret;
			goto fail;
		}
	}
	r->tmpfs = fstatfs(r->fd, &sfs) == 0 && sfs.f_type == TMPFS_MAGIC;

	if ((ret = pmem2_config_new(&cfg))) {
		ret = pmem2_fail(ret, "config", path);
		goto fail;
	}
	if ((ret = pmem2_source_from_fd(&src, r->fd))) {
		ret = pmem2_fail(ret, "source", path);
		goto fail;
	}
	/* PAGE is the weakest guarantee: accept whatever the medium gives. */
	if ((ret = pmem2_config_set_required_store_granularity(cfg,
					PMEM2_GRANULARITY_PAGE))) {
		ret = pmem2_fail(ret, "granularity", path);
		goto fail;
	}
	if ((ret = pmem2_config_set_length(cfg, r->size))) {
		ret = pmem2_fail(ret, "length", path);
		goto fail;
	}
	if ((ret = pmem2_map_new(&r->map, cfg, src))) {
		ret = pmem2_fail(ret, "map", path);
		goto fail;
	}
	pmem2_config_delete(&cfg);
	pmem2_source_delete(&src);

	r->base = pmem2_map_get_address(r->map);
	r->gran = pmem2_map_get_store_granularity(r->map);
	r->persist = pmem2_get_persist_fn(r->map);
	r->flush = pmem2_get_flush_fn(r->map);
	r->drain = pmem2_get_drain_fn(r->map);
	r->memcpy_fn = pmem2_get_memcpy_fn(r->map);
	if (r->tmpfs && r->gran == PMEM2_GRANULARITY_PAGE) {
		/* On tmpfs libpmem2's page-granularity persist and flush are
		 * msync(2), which makes nothing more durable there: the page
		 * cache is the file, a store is in it once done, and no power
		 * loss is survived either way. It cost a syscall (~5 us) per
		 * persist, three per cache block written: 1 ms per MiB. */
		r->persist = tmpfs_persist;
		r->flush = tmpfs_persist;
	}
	if (opts->lock) {
		if (mlock(r->base, r->size) < 0) {
			ret = -errno;
			log_err("NVRAM file %s: cannot lock %llu bytes in RAM: %s",
				path, (unsigned long long)r->size, strerror(-ret));
			goto fail;
		}
		r->locked = true;
	} else if (r->tmpfs) {
		region_prefault(r, path, opts->create);
	}
	log_info("NVRAM %s: %llu bytes mapped, persist granularity %s%s", path,
		 (unsigned long long)r->size, region_granularity(r),
		 r->tmpfs ? " (tmpfs: survives process crashes, not power loss; "
			    "no msync needed)" : "");
	*out = r;
	return 0;
fail:
	if (cfg)
		pmem2_config_delete(&cfg);
	if (src)
		pmem2_source_delete(&src);
	if (r->map)
		pmem2_map_delete(&r->map);
	/* Unlinked while still locked: never a file another process holds */
	if (created && locked)
		unlink(path);
	if (r->fd >= 0)
		close(r->fd);
	free(r);
	return ret;
}

void region_close(struct region *r)
{
	if (!r)
		return;
	if (r->locked)
		munlock(r->base, r->size);
	pmem2_map_delete(&r->map);
	close(r->fd);
	free(r);
}

void *region_base(const struct region *r) { return r->base; }
uint64_t region_size(const struct region *r) { return r->size; }
bool region_on_tmpfs(const struct region *r) { return r->tmpfs; }

const char *region_granularity(const struct region *r)
{
	switch (r->gran) {
	case PMEM2_GRANULARITY_BYTE: return "byte";
	case PMEM2_GRANULARITY_CACHE_LINE: return "cache-line";
	default: return "page";
	}
}

static void charge_flush(const struct region *r, size_t len)
{
	if (r->opts.flush_ns)
		clock_spin_ns((uint64_t)r->opts.flush_ns * ((len + 63) / 64));
}

static void charge_access(const struct region *r, size_t len)
{
	uint64_t ns = r->opts.lat_ns;

	if (r->opts.bw_bps)
		ns += (uint64_t)len * 1000000000ull / r->opts.bw_bps;
	clock_spin_ns(ns);
}

void region_persist(struct region *r, const void *addr, size_t len)
{
	persist_point();
	charge_flush(r, len);
	r->persist(addr, len);
}

void region_flush(struct region *r, const void *addr, size_t len)
{
	charge_flush(r, len);
	r->flush(addr, len);
}

void region_drain(struct region *r)
{
	persist_point();
	r->drain();
}

void region_write(struct region *r, void *dst, const void *src, size_t len)
{
	charge_access(r, len);
	r->memcpy_fn(dst, src, len, PMEM2_F_MEM_NOFLUSH);
}

#if defined(__x86_64__)
/* Non-temporal copy (SSE2, in every x86-64): an unaligned head and tail
 * copied plainly, the rest in 64-byte steps of streaming stores, then a
 * store fence, so the bytes are ordered before later stores as plain
 * ones would be. */
static void stream_copy(void *dst, const void *src, size_t len)
{
	uint8_t *d = dst;
	const uint8_t *s = src;
	size_t head = (16 - ((uintptr_t)d & 15)) & 15;

	if (len < 256) {
		memcpy(d, s, len);
		return;
	}
	memcpy(d, s, head);
	d += head;
	s += head;
	len -= head;
	for (; len >= 64; d += 64, s += 64, len -= 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)s);
		__m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
		__m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
		_mm_stream_si128((__m128i *)d, a);
		_mm_stream_si128((__m128i *)(d + 16), b);
		_mm_stream_si128((__m128i *)(d + 32), c);
		_mm_stream_si128((__m128i *)(d + 48), e);
	}
	memcpy(d, s, len);
	_mm_sfence();
}
#else
#define stream_copy memcpy
#endif

/* libpmem2's copy streams (PMEM2_F_MEM_NONTEMPORAL) on a cache-line or
 * byte granularity map. On a page granularity map it either stores
 * through the cache (PMEM2_F_MEM_NOFLUSH: each destination line read
 * first, three memory transfers per line instead of two) or streams and
 * then msyncs the range, a system call per copy. On tmpfs, where
 * persisting is a fence (region_open), the streaming copy is made here;
 * a page granularity file elsewhere is msynced once at persist, so it is
 * copied through the cache. */
void region_stream(struct region *r, void *dst, const void *src, size_t len)
{
	charge_access(r, len);
	if (r->gran != PMEM2_GRANULARITY_PAGE)
		r->memcpy_fn(dst, src, len, PMEM2_F_MEM_NONTEMPORAL | PMEM2_F_MEM_NODRAIN);
	else if (r->tmpfs)
		stream_copy(dst, src, len);
	else
		r->memcpy_fn(dst, src, len, PMEM2_F_MEM_NOFLUSH);
}

int region_fill(struct region *r, void *dst, uint32_t len,
		int (*fill)(void *ctx, void *dst, uint32_t len), void *ctx)
{
	charge_access(r, len);
	return fill(ctx, dst, len);
}

void region_read(struct region *r, void *dst, const void *src, size_t len)
{
	charge_access(r, len);
	memcpy(dst, src, len);
}
