/* node.c - the cluster node (see node.h): its start and stop, heartbeats
 * to the other nodes, the failure detector and adaptive capacity. Its
 * inbound connections are node_serve.c's, page overwrites
 * node_overwrite.c's, the control socket node_ctl.c's. */
#include "cluster/node_int.h"

static int start_thread(pthread_t *t, size_t stack, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, stack);
	int rc = pthread_create(t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return -rc;
}


uint64_t node_incarnation(const struct node *n)
{
	return n->incarnation;
}

uint64_t now_ns(void)
{
	return clock_now_ns();
}

/* Wait up to ms for stop; true if stopping. */
bool node_sleep(struct node *n, uint32_t ms)
{
	struct timespec ts;

	clock_deadline(&ts, (uint64_t)ms * 1000000ULL);
	pthread_mutex_lock(&n->lock);
	while (!n->stopping &&
	       pthread_cond_timedwait(&n->cond, &n->lock, &ts) != ETIMEDOUT)
		;
	bool s = n->stopping;
	pthread_mutex_unlock(&n->lock);
	return s;
}

bool node_stopping(struct node *n)
{
	pthread_mutex_lock(&n->lock);
	bool s = n->stopping;
	pthread_mutex_unlock(&n->lock);
	return s;
}

void self_capacity(struct node *n, struct frame_capacity *cap)
{
	uint64_t pages = pagestore_pages(n->ps);

	pthread_mutex_lock(&n->lock);
	cap->offered = n->offer;
	cap->mem_available = n->mem_available;
	pthread_mutex_unlock(&n->lock);
	cap->used = pages * PAGESTORE_PAGE;
}

/* Any proof of life from node id (a handshake, a heartbeat, a reply).
 * Logs membership changes. Returns the membership result. */
int node_heard(struct node *n, uint32_t id, uint64_t inc,
	       const struct frame_capacity *cap)
{
	uint64_t old = 0;
	int ev = membership_heard(n->mb, id, inc, cap, now_ns(), &old);

	switch (ev) {
	case MB_UP:
		log_info("node %u is alive (incarnation %" PRIu64 ")", id, inc);
		break;
	case MB_BACK:
		log_info("node %u is alive again (same incarnation %" PRIu64
			 ": it was unreachable, not restarted)", id, inc);
		break;
	case MB_REJOIN:
		log_info("node %u rejoined with a new incarnation %" PRIu64
			 " (was %" PRIu64 "): it restarted, pages it held are gone",
			 id, inc, old);
		break;
	default:
		break;
	}
	return ev;
}

/* --- memory and the failure detector ----------------------------------- */

void update_capacity(struct node *n)
{
	uint64_t total = 0, avail = 0;
	int rc = memwatch_read(n->meminfo, &total, &avail);
	uint64_t used = pagestore_pages(n->ps) * PAGESTORE_PAGE;
	pthread_mutex_lock(&n->lock);
	if (rc) {
		if (!n->meminfo_warned)
			log_warn("cannot read %s (%s): keeping the last capacity offer",
				 n->meminfo, strerror(-rc));
		n->meminfo_warned = true;
	} else {
		n->meminfo_warned = false;
		n->mem_total = total;
		n->mem_available = avail;
		uint64_t reserve = n->reserve ? n->reserve :
				   memwatch_default_reserve(total);
		uint64_t cap = n->me->mem;
		if (n->limit_override && (!cap || n->limit_override < cap))
			cap = n->limit_override;
		/* A tiered store's memory is reserved already: it offers
		 * its page space, not what memory is idle. */
		uint64_t mo = !n->tier_bytes ? memwatch_offer(cap, avail, reserve, used) :
			      cap && cap < n->tier_bytes ? cap : n->tier_bytes;
		/* mem=0: a node that swaps to the others and holds nothing for
		 * them (it offered all its idle memory: 0 read as no cap) */
		if (n->me->mem_given && !n->me->mem)
			mo = 0;
		if (!n->tier_bytes && mo < n->mem_offer && mo < used)
			log_info("local processes need memory: offer down to %" PRIu64
				 " MiB, below the %" PRIu64 " MiB held (new pages "
				 "refused, the owners migrate the excess away)",
				 mo >> 20, used >> 20);
		n->mem_offer = mo;
	}
	uint64_t offer = n->mem_offer;
	if (n->shrunk && offer > n->shrink_cap)
		offer = n->shrink_cap;
	n->offer = offer;
	if (n->shrink_pending && used <= offer) {
		n->shrink_pending = false;
		log_info("shrink done: %" PRIu64 " KiB held, within the %" PRIu64
			 " KiB cap", used >> 10, n->shrink_cap >> 10);
	}
	pthread_mutex_unlock(&n->lock);
	pagestore_set_limit(n->ps, offer / PAGESTORE_PAGE);
}

