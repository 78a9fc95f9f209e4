/* locks.h - a cluster mount's fcntl and flock locks: each file's locks are
 * kept by its home node (cluster/locksvc.h, FILE_LOCK frames), so they
 * hold between processes on different nodes (ROMIO's data sieving and
 * atomic mode, programs that flock a file). One node's nvcachefs without
 * cluster= leaves locks to the kernel and never calls this.
 *
 * The mount is one session at every home (a random id drawn at open): the
 * home releases the session's locks when the last connection carrying it
 * ends, so a killed nvcachefs leaves no lock behind. The connections to a
 * home are kept open while mounted for that reason: a pool per home that
 * grows on demand (an F_SETLKW holds one while it waits) up to
 * FS_LOCKS_CONNS and never shrinks.
 *
 * Owners are the kernel's lock owners (FUSE's lock_owner); pids are only
 * reported by F_GETLK. Errors: -EAGAIN (F_SETLK, LOCK_NB: held elsewhere),
 * -EDEADLK, -EINTR (a wait interrupted: nothing is held for it), -ENOLCK
 * (the home is unreachable or its table full; logged), -EINVAL.
 *
 * Threads: every function may be called from any thread. */
#pragma once
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>

#include "cluster/config.h"

#define FS_LOCKS_CONNS 16

struct fs_locks;

/* Nothing is connected before the first lock. 0 or -ENOMEM. A request
 * to a home that cannot be reached is tried again until down_wait_ms
 * has passed (its node may be restarting), then fails with ENOLCK. */
int fs_locks_open(struct fs_locks **out, const struct cluster_config *cfg,
		  uint32_t self_node, uint32_t down_wait_ms);
/* Closes the connections: the homes release this mount's locks. */
void fs_locks_close(struct fs_locks *l);

/* Waits that run in threads of their own (ops.c) enter before they start
 * and leave once they have answered their request. */
void fs_locks_waiter_enter(struct fs_locks *l);
void fs_locks_waiter_leave(struct fs_locks *l);
/* The mount ends: every wait gives up (-ENOLCK) at the home's next answer
 * (within a second), and this returns once every waiter has left, so none
 * answers a FUSE session that is gone. */
void fs_locks_stop(struct fs_locks *l);

/* A wait asks this between the home's answers (about once a second):
 * true ends it with -EINTR. */
typedef bool (*fs_locks_intr_fn)(void *arg);

/* F_GETLK on file obj homed at node index home: lk in, and out the
 * conflicting lock (l_type F_UNLCK when none). */
int fs_locks_get(struct fs_locks *l, uint32_t home, uint64_t obj,
		 uint64_t owner, struct flock *lk);
/* F_SETLK / F_SETLKW (wait) of lk (l_whence SEEK_SET, l_len 0: to end of
 * file; F_UNLCK unlocks). */
int fs_locks_set(struct fs_locks *l, uint32_t home, uint64_t obj,
		 uint64_t owner, uint32_t pid, const struct flock *lk,
		 bool wait, fs_locks_intr_fn intr, void *arg);
/* flock(2): op LOCK_SH, LOCK_EX or LOCK_UN, with LOCK_NB not to wait. */
int fs_locks_flock(struct fs_locks *l, uint32_t home, uint64_t obj,
		   uint64_t owner, uint32_t pid, int op, fs_locks_intr_fn intr,
		   void *arg);
/* The owner's locks on obj go: POSIX ones at a close (FUSE flush), flock
 * ones when the open file goes (FUSE release with flock_release). */
void fs_locks_release(struct fs_locks *l, uint32_t home, uint64_t obj,
		      bool flock_class, uint64_t owner);

/* A home's restart. The mount keeps a record of the locks it holds at
 * each home (cluster/locktab.h, record only). A connection that finds a
 * new incarnation of a home sets them all again there first (FILE_LOCK
 * with reclaim, in the home's grace: cluster/fcache.h). Idle mounts
 * notice through this, called about twice a second: it closes idle
 * connections whose home hung up, and while this mount holds locks
 * there, connects again (retrying at each call until the home is back). */
void fs_locks_watch(struct fs_locks *l);

struct fs_locks_stats {
	uint64_t sets, gets, waits, conflicts, errors, reclaimed;
};
void fs_locks_stats(struct fs_locks *l, struct fs_locks_stats *st);
