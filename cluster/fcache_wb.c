/* fcache_wb.c - write-back: an owner's dirty blocks to the backing files, and
 * the thread that runs it. */
#include "cluster/fcache_int.h"

/* The backing file fd at least size bytes long, never shorter: other
 * nodes write their blocks past its end meanwhile (parallel
 * write-back), and an ftruncate to a size looked at before their writes
 * would cut those off, written back and clean here, so lost. fallocate
 * (mode 0) only ever grows a file and keeps every byte; where the file
 * system has none, the size is looked at again right before the
 * ftruncate (a window of one system call). */
int backing_grow(int fd, uint64_t size)
{
	struct stat st;

	if (!size)
		return 0;
	if (fallocate(fd, 0, (off_t)size - 1, 1) == 0)
		return 0;
	if (errno != EOPNOTSUPP && errno != ENOSYS)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size < size && ftruncate(fd, (off_t)size) < 0)
		return -errno;
	return 0;
}

/* The mtime of the file at pfd, ns (0: none known). */
static uint64_t mtime_of(int pfd)
{
	struct stat st;

	return fstat(pfd, &st) < 0 ? 0 : (uint64_t)st.st_mtim.tv_sec * 1000000000ull +
					  (uint64_t)st.st_mtim.tv_nsec;
}

/* At gid's home, after its write-back, if record_idle asked for it: the
 * mtime the home keeps onto the backing file (the write-backs moved the
 * file's own), so that the record may go. Outside fc->lk: a stalled
 * backing holds this thread alone. One that cannot be put is logged and
 * let go. */
static void mtime_out(struct fcache *fc, uint64_t gid)
{
	struct bstore_obj rec;
	char link[40];

	if (!at_home(fc, gid))
		return;
	pthread_mutex_lock(&fc->lk);
	struct fobj *o = fobj_find(fc, gid);
	uint64_t m = o && o->mtime_wanted ? o->mtime_ns : 0, lid = o ? o->lid : 0;
	if (o)
		o->mtime_wanted = false;
	int bfd = fc->backing_fd;
	pthread_mutex_unlock(&fc->lk);
	if (!m || bfd < 0 || bstore_obj_get(fc->bs, lid, &rec) < 0)
		return;
	int pfd = rec_path_fd(bfd, &rec);
	if (pfd < 0)
		return;   /* gone: nothing to keep */
	struct timespec tv[2] = {
		{ .tv_nsec = UTIME_OMIT },
		{ .tv_sec = (time_t)(m / 1000000000ull), .tv_nsec = (long)(m % 1000000000ull) } };
	snprintf(link, sizeof(link), "/proc/self/fd/%d", pfd);
	int e = utimensat(AT_FDCWD, link, tv, 0) < 0 ? errno : 0;
	uint64_t seen = mtime_of(pfd);
	close(pfd);
	if (e)
		log_warn("file cache: the mtime of object %016" PRIx64 " not put on "
			 "its backing file: %s", gid, strerror(e));
	pthread_mutex_lock(&fc->lk);
	if ((o = fobj_find(fc, gid)) != NULL) {
		o->mtime_put = m;
		o->mtime_seen = seen;
	}
	pthread_mutex_unlock(&fc->lk);
}

/* Whether the backing file of record lid is unlinked: its inode lives
 * (some process, a mount's, holds it open) with no name left. (One gone
 * altogether is not: writeback drops it.) */
static bool backing_unlinked(struct fcache *fc, int bfd, uint64_t lid)
{
	struct bstore_obj rec;

	if (bstore_obj_get(fc->bs, lid, &rec) < 0)
		return false;
	int pfd = rec_path_fd(bfd, &rec);
	bool gone = pfd >= 0 && backing_nameless(pfd);
	if (pfd >= 0)
		close(pfd);
	return gone;
}

/* Write the object's dirty blocks to its backing file and fsync it (the
 * home also extends the file to its size). 0, or -errno (the blocks stay
 * dirty; a file that no longer exists is dropped: nothing is written).
 * A file unlinked while open somewhere is not written either (no one
 * will ever read those bytes from the backing): its blocks stay dirty,
 * and it is looked at again after UNLINKED_RETRY_NS, until it is gone
 * (then dropped) or linked again (an O_TMPFILE given a name); but for
 * room (a full cache), which writes it as any other. This holds whether
 * or not its home knows it was unlinked (a restarted home does not, nor
 * do the other owners). */