static void *monitor_main(void *arg)
{
	struct node *n = arg;
	uint32_t step = n->hb_ms / 2 ? n->hb_ms / 2 : 1;
	uint32_t dead[CONFIG_MAX_NODES];
	uint64_t last_mem = 0;

	while (!node_sleep(n, step)) {
		unsigned nd = membership_tick(n->mb, now_ns(), dead, CONFIG_MAX_NODES);
		for (unsigned i = 0; i < nd; i++) {
			const struct cluster_node *cn = config_node_find(&n->cfg, dead[i]);
			log_warn("node %u declared dead: no heartbeat for %u ms",
				 dead[i], n->timeout_ms);
			if (cn)
				peerpool_drop(n->fwd, (unsigned)(cn - n->cfg.nodes));
			/* its mounts' file locks stay while their connections
			 * do: its nvcached alone may have died
			 * (lockserve_watch ends those of a dead node) */
		}
		if (n->fc && n->cfg.n_nodes > 1) {
			/* the node whose shadow this is: down (dead, or not
			 * heard from since we started) for long, its
			 * replicas are written back here (fcache.h) */
			unsigned me = (unsigned)(n->me - n->cfg.nodes);
			unsigned prev = (me + n->cfg.n_nodes - 1) % n->cfg.n_nodes;
			struct member m;
			if (membership_get(n->mb, n->cfg.nodes[prev].id, &m) == 0)
				fcache_owner_down(n->fc, prev, m.state == FN_DEAD ||
						  m.state == FN_UNKNOWN);
			/* our shadow: with replicas=2, writes go on without
			 * it once it is dead (fcache.h) */
			unsigned next = (me + 1) % n->cfg.n_nodes;
			if (membership_get(n->mb, n->cfg.nodes[next].id, &m) == 0)
				fcache_shadow_down(n->fc, m.state == FN_DEAD ||
						   m.state == FN_UNKNOWN, n->timeout_ms);
		}
		if (now_ns() - last_mem >= (uint64_t)n->hb_ms * 1000000ULL) {
			update_capacity(n);
			last_mem = now_ns();
		}
	}
	return NULL;
}

/* --- outbound: heartbeats to one other node ----------------------------- */

static void link_close(struct peer_link *l)
{
	struct node *n = l->node;

	pthread_mutex_lock(&n->lock);
	conn_close(l->c);
	pthread_mutex_unlock(&n->lock);
}

static int link_open(struct peer_link *l, const char **why)
{
	struct node *n = l->node;
	struct auth_identity me = { n->self, n->incarnation, n->cfg.secret,
				    n->cfg.secret_len };
	struct auth_peer peer;
	int rc;

	rc = conn_connect(l->c, l->cn->host, l->cn->port, (int)n->hb_ms);
	if (rc) {
		*why = strerror(-rc);
		return rc;
	}
	rc = auth_client(l->c, &me, &peer, why);
	if (!rc && peer.node_id != l->cn->id) {
		*why = "a different node answers at this address (check the cluster file)";
		rc = -EPROTO;
	}
	if (!rc && membership_check(n->mb, peer.node_id, peer.incarnation) == -ESTALE) {
		*why = "it answers with an incarnation older than one already seen";
		rc = -ESTALE;
	}
	if (rc) {
		if (!*why || !**why)
			*why = strerror(-rc);
		link_close(l);
		return rc;
	}
	node_heard(n, peer.node_id, peer.incarnation, NULL);
	return 0;
}

