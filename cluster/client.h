/* client.h - talk to one nvcached: connect and authenticate, then store,
 * fetch and drop pages, apply parity XOR deltas, read the node table. This
 * is what nvswapd's remote backend calls (synchronous: one request, one
 * reply; or several pipelined, see the _start calls).
 *
 * Pages are keyed by (owner, page id) and parity pages by (owner, parity
 * group); owner is fixed per handle at open (nvswapd uses its node id).
 * Versions follow pagestore.h: a store older than the stored version fails
 * -ESTALE, a fetch of a version the node does not hold fails -ESTALE.
 *
 * Errors: 0 or -errno. Replies: -ESTALE, -ENOENT (no such page), -ENOSPC
 * (the node offers no more room), -EOPNOTSUPP, -EIO (node-side failure).
 * Transport: -ECONNRESET/-EPIPE (node gone), -ETIMEDOUT (no reply within
 * the handle's timeout), -EPROTO (a reply that does not match): after any
 * of these the handle is broken and every later call returns -ENOTCONN;
 * close it and open a new one. Parity updates are not idempotent: after a
 * transport error the caller cannot know whether the delta was applied and
 * must rebuild that parity page.
 *
 * Threads: a handle belongs to one thread at a time; give each I/O thread
 * its own handle, or serialise calls on one. Handles share nothing. No
 * allocation after open. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "cluster/config.h"
#include "cluster/frame.h"

struct cluster_client;

struct cluster_client_opts {
	const char *host;
	uint16_t port;
	const uint8_t *secret;
	size_t secret_len;
	uint32_t self_node;     /* our node id, 0 when we are not a node */
	uint64_t owner;         /* whose pages this handle stores */
	int timeout_ms;         /* per request; 0: 5000 */
};

/* Connect and authenticate. 0, or -errno with the reason in err:
 * -ECONNREFUSED, -ETIMEDOUT, -EACCES (secret mismatch or refused). */
int cluster_client_open(struct cluster_client **out,
			const struct cluster_client_opts *o, char *err,
			size_t errlen);
/* Same, to node id of cfg (its address and the cluster's secret). */
int cluster_client_open_node(struct cluster_client **out,
			     const struct cluster_config *cfg, uint32_t node_id,
			     uint32_t self_node, uint64_t owner, int timeout_ms,
			     char *err, size_t errlen);
void cluster_client_close(struct cluster_client *c);
/* Break a call blocked on c in another thread (it fails with a transport
 * error); c must still be closed. */
void cluster_client_shutdown(struct cluster_client *c);
/* The time a send or a reply may take from now on (ms, > 0), in place of
 * the one it was opened with. */
int cluster_client_set_timeout(struct cluster_client *c, int timeout_ms);

/* The node we talk to, and its incarnation (from the handshake). */
uint32_t cluster_client_node(const struct cluster_client *c);
uint64_t cluster_client_incarnation(const struct cluster_client *c);
/* An idle handle (no reply owed) whose node hung up (it restarted, or
 * died) or sent what nobody asked for: of no more use. Does not block. */
bool cluster_client_hung_up(const struct cluster_client *c);

int cluster_client_page_store(struct cluster_client *c, uint64_t page_id,
			      uint64_t version, const void *page);
/* version 0: whatever is stored; *version_out (may be NULL) gets it. */
int cluster_client_page_fetch(struct cluster_client *c, uint64_t page_id,
			      uint64_t version, void *page, uint64_t *version_out);

/* Requests in two halves, so that one thread can have requests in flight
 * on several handles at once (a mirror's two copies, a parity group's
 * members) or several on one handle (the node answers a connection's
 * requests in order): _start sends one, and each wait takes the reply to
 * the oldest one still in flight (same returns as the synchronous call).
 * At most CLUSTER_CLIENT_MAX_INFLIGHT at once (-EBUSY beyond); while any
 * is in flight the synchronous calls refuse with -EBUSY, and a wait of the
 * wrong kind (cluster_client_wait for a fetch, or the other way round)
 * or with nothing in flight gives -EINVAL; neither breaks the handle. A
 * handle with requests in flight must be waited out or closed, never
 * handed to other code. A fetch's reply is checked against its request
 * (same page, the version asked for, one whole page) before its page is
 * copied: a mismatch is -EPROTO and breaks the handle. After a transport
 * error every request still in flight is lost (their waits: -ENOTCONN). */
#define CLUSTER_CLIENT_MAX_INFLIGHT 16
int cluster_client_page_store_start(struct cluster_client *c, uint64_t page_id,
				    uint64_t version, const void *page);
int cluster_client_page_fetch_start(struct cluster_client *c, uint64_t page_id,
				    uint64_t version);
int cluster_client_parity_fetch_start(struct cluster_client *c, uint64_t group);
/* The reply to a store (or any request without a page in its reply). */
int cluster_client_wait(struct cluster_client *c);
/* The reply to a fetch: its page into page, its version as the
 * synchronous fetch gives it. */
int cluster_client_wait_fetch(struct cluster_client *c, void *page,
			      uint64_t *version_out);
