/* engine.c - the background threads of nvcachefs: write-back of the files
 * on the dirty list (dirty.c: after the last close plus a delay, at once
 * under cache pressure, everything at unmount; backing errors keep the data
 * dirty and retry with backoff), with adjacent dirty blocks joined into one
 * pwrite each; and prefetch (a file opened for use is read into the cache
 * in the background, a batch of reads in flight at once through liburing:
 * fdata_prefetch). */
#include "fs/fs.h"

#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Blocks read per write-back batch; contiguous ones go out as one write
 * (a slow parallel file system wants few large writes, not many 16 KiB
 * ones). */
#define WB_BATCH 64
#define BACKOFF_MIN_NS 500000000ull
#define BACKOFF_MAX_NS 30000000000ull


static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Write n buffers at their offsets; all or an error. Plain pwrite, not
 * io_uring: the write-back thread is in the background and each buffer is
 * a run of adjacent blocks already, so a ring gains nothing, and a write
 * a ring never completes would leave the thread waiting for good with the
 * file's io lock held (every truncate of the file would hang behind it). */
static int backing_write_batch(int fd, char **bufs, const uint32_t *lens,
			       const uint64_t *offs, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		ssize_t w = pwrite(fd, bufs[i], lens[i], (off_t)offs[i]);
		if (w != (ssize_t)lens[i])
			return w < 0 ? -errno : -ENOSPC;
	}
	return 0;
}

static void log_wb_error(struct fs_inode *ino, int err)
{
	char proc[64], path[1024];
	ssize_t n;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", ino->fd);
	n = readlink(proc, path, sizeof(path) - 1);
	path[n > 0 ? n : 0] = 0;
	log_err("write-back of %s failed: %s; the data stays dirty in NVRAM "
		"and write-back is retried", n > 0 ? path : "(unknown file)",
		strerror(-err));
}

/* Out of descriptors, the write-back is what frees them (a listed file
 * holds its O_PATH fd until written back), so it must not wait for one
 * the way a lookup does: it closes the data fds of files that are not
 * open (a cache of opens: their next use opens again) and takes one of
 * the slots. Another thread may take a slot first; so a few go, and
 * inode_datafd's wait (for the forget thread) is left as the fallback. */
#define WB_ROOM 8

static void make_room(struct fs *fs, struct fs_inode *ino)
{
	struct fs_inode *cand[4 * WB_ROOM];
	size_t n = itab_datafd_holders(fs, ino, cand, 4 * WB_ROOM), closed = 0;

	for (size_t k = 0; k < n; k++) {
		if (closed < WB_ROOM && inode_close_unused(fs, cand[k]))
			closed++;
		itab_unref(fs, cand[k]);
	}
	atomic_fetch_add(&fs->st.wb_fd_steals, closed);
}