static void *link_main(void *arg)
{
	struct peer_link *l = arg;
	struct node *n = l->node;
	bool up = false;
	int last_err = 0;
	uint64_t seq = 0;
	struct frame_hdr *h = calloc(1, sizeof(*h)), *r = calloc(1, sizeof(*r));

	if (!h || !r) {
		log_err("node %u: out of memory for the heartbeat link", l->cn->id);
		free(h);
		free(r);
		return NULL;
	}
	while (!node_stopping(n)) {
		const char *why = "";
		int rc;
		if (!up) {
			rc = link_open(l, &why);
			if (rc) {
				/* Log a failure once, not every interval. */
				if (rc != last_err)
					log_info("node %u (%s:%u): no heartbeat link: %s",
						 l->cn->id, l->cn->host, l->cn->port, why);
				last_err = rc;
				if (node_sleep(n, n->hb_ms))
					break;
				continue;
			}
			up = true;
			last_err = 0;
			log_debug("heartbeat link to node %u up", l->cn->id);
		}
		memset(h, 0, sizeof(*h));
		h->type = FT_HEARTBEAT;
		h->request_id = ++seq;
		h->node_id = n->self;
		h->incarnation = n->incarnation;
		h->hb_seq = seq;
		h->hb_interval_ms = n->hb_ms;
		self_capacity(n, &h->cap);
		rc = conn_send(l->c, h, NULL);
		if (!rc)
			rc = conn_recv(l->c, r, NULL, &why);
		if (!rc && (r->type != FT_HEARTBEAT || !r->reply ||
			    r->request_id != seq || r->status != FS_OK)) {
			why = r->status == FS_STALE ? "it no longer knows us under this incarnation" :
			      "unexpected reply";
			rc = -EPROTO;
		}
		if (rc) {
			log_info("node %u: heartbeat link lost: %s", l->cn->id,
				 why && *why ? why : strerror(-rc));
			link_close(l);
			up = false;
			last_err = rc;
			continue;
		}
		atomic_fetch_add(&n->heartbeats_out, 1);
		node_heard(n, l->cn->id, r->incarnation, NULL);
		if (node_sleep(n, n->hb_ms))
			break;
	}
	if (up)
		link_close(l);
	free(h);
	free(r);
	return NULL;
}

/* --- start / stop -------------------------------------------------------- */

/* The file cache's dirty marks to this node's shadow, the next node of
 * the cluster file (cluster/fmarks.h), on a handle of the forwarding
 * pool: leased for this one call (the caller holds no other lease). */
static int send_mark(void *arg, const struct frame_fop *f, const void *pl,
		     size_t len, uint32_t *rflags)
{
	struct node *n = arg;
	unsigned shadow = (unsigned)((n->me - n->cfg.nodes) + 1) % n->cfg.n_nodes;
	struct peerpool_lease l = { 0 };
	struct frame_fop rf = { 0 };
	struct iovec iov = { (void *)pl, len };
	char err[256];

	int rc = peerpool_get(n->fwd, shadow, 2000, &l, err, sizeof(err));
	if (rc)
		return rc;
	rc = cluster_client_file_call(l.cl, FT_FILE_MARK, f, &iov, len ? 1 : 0,
				      &rf, NULL, 0);
	peerpool_put(n->fwd, &l, rc == -ECONNRESET || rc == -EPIPE ||
		     rc == -ETIMEDOUT || rc == -ENOTCONN || rc == -EPROTO);
	*rflags = rf.flags;
	return rc;
}

/* fcache_call_fn: one file request to node index idx, over the pool of
 * connections to the other nodes. */
static int send_file(void *arg, uint32_t idx, uint32_t type, const struct frame_fop *f,
		     struct frame_fop *rfp)
{
	struct node *n = arg;
	struct peerpool_lease l = { 0 };
	struct frame_fop rf = { 0 };
	char err[256];

