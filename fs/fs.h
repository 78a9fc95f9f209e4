/* fs.h - nvcachefs's shared state (configuration, the per-inode cache
 * state, the struct fs) and the interface of each file of fs/.
 *
 * Layers, lowest first. A file calls only the files listed before it (and
 * common/, pmem/, the cache managers through fs_mgr_for); nothing calls up.
 *   fcl.c       a cluster mount's connections to the nodes' file caches
 *   locks.c     a cluster mount's fcntl and flock locks, at each file's
 *               home node (called by ops.c only)
 *   clwatch.c   a cluster mount's thread that notices a restarted node,
 *               idle or not (fcl_watch, fs_locks_watch)
 *   fdwait.c    requests short of file descriptors wait for an inode to be
 *               freed; the forget thread is woken through it
 *   caller.c    the request a FUSE worker serves, and whether its caller
 *               is being killed (a wait for space gives up) or the
 *               session is ending
 *   inode.c     one inode's own state: its locks, data fd, cache object and
 *               record; fs_mgr_for, the one way to a cache manager
 *   itab.c      the inode table: lookup counts and refs, the idle scan;
 *               frees an inode when neither is left
 *   dirty.c     the dirty list and back-pressure (writers wait for space)
 *   forget.c    the thread that asks the kernel to forget idle inodes;
 *               fs_drop_pages (the kernel drops a file's cached pages)
 *   fdcl.c      a cluster mount's data path: block ranges to their owners,
 *               size and opens to the file's home (fdata.c hands over)
 *   fdata.c     the data path: open/release, read, write, truncate, punch,
 *               one prefetch batch, unlink; reclaim of cache objects
 *   engine.c    the write-back and prefetch threads
 *   recovery.c  write-back of what a previous run left dirty in NVRAM
 *   ops.c       the FUSE glue (ops.h): decode a request, call the layer
 *               below, reply, as lo_* in libfuse's passthrough_ll
 *   main.c      options, set-up, the session loop, the control socket
 * Beside them: stripe.c and cache_local.c (the cache managers, below
 * everything), killpriv.c (privilege dropping, called by ops.c).
 * A cluster mount (cluster=) has no cache manager of its own: fdata.c's
 * entry points hand every file to fdcl.c, which talks to the nodes' file
 * caches through fcl.c.
 *
 * Locks, outermost first; a thread holding one takes only later ones, and
 * the order holds across inodes (a writer holding its io may take another
 * inode's lk to reclaim its object; another's io is only tried):
 *   fs_inode.wb_mx: one write-back pass of the file at a time.
 *   fs_inode.io (rwlock): truncate and punch take it for writing; read,
 *       write, prefetch and write-back of the inode take it for reading,
 *       so a truncate never interleaves with data moving in or out of the
 *       cache.
 *   fs_inode.lk (mutex): the inode's cache fields (size, obj, opens, flags).
 *   fs.wb_lk: the dirty list, wb_due, the prefetch queue.
 *   fs.itab_lk: the inode table, nlookup, refs.
 *   fs.fdw.lk: the descriptor waits (fdwait.c), innermost.
 * The cache managers do their own locking (cache_mgr.h); their calls may
 * be made with any of these held. An inode is freed (itab.c) with no lock
 * held: itab_unref and itab_forget are called with none of ino's locks. */
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
	char *cluster;         /* cluster file (cluster=), NULL: one node */
	uint32_t node;         /* this node's id in it */
	uint64_t cache_size;   /* bytes of file data the cache holds */
	uint64_t stripe_unit;  /* 0 = auto (one equal part per manager) */
	uint32_t block_size;   /* cache block (NVRAM allocation unit) */
	uint64_t wb_delay_ns;  /* write-back delay after the last close */
	bool fsync_backing;    /* fsync waits for the backing file too */
	uint32_t replicas;     /* cluster: 1, or 2 (a copy at the shadow) */
	uint32_t down_wait_ms; /* cluster: how long a request waits for a down node */
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
	 * before io: fsync=backing, setxattr and recovery run passes of
	 * their own beside the write-back thread's */
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
	uint64_t gid;          /* cluster mount: the file's id, 0 = not yet (lk) */
	/* cluster mount: opens made while the home was down, not counted
	 * there; a release takes one of these first and tells the home
	 * nothing (lk). A restarted home counts them (fdcl_restarted). */
	uint32_t opens_uncounted;
	/* cluster mount: a write, truncate or punch went out since this
	 * mount's last CLOSE of the file (FRAME_FILE_WRITER) (lk) */
	bool cl_wrote;
	/* written, truncated or punched here since the other mounts last
	 * dropped their pages of it (others_drop in fdcl.c) (lk) */
	bool cl_inval;
	/* cluster mount: read here (the kernel keeps the pages) since this
	 * mount last dropped its pages of it (fdcl_fsync, fs_drop_pages) */
	atomic_bool cl_read;
	/* cluster mount with stripe_unit=auto: the file's stripe unit in
	 * bytes, as its home fixed it, 0 = not learnt yet (lk) */
	uint64_t sunit;
	/* cluster mount, size epochs (cluster/fcache.h): the file's size was
	 * at least cl_bound at its home's epoch cl_epoch (0: none learnt);
	 * reads and writes within it go with BOUND (lk) */
	uint64_t cl_bound, cl_epoch;
	/* cluster mount: when (clock_now_ns) a SETSIZE from here last set
	 * the file's mtime at its home; the time (CLOCK_REALTIME ns) of the
	 * last write since that did not (it relied on the bound), which the
	 * home is owed, 0: none (lk) */
	uint64_t cl_mtime_at, cl_owed_ns;
	/* cluster mount: reads left that ask the home for the size in the
	 * same round, after a bound an owner could not vouch for (lk) */
	uint32_t cl_plain_reads;
	/* cluster mount: a process here took an fcntl lock on it, so a
	 * close (FUSE flush) releases the closer's locks at the home */
	atomic_bool locked;
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
	/* cluster: INVALs that had the other mounts drop a file's pages,
	 * and files whose pages went here because another mount asked */
	atomic_uint_fast64_t cl_invals, cl_dropped;
	/* one node: when a write-back last failed, 0 once a file whose
	 * write-back had failed was written back (writeback_failing) */
	atomic_uint_fast64_t wb_failed_ns;
	/* cluster mount: lookups that found the name's file unlinked since
	 * (renamed over) with its record gone, and looked up again */
	atomic_uint_fast64_t lookups_stale;
	atomic_uint_fast64_t recovered_files, recovered_bytes;
	atomic_uint_fast64_t forget_asks;
	atomic_uint_fast64_t forget_gone;   /* node ids sent as removed elsewhere */
	/* data fds the write-back closed to get one when out (engine.c) */
	atomic_uint_fast64_t wb_fd_steals;
	atomic_uint_fast64_t spliced;   /* write bytes read from the pipe */
	/* the kernel's READ and WRITE requests answered, and their bytes */
	atomic_uint_fast64_t read_ops, read_bytes, write_ops, write_bytes;
	/* cluster mount: ranges of a down node read from the backing (its
	 * shadow has no mark), refused (EIO: dirty there, or unknown), and
	 * read from the shadow's replica (replicas=2) */
	atomic_uint_fast64_t down_reads, down_lost, down_replica_reads, down_waits;
	/* the same for a file's size at its down home (open, stat, create) */
	atomic_uint_fast64_t down_sizes, down_lost_sizes;
	/* cluster mount: last closes cluster-wide made here that had every
	 * owner write the file back, and those after which nothing written
	 * since the last write-back was left to write (no message sent) */
	atomic_uint_fast64_t last_close_wb, last_close_clean;
};

