/* inode.c - one inode's own state: its locks, the data fd the cache reads
 * and writes the backing file through, its cache object and the record
 * the cache manager keeps of it, and fs_mgr_for, the one way to a cache
 * manager (see fs.h). */
#include "fs/fs.h"

#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct cache_mgr *fs_mgr_for(struct fs *fs, const struct fs_inode *ino,
			     uint64_t blk)
{
	if (fs->nmgr <= 1 || !ino)
		return fs->mgr[0];   /* NULL on a cluster mount: none here */
	return fs->mgr[stripe_owner(&ino->smap, blk * fs->cfg.block_size)];
}

void inode_init(struct fs_inode *ino)
{
	pthread_rwlock_init(&ino->io, NULL);
	pthread_mutex_init(&ino->lk, NULL);
	pthread_mutex_init(&ino->wb_mx, NULL);
	ino->datafd = -1;
}

void inode_destroy(struct fs_inode *ino)
{
	pthread_rwlock_destroy(&ino->io);
	pthread_mutex_destroy(&ino->lk);
	pthread_mutex_destroy(&ino->wb_mx);
}

int inode_open_errno(struct fs *fs)
{
	int e = errno;
	static struct log_limit lim;
	char note[96];
	if (e != EMFILE && e != ENFILE)
		return e;
	if (log_limit(&lim, 60, note, sizeof(note)))
		log_warn("out of file descriptors (%s): an open file holds up to "
			 "three, a file the kernel keeps looked up one (%llu data "
			 "fds now); raise the hard open-files limit (LimitNOFILE=, "
			 "ulimit -Hn) and mount again%s", strerror(e),
			 (unsigned long long)atomic_load(&fs->datafds), note);
	return e;
}

void inode_drop_datafd(struct fs *fs, struct fs_inode *ino)
{
	if (ino->datafd < 0)
		return;
	close(ino->datafd);
	ino->datafd = -1;
	atomic_fetch_sub(&fs->datafds, 1);
}

bool inode_close_unused(struct fs *fs, struct fs_inode *ino)
{
	bool closed = false;

	/* busy (a read, write, prefetch or write-back holds io): whoever
	 * finishes last calls inode_close_idle again, or the next release */
	if (pthread_rwlock_trywrlock(&ino->io) != 0)
		return false;
	pthread_mutex_lock(&ino->lk);
	if (ino->opens == 0 && ino->datafd >= 0) {
		inode_drop_datafd(fs, ino);
		closed = true;
	}
	pthread_mutex_unlock(&ino->lk);
	pthread_rwlock_unlock(&ino->io);
	return closed;
}

void inode_close_idle(struct fs *fs, struct fs_inode *ino)
{
	/* under the budget, keep it: the next open would open it again */
	if (atomic_load(&fs->datafds) <= fs->datafd_budget)
		return;
	inode_close_unused(fs, ino);
}

static int datafd_open(struct fs *fs, struct fs_inode *ino, bool wait)
{
	char proc[64];

	if (ino->datafd >= 0)
		return ino->datafd;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", ino->fd);
	/* the cache reads (prefetch) and writes (write-back) whatever mode
	 * the user opened with; an immutable file only allows reading */
	int tries = 0;
	do
		ino->datafd = open(proc, O_RDWR | O_CLOEXEC);
	while (ino->datafd < 0 && wait && fdwait_retry(&fs->fdw, &tries));
	if (ino->datafd < 0 && errno != EMFILE && errno != ENFILE)
		ino->datafd = open(proc, O_RDONLY | O_CLOEXEC);
	if (ino->datafd < 0)
		return wait ? -inode_open_errno(fs) : -errno;
	atomic_fetch_add(&fs->datafds, 1);
	return ino->datafd;
}

int inode_datafd(struct fs *fs, struct fs_inode *ino)
{
	return datafd_open(fs, ino, true);
}

int inode_datafd_nowait(struct fs *fs, struct fs_inode *ino)
{
	return datafd_open(fs, ino, false);
}

void stat_set_mtime(struct stat *st, struct timespec t)
{
	st->st_mtim = t;
	if (st->st_ctim.tv_sec < t.tv_sec ||
	    (st->st_ctim.tv_sec == t.tv_sec && st->st_ctim.tv_nsec < t.tv_nsec))
		st->st_ctim = t;
}

void stat_set_size(struct stat *st, uint64_t size)
{
	st->st_size = (off_t)size;
	if ((uint64_t)st->st_blocks * 512 < size)
		st->st_blocks = (blkcnt_t)((size + 511) / 512);
}

void inode_fix_attr(struct fs_inode *ino, struct stat *st)
{
	pthread_mutex_lock(&ino->lk);
	if (ino->mtime_dirty)
		stat_set_mtime(st, ino->mtime);
	if (ino->sized && S_ISREG(st->st_mode))
		stat_set_size(st, ino->size);
	pthread_mutex_unlock(&ino->lk);
}