	int rc = peerpool_get(n->fwd, idx, 2000, &l, err, sizeof(err));
	if (rc)
		return rc;
	rc = cluster_client_file_call(l.cl, type, f, NULL, 0, rfp ? rfp : &rf, NULL, 0);
	peerpool_put(n->fwd, &l, rc == -ECONNRESET || rc == -EPIPE ||
		     rc == -ETIMEDOUT || rc == -ENOTCONN || rc == -EPROTO);
	return rc;
}

/* The node's own address, as getaddrinfo gives it (flags: its hints'). */
static int node_addrs(struct node *n, int flags, struct addrinfo **res)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = flags };
	char port[8];

	snprintf(port, sizeof(port), "%u", n->me->port);
	return getaddrinfo(n->me->host, port, &hints, res);
}

static int bind_listen_once(struct node *n)
{
	struct addrinfo *res;
	int rc = -EADDRNOTAVAIL;

	int g = node_addrs(n, AI_PASSIVE, &res);
	if (g) {
		log_err("node %u: cannot resolve %s: %s", n->self, n->me->host,
			gai_strerror(g));
		return -ENOENT;
	}
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int one = 1;
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		conn_prepare_socket(fd);
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0) {
			rc = -errno;
			close(fd);
			continue;
		}
		n->listen_fd = fd;
		rc = 0;
		break;
	}
	freeaddrinfo(res);
	return rc;
}

/* Whether something listens at the node's address (another nvcached of
 * this node, most likely). */
static bool someone_listens(struct node *n)
{
	struct addrinfo *res;
	bool yes = false;

	if (node_addrs(n, 0, &res))
		return false;
	for (struct addrinfo *ai = res; ai && !yes; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		yes = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
		close(fd);
	}
	freeaddrinfo(res);
	return yes;
}

/* The node's address, bound and listening. A port in use that nothing
 * listens at is held by another socket of this machine, maybe for a
 * moment (a port in the kernel's ephemeral range is any outgoing
 * connection's to take): tried again for BIND_RETRY_MS, as a restart
 * right after a kill needs. A listener there is refused at once. */
#define BIND_RETRY_MS 10000
#define BIND_PAUSE_MS 200
static int bind_listen(struct node *n)
{
	int rc = bind_listen_once(n);

	for (int ms = 0; rc == -EADDRINUSE && ms < BIND_RETRY_MS && !someone_listens(n);
	     ms += BIND_PAUSE_MS) {
		if (!ms)
			log_warn("node %u: %s:%u is in use; trying again for %d s",
				 n->self, n->me->host, n->me->port, BIND_RETRY_MS / 1000);
		usleep(BIND_PAUSE_MS * 1000);
		rc = bind_listen_once(n);
	}
	if (rc)
		log_err("node %u: cannot listen on %s:%u: %s", n->self, n->me->host,
			n->me->port, strerror(-rc));
	return rc;
}