/* The rendezvous of fdwait.c (fs.fdw). */
struct fs_fdwait {
	pthread_mutex_t lk;
	pthread_cond_t kick_cv;   /* wakes the forget thread */
	pthread_cond_t freed_cv;  /* an inode was freed */
	atomic_bool on;           /* the forget thread runs: waits make sense */
	bool kicked;              /* lk */
	atomic_bool pending;      /* a kick is waiting: later ones need no lock */
	atomic_uint waiters;
};

#define FS_LOST_FILES 8
struct fcl;
struct fs_locks;
struct fuse_session;
struct fs {
	struct fs_config cfg;
	struct fcl *cl;           /* cluster mount: the nodes; NULL: one node */
	struct fs_locks *locks;   /* cluster mount: fcntl/flock at the homes */
	struct fuse_session *se;  /* for notifications (set before serving) */
	struct cache_mgr *mgr[1];
	uint32_t nmgr;
	int backing_fd;        /* O_RDONLY|O_DIRECTORY of the backing root */
	struct fs_inode root;

	pthread_mutex_t itab_lk;
	struct fs_inode **itab;
	size_t itab_size;
	uint64_t ninodes;          /* in itab, each holding an O_PATH fd */
	size_t idle_hand;          /* itab_idle's clock hand */
	size_t gone_hand;          /* itab_gone's */
	/* more inodes than inode_high: ask the kernel to forget idle ones
	 * down to inode_low (forget.c) */
	uint64_t inode_high, inode_low;
	uint64_t max_file_size;   /* the backing's (probed at mount) */
	struct fs_forget *forget;
	struct fs_fdwait fdw;

