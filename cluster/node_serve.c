/* node_serve.c - the node's inbound connections: accepted, authenticated,
 * and each request served.
 *
 * Every inbound connection must pass the shared-secret handshake
 * (auth.h) within NODE_AUTH_TIMEOUT_MS. After it, each frame is a request
 * answered with one reply; a bad frame (conn_recv's -EBADMSG, -EMSGSIZE,
 * -EPROTO) is logged with the peer's address, answered with an ERROR frame
 * and the connection closed: the stream cannot be trusted past it, and
 * the node goes on serving everyone else. */
#include "cluster/node_int.h"

/* The connection holds its mount's run at the file cache until it ends;
 * keepalive ends it if the mount's machine goes silent (as for locks).
 * A mount opens several connections to each node: its first is logged. */
static void mount_bind(struct node *n, struct inbound *ib)
{
	if (fcache_mount_conn(n->fc, ib->finst, true))
		log_info("file cache: a mount connected from %s (run %016" PRIx64 ")",
			 ib->c.peer, ib->finst);
	lockserve_watch(ib->c.fd);
}

/* One chunk of the stats text for a NODE_STATS request at offset off;
 * fills r's payload fields and returns the payload (or NULL with *rc). */
static const void *serve_stats(struct inbound *ib, uint64_t off, int *rc)
{
	struct frame_hdr *r = &ib->rep;

	if (off == 0 || !ib->stats) {
		if (!ib->stats && !(ib->stats = malloc(FRAME_MAX_STATS))) {
			*rc = -ENOMEM;
			return NULL;
		}
		ssize_t k = ctl_stats(ib->node, ib->stats, FRAME_MAX_STATS);
		ib->stats_len = k > 0 ? (size_t)k : 0;
	}
	if (off > ib->stats_len) {
		*rc = -ENOENT;
		snprintf(r->text, sizeof(r->text), "stats offset %" PRIu64
			 " past the end (%zu bytes)", off, ib->stats_len);
		return NULL;
	}
	size_t left = ib->stats_len - (size_t)off;
	r->page_id = off;
	r->version = ib->stats_len;
	r->payload_len = (uint32_t)(left < FRAME_STATS_CHUNK ? left : FRAME_STATS_CHUNK);
	*rc = 0;
	return r->payload_len ? ib->stats + off : NULL;
}

/* A batch request that did not decode (rc, why): logged, and said in the
 * reply. Else the connection's reply buffer for it (NULL, *rc -ENOMEM). */
uint8_t *batch_reply_buf(struct inbound *ib, const char *what, int *rc,
			 const char *why)
{
	if (*rc) {
		log_warn("%s: refused a %s request: %s", ib->c.peer, what, why);
		snprintf(ib->rep.text, sizeof(ib->rep.text), "%s", why);
		return NULL;
	}
	if (!ib->batch && !(ib->batch = malloc(FRAME_MAX_CONN_PAYLOAD)))
		*rc = -ENOMEM;
	return ib->batch;
}

/* A PAGE_FETCH_MANY request: every entry fetched in order into one reply
 * payload (cluster/batch.h); an entry that fails carries its own status
 * and a zero page, the request as a whole succeeds. */
static const void *serve_fetch_many(struct inbound *ib, const uint8_t *payload,
				    int *rc)
{
	struct frame_hdr *q = &ib->req, *r = &ib->rep;
	struct batch_entry e[FRAME_BATCH_MAX];
	const char *why = "";
	unsigned n;

	*rc = batch_request_get(payload, q->payload_len, e, &n, &why);
	if (!batch_reply_buf(ib, "fetch-many", rc, why))
		return NULL;
	for (unsigned k = 0; k < n; k++) {
		struct pagestore_key key = { q->owner, e[k].kind, e[k].key };
		uint8_t *pg = batch_reply_page(ib->batch, n, k);
		uint64_t have = 0;
		int frc = pagestore_fetch(ib->node->ps, &key, e[k].version, pg, &have);
		if (frc)
			memset(pg, 0, PAGESTORE_PAGE);
		e[k].version = frc == -ENOENT ? 0 : have;
		e[k].status = status_of(frc);
		batch_result_put(ib->batch, k, &e[k]);
	}
	r->payload_len = batch_reply_len(n);
	return ib->batch;
}

