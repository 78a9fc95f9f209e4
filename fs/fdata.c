/* fdata.c - file data through the cache: reads served from NVRAM (fetching
 * missing blocks from the backing file first), writes acknowledged once
 * persisted in NVRAM, truncation applied to both. See fs.h for locking. */
#include "fs/fs.h"

#include "common/log.h"
#include "pmem/region.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <liburing.h>
#include <sys/uio.h>
#include <unistd.h>

/* Persist the size into the object record (ino->lk held). */
static void save_size(struct fs *fs, struct fs_inode *ino)
{
	inode_obj_save(fs, ino, ino->size, 0, 0);
}

int fdata_inode_init(struct fs *fs, struct fs_inode *ino)
{
	if (fs->cl)
		return fdcl_inode_init(fs, ino);
	struct stat st;
	int ret = 0;

	pthread_mutex_lock(&ino->lk);
	if (!ino->sized) {
		if (fstatat(ino->fd, "", &st, AT_EMPTY_PATH) < 0) {
			ret = -errno;
		} else {
			ino->size = ino->bsize = (uint64_t)st.st_size;
			ino->sized = true;
			stripe_map_init(&ino->smap, fs->cfg.stripe_unit, fs->nmgr,
					(uint32_t)ino->ino, ino->size,
					fs->cfg.block_size);
		}
	}
	if (ret == 0)
		ret = inode_datafd(fs, ino) < 0 ? -errno : 0;
	pthread_mutex_unlock(&ino->lk);
	return ret;
}

/* Read block blk's bytes from the backing file (up to the backing size). */
static ssize_t fetch(struct fs *fs, struct fs_inode *ino, uint64_t blk,
		     char *buf, uint64_t bsize)
{
	uint64_t start = blk * fs->cfg.block_size, want;
	ssize_t n, got = 0;

	if (start >= bsize)
		return 0;
	pthread_mutex_lock(&ino->lk);
	int fd = inode_datafd(fs, ino);
	pthread_mutex_unlock(&ino->lk);
	if (fd < 0) {
		atomic_fetch_add(&fs->st.backing_errors, 1);
		log_err("backing file for a read: %s", strerror(-fd));
		return fd;
	}
	want = bsize - start < fs->cfg.block_size ? bsize - start : fs->cfg.block_size;
	while ((uint64_t)got < want) {
		n = pread(fd, buf + got, want - (uint64_t)got,
			  (off_t)(start + (uint64_t)got));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			atomic_fetch_add(&fs->st.backing_errors, 1);
			log_err("backing read at %llu failed: %s",
				(unsigned long long)start, strerror(errno));
			return -errno;
		}
		if (n == 0)
			break;
		got += n;
	}
	return got;
}

/* A block-sized bounce buffer for backing reads, per call: worker threads
 * come and go with libfuse's thread pool. */
static char *block_buf(struct fs *fs)
{
	return malloc(fs->cfg.block_size);
}