	pthread_mutex_t wb_lk;
	pthread_cond_t wb_cv;     /* wakes the write-back thread */
	pthread_cond_t space_cv;  /* a write-back finished: space may be free */
	pthread_cond_t pf_cv;
	struct fs_inode *dirty_head, *dirty_tail;
	uint32_t ndirty_files;
	/* files the list may hold before a write that would list one more
	 * waits (dirty_wait_files): each listed file holds a ref, so its
	 * O_PATH fd is never pruned (forget.c) until it is written back;
	 * 0: no bound (set at mount from the open-files limit) */
	uint64_t dirty_files_max;
	bool wb_urgent, wb_all, stop;
	struct fs_inode *pf_head, *pf_tail;
	pthread_t wb_thread, pf_thread;
	bool threads_started;

	struct fs_stats st;
	atomic_uint_fast64_t datafds;  /* inodes' data fds open */
	struct log_limit table_full_log;  /* fdata_reclaim_objs's warning */
	uint64_t datafd_budget;        /* more: close idle ones (inode.c) */
	struct fs_clwatch *clwatch;    /* cluster mount: clwatch.c */
	/* cluster mount: the last files a read found dirty on a down node
	 * (fdcl.c), for nvcachectl stats */
	pthread_mutex_t lost_mx;
	char lost[FS_LOST_FILES][256];
	unsigned nlost;
};

/* ---- fdwait.c: waiting for a file descriptor ----
 * Each inode the kernel keeps looked up holds an O_PATH fd here: past the
 * open-files limit, an open fails with EMFILE until the forget thread has
 * had the kernel forget idle inodes. Lookups may outrun that thread for a
 * moment: an open that fails for want of descriptors waits for an inode
 * to be freed (5 ms at a time, 600 times, 3 s, at most) instead of failing
 * at once; a sanitizer build on a loaded machine needs seconds. */
void fdwait_init(struct fs_fdwait *w);
void fdwait_destroy(struct fs_fdwait *w);
/* The forget thread runs (on) or has stopped or cannot work (off): off,
 * waits return at once and fdwait_next_kick returns false. */
void fdwait_set_on(struct fs_fdwait *w, bool on);
/* Wake the forget thread: the table is past inode_high, or an open waits. */
void fdwait_kick(struct fs_fdwait *w);
/* For the forget thread: wait for a kick, within_ns at most (*kicked
 * says whether one came); false once off. */
