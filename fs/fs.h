/* fs.h - nvcachefs's shared state: configuration, the inode table (backing
 * inodes held by O_PATH fds, as in libfuse's passthrough_ll), per-inode cache
 * state, and the entry points of the data path (fdata.c), the write-back and
 * prefetch engines (engine.c) and recovery (recovery.c). ops.c is the FUSE
 * glue, main.c parses options and mounts.
 *
 * Locks, outermost first:
 *   fs_inode.io (rwlock): truncate takes it for writing; read, write,
 *       prefetch and write-back of the inode take it for reading, so a
 *       truncate never interleaves with data moving in or out of the cache.
 *   fs_inode.lk (mutex): the inode's cache fields (size, obj, opens, flags).
 *   fs.wb_lk: the dirty list, wb_due, the prefetch queue.
 *   fs.itab_lk: the inode table, nlookup, refs.
 * The cache managers do their own locking (cache_mgr.h). */
#pragma once
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "common/log.h"
#include "fs/cache_mgr.h"
#include "fs/stripe.h"

struct fs_config {
	char *backing;         /* realpath of the backing directory */
	char *mountpoint;      /* realpath of the mount point */
	char *nvram;           /* NVRAM file */
	uint64_t cache_size;   /* bytes of file data the cache holds */
	uint64_t stripe_unit;  /* 0 = auto (one equal part per manager) */
	uint32_t block_size;   /* cache block (NVRAM allocation unit) */
	uint64_t wb_delay_ns;  /* write-back delay after the last close */
	bool fsync_backing;    /* fsync waits for the backing file too */
	bool writeback_cache;  /* FUSE kernel write-back cache (weaker) */
	bool no_xattr;         /* answer xattr calls ENOSYS (see main.c) */
	bool foreground;
	uint32_t lat_ns, flush_ns;
	uint64_t bw_bps;
};

struct fs_inode {
	/* identity, fixed after creation */
	int fd;                /* O_PATH fd of the backing inode */
	dev_t dev;
	ino_t ino;
	struct fs_inode *hnext;  /* itab chain (itab_lk) */
	uint64_t nlookup;        /* kernel's lookups (itab_lk) */
	uint32_t refs;           /* handles, queues (itab_lk) */
	atomic_bool touched;     /* a request used it since the last idle scan */
	/* privileges (killpriv.h): pgen counts completed changes of the
	 * backing inode's mode, owner or xattrs; a fact below holds only if
	 * it was learnt at the current pgen (it stores pgen + 1, 0 = none) */
	atomic_uint pgen;
	atomic_uint no_caps_at;  /* seen without security.capability */
	atomic_uint nosec_at;    /* seen with nothing to drop at a write */

	pthread_rwlock_t io;
	pthread_mutex_t lk;
	/* one write-back pass of the file at a time (engine.c), taken
	 * before io: fsync=backing and setxattr run passes of their own
	 * beside the write-back thread's */
	pthread_mutex_t wb_mx;
	int datafd;            /* O_RDWR (or O_RDONLY) fd for cache I/O, -1;
				* closed only under io (write) and lk */
	uint64_t obj;          /* cache object id, 0 = none yet */
	bool sized;            /* size is authoritative (cache state exists) */
	uint64_t size;         /* logical file size */
	uint64_t bsize;        /* the backing file's size as we left it */
	uint32_t opens, writers;
	bool doomed;           /* unlinked: its dirty data is never written */
	bool created;          /* created through this mount */
	bool prefetched;       /* prefetch queued or done since last truncate */
	/* a write's mtime lives here until write-back puts it on the backing
	 * file (whose own mtime would otherwise say "written back at") */
	bool mtime_dirty;
	struct timespec mtime;
	uint64_t wgen;         /* bumped by every write */
	struct stripe_map smap;

	/* write-back (wb_lk; on_dirty changes only with lk held too) */
	bool on_dirty, wb_busy;
	uint64_t wb_due_ns;    /* 0: not scheduled (open, or urgent only) */
	uint64_t backoff_ns;
	struct fs_inode *dnext, *dprev;
	bool on_pf;
	struct fs_inode *pfnext;
};

struct fs_stats {
	atomic_uint_fast64_t hits, misses, prefetched, written_back;
	atomic_uint_fast64_t backing_errors, bp_waits, dropped_unlinked;
	atomic_uint_fast64_t recovered_files, recovered_bytes;
	atomic_uint_fast64_t forget_asks;
	atomic_uint_fast64_t spliced;   /* write bytes read from the pipe */
};

struct fs {
	struct fs_config cfg;
	struct cache_mgr *mgr[1];
	uint32_t nmgr;
	int backing_fd;        /* O_RDONLY|O_DIRECTORY of the backing root */
	struct fs_inode root;

