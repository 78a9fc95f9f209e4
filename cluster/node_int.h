/* node_int.h - the cluster node's parts (node*.c) share this: its state
 * (struct node), an inbound connection's (struct inbound), and the
 * functions one part calls in another. Not an interface: callers use
 * node.h. */
#ifndef NVCACHE_CLUSTER_NODE_INT_H
#define NVCACHE_CLUSTER_NODE_INT_H

#include "cluster/node.h"

#include "cluster/auth.h"
#include "cluster/batch.h"
#include "cluster/client.h"
#include "cluster/conn.h"
#include "cluster/fcache.h"
#include "cluster/fanout.h"
#include "cluster/lockserve.h"
#include "cluster/forward.h"
#include "cluster/membership.h"
#include "cluster/memwatch.h"
#include "cluster/pagestore.h"
#include "pmem/tierstore.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/fdlimit.h"
#include "common/log.h"
#include "common/outbuf.h"
#include "common/xor.h"
#include "common/opts.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Small stacks: under mlockall(MCL_FUTURE) every thread's whole stack is
 * locked. A connection thread's deepest path is frame_encode (~70 KiB). */
#define CONN_STACK (512 * 1024)
#define SMALL_STACK (256 * 1024)

struct peer_link {
	struct node *node;
	const struct cluster_node *cn;
	pthread_t thread;
	bool started;
	struct conn *c;         /* the outbound connection, owned by thread */
};

struct node {
	struct cluster_config cfg;
	const struct cluster_node *me;
	uint32_t self;
	uint64_t incarnation;
	uint32_t hb_ms, timeout_ms;
	uint64_t reserve;
	char meminfo[256];
	unsigned max_conns;
	unsigned peer_conns;    /* forwarding connections per peer (fwd) */
	int listen_fd;
	int stop_pipe[2];

	struct membership *mb;
	struct pagestore *ps;
	struct locksvc *locks;  /* the file locks this node is home of */
	struct fcache *fc;      /* the file cache (node_opts.fcache), or NULL */
	/* the connections that forward parity deltas, peer_conns to each
	 * other node (by config index), shared by every inbound connection */
	struct peerpool *fwd;
	struct fwd_target fwd_to;

	pthread_mutex_t lock;   /* guards everything below */
	pthread_cond_t cond;    /* stop, conns_active changes */
	bool stopping;
	unsigned conns_active;
	/* max_conns connection slots. A slot's thread is joinable: when it
	 * ends it leaves its slot marked ended, and the slot's next user
	 * (accept_one) or node_stop joins it, so that no thread is still
	 * unwinding when main returns (LeakSanitizer's exit-time check
	 * cannot run beside one). */
	struct conn_slot {
		int fd;         /* -1: no connection (to shut down at stop) */
		/* taken, from accept_one until its thread's very last step
		 * (conn_slot_release): the fd goes -1 before the close, but
		 * the slot is not free before the thread is done with it */
		bool busy;
		bool thread;    /* a thread ran in this slot and is not joined */
		pthread_t t;
	} *slots;
	uint64_t mem_total, mem_available, offer, limit_override;
	uint64_t mem_offer;     /* what memwatch alone would offer */
	uint64_t tier_bytes;    /* tiered store: its page space, the offer
				 * (memory is reserved for it at start) */
	/* The operator's shrink (node_ctl "shrink SIZE"): the offer is
	 * capped at shrink_cap, 0 included; the page owners migrate the
	 * excess away. shrink_pending: not yet down to it (logged once
	 * reached). */
	bool shrunk, shrink_pending;
	uint64_t shrink_cap;
	bool meminfo_warned;

	pthread_t acceptor, monitor;
	bool acceptor_started, monitor_started;
	unsigned n_links;
	struct peer_link links[CONFIG_MAX_NODES];

