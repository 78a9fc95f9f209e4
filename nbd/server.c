/* server.c - sockets and io_uring event loops for the NBD server; see
 * server.h. Each worker keeps at most one receive and one send in flight
 * per connection; everything between them is conn.c's business.
 *
 * Completion tags (user_data): a connection's address with the operation in
 * the low bits, or a bare tag for the accept and the wake-up eventfd. */
#include "nbd/server.h"
#include "nbd/conn.h"

#include "common/log.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <liburing.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define RING_ENTRIES 256
#define TAG_ACCEPT   1ULL
#define TAG_WAKE     2ULL
#define NBD_SOCK_SNDBUF (4 << 20)
#define TAG_RETRY    3ULL   /* accept failed: try again after a pause */
#define OP_RECV      1ULL
#define OP_SEND      2ULL
#define OP_POLL      3ULL   /* a zero-copy READ waits for socket room */
#define OP_MASK      3ULL
/* At a stop, how long connections get to finish the request they are in
 * and send their replies before they are dropped. */
#define DRAIN_SECONDS 5

struct wconn {
	struct nbd_conn c;
	int fd;
	bool in_use;
	bool recv_posted, send_posted, poll_posted;
	bool shut;                      /* shutdown() issued */
	uint64_t since_ns;              /* accepted at (CLOCK_MONOTONIC) */
	bool nego;                      /* counted in worker.nnego */
} __attribute__((aligned(8)));

struct worker {
	struct nbd_server *srv;
	unsigned idx;
	pthread_t thread;
	bool started;
	struct io_uring ring;
	bool ring_ok;
	int wake_fd;
	uint64_t wake_buf;
	struct nbd_stats stats;
	struct nbd_conn_ctx ctx;
	struct wconn *conns;
	unsigned nconns, nused;
	unsigned nnego;   /* connections still negotiating: only then does
			   * the loop wake up to time handshakes out */
	bool accept_posted;
};

struct nbd_server {
	struct nbd_server_opts opts;
	const struct nbd_export *exp;
	struct nbd_backend *be;
	int listen_fd;
	bool tcp;
	char where[256];
	atomic_bool stop;
	atomic_uint next_id;
	struct worker *workers;
	unsigned nworkers;
};

/* Whatever is at path before we bind there: nothing (0), a socket file
 * left by a dead server (removed, 0), or -errno (logged): a live server's
 * socket, or anything that is not a socket. Only a socket nobody answers
 * on is ours to remove: --unix given a data file by mistake must not
 * delete it. */
static int unix_path_clear(const struct sockaddr_un *sa, const char *path)
{
	struct stat st;
	int fd, rc;

	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		rc = -errno;
		log_err("socket %s: %s", path, strerror(-rc));
		return rc;
	}
	if (!S_ISSOCK(st.st_mode)) {
		log_err("socket %s: the path exists and is not a socket; "
			"refusing to replace it (remove it or give another "
			"--unix path)", path);
		return -EEXIST;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0
		? 0 : -errno;
	close(fd);
	if (rc == 0) {
		log_err("socket %s: another server is listening there", path);
		return -EADDRINUSE;
	}
	if (rc != -ECONNREFUSED) {
		/* EAGAIN (a live server's full backlog), EACCES, ...: not
		 * known to be dead, so not removed. */
		log_err("socket %s: in place and not known to be stale (%s); "
			"refusing to replace it", path, strerror(-rc));
		return rc;
	}
	if (unlink(path) < 0 && errno != ENOENT) {
		rc = -errno;
		log_err("socket %s: cannot remove the stale socket: %s", path,
			strerror(-rc));
		return rc;
	}
	log_info("socket %s: removed a stale socket (no server answered)",
		 path);
	return 0;
}

static int listen_unix(struct nbd_server *srv, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, rc;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		log_err("socket path %s: too long (max %zu bytes)", path,
			sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	if ((rc = unix_path_clear(&sa, path)) < 0)
		return rc;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		rc = -errno;
		log_err("socket %s: %s", path, strerror(-rc));
		close(fd);
		return rc;
	}
	if (listen(fd, 128) < 0) {
		rc = -errno;
		log_err("socket %s: listen: %s", path, strerror(-rc));
		close(fd);
		unlink(path);   /* we bound it: not left behind */
		return rc;
	}
	chmod(path, 0600);   /* only root may swap to or read our pages */
	snprintf(srv->where, sizeof(srv->where), "unix:%s", path);
	return fd;
}