static int writeback_pass(struct fs *fs, struct fs_inode *ino)
{
	uint32_t B = fs->cfg.block_size;
	struct cache_mgr *m = fs_mgr_for(fs, ino, 0);
	uint64_t obj, size, bsize, wgen, *idx = NULL, *ver = NULL, bytes = 0;
	char *area = NULL;
	size_t n = 0;
	int fd, ret = 0;
	struct stat st;

	pthread_rwlock_rdlock(&ino->io);
	pthread_mutex_lock(&ino->lk);
	/* a deleted file is written only while open (to its unlinked
	 * inode, for room: fdata_doom) */
	obj = ino->doomed && !ino->opens ? 0 : ino->obj;
	size = ino->size;
	bsize = ino->bsize;
	wgen = ino->wgen;
	fd = obj ? inode_datafd_nowait(fs, ino) : 0;
	pthread_mutex_unlock(&ino->lk);
	if (fd == -EMFILE || fd == -ENFILE) {
		make_room(fs, ino);
		pthread_mutex_lock(&ino->lk);
		fd = inode_datafd(fs, ino);
		pthread_mutex_unlock(&ino->lk);
	}
	if (!obj)
		goto out;
	if (fd < 0) {
		ret = fd;
		goto fail;
	}
	n = m->ops->blocks(m, obj, 1, NULL, 0);
	if (n) {
		idx = malloc(n * sizeof(*idx));
		ver = malloc(n * sizeof(*ver));
		if (!idx || !ver) {
			ret = -ENOMEM;
			goto out;
		}
		size_t n2 = m->ops->blocks(m, obj, 1, idx, n);
		if (n2 < n)
			n = n2; /* some were cleaned meanwhile */
	}
	if (!n && bsize == size)
		goto out;
	if (bsize != size && ftruncate(fd, (off_t)size) < 0) {
		ret = -errno;
		goto fail;
	}
	if (n) {
		qsort(idx, n, sizeof(*idx), cmp_u64);  /* runs become writes */
		if (!(area = malloc((size_t)WB_BATCH * B))) {
			ret = -ENOMEM;
			goto out;
		}
	}
	for (size_t i = 0; i < n; ) {
		uint32_t lens[WB_BATCH];
		uint64_t offs[WB_BATCH];
		char *bufs[WB_BATCH];
		unsigned k = 0, used = 0;       /* writes, blocks of area */
		for (; i < n && used < WB_BATCH; i++) {
			struct bstore_binfo bi;
			struct cache_mgr *o = fs_mgr_for(fs, ino, idx[i]);
			uint64_t start = idx[i] * B;
			char *buf = area + (size_t)used * B;
			ver[i] = 0;
			if (start >= size ||
			    o->ops->read(o, obj, idx[i], 0, buf, B, &bi) < 0)
				continue;
			ver[i] = bi.version;
			uint32_t len = bi.valid;
			if (start + len > size) {
				/* Bytes past the size: an extending write
				 * still going on (it sets the size once done).
				 * Written up to the size, but the block stays
				 * dirty: marked clean, it could be evicted and
				 * those acknowledged bytes read back from the
				 * backing file as zeros. */
				len = (uint32_t)(size - start);
				ver[i] = 0;
			}
			if (!len)
				continue;
			used++;
			bytes += len;
			/* the previous write ends a whole block right before
			 * this one, in the buffer as in the file: extend it */
			if (k && offs[k - 1] + lens[k - 1] == start &&
			    lens[k - 1] % B == 0 && bufs[k - 1] + lens[k - 1] == buf) {
				lens[k - 1] += len;
				continue;
			}
			offs[k] = start;
			bufs[k] = buf;
			lens[k] = len;
			k++;
		}
		if (k && (ret = backing_write_batch(fd, bufs, lens, offs, k)) < 0)
			goto fail;
	}
	if (fdatasync(fd) < 0) {
		ret = -errno;
		goto fail;
	}
	/* The backing size first: once a block is clean it can be evicted,
	 * and a partial write into it then takes its bytes from the backing
	 * file, as far as bsize says there are any (a stale bsize would start
	 * the block from zeros). */
	pthread_mutex_lock(&ino->lk);
	if (fstat(fd, &st) == 0)
		ino->bsize = (uint64_t)st.st_size;
	pthread_mutex_unlock(&ino->lk);
	/* only now, with the bytes durable in the backing file, may the
	 * cache forget that they are dirty */
	for (size_t i = 0; i < n; i++) {
		struct cache_mgr *o = fs_mgr_for(fs, ino, idx[i]);
		if (ver[i])
			o->ops->flush(o, obj, idx[i], ver[i]);
	}
	atomic_fetch_add(&fs->st.written_back, bytes);
	pthread_mutex_lock(&ino->lk);
	if (ino->mtime_dirty) {
		/* the backing file keeps the time of the last write, not of
		 * its write-back */
		struct timespec tv[2] = { { .tv_nsec = UTIME_OMIT }, ino->mtime };
		if (futimens(fd, tv) == 0 && ino->wgen == wgen)
			ino->mtime_dirty = false;
	}
	pthread_mutex_unlock(&ino->lk);
	goto out;
fail:
	atomic_fetch_add(&fs->st.backing_errors, 1);
	log_wb_error(ino, ret);
out:
	pthread_rwlock_unlock(&ino->io);
	free(area);
	free(idx);
	free(ver);
	inode_close_idle(fs, ino);
	return ret;
}