/* A PAGE_STORE_MANY request (xor false): every entry stored in order,
 * each result with its own status (a full node refuses the rest with
 * FS_NO_SPACE); or a PARITY_UPDATE_MANY (xor true): every entry, of kind
 * PARITY, its delta XORed into its parity page, as a PARITY_UPDATE would
 * answer it. The request as a whole succeeds. */
static const void *serve_store_many(struct inbound *ib, const uint8_t *payload,
				    bool xor, int *rc)
{
	struct frame_hdr *q = &ib->req, *r = &ib->rep;
	struct batch_entry e[FRAME_BATCH_MAX];
	const uint8_t *pages;
	const char *why = "";
	unsigned n;

	*rc = batch_store_get(payload, q->payload_len, e, &n, &pages, &why);
	for (unsigned k = 0; xor && !*rc && k < n; k++)
		if (e[k].kind != FK_PARITY) {
			why = "parity-update-many request: an entry not of kind PARITY";
			*rc = -EPROTO;
		}
	if (!batch_reply_buf(ib, xor ? "parity-update-many" : "store-many", rc, why))
		return NULL;
	for (unsigned k = 0; k < n; k++) {
		struct pagestore_key key = { q->owner, e[k].kind, e[k].key };
		const uint8_t *pg = pages + (size_t)k * PAGESTORE_PAGE;
		int src = xor ? pagestore_xor(ib->node->ps, &key, e[k].version, pg) :
				pagestore_store(ib->node->ps, &key, e[k].version, pg);
		e[k].status = status_of(src);
		batch_result_put(ib->batch, k, &e[k]);
	}
	r->payload_len = batch_store_reply_len(n);
	return ib->batch;
}

/* A PAGE_DROP_MANY request: every entry dropped in order (a page or a
 * parity page), each result with its own status, as a PAGE_DROP would
 * answer it. */
static const void *serve_drop_many(struct inbound *ib, const uint8_t *payload, int *rc)
{
	struct frame_hdr *q = &ib->req, *r = &ib->rep;
	struct batch_entry e[FRAME_BATCH_MAX];
	const char *why = "";
	unsigned n;

	*rc = batch_request_get(payload, q->payload_len, e, &n, &why);
	if (!batch_reply_buf(ib, "drop-many", rc, why))
		return NULL;
	for (unsigned k = 0; k < n; k++) {
		struct pagestore_key key = { q->owner, e[k].kind, e[k].key };
		e[k].status = status_of(pagestore_drop(ib->node->ps, &key, e[k].version));
		batch_result_put(ib->batch, k, &e[k]);
	}
	r->payload_len = batch_store_reply_len(n);
	return ib->batch;
}

static int admit(void *arg, const struct auth_peer *p, const char **why)
{
	struct node *n = arg;

	if (p->node_id == 0)
		return 0; /* a client (nvswapd, tools), not a node */
	switch (membership_check(n->mb, p->node_id, p->incarnation)) {
	case 0:
		return 0;
	case -ESTALE:
		*why = "its incarnation is older than one already seen (a stale process?)";
		return -ESTALE;
	default:
		*why = p->node_id == n->self ? "it claims to be this node" :
		       "its node id is not in the cluster file";
		return -ENOENT;
	}
}

void reply_init(struct inbound *ib)
{
	struct frame_hdr *q = &ib->req, *r = &ib->rep;

	memset(r, 0, sizeof(*r));
	r->type = q->type;
	r->reply = true;
	r->request_id = q->request_id;
	r->node_id = ib->node->self;
	r->incarnation = ib->node->incarnation;
	r->kind = q->kind;
	r->owner = q->owner;
	r->page_id = q->page_id;
	r->parity_group = q->parity_group;
	r->version = q->version;
}

uint32_t status_of(int rc)
{
	switch (rc) {
	case 0: return FS_OK;
	case -ESTALE: return FS_STALE;
	case -ENOENT: return FS_NOT_FOUND;
	case -ENOSPC: return FS_NO_SPACE;
	case -EOPNOTSUPP: return FS_UNSUPPORTED;
	case -EPROTO: return FS_BAD_FRAME;
	case -EREMOTEIO: return FS_PARITY_LOST;
	case -EAGAIN: return FS_WOULD_BLOCK;
	case -EDEADLK: return FS_DEADLOCK;
	case -ENOLCK: return FS_NO_LOCKS;
	case -EINPROGRESS: return FS_IN_PROGRESS;
	case -EINVAL: return FS_INVALID;
	default: return FS_INTERNAL;
	}
}

