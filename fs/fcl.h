/* fcl.h - nvcachefs's link to the cluster's file cache managers: one
 * nvcached per node of the cluster file, each owning the stripes of every
 * file dealt to it (docs/nvcachefs-cluster.md). Below everything in fs/,
 * beside the cache managers: it knows frames and nodes, not inodes.
 *
 * Each node has a small pool of authenticated connections: a thread takes
 * one for a call and puts it back, so FUSE threads talk to the nodes at
 * once with no lock held across the wire; a broken connection is closed
 * and a new one opened at the next call.
 *
 * Threads: every function may be called from any thread. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "cluster/config.h"
#include "cluster/frame.h"

struct fcl;

struct fcl_opts {
	const char *cluster;    /* the cluster file */
	uint32_t node;          /* this node's id in it */
	const char *backing;    /* realpath of the backing directory */
	uint64_t stripe_unit;   /* 0: auto (one equal part per node); every
				 * node's mounts must say the same */
	uint32_t replicas;      /* 1 or 2 (every node's must be the same) */
};

/* Connect to every node, authenticated, and attach the backing directory
 * to each: refused (-errno, the reason logged) for a node id not in the
 * file, an unreachable node or wrong secret, a node without a file cache,
 * another cluster file or another backing directory, another replicas
 * setting than the node's (or replicas=2 with one node). Creates nothing. */
int fcl_open(struct fcl **out, const struct fcl_opts *o);
void fcl_close(struct fcl *c);

uint32_t fcl_nodes(const struct fcl *c);
/* The cluster file as loaded (node index i is its i-th node). */
const struct cluster_config *fcl_config(const struct fcl *c);
uint32_t fcl_block(const struct fcl *c);
/* The node that knows which of node idx's blocks are dirty: the next
 * one (cluster/fmarks.h). */
uint32_t fcl_shadow(const struct fcl *c, uint32_t idx);
/* The node index (0..nodes-1) owning block blk of object gid cut in
 * stripes of unit bytes (the file's: a multiple of the block), dealt
 * round robin from node gid % nodes, the home, which keeps the file's
 * record. */
uint32_t fcl_owner(const struct fcl *c, uint64_t gid, uint64_t blk, uint64_t unit);
uint32_t fcl_home(const struct fcl *c, uint64_t gid);
/* A new token for an OPEN the home counts (FileOp.token): unique in this
 * mount's run, never 0. */
uint64_t fcl_open_token(struct fcl *c);
/* stripe_unit=auto: the unit of a file of size bytes, one equal part per
 * node rounded up to the block (at most FCACHE_UNIT_MAX blocks); a file
 * empty gets FCL_UNIT_EMPTY (its final size is not known). The file's home fixes a file's unit
 * (cluster/fcache.h): this is only what a mount offers. */
#define FCL_UNIT_EMPTY (1u << 20)
uint64_t fcl_auto_unit(const struct fcl *c, uint64_t size);
/* Node index idx's id in the cluster file; the mounts' stripe unit (0:
 * auto, each file's own). */
uint32_t fcl_node_id(const struct fcl *c, uint32_t idx);
uint64_t fcl_unit(const struct fcl *c);

/* One request to node index idx (cluster_client_file_call's contract). */
int fcl_call(struct fcl *c, uint32_t idx, uint32_t type,
	     const struct frame_fop *f, const struct iovec *pl, unsigned npl,
	     struct frame_fop *rf, void *buf, size_t buflen);
/* fcl_call without a read buffer, and *down: the node could not be
 * reached (then -EIO), as opposed to an answer. */
int fcl_call_down(struct fcl *c, uint32_t idx, uint32_t type,
		  const struct frame_fop *f, const struct iovec *pl, unsigned npl,
		  struct frame_fop *rf, bool *down);
/* A node that is down (fcl_call_down's *down) may be coming back (its
 * nvcached restarting). fcl_wait_up(c, idx, wait_ms, &since), in a
 * caller's loop of tries, since 0 at the first: while the wait that
 * began at *since (the node's first call that found it down, if earlier
 * than the first try) is shorter than wait_ms, sleeps a little and
 * returns true: try again; else false (logged once until the node
 * answers). So a request that needs a restarting node waits for it,
 * and once a node has been down for wait_ms, such requests fail at once. */
bool fcl_wait_up(struct fcl *c, uint32_t idx, uint32_t wait_ms, uint64_t *since);
/* Many requests, each to its node (idx), pipelined on one connection per
 * node (CLUSTER_CLIENT_MAX_INFLIGHT in flight): a block range per request,
 * one round trip for a node's ranges of a FUSE request instead of one
 * each. Each gets its rc (and rf, and a read's bytes in buf). */
struct fcl_req {
	uint32_t idx, type;
	struct frame_fop f;
	struct iovec pl[2];
	unsigned npl;
	void *buf;
	size_t buflen;
	struct frame_fop rf;
	int rc;
	bool down;   /* rc -EIO: the node could not be reached */
};
void fcl_call_many(struct fcl *c, struct fcl_req *r, unsigned n);
/* A node's restart. A node keeps the open counts of the files it is home
 * of in DRAM (cluster/fcache.h), so a restarted one has lost them. The
 * first new connection that finds a new incarnation of node idx calls fn
 * (before any other thread talks to the node: they wait), which sends,
 * through fcl_reclaim_call, an OPEN with HOME and RECLAIM for every file
 * homed there that this mount holds open. Idle mounts notice through
 * fcl_watch, called about twice a second: it closes idle connections
 * whose node hung up and connects again (at each call until the node is
 * back). */
struct fcl_reclaim;
typedef void (*fcl_restart_fn)(void *arg, uint32_t idx, struct fcl_reclaim *r);
void fcl_on_restart(struct fcl *c, fcl_restart_fn fn, void *arg);
/* One request on the restarted node's connection (cluster_client_file_call's
 * contract); after a transport error every later one fails at once. */
int fcl_reclaim_call(struct fcl_reclaim *r, uint32_t type,
		     const struct frame_fop *f, const struct iovec *pl,
		     unsigned npl, struct frame_fop *rf);
void fcl_watch(struct fcl *c);
/* The nodes found down (a request or the watch could not reach them)
 * and not answering since. */
uint32_t fcl_nodes_down(struct fcl *c);

/* Drops (cluster/fcache_inval.c): a thread per node keeps a FILE_WATCH
 * outstanding there; the ids of the files it answers with go to fn,
 * which must have dropped their cached pages when it returns (the next
 * WATCH tells the node so). A node that hangs up is connected to again
 * every half second. fcl_drops_stop breaks the waits and joins. */
typedef void (*fcl_drop_fn)(void *arg, const uint64_t *gids, unsigned n);
int fcl_drops_start(struct fcl *c, fcl_drop_fn fn, void *arg);
void fcl_drops_stop(struct fcl *c);

/* The same request to every node, sent to all before any reply is
 * awaited (fcl_call_many), so the nodes work at once; the first error
 * in node order. */
int fcl_call_all(struct fcl *c, uint32_t type, const struct frame_fop *f);