ssize_t fdata_read(struct fs *fs, struct fs_inode *ino, uint64_t off,
		   size_t len, char *buf)
{
	if (fs->cl)
		return fdcl_read(fs, ino, off, len, buf);
	uint32_t B = fs->cfg.block_size;
	uint64_t size, bsize, obj;
	size_t done = 0;
	ssize_t ret = 0;
	char *tmp = NULL; /* only a miss needs a bounce buffer */

	pthread_rwlock_rdlock(&ino->io);
	pthread_mutex_lock(&ino->lk);
	size = ino->size;
	bsize = ino->bsize;
	obj = ino->obj;
	pthread_mutex_unlock(&ino->lk);
	if (off >= size)
		goto out;
	if (len > size - off)
		len = size - off;
	while (done < len) {
		uint64_t pos = off + done, blk = pos / B;
		uint32_t boff = (uint32_t)(pos % B);
		uint32_t n = B - boff < len - done ? B - boff : (uint32_t)(len - done);
		struct cache_mgr *m = fs_mgr_for(fs, ino, blk);
		int r = -ENOENT;

		if (obj)
			r = m->ops->read(m, obj, blk, boff, buf + done, n, NULL);
		if (r == 0) {
			atomic_fetch_add(&fs->st.hits, 1);
			done += n;
			continue;
		}
		if (r != -ENOENT) {
			ret = r;
			goto out;
		}
		atomic_fetch_add(&fs->st.misses, 1);
		if (!tmp && !(tmp = block_buf(fs))) {
			ret = -ENOMEM;
			goto out;
		}
		/* the backing size now, not as the read began: the block was
		 * just absent, and a write-back that wrote it set the size
		 * before it let it be evicted (engine.c); an older size would
		 * read it short, the rest as zeros. The object too: the
		 * absence token is per (object, block). The token before the
		 * size: a block written back (size set first) and evicted
		 * between the two would pass the check with the old size. */
		pthread_mutex_lock(&ino->lk);
		if (!obj && inode_obj_ensure(fs, ino) == 0)
			obj = ino->obj;
		uint32_t gen = obj ? m->ops->gen(m, obj, blk) : 0;
		bsize = ino->bsize;
		pthread_mutex_unlock(&ino->lk);
		ssize_t got = fetch(fs, ino, blk, tmp, bsize);
		if (got < 0) {
			ret = got;
			goto out;
		}
		if (got > 0 && obj) {
			r = m->ops->write(m, obj, blk, 0,
					  &(struct bstore_src){ .buf = tmp },
					  (uint32_t)got, NULL, 0,
					  CM_IF_ABSENT | CM_GEN, gen, NULL);
			/* someone cached it first: read that; or another
			 * writer's copy was written back and evicted while
			 * we read, and ours may be older: read again */
			if (r == -EEXIST || r == -ESTALE)
				continue;
		}
		if ((ssize_t)boff < got) {
			uint32_t c = (uint32_t)got - boff < n ? (uint32_t)got - boff : n;
			memcpy(buf + done, tmp + boff, c);
			memset(buf + done + c, 0, n - c);
		} else {
			memset(buf + done, 0, n);
		}
		done += n;
	}
	ret = (ssize_t)done;
out:
	pthread_rwlock_unlock(&ino->io);
	free(tmp);
	return ret;
}

/* Zeros to point at for the bytes of a block past its valid length. */
static const char zero_block[1u << 20];

int fdata_read_zc(struct fs *fs, struct fs_inode *ino, uint64_t off,
		  size_t len, struct iovec *iov, int maxiov,
		  struct fdata_pin *pins, int *npins, size_t *bytes)
{
	if (fs->cl)
		return -EAGAIN; /* no block is here */
	uint32_t B = fs->cfg.block_size;
	uint64_t size, obj, nblk = 0;
	size_t done = 0;
	int k = 0, ret = 0;

	*npins = 0;
	*bytes = 0;
	pthread_rwlock_rdlock(&ino->io);
	pthread_mutex_lock(&ino->lk);
	size = ino->size;
	obj = ino->obj;
	pthread_mutex_unlock(&ino->lk);
	if (off >= size)
		goto out;
	if (len > size - off)
		len = size - off;
	if (!obj) {
		ret = -EAGAIN;
		goto out;
	}
	while (done < len) {
		uint64_t pos = off + done, blk = pos / B;
		uint32_t boff = (uint32_t)(pos % B);
		uint32_t n = B - boff < len - done ? B - boff : (uint32_t)(len - done);
		struct cache_mgr *m = fs_mgr_for(fs, ino, blk);
		struct bstore_binfo bi;
		const void *data;
		uint32_t token;

		if (!m->ops->pin || k + 2 > maxiov ||
		    m->ops->pin(m, obj, blk, &data, &token, &bi) < 0) {
			ret = -EAGAIN;
			goto out;
		}
		pins[*npins].m = m;
		pins[*npins].token = token;
		(*npins)++;
		nblk++;
		uint32_t avail = bi.valid > boff ? bi.valid - boff : 0;
		if (avail > n)
			avail = n;
		if (avail)
			iov[k++] = (struct iovec){ (char *)data + boff, avail };
		if (n > avail)
			iov[k++] = (struct iovec){ (void *)zero_block, n - avail };
		done += n;
	}
	atomic_fetch_add(&fs->st.hits, nblk);
	*bytes = len;
	ret = k;
out:
	pthread_rwlock_unlock(&ino->io);
	if (ret < 0) {
		fdata_read_done(pins, *npins);
		*npins = 0;
	}
	return ret;
}