void node_count_request(struct node *n, uint32_t type)
{
	atomic_fetch_add(&n->requests, 1);
	if (type < FT_COUNT)
		atomic_fetch_add(&n->requests_by[type], 1);
}

/* Serve one request; fills ib->rep. Returns the payload to send (or NULL),
 * and sets *close_after when the connection must end, *drop when it must
 * end with no reply (the node stops before the request could be served:
 * the sender asks again once the node is back). */
static const void *serve(struct inbound *ib, const uint8_t *payload,
			 bool *close_after, bool *drop)
{
	struct node *n = ib->node;
	struct frame_hdr *q = &ib->req, *r = &ib->rep;
	struct pagestore_key key = { q->owner, q->kind,
				     q->kind == FK_PARITY ? q->parity_group : q->page_id };
	const void *out = NULL;
	int rc = 0;

	reply_init(ib);
	node_count_request(n, q->type);
	switch (q->type) {
	case FT_HEARTBEAT:
		if (!ib->peer.node_id) {
			rc = -EOPNOTSUPP;
			break;
		}
		atomic_fetch_add(&n->heartbeats_in, 1);
		/* The authenticated identity counts, not the header's. */
		rc = node_heard(n, ib->peer.node_id, ib->peer.incarnation, &q->cap);
		if (rc == -ESTALE || rc == -ENOENT) {
			snprintf(r->text, sizeof(r->text),
				 "node %u has a newer incarnation than this connection's",
				 ib->peer.node_id);
			*close_after = true;
		}
		rc = rc < 0 ? rc : 0;
		break;
	case FT_PAGE_STORE:
	case FT_MIGRATE:
		rc = pagestore_store(n->ps, &key, q->version, payload);
		break;
	case FT_PAGE_FETCH:
		rc = pagestore_fetch(n->ps, &key, q->version, ib->page, &r->version);
		if (!rc) {
			r->payload_len = PAGESTORE_PAGE;
			out = ib->page;
		}
		break;
	case FT_PAGE_DROP:
	case FT_INVALIDATE:
		rc = pagestore_drop(n->ps, &key, q->version);
		break;
	case FT_PARITY_UPDATE:
		key.kind = FK_PARITY;
		key.id = q->parity_group;
		rc = pagestore_xor(n->ps, &key, q->version, payload);
		break;
	case FT_OWNER_RESET: {
		uint64_t k = pagestore_drop_owner(n->ps, q->owner);
		log_info("%s reset owner %" PRIu64 ": %" PRIu64 " pages dropped",
			 ib->c.peer, q->owner, k);
		break;
	}
	case FT_NODE_TABLE: {
		struct frame_capacity cap;
		self_capacity(n, &cap);
		r->n_nodes = membership_snapshot(n->mb, now_ns(), n->incarnation, &cap,
						 r->nodes, FRAME_MAX_NODES);
		break;
	}
	case FT_NODE_STATS:
		out = serve_stats(ib, q->page_id, &rc);
		break;
	case FT_PAGE_FETCH_MANY:
		out = serve_fetch_many(ib, payload, &rc);
		break;
	case FT_PAGE_STORE_MANY:
		out = serve_store_many(ib, payload, false, &rc);
		break;
	case FT_PAGE_OVERWRITE:
		rc = serve_overwrite(ib, &key, payload);
		break;
	case FT_PAGE_OVERWRITE_MANY:
		out = serve_overwrite_many(ib, payload, &rc);
		break;
	case FT_PARITY_UPDATE_MANY:
		out = serve_store_many(ib, payload, true, &rc);
		break;
	case FT_PAGE_DROP_MANY:
		out = serve_drop_many(ib, payload, &rc);
		break;
	case FT_FILE_LOCK: {
		bool had = ib->lk.on;
		rc = lockserve(n->locks, &ib->lk, &q->lk, &r->lk);
		if (!had && ib->lk.on)
			lockserve_watch(ib->c.fd);
		break;
	}
	case FT_FILE_ATTACH: case FT_FILE_OPEN: case FT_FILE_CLOSE:
	case FT_FILE_GETATTR: case FT_FILE_SETSIZE: case FT_FILE_UNLINK:
	case FT_FILE_READ: case FT_FILE_WRITE: case FT_FILE_TRUNC:
	case FT_FILE_WRITEBACK: case FT_FILE_DROP: case FT_FILE_MARK:
	case FT_FILE_SHADOW: case FT_FILE_INVAL: case FT_FILE_WATCH:
		if (!n->fc) {
			rc = -EOPNOTSUPP;
			snprintf(r->text, sizeof(r->text), "node %u has no file cache "
				 "(start nvcached with --cache-size)", n->self);
		} else if (q->type != FT_FILE_ATTACH && q->fop.digest &&
			   ib->finst != q->fop.digest && ib->finst) {
			rc = -EPROTO;
			snprintf(r->text, sizeof(r->text), "a file request of another "
				 "mount run on this connection");
		} else if (q->type == FT_FILE_READ) {
			if (!ib->finst && (ib->finst = q->fop.digest))
				mount_bind(n, ib);
			rc = fcache_serve_read(n->fc, q, r, &ib->frd);
		} else if (!ib->fbuf && !(ib->fbuf = malloc(FRAME_FILE_MAX_BLOCK))) {
			rc = -ENOMEM;
		} else {
			if (q->type != FT_FILE_ATTACH && !ib->finst &&
			    (ib->finst = q->fop.digest))
				mount_bind(n, ib);
			rc = fcache_serve(n->fc, q, payload, r, ib->fbuf, &out);
			*drop = rc == -ESHUTDOWN;
		}
		break;
	default:
		/* HELLO/CHALLENGE/AUTH after the handshake, UPDATE (the owner's
		 * business, not a server's) */
		rc = -EOPNOTSUPP;
		snprintf(r->text, sizeof(r->text), "%s is not served by nvcached",
			 frame_type_name(q->type));
		break;
	}
	reply_status(r, rc);
	return out;
}

