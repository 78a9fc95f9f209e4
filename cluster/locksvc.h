/* locksvc.h - the lock service of a home node: the lock table
 * (locktab.h) shared by the daemon's connection threads, with blocking
 * waits that fit a request/reply connection.
 *
 * A connection thread serves one request at a time, so an F_SETLKW cannot
 * hold its thread until the lock comes: locksvc_set waits at most
 * timeout_ms, then answers -EINPROGRESS and keeps the wait queued under
 * (owner, wait_id). The client asks again with the same wait_id (the same
 * request, resent): it finds its queued wait, or its grant if the lock came
 * between the two, and waits again. A client that gives up (its process
 * was interrupted) cancels the wait, and a grant it never collected is
 * unlocked by the cancel, so nothing stays held for a process that is not
 * waiting any more.
 *
 * Sessions. A mount talks to a home node over several connections under
 * one session id (lt_owner.client). Each connection that carries a session
 * opens it (locksvc_session_get) and closes it when it ends
 * (locksvc_session_put); when the last one ends, every lock and wait of the
 * session goes (the mount's daemon died, or unmounted, or its node died:
 * lockserve.h's keepalive ends the connections of a silent node).
 *
 * Threads: every call is thread-safe (one mutex); waits sleep on a
 * condition variable, never holding the mutex past their deadline. */
#pragma once
#include "cluster/locktab.h"

struct locksvc;

/* 0 or -ENOMEM. max_locks as locktab_new. */
int locksvc_new(struct locksvc **out, size_t max_locks);
/* Wakes every waiter (they answer -ESHUTDOWN, as later waits do): the
 * daemon stops without waiting out their timeouts. */
void locksvc_stop(struct locksvc *s);
/* A restart's grace (cluster/fcache.h): until until_ns (clock_now_ns
 * time) only reclaims are served; grace_wait returns at its end (or at
 * locksvc_stop), and every other SET or GET calls it first. */
void locksvc_grace(struct locksvc *s, uint64_t until_ns);
void locksvc_grace_wait(struct locksvc *s);
/* Once no thread is inside a call (the connection threads are joined). */
void locksvc_free(struct locksvc *s);

/* locktab_set, with wait: 0 when the lock is held (set now, or granted
 * to the queued wait_id), -EINPROGRESS when timeout_ms passed with the
 * wait still queued (ask again with the same wait_id); -EAGAIN (without
 * wait), -EDEADLK, -ENOLCK, -EINVAL as locktab_set; -ENOTCONN when the
 * session is not open (a departed session's late request). */
int locksvc_set(struct locksvc *s, uint64_t file, enum lt_class c,
		const struct lt_owner *o, const struct lt_range *r, bool wait,
		uint64_t wait_id, int timeout_ms, struct lt_holder *holder);
/* locktab_get. */
int locksvc_get(struct locksvc *s, uint64_t file, enum lt_class c,
		const struct lt_owner *o, const struct lt_range *r,
		struct lt_holder *holder);
/* Give up a wait: 0 (the wait dropped, or its uncollected grant undone),
 * -ENOENT when nothing of o has that wait_id. */
int locksvc_cancel(struct locksvc *s, uint64_t file, enum lt_class c,
		   const struct lt_owner *o, uint64_t wait_id);
/* The owner's locks and waits on file go (close, flock release). */
size_t locksvc_release_owner(struct locksvc *s, uint64_t file,
			     enum lt_class c, const struct lt_owner *o);

/* Sessions, counted per (node, client). get: -ENOMEM, or 0. */
int locksvc_session_get(struct locksvc *s, uint32_t node, uint64_t client);
void locksvc_session_put(struct locksvc *s, uint32_t node, uint64_t client);

struct locksvc_stats {
	struct locktab_stats tab;
	size_t sessions;
	uint64_t granted_waits, deadlocks, released_on_departure;
};
void locksvc_stats(struct locksvc *s, struct locksvc_stats *st);
