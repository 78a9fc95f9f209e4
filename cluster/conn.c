/* conn.c - framed blocking I/O on a TCP socket; see conn.h. */
#include "cluster/conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/log.h"

/* conn_set_congestion's name; "" keeps the machine's. Written before the
 * process makes connections, read by each conn_prepare_socket. */
static char congestion[16] = CONN_CONGESTION_DEFAULT;
static bool congestion_named;   /* by the cluster file, not the default */

void conn_set_congestion(const char *name)
{
	congestion_named = name && name[0];
	if (!congestion_named)
		name = CONN_CONGESTION_DEFAULT;
	snprintf(congestion, sizeof(congestion), "%s",
		 strcmp(name, "system") ? name : "");
}

static bool set_cc(int fd, const char *name)
{
	return setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name,
			  (socklen_t)strlen(name)) == 0;
}

/* The congestion control asked for. The default, cubic, not allowed to
 * this process (an unprivileged one may use only
 * net.ipv4.tcp_allowed_congestion_control's, which holds reno and the
 * machine's): reno, which paces no more than cubic. A name the cluster
 * file gives, or reno too, that cannot be set (not in this kernel, not
 * allowed): the machine's. Either logged once. */
void conn_prepare_socket(int fd)
{
	static atomic_bool told;

	if (!congestion[0] || set_cc(fd, congestion))
		return;
	int e = errno;
	if (e == EPERM && !congestion_named && set_cc(fd, CONN_CONGESTION_UNPRIVILEGED)) {
		if (!atomic_exchange(&told, true))
			log_info("cluster connections: TCP congestion control %s is "
				 "not allowed to this process (net.ipv4.tcp_allowed_"
				 "congestion_control); they use %s", congestion,
				 CONN_CONGESTION_UNPRIVILEGED);
		return;
	}
	if (e != ENOPROTOOPT && e != EOPNOTSUPP && !atomic_exchange(&told, true))
		log_warn("cluster connections: TCP congestion control %s not "
			 "set (%s%s); they use the machine's", congestion,
			 strerror(e), e == EPERM ? ": not in net.ipv4."
			 "tcp_allowed_congestion_control" : e == ENOENT ?
			 ": not in this kernel" : "");
}

static void describe_peer(struct conn *c)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[64] = "?", port[16] = "?";

	if (getpeername(c->fd, (struct sockaddr *)&ss, &sl) == 0)
		getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), port,
			    sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV);
	snprintf(c->peer, sizeof(c->peer), "%s:%s", host, port);
}

void conn_init(struct conn *c, int fd)
{
	int one = 1;

	c->fd = fd;
	c->max_payload = FRAME_PAGE_SIZE;
	c->big = NULL;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	describe_peer(c);
}

int conn_set_timeout(struct conn *c, int ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	if (setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		return -errno;
	return 0;
}

void conn_set_max_payload(struct conn *c, uint32_t max)
{
	c->max_payload = max < FRAME_MAX_CONN_PAYLOAD ? max : FRAME_MAX_CONN_PAYLOAD;
}

void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->big);
	c->big = NULL;
}

void conn_close_after_error(struct conn *c)
{
	static _Thread_local uint8_t sink[16384];
	size_t total = 0;
	int waited = 0;

	if (c->fd < 0)
		return;
	shutdown(c->fd, SHUT_WR);
	while (total < (1U << 20) && waited < 500) {
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		int n = poll(&p, 1, 100);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			waited += 100;
			continue;
		}
		ssize_t r = recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT);
		if (r <= 0)
			break;
		total += (size_t)r;
	}
	conn_close(c);
}

static int connect_one(const struct addrinfo *ai, int timeout_ms)
{
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	conn_prepare_socket(fd);
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		if (errno != EINPROGRESS) {
			int e = errno;
			close(fd);
			return -e;
		}
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		int n = poll(&p, 1, timeout_ms);
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		if (n == 0) {
			close(fd);
			return -ETIMEDOUT;
		}
		if (n < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		if (soerr) {
			close(fd);
			return -soerr;
		}
	}
	int fl = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

int conn_connect(struct conn *c, const char *host, uint16_t port,
		 int timeout_ms)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
	struct addrinfo *res;
	char ps[8];
	int rc = -ENOENT;

	c->fd = -1;
	c->big = NULL;
	snprintf(ps, sizeof(ps), "%u", port);
	if (getaddrinfo(host, ps, &hints, &res) != 0)
		return -ENOENT;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		rc = connect_one(ai, timeout_ms);
		if (rc >= 0)
			break;
	}
	freeaddrinfo(res);
	if (rc < 0)
		return rc;
	conn_init(c, rc);
	if (timeout_ms > 0)
		conn_set_timeout(c, timeout_ms);
	return 0;
}

int conn_send(struct conn *c, const struct frame_hdr *h, const void *payload)
{
	return conn_send_more(c, h, payload, false);
}