int node_start(struct node **out, const struct node_opts *o)
{
	struct node *n = calloc(1, sizeof(*n));
	int rc;

	if (!n)
		return -ENOMEM;
	n->cfg = *o->cfg;
	n->self = o->self;
	n->fc = o->fcache;
	n->me = config_node_find(&n->cfg, o->self);
	n->hb_ms = o->heartbeat_ms ? o->heartbeat_ms : NODE_DEFAULT_HEARTBEAT_MS;
	n->timeout_ms = o->timeout_ms ? o->timeout_ms : NODE_DEFAULT_TIMEOUT_MS;
	n->reserve = o->reserve;
	snprintf(n->meminfo, sizeof(n->meminfo), "%s",
		 o->meminfo ? o->meminfo : "/proc/meminfo");
	n->max_conns = o->max_conns ? o->max_conns : NODE_DEFAULT_MAX_CONNS;
	n->peer_conns = o->peer_conns ? o->peer_conns : NODE_DEFAULT_PEER_CONNS;
	const char *stall = getenv("NVCACHED_TEST_STALL_FORWARD");
	unsigned sid, sms, severy;
	if (stall && sscanf(stall, "%u:%u:%u", &sid, &sms, &severy) == 3 &&
	    sid == n->self && severy) {
		n->stall_every = severy;
		n->stall_ms = sms;
		log_warn("test mode: every %u-th overwrite stalls %u ms before its "
			 "parity delta goes on (NVCACHED_TEST_STALL_FORWARD)",
			 n->stall_every, n->stall_ms);
	}
	/* A connection takes a descriptor, and so does each forwarding one:
	 * the usual soft limit of 1024 would refuse before max_conns does
	 * (EMFILE on accept). */
	uint64_t fds = fdlimit_raise();
	uint64_t need = n->max_conns + (uint64_t)n->peer_conns * n->cfg.n_nodes + 64;
	if (fds < need)
		log_warn("open files: the limit is %llu, low for --max-conns %u "
			 "(a connection and each of the %u forwarding ones to each "
			 "node take one): raise it (ulimit -n) or lower --max-conns",
			 (unsigned long long)fds, n->max_conns, n->peer_conns);
	n->listen_fd = -1;
	n->stop_pipe[0] = n->stop_pipe[1] = -1;
	pthread_mutex_init(&n->lock, NULL);
	clock_cond_init(&n->cond);

	if (!n->me) {
		log_err("node %u is not in the cluster file", o->self);
		rc = -EINVAL;
		goto fail;
	}
	if (n->timeout_ms <= 2 * n->hb_ms) {
		log_err("heartbeat timeout %u ms must exceed two heartbeat intervals "
			"(%u ms)", n->timeout_ms, 2 * n->hb_ms);
		rc = -EINVAL;
		goto fail;
	}
	if (!n->cfg.secret_len) {
		log_err("no shared secret loaded");
		rc = -EINVAL;
		goto fail;
	}
	/* The incarnation: start time, so a restarted node is a new one. */
	n->incarnation = clock_wall_ns();

	n->slots = calloc(n->max_conns, sizeof(*n->slots));
	if (!n->slots) {
		rc = -ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < n->max_conns; i++)
		n->slots[i].fd = -1;
	/* a forward's timeout (and its connect's): short, as the owner
	 * waits behind it */
	n->fwd_to = (struct fwd_target){ &n->cfg, n->timeout_ms < 2000 ?
					 (int)n->timeout_ms : 2000 };
	if ((rc = fwd_pool_create(&n->fwd, &n->fwd_to, n->peer_conns))) {
		log_err("%u forwarding connections per node: %s (at most %u)",
			n->peer_conns, strerror(-rc), PEERPOOL_MAX_SIZE);
		goto fail;
	}
	if ((rc = membership_create(&n->mb, &n->cfg, n->self,
				    (uint64_t)n->timeout_ms * 1000000ULL)))
		goto fail;
	if ((rc = locksvc_new(&n->locks, 0)))
		goto fail;
	if (n->fc)
		locksvc_grace(n->locks, fcache_grace_end(n->fc));
	if (n->fc && n->cfg.n_nodes > 1)
		fcache_set_shadow(n->fc, (uint32_t)(n->me - n->cfg.nodes), send_mark, n);
	if (n->fc)
		fcache_set_peers(n->fc, n->cfg.n_nodes, send_file, n);
	if (o->tier) {
		n->tier_bytes = o->tier->pages * PAGESTORE_PAGE;
		n->mem_offer = n->tier_bytes;   /* until meminfo is read */
		rc = pagestore_open_tiered(&n->ps, 1 << 16, o->tier);
		if (rc == 0)
			log_info("pages kept in a tiered store: %" PRIu64 " MiB, "
				 "MRAM %" PRIu64 " MiB, DRAM %" PRIu64 " MiB%s%s, "
				 "policy %s", n->tier_bytes >> 20,
				 (o->tier->mram_pages * PAGESTORE_PAGE) >> 20,
				 (o->tier->dram_pages * PAGESTORE_PAGE) >> 20,
				 o->tier->flash_path ? ", flash " : "",
				 o->tier->flash_path ? o->tier->flash_path : "",
				 o->tier->policy);
	} else {
		rc = pagestore_open(&n->ps, 0, 1 << 16);
	}
	if (rc)
		goto fail;
	update_capacity(n);
	if (o->listen_fd >= 0)
		n->listen_fd = o->listen_fd;
	else if ((rc = bind_listen(n)))
		goto fail;
	if (pipe2(n->stop_pipe, O_CLOEXEC) < 0) {
		rc = -errno;
		goto fail;
	}
	if ((rc = start_thread(&n->acceptor, SMALL_STACK, acceptor_main, n)))
		goto fail;
	n->acceptor_started = true;
	if ((rc = start_thread(&n->monitor, SMALL_STACK, monitor_main, n)))
		goto fail;
	n->monitor_started = true;
	for (unsigned i = 0; i < n->cfg.n_nodes; i++) {
		const struct cluster_node *cn = &n->cfg.nodes[i];
		if (cn->id == n->self)
			continue;
		struct peer_link *l = &n->links[n->n_links++];
		l->node = n;
		l->cn = cn;
		l->c = calloc(1, sizeof(*l->c));
		if (!l->c) {
			rc = -ENOMEM;
			goto fail;
		}
		l->c->fd = -1;
		if ((rc = start_thread(&l->thread, CONN_STACK, link_main, l)))
			goto fail;
		l->started = true;
	}
	char sz[32];
	log_info("node %u listening on %s:%u (incarnation %" PRIu64 ", %u peers, "
		 "heartbeat %u ms, timeout %u ms, offering %s)", n->self, n->me->host,
		 n->me->port, n->incarnation, n->n_links, n->hb_ms, n->timeout_ms,
		 opts_format_size(n->offer, sz, sizeof(sz)));
	*out = n;
	return 0;
fail:
	/* the file cache's thread may be sending through n already */
	fcache_stop(n->fc);
	node_stop(n);
	return rc;
}

