/* lockserve.h - a FILE_LOCK request as a home node's connection serves
 * it: the wire's fields (frame.h struct frame_lock) to the lock service
 * (locksvc.h) and back. Socket-free: nvcached's connection threads call
 * it with their decoded request, tests call it directly.
 *
 * A connection carries at most one session (the first FILE_LOCK names it;
 * another session on the same connection is refused -EPROTO) and holds
 * it open until lockserve_end: the session's locks go when the last
 * connection that carried it ends. In a restarted home's grace
 * (locksvc_grace) a SET or GET waits for its end unless it is a reclaim
 * (a lock its mount held before the restart, set again). */
#pragma once
#include "cluster/frame.h"
#include "cluster/locksvc.h"

/* An F_SETLKW waits at most this long in one request, then answers
 * FS_IN_PROGRESS (the client asks again). */
#define LOCKSERVE_WAIT_MS 1000

struct lockserve_conn {
	bool on;
	uint32_t node;
	uint64_t session;
};

/* Serve q; r gets the reply's body (the conflicting lock for -EAGAIN and
 * a GET that found one). Returns 0 or -errno for the reply's status:
 * -EAGAIN, -EINPROGRESS, -EDEADLK, -ENOLCK, -EINVAL, -ENOENT (CANCEL of
 * nothing), -ENOTCONN, -EPROTO (a second session), -ENOMEM. */
int lockserve(struct locksvc *s, struct lockserve_conn *lc,
	      const struct frame_lock *q, struct frame_lock *r);
/* The connection ended: its session loses one connection. */
void lockserve_end(struct locksvc *s, struct lockserve_conn *lc);

/* A connection that carries a session is watched by TCP keepalive
 * probes after LOCKSERVE_IDLE_S seconds of silence, every second, three
 * times: the session of a mount whose node died (power, kernel, cable)
 * ends, and its locks go, within about eight seconds. A node whose
 * nvcached alone died keeps its mount's connections, and its locks. */
#define LOCKSERVE_IDLE_S 5
void lockserve_watch(int fd);