int conn_send_more(struct conn *c, const struct frame_hdr *h,
		   const void *payload, bool more)
{
	struct iovec iov = { .iov_base = (void *)payload, .iov_len = h->payload_len };

	if (h->payload_len && !payload)
		return -EINVAL;
	return conn_sendv_more(c, h, &iov, h->payload_len ? 1 : 0, more);
}

/* Move mh's iovecs past n bytes done (sent or received). */
static void iov_advance(struct msghdr *mh, size_t n)
{
	while (n > 0 && mh->msg_iovlen) {
		if (n >= mh->msg_iov->iov_len) {
			n -= mh->msg_iov->iov_len;
			mh->msg_iov++;
			mh->msg_iovlen--;
		} else {
			mh->msg_iov->iov_base = (uint8_t *)mh->msg_iov->iov_base + n;
			mh->msg_iov->iov_len -= n;
			n = 0;
		}
	}
}

int conn_sendv(struct conn *c, const struct frame_hdr *h, const struct iovec *pl,
	       unsigned npl)
{
	return conn_sendv_more(c, h, pl, npl, false);
}

int conn_sendv_more(struct conn *c, const struct frame_hdr *h,
		    const struct iovec *pl, unsigned npl, bool more)
{
	struct iovec iov[CONN_MAX_IOV + 1];

	if (npl > CONN_MAX_IOV)
		return -EINVAL;
	ssize_t hl = frame_encode_iov(h, pl, npl, c->tx, sizeof(c->tx));
	if (hl < 0)
		return (int)hl;
	iov[0] = (struct iovec){ .iov_base = c->tx, .iov_len = (size_t)hl };
	for (unsigned k = 0; k < npl; k++)
		iov[k + 1] = pl[k];
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = npl + 1 };
	size_t left = (size_t)hl + h->payload_len;

	while (left) {
		ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | (more ? MSG_MORE : 0));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
		left -= (size_t)n;
		iov_advance(&mh, (size_t)n);   /* over what went out */
	}
	return 0;
}

int conn_recv(struct conn *c, struct frame_hdr *h, const uint8_t **payload,
	      const char **why)
{
	return conn_recv_into(c, h, NULL, 0, payload, why);
}

/* Read exactly a + b bytes into two places. -ECONNRESET on EOF. */
static int read_full2(int fd, uint8_t *a, size_t alen, uint8_t *b, size_t blen)
{
	struct iovec iov[2] = { { a, alen }, { b, blen } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
	size_t left = alen + blen;

	while (left) {
		ssize_t n = recvmsg(fd, &mh, MSG_WAITALL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
		if (n == 0)
			return -ECONNRESET;
		left -= (size_t)n;
		iov_advance(&mh, (size_t)n);
	}
	return 0;
}

/* Read exactly len bytes. -ECONNRESET on EOF. */
static int read_full(int fd, uint8_t *buf, size_t len)
{
	return read_full2(fd, buf, len, NULL, 0);
}

int conn_recv_into(struct conn *c, struct frame_hdr *h, void *dst, size_t dstlen,
		   const uint8_t **payload, const char **why)
{
	const char *dummy;
	uint32_t hl, pl;
	int rc;

	if (!why)
		why = &dummy;
	*why = "";
	rc = read_full(c->fd, c->rx, FRAME_PREFIX);
	if (rc)
		return rc;
	rc = frame_prefix_parse(c->rx, &hl, &pl, why);
	if (rc)
		return rc;
	if (pl > c->max_payload) {
		*why = "payload larger than this connection accepts";
		return -EMSGSIZE;
	}
	if (!pl || pl > dstlen) {
		/* nothing for dst, or more than it holds: where conn_recv
		 * puts it (the caller sees the length and refuses it) */
		uint8_t *buf = c->rx;
		if ((size_t)FRAME_PREFIX + hl + pl > sizeof(c->rx)) {
			if (!c->big && !(c->big = malloc(FRAME_MAX_HEAD + FRAME_MAX_CONN_PAYLOAD)))
				return -ENOMEM;
			memcpy(c->big, c->rx, FRAME_PREFIX);
			buf = c->big;
		}
		rc = read_full(c->fd, buf + FRAME_PREFIX, (size_t)hl + pl);
		if (rc)
			return rc;
		ssize_t n = frame_decode(buf, FRAME_PREFIX + (size_t)hl + pl, h, payload, why);
		return n < 0 ? (int)n : 0;
	}
	/* the header into rx (hl is at most FRAME_MAX_HEADER), the payload
	 * where it goes, in one call */
	rc = read_full2(c->fd, c->rx + FRAME_PREFIX, hl, dst, pl);
	if (rc)
		return rc;
	rc = frame_decode_split(c->rx, FRAME_PREFIX + (size_t)hl, dst, pl, h, why);
	if (!rc && payload)
		*payload = dst;
	return rc;
}

void conn_send_error(struct conn *c, uint32_t node_id, uint32_t status,
		     const char *text)
{
	static const struct frame_hdr zero;
	struct frame_hdr h = zero;

	h.type = FT_ERROR;
	h.node_id = node_id;
	h.status = status;
	snprintf(h.text, sizeof(h.text), "%s", text);
	(void)conn_send(c, &h, NULL);
}