/* A reply's status for rc, and its text. */
/* An error no status names is answered INTERNAL (the peer sees EIO):
 * the node says which, here and in the reply's text, for whoever looks
 * into that EIO. */
void reply_status(struct frame_hdr *r, int rc)
{
	static struct log_limit internal_log;
	char note[96];

	r->status = status_of(rc);
	if (r->status == FS_INTERNAL && rc != -ESHUTDOWN) {   /* (that one: dropped) */
		if (!r->text[0])
			snprintf(r->text, sizeof(r->text), "%s", strerror(-rc));
		if (log_limit(&internal_log, 10, note, sizeof(note)))
			log_warn("node: a %s request failed (%s); answered INTERNAL%s",
				 frame_type_name(r->type), r->text, note);
	}
	if (rc == -ESTALE && !r->text[0])
		snprintf(r->text, sizeof(r->text), "stale version %" PRIu64, r->version);
	if (r->status == FS_OK)
		r->text[0] = 0;
	if (r->type != FT_NODE_TABLE || r->status != FS_OK)
		r->n_nodes = 0;
}

/* More of a request already here (the peer sent a run)? */
static bool input_waiting(const struct inbound *ib)
{
	struct pollfd pf = { .fd = ib->c.fd, .events = POLLIN };
	return poll(&pf, 1, 0) > 0 && (pf.revents & POLLIN);
}

/* A reply that may wait for the next one's (MSG_MORE): a WRITE of a run
 * whose sender says more follow (FRAME_FILE_RUN), and waits for all of
 * them, so that a run's replies wake it once. Replies are held 100 ms at
 * most (then the next goes at once, and the held ones with it), so that
 * a run of writes that each wait for room (a full cache) does not keep
 * the first reply past the sender's timeout. *held_at: when the oldest
 * reply held went, 0 if none. */
#define HOLD_MAX_NS 100000000ull
static bool reply_waits(const struct frame_hdr *req, uint64_t *held_at)
{
	if (req->type != FT_FILE_WRITE || !(req->fop.flags & FRAME_FILE_RUN))
		return false;
	uint64_t now = clock_now_ns();
	if (!*held_at)
		*held_at = now;
	return now - *held_at < HOLD_MAX_NS;
}

/* Has the peer hung up (its FIN arrived, maybe behind requests not read
 * yet)? Nobody waits for what we would answer then. */
static bool peer_hung_up(const struct inbound *ib)
{
	struct pollfd pf = { .fd = ib->c.fd, .events = POLLRDHUP };
	return poll(&pf, 1, 0) > 0 && (pf.revents & (POLLRDHUP | POLLHUP));
}

static void conn_slot_release(struct node *n, int slot)
{
	pthread_mutex_lock(&n->lock);
	n->slots[slot].fd = -1;
	n->slots[slot].busy = false;
	n->conns_active--;
	pthread_cond_broadcast(&n->cond);
	pthread_mutex_unlock(&n->lock);
}