	pthread_mutex_t itab_lk;
	struct fs_inode **itab;
	size_t itab_size;
	uint64_t ninodes;          /* in itab, each holding an O_PATH fd */
	size_t idle_hand;          /* fs_idle_inodes' clock hand */
	/* more inodes than inode_high: ask the kernel to forget idle ones
	 * down to inode_low (forget.c) */
	uint64_t inode_high, inode_low;
	uint64_t max_file_size;   /* the backing's (probed at mount) */
	struct fs_forget *forget;

	pthread_mutex_t wb_lk;
	pthread_cond_t wb_cv;     /* wakes the write-back thread */
	pthread_cond_t space_cv;  /* a write-back finished: space may be free */
	pthread_cond_t pf_cv;
	struct fs_inode *dirty_head, *dirty_tail;
	uint32_t ndirty_files;
	bool wb_urgent, wb_all, stop;
	struct fs_inode *pf_head, *pf_tail;
	pthread_t wb_thread, pf_thread;
	bool threads_started;

	struct fs_stats st;
	atomic_uint_fast64_t datafds;  /* inodes' data fds open */
	struct log_limit table_full_log;  /* fs_reclaim_objs's warning */
	uint64_t datafd_budget;        /* more: close idle ones (fdata.c) */
};

/* inode table (ops.c) */
void fs_inode_ref(struct fs *fs, struct fs_inode *ino);
void fs_inode_unref(struct fs *fs, struct fs_inode *ino);

/* The object table is full: drop the cache objects (and clean blocks) of
 * up to want closed, clean files. Call with no inode lock held. */
size_t fs_reclaim_objs(struct fs *fs, size_t want);

/* The node ids of up to max inodes that the kernel holds and nothing here
 * uses (no open handle, no queue) and no request touched since the
 * previous scan: a clock hand over the table, an inode touched since the
 * last pass is spared once. For forget.c. */
size_t fs_idle_inodes(struct fs *fs, uint64_t *out, size_t max);

/* forget.c: the kernel keeps an inode looked up for as long as it keeps
 * its dentry, and each costs us an O_PATH fd: past inode_high, a thread
 * asks it to prune the unused entries of idle inodes (FUSE_NOTIFY_PRUNE,
 * Linux 6.18); it then sends FORGET and the fd is closed. Without this a
 * tree with more files than the open-files limit ran the daemon out. */
struct fuse_session;
int forget_start(struct fs *fs, struct fuse_session *se);
/* Stop the thread (the session loop has ended). forget_free, once no
 * inode can be freed any more, frees its state. */
void forget_stop(struct fs *fs);
void forget_free(struct fs *fs);
/* do_lookup added an inode past inode_high: wake the thread. */
void forget_kick(struct fs *fs);
/* An open just failed with errno: if it was EMFILE or ENFILE and the
 * thread can free descriptors, wake it, wait for an inode to be freed (at
 * most 5 ms) and return true: the caller tries again, 600 times (3 s) at most
 * (*tries counts). errno is kept. Lookups may outrun the thread for a
 * moment; they wait for it instead of failing (100 ms, then 1 s, were too
 * short for a sanitizer build on a loaded machine: EMFILE at file 443 of
 * 3000 under a limit of 600 while another test suite ran beside it). */
bool forget_retry(struct fs *fs, int *tries);
bool forget_wait(struct fs *fs);
/* An inode was freed (its fd closed): wake forget_wait. */
void forget_freed(struct fs *fs);

/* the manager owning block blk of the file */
struct cache_mgr *fs_mgr_for(struct fs *fs, struct fs_inode *ino, uint64_t blk);

/* errno of the open that just failed; when out of descriptors, the user
 * sees EMFILE and the log says why (at most once a minute). ops.c */
int fs_open_errno(struct fs *fs);

/* fdata.c: the data path. All take ino->io themselves. */
/* Set up the cache state of an inode from its backing file (first open). */
int fdata_inode_init(struct fs *fs, struct fs_inode *ino);
/* The backing file opened for cache I/O (ino->datafd), opened again if it
 * was closed; ino->lk held. Callers use it only while they hold ino->io. */
int fdata_datafd(struct fs *fs, struct fs_inode *ino);
/* Close ino->datafd when the file has no open handle (after the last
 * release, after a write-back) and more than fs->datafd_budget are open,
 * unless ino->io is busy: a file not in use then holds one descriptor
 * (its O_PATH inode), not two. Without this a tar of N files kept 2N open
 * until the kernel forgot them, and ran out at half the open-files limit.
 * Under the budget they stay open: each open would open it again. */
void fdata_close_idle(struct fs *fs, struct fs_inode *ino);
/* Close ino->datafd now (no user: the inode is being freed). */
void fdata_drop_datafd(struct fs *fs, struct fs_inode *ino);
ssize_t fdata_read(struct fs *fs, struct fs_inode *ino, uint64_t off,
		   size_t len, char *buf);