bool fdwait_next_kick(struct fs_fdwait *w, uint64_t within_ns, bool *kicked);
/* An open just failed with errno: if it was EMFILE or ENFILE and the
 * forget thread runs, kick it, wait for an inode to be freed and return
 * true: the caller tries again (*tries counts). errno is kept. */
bool fdwait_retry(struct fs_fdwait *w, int *tries);
/* An inode was freed (its fd closed): wake the waits. */
void fdwait_freed(struct fs_fdwait *w);

/* ---- caller.c: the request a FUSE worker serves ---- */
struct fuse_req;
/* ops.c notes the write, open or create this worker serves (NULL once
 * answered): a wait for cache space below may end when its caller is
 * being killed. */
void fs_serving(struct fuse_req *req);
/* Whether the process whose write, open or create this worker serves is
 * being killed (the kernel sent the request an INTERRUPT and the calling
 * thread has SIGKILL pending, or is gone): a wait for cache space gives
 * up with -EINTR, as there is no one left to answer. A fatal signal
 * (SIGTERM, SIGINT at their default action) ends it too, as the kernel
 * then sends SIGKILL to every thread; a signal the program handles does
 * not (its write would get an EINTR it does not expect), nor does a
 * write the kernel sends on its own (no caller). False outside those
 * requests. */
bool fs_caller_killed(void);
/* Whether the session loop is ending (SIGTERM or SIGINT to nvcachefs, an
 * unmount): requests still being served should finish soon, as the
 * process joins every FUSE worker before it exits. */
bool fs_session_ending(struct fs *fs);

/* ---- inode.c: one inode's own state ---- */
/* The one way to a cache manager: the owner of block blk of ino (stripe.h).
 * A file's record and its block lists are block 0's owner's; ino NULL
 * asks for the mount's own manager, for whole-store operations (stats,
 * the object list of recovery and unmount). */
struct cache_mgr *fs_mgr_for(struct fs *fs, const struct fs_inode *ino,
			     uint64_t blk);
/* Initialise the locks of a zeroed inode (datafd -1); destroy them. */
void inode_init(struct fs_inode *ino);
void inode_destroy(struct fs_inode *ino);
/* errno of the open that just failed; when out of descriptors, the user
 * sees EMFILE and the log says why (at most once a minute). */
int inode_open_errno(struct fs *fs);
/* The backing file opened for cache I/O (ino->datafd), opened again if it
 * was closed; ino->lk held. Callers use it only while they hold ino->io.
 * Out of descriptors it waits for an inode to be freed (fdwait_retry);
 * the _nowait form returns -EMFILE (or -ENFILE) at once instead. */
int inode_datafd(struct fs *fs, struct fs_inode *ino);
int inode_datafd_nowait(struct fs *fs, struct fs_inode *ino);
/* Close ino->datafd when the file has no open handle (after the last
 * release, after a write-back) and more than fs->datafd_budget are open,
 * unless ino->io is busy: a file not in use then holds one descriptor
 * (its O_PATH inode), not two, and a tar of N files keeps N open, not 2N.
 * Under the budget they stay open: each open would open it again. */
void inode_close_idle(struct fs *fs, struct fs_inode *ino);
/* The same whatever the budget, no lock of ino held: true if ino's data
 * fd was closed (it had one, no open handle, io was free). For the
 * write-back when out of descriptors (engine.c). */
bool inode_close_unused(struct fs *fs, struct fs_inode *ino);
/* Close ino->datafd now (no user: the inode is being freed). */
void inode_drop_datafd(struct fs *fs, struct fs_inode *ino);
/* The backing file's attributes as the cache knows them: its size while
 * writes are in NVRAM, the mtime of its last write. */
