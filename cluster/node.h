/* node.h - one cluster node: what nvcached runs (and what tests start in
 * process). It listens on its configured address, admits peers that prove
 * the shared secret, heartbeats every other node, keeps the node table
 * (alive/dead, incarnations, offered capacity), adapts its own offer to
 * local MemAvailable, and serves pages: store, fetch, drop with version
 * counters, parity XOR updates, and MIGRATE (taking a page from another
 * server).
 *
 * Threads it runs: one acceptor, one per inbound connection (bounded by
 * max_conns), one per other node (the outbound heartbeat connection), one
 * monitor (failure detector and MemAvailable). node_start/node_stop are
 * called from one thread; node_ctl may be called from any thread (the
 * control socket's). */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cluster/config.h"

#define NODE_DEFAULT_HEARTBEAT_MS 500
#define NODE_DEFAULT_TIMEOUT_MS 3000
/* Each swap device opens 4 (mirror) or 12 (parity) connections to every
 * node; the nodes' forwards to a parity node add NODE_DEFAULT_PEER_CONNS
 * from each other node: 1024 leaves room for some eighty parity devices
 * on five nodes. A refused connection puts the node down for that
 * device. */
#define NODE_DEFAULT_MAX_CONNS 1024
#define NODE_AUTH_TIMEOUT_MS 5000
/* Parity deltas an inbound connection forwards go out on a pool of this
 * many connections to each parity node (cluster/peerpool.h), shared by
 * every inbound connection: a node's forwards cost each peer at most
 * this many of its max_conns. */
#define NODE_DEFAULT_PEER_CONNS 4

struct node_opts {
	const struct cluster_config *cfg;  /* copied; secret loaded */
	uint32_t self;
	uint32_t heartbeat_ms;  /* 0: default */
	uint32_t timeout_ms;    /* 0: default; must exceed 2 heartbeats */
	uint64_t reserve;       /* bytes kept for local processes; 0: default */
	const char *meminfo;    /* NULL: /proc/meminfo */
	unsigned max_conns;     /* 0: default */
	unsigned peer_conns;    /* forwarding connections per node; 0: default */
	int listen_fd;          /* >= 0: an already listening socket to use
				 * instead of binding the configured address */
	/* Non-NULL: other nodes' pages live in this tiered store (MRAM,
	 * DRAM, flash; its policy places them), whose page space is the
	 * node's offer; NULL: in DRAM, offered as memory allows. */
	const struct tierstore_opts *tier;
	/* Non-NULL: serve the FT_FILE_* messages from this file cache (the
	 * caller's: it outlives the node) */
	struct fcache *fcache;
};

struct tierstore_opts;
struct fcache;
struct node;

/* Bind, start every thread. 0 or -errno (logged: -EADDRINUSE, -EINVAL for
 * bad options or a self id not in the cluster file, ...). */
int node_start(struct node **out, const struct node_opts *o);
/* Stop every thread, close every connection, free the store. */
void node_stop(struct node *n);

uint64_t node_incarnation(const struct node *n);
/* The control-socket handler (common/ctl.h): "stats" (key: value lines),
 * "peers" (one line per node), "limit SIZE" (cap the offer; "limit 0"
 * lifts the cap), "shrink SIZE" (give memory back: offer at most SIZE, 0
 * included, whatever memwatch says; the page owners migrate the excess
 * away), "grow" or "shrink none" (lift that cap: the offer follows idle
 * memory again). */
ssize_t node_ctl(void *arg, const char *cmd, char *out, size_t outlen);
