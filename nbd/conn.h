/* conn.h - one NBD connection as a state machine over two byte streams:
 * bytes received go into its receive buffer, nbd_conn_process() turns them
 * into backend calls and reply bytes, and the caller sends what
 * nbd_conn_send_next() hands it. No sockets here: server.c moves the bytes
 * with io_uring, the unit tests move them by hand.
 *
 * Buffers are fixed at nbd_conn_init() (once, at server start): a WRITE's
 * payload is applied to the backend as it streams through the receive
 * buffer, and a READ's data is produced into the send buffers as room
 * frees up, so requests up to the advertised 32 MiB maximum need no
 * buffer of their size and nothing is allocated per request.
 *
 * Two send buffers: one is on the wire while replies accumulate in the
 * other, so the replies of a pipelined batch (fio iodepth 16, the kernel's
 * queue) leave in one send. Replies go out in request order.
 *
 * Large READs skip the send buffers when the server offers send_direct
 * and the backend read_map: the queued replies (ending with this READ's
 * header) and the data go out in one non-blocking sendmsg straight from
 * the backend's pages, up to 1 MiB at a time. Profiled on 1 MiB reads,
 * the copy into the send buffer was a third of the server's CPU. When
 * the socket is full the connection asks to be told once it is writable
 * (nbd_conn_want_writable) rather than falling back to copying.
 *
 * Threads: a connection belongs to one server thread. Stats are written by
 * that thread only and read by the control thread (relaxed atomics). */
#pragma once
#include "nbd/backend.h"
#include "nbd/proto.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define NBD_CONN_RBUF (256 * 1024)
#define NBD_CONN_SBUF (256 * 1024)
/* READs of at least this many bytes go out zero-copy (see above); smaller
 * ones are copied, so that a batch of them leaves in one send. */
#define NBD_CONN_DIRECT_MIN (64 * 1024)
#define NBD_CONN_DIRECT_PAGES 256    /* pages per zero-copy sendmsg */

/* Request sizes by bucket: <= 4 KiB, then up to each power of two to
 * 256 KiB, then larger (8 buckets; nbd_size_bucket()). */
#define NBD_SIZE_BUCKETS 8
/* Requests taken from the receive buffer in one nbd_conn_process() pass:
 * the client sent them without waiting for the first one's reply, so it
 * had at least that many in flight (the queue depth as the server sees
 * it). Buckets 1, 2-3, 4-7, ... 64+ (nbd_depth_bucket()). */
#define NBD_DEPTH_BUCKETS 7

/* Counters of one server thread; the control socket sums all threads. */
struct nbd_stats {
	atomic_uint_fast64_t read_sizes[NBD_SIZE_BUCKETS];
	atomic_uint_fast64_t write_sizes[NBD_SIZE_BUCKETS];
	atomic_uint_fast64_t trim_sizes[NBD_SIZE_BUCKETS];
	atomic_uint_fast64_t depth[NBD_DEPTH_BUCKETS];
	atomic_uint_fast64_t depth_max;
	atomic_uint_fast64_t conns_total, conns_active;
	atomic_uint_fast64_t reads, writes, flushes, trims, zeroes;
	atomic_uint_fast64_t bytes_read, bytes_written, bytes_trimmed;
	atomic_uint_fast64_t req_errors;    /* requests answered with an error */
	atomic_uint_fast64_t proto_errors;  /* connections dropped for bad input */
};

struct nbd_conn;

struct nbd_conn_ctx {
	const struct nbd_export *exp;
	struct nbd_backend *be;
	struct nbd_stats *stats;
	/* Optional: send iov to c's peer now without blocking; bytes sent
	 * (possibly short) or -errno, -EAGAIN when the socket is full. Called
	 * from nbd_conn_process() only while nothing else is on the wire. */
	ssize_t (*send_direct)(struct nbd_conn *c, const struct iovec *iov,
			       unsigned n);
};

enum nbd_conn_state {
	CONN_CFLAGS, CONN_OPT_HDR, CONN_OPT_DATA, CONN_OPT_DISCARD,
	CONN_REQ_HDR, CONN_WRITE_DATA, CONN_WRITE_DISCARD, CONN_READ_DATA,
	CONN_CLOSING,   /* send what is queued, then close */
	CONN_DEAD,      /* close now */
};