/* Up to FRAME_BATCH_MAX fetches in one request (PAGE_FETCH_MANY, layout
 * in cluster/batch.h): what a recovery pass reads from one node, for the
 * cost of one request instead of one per page. _start sends it (one
 * request in flight, like the others); the wait takes its reply into the
 * same array f: each f[k].rc gets what a single fetch would give (0,
 * -ENOENT, -ESTALE ...), f[k].version_out the stored version, and on 0 the
 * page is copied to f[k].page. A reply that does not answer the request
 * entry by entry (key, kind, the version asked for) is -EPROTO and breaks
 * the handle. The wait returns 0 when the reply came, whatever the
 * entries' results; else the request's own error (-EOPNOTSUPP from a node
 * that predates it) or a transport error, and the entries are unset. */
struct cluster_fetch {
	uint32_t kind;          /* FK_DATA or FK_PARITY */
	uint64_t key;           /* page id, or parity group */
	uint64_t version;       /* 0: whatever is stored */
	void *page;             /* out: FRAME_PAGE_SIZE bytes */
	uint64_t version_out;   /* out */
	int rc;                 /* out */
};
int cluster_client_fetch_many_start(struct cluster_client *c,
				    const struct cluster_fetch *f, unsigned n);
int cluster_client_wait_fetch_many(struct cluster_client *c,
				   struct cluster_fetch *f, unsigned n);

/* Up to FRAME_BATCH_MAX stores in one request (PAGE_STORE_MANY), the
 * pages a recovery pass rebuilt for one node, as cluster_client_fetch_many:
 * _start copies the pages into the request and sends it; the wait takes
 * the reply into the same array s, each s[k].rc what a single store would
 * give (0, -ESTALE, -ENOSPC ...). A reply about other pages is -EPROTO
 * and breaks the handle. */
struct cluster_store {
	uint32_t kind;          /* FK_DATA or FK_PARITY */
	uint64_t key;           /* page id, or parity group */
	uint64_t version;       /* the version it is stored under */
	const void *page;       /* FRAME_PAGE_SIZE bytes */
	int rc;                 /* out */
};
int cluster_client_store_many_start(struct cluster_client *c,
				    const struct cluster_store *s, unsigned n);
int cluster_client_wait_store_many(struct cluster_client *c,
				   struct cluster_store *s, unsigned n);

/* Up to FRAME_BATCH_MAX parity updates in one request
 * (PARITY_UPDATE_MANY): s[k].kind FK_PARITY, key the group, version the
 * parity version, page the XOR delta; each s[k].rc what a single
 * cluster_client_parity_update would give. As the store batch above. */
int cluster_client_parity_update_many_start(struct cluster_client *c,
					    const struct cluster_store *s, unsigned n);
int cluster_client_wait_parity_update_many(struct cluster_client *c,
					   struct cluster_store *s, unsigned n);

/* Up to FRAME_BATCH_MAX drops in one request (PAGE_DROP_MANY): s[k].kind,
 * key and version as cluster_client_page_drop's (page unused); each
 * s[k].rc what a single drop would give (0, -ENOENT, -ESTALE). As the
 * store batch above. */
int cluster_client_drop_many_start(struct cluster_client *c,
				   const struct cluster_store *s, unsigned n);
int cluster_client_wait_drop_many(struct cluster_client *c, struct cluster_store *s,
				  unsigned n);

/* Up to FRAME_BATCH_MAX overwrites in one request (PAGE_OVERWRITE_MANY):
 * each as cluster_client_page_overwrite below, o[k].rc its return (0,
 * -EREMOTEIO, -ESTALE, -ENOENT, -ENOSPC ...). The node stores them in
 * order and sends the deltas on as one request per parity node, so a swap
 * run's in-use pages on one node cost four frames, not four per page. The
 * wait's own return and a reply about other pages: as the batches above. */
struct cluster_overwrite {
	uint64_t page_id;
	uint64_t version;       /* the new version */
	uint64_t old_version;   /* the version being replaced */
	uint64_t group;         /* its parity group */
	uint64_t parity_version;
	uint32_t parity_node;   /* the node holding the group's parity page */
	const void *page;       /* FRAME_PAGE_SIZE bytes */
	int rc;                 /* out */
};
int cluster_client_overwrite_many_start(struct cluster_client *c,
					const struct cluster_overwrite *o, unsigned n);
int cluster_client_wait_overwrite_many(struct cluster_client *c,
				       struct cluster_overwrite *o, unsigned n);

/* Requests sent whose replies have not been taken (0 after a transport
 * error). */
unsigned cluster_client_pending(const struct cluster_client *c);

int cluster_client_page_drop(struct cluster_client *c, uint64_t page_id,
			     uint64_t version);
/* Drop every page and parity page of our owner on this node (a new swap
 * device starts empty; pages of an earlier one are garbage). */
int cluster_client_owner_reset(struct cluster_client *c);
/* Give the node a page another server held (Nswap's MIGRATE). */
int cluster_client_page_migrate(struct cluster_client *c, uint64_t page_id,
				uint64_t version, uint32_t from_node,
				const void *page);