void fdata_read_done(struct fdata_pin *pins, int npins)
{
	for (int i = 0; i < npins; i++)
		pins[i].m->ops->unpin(pins[i].m, pins[i].token);
}

ssize_t fdata_write(struct fs *fs, struct fs_inode *ino, uint64_t off,
		    size_t len, const char *buf)
{
	return fdata_write_src(fs, ino, off, len, &(struct bstore_src){ .buf = buf });
}

/* What a write has committed up to end becomes the file's: its size, its
 * mtime, and a place on the dirty list. At the write's end, and before it
 * waits for space: write-back takes only bytes below the size and only
 * files on the list, so an extending write that waited with its first
 * blocks out of sight would wait for good (the cache all dirty, and none
 * of it for write-back to take). */
static void write_publish(struct fs *fs, struct fs_inode *ino, uint64_t end)
{
	pthread_mutex_lock(&ino->lk);
	if (end > ino->size) {
		ino->size = end;
		save_size(fs, ino);
	}
	clock_gettime(CLOCK_REALTIME, &ino->mtime);
	ino->mtime_dirty = true;
	ino->wgen++;
	/* on_dirty only goes false with ino->lk held (wb_main), so reading it
	 * here, after our block is committed, is race-free */
	bool listed = ino->on_dirty;
	pthread_mutex_unlock(&ino->lk);
	if (!listed)
		dirty_mark(fs, ino);
}

/* One block's part of a write: [boff, boff+n) of block blk from part.
 * Less than a whole block, and the block not cached: it starts from its
 * backing bytes. They are fetched only once the store has said the block
 * is absent (CM_NEED_OLD: -ENODATA), with the backing size as it is then:
 * an earlier look or size may be stale (write-back may have written the
 * block, grown the file, and the block been evicted since), and a block
 * started from zeros there would lose bytes already acknowledged. Past
 * the backing file's end fetch reads nothing. */
static int write_block(struct fs *fs, struct fs_inode *ino, uint64_t obj,
		       uint64_t blk, uint32_t boff, uint32_t n,
		       const struct bstore_src *part, char **tmp,
		       uint64_t end_done)
{
	struct cache_mgr *m = fs_mgr_for(fs, ino, blk);
	bool sub = boff != 0 || n < fs->cfg.block_size;
	bool fetched = false;
	ssize_t base_len = 0;
	uint32_t gen = 0;
	int r;

	for (;;) {
		r = m->ops->write(m, obj, blk, boff, part, n,
				  fetched ? *tmp : NULL, (uint32_t)base_len,
				  CM_DIRTY | (sub && !fetched ? CM_NEED_OLD : 0) |
				  (fetched ? CM_GEN : 0), gen, NULL);
		if (r == -ENODATA && !fetched) {
			if (!*tmp && !(*tmp = block_buf(fs)))
				return -ENOMEM;
			/* the token before the size (see fdata_read) */
			pthread_mutex_lock(&ino->lk);
			gen = m->ops->gen(m, obj, blk);
			uint64_t bsize = ino->bsize;
			pthread_mutex_unlock(&ino->lk);
			base_len = fetch(fs, ino, blk, *tmp, bsize);
			if (base_len < 0)
				return (int)base_len;
			if (base_len > 0)
				atomic_fetch_add(&fs->st.misses, 1);
			fetched = true;
			continue;
		}
		if (r == -ESTALE) {
			/* another writer's version of the block was written
			 * back and evicted while we fetched: fetch again */
			fetched = false;
			base_len = 0;
			continue;
		}
		if (r != -ENOSPC)
			return r;
		/* back-pressure, never ENOSPC; what this write committed so
		 * far must be visible to the write-back we wait for */
		if (end_done)
			write_publish(fs, ino, end_done);
		if (fs_caller_killed())
			return -EINTR;   /* no one left to acknowledge */
		dirty_wait_space(fs);
		/* a base fetched before the wait may be stale by now (another
		 * writer's bytes written back and evicted meanwhile) */
		fetched = false;
		base_len = 0;
	}
}