/* Passes of one file one at a time: a pass copies each dirty block and
 * writes it later; one running beside a newer pass could write its older
 * copy after the newer one was written, marked clean and evicted, and
 * the backing file would keep the older bytes. */
int engine_writeback_inode(struct fs *fs, struct fs_inode *ino)
{
	pthread_mutex_lock(&ino->wb_mx);
	int ret = writeback_pass(fs, ino);
	pthread_mutex_unlock(&ino->wb_mx);
	return ret;
}

static void *wb_main(void *arg)
{
	struct fs *fs = arg;
	struct timespec ts;

	pthread_mutex_lock(&fs->wb_lk);
	for (;;) {
		uint64_t now = clock_now_ns(), next = now + 1000000000ull;
		struct fs_inode *pick = dirty_pick(fs, now, &next);

		if (!pick) {
			/* Nothing can be written: waking the writers now
			 * would only have them ask again at once (a spin
			 * at full CPU); they retry at their wait's end. */
			fs->wb_urgent = false;
			if (fs->stop)
				break;
			clock_deadline(&ts, next - now);
			pthread_cond_timedwait(&fs->wb_cv, &fs->wb_lk, &ts);
			continue;
		}
		pick->wb_busy = true;
		pthread_mutex_unlock(&fs->wb_lk);
		int r = engine_writeback_inode(fs, pick);
		pthread_mutex_lock(&pick->lk);
		bool open = pick->opens > 0;
		/* a doomed file (unlinked) once closed, or one without a
		 * cache object, has nothing to write back; a doomed file's
		 * object goes with its last close, or here if that close
		 * came while we wrote (inode_obj_release saw it listed) */
		bool gone = (pick->doomed && !open) || !pick->obj;
		if (pick->doomed && !open)
			inode_obj_delete(fs, pick);
		size_t left = !gone ? inode_obj_dirty(fs, pick) : 0;
		uint64_t size = pick->size, bsize = pick->bsize;
		/* decide under pick->lk: a writer marks the file dirty under
		 * the same lock after committing its block, so it either sees
		 * the file still listed before we counted its block, or sees
		 * it unlisted and lists it again */
		pthread_mutex_lock(&fs->wb_lk);
		pick->wb_busy = false;
		now = clock_now_ns();
		bool drop = false;
		if (r < 0) {
			atomic_store(&fs->st.wb_failed_ns, now);
			pick->backoff_ns = pick->backoff_ns ?
				pick->backoff_ns * 2 : BACKOFF_MIN_NS;
			if (pick->backoff_ns > BACKOFF_MAX_NS)
				pick->backoff_ns = BACKOFF_MAX_NS;
			pick->wb_due_ns = now + pick->backoff_ns;
		} else {
			if (pick->backoff_ns)
				atomic_store(&fs->st.wb_failed_ns, 0);
			pick->backoff_ns = 0;
			if (gone || (!left && size == bsize)) {
				dirty_remove(fs, pick);
				drop = true;
			} else {
				pick->wb_due_ns = open ? 0 : now + fs->cfg.wb_delay_ns;
				dirty_to_tail(fs, pick);
			}
		}
		pthread_cond_broadcast(&fs->space_cv);
		pthread_mutex_unlock(&fs->wb_lk);
		pthread_mutex_unlock(&pick->lk);
		if (drop)
			itab_unref(fs, pick);
		pthread_mutex_lock(&fs->wb_lk);
	}
	pthread_mutex_unlock(&fs->wb_lk);
	return NULL;
}

/* ---- prefetch ---- */

void engine_prefetch(struct fs *fs, struct fs_inode *ino)
{
	bool added = false;

	pthread_mutex_lock(&fs->wb_lk);
	if (!ino->on_pf && !fs->stop) {
		ino->on_pf = true;
		ino->pfnext = NULL;
		if (fs->pf_tail)
			fs->pf_tail->pfnext = ino;
		else
			fs->pf_head = ino;
		fs->pf_tail = ino;
		added = true;
		pthread_cond_signal(&fs->pf_cv);
	}
	pthread_mutex_unlock(&fs->wb_lk);
	if (added)
		itab_ref(fs, ino);
}