static void *inbound_main(void *arg)
{
	struct inbound *ib = arg;
	struct node *n = ib->node;
	struct auth_identity me = { n->self, n->incarnation, n->cfg.secret,
				    n->cfg.secret_len };
	const char *why = "";
	int rc;

	conn_set_timeout(&ib->c, NODE_AUTH_TIMEOUT_MS);
	memset(&ib->peer, 0, sizeof(ib->peer));
	rc = auth_server(&ib->c, &me, admit, n, &ib->peer, &why);
	if (rc) {
		atomic_fetch_add(&n->auth_failures, 1);
		/* A peer with the wrong secret retries (10 a second): one
		 * line every 10 s for each kind of refusal; auth_failures
		 * counts them all. */
		const char *reason = why && *why ? why : strerror(-rc);
		uint32_t kind = crc32c(ib->peer.node_id, reason, strlen(reason));
		char note[96];
		if (!node_stopping(n) &&
		    log_limit(&n->auth_log[kind % 16], 10, note, sizeof(note)))
			log_warn("refused peer %s (claims %s %u): %s; connection "
				 "closed%s", ib->c.peer,
				 ib->peer.node_id ? "node" : "client id",
				 ib->peer.node_id, reason, note);
		conn_close_after_error(&ib->c);
		goto out;
	}
	if (ib->peer.node_id)
		node_heard(n, ib->peer.node_id, ib->peer.incarnation, NULL);
	else
		log_debug("client connected from %s", ib->c.peer);   /* (many a mount) */
	/* Authenticated peers may stay idle; keepalive finds dead ones.
	 * They may send a PAGE_STORE_MANY (the buffer for it is allocated
	 * at the first); before the handshake nobody can make us allocate. */
	conn_set_timeout(&ib->c, 0);
	conn_set_max_payload(&ib->c, FRAME_MAX_CONN_PAYLOAD);
	int one = 1;
	setsockopt(ib->c.fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));

	uint64_t held_at = 0;
	for (;;) {
		const uint8_t *payload;
		bool close_after = false;
		rc = conn_recv(&ib->c, &ib->req, &payload, &why);
		if (rc == -ECONNRESET || rc == -ETIMEDOUT || (rc && node_stopping(n)))
			break;
		if (rc == -EBADMSG || rc == -EMSGSIZE || rc == -EPROTO) {
			atomic_fetch_add(&n->bad_frames, 1);
			log_warn("bad frame from %s (%s %u): %s; connection closed",
				 ib->c.peer, ib->peer.node_id ? "node" : "client",
				 ib->peer.node_id, why);
			conn_send_error(&ib->c, n->self, FS_BAD_FRAME, why);
			conn_close_after_error(&ib->c);
			break;
		}
		if (rc) {
			log_info("connection from %s: %s", ib->c.peer, strerror(-rc));
			break;
		}
		if (ib->req.type == FT_ERROR) {
			log_warn("peer %s reports an error: %s (%s); connection closed",
				 ib->c.peer, frame_status_name(ib->req.status), ib->req.text);
			break;
		}
		if (ib->req.reply) {
			atomic_fetch_add(&n->bad_frames, 1);
			log_warn("unexpected reply frame from %s; connection closed",
				 ib->c.peer);
			conn_send_error(&ib->c, n->self, FS_BAD_FRAME,
					"a reply where a request was expected");
			break;
		}
		/* Requests left in the socket by a peer that has hung up
		 * (this node stood still: SIGSTOP, a paused VM, and the
		 * sender timed out): it gave up on them and handled their
		 * pages another way. Served now, a store or a parity delta
		 * would undo that; a late delta XORed into a parity page
		 * already right, and the next failure rebuilt wrong bytes. */
		if (peer_hung_up(ib)) {
			log_info("%s hung up with requests not yet served: dropped "
				 "(the sender gave up on them)", ib->c.peer);
			break;
		}
		/* Overwrites go on while more requests wait: their parity
		 * updates overlap; anything else waits for their replies. */
		if (ib->req.type == FT_PAGE_OVERWRITE && ib->req.kind == FK_DATA &&
		    ow_room(ib))
			break;
		if (ib->req.type == FT_PAGE_OVERWRITE && ib->req.kind == FK_DATA &&
		    ow_pipe(ib, payload)) {
			if (ib->now < OW_PIPE && input_waiting(ib))
				continue;
			if (ow_flush(ib))
				break;
			continue;
		}
		if (ib->req.type == FT_PAGE_OVERWRITE && ib->req.kind == FK_DATA) {
			/* failed before its parity node was asked */
			if (ow_flush(ib) || conn_send(&ib->c, &ib->rep, NULL))
				break;
			continue;
		}
		if (ow_flush(ib))
			break;
		bool drop = false;
		const void *out = serve(ib, payload, &close_after, &drop);
		if (drop)
			break;
		bool more = !close_after && reply_waits(&ib->req, &held_at);
		if (!more)
			held_at = 0;
		if (ib->frd.niov && ib->rep.status == FS_OK)
			rc = conn_sendv_more(&ib->c, &ib->rep, ib->frd.iov,
					     ib->frd.niov, more);
		else
			rc = conn_send_more(&ib->c, &ib->rep, out, more);
		if (n->fc)
			fcache_read_done(n->fc, &ib->frd);
		if (rc || close_after)
			break;
	}