static int writeback(struct fcache *fc, uint64_t gid, bool room)
{
	struct bstore_obj rec;
	uint64_t lid, nb = 0, nd = 0, made = 0;
	int fd = -1, rc = 0;

	pthread_mutex_lock(&fc->lk);
	struct fobj *o = fobj_find(fc, gid);
	int bfd = fc->backing_fd;
	bool doomed = o && o->doomed;
	lid = o ? o->lid : 0;
	pthread_mutex_unlock(&fc->lk);
	if (!lid || doomed)
		return 0;
	if (bfd < 0)
		return -EAGAIN;
	/* (a clean record is let be: it may go, record_idle) */
	if (!room && bstore_obj_counts(fc->bs, lid, NULL, &nd) == 0 && nd &&
	    backing_unlinked(fc, bfd, lid)) {
		atomic_fetch_add(&fc->wb_unlinked, 1);
		pthread_mutex_lock(&fc->lk);
		if ((o = fobj_find(fc, gid)) != NULL) {
			o->wb_retry_at = clock_now_ns() + UNLINKED_RETRY_NS;
			wb_schedule(fc, o, UNLINKED_RETRY_NS);
		}
		pthread_mutex_unlock(&fc->lk);
		return 0;
	}
	nd = 0;
	pthread_mutex_lock(&fc->wb_mx);
	/* every told block out of the set before anything is read
	 * (fmarks.h): a write after this tells the shadow again, with a
	 * newer number than seq, and the CLEAR below leaves that mark */
	uint64_t seq = 0, *told = NULL;
	size_t ntold = 0;
	if (fc->mark) {
		seq = fmark_last_seq(fc->sent);
		ntold = fmark_sent_take_obj(fc->sent, gid, &told);
	}
	if (bstore_obj_get(fc->bs, lid, &rec) < 0 ||
	    bstore_obj_counts(fc->bs, lid, &nb, &nd) < 0)
		goto out;
	struct rec_handle h;
	rec_handle(&rec, &h);
	if (!nd) {
		/* nothing dirty: the backing file is opened for writing only
		 * if it must grow to the record's size (a file only read
		 * through the cache is never written, nor even opened so) */
		struct stat pst;
		int pfd = rec_path_fd(bfd, &rec);
		bool grow = pfd >= 0 && fstat(pfd, &pst) == 0 &&
			    rec.size > (uint64_t)pst.st_size;
		if (pfd >= 0)
			close(pfd);
		if (pfd >= 0 && !grow)
			goto out;
	}
	fd = open_by_handle_at(bfd, &h.fh, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		if (rc == -ESTALE || rc == -ENOENT) {
			/* the file is gone: its blocks have nowhere to go */
			bstore_obj_delete(fc->bs, lid);
			pthread_mutex_lock(&fc->lk);
			fobj_forget(fc, gid);
			pthread_mutex_unlock(&fc->lk);
			atomic_fetch_add(&fc->dropped, 1);
			marks_forget(fc, gid);
			rc = 0;
		}
		goto out;
	}
	struct stat fst;
	if (fstat(fd, &fst) < 0 || !S_ISREG(fst.st_mode)) {
		/* a handle from the wire names no regular file: nothing to do */
		rc = -EINVAL;
		goto out;
	}
	uint64_t *idx = nd ? calloc(nd, sizeof(*idx)) : NULL;
	uint64_t *ver = nd ? calloc(nd, sizeof(*ver)) : NULL;
	uint8_t *buf = malloc(fc->bsize);
	if ((nd && (!idx || !ver)) || !buf) {
		rc = -ENOMEM;
		goto free_out;
	}
	size_t n = nd ? bstore_obj_blocks(fc->bs, lid, true, idx, nd) : 0;
	n = n < nd ? n : nd;
	uint64_t bytes = 0;
	for (size_t k = 0; k < n && !rc; k++) {
		struct bstore_binfo bi;
		ver[k] = 0;
		if (bstore_block_read(fc->bs, lid, idx[k], 0, buf, fc->bsize, &bi) < 0)
			continue;   /* dropped meanwhile */
		ver[k] = bi.version;
		ssize_t w = bi.valid ? pwrite(fd, buf, bi.valid,
					      (off_t)(idx[k] * fc->bsize)) : 0;
		if (w < 0)
			rc = -errno;
		else if ((uint32_t)w != bi.valid)
			rc = -ENOSPC;   /* short: the file system's room ran out */
		bytes += bi.valid;
	}
	if (!rc && rec.size && (uint64_t)fst.st_size < rec.size)
		rc = backing_grow(fd, rec.size);
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	for (size_t k = 0; k < n && !rc; k++)
		if (ver[k])
			bstore_block_clean(fc->bs, lid, idx[k], ver[k]);
	if (!rc) {
		atomic_fetch_add(&fc->written_back, bytes);
		made = bytes;
	}
free_out:
	free(idx);
	free(ver);
	free(buf);
out:
	if (fd >= 0)
		close(fd);
	if (ntold) {
		/* the shadow forgets the told blocks not dirty now: written
		 * back, or told ahead and never written; a block still dirty
		 * (its write-back failed, or written since) keeps its mark,
		 * and goes back in the told set, so that the write-back that
		 * cleans it clears the mark */
		size_t k = 0;
		for (size_t j = 0; j < ntold; j++) {
			struct bstore_binfo bi;
			if (told[j] == FMARK_SIZE_BLK ? !rc :
			    bstore_block_info(fc->bs, lid, told[j], &bi) < 0 || !bi.dirty) {
				told[k++] = told[j];
				continue;
			}
			fmark_sent_lock(fc->sent, gid, told[j]);
			if (fmark_sent_add(fc->sent, gid, told[j]) < 0)
				atomic_store(&fc->shadow_ok, false);
			fmark_sent_unlock(fc->sent, gid, told[j]);
		}
		mark_clean(fc, gid, told, k, seq);
	}
	free(told);
	pthread_mutex_unlock(&fc->wb_mx);
	/* failing until bytes are written back again (wb_failing) */
	if (rc)
		atomic_store(&fc->wb_failed_ns, clock_now_ns());
	else if (made)
		atomic_store(&fc->wb_failed_ns, 0);
	/* a failed write-back is tried again by itself, backing off (a
	 * backing full or failing for a while), as the single-node
	 * cache's: the blocks stay dirty, and nothing else would write
	 * them before the file's next write */
	uint64_t again = 0;
	pthread_mutex_lock(&fc->lk);
	if ((o = fobj_find(fc, gid)) != NULL && rc) {
		again = WB_RETRY_NS << (o->wb_fails < 6 ? o->wb_fails : 6);
		if (again > WB_RETRY_MAX_NS)
			again = WB_RETRY_MAX_NS;
		if (o->wb_fails < UINT8_MAX)
			o->wb_fails++;
		o->wb_retry_at = clock_now_ns() + again;
		wb_schedule(fc, o, again);
	} else if (o) {
		o->wb_fails = 0;
	}
	pthread_mutex_unlock(&fc->lk);
	if (rc) {
		atomic_fetch_add(&fc->wb_errors, 1);
		log_warn("file cache: write-back of object %016" PRIx64 ": %s; its "
			 "blocks stay in NVRAM, tried again in %.1f s", gid,
			 strerror(-rc), (double)again / 1e9);
	} else {
		mtime_out(fc, gid);
	}
	return rc;
}