/* Overwrite page_id, stored at old_version, with page at version, and
 * have the node send old ^ new to node parity_node as the parity update
 * (group, parity_version) of our owner before it answers: an in-use
 * overwrite in one round trip for us (Nswap's forwarding). 0: stored and
 * the parity updated; -EREMOTEIO: stored, but the parity node did not (or
 * not surely) take the delta, so that group's parity page must be
 * recomputed; -ESTALE / -ENOENT: old_version is not what the node holds,
 * nothing stored; -ENOSPC, -EIO; transport errors as above (the node may
 * have done any part of it). */
int cluster_client_page_overwrite(struct cluster_client *c, uint64_t page_id,
				  uint64_t version, uint64_t old_version,
				  uint32_t parity_node, uint64_t group,
				  uint64_t parity_version, const void *page);
/* The same, pipelined: _start sends it, cluster_client_wait takes its
 * reply (the returns above). */
int cluster_client_page_overwrite_start(struct cluster_client *c, uint64_t page_id,
					uint64_t version, uint64_t old_version,
					uint32_t parity_node, uint64_t group,
					uint64_t parity_version, const void *page);
/* Take the requests that follow for pages of owner (a node forwarding a
 * swapping node's parity updates), not the owner given at open. */
void cluster_client_set_owner(struct cluster_client *c, uint64_t owner);

/* parity[group] = page, whatever was there at an older version (-ESTALE
 * if newer). */
int cluster_client_parity_store(struct cluster_client *c, uint64_t group,
				uint64_t version, const void *page);
/* parity[group] ^= delta (a zero page if absent); version: max kept. */
int cluster_client_parity_update(struct cluster_client *c, uint64_t group,
				 uint64_t version, const void *delta);
/* The same, pipelined: _start sends it (the delta may be reused on
 * return), cluster_client_wait takes its reply. */
int cluster_client_parity_update_start(struct cluster_client *c, uint64_t group,
				       uint64_t version, const void *delta);
int cluster_client_parity_fetch(struct cluster_client *c, uint64_t group,
				void *page, uint64_t *version_out);
int cluster_client_parity_drop(struct cluster_client *c, uint64_t group,
			       uint64_t version);

/* The node's table of the cluster (its view: states and capacities).
 * Fills up to max entries, *n gets the count. */
int cluster_client_node_table(struct cluster_client *c, struct frame_node *out,
			      unsigned max, unsigned *n);
/* The node's counters: the text 'nvcachectl stats --node' prints there
 * (key: value lines), read in chunks (NODE_STATS) from one snapshot. out
 * gets it NUL-terminated; *len its length. -EMSGSIZE if it does not fit
 * outlen - 1 (FRAME_MAX_STATS + 1 always fits); -EPROTO (handle broken) if
 * the node sends chunks that do not add up or bytes that are not text;
 * -EOPNOTSUPP or -EPROTO from a node that predates NODE_STATS. */
int cluster_client_node_stats(struct cluster_client *c, char *out,
			      size_t outlen, size_t *len);
/* The text of the last error reply ("" if none), for logs. */
const char *cluster_client_last_error(const struct cluster_client *c);

/* One FILE_LOCK request (frame.h struct frame_lock; served by the home
 * node's lock service, cluster/lockserve.h). Returns the reply's status:
 * 0, -EAGAIN (*holder: the conflicting lock), -EINPROGRESS (an F_SETLKW
 * still waiting: send the same request again), -EDEADLK, -ENOLCK,
 * -EINVAL, -ENOENT, or a transport error. A GET's answer is in *holder
 * (type 0: nothing conflicts). holder may be NULL. */
int cluster_client_lock(struct cluster_client *c, const struct frame_lock *lk,
			struct frame_lock *holder);
/* One request of the file cache (FT_FILE_*, docs/nvcachefs-cluster.md):
 * f is its FileOp, its payload in npl pieces. The reply's FileOp goes to
 * *rf (may be NULL), its payload (a read's bytes, rf->len of them) to buf,
 * read from the socket straight there (buf's bytes past the reply's, and
 * all of them after a transport error, are undefined);
 * a reply larger than buflen is -EPROTO and breaks the handle. Returns the
 * reply's status as -errno, or a transport error as the other calls. */
struct iovec;
int cluster_client_file_call(struct cluster_client *c, uint32_t type,
			     const struct frame_fop *f, const struct iovec *pl,
			     unsigned npl, struct frame_fop *rf, void *buf,
			     size_t buflen);
/* The same in two halves, pipelined as the page calls (at most
 * CLUSTER_CLIENT_MAX_INFLIGHT): _start sends one (its payload may be
 * reused on return), each _wait takes the oldest one's reply. more:
 * another _start on c follows at once, so the socket may hold this one's
 * tail to fill a packet with the next (MSG_MORE: a 64 KiB block and its
 * header then take one loopback packet, not two); the last of a run
 * must say false, or its tail waits in the socket. */
int cluster_client_file_start(struct cluster_client *c, uint32_t type,
			      const struct frame_fop *f, const struct iovec *pl,
			      unsigned npl, bool more);
int cluster_client_file_wait(struct cluster_client *c, struct frame_fop *rf,
			     void *buf, size_t buflen);
