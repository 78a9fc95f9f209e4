/* ctl.h - the control socket every daemon serves, and its client.
 *
 * A daemon calls ctl_server_start() once; a thread then accepts connections
 * on $NVCACHE_RUN_DIR/<kind>-<name>.sock (default run dir /run/nvcache),
 * reads one command line (at most CTL_MAX_CMD bytes, e.g. "stats"), calls the
 * handler, writes its text reply and closes. nvcachectl is the client.
 *
 * Two commands are answered here, never reach the handler, and so hold
 * for every daemon: "ping" ("pong") and "info" ("kind: K", "name: N",
 * "pid: P", "uptime_s: S" lines: the process's age, not the socket's).
 *
 * Kinds and names: "fs" (name: the mount point, see ctl_name_from_path),
 * "swap" (the export name), "node" (the node id).
 *
 * Threads: the handler runs on the control thread, one request at a time;
 * it must take whatever locks guard the state it reads. The socket is
 * created mode 0600: only its owner (root) may talk to it. */
#pragma once
#include <stddef.h>
#include <sys/types.h>

#define CTL_MAX_CMD 256
#define CTL_MAX_REPLY (64 * 1024)

/* Write the reply for cmd into out (at most outlen bytes, NUL not needed);
 * return its length, or -errno (-ENOENT: unknown command). */
typedef ssize_t (*ctl_handler)(void *arg, const char *cmd, char *out,
			       size_t outlen);

struct ctl_server;

/* The run directory: $NVCACHE_RUN_DIR or /run/nvcache. */
const char *ctl_run_dir(void);
/* "/mnt/nvcache/" -> "mnt-nvcache"; "/" -> "root". */
void ctl_name_from_path(const char *path, char *out, size_t outlen);
/* The socket path of (kind, name). Returns 0 or -ENAMETOOLONG. */
int ctl_socket_path(const char *kind, const char *name, char *out,
		    size_t outlen);

/* Create the run dir if needed, bind, and start the thread. -EADDRINUSE if
 * a live daemon already answers there (a stale socket is replaced). */
int ctl_server_start(struct ctl_server **out, const char *kind,
		     const char *name, ctl_handler handler, void *arg);
/* Stop the thread and remove the socket. NULL is fine. */
void ctl_server_stop(struct ctl_server *srv);

/* Client: send cmd to the socket at path, read the whole reply into out
 * (NUL-terminated). Returns the reply length or -errno (-ENOENT/-ECONNREFUSED:
 * no daemon there). timeout_ms bounds the whole exchange. */
ssize_t ctl_request(const char *path, const char *cmd, char *out,
		    size_t outlen, int timeout_ms);