/* ---- the write-back thread ---- */

#define WB_PASS_MIN_NS (50 * 1000000ull)

/* Under fc->lk: o's record holds dirty blocks here. */
static bool obj_dirty(struct fcache *fc, const struct fobj *o)
{
	uint64_t nd = 0;

	return bstore_obj_counts(fc->bs, o->lid, NULL, &nd) == 0 && nd;
}

/* The write-back thread: background work, so it runs at nice 10 and the
 * requests of every node's mounts (the writers waiting) come first; it
 * still gets what the CPU has left, and a writer held by a full cache
 * leaves it the CPU. (fsync=backing's write-back runs in the request's
 * own thread, at the normal priority.) */
void *wb_main(void *arg)
{
	struct fcache *fc = arg;
	uint64_t due[64], gone[64];

	if (setpriority(PRIO_PROCESS, (id_t)gettid(), 10) < 0)
		log_debug("file cache: write-back thread priority: %s", strerror(errno));
	pthread_mutex_lock(&fc->lk);
	while (!atomic_load(&fc->stopping)) {
		if (fc->mark) {
			pthread_mutex_unlock(&fc->lk);
			shadow_check(fc, clock_now_ns());
			pthread_mutex_lock(&fc->lk);
			if (atomic_load(&fc->stopping))
				break;
		}
		pthread_mutex_unlock(&fc->lk);
		orphans_check(fc, clock_now_ns());
		mounts_check(fc, clock_now_ns());
		pthread_mutex_lock(&fc->lk);
		if (atomic_load(&fc->stopping))
			break;
		uint64_t now = clock_now_ns(), next = now + 1000000000ull;
		size_t n = 0;
		bool all = fc->wb_all && fc->backing_fd >= 0, held = false;
		bool room = all && fc->wb_room;
		fc->wb_all = fc->wb_room = false;
		/* a full cache (writers waiting) is not held */
		uint64_t hold = all ? 0 : wb_held_until(fc, now);
		size_t ngone = 0;
		for (size_t b = 0; b < NBUCKETS && n < 64; b++)
			for (struct fobj *o = fc->tab[b]; o && n < 64; o = o->next) {
				if (o->doomed) {
					/* unlinked while open nowhere: its
					 * linger over, dropped everywhere */
					if (o->opens || !o->linger_ns)
						continue;
					if (o->linger_ns <= now && ngone < 64) {
						gone[ngone++] = o->gid;
					} else if (o->linger_ns < next) {
						next = o->linger_ns;
					}
					continue;
				}
				if (hold && o->wb_due_ns && o->wb_due_ns <= now) {
					held = true;
				} else if ((o->wb_due_ns && o->wb_due_ns <= now) ||
				    (all && (room || o->wb_retry_at <= now) &&
				     obj_dirty(fc, o))) {
					o->wb_due_ns = 0;
					due[n++] = o->gid;
				} else if (o->wb_due_ns && o->wb_due_ns < next) {
					next = o->wb_due_ns;
				}
			}
		if (held) {
			atomic_fetch_add(&fc->wb_held, 1);
			if (hold < next)
				next = hold;
		}
		/* a full cache: the files holding dirty blocks, 64 a pass,
		 * until none is left (the table may hold many more files,
		 * clean, than one pass takes) */
		if (all && n == 64) {
			fc->wb_all = true;
			fc->wb_room = room;
		}
		if (ngone) {
			pthread_mutex_unlock(&fc->lk);
			uint64_t unreached = 0;
			for (size_t k = 0; k < ngone && !atomic_load(&fc->stopping); k++)
				linger_drop(fc, gone[k], &unreached);
			pthread_mutex_lock(&fc->lk);
		}
		if (n) {
			pthread_mutex_unlock(&fc->lk);
			/* a stop leaves the rest dirty in NVRAM, for the
			 * next start */
			for (size_t k = 0; k < n && !atomic_load(&fc->stopping); k++)
				if (writeback(fc, due[k], room) == -EAGAIN)
					break;
			pthread_mutex_lock(&fc->lk);
			continue;
		}
		/* passes WB_PASS_MIN_NS apart at least, but for a full cache's
		 * (wb_all) and a stop: the write-backs due meanwhile go
		 * together, up to that much after their time */
		if (next < now + WB_PASS_MIN_NS)
			next = now + WB_PASS_MIN_NS;
		struct timespec ts;
		clock_deadline(&ts, next - now);
		fc->wb_wake_ns = next;
		if (!fc->wb_all && !atomic_load(&fc->stopping))
			pthread_cond_timedwait(&fc->cv, &fc->lk, &ts);
		fc->wb_wake_ns = 0;
	}
	pthread_mutex_unlock(&fc->lk);
	return NULL;
}