out:
	/* Leave the slot table before closing: node_stop must never shut
	 * down an fd number that close() has already given back. */
	pthread_mutex_lock(&n->lock);
	n->slots[ib->slot].fd = -1;
	pthread_mutex_unlock(&n->lock);
	conn_close(&ib->c);
	lockserve_end(n->locks, &ib->lk);
	if (ib->finst)
		fcache_mount_conn(n->fc, ib->finst, false);
	free(ib->stats);
	free(ib->batch);
	free(ib->fbuf);
	free(ib->om);
	fwd_put_all(&ib->fwd);
	int slot = ib->slot;
	free(ib);
	conn_slot_release(n, slot);
	return NULL;
}

static void accept_one(struct node *n, int fd)
{
	int slot = -1;
	bool ended = false;
	pthread_t old;

	pthread_mutex_lock(&n->lock);
	if (!n->stopping && n->conns_active < n->max_conns) {
		for (unsigned i = 0; i < n->max_conns; i++) {
			if (!n->slots[i].busy) {
				slot = (int)i;
				break;
			}
		}
	}
	if (slot >= 0) {
		ended = n->slots[slot].thread;
		old = n->slots[slot].t;
		n->slots[slot].fd = fd;
		n->slots[slot].busy = true;
		n->slots[slot].thread = false;
		n->conns_active++;
	}
	pthread_mutex_unlock(&n->lock);
	if (slot < 0) {
		atomic_fetch_add(&n->conns_refused, 1);
		log_warn("too many connections (%u): refusing one", n->max_conns);
		close(fd);
		return;
	}
	/* The slot's previous thread has released it: it is returning. */
	if (ended)
		pthread_join(old, NULL);
	struct inbound *ib = calloc(1, sizeof(*ib));
	pthread_attr_t attr;
	if (!ib)
		goto fail;
	ib->node = n;
	ib->slot = slot;
	/* a lease waits for other leases' batches: a few round trips */
	ib->fwd = (struct fwd_leases){ .pool = n->fwd, .wait_ms = 2 * n->fwd_to.timeout_ms };
	conn_init(&ib->c, fd);
	atomic_fetch_add(&n->conns_total, 1);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, CONN_STACK);
	/* Only this thread (the acceptor) writes a slot's t, and node_stop
	 * reads it after joining the acceptor. */
	pthread_mutex_lock(&n->lock);
	int rc = pthread_create(&n->slots[slot].t, &attr, inbound_main, ib);
	n->slots[slot].thread = rc == 0;
	pthread_mutex_unlock(&n->lock);
	pthread_attr_destroy(&attr);
	if (rc == 0)
		return;
	log_err("cannot start a connection thread: %s", strerror(rc));
fail:
	free(ib);
	close(fd);
	conn_slot_release(n, slot);
}

void *acceptor_main(void *arg)
{
	struct node *n = arg;

	for (;;) {
		struct pollfd p[2] = {
			{ .fd = n->listen_fd, .events = POLLIN },
			{ .fd = n->stop_pipe[0], .events = POLLIN },
		};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_err("poll on the listening socket: %s", strerror(errno));
			break;
		}
		if (p[1].revents)
			break;
		int fd = accept4(n->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN)
				continue;
			log_warn("accept: %s", strerror(errno));
			if (node_sleep(n, 100))
				break;
			continue;
		}
		accept_one(n, fd);
	}
	return NULL;
}
