/* server.h - the NBD server: a listening socket (Unix or TCP) and N worker
 * threads, each with its own io_uring and its own pool of connections, so
 * both cores serve clients without sharing a lock on the I/O path (the
 * backend has its own). Every connection's buffers are allocated here,
 * before any client connects.
 *
 * Threads: create/run/destroy from the main thread; nbd_server_stop() is
 * async-signal-safe; nbd_server_stats() may be called from any thread. */
#pragma once
#include "nbd/backend.h"
#include "nbd/proto.h"

#include <stddef.h>
#include <sys/types.h>

struct nbd_server_opts {
	const char *unix_path;  /* a Unix socket path, or NULL for TCP */
	const char *host;       /* TCP: address to bind (127.0.0.1) */
	const char *port;       /* TCP: port (10809) */
	unsigned threads;       /* worker threads (>= 1) */
	unsigned max_conns;     /* connections served at once, all threads */
	unsigned handshake_s;   /* a connection still negotiating after this
				 * many seconds is closed (0: never) */
};

struct nbd_server;

/* Bind and listen, allocate every connection's buffers. Errors: -errno
 * (-EADDRINUSE: another server listens there), logged with the address. */
int nbd_server_create(struct nbd_server **out,
		      const struct nbd_server_opts *opts,
		      const struct nbd_export *exp, struct nbd_backend *be);
/* Start the worker threads. */
int nbd_server_start(struct nbd_server *srv);
/* Ask the workers to close every connection and return. */
void nbd_server_stop(struct nbd_server *srv);
/* Wait for the workers (after stop), close sockets, free. */
void nbd_server_destroy(struct nbd_server *srv);
/* "key: value" lines: connections, requests, bytes. */
ssize_t nbd_server_stats(struct nbd_server *srv, char *out, size_t len);