void node_stop(struct node *n)
{
	if (!n)
		return;
	pthread_mutex_lock(&n->lock);
	n->stopping = true;
	pthread_cond_broadcast(&n->cond);
	/* Wake every thread blocked in recv/send on a connection. */
	for (unsigned i = 0; n->slots && i < n->max_conns; i++)
		if (n->slots[i].fd >= 0)
			shutdown(n->slots[i].fd, SHUT_RDWR);
	for (unsigned i = 0; i < n->n_links; i++)
		if (n->links[i].c && n->links[i].c->fd >= 0)
			shutdown(n->links[i].c->fd, SHUT_RDWR);
	pthread_mutex_unlock(&n->lock);
	if (n->locks)
		locksvc_stop(n->locks);   /* F_SETLKW waits answer now */
	if (n->stop_pipe[1] >= 0 && write(n->stop_pipe[1], "x", 1) < 0)
		log_debug("stop pipe: %s", strerror(errno));
	if (n->acceptor_started)
		pthread_join(n->acceptor, NULL);
	if (n->monitor_started)
		pthread_join(n->monitor, NULL);
	for (unsigned i = 0; i < n->n_links; i++) {
		if (n->links[i].started)
			pthread_join(n->links[i].thread, NULL);
		free(n->links[i].c);
	}
	/* The acceptor is joined: no slot changes hands any more. Join
	 * every connection thread, the running ones once woken above. */
	for (unsigned i = 0; n->slots && i < n->max_conns; i++)
		if (n->slots[i].thread)
			pthread_join(n->slots[i].t, NULL);
	if (n->listen_fd >= 0)
		close(n->listen_fd);
	if (n->stop_pipe[0] >= 0) {
		close(n->stop_pipe[0]);
		close(n->stop_pipe[1]);
	}
	peerpool_destroy(n->fwd);
	pagestore_close(n->ps);
	locksvc_free(n->locks);
	membership_destroy(n->mb);
	free(n->slots);
	pthread_cond_destroy(&n->cond);
	pthread_mutex_destroy(&n->lock);
	memset(n->cfg.secret, 0, sizeof(n->cfg.secret));
	free(n);
}