struct nbd_conn {
	const struct nbd_conn_ctx *ctx;
	unsigned id;                /* for logs */
	enum nbd_conn_state state;
	bool no_zeroes;
	bool transmitting;          /* past the handshake */
	bool live;                  /* counted in conns_active */

	uint8_t *rbuf;              /* valid bytes: [rhead, rtail) */
	size_t rhead, rtail;

	uint8_t *sbuf[2];
	size_t slen[2];
	unsigned sfill;             /* buffer replies go into */
	bool sbusy;                 /* the other buffer is on the wire */
	size_t soff;                /* bytes of it already sent */

	/* The option or request being worked on. */
	uint32_t opt, opt_len;
	struct nbd_req req;
	uint32_t err;               /* NBD error to reply with */
	uint64_t cur;               /* next offset of a streaming READ/WRITE */
	uint64_t left;              /* payload bytes still to stream/discard */
	uint64_t read_seen;         /* zero-copy READ: presented to the policy
				     * up to here (read_map's *seen) */
	bool read_hdr;              /* this READ's header is not queued yet:
				     * a backend error can still be its
				     * answer (see read_failed) */
	bool direct_off;            /* this READ is copied (backend said so) */
	bool want_out;              /* zero-copy READ waits for socket room */
	bool shutting;              /* the server is stopping (see
				     * nbd_conn_shutdown) */
	unsigned batch;             /* requests started in this process pass */
};

/* The bucket of a request of len bytes, of a pass of n requests. */
unsigned nbd_size_bucket(uint64_t len);
unsigned nbd_depth_bucket(unsigned n);

/* Allocate the buffers. 0 or -ENOMEM. */
int nbd_conn_init(struct nbd_conn *c, const struct nbd_conn_ctx *ctx);
void nbd_conn_free(struct nbd_conn *c);
/* Start a new connection: queues the greeting. */
void nbd_conn_start(struct nbd_conn *c, unsigned id);

/* Room for the next receive (compacts the buffer first); len 0 means the
 * buffer is full until processing or sending makes progress. */
void nbd_conn_recv_space(struct nbd_conn *c, uint8_t **p, size_t *len);
void nbd_conn_received(struct nbd_conn *c, size_t n);

/* Consume received bytes as far as possible. Afterwards check
 * nbd_conn_closing()/nbd_conn_dead(). */
void nbd_conn_process(struct nbd_conn *c);

/* Bytes to send next, or false when nothing is queued. Call only when no
 * send is outstanding; report what went out with nbd_conn_sent(). */
bool nbd_conn_send_next(struct nbd_conn *c, const uint8_t **p, size_t *len);
void nbd_conn_sent(struct nbd_conn *c, size_t n);

/* A zero-copy READ found the socket full: tell the connection with
 * nbd_conn_writable() (then nbd_conn_process()) once it has room. No
 * send is outstanding meanwhile. */
bool nbd_conn_want_writable(const struct nbd_conn *c);
void nbd_conn_writable(struct nbd_conn *c);

/* The peer vanished or broke the protocol: close without sending more. */
bool nbd_conn_dead(const struct nbd_conn *c);
/* Close once everything queued is sent (OPT_ABORT, DISC). */
bool nbd_conn_closing(const struct nbd_conn *c);
/* Nothing queued or on the wire. */
bool nbd_conn_send_idle(const struct nbd_conn *c);
/* The connection was dropped by the peer or the server. */
void nbd_conn_stop(struct nbd_conn *c);
/* The server is stopping (SIGTERM): a connection still negotiating is
 * closed; one transmitting finishes the request it is in (a WRITE whose
 * payload is streaming is applied and answered), answers every later
 * request with NBD_ESHUTDOWN, as the NBD spec asks, and closes once it is
 * between requests with nothing received and its replies sent. Call
 * nbd_conn_process() afterwards. */
void nbd_conn_shutdown(struct nbd_conn *c);