static void prefetch_file(struct fs *fs, struct fs_inode *ino)
{
	uint32_t B = fs->cfg.block_size;
	struct bstore_stats st;
	struct io_uring ring;

	int r0 = io_uring_queue_init(PREFETCH_BATCH * 2, &ring, 0);
	if (r0 < 0) {
		/* out of descriptors, say, in a burst of lookups: once a
		 * minute is enough to tell */
		static struct log_limit lim;
		char note[96];
		if (log_limit(&lim, 60, note, sizeof(note)))
			log_warn("prefetch: io_uring: %s; files are fetched on "
				 "demand meanwhile%s", strerror(-r0), note);
		return;
	}
	for (uint64_t blk = 0; !fs->stop; ) {
		pthread_mutex_lock(&ino->lk);
		bool go = blk * B < ino->bsize && !ino->doomed && ino->opens > 0;
		pthread_mutex_unlock(&ino->lk);
		if (!go)
			break;
		/* never evict for a prefetch: stop when the cache is 3/4 full */
		struct cache_mgr *m = fs_mgr_for(fs, ino, blk);
		m->ops->stats(m, &st);
		if (st.blocks_used * 4 >= st.blocks_total * 3)
			break;
		ssize_t r = fdata_prefetch(fs, ino, &blk, &ring);
		if (r < 0)
			break;
		atomic_fetch_add(&fs->st.prefetched, (uint64_t)r);
	}
	io_uring_queue_exit(&ring);
}

static void *pf_main(void *arg)
{
	struct fs *fs = arg;

	pthread_mutex_lock(&fs->wb_lk);
	while (!fs->stop) {
		struct fs_inode *ino = fs->pf_head;
		if (!ino) {
			pthread_cond_wait(&fs->pf_cv, &fs->wb_lk);
			continue;
		}
		fs->pf_head = ino->pfnext;
		if (!fs->pf_head)
			fs->pf_tail = NULL;
		pthread_mutex_unlock(&fs->wb_lk);
		prefetch_file(fs, ino);
		pthread_mutex_lock(&fs->wb_lk);
		ino->on_pf = false;
		pthread_mutex_unlock(&fs->wb_lk);
		itab_unref(fs, ino);
		pthread_mutex_lock(&fs->wb_lk);
	}
	/* drop what is still queued */
	while (fs->pf_head) {
		struct fs_inode *ino = fs->pf_head;
		fs->pf_head = ino->pfnext;
		ino->on_pf = false;
		pthread_mutex_unlock(&fs->wb_lk);
		itab_unref(fs, ino);
		pthread_mutex_lock(&fs->wb_lk);
	}
	fs->pf_tail = NULL;
	pthread_mutex_unlock(&fs->wb_lk);
	return NULL;
}

int engine_start(struct fs *fs)
{
	int r;

	pthread_cond_init(&fs->pf_cv, NULL);
	r = pthread_create(&fs->wb_thread, NULL, wb_main, fs);
	if (r)
		return -r;
	r = pthread_create(&fs->pf_thread, NULL, pf_main, fs);
	if (r) {
		pthread_mutex_lock(&fs->wb_lk);
		fs->stop = true;
		pthread_cond_broadcast(&fs->wb_cv);
		pthread_mutex_unlock(&fs->wb_lk);
		pthread_join(fs->wb_thread, NULL);
		return -r;
	}
	fs->threads_started = true;
	return 0;
}

int engine_stop(struct fs *fs)
{
	uint32_t left;

	if (!fs->threads_started)
		return 0;
	pthread_mutex_lock(&fs->wb_lk);
	fs->stop = true;
	fs->wb_all = true;
	pthread_cond_broadcast(&fs->wb_cv);
	pthread_cond_broadcast(&fs->pf_cv);
	pthread_mutex_unlock(&fs->wb_lk);
	pthread_join(fs->pf_thread, NULL);
	pthread_join(fs->wb_thread, NULL);
	fs->threads_started = false;
	left = dirty_count(fs);
	return (int)left;
}