void inode_fix_attr(struct fs_inode *ino, struct stat *st);
/* st's mtime becomes t, and its ctime at least t (a change moves both). */
void stat_set_mtime(struct stat *st, struct timespec t);
/* st's size becomes size, with st_blocks at least enough to hold it. */
void stat_set_size(struct stat *st, uint64_t size);
/* utimensat of the file (through fd if >= 0, else proc, a /proc/self/fd
 * path), and the cache's mtime with it. 0 or -errno. */
int inode_utimens(struct fs_inode *ino, int fd, const char *proc,
		  const struct timespec tv[2]);
/* The object record, ino->lk held for each: create it if there is none
 * (-ENOSPC: the object table is full); persist size and uflags (set,
 * clear); the number of dirty blocks; delete it (obj becomes 0). */
int inode_obj_ensure(struct fs *fs, struct fs_inode *ino);
void inode_obj_save(struct fs *fs, struct fs_inode *ino, uint64_t size,
		    uint32_t set, uint32_t clear);
size_t inode_obj_dirty(struct fs *fs, struct fs_inode *ino);
void inode_obj_delete(struct fs *fs, struct fs_inode *ino);
/* The object's block indexes (dirty ones only if dirty_only), malloc'ed,
 * *n of them; NULL with no object or no memory. */
uint64_t *inode_obj_blocks(struct fs *fs, struct fs_inode *ino,
			   bool dirty_only, size_t *n);
/* Drop the inode's cache object if it holds nothing dirty and nothing
 * uses it (forget, last close of an unlinked file, unmount). */
void inode_obj_release(struct fs *fs, struct fs_inode *ino);
/* An open file's cache object, when the object table is full: given up
 * (true) only if nothing in it is newer than the backing file and no I/O
 * of the file is under way (its io lock is tried, never waited for). */
bool inode_obj_release_open(struct fs *fs, struct fs_inode *ino);

/* ---- itab.c: the inode table ---- */
/* Make the table and the root inode (the backing dir). 0 or -errno. */
int itab_open(struct fs *fs);
/* At exit, after the session and the threads stopped: free every inode. */
void itab_free_all(struct fs *fs);
/* The kernel looked up the backing inode at fd (O_PATH, stat st): its
 * inode, made if new (it takes fd) or found (fd is closed), with one more
 * lookup; &fs->root for the root. NULL: out of memory (fd closed). Past
 * inode_high it kicks the forget thread. */
struct fs_inode *itab_add(struct fs *fs, int fd, const struct stat *st);
/* The inode of (dev, ino) if known, with a ref taken. */
struct fs_inode *itab_find(struct fs *fs, dev_t dev, ino_t ino);
void itab_ref(struct fs *fs, struct fs_inode *ino);
/* Drop a ref / n lookups; the inode is freed when neither is left. */
void itab_unref(struct fs *fs, struct fs_inode *ino);
void itab_forget(struct fs *fs, struct fs_inode *ino, uint64_t n);
/* Inodes in the table. */
uint64_t itab_count(struct fs *fs);
/* The node ids of up to max inodes that the kernel holds and nothing here
 * uses (no open handle, no queue) and no request touched since the
 * previous scan: a clock hand over the table, an inode touched since the
 * last pass is spared once. For forget.c. */
size_t itab_idle(struct fs *fs, uint64_t *out, size_t max);
/* Of the next look inodes (a clock hand over the table) that the kernel
 * holds and nothing here uses, the node ids of up to max whose backing
 * file has no link left (or that an NFS backing no longer knows: ESTALE):
 * removed through another node's mount, or in the backing itself, which
 * this kernel does not know. It keeps such an inode while it keeps the
 * old name's dentry, so this daemon keeps its fd, and a local backing
 * the removed file's space and pages. An fstat each, with refs held and
 * no lock. For forget.c. */
size_t itab_gone(struct fs *fs, uint64_t *out, size_t max, size_t look);
/* Up to max inodes other than skip that hold a data fd and have no open
 * handle, each with a ref (a hint: the caller checks under their locks). */
