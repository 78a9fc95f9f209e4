/* remote_backend.h - a swap device's pages in other nodes' memory: the Nswap
 * client side, for nvswapd's remote backend.
 *
 * The device is a flat byte space of 4 KiB slots. Each slot written maps,
 * in the shadow slot map, to the node(s) holding it and the slot's version
 * (incremented by every write, sent with every store and fetch, so a stale
 * copy is never returned as current). New pages are placed by the capacity
 * table (each node's offer minus use, refreshed from a node's NODE_TABLE and
 * decremented locally as pages are placed) with the power of two choices:
 * two random candidate nodes that are alive and have room, the one with
 * more room wins. An overwrite goes back to the node(s) already holding the
 * slot (Nswap's swap-out to an in-use slot).
 *
 * When no node has room for a page, it goes whole to a local spill file if
 * one is given (Nswap swaps to disk only when no idle RAM is left); the
 * next write of that slot tries the nodes again.
 *
 * Redundancy: "none" (one copy) or "mirror" (two copies on different nodes,
 * Nswap's dynamic mirroring). With mirror, a read whose first copy fails
 * (node dead, connection lost, copy missing or stale) is served from the
 * second, and the lost copy is re-created on another node on the spot; a
 * write is acknowledged only when both copies are stored. Parity modes come
 * with the full remote-swap issue.
 *
 * The functions have the shapes of nbd/backend.h's nbd_backend_ops, so
 * nvswapd's adapter is a table of pointers (cluster/ does not include nbd/
 * headers: the dependency runs nbd -> cluster).
 *
 * Threads: every function may be called from several threads at once.
 * Operations on one slot are serialised by a striped lock; each node has a
 * small pool of client connections (cluster/client.h), one request at a
 * time on each. The slot map and the pools are allocated at open; the I/O
 * path does not allocate, except to reconnect after a node failure. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cluster/config.h"

enum remote_redundancy { REMOTE_NONE = 0, REMOTE_MIRROR };

struct remote_opts {
	const struct cluster_config *cfg;  /* copied; secret loaded */
	uint32_t self_node;     /* our node id (never a target), 0: none */
	uint64_t owner;         /* the key space of our pages on the nodes;
				 * 0: self_node */
	uint64_t size;          /* bytes, a multiple of 4096 */
	enum remote_redundancy redundancy;
	unsigned conns_per_node;        /* 0: 4 */
	int timeout_ms;                 /* per request; 0: 3000 */
	unsigned refresh_ms;            /* capacity table refresh; 0: 500 */
	const char *spill_path;         /* local file for pages no node has
					 * room for; NULL: such writes fail
					 * -ENOSPC. Refused on tmpfs. */
};

struct remote_backend;

/* Open connections to every reachable node and read the capacity table.
 * 0 or -errno (logged): -EINVAL (bad options), -EHOSTUNREACH (no node
 * reachable), -ENOMEM. */
int remote_open(struct remote_backend **out, const struct remote_opts *o);
void remote_close(struct remote_backend *rb);
/* "none", "mirror" -> enum; -EINVAL otherwise. */
int remote_redundancy_parse(const char *s);

/* nbd_backend_ops shapes. off/len inside the device (checked: -EINVAL).
 * Errors: -EIO (no copy could be read / stored), -ENOSPC (no node has room). */
int remote_read(void *rb, void *buf, uint64_t off, uint32_t len);
int remote_write(void *rb, const void *buf, uint64_t off, uint32_t len);
/* Whole slots in the range are dropped from their nodes and read as zeros;
 * partial slots at the edges are zeroed by read-modify-write. */
int remote_trim(void *rb, uint64_t off, uint64_t len);
int remote_flush(void *rb);
ssize_t remote_stats(void *rb, char *out, size_t len);
void remote_destroy(void *rb);