/* Zero-copy read of cached data: iov entries point into pinned NVRAM
 * blocks (and a zero buffer past a block's valid bytes). Returns the iov
 * count (*bytes in total) or -EAGAIN when a block is not cached (use
 * fdata_read). The pins are released by fdata_read_done after the reply. */
struct fdata_pin {
	struct cache_mgr *m;
	uint32_t token;
};
struct iovec;
int fdata_read_zc(struct fs *fs, struct fs_inode *ino, uint64_t off,
		  size_t len, struct iovec *iov, int maxiov,
		  struct fdata_pin *pins, int *npins, size_t *bytes);
void fdata_read_done(struct fdata_pin *pins, int npins);
ssize_t fdata_write(struct fs *fs, struct fs_inode *ino, uint64_t off,
		    size_t len, const char *buf);
/* The same with the bytes from src, consumed in order, once each; an error
 * may leave the rest of a stream unread. */
ssize_t fdata_write_src(struct fs *fs, struct fs_inode *ino, uint64_t off,
			size_t len, const struct bstore_src *src);
int fdata_truncate(struct fs *fs, struct fs_inode *ino, uint64_t size);
/* The backing file was extended to size (fallocate) behind the cache. */
void fdata_grown(struct fs *fs, struct fs_inode *ino, uint64_t size);
/* fallocate PUNCH_HOLE / ZERO_RANGE (mode) of [off, off+len): the backing
 * file gets the call through fd, and the cache follows it, in one step
 * for every other I/O of the file (ino->io held for writing): blocks
 * inside the range are dropped, a dirty block at an edge gets zeros over
 * the range, a clean one is dropped (the backing file has its bytes).
 * Where the backing file system cannot (EOPNOTSUPP), zeros are written
 * through the cache instead. 0 or -errno. */
int fdata_punch(struct fs *fs, struct fs_inode *ino, int fd, int mode,
		uint64_t off, uint64_t len);
/* Prefetch: read the next (up to PREFETCH_BATCH) uncached blocks from *blk
 * on, all in flight at once through ring, and install them clean (never
 * over newer data). Advances *blk past the blocks looked at. Returns bytes
 * fetched or -errno (-ENOSPC: the cache is full; prefetch never waits). */
#define PREFETCH_BATCH 16
struct io_uring;
ssize_t fdata_prefetch(struct fs *fs, struct fs_inode *ino, uint64_t *blk,
		       struct io_uring *ring);
/* The inode was unlinked for good: forget its dirty data. */
void fdata_doom(struct fs *fs, struct fs_inode *ino);
/* Drop the cached blocks past size, cut the edge block (ino->lk held, or
 * recovery's own inode). */
void fdata_trim(struct fs *fs, struct fs_inode *ino, uint64_t size);
/* Drop the inode's cache object if it holds nothing dirty (forget, unmount). */
void fdata_release_obj(struct fs *fs, struct fs_inode *ino);
/* An open file's cache object, when the object table is full: given up
 * (true) only if nothing in it is newer than the backing file and no I/O
 * of the file is under way (its io lock is tried, never waited for). */
bool fdata_release_open_obj(struct fs *fs, struct fs_inode *ino);

/* engine.c: write-back and prefetch threads */
int engine_start(struct fs *fs);
/* Write back everything, stop the threads (unmount). Returns the number of
 * files left dirty (backing errors). */
int engine_stop(struct fs *fs);
/* Writes made the inode dirty (ino->lk not held). */
void engine_mark_dirty(struct fs *fs, struct fs_inode *ino);
/* The last handle was closed: schedule write-back after the delay. */
void engine_schedule(struct fs *fs, struct fs_inode *ino);
/* The file is open again: hold write-back until the next last close. */
void engine_hold(struct fs *fs, struct fs_inode *ino);
/* Take a doomed file off the write-back list (ino->lk held). Returns true
 * if it was removed: the caller then drops the list's ref (fs_inode_unref)
 * after unlocking. A file being written back is dropped by the engine. */
bool engine_forget_dirty(struct fs *fs, struct fs_inode *ino);
/* Write the inode's dirty blocks to the backing file and fsync it, now. */
int engine_writeback_inode(struct fs *fs, struct fs_inode *ino);
void engine_prefetch(struct fs *fs, struct fs_inode *ino);
/* Wait for free cache space (back-pressure): wake write-back, sleep a bit. */
void engine_wait_space(struct fs *fs);
uint32_t engine_queue_len(struct fs *fs);

/* recovery.c: write back what a previous run left dirty in NVRAM. Returns
 * the number of files that could not be written back (left in NVRAM). */
int recovery_run(struct fs *fs);

/* identity of a file for recovery: a file handle and a path (fdata.c) */
void fdata_identity(struct fs *fs, struct fs_inode *ino, struct bstore_obj *o);

/* uflags of cache objects */
#define OBJ_DOOMED 1u
/* A truncation to the record's size is under way (fdata_truncate): after
 * a crash, recovery finishes it before any write-back. */
#define OBJ_TRUNCATING 2u