/* The port a listening socket got: with port 0 the kernel picks one, and
 * the log and the stats must say which, not ":0". */
static unsigned bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

static int listen_tcp(struct nbd_server *srv, const char *host,
		      const char *port)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *ai, *a;
	int fd = -1, rc = -EADDRNOTAVAIL, one = 1;

	int g = getaddrinfo(host, port, &hints, &ai);
	if (g) {
		log_err("listen address %s:%s: %s", host, port, gai_strerror(g));
		return -EINVAL;
	}
	for (a = ai; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC,
			    a->ai_protocol);
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 &&
		    listen(fd, 128) == 0)
			break;
		rc = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	if (fd < 0) {
		log_err("listen on %s:%s: %s", host, port, strerror(-rc));
		return rc;
	}
	snprintf(srv->where, sizeof(srv->where), "tcp:%s:%u", host,
		 bound_port(fd));
	srv->tcp = true;
	return fd;
}

static struct io_uring_sqe *sqe_get(struct worker *w)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);
	if (!sqe) {
		/* Full: push what is queued to the kernel, then retry; with
		 * at most two operations per connection this is rare. */
		io_uring_submit(&w->ring);
		sqe = io_uring_get_sqe(&w->ring);
	}
	return sqe;
}

/* A worker accepts only while it has a free connection slot: when all
 * are busy, the other workers take new clients, and when every worker is
 * full they wait in the listen backlog instead of being refused. */
