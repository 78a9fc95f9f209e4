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
 * next write of that slot tries the nodes again; with parity the refresher
 * also moves spilled pages back to the nodes once they have room.
 *
 * Redundancy: "none" (one copy) or "mirror" (two copies on different nodes,
 * Nswap's dynamic mirroring). With mirror, a read whose first copy fails
 * (node dead, connection lost, copy missing or stale) is served from the
 * second, and the lost copy is re-created on another node on the spot; a
 * write is acknowledged only when both copies are stored.
 *
 * "parity" (Nswap's centralised dynamic parity, RAID-4-like) and
 * "parity-dist" (decentralised, RAID-5-like): one copy of each page, and
 * pages grouped N at a time (cluster/parity.h), each member on a different
 * node, with one parity page per group (XOR of the members). New pages are
 * XORed into a parity-logging buffer in the client; when a group has N
 * members its parity page is sent, once, to the parity node (parity: one
 * dedicated node, the lowest id other than ours, which holds no data pages
 * while alive; parity-dist: a node outside the group, picked like a data
 * page's node). An overwrite of an in-use slot goes to the node holding
 * it (PAGE_OVERWRITE, or PAGE_OVERWRITE_MANY for a run): that node stores
 * the new page and forwards old^new to the group's parity node before it
 * answers, as in the paper, so the write is acknowledged only once the
 * parity has the delta. While the group is open (its parity is our
 * buffer) or its parity page is lost, we fetch the old page and apply the
 * delta ourselves. Nodes talk to each other about pages only so: a delta
 * from a data node to a parity node; everything else is client-driven. TRIM
 * XORs the page out of its group; groups left with N/2 or fewer pages are
 * merged into open groups in the background. A page whose node is lost is
 * rebuilt from its group (parity ^ the other members): on the spot by a
 * read or write, and for all of them by a background pass once the node is
 * seen dead; it is stored on a node outside its group. A lost parity page
 * is recomputed from its members onto another node (paper IV.B.4).
 *
 * Adaptive capacity (Nswap's migration): a node whose report shows it
 * holding more than it offers (shrunk by the operator, or its local
 * processes need the memory) gets no new page, a write to a slot there
 * goes elsewhere, and the refresher thread migrates our other pages off it
 * (fetch, store on a node with room outside the slot's other copy or its
 * parity group, update the map and the group, drop the old copy; parity
 * pages move whole) until it is within its offer again.
 *
 * The functions have the shapes of nbd/backend.h's nbd_backend_ops, so
 * nvswapd's adapter is a table of pointers (cluster/ does not include nbd/
 * headers: the dependency runs nbd -> cluster).
 *
 * The implementation is in cluster/remote/ (its private header rb.h says
 * how the files, locks and redundancy modes fit together).
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

enum remote_redundancy { REMOTE_NONE = 0, REMOTE_MIRROR, REMOTE_PARITY,
			 REMOTE_PARITY_DIST };

struct remote_opts {
	const struct cluster_config *cfg;  /* copied; secret loaded */
	uint32_t self_node;     /* our node id (never a target), 0: none */
	uint64_t owner;         /* the key space of our pages on the nodes;
				 * 0: self_node */
	uint64_t size;          /* bytes, a multiple of 4096 */
	enum remote_redundancy redundancy;
	unsigned conns_per_node;        /* 0: 4; parity modes 12 */
	int timeout_ms;                 /* per request; 0: 3000 */
	unsigned refresh_ms;            /* capacity table refresh; 0: 500 */
	const char *spill_path;         /* local file for pages no node has
					 * room for; NULL: such writes fail
					 * -ENOSPC. Refused on tmpfs. With
					 * parity also the rebuilt and moved
					 * pages no node takes (the hold). */
	unsigned parity_group;          /* parity modes: data pages per
					 * group, 2..8; 0: 4 */
};

struct remote_backend;

/* Open connections to every reachable node and read the capacity table.
 * 0 or -errno (logged): -EINVAL (bad options), -EHOSTUNREACH (no node
 * reachable), -ENOMEM. */
int remote_open(struct remote_backend **out, const struct remote_opts *o);
void remote_close(struct remote_backend *rb);
/* "none", "mirror", "parity[:N]", "parity-dist[:N]" -> enum; -EINVAL
 * otherwise. remote_parity_group_parse gives the N of "parity:N" (0: not
 * given, or -EINVAL for a bad one). */
int remote_redundancy_parse(const char *s);
int remote_parity_group_parse(const char *s);

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