size_t itab_datafd_holders(struct fs *fs, const struct fs_inode *skip,
			   struct fs_inode **out, size_t max);
/* Up to max inodes with a cache object and no write-back or prefetch
 * queued, closed ones (open false) or open ones, each with a ref. */
/* Refs to up to max inodes of the table (itab_unref each). */
size_t itab_hold_all(struct fs *fs, struct fs_inode **out, size_t max);
/* Refs to up to max open inodes whose cluster id is one of gids[n]. */
size_t itab_gid_holders(struct fs *fs, const uint64_t *gids, unsigned n,
			struct fs_inode **out, size_t max);
size_t itab_obj_holders(struct fs *fs, bool open, struct fs_inode **out,
			size_t max);

/* ---- dirty.c: the dirty list and back-pressure ----
 * A listed file holds a ref (itab_ref) until it is taken off. on_dirty
 * changes with ino->lk and wb_lk held, so a writer that committed a block
 * and reads on_dirty under ino->lk either sees the file listed, or sees it
 * off and lists it again (dirty_mark): the write-back thread decides under
 * the same lock. */
/* The list's lock and condition variables (before any writer runs). */
void dirty_init(struct fs *fs);
/* Writes made the inode dirty (ino->lk not held): list it. */
void dirty_mark(struct fs *fs, struct fs_inode *ino);
/* The last handle was closed: write-back due after the delay. */
void dirty_schedule(struct fs *fs, struct fs_inode *ino);
/* The file is open again: hold write-back until the next last close. */
void dirty_hold(struct fs *fs, struct fs_inode *ino);
/* Take a doomed file off the list (ino->lk held). Returns true if it was
 * removed: the caller then drops the list's ref (itab_unref) after
 * unlocking. A file being written back is dropped by the engine. */
bool dirty_forget(struct fs *fs, struct fs_inode *ino);
/* Files on the list. */
uint32_t dirty_count(struct fs *fs);
/* Wait for free cache space (back-pressure): wake write-back, sleep a bit. */
void dirty_wait_space(struct fs *fs);
/* Whether the mount is stopping (engine_stop began): waits give up. */
bool fs_stopping(struct fs *fs);
/* fs_stopping, or the session loop is ending (SIGTERM, an unmount): a
 * request's wait for a down node or for room gives up, as libfuse joins
 * every worker before the process can exit. */
bool fs_leaving(struct fs *fs);
/* A write is about to list ino (no lock of it held): while the list holds
 * fs->dirty_files_max files and ino is not one of them, have write-back
 * take them at once, due or not, and wait (10 s at most, then the write
 * goes on: the bound keeps descriptors free, it is not a correctness
 * rule). Without it a tree of small files written faster than write-back
 * (a loaded disk, a long writeback_delay) made every descriptor a listed
 * file's, nothing the forget thread could free, and write-back itself
 * could not open a file to write it back: EMFILE to the user. */
void dirty_wait_files(struct fs *fs, struct fs_inode *ino);
/* For the write-back thread, wb_lk held: the next file to write back (one
 * due, or any not backing off while writers wait or at unmount); *next
 * gets the earliest due time of the others. */
struct fs_inode *dirty_pick(struct fs *fs, uint64_t now, uint64_t *next);
/* wb_lk held: take ino off the list (the caller drops its ref); put it
 * behind the others. A file just written back and still listed goes to
 * the tail, so that, while writers wait for space (every file due at
 * once), a file whose pass cleaned nothing (its extending write itself
 * waiting for space) cannot be picked again and again while the others'
 * dirty blocks wait. */
void dirty_remove(struct fs *fs, struct fs_inode *ino);
void dirty_to_tail(struct fs *fs, struct fs_inode *ino);

