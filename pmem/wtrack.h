/* wtrack.h - which pages of a mapping were written since the last look:
 * the incremental checkpoints' dirty-page tracking. Linux's asynchronous
 * userfaultfd write-protection (UFFD_FEATURE_WP_ASYNC, Linux 6.7) marks a
 * page written on its first write after a look, whoever writes it (this
 * process's stores, the kernel on its behalf, process_vm_writev from
 * another rank); PAGEMAP_SCAN lists the written pages and protects them
 * again in one call. Soft-dirty bits would do too but are often not built
 * into the kernel (CONFIG_MEM_SOFT_DIRTY); this needs
 * CONFIG_USERFAULTFD and, for unprivileged users, vm.unprivileged_userfaultfd.
 *
 * Threads: one thread looks; any thread may write the memory. */
#pragma once
#include <stddef.h>
#include <stdint.h>

struct wtrack;

/* Track base..base+len (page aligned). Every page counts as written at
 * the first wtrack_collect. Errors: -ENOSYS / -EPERM / -EINVAL when the
 * kernel cannot (the reason is logged once, with what to do). */
int wtrack_open(struct wtrack **out, void *base, size_t len);
/* Set bit i of map (one bit per page, the caller's array of
 * (len / 4096 + 63) / 64 words) for each page written since the last
 * call; returns how many pages, or -errno. */
long wtrack_collect(struct wtrack *t, uint64_t *map);
void wtrack_close(struct wtrack *t);