int inode_utimens(struct fs_inode *ino, int fd, const char *proc,
		  const struct timespec tv[2])
{
	struct stat st;
	bool link = fstatat(ino->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISLNK(st.st_mode);
	int r;

	/* Under ino->lk: a write-back that ends puts ino->mtime back on the
	 * backing file (its own writes moved it), and must put these times,
	 * not the older ones, whichever comes first. */
	pthread_mutex_lock(&ino->lk);
	if (link)
		r = utimensat(ino->fd, "", tv, AT_EMPTY_PATH);
	else if (fd >= 0)
		r = futimens(fd, tv);
	else
		r = utimensat(AT_FDCWD, proc, tv, 0);
	r = r < 0 ? -errno : 0;
	/* The time just set is the file's; write-back keeps it. Not read
	 * back from the backing file: a write-back's write may already have
	 * moved it again. */
	if (r == 0 && ino->mtime_dirty && tv[1].tv_nsec == UTIME_NOW)
		clock_gettime(CLOCK_REALTIME, &ino->mtime);
	else if (r == 0 && ino->mtime_dirty && tv[1].tv_nsec != UTIME_OMIT)
		ino->mtime = tv[1];
	pthread_mutex_unlock(&ino->lk);
	return r;
}

/* The identity of a file for recovery: a file handle and a path. */
static void inode_identity(struct fs *fs, struct fs_inode *ino,
			   struct bstore_obj *o)
{
	struct {
		struct file_handle fh;
		unsigned char buf[BSTORE_HANDLE_MAX];
	} h;
	char proc[64], path[4096];
	size_t blen = strlen(fs->cfg.backing);
	ssize_t n;
	int mnt;

	h.fh.handle_bytes = BSTORE_HANDLE_MAX;
	if (name_to_handle_at(ino->fd, "", &h.fh, &mnt, AT_EMPTY_PATH) == 0 &&
	    h.fh.handle_bytes <= BSTORE_HANDLE_MAX) {
		o->handle_type = (uint32_t)h.fh.handle_type;
		o->handle_len = h.fh.handle_bytes;
		memcpy(o->handle, h.fh.f_handle, h.fh.handle_bytes);
	} else {
		o->handle_len = 0;
	}
	o->path[0] = 0;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", ino->fd);
	n = readlink(proc, path, sizeof(path) - 1);
	if (n > 0) {
		path[n] = 0;
		if (!strncmp(path, fs->cfg.backing, blen) && path[blen] == '/' &&
		    strlen(path + blen + 1) < BSTORE_PATH_MAX)
			snprintf(o->path, BSTORE_PATH_MAX, "%s", path + blen + 1);
	}
}

int inode_obj_ensure(struct fs *fs, struct fs_inode *ino)
{
	struct cache_mgr *m = fs_mgr_for(fs, ino, 0);
	struct bstore_obj o = { 0 };
	int ret;

	if (ino->obj)
		return 0;
	inode_identity(fs, ino, &o);
	/* unlinked before its first block: recovery must drop it too */
	if (ino->doomed)
		o.uflags |= OBJ_DOOMED;
	o.size = ino->size;
	ret = m->ops->obj_create(m, &o);
	if (ret < 0)
		return ret;
	ino->obj = o.id;
	return 0;
}

void inode_obj_save(struct fs *fs, struct fs_inode *ino, uint64_t size,
		    uint32_t set, uint32_t clear)
{
	struct cache_mgr *m = fs_mgr_for(fs, ino, 0);
	struct bstore_obj o;

	if (!ino->obj || m->ops->obj_get(m, ino->obj, &o) < 0)
		return;
	o.size = size;
	if (ino->doomed)
		o.uflags |= OBJ_DOOMED;
	o.uflags = (o.uflags | set) & ~clear;
	m->ops->obj_update(m, &o);
}

size_t inode_obj_dirty(struct fs *fs, struct fs_inode *ino)
{
	struct cache_mgr *m = fs_mgr_for(fs, ino, 0);

	return ino->obj ? m->ops->blocks(m, ino->obj, 1, NULL, 0) : 0;
}

uint64_t *inode_obj_blocks(struct fs *fs, struct fs_inode *ino,
			   bool dirty_only, size_t *n)
{
	struct cache_mgr *m = fs_mgr_for(fs, ino, 0);
	size_t cap = 64;

	*n = 0;
	if (!ino->obj)
		return NULL;
	for (;;) {
		uint64_t *idx = malloc(cap * sizeof(*idx));
		if (!idx)
			return NULL;
		*n = m->ops->blocks(m, ino->obj, dirty_only, idx, cap);
		if (*n <= cap)
			return idx;
		free(idx);
		cap = *n + 64;
	}
}

void inode_obj_delete(struct fs *fs, struct fs_inode *ino)
{
	struct cache_mgr *m = fs_mgr_for(fs, ino, 0);

	if (!ino->obj)
		return;
	m->ops->obj_delete(m, ino->obj);
	ino->obj = 0;
}

void inode_obj_release(struct fs *fs, struct fs_inode *ino)
{
	pthread_mutex_lock(&ino->lk);
	pthread_mutex_lock(&fs->wb_lk);
	bool busy = ino->opens || ino->on_dirty || ino->on_pf;
	pthread_mutex_unlock(&fs->wb_lk);
	if (ino->obj && !busy &&
	    (ino->doomed || inode_obj_dirty(fs, ino) == 0))
		inode_obj_delete(fs, ino);
	pthread_mutex_unlock(&ino->lk);
}

bool inode_obj_release_open(struct fs *fs, struct fs_inode *ino)
{
	bool freed = false;

	/* no read, write, prefetch or truncation of it under way */
	if (pthread_rwlock_trywrlock(&ino->io) != 0)
		return false;
	pthread_mutex_lock(&ino->lk);
	pthread_mutex_lock(&fs->wb_lk);
	bool busy = ino->on_dirty || ino->wb_busy || ino->on_pf;
	pthread_mutex_unlock(&fs->wb_lk);
	/* Nothing in NVRAM newer than the backing file: its blocks are
	 * clean, its size and mtime are the backing's. A later read
	 * fetches what it needs, a later write makes a new object. */
	if (ino->obj && !busy && !ino->doomed && !ino->mtime_dirty &&
	    ino->size == ino->bsize && inode_obj_dirty(fs, ino) == 0) {
		inode_obj_delete(fs, ino);
		freed = true;
	}
	pthread_mutex_unlock(&ino->lk);
	pthread_rwlock_unlock(&ino->io);
	return freed;
}