/* The object table is full: drop the cache objects (and clean blocks) of
 * up to want closed, clean files, or else of open clean ones. Returns how
 * many went. Called with no lock of another inode held. */
static size_t fdata_reclaim_objs(struct fs *fs, size_t want)
{
	struct fs_inode *cand[64];
	size_t n = itab_obj_holders(fs, false, cand, 64), freed = 0;

	for (size_t k = 0; k < n; k++) {
		struct fs_inode *i = cand[k];
		if (freed < want && pthread_mutex_trylock(&i->lk) == 0) {
			uint64_t had = i->obj;
			pthread_mutex_unlock(&i->lk);
			inode_obj_release(fs, i);
			pthread_mutex_lock(&i->lk);
			if (had && !i->obj)
				freed++;
			pthread_mutex_unlock(&i->lk);
		}
		itab_unref(fs, i);
	}
	if (freed)
		return freed;
	/* Every entry is an open file's. Open clean files give theirs up
	 * too: open files can hold the whole table (a job keeping 300 files
	 * open through a 16M cache, whose table has 256 entries, or 300
	 * inputs opened read-only, which prefetch caches), and with none
	 * given up every later write would wait for ever, unkillable, and
	 * the mount could not be unmounted. */
	n = itab_obj_holders(fs, true, cand, 64);
	for (size_t k = 0; k < n; k++) {
		if (freed < want && inode_obj_release_open(fs, cand[k]))
			freed++;
		itab_unref(fs, cand[k]);
	}
	char note[96];
	if (!freed && log_limit(&fs->table_full_log, 10, note, sizeof(note)))
		log_warn("file table full: every entry is a file with data not "
			 "yet written back; writers wait for write-back (the "
			 "table has max(256, blocks/4) entries: a larger "
			 "cache_size has more)%s", note);
	return freed;
}

ssize_t fdata_write_src(struct fs *fs, struct fs_inode *ino, uint64_t off,
			size_t len, const struct bstore_src *src)
{
	if (fs->cl)
		return fdcl_write(fs, ino, off, len, src);
	uint32_t B = fs->cfg.block_size;
	uint64_t obj;
	size_t done = 0;
	ssize_t ret = 0;
	char *tmp = NULL; /* only a partial write of an uncached block needs it */

	dirty_wait_files(fs, ino);
	pthread_rwlock_rdlock(&ino->io);
	for (;;) {
		pthread_mutex_lock(&ino->lk);
		ret = inode_obj_ensure(fs, ino);
		obj = ino->obj;
		pthread_mutex_unlock(&ino->lk);
		if (ret != -ENOSPC)
			break;
		/* object table full: reclaim closed clean files, or wait for
		 * write-back to make some clean (back-pressure, not ENOSPC) */
		if (fs_caller_killed()) {
			ret = -EINTR;
			break;
		}
		if (!fdata_reclaim_objs(fs, 16))
			dirty_wait_space(fs);
	}
	if (ret < 0)
		goto out;
	while (done < len) {
		uint64_t pos = off + done, blk = pos / B;
		uint32_t boff = (uint32_t)(pos % B);
		uint32_t n = B - boff < len - done ? B - boff : (uint32_t)(len - done);
		/* a stream's next bytes are this block's: blocks go in order */
		struct bstore_src part = *src;
		if (src->buf)
			part.buf = (const char *)src->buf + done;
		int r = write_block(fs, ino, obj, blk, boff, n, &part, &tmp,
				    done ? off + done : 0);
		if (r < 0) {
			ret = r;
			break;
		}
		done += n;
	}
	/* a write that failed part way has written its first done bytes */
	if (done) {
		write_publish(fs, ino, off + done);
		ret = (ssize_t)done;
	}
out:
	pthread_rwlock_unlock(&ino->io);
	free(tmp);
	return ret;
}

