/* backend_remote.h - the NBD backend over other nodes' memory: nvswapd's
 * pages go to the nvcached nodes of a cluster file (cluster/remote_backend.h:
 * shadow slot map, power-of-two-choices placement, mirror). Thread-safe. */
#pragma once
#include "nbd/backend.h"

struct nbd_remote_opts {
	uint64_t size;              /* export bytes, a multiple of 4 KiB */
	const char *cluster;        /* cluster file (nodes + secret) */
	uint32_t self_node;         /* this node's id (never a target); 0: none */
	const char *redundancy;     /* "none" or "mirror" (default) */
	const char *name;           /* export name: with self_node, the owner
				     * id of our pages on the nodes */
	const char *spill_path;     /* --flash: pages no node has room for;
				     * NULL: such writes fail */
};

/* 0 or -errno (logged). Fills be; be->ops->destroy closes the connections. */
int nbd_backend_remote_create(struct nbd_backend *be,
			      const struct nbd_remote_opts *o);
