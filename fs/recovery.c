/* recovery.c - at mount, before the file system is served, each object the
 * NVRAM store holds from a previous run goes through four steps:
 *   1. an object of a file unlinked before the crash, or with nothing
 *      dirty and no truncation under way, is dropped (as an unlink or a
 *      clean close would have left it);
 *   2. its backing file is opened by file handle (which survives renames),
 *      by path only when the backing file system gave no handle; a file
 *      that no longer exists (stale handle) has its data dropped;
 *   3. a truncation under way at the crash (OBJ_TRUNCATING) is finished:
 *      the backing file is cut, then the blocks past the size are dropped;
 *   4. its dirty blocks are written back and the object deleted; a file
 *      whose write-back fails stays in NVRAM, untouched, for the next
 *      mount (which then refuses to serve, main.c). */
#include "fs/fs.h"

#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int open_backing(struct fs *fs, const struct bstore_obj *o)
{
	if (o->handle_len) {
		struct {
			struct file_handle fh;
			unsigned char buf[BSTORE_HANDLE_MAX];
		} h;
		h.fh.handle_bytes = o->handle_len;
		h.fh.handle_type = (int)o->handle_type;
		memcpy(h.fh.f_handle, o->handle, o->handle_len);
		int fd = open_by_handle_at(fs->backing_fd, &h.fh, O_RDWR | O_CLOEXEC);
		if (fd >= 0 || errno == ESTALE)
			return fd < 0 ? -ESTALE : fd;
		if (errno != EOPNOTSUPP && errno != EPERM && errno != EINVAL)
			return -errno;
	}
	if (!o->path[0])
		return -ESTALE;
	int fd = openat(fs->backing_fd, o->path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int recovery_run(struct fs *fs)
{
	struct cache_mgr *m = fs_mgr_for(fs, NULL, 0);
	uint32_t B = fs->cfg.block_size;
	size_t n = m->ops->obj_list(m, NULL, 0), failed = 0;
	uint64_t *ids = calloc(n ? n : 1, sizeof(*ids));

	if (!ids)
		return -ENOMEM;
	n = m->ops->obj_list(m, ids, n);
	for (size_t i = 0; i < n; i++) {
		struct bstore_obj o;
		if (m->ops->obj_get(m, ids[i], &o) < 0)
			continue;
		size_t nd = m->ops->blocks(m, o.id, 1, NULL, 0);
		bool cut = o.uflags & OBJ_TRUNCATING;
		if ((o.uflags & OBJ_DOOMED) || (!nd && !cut)) {
			if (nd)
				log_info("recovery: dropping %zu dirty blocks of "
					 "unlinked file %s", nd, o.path);
			m->ops->obj_delete(m, o.id);
			continue;
		}
		int fd = open_backing(fs, &o);
		if (fd == -ESTALE) {
			log_warn("recovery: file %s no longer exists in the "
				 "backing dir; dropping its %zu dirty blocks",
				 o.path[0] ? o.path : "(no path)", nd);
			m->ops->obj_delete(m, o.id);
			continue;
		}
		if (fd < 0) {
			log_err("recovery: cannot open %s in the backing dir: %s; "
				"its dirty data stays in NVRAM", o.path,
				strerror(-fd));
			failed++;
			continue;
		}
		/* Step 3: a truncation under way at the crash: the backing is
		 * cut first (it may be already), the blocks past it go below.
		 * One the backing refuses (EFBIG, EPERM on an append-only
		 * file) never happened: the file is recovered as it was. */
		if (cut && ftruncate(fd, (off_t)o.size) < 0) {
			log_warn("recovery: %s: the truncation to %llu bytes under "
				 "way at the crash is refused by the backing (%s); "
				 "the file keeps its old size", o.path,
				 (unsigned long long)o.size, strerror(errno));
			cut = false;
			o.size = 0;   /* its target; the backing and blocks say */
		}
		/* size: the record's, or further if a crash came between a
		 * block commit and the size update (not for a truncation
		 * under way: its record's size is the end) */
		uint64_t size = o.size, last = 0;
		size_t nb = m->ops->blocks(m, o.id, 0, NULL, 0);
		uint64_t *idx = calloc(nb ? nb : 1, sizeof(*idx));
		if (idx) {
			nb = m->ops->blocks(m, o.id, 0, idx, nb);
			if (nb) {
				struct bstore_binfo bi;
				last = idx[nb - 1];
				if (!cut && m->ops->info(m, o.id, last, &bi) == 0 &&
				    last * B + bi.valid > size)
					size = last * B + bi.valid;
			}
			free(idx);
		}
		struct stat st;
		struct fs_inode *ino = calloc(1, sizeof(*ino));
		if (!ino || fstat(fd, &st) < 0) {
			free(ino);
			close(fd);
			failed++;
			continue;
		}
		/* never shrink the backing file: a truncation reached it
		 * before its record, an fallocate extended it directly */
		if ((uint64_t)st.st_size > size && !cut)
			size = (uint64_t)st.st_size;
		inode_init(ino);
		ino->fd = fd; /* the write-back opens its data fd from it */
		ino->obj = o.id;
		ino->size = size;
		ino->bsize = (uint64_t)st.st_size;
		ino->sized = true;
		stripe_map_init(&ino->smap, fs->cfg.stripe_unit, fs->nmgr,
				(uint32_t)st.st_ino, size, B);
		/* The truncation's second half, before any write-back: the
		 * backing was cut above; now the blocks past its size go (a
		 * dirty one there too), so the file is the truncated one,
		 * whole. */
		if (cut) {
			fdata_trim(fs, ino, size);
			ino->bsize = size;
			log_info("recovery: finished truncating %s to %llu bytes",
				 o.path, (unsigned long long)size);
		}
		uint64_t before = atomic_load(&fs->st.written_back);
		/* log the file under its current name (it may have been
		 * renamed since its record was written) */
		char proc[64], now[1024];
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		ssize_t nl = readlink(proc, now, sizeof(now) - 1);
		now[nl > 0 ? nl : 0] = 0;
		/* a file opened by its handle whose dentry the kernel no
		 * longer has (the backing remounted) reads as "/": the name
		 * of its record then */
		const char *name = nl > 1 ? now : o.path;
		int r = engine_writeback_inode(fs, ino);
		if (r == 0) {
			uint64_t bytes = atomic_load(&fs->st.written_back) - before;
			atomic_fetch_add(&fs->st.recovered_files, 1);
			atomic_fetch_add(&fs->st.recovered_bytes, bytes);
			log_info("recovery: wrote back %llu bytes of %s",
				 (unsigned long long)bytes, name);
			m->ops->obj_delete(m, o.id);
		} else {
			failed++;
		}
		inode_drop_datafd(fs, ino);
		close(fd);
		inode_destroy(ino);
		free(ino);
	}
	free(ids);
	if (n)
		log_info("recovery: %zu cached files found, %llu written back, "
			 "%zu left dirty in NVRAM", n,
			 (unsigned long long)atomic_load(&fs->st.recovered_files),
			 failed);
	return (int)failed;
}