static void post_accept(struct worker *w)
{
	if (w->accept_posted || w->nused >= w->nconns ||
	    atomic_load(&w->srv->stop))
		return;
	struct io_uring_sqe *sqe = sqe_get(w);
	if (!sqe)
		return;
	io_uring_prep_accept(sqe, w->srv->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	io_uring_sqe_set_data64(sqe, TAG_ACCEPT);
	w->accept_posted = true;
}

static void post_wake(struct worker *w)
{
	struct io_uring_sqe *sqe = sqe_get(w);
	if (!sqe)
		return;
	io_uring_prep_read(sqe, w->wake_fd, &w->wake_buf, sizeof(w->wake_buf),
			   0);
	io_uring_sqe_set_data64(sqe, TAG_WAKE);
}

/* conn.c's zero-copy READ: one non-blocking sendmsg from the worker
 * thread itself (the backend's pages are pinned only for this call). */
static ssize_t send_direct(struct nbd_conn *c, const struct iovec *iov,
			   unsigned n)
{
	struct wconn *wc = (struct wconn *)((char *)c -
					    offsetof(struct wconn, c));
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = n };
	ssize_t r = sendmsg(wc->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
	return r < 0 ? -errno : r;
}

/* The connection left negotiation (transmitting, dead or gone). */
static void nego_settle(struct worker *w, struct wconn *wc)
{
	if (wc->nego && (!wc->in_use || wc->c.transmitting ||
			 nbd_conn_dead(&wc->c))) {
		wc->nego = false;
		w->nnego--;
	}
}

static void conn_release(struct worker *w, struct wconn *wc)
{
	nbd_conn_stop(&wc->c);
	nego_settle(w, wc);
	close(wc->fd);
	wc->fd = -1;
	wc->in_use = false;
	w->nused--;
	post_accept(w);
}

/* After any event on a connection: post what it needs next, or close it. */
static void conn_kick(struct worker *w, struct wconn *wc)
{
	struct io_uring_sqe *sqe;
	const uint8_t *p;
	uint8_t *rp;
	size_t len;

	nego_settle(w, wc);
	if (nbd_conn_closing(&wc->c) && !wc->send_posted &&
	    nbd_conn_send_idle(&wc->c))
		nbd_conn_stop(&wc->c);
	if (nbd_conn_dead(&wc->c)) {
		if (!wc->recv_posted && !wc->send_posted && !wc->poll_posted) {
			conn_release(w, wc);
		} else if (!wc->shut) {
			/* Wakes the outstanding operations. */
			shutdown(wc->fd, SHUT_RDWR);
			wc->shut = true;
		}
		return;
	}
	if (!wc->send_posted && nbd_conn_send_next(&wc->c, &p, &len) &&
	    (sqe = sqe_get(w))) {
		io_uring_prep_send(sqe, wc->fd, p, len, MSG_NOSIGNAL);
		io_uring_sqe_set_data64(sqe, (uintptr_t)wc | OP_SEND);
		wc->send_posted = true;
	}
	if (!wc->poll_posted && nbd_conn_want_writable(&wc->c) &&
	    (sqe = sqe_get(w))) {
		io_uring_prep_poll_add(sqe, wc->fd, POLLOUT);
		io_uring_sqe_set_data64(sqe, (uintptr_t)wc | OP_POLL);
		wc->poll_posted = true;
	}
	if (!wc->recv_posted && !nbd_conn_closing(&wc->c)) {
		nbd_conn_recv_space(&wc->c, &rp, &len);
		if (len && (sqe = sqe_get(w))) {
			io_uring_prep_recv(sqe, wc->fd, rp, len, 0);
			io_uring_sqe_set_data64(sqe, (uintptr_t)wc | OP_RECV);
			wc->recv_posted = true;
		}
	}
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A connection that has not finished negotiating. */
static bool negotiating(const struct wconn *wc)
{
	return wc->in_use && !wc->c.transmitting && !nbd_conn_dead(&wc->c);
}

/* Slots are few (--max-conns) and a client that connects and says
 * nothing would hold one for good: a handful of them locked the kernel's
 * swap client out. Close those still negotiating after handshake_s;
 * returns whether any connection is still negotiating. */
static bool sweep_handshakes(struct worker *w)
{
	unsigned lim = w->srv->opts.handshake_s;
	uint64_t now = mono_ns();
	bool any = false;

	for (unsigned i = 0; i < w->nconns; i++) {
		struct wconn *wc = &w->conns[i];
		if (!negotiating(wc))
			continue;
		if (now - wc->since_ns < (uint64_t)lim * 1000000000ull) {
			any = true;
			continue;
		}
		log_warn("connection %u: no handshake after %u s; closing it "
			 "(--handshake-timeout)", wc->c.id, lim);
		atomic_fetch_add_explicit(&w->stats.proto_errors, 1,
					  memory_order_relaxed);
		nbd_conn_stop(&wc->c);
		conn_kick(w, wc);
	}
	return any;
}

static void on_accept(struct worker *w, int res)
{
	struct nbd_server *srv = w->srv;
	struct wconn *wc = NULL;

	w->accept_posted = false;
	if (res < 0) {
		if (res == -ECANCELED || atomic_load(&srv->stop))
			return;
		/* Out of descriptors or memory: retrying at once would spin
		 * and flood the log; pause 100 ms (a timer keeps the slot). */
		log_warn("accept on %s: %s; retrying in 100 ms", srv->where,
			 strerror(-res));
		struct io_uring_sqe *sqe = sqe_get(w);
		if (sqe) {
			static struct __kernel_timespec pause = {
				.tv_nsec = 100 * 1000 * 1000 };
			io_uring_prep_timeout(sqe, &pause, 0, 0);
			io_uring_sqe_set_data64(sqe, TAG_RETRY);
			w->accept_posted = true;
		}
		return;
	}
	if (atomic_load(&srv->stop)) {
		close(res);
		return;
	}
	for (unsigned i = 0; i < w->nconns; i++)
		if (!w->conns[i].in_use) {
			wc = &w->conns[i];
			break;
		}
	if (!wc) {   /* cannot happen: accept is posted only with room */
		close(res);
		return;
	}
	if (srv->tcp) {
		int one = 1;
		setsockopt(res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	/* Room for a few 1 MiB replies in the socket: with the default
	 * (~208 KiB) each 256 KiB send of a large READ waits for the client
	 * to drain the previous one. Measured 1 MiB sequential reads, 16
	 * connections: 0.82-0.92 of nbdkit's without, 0.98-1.14 with.
	 * FORCE passes net.core.wmem_max when we may (root); else the
	 * capped request still helps. */
	int sb = NBD_SOCK_SNDBUF;
	if (setsockopt(res, SOL_SOCKET, SO_SNDBUFFORCE, &sb, sizeof(sb)) < 0)
		(void)setsockopt(res, SOL_SOCKET, SO_SNDBUF, &sb, sizeof(sb));
	wc->fd = res;
	wc->in_use = true;
	w->nused++;
	if (w->nused == w->nconns)
		log_info("thread %u: all %u connection slots in use; new "
			 "clients wait for one (--max-conns)", w->idx, w->nconns);
	post_accept(w);
	wc->recv_posted = wc->send_posted = wc->poll_posted = false;
	wc->shut = false;
	wc->since_ns = mono_ns();
	wc->nego = true;
	w->nnego++;
	unsigned id = atomic_fetch_add(&srv->next_id, 1) + 1;
	nbd_conn_start(&wc->c, id);
	log_info("connection %u: accepted on %s (thread %u)", id, srv->where,
		 w->idx);
	conn_kick(w, wc);
}

static void on_conn(struct worker *w, struct wconn *wc, uint64_t op, int res)
{
	if (op == OP_RECV) {
		wc->recv_posted = false;
		if (res <= 0) {
			if (!nbd_conn_dead(&wc->c) && !nbd_conn_closing(&wc->c)) {
				if (res == 0 && wc->c.state == CONN_REQ_HDR &&
				    wc->c.rhead == wc->c.rtail)
					log_info("connection %u: closed by the "
						 "client", wc->c.id);
				else
					log_warn("connection %u: client vanished "
						 "mid-%s (%s)", wc->c.id,
						 wc->c.transmitting ? "request"
								    : "handshake",
						 res ? strerror(-res) : "EOF");
			}
			nbd_conn_stop(&wc->c);
		} else {
			nbd_conn_received(&wc->c, (size_t)res);
			nbd_conn_process(&wc->c);
		}
	} else if (op == OP_POLL) {
		wc->poll_posted = false;
		if (res < 0) {
			if (!nbd_conn_dead(&wc->c))
				log_warn("connection %u: poll: %s", wc->c.id,
					 strerror(-res));
			nbd_conn_stop(&wc->c);
		} else {
			/* Room (or a hangup the next sendmsg reports). */
			nbd_conn_writable(&wc->c);
			nbd_conn_process(&wc->c);
		}
	} else {
		wc->send_posted = false;
		if (res < 0) {
			if (!nbd_conn_dead(&wc->c))
				log_warn("connection %u: send: %s", wc->c.id,
					 strerror(-res));
			nbd_conn_stop(&wc->c);
		} else {
			nbd_conn_sent(&wc->c, (size_t)res);
			/* Room in the send buffers may unblock a READ. */
			nbd_conn_process(&wc->c);
		}
	}
	conn_kick(w, wc);
}

/* The server is stopping: every connection finishes what it is in the
 * middle of (nbd_conn_shutdown). */
static void drain_begin(struct worker *w)
{
	for (unsigned i = 0; i < w->nconns; i++) {
		struct wconn *wc = &w->conns[i];
		if (!wc->in_use)
			continue;
		nbd_conn_shutdown(&wc->c);
		nbd_conn_process(&wc->c);
		conn_kick(w, wc);
	}
	if (w->nused)
		log_info("thread %u: stopping; %u connections finish their "
			 "requests (up to %d s), later ones get ESHUTDOWN",
			 w->idx, w->nused, DRAIN_SECONDS);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct io_uring_cqe *cqe;
	bool draining = false;
	struct timespec deadline = { 0 }, now;

	post_accept(w);
	post_wake(w);
	for (;;) {
		int rc;
		if (atomic_load(&w->srv->stop) && !draining) {
			draining = true;
			clock_gettime(CLOCK_MONOTONIC, &deadline);
			deadline.tv_sec += DRAIN_SECONDS;
			drain_begin(w);
		}
		if (draining) {
			/* connections close on their own: conn_kick releases
			 * each once its last reply is sent */
			if (w->nused == 0)
				break;
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec > deadline.tv_sec ||
			    (now.tv_sec == deadline.tv_sec &&
			     now.tv_nsec >= deadline.tv_nsec)) {
				log_warn("thread %u: %u connections still busy "
					 "after %d s; dropping them", w->idx,
					 w->nused, DRAIN_SECONDS);
				break;
			}
			struct __kernel_timespec ts = { 0, 100 * 1000 * 1000 };
			rc = io_uring_submit_and_wait_timeout(&w->ring, &cqe, 1,
							      &ts, NULL);
			if (rc == -ETIME)
				continue;
		} else if (w->srv->opts.handshake_s && w->nnego &&
			   sweep_handshakes(w)) {
			/* someone is negotiating: wake up to time them out */
			struct __kernel_timespec ts = { 1, 0 };
			rc = io_uring_submit_and_wait_timeout(&w->ring, &cqe, 1,
							      &ts, NULL);
			if (rc == -ETIME)
				continue;
		} else {
			rc = io_uring_submit_and_wait(&w->ring, 1);
		}
		if (rc < 0 && rc != -EINTR) {
			log_err("thread %u: io_uring: %s", w->idx, strerror(-rc));
			break;
		}
		unsigned head, n = 0;
		io_uring_for_each_cqe(&w->ring, head, cqe) {
			uint64_t ud = cqe->user_data;
			n++;
			if (ud == TAG_ACCEPT)
				on_accept(w, cqe->res);
			else if (ud == TAG_WAKE)
				; /* stop is checked by the loop */
			else if (ud == TAG_RETRY) {
				w->accept_posted = false;
				post_accept(w);
			}
			else
				on_conn(w, (struct wconn *)(uintptr_t)(ud & ~OP_MASK),
					ud & OP_MASK, cqe->res);
		}
		io_uring_cq_advance(&w->ring, n);
	}
	/* Shutdown: drop the connections; the ring's teardown cancels what is
	 * still in flight. */
	for (unsigned i = 0; i < w->nconns; i++)
		if (w->conns[i].in_use) {
			shutdown(w->conns[i].fd, SHUT_RDWR);
			conn_release(w, &w->conns[i]);
		}
	return NULL;
}

int nbd_server_create(struct nbd_server **out,
		      const struct nbd_server_opts *opts,
		      const struct nbd_export *exp, struct nbd_backend *be)
{
	struct nbd_server *srv = calloc(1, sizeof(*srv));
	int rc;

	if (!srv)
		return -ENOMEM;
	srv->opts = *opts;
	srv->exp = exp;
	srv->be = be;
	srv->nworkers = opts->threads ? opts->threads : 1;
	unsigned per = (opts->max_conns + srv->nworkers - 1) / srv->nworkers;
	if (per == 0)
		per = 1;
	srv->listen_fd = opts->unix_path
		? listen_unix(srv, opts->unix_path)
		: listen_tcp(srv, opts->host, opts->port);
	if (srv->listen_fd < 0) {
		rc = srv->listen_fd;
		free(srv);
		return rc;
	}
	srv->workers = calloc(srv->nworkers, sizeof(*srv->workers));
	if (!srv->workers) {
		rc = -ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < srv->nworkers; i++) {
		struct worker *w = &srv->workers[i];
		w->srv = srv;
		w->idx = i;
		w->wake_fd = -1;
		w->ctx = (struct nbd_conn_ctx){ exp, be, &w->stats,
						send_direct };
		rc = io_uring_queue_init(RING_ENTRIES, &w->ring, 0);
		if (rc < 0) {
			log_err("io_uring setup: %s", strerror(-rc));
			goto fail;
		}
		w->ring_ok = true;
		w->wake_fd = eventfd(0, EFD_CLOEXEC);
		if (w->wake_fd < 0) {
			rc = -errno;
			goto fail;
		}
		w->conns = calloc(per, sizeof(*w->conns));
		if (!w->conns) {
			rc = -ENOMEM;
			goto fail;
		}
		for (unsigned j = 0; j < per; j++) {
			w->conns[j].fd = -1;
			rc = nbd_conn_init(&w->conns[j].c, &w->ctx);
			if (rc < 0) {
				log_err("connection buffers: %s", strerror(-rc));
				goto fail;
			}
			w->nconns++;
		}
	}
	log_info("listening on %s: %u threads, %u connections each",
		 srv->where, srv->nworkers, per);
	*out = srv;
	return 0;
fail:
	nbd_server_destroy(srv);
	return rc;
}

int nbd_server_start(struct nbd_server *srv)
{
	for (unsigned i = 0; i < srv->nworkers; i++) {
		int rc = pthread_create(&srv->workers[i].thread, NULL,
					worker_main, &srv->workers[i]);
		if (rc) {
			log_err("starting server thread: %s", strerror(rc));
			return -rc;
		}
		srv->workers[i].started = true;
	}
	return 0;
}

void nbd_server_stop(struct nbd_server *srv)
{
	uint64_t one = 1;

	atomic_store(&srv->stop, true);
	for (unsigned i = 0; srv->workers && i < srv->nworkers; i++)
		if (srv->workers[i].wake_fd >= 0) {
			/* Nothing more a signal handler could do on failure. */
			ssize_t w = write(srv->workers[i].wake_fd, &one,
					  sizeof(one));
			(void)w;
		}
}

void nbd_server_destroy(struct nbd_server *srv)
{
	if (!srv)
		return;
	nbd_server_stop(srv);
	for (unsigned i = 0; srv->workers && i < srv->nworkers; i++) {
		struct worker *w = &srv->workers[i];
		if (w->started)
			pthread_join(w->thread, NULL);
		if (w->ring_ok)
			io_uring_queue_exit(&w->ring);
		if (w->wake_fd >= 0)
			close(w->wake_fd);
		for (unsigned j = 0; j < w->nconns; j++) {
			if (w->conns[j].in_use)
				conn_release(w, &w->conns[j]);
			nbd_conn_free(&w->conns[j].c);
		}
		free(w->conns);
	}
	free(srv->workers);
	if (srv->listen_fd >= 0) {
		close(srv->listen_fd);
		if (srv->opts.unix_path)
			unlink(srv->opts.unix_path);
	}
	free(srv);
}

#define SUM(field) ({ uint64_t s_ = 0; \
	for (unsigned i_ = 0; i_ < srv->nworkers; i_++) \
		s_ += atomic_load_explicit(&srv->workers[i_].stats.field, \
					   memory_order_relaxed); \
	s_; })

/* The requests' shape: how many of each size (per command) and how many
 * arrived together (conn.h, NBD_DEPTH_BUCKETS). Appends to out; returns
 * the bytes written (at most len - 1). */
static size_t nbd_server_shape_stats(struct nbd_server *srv, char *out, size_t len)
{
	static const char *const size_name[NBD_SIZE_BUCKETS] = {
		"4k", "8k", "16k", "32k", "64k", "128k", "256k", "larger" };
	static const char *const depth_name[NBD_DEPTH_BUCKETS] = {
		"1", "2_3", "4_7", "8_15", "16_31", "32_63", "64_plus" };
	size_t n = 0;
	uint64_t max = 0;
	int k;

#define PUT(...) do { \
		k = snprintf(out + n, len - n, __VA_ARGS__); \
		if (k < 0 || (size_t)k >= len - n) \
			return len - 1; \
		n += (size_t)k; \
	} while (0)
	for (unsigned b = 0; b < NBD_SIZE_BUCKETS; b++) {
		PUT("nbd_read_size_%s: %llu\n", size_name[b],
		    (unsigned long long)SUM(read_sizes[b]));
		PUT("nbd_write_size_%s: %llu\n", size_name[b],
		    (unsigned long long)SUM(write_sizes[b]));
		PUT("nbd_trim_size_%s: %llu\n", size_name[b],
		    (unsigned long long)SUM(trim_sizes[b]));
	}
	for (unsigned b = 0; b < NBD_DEPTH_BUCKETS; b++)
		PUT("nbd_depth_%s: %llu\n", depth_name[b],
		    (unsigned long long)SUM(depth[b]));
	for (unsigned i = 0; i < srv->nworkers; i++) {
		uint64_t m = atomic_load_explicit(&srv->workers[i].stats.depth_max,
						  memory_order_relaxed);
		max = m > max ? m : max;
	}
	PUT("nbd_depth_max: %llu\n", (unsigned long long)max);
#undef PUT
	return n;
}