/* The write-back thread writes back everything now (a full cache). */
void wb_kick_all(struct fcache *fc)
{
	pthread_mutex_lock(&fc->lk);
	fc->wb_all = fc->wb_room = true;
	pthread_cond_signal(&fc->cv);
	pthread_mutex_unlock(&fc->lk);
}

void wb_schedule(struct fcache *fc, struct fobj *o, uint64_t delay_ns)
{
	uint64_t delay = delay_ns > 3600ull * 1000000000ull ?
			 3600ull * 1000000000ull : delay_ns;
	uint64_t due = clock_now_ns() + delay;
	/* the earlier of this and one already due */
	if (!o->wb_due_ns || due < o->wb_due_ns)
		o->wb_due_ns = due;
	/* the thread scans the whole table at each wake-up, under lk: woken
	 * only if it would sleep past this (a last close per small file
	 * would otherwise be a scan each) */
	if (fc->wb_wake_ns && due < fc->wb_wake_ns)
		pthread_cond_signal(&fc->cv);
}

int serve_writeback(struct fcache *fc, const struct frame_fop *f)
{
	if (f->flags & FRAME_FILE_SYNC) {
		/* writes kept alone: after a cut-off shadow's older copies
		 * (wb_held_until), as every write-back here */
		while (wb_held_until(fc, clock_now_ns())) {
			if (atomic_load(&fc->stopping))
				return -ESHUTDOWN;   /* asked again after the restart */
			usleep(100000);
		}
		return writeback(fc, f->obj, false);
	}
	pthread_mutex_lock(&fc->lk);
	struct fobj *o = fobj_find(fc, f->obj);
	if (o)
		wb_schedule(fc, o, f->size);
	pthread_mutex_unlock(&fc->lk);
	return 0;
}