/* ---- forget.c: the kernel keeps an inode looked up for as long as it
 * keeps its dentry, and each costs an O_PATH fd here: past inode_high, a
 * thread asks it to prune the unused entries of idle inodes
 * (FUSE_NOTIFY_PRUNE, Linux 6.18); it then sends FORGET and the fd is
 * closed. Without this a tree with more files than the open-files limit
 * would run the daemon out of descriptors. ---- */
struct fuse_session;
int forget_start(struct fs *fs, struct fuse_session *se);
/* Stop the thread (the session loop has ended) and free its state. */
void forget_stop(struct fs *fs);

/* ---- clwatch.c: a cluster mount notices a restarted node, even idle,
 * and counts its opens and sets its locks there again (fcl_watch,
 * fs_locks_watch), from a thread of its own. ---- */
int clwatch_start(struct fs *fs);
void clwatch_stop(struct fs *fs);

/* ---- fdata.c: the data path. All take ino->io themselves. ---- */
/* Set up the cache state of an inode from its backing file (first open). */
int fdata_inode_init(struct fs *fs, struct fs_inode *ino);
/* A new handle (open flags) on an initialised inode: a ref, the open
 * counts, write-back held. True: start a prefetch of the file (a first
 * open for use; not a new or truncated file). */
bool fdata_open(struct fs *fs, struct fs_inode *ino, int flags, bool created);
/* The handle's release: the last one schedules write-back, or drops an
 * unlinked file's data; the ref of fdata_open goes. */
void fdata_release(struct fs *fs, struct fs_inode *ino, int flags);
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

/* ---- fdcl.c: the data path of a cluster mount (fdata.c's entry points
 * call these when fs->cl is set). A file's blocks live in their owners'
 * file caches, its size and open count at its home; this node keeps none
 * of it (docs/nvcachefs-cluster.md). ---- */
int fdcl_inode_init(struct fs *fs, struct fs_inode *ino);
/* What a home answered of a file: its size, and its mtime (ns; 0: the
 * backing's holds); known false: no answer (the home down). */
struct fdcl_attr {
	bool known;
	uint64_t size, mtime_ns;
};
/* The home counts the open (and makes the file's record), its answer in
 * *a (if not NULL); a home that is down: opened uncounted if its shadow
 * says the file's size is the backing's, else -EIO. */
int fdcl_open(struct fs *fs, struct fs_inode *ino, struct fdcl_attr *a);
/* The home's last close cluster-wide: every owner writes back after the
 * delay if anything was written since they were last asked (the home's
 * FRAME_FILE_WRITER), or, for a file unlinked while open, drops it. */
void fdcl_release(struct fs *fs, struct fs_inode *ino);
/* The size the home keeps; -ENOENT: no record, or the home is down and
 * its shadow says its size is the backing's (the backing's holds);
 * -EIO: the home is down with the only copy of the size. */
int fdcl_size(struct fs *fs, struct fs_inode *ino, uint64_t *size);
/* st of a regular file gets the home's size, and its mtime when the home
 * keeps one (the file's last write, truncate or time set through a
 * mount): from *a if known (an OPEN's answer, within the same request),
 * else asked; -EIO as fdcl_size's. */
int fdcl_fix_attr(struct fs *fs, struct fs_inode *ino, struct stat *st,
		  const struct fdcl_attr *a);
/* A time set on the file (utimens; UTIME_NOW, UTIME_OMIT too) becomes the
 * mtime its home keeps, which write-backs do not move. -EIO: the home
 * is down past down_wait (the backing's time is set, not the home's). */
int fdcl_set_mtime(struct fs *fs, struct fs_inode *ino, const struct timespec *t);
ssize_t fdcl_read(struct fs *fs, struct fs_inode *ino, uint64_t off,
		  size_t len, char *buf);
ssize_t fdcl_write(struct fs *fs, struct fs_inode *ino, uint64_t off,
		   size_t len, const struct bstore_src *src);
int fdcl_truncate(struct fs *fs, struct fs_inode *ino, uint64_t size);
/* An O_APPEND write of len bytes: its place, the file's end at the home,
 * taken there at once (the size grows by len), so appends from every
 * node land one after another. 0 or -errno (-EFBIG past max). */