	/* test only: every stall_every-th overwrite stalls stall_ms before
	 * its delta goes on (test_stall_forward); 0: none */
	unsigned stall_every, stall_ms;
	atomic_uint_fast64_t ow_count;
	atomic_uint_fast64_t conns_total, auth_failures, bad_frames,
		conns_refused, heartbeats_in, heartbeats_out, requests,
		forwards, forward_errors;
	/* requests served, by frame type (nvcachectl's requests.TYPE) */
	atomic_uint_fast64_t requests_by[FT_COUNT];
	/* "refused peer" lines, one limit per kind of refusal (what the
	 * peer claims and why it was refused, hashed): a peer retrying the
	 * same wrong secret is held back, a different refusal still shows. */
	struct log_limit auth_log[16];
};

/* An overwrite whose delta is on its way to the parity node: what its
 * reply and its log line need. A connection keeps up to OW_PIPE of them:
 * a swapping node sends runs of overwrites on one connection, and waiting
 * for each parity node's answer before reading the next request made that
 * run two round trips per page. Replies still leave in request order. */
#define OW_PIPE 8
struct ow_pending {
	uint64_t request_id, owner, page_id, group, version;
	uint32_t kind;
	unsigned pn;            /* the parity node's index in the config */
	unsigned gen;           /* fwd.gen[pn] when its delta was sent */
};

struct inbound {
	struct node *node;
	struct conn c;
	int slot;
	struct auth_peer peer;
	struct frame_hdr req, rep;
	uint8_t page[PAGESTORE_PAGE];
	/* NODE_STATS: the snapshot a request at offset 0 took (allocated
	 * then; later chunks are read from it, so they agree). */
	char *stats;
	size_t stats_len;
	/* The batches (PAGE_FETCH_MANY, PAGE_STORE_MANY, ...): the reply
	 * payload; PAGE_OVERWRITE_MANY: the deltas (each allocated at the
	 * first need: not every peer sends them) */
	uint8_t *batch;
	struct ow_many *om;
	/* FT_FILE_* but READ: the reply's bytes (allocated at the first) */
	uint8_t *fbuf;
	/* FT_FILE_READ: the reply's bytes where they are in NVRAM, pinned
	 * until sent */
	struct fcache_read frd;
	/* PAGE_OVERWRITE: the handles to parity nodes leased from the
	 * node's pool while this connection has overwrites in flight
	 * (cluster/forward.h); given back by ow_flush */
	struct fwd_leases fwd;
	/* Overwrites whose parity updates are in flight, oldest first, and
	 * the frame their replies are made in (ow_flush) */
	struct ow_pending ow[OW_PIPE];
	unsigned now;
	struct frame_hdr orep;
	/* FILE_LOCK: the mount session this connection carries */
	struct lockserve_conn lk;
	/* file requests: the mount run this connection holds at the file
	 * cache (fcache_mount_conn), 0: none yet */
	uint64_t finst;
};

/* node.c */
uint64_t now_ns(void);
bool node_sleep(struct node *n, uint32_t ms);
bool node_stopping(struct node *n);
void self_capacity(struct node *n, struct frame_capacity *cap);
int node_heard(struct node *n, uint32_t id, uint64_t inc,
	       const struct frame_capacity *cap);
void update_capacity(struct node *n);

/* node_serve.c */
uint8_t *batch_reply_buf(struct inbound *ib, const char *what, int *rc,
			 const char *why);
void reply_init(struct inbound *ib);
/* Count a request of frame type TYPE (any value: unknown ones count in
 * requests alone). */
void node_count_request(struct node *n, uint32_t type);
uint32_t status_of(int rc);
void reply_status(struct frame_hdr *r, int rc);
void *acceptor_main(void *arg);

/* node_overwrite.c */
const void *serve_overwrite_many(struct inbound *ib, const uint8_t *payload,
				 int *rc);
int serve_overwrite(struct inbound *ib, const struct pagestore_key *key,
		    const uint8_t *payload);
int ow_flush(struct inbound *ib);
int ow_room(struct inbound *ib);
int ow_pipe(struct inbound *ib, const uint8_t *payload);

/* node_ctl.c */
ssize_t ctl_stats(struct node *n, char *out, size_t outlen);

#endif