/* Drop cached bytes at and past size (ino->io held for writing). */
void fdata_trim(struct fs *fs, struct fs_inode *ino, uint64_t size)
{
	uint32_t B = fs->cfg.block_size;
	size_t n;
	uint64_t *idx = inode_obj_blocks(fs, ino, false, &n);

	if (!idx)
		return;
	for (size_t i = 0; i < n; i++) {
		uint64_t start = idx[i] * B;
		struct cache_mgr *m = fs_mgr_for(fs, ino, idx[i]);
		if (start >= size)
			m->ops->drop(m, ino->obj, idx[i], 0);
		else if (start + B > size)
			m->ops->drop(m, ino->obj, idx[i], (uint32_t)(size - start));
	}
	free(idx);
}

int fdata_truncate(struct fs *fs, struct fs_inode *ino, uint64_t size)
{
	if (fs->cl)
		return fdcl_truncate(fs, ino, size);
	int ret = 0, fd;

	pthread_rwlock_wrlock(&ino->io);
	pthread_mutex_lock(&ino->lk);
	fd = inode_datafd(fs, ino);
	if (fd < 0) {
		ret = fd;
		pthread_mutex_unlock(&ino->lk);
		goto out;
	}
	/* Crash-consistent: the intent is persisted first, so a crash
	 * anywhere below leaves the old file or the new one, never a mix
	 * (with the backing cut first and no intent, a crash before the
	 * cache and its record follow would bring the old size back, with
	 * zeros where clean data was cut off). Recovery finishes an intent
	 * it finds: cuts the backing, drops the blocks past it, then writes
	 * back (recovery.c). */
	/* Past the backing's largest file: its answer, before any intent
	 * (one recovery could not finish) is recorded. */
	if (size > fs->max_file_size) {
		ret = -EFBIG;
		pthread_mutex_unlock(&ino->lk);
		goto out;
	}
	inode_obj_save(fs, ino, size, OBJ_TRUNCATING, 0);
	if (ftruncate(fd, (off_t)size) < 0) {
		ret = -errno;
		inode_obj_save(fs, ino, ino->size, 0, OBJ_TRUNCATING);
		pthread_mutex_unlock(&ino->lk);
		goto out;
	}
	region_crash_in("truncate");   /* the backing cut, the cache not yet */
	fdata_trim(fs, ino, size);
	if (!ino->sized)
		stripe_map_init(&ino->smap, fs->cfg.stripe_unit, fs->nmgr,
				(uint32_t)ino->ino, size, fs->cfg.block_size);
	ino->size = ino->bsize = size;
	ino->sized = true;
	if (ino->mtime_dirty)
		clock_gettime(CLOCK_REALTIME, &ino->mtime);
	if (size == 0)
		ino->prefetched = true; /* nothing to fetch after O_TRUNC */
	inode_obj_save(fs, ino, size, 0, OBJ_TRUNCATING);
	pthread_mutex_unlock(&ino->lk);
out:
	pthread_rwlock_unlock(&ino->io);
	return ret;
}

void fdata_grown(struct fs *fs, struct fs_inode *ino, uint64_t size)
{
	if (fs->cl) {
		fdcl_grown(fs, ino, size);
		return;
	}
	pthread_mutex_lock(&ino->lk);
	if (size > ino->bsize)
		ino->bsize = size;
	if (size > ino->size) {
		ino->size = size;
		save_size(fs, ino);
	}
	pthread_mutex_unlock(&ino->lk);
}