int fdcl_append_at(struct fs *fs, struct fs_inode *ino, size_t len, uint64_t max,
		   uint64_t *off);
void fdcl_grown(struct fs *fs, struct fs_inode *ino, uint64_t size);
/* fallocate PUNCH_HOLE or ZERO_RANGE (mode) of [off, off+len) through the
 * backing file's descriptor fd: the backing file gets the call, every
 * owner's blocks of the range become zeros (fcache's TRUNC with PUNCH),
 * then the backing file gets it again. -EOPNOTSUPP: the backing file
 * cannot (nothing done; fdata_punch writes zeros instead). */
int fdcl_punch(struct fs *fs, struct fs_inode *ino, int fd, int mode,
	       uint64_t off, uint64_t len);
/* A close (FUSE flush): the home's mtime of the file set if a write
 * from here left it unset (it relied on the size bound, fdcl.c). */
void fdcl_flush(struct fs *fs, struct fs_inode *ino);
/* The file lost its last link: dropped everywhere now, or at its last
 * close cluster-wide if open anywhere. */
void fdcl_doom(struct fs *fs, struct fs_inode *ino);
/* fsync=backing: every owner writes the file back now. */
int fdcl_fsync(struct fs *fs, struct fs_inode *ino);
/* The file's layout as text (user.nvcache.layout): its id, block, stripe
 * unit, home and the owners of its stripes in turn. Length or -errno. */
#define FDCL_LAYOUT_XATTR "user.nvcache.layout"
int fdcl_layout(struct fs *fs, struct fs_inode *ino, char *buf, size_t len);
/* Whether an xattr of the backing file is the nodes' own (the stripe
 * unit a home put there, stripe_unit=auto): a cluster mount neither
 * shows it nor lets it be set or removed, or cp -a and rsync -X would
 * carry it to other files, and a change would cut a file another way. */
bool fdcl_xattr_ours(const struct fs *fs, const char *name);
/* fcl's restart callback (fcl_on_restart; arg: the fs): an OPEN with
 * RECLAIM at node idx for every file homed there that is open here. */
struct fcl_reclaim;
void fdcl_restarted(void *arg, uint32_t idx, struct fcl_reclaim *r);
/* fcl's drop callback (fcl_drops_start; arg: the fs): the kernel's
 * pages of the open files with these ids go (another mount changed
 * them and synced). */
void fdcl_dropped(void *arg, const uint64_t *gids, unsigned n);
/* The kernel's cached pages of ino go (forget.c; at once, in this thread). */
void fs_drop_pages(struct fs *fs, struct fs_inode *ino);
/* Where ino's locks are kept: its home's node index and its id.
 * -ENOLCK when the file has no cluster-wide id. */
int fdcl_lock_target(struct fs *fs, struct fs_inode *ino, uint32_t *home,
		     uint64_t *gid);

/* ---- engine.c: the write-back and prefetch threads ---- */
int engine_start(struct fs *fs);
/* Write back everything, stop the threads (unmount). Returns the number of
 * files left dirty (backing errors). */
int engine_stop(struct fs *fs);
/* Write the inode's dirty blocks to the backing file and fsync it, now. */
int engine_writeback_inode(struct fs *fs, struct fs_inode *ino);
/* Queue the file for the prefetch thread. */
void engine_prefetch(struct fs *fs, struct fs_inode *ino);

/* ---- recovery.c ---- */
/* Write back what a previous run left dirty in NVRAM. Returns the number
 * of files that could not be written back (left in NVRAM). */
int recovery_run(struct fs *fs);

/* uflags of cache objects */
#define OBJ_DOOMED 1u
/* A truncation to the record's size is under way (fdata_truncate): after
 * a crash, recovery finishes it before any write-back. */
#define OBJ_TRUNCATING 2u