ssize_t nbd_server_stats(struct nbd_server *srv, char *out, size_t len)
{
	int n = snprintf(out, len,
		"listen: %s\n"
		"export: %s\n"
		"size_bytes: %llu\n"
		"threads: %u\n"
		"connections: %llu\n"
		"connections_total: %llu\n"
		"nbd_reads: %llu\n"
		"nbd_writes: %llu\n"
		"nbd_flushes: %llu\n"
		"nbd_trims: %llu\n"
		"nbd_write_zeroes: %llu\n"
		"nbd_bytes_read: %llu\n"
		"nbd_bytes_written: %llu\n"
		"nbd_bytes_trimmed: %llu\n"
		"nbd_request_errors: %llu\n"
		"nbd_protocol_errors: %llu\n",
		srv->where, srv->exp->name,
		(unsigned long long)srv->exp->size, srv->nworkers,
		(unsigned long long)SUM(conns_active),
		(unsigned long long)SUM(conns_total),
		(unsigned long long)SUM(reads),
		(unsigned long long)SUM(writes),
		(unsigned long long)SUM(flushes),
		(unsigned long long)SUM(trims),
		(unsigned long long)SUM(zeroes),
		(unsigned long long)SUM(bytes_read),
		(unsigned long long)SUM(bytes_written),
		(unsigned long long)SUM(bytes_trimmed),
		(unsigned long long)SUM(req_errors),
		(unsigned long long)SUM(proto_errors));
	if (n < 0)
		return -EIO;
	if ((size_t)n >= len)
		return (ssize_t)len - 1;
	return n + nbd_server_shape_stats(srv, out + n, len - (size_t)n);
}