/* A punch or zero range for a backing file system without PUNCH_HOLE /
 * ZERO_RANGE: zeros written through the cache where the file has bytes
 * (its size: the home's on a cluster mount, else the backing's through
 * fd), then, without KEEP_SIZE, the size grown to the range's end. */
static int punch_by_zeros(struct fs *fs, struct fs_inode *ino, int fd, int mode,
			  uint64_t off, uint64_t end)
{
	uint64_t size;
	int ret = 0;

	if (!fs->cl) {
		pthread_mutex_lock(&ino->lk);
		size = ino->size;
		pthread_mutex_unlock(&ino->lk);
	} else if ((ret = fdcl_size(fs, ino, &size)) == -ENOENT) {
		struct stat st;   /* no record at the home: the backing's */
		if (fstat(fd, &st) < 0)
			return -errno;
		size = (uint64_t)st.st_size;
		ret = 0;
	}
	for (uint64_t at = off; ret == 0 && at < end && at < size;) {
		uint64_t stop = end < size ? end : size;
		size_t n = stop - at < sizeof(zero_block) ? (size_t)(stop - at) : sizeof(zero_block);
		ssize_t w = fdata_write(fs, ino, at, n, zero_block);
		if (w <= 0)
			ret = w < 0 ? (int)w : -EIO;
		else
			at += (uint64_t)w;
	}
	if (ret == 0 && !(mode & FALLOC_FL_KEEP_SIZE))
		fdata_grown(fs, ino, end);
	return ret;
}

/* The cache's part of a punch of [off, end) (ino->io held for writing,
 * so no write, read, prefetch or write-back of the file runs, and a dirty
 * block stays dirty and cached). *wrote: a dirty block got zeros.
 * -ENOSPC: no block free for a dirty edge block's new copy. */
static int punch_cache(struct fs *fs, struct fs_inode *ino, uint64_t off,
		       uint64_t end, bool *wrote)
{
	uint32_t B = fs->cfg.block_size;
	size_t n;
	uint64_t *idx;
	int ret = 0;

	if (!ino->obj)
		return 0;
	if (!(idx = inode_obj_blocks(fs, ino, false, &n)))
		return -ENOMEM;
	for (size_t i = 0; i < n && ret == 0; i++) {
		uint64_t start = idx[i] * B;
		if (start >= end || start + B <= off)
			continue;
		struct cache_mgr *m = fs_mgr_for(fs, ino, idx[i]);
		struct bstore_binfo bi;
		if (m->ops->info(m, ino->obj, idx[i], &bi) < 0)
			continue;
		bool inside = start >= off && start + B <= end;
		if (inside || !bi.dirty) {
			/* zeros now, or the backing file's bytes */
			m->ops->drop(m, ino->obj, idx[i], 0);
			continue;
		}
		uint32_t a = off > start ? (uint32_t)(off - start) : 0;
		uint32_t z = end < start + B ? (uint32_t)(end - start) : B;
		if (a >= bi.valid)
			continue; /* the range is past the block's bytes */
		if (z > bi.valid)
			z = bi.valid;
		ret = m->ops->write(m, ino->obj, idx[i], a,
				    &(struct bstore_src){ .buf = zero_block },
				    z - a, NULL, 0, CM_DIRTY, 0, NULL);
		if (ret == 0)
			*wrote = true;
	}
	free(idx);
	return ret;
}

