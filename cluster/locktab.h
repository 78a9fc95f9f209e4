/* locktab.h - the cluster's file locks, as one home node keeps them: POSIX
 * byte-range locks (fcntl F_SETLK, F_SETLKW, F_GETLK; ROMIO's data sieving
 * and atomic mode use them) and flock locks, for processes on any node.
 * A socket-free state machine: the home node's service feeds it requests
 * and departures and sends the replies it asks for; tests drive it alone.
 *
 * Owners. A lock belongs to an owner (node, client, owner): client is one
 * mount's session with the home node, owner the kernel's lock owner within
 * it (FUSE's lock_owner: a process's file table for POSIX locks, an open
 * file for flock). pid is only reported by F_GETLK.
 *
 * Rules the table keeps, as the kernel keeps them for local locks:
 *  - two locks of different owners on the same file and class that
 *    overlap are both read locks;
 *  - an owner's own locks never overlap each other: setting a range
 *    replaces what the owner held there (a type change, a split, or an
 *    unlock), and adjacent or overlapping ranges of one type merge;
 *  - POSIX and flock locks are separate classes and never conflict with
 *    each other (as on Linux); a flock lock is the range [0, LT_EOF];
 *  - a waiter (F_SETLKW) is granted as soon as no lock held by another
 *    owner conflicts with it, earlier waiters first (as Linux wakes its
 *    waiters); a request that would wait for an owner that, through its
 *    own waits, waits for the requester fails -EDEADLK instead (POSIX
 *    locks, as Linux does, following at most LT_DEADLOCK_DEPTH waits);
 *  - every departure is final: releasing an owner or a client
 *    drops its locks and its waits, and grants what they blocked.
 * Grants of waiting requests are told through the granted callback, called
 * from inside the call that freed them, in arrival order.
 *
 * Limits: at most max_locks ranges held plus waits queued over the whole
 * table (-ENOLCK beyond; an unlock or a grant that splits a range may go
 * one over), so a peer cannot grow it without bound; ranges
 * are checked (start <= end <= LT_EOF; -EINVAL).
 *
 * Threads: not thread-safe; the owner serialises calls (the callback runs
 * under the caller's serialisation: it must only queue a reply). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LT_EOF INT64_MAX     /* end of a lock that runs to end of file */
#define LT_DEADLOCK_DEPTH 16

enum lt_class { LT_POSIX = 0, LT_FLOCK = 1 };
enum lt_type { LT_UNLCK = 0, LT_RDLCK = 1, LT_WRLCK = 2 };

struct lt_owner {
	uint32_t node;
	uint64_t client;
	uint64_t owner;
	uint32_t pid;        /* reported by F_GETLK only */
};

struct lt_range {
	uint64_t start, end;  /* inclusive; end LT_EOF: to end of file */
	enum lt_type type;
};

/* A lock's identity as F_GETLK reports it. */
struct lt_holder {
	struct lt_owner who;
	struct lt_range r;
};

/* wait_id: the caller's name for the waiting request (its frame's request
 * id, say); o: who asked. */
typedef void (*lt_granted_fn)(void *arg, uint64_t wait_id,
			      const struct lt_owner *o);

struct locktab;

/* 0 or -ENOMEM. max_locks 0: 1 << 20. */
int locktab_new(struct locktab **out, size_t max_locks, lt_granted_fn granted,
		void *arg);
void locktab_free(struct locktab *t);

/* Set (or, with type LT_UNLCK, clear) a range for o on file. Returns 0
 * when done; -EAGAIN when another owner's lock conflicts and wait is
 * false (*holder, if not NULL, gets one conflicting lock); with wait, 1:
 * queued under wait_id, granted later through the callback (or dropped by
 * locktab_cancel or a departure); -EDEADLK, -ENOLCK, -EINVAL. An unlock
 * never waits and never fails for want of room. */
int locktab_set(struct locktab *t, uint64_t file, enum lt_class c,
		const struct lt_owner *o, const struct lt_range *r, bool wait,
		uint64_t wait_id, struct lt_holder *holder);

/* F_GETLK: 1 and *holder = a lock of another owner that conflicts with r,
 * or 0 when r could be set now. -EINVAL for a bad range. */
int locktab_get(struct locktab *t, uint64_t file, enum lt_class c,
		const struct lt_owner *o, const struct lt_range *r,
		struct lt_holder *holder);

/* Drop a queued wait (the request was interrupted). 0, or -ENOENT when no
 * wait of o has that id (it was granted already, or never queued). */
int locktab_cancel(struct locktab *t, const struct lt_owner *o,
		   uint64_t wait_id);

/* Departures: every lock and wait of the owner on file (the process
 * closed the file, or the open file went away), or of a client (a
 * mount's session ended). Return how many locks and waits went. */
size_t locktab_release_owner(struct locktab *t, uint64_t file, enum lt_class c,
			     const struct lt_owner *o);
size_t locktab_release_client(struct locktab *t, uint32_t node,
			      uint64_t client);

/* A copy of what another table granted (a mount's record of the locks
 * it holds at a home, to set them again after the home restarts): sets
 * are applied without looking for conflicts (the owner table checked
 * them; replies may come back in another order than it applied them),
 * so nothing ever waits or is refused. Owners' ranges still replace,
 * split and merge. Call once, before the first set. */
void locktab_record_only(struct locktab *t);

/* Every held lock (not the waits), file by file, in no set order. The
 * callback must not change the table. Returns how many. */
typedef void (*lt_each_fn)(void *arg, uint64_t file, enum lt_class c,
			   const struct lt_holder *h);
size_t locktab_each(const struct locktab *t, lt_each_fn fn, void *arg);

struct locktab_stats {
	size_t files;     /* files with a lock or a wait */
	size_t locks;     /* ranges held */
	size_t waits;     /* requests queued */
};
void locktab_stats(const struct locktab *t, struct locktab_stats *st);
