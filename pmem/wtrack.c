/* wtrack.c - written-page tracking with userfaultfd WP_ASYNC and
 * PAGEMAP_SCAN; see wtrack.h. The uapi definitions are repeated here:
 * Debian 12's headers (Linux 6.1) predate them; the ABI is fixed. */
#include "pmem/wtrack.h"

#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/userfaultfd.h>

struct wt_scan_arg {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
struct wt_region { uint64_t start, end, categories; };
#define WT_PAGEMAP_SCAN _IOWR('f', 16, struct wt_scan_arg)
#define WT_SCAN_WP_MATCHING 1ull
#define WT_SCAN_CHECK_WPASYNC 2ull
#define WT_PAGE_IS_WRITTEN 2ull
#define WT_FEATURE_WP_SHMEM (1ull << 12)       /* UFFD_FEATURE_WP_HUGETLBFS_SHMEM */
#define WT_FEATURE_WP_UNPOPULATED (1ull << 13)
#define WT_FEATURE_WP_ASYNC (1ull << 15)
#define WT_PAGE 4096ull
#define WT_VEC 512

struct wtrack {
	int uffd, pagemap;
	uint8_t *base;
	size_t len;
	struct wt_region vec[WT_VEC];
};

int wtrack_open(struct wtrack **out, void *base, size_t len)
{
	struct wtrack *t;
	int ret;

	if (((uintptr_t)base | len) & (WT_PAGE - 1) || !len)
		return -EINVAL;
	if (!(t = calloc(1, sizeof(*t))))
		return -ENOMEM;
	t->base = base;
	t->len = len;
	t->pagemap = -1;
	t->uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (t->uffd < 0) {
		ret = -errno;
		log_err("incremental checkpoints: userfaultfd: %s (needs CONFIG_USERFAULTFD; "
			"as a user, sysctl vm.unprivileged_userfaultfd=1)", strerror(-ret));
		goto fail;
	}
	struct uffdio_api api = { .api = UFFD_API, .features = WT_FEATURE_WP_ASYNC |
		WT_FEATURE_WP_SHMEM | WT_FEATURE_WP_UNPOPULATED };
	if (ioctl(t->uffd, UFFDIO_API, &api) < 0) {
		ret = -errno;
		log_err("incremental checkpoints: this kernel has no asynchronous "
			"userfaultfd write-protection (Linux >= 6.7): %s", strerror(-ret));
		goto fail;
	}
	struct uffdio_register reg = { .range = { (uintptr_t)base, len },
				       .mode = UFFDIO_REGISTER_MODE_WP };
	if (ioctl(t->uffd, UFFDIO_REGISTER, &reg) < 0) {
		ret = -errno;
		log_err("incremental checkpoints: cannot write-protect the window's "
			"memory: %s", strerror(-ret));
		goto fail;
	}
	t->pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (t->pagemap < 0) {
		ret = -errno;
		goto fail;
	}
	*out = t;
	return 0;
fail:
	wtrack_close(t);
	return ret;
}

long wtrack_collect(struct wtrack *t, uint64_t *map)
{
	uint64_t start = (uintptr_t)t->base, end = start + t->len;
	long pages = 0;

	while (start < end) {
		struct wt_scan_arg a = { .size = sizeof(a),
			.flags = WT_SCAN_WP_MATCHING | WT_SCAN_CHECK_WPASYNC,
			.start = start, .end = end, .vec = (uintptr_t)t->vec,
			.vec_len = WT_VEC, .category_mask = WT_PAGE_IS_WRITTEN,
			.return_mask = WT_PAGE_IS_WRITTEN };
		long n = ioctl(t->pagemap, WT_PAGEMAP_SCAN, &a);
		if (n < 0)
			return -errno;
		for (long i = 0; i < n; i++)
			for (uint64_t p = (t->vec[i].start - (uintptr_t)t->base) / WT_PAGE;
			     p < (t->vec[i].end - (uintptr_t)t->base) / WT_PAGE; p++) {
				map[p / 64] |= 1ull << (p % 64);
				pages++;
			}
		if (a.walk_end <= start)
			break;
		start = a.walk_end;
	}
	return pages;
}

void wtrack_close(struct wtrack *t)
{
	if (!t)
		return;
	if (t->uffd >= 0)
		close(t->uffd);
	if (t->pagemap >= 0)
		close(t->pagemap);
	free(t);
}