int fdata_punch(struct fs *fs, struct fs_inode *ino, int fd, int mode,
		uint64_t off, uint64_t len)
{
	uint64_t end = off + len;
	int r;

	if (fs->cl) {
		r = fdcl_punch(fs, ino, fd, mode, off, len);
		return r == -EOPNOTSUPP ? punch_by_zeros(fs, ino, fd, mode, off, end) : r;
	}
	bool wrote = false, listed = true;
	int ret;

	for (;;) {
		pthread_rwlock_wrlock(&ino->io);
		if (fallocate(fd, mode, (off_t)off, (off_t)len) < 0) {
			ret = -errno;
			pthread_rwlock_unlock(&ino->io);
			if (ret != -EOPNOTSUPP)
				return ret;
			return punch_by_zeros(fs, ino, fd, mode, off, end);
		}
		pthread_mutex_lock(&ino->lk);
		if (!(mode & FALLOC_FL_KEEP_SIZE) && end > ino->bsize)
			ino->bsize = end; /* ZERO_RANGE extended it */
		if (!(mode & FALLOC_FL_KEEP_SIZE) && end > ino->size) {
			ino->size = end;
			save_size(fs, ino);
		}
		ret = punch_cache(fs, ino, off, end, &wrote);
		/* a write-back pending would put an older write's time on
		 * the backing file after the punch's */
		if (ret == 0 && (wrote || ino->mtime_dirty)) {
			clock_gettime(CLOCK_REALTIME, &ino->mtime);
			ino->mtime_dirty = true;
		}
		listed = ino->on_dirty;
		pthread_mutex_unlock(&ino->lk);
		pthread_rwlock_unlock(&ino->io);
		if (ret != -ENOSPC)
			break;
		/* a dirty edge block needs a free block: let write-back make
		 * one (it takes io), then do it all again */
		dirty_wait_space(fs);
	}
	if (ret == 0 && wrote && !listed)
		dirty_mark(fs, ino);
	return ret;
}

ssize_t fdata_prefetch(struct fs *fs, struct fs_inode *ino, uint64_t *blk,
		       struct io_uring *ring)
{
	uint32_t B = fs->cfg.block_size;
	uint64_t want[PREFETCH_BATCH], b, bsize, obj;
	uint32_t gen[PREFETCH_BATCH];
	char *bufs[PREFETCH_BATCH] = { 0 };
	unsigned k = 0;
	ssize_t total = 0;
	int r;

	pthread_rwlock_rdlock(&ino->io);
	pthread_mutex_lock(&ino->lk);
	bsize = ino->bsize;
	r = inode_obj_ensure(fs, ino);
	obj = ino->obj;
	int fd = r < 0 ? r : inode_datafd(fs, ino);
	pthread_mutex_unlock(&ino->lk);
	if (fd < 0) {
		total = fd;
		goto out;
	}
	/* the next blocks not cached yet, up to a batch */
	for (b = *blk; b * B < bsize && k < PREFETCH_BATCH; b++) {
		struct cache_mgr *m = fs_mgr_for(fs, ino, b);
		if (m->ops->info(m, obj, b, NULL) == -ENOENT) {
			gen[k] = m->ops->gen(m, obj, b);
			want[k++] = b;
		}
	}
	*blk = b;
	/* the lengths from the backing size as it is now that the blocks
	 * were seen absent (see fdata_read) */
	pthread_mutex_lock(&ino->lk);
	bsize = ino->bsize;
	pthread_mutex_unlock(&ino->lk);
	for (unsigned i = 0; i < k; i++)
		if (!(bufs[i] = block_buf(fs))) {
			total = -ENOMEM;
			goto out;
		}
	/* all reads of the batch in flight at once: a parallel file system
	 * serves them in parallel */
	for (unsigned i = 0; i < k; i++) {
		uint64_t start = want[i] * B;
		uint32_t len = bsize - start < B ? (uint32_t)(bsize - start) : B;
		struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
		io_uring_prep_read(sqe, fd, bufs[i], len, start);
		io_uring_sqe_set_data64(sqe, i);
	}
	if (k && (r = io_uring_submit_and_wait(ring, k)) < 0) {
		total = r;
		goto out;
	}
	for (unsigned n = 0; n < k; n++) {
		struct io_uring_cqe *cqe;
		if (io_uring_wait_cqe(ring, &cqe) < 0) {
			total = -EIO;
			goto out;
		}
		unsigned i = (unsigned)io_uring_cqe_get_data64(cqe);
		int res = cqe->res;
		io_uring_cqe_seen(ring, cqe);
		if (res < 0) {
			atomic_fetch_add(&fs->st.backing_errors, 1);
			if (total >= 0)
				total = res;
			continue;
		}
		if (res == 0 || total < 0)
			continue;
		struct cache_mgr *m = fs_mgr_for(fs, ino, want[i]);
		r = m->ops->write(m, obj, want[i], 0,
				  &(struct bstore_src){ .buf = bufs[i] },
				  (uint32_t)res, NULL, 0, CM_IF_ABSENT | CM_GEN,
				  gen[i], NULL);
		if (r == 0)
			total += res;
		else if (r != -EEXIST && r != -ESTALE) /* newer, or maybe newer */
			total = r; /* full: prefetch never waits for space */
	}
out:
	pthread_rwlock_unlock(&ino->io);
	for (unsigned i = 0; i < PREFETCH_BATCH; i++)
		free(bufs[i]);
	return total;
}

