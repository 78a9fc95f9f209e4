/* conn.h - one framed, blocking cluster connection over a stream socket.
 *
 * conn_recv reads a 16-byte prefix, checks its lengths against the caps
 * (and against this connection's payload cap: one page, unless raised with
 * conn_set_max_payload) before reading
 * anything more, then reads the rest into the connection's own buffer and
 * decodes it with frame_decode. conn_send writes prefix + header + payload
 * with one sendmsg (the payload is not copied).
 *
 * Threads: a struct conn belongs to one thread at a time (no locking); the
 * payload pointer conn_recv returns is valid until the next conn_recv. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "cluster/frame.h"

struct conn {
	int fd;
	char peer[80];          /* "127.0.0.1:40123", for log lines */
	uint32_t max_payload;   /* the payload cap; a page unless raised */
	/* Frames larger than rx (up to FRAME_MAX_CONN_PAYLOAD): allocated at
	 * the first one, so that the many connections that never see one
	 * (under mlockall, every byte is locked RAM) stay small. */
	uint8_t *big;
	uint8_t tx[FRAME_MAX_HEAD];
	uint8_t rx[FRAME_MAX_HEAD + FRAME_PAGE_SIZE];
};

/* Take over a connected socket (closed by conn_close); TCP_NODELAY. */
void conn_init(struct conn *c, int fd);
/* The TCP congestion control of the sockets conn_prepare_socket sees
 * from now on (the cluster file's tcp_congestion): a name the kernel
 * knows, "system" for the machine's own, NULL or "" for the default,
 * cubic. Cubic because the machine's may be BBR, whose pacing arms a
 * timer for each burst a sender sends: over loopback, 4 nodes and 4
 * mounts writing, 18 % fewer MiB/s than cubic (docs/benchmarks.md).
 * The default not allowed to this process (unprivileged): reno. A name
 * not set (not in this kernel, not allowed to this process): the
 * machine's. Logged once. Call before making connections. */
#define CONN_CONGESTION_DEFAULT "cubic"
#define CONN_CONGESTION_UNPRIVILEGED "reno"
void conn_set_congestion(const char *name);
/* Give a socket that congestion control: before connect(), or before
 * listen() (its connections inherit it). Set on a connection BBR began,
 * it would keep BBR's pacing. conn_connect calls it. */
void conn_prepare_socket(int fd);
/* Accept payloads up to max bytes (at most FRAME_MAX_CONN_PAYLOAD: a
 * PAGE_FETCH_MANY reply) on this connection: a client that asks for
 * them. The larger buffer is allocated, once, when the first such frame
 * arrives (conn_recv fails -ENOMEM if it cannot be). */
void conn_set_max_payload(struct conn *c, uint32_t max);
/* Bound each send and each receive; 0: wait forever. 0 or -errno. */
int conn_set_timeout(struct conn *c, int ms);
void conn_close(struct conn *c);
/* Close after an error reply: stop sending, discard what the peer still
 * sends (at most 1 MiB or 500 ms) so that the kernel does not answer it
 * with a reset that would destroy our reply, then close. */
void conn_close_after_error(struct conn *c);

/* Connect to host:port (TCP, TCP_NODELAY) within timeout_ms. 0 or -errno
 * (-ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH, -ENOENT: unknown host). */
int conn_connect(struct conn *c, const char *host, uint16_t port,
		 int timeout_ms);

/* Send one frame. 0 or -errno (-EPIPE/-ECONNRESET: peer gone,
 * -ETIMEDOUT, or the frame_encode error for an invalid h). */
int conn_send(struct conn *c, const struct frame_hdr *h, const void *payload);
/* The same with the payload in npl pieces (at most CONN_MAX_IOV): a
 * batch's entries and its pages, sent from where they are. */
#define CONN_MAX_IOV (FRAME_BATCH_MAX + 1)
int conn_sendv(struct conn *c, const struct frame_hdr *h, const struct iovec *pl,
	       unsigned npl);
/* conn_send and conn_sendv, and with more the frame may wait in the
 * socket (MSG_MORE) until a later send without it: the caller sends one
 * soon (the next reply of a run of requests that wait), so that a run's
 * replies go out together and wake the peer once. */
int conn_send_more(struct conn *c, const struct frame_hdr *h,
		   const void *payload, bool more);
int conn_sendv_more(struct conn *c, const struct frame_hdr *h,
		    const struct iovec *pl, unsigned npl, bool more);
/* Receive one frame into *h. 0, or:
 *   -ECONNRESET  the peer closed (cleanly between frames or mid-frame);
 *   -ETIMEDOUT   nothing within the timeout;
 *   -EBADMSG, -EMSGSIZE, -EPROTO  a bad frame (*why says what): the stream
 *                cannot be trusted any more; answer with conn_send_error
 *                and close. */
int conn_recv(struct conn *c, struct frame_hdr *h, const uint8_t **payload,
	      const char **why);
/* The same, with a payload of at most dstlen bytes read straight into dst
 * (*payload == dst then): no copy out of the connection's buffer. dst's
 * bytes are undefined after an error. A larger payload goes where
 * conn_recv puts it. */
int conn_recv_into(struct conn *c, struct frame_hdr *h, void *dst, size_t dstlen,
		   const uint8_t **payload, const char **why);
/* Send an unsolicited ERROR frame (best effort, errors ignored). */
void conn_send_error(struct conn *c, uint32_t node_id, uint32_t status,
		     const char *text);
