/* peerpool.h - a few connections to each other node, shared by every
 * thread of a node that forwards requests there (nvcached's inbound
 * connections sending parity deltas on): however many inbound connections
 * forward, a peer sees at most `size` connections from this node, not one
 * per inbound connection (which filled its --max-conns).
 *
 * Rules:
 *  - a handle is leased (peerpool_get) for one batch of requests and
 *    given back (peerpool_put) with nothing in flight, or as broken;
 *    while leased it belongs to the leasing thread alone;
 *  - a peer has at most size handles, leased, idle or being opened.
 *    peerpool_get takes an idle one, else opens one when the peer has
 *    fewer than size, else waits (up to its wait_ms) for one to come
 *    back; wait_ms 0 never waits (-EAGAIN);
 *  - a thread that holds leases waits only for peers of higher index
 *    than all it holds (cluster/fanout.h's order), or not at all
 *    (wait_ms 0; give back what it holds, then wait): every waiter then
 *    waits on a holder that can finish, so all handles out is never a
 *    deadlock;
 *  - a handle given back broken is closed; its place is opened anew by a
 *    later get. peerpool_drop (the peer was declared dead) closes its
 *    idle handles, and those leased then are closed when given back;
 *  - the pool's lock is held only to count and to move handles, never
 *    across an open, a close or any I/O; ops run in the caller's thread.
 *
 * The pool knows nothing of sockets: ops open and close the handles
 * (tests/unit/test_cluster_peerpool.c drives it with fakes). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cluster_client;
struct peerpool;

#define PEERPOOL_MAX_SIZE 16

struct peerpool_ops {
	/* a new handle to peer: 0, or -errno with the reason in err */
	int (*open)(void *ctx, unsigned peer, struct cluster_client **out,
		    char *err, size_t errlen);
	void (*close)(void *ctx, struct cluster_client *cl);
};

/* A leased handle: what peerpool_put needs back. */
struct peerpool_lease {
	struct cluster_client *cl;      /* NULL: none leased */
	unsigned peer;
	unsigned gen;                   /* the peer's drop count at the lease */
};

/* npeers peers (indexes 0 .. npeers-1), size handles each (1 ..
 * PEERPOOL_MAX_SIZE). 0, -EINVAL or -ENOMEM. */
int peerpool_create(struct peerpool **out, unsigned npeers, unsigned size,
		    const struct peerpool_ops *ops, void *ctx);
/* Close every idle handle and free the pool; nothing may be leased. */
void peerpool_destroy(struct peerpool *p);

/* Lease a handle to peer into *l: 0; -EAGAIN (every handle leased and
 * wait_ms 0), -ETIMEDOUT (none came back within wait_ms; err says so),
 * or open's error (err: its reason). */
int peerpool_get(struct peerpool *p, unsigned peer, int wait_ms,
		 struct peerpool_lease *l, char *err, size_t errlen);
/* Give l's handle back (l->cl becomes NULL); broken: close it (a
 * transport error, or replies still due). NULL l->cl: nothing. */
void peerpool_put(struct peerpool *p, struct peerpool_lease *l, bool broken);
/* The peer is dead: its idle handles closed, its leased ones closed when
 * given back. */
void peerpool_drop(struct peerpool *p, unsigned peer);

struct peerpool_stats {
	uint64_t opens;         /* handles opened */
	uint64_t open_errors;   /* opens that failed */
	uint64_t closes;        /* closed: broken, dropped, at destroy */
	uint64_t waits;         /* gets that waited for a handle */
	uint64_t wait_timeouts; /* of those, ones that timed out */
	unsigned handles;       /* open now (idle, leased or opening), all peers */
	unsigned leased;        /* leased now */
};
void peerpool_stats_read(struct peerpool *p, struct peerpool_stats *s);