void fdata_doom(struct fs *fs, struct fs_inode *ino)
{
	if (fs->cl) {
		fdcl_doom(fs, ino);
		return;
	}
	bool unlisted;

	pthread_mutex_lock(&ino->lk);
	/* Still open, it stays listed: its dirty blocks are not worth a
	 * write-back, but when the cache needs room they are written to
	 * the unlinked backing inode (its data fd still reaches it) and so
	 * made evictable. Unlisted, a deleted open file with more dirty
	 * data than the cache would hang every writer on the mount. */
	unlisted = ino->opens == 0 && dirty_forget(fs, ino);
	if (!ino->doomed) {
		ino->doomed = true;
		if (ino->obj) {
			if (inode_obj_dirty(fs, ino))
				atomic_fetch_add(&fs->st.dropped_unlinked, 1);
			if (ino->opens == 0) {
				inode_obj_delete(fs, ino);
			} else {
				save_size(fs, ino); /* persists OBJ_DOOMED */
			}
		}
	}
	pthread_mutex_unlock(&ino->lk);
	if (unlisted)
		itab_unref(fs, ino);
}

bool fdata_open(struct fs *fs, struct fs_inode *ino, int flags, bool created)
{
	bool prefetch;

	itab_ref(fs, ino);
	pthread_mutex_lock(&ino->lk);
	ino->opens++;
	if ((flags & O_ACCMODE) != O_RDONLY)
		ino->writers++;
	if (created) {
		ino->created = true;
		ino->prefetched = true; /* a new file: nothing to prefetch */
	}
	/* open modes: a new or truncated file is not prefetched; anything
	 * else is, in the background (a read of a missing block fetches it) */
	prefetch = !ino->prefetched && ino->bsize > 0 && !ino->doomed;
	if (prefetch)
		ino->prefetched = true;
	pthread_mutex_unlock(&ino->lk);
	dirty_hold(fs, ino);
	return prefetch;
}

void fdata_release(struct fs *fs, struct fs_inode *ino, int flags)
{
	if (fs->cl) {
		fdcl_release(fs, ino);
		return;
	}
	bool last, doomed;

	pthread_mutex_lock(&ino->lk);
	ino->opens--;
	if ((flags & O_ACCMODE) != O_RDONLY)
		ino->writers--;
	last = ino->opens == 0;
	doomed = ino->doomed;
	pthread_mutex_unlock(&ino->lk);
	if (last && doomed) {
		/* listed while open (fdata_doom): off the list, then the
		 * object goes (if write-back holds it now, it deletes it) */
		pthread_mutex_lock(&ino->lk);   /* on_dirty changes under lk */
		bool unlisted = dirty_forget(fs, ino);
		pthread_mutex_unlock(&ino->lk);
		if (unlisted)
			itab_unref(fs, ino);
		inode_obj_release(fs, ino);
	}
	else if (last)
		dirty_schedule(fs, ino); /* write-back after the last close */
	if (last)
		inode_close_idle(fs, ino); /* the write-back opens it again */
	itab_unref(fs, ino);
}
