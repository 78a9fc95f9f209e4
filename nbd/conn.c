/* conn.c - the NBD connection state machine; see conn.h. */
#include "nbd/conn.h"

#include "common/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PAGE 4096U

static void stat_add(atomic_uint_fast64_t *s, uint64_t n)
{
	/* One writer per counter (the owning thread): no locked add. */
	atomic_store_explicit(s, atomic_load_explicit(s, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

unsigned nbd_size_bucket(uint64_t len)
{
	unsigned b = 0;
	while (b < NBD_SIZE_BUCKETS - 1 && len > (uint64_t)PAGE << b)
		b++;
	return b;
}

unsigned nbd_depth_bucket(unsigned n)
{
	unsigned b = 0;
	while (b < NBD_DEPTH_BUCKETS - 1 && n >= 2u << b)
		b++;
	return b;
}

static void *buf_alloc(size_t n)
{
	/* mmap'd, so that the buffers are page-aligned and mlockall's
	 * MCL_FUTURE locks them like everything else. */
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

int nbd_conn_init(struct nbd_conn *c, const struct nbd_conn_ctx *ctx)
{
	memset(c, 0, sizeof(*c));
	c->ctx = ctx;
	c->rbuf = buf_alloc(NBD_CONN_RBUF);
	c->sbuf[0] = buf_alloc(NBD_CONN_SBUF);
	c->sbuf[1] = buf_alloc(NBD_CONN_SBUF);
	if (!c->rbuf || !c->sbuf[0] || !c->sbuf[1]) {
		nbd_conn_free(c);
		return -ENOMEM;
	}
	c->state = CONN_DEAD;
	return 0;
}

void nbd_conn_free(struct nbd_conn *c)
{
	if (c->rbuf)
		munmap(c->rbuf, NBD_CONN_RBUF);
	for (int i = 0; i < 2; i++)
		if (c->sbuf[i])
			munmap(c->sbuf[i], NBD_CONN_SBUF);
	c->rbuf = c->sbuf[0] = c->sbuf[1] = NULL;
}

static size_t send_room(const struct nbd_conn *c)
{
	return NBD_CONN_SBUF - c->slen[c->sfill];
}

static uint8_t *send_take(struct nbd_conn *c, size_t n)
{
	uint8_t *p = c->sbuf[c->sfill] + c->slen[c->sfill];
	c->slen[c->sfill] += n;
	return p;
}

void nbd_conn_start(struct nbd_conn *c, unsigned id)
{
	c->id = id;
	c->rhead = c->rtail = 0;
	c->slen[0] = c->slen[1] = 0;
	c->sfill = 0;
	c->sbusy = false;
	c->soff = 0;
	c->no_zeroes = false;
	c->transmitting = false;
	c->direct_off = c->want_out = false;
	c->shutting = false;
	c->state = CONN_CFLAGS;
	nbd_greeting_build(send_take(c, NBD_GREETING_LEN));
	stat_add(&c->ctx->stats->conns_total, 1);
	stat_add(&c->ctx->stats->conns_active, 1);
	c->live = true;
}

void nbd_conn_stop(struct nbd_conn *c)
{
	if (c->live)
		atomic_fetch_sub_explicit(&c->ctx->stats->conns_active, 1,
					  memory_order_relaxed);
	c->live = false;
	c->state = CONN_DEAD;
}

void nbd_conn_shutdown(struct nbd_conn *c)
{
	c->shutting = true;
	if (!c->transmitting && c->state != CONN_DEAD)
		c->state = CONN_CLOSING;
}

void nbd_conn_recv_space(struct nbd_conn *c, uint8_t **p, size_t *len)
{
	if (c->rhead == c->rtail) {
		c->rhead = c->rtail = 0;
	} else if (c->rhead > 0 && NBD_CONN_RBUF - c->rtail < NBD_CONN_RBUF / 4) {
		/* Compact only when the tail is short of room: the leftover is
		 * at most one partial header or page, so the copy is small. */
		memmove(c->rbuf, c->rbuf + c->rhead, c->rtail - c->rhead);
		c->rtail -= c->rhead;
		c->rhead = 0;
	}
	*p = c->rbuf + c->rtail;
	*len = NBD_CONN_RBUF - c->rtail;
}

void nbd_conn_received(struct nbd_conn *c, size_t n)
{
	c->rtail += n;
}

static size_t avail(const struct nbd_conn *c)
{
	return c->rtail - c->rhead;
}

/* Make n contiguous bytes available at rbuf + rhead if they were received;
 * n is always far below the buffer size. */
static const uint8_t *need(struct nbd_conn *c, size_t n)
{
	if (avail(c) < n)
		return NULL;
	const uint8_t *p = c->rbuf + c->rhead;
	c->rhead += n;
	return p;
}

static void proto_fail(struct nbd_conn *c, const char *why)
{
	log_warn("connection %u: %s; closing it", c->id, why);
	stat_add(&c->ctx->stats->proto_errors, 1);
	c->state = CONN_DEAD;
}

static uint32_t errno_to_nbd(int rc)
{
	switch (rc) {
	case -ENOSPC: return NBD_ENOSPC;
	case -ENOMEM: return NBD_ENOMEM;
	case -EINVAL: return NBD_EINVAL;
	default: return NBD_EIO;
	}
}

static void reply(struct nbd_conn *c, uint32_t err)
{
	if (err)
		stat_add(&c->ctx->stats->req_errors, 1);
	nbd_reply_build(send_take(c, NBD_REPLY_LEN), err, c->req.cookie);
}

/* Option data is complete (or was discarded: data NULL). */
static bool opt_finish(struct nbd_conn *c, const uint8_t *data)
{
	size_t n;
	enum nbd_opt_action act;

	if (send_room(c) < NBD_OPT_REPLY_MAX)
		return false;
	act = nbd_opt_handle(c->ctx->exp, c->no_zeroes, c->opt, data,
			     c->opt_len, c->sbuf[c->sfill] + c->slen[c->sfill],
			     send_room(c), &n);
	c->slen[c->sfill] += n;
	switch (act) {
	case NBD_OPT_CONTINUE:
		c->state = CONN_OPT_HDR;
		break;
	case NBD_OPT_TRANSMIT:
		log_info("connection %u: transmission started", c->id);
		c->transmitting = true;
		c->state = CONN_REQ_HDR;
		break;
	case NBD_OPT_CLOSE:
		if (c->opt != NBD_OPT_ABORT)
			log_info("connection %u: option %u ends negotiation "
				 "(unknown export or over-long name)", c->id,
				 c->opt);
		c->state = CONN_CLOSING;
		break;
	}
	return true;
}

/* A request header arrived and was checked: start serving it. */
static void req_start(struct nbd_conn *c)
{
	const struct nbd_req *r = &c->req;
	struct nbd_backend *be = c->ctx->be;
	struct nbd_stats *st = c->ctx->stats;
	int rc = 0;

	if (c->err) {
		char nb[16];
		log_debug("connection %u: %s off %llu len %u flags %#x: error %u",
			  c->id, nbd_cmd_name(r->type, nb, sizeof(nb)),
			  (unsigned long long)r->offset, r->len, r->flags,
			  c->err);
	}
	switch (r->type) {
	case NBD_CMD_DISC:
		log_info("connection %u: client disconnected", c->id);
		c->state = CONN_CLOSING;
		return;
	case NBD_CMD_WRITE:
		c->left = r->len;
		c->cur = r->offset;
		c->state = c->err ? CONN_WRITE_DISCARD : CONN_WRITE_DATA;
		if (!c->err) {
			stat_add(&st->writes, 1);
			stat_add(&st->write_sizes[nbd_size_bucket(r->len)], 1);
		}
		return;
	case NBD_CMD_READ:
		if (c->err) {
			reply(c, c->err);
			return;
		}
		stat_add(&st->reads, 1);
		stat_add(&st->read_sizes[nbd_size_bucket(r->len)], 1);
		c->direct_off = false;
		c->left = r->len;
		c->cur = r->offset;
		c->read_seen = r->offset;
		/* The header waits for the first piece of data (read_step):
		 * until the backend has read it, the answer may still be an
		 * error, and a simple reply cannot take back a success. */
		c->read_hdr = r->len != 0;
		if (c->left)
			c->state = CONN_READ_DATA;
		else
			reply(c, 0);
		return;
	case NBD_CMD_FLUSH:
		if (!c->err) {
			rc = be->ops->flush(be->priv);
			stat_add(&st->flushes, 1);
		}
		break;
	case NBD_CMD_TRIM:
		if (!c->err && r->len) {
			rc = be->ops->trim(be->priv, r->offset, r->len);
			stat_add(&st->trims, 1);
			stat_add(&st->trim_sizes[nbd_size_bucket(r->len)], 1);
			stat_add(&st->bytes_trimmed, r->len);
		}
		break;
	case NBD_CMD_WRITE_ZEROES:
		if (!c->err && r->len) {
			rc = be->ops->zero(be->priv, r->offset, r->len);
			stat_add(&st->zeroes, 1);
		}
		break;
	default:
		break;
	}
	reply(c, c->err ? c->err : rc ? errno_to_nbd(rc) : 0);
}

/* One step of WRITE payload: apply whole pages as they arrive (a page split
 * by the receive buffer waits for its rest, so the store sees no needless
 * partial-page writes). Returns false when more bytes are needed. */
static bool write_step(struct nbd_conn *c)
{
	size_t take = avail(c);
	if (take >= c->left) {
		take = c->left;
	} else {
		uint64_t end = (c->cur + take) & ~(uint64_t)(PAGE - 1);
		if (end <= c->cur)
			return false;
		take = end - c->cur;
	}
	if (take && c->state == CONN_WRITE_DATA && !c->err) {
		struct nbd_backend *be = c->ctx->be;
		int rc = be->ops->write(be->priv, c->rbuf + c->rhead, c->cur,
					(uint32_t)take);
		if (rc < 0) {
			log_err("connection %u: write at %llu: %s", c->id,
				(unsigned long long)c->cur, strerror(-rc));
			c->err = errno_to_nbd(rc);
		}
		stat_add(&c->ctx->stats->bytes_written, take);
	}
	c->rhead += take;
	c->cur += take;
	c->left -= take;
	if (c->left == 0) {
		reply(c, c->err);
		c->state = CONN_REQ_HDR;
	}
	return true;
}

static bool read_failed(struct nbd_conn *c, int rc)
{
	if (c->read_hdr) {
		/* Nothing of this READ queued yet: answer it with the error
		 * and go on with the next request (a lost page must not take
		 * the client's other pages with it). */
		log_err("connection %u: read at %llu: %s; answered with an "
			"error", c->id, (unsigned long long)c->cur,
			strerror(-rc));
		c->read_hdr = false;
		c->left = 0;
		reply(c, errno_to_nbd(rc));
		c->state = CONN_REQ_HDR;
		return true;
	}
	/* The header already said "success": a simple reply cannot take it
	 * back, the spec's only way out is to disconnect. */
	log_err("connection %u: read at %llu: %s; dropping the connection "
		"(this READ's success header was sent)",
		c->id, (unsigned long long)c->cur, strerror(-rc));
	c->state = CONN_DEAD;
	return false;
}

/* The first piece of this READ's data is in hand: its header goes into
 * the send buffer, before that data (room was kept for it). */
static void read_hdr_queue(struct nbd_conn *c)
{
	if (!c->read_hdr)
		return;
	reply(c, 0);
	c->read_hdr = false;
}

static void read_done(struct nbd_conn *c, size_t n)
{
	stat_add(&c->ctx->stats->bytes_read, n);
	c->cur += n;
	c->left -= n;
	if (c->left == 0)
		c->state = CONN_REQ_HDR;
}

/* One zero-copy step of READ data: the queued replies (this READ's header
 * last) and up to NBD_CONN_DIRECT_PAGES of data in one sendmsg. False:
 * wait for the wire (a send or socket room). */
static bool read_direct(struct nbd_conn *c)
{
	struct nbd_backend *be = c->ctx->be;
	struct iovec iov[1 + NBD_CONN_DIRECT_PAGES];
	size_t q = c->slen[c->sfill], mapped;
	uint32_t take = c->left < (uint64_t)NBD_CONN_DIRECT_PAGES * PAGE
		? (uint32_t)c->left : NBD_CONN_DIRECT_PAGES * PAGE;
	ssize_t r;
	int n;

	/* Replies queued before ours go first: wait until none is on the
	 * wire, then ours follow the rest of them in the same sendmsg. */
	if (c->sbusy || c->want_out)
		return false;
	n = be->ops->read_map(be->priv, c->cur, take, iov + 1,
			      NBD_CONN_DIRECT_PAGES, &mapped, &c->read_seen);
	if (n == -EOPNOTSUPP || n == 0) {
		c->direct_off = true;   /* copy this READ instead */
		return true;
	}
	if (n < 0)
		return read_failed(c, n);
	if (c->read_hdr) {
		/* Mapped: our header joins the queued replies (its room was
		 * kept at CONN_REQ_HDR, nothing was queued since). */
		read_hdr_queue(c);
		q = c->slen[c->sfill];
	}
	iov[0] = (struct iovec){ .iov_base = c->sbuf[c->sfill], .iov_len = q };
	r = c->ctx->send_direct(c, q ? iov : iov + 1,
				(unsigned)n + (q ? 1 : 0));
	be->ops->read_unmap(be->priv);
	if (r == -EAGAIN) {
		c->want_out = true;
		return false;
	}
	if (r < 0) {
		log_warn("connection %u: send: %s", c->id, strerror((int)-r));
		c->state = CONN_DEAD;
		return false;
	}
	if ((size_t)r < q) {
		/* Part of the queued replies went: the rest goes the usual
		 * way (the other buffer is empty: nothing was on the wire). */
		c->sfill ^= 1;
		c->sbusy = true;
		c->soff = (size_t)r;
		return false;
	}
	c->slen[c->sfill] = 0;
	read_done(c, (size_t)r - q);
	return true;
}

/* One step of READ data into the send buffer. False: no room yet. */
static bool read_step(struct nbd_conn *c)
{
	if (c->ctx->send_direct && c->ctx->be->ops->read_map &&
	    !c->direct_off && c->req.len >= NBD_CONN_DIRECT_MIN)
		return read_direct(c);
	size_t hdr = c->read_hdr ? NBD_REPLY_LEN : 0;
	size_t room = send_room(c) - hdr;   /* CONN_REQ_HDR kept hdr free */
	size_t take = c->left < room ? c->left : room;
	if (take < c->left) {
		take &= ~(size_t)(PAGE - 1);
		if (take == 0)
			return false;
	}
	/* The data goes after the place of the header, which is written
	 * only once the backend read worked: on failure nothing of this
	 * READ is left in the buffer and it is answered with the error. */
	struct nbd_backend *be = c->ctx->be;
	size_t at = c->slen[c->sfill];
	c->slen[c->sfill] += hdr;
	int rc = be->ops->read(be->priv, send_take(c, take), c->cur,
			       (uint32_t)take);
	c->slen[c->sfill] = at;
	if (rc < 0)
		return read_failed(c, rc);
	read_hdr_queue(c);
	send_take(c, take);
	read_done(c, take);
	return true;
}

static bool step(struct nbd_conn *c)
{
	const uint8_t *p;

	switch (c->state) {
	case CONN_CFLAGS:
		if (!(p = need(c, NBD_CLIENT_FLAGS_LEN)))
			return false;
		if (nbd_client_flags_parse(p, &c->no_zeroes) < 0) {
			proto_fail(c, "client sent unknown handshake flags");
			return false;
		}
		c->state = CONN_OPT_HDR;
		return true;
	case CONN_OPT_HDR:
		if (!(p = need(c, NBD_OPT_HDR_LEN)))
			return false;
		if (nbd_opt_hdr_parse(p, &c->opt, &c->opt_len) < 0) {
			proto_fail(c, "bad option magic");
			return false;
		}
		if (c->opt_len > NBD_OPT_DATA_MAX) {
			log_warn("connection %u: option %u of %u bytes is over "
				 "the %u-byte cap; discarding it", c->id,
				 c->opt, c->opt_len, NBD_OPT_DATA_MAX);
			c->left = c->opt_len;
			c->state = CONN_OPT_DISCARD;
		} else {
			c->state = CONN_OPT_DATA;
		}
		return true;
	case CONN_OPT_DATA:
		if (avail(c) < c->opt_len)
			return false;
		if (!opt_finish(c, c->rbuf + c->rhead))
			return false;
		c->rhead += c->opt_len;
		return true;
	case CONN_OPT_DISCARD:
		if (c->left) {
			size_t take = avail(c) < c->left ? avail(c) : c->left;
			c->rhead += take;
			c->left -= take;
			return take > 0;
		}
		return opt_finish(c, NULL);
	case CONN_REQ_HDR:
		/* Stopping, and between requests with nothing received: the
		 * replies queued go out, then the connection closes. */
		if (c->shutting && avail(c) == 0) {
			c->state = CONN_CLOSING;
			return false;
		}
		/* Room for the reply header first, so a request is never
		 * consumed without a place for its answer. */
		if (send_room(c) < NBD_REPLY_LEN || avail(c) < NBD_REQ_LEN)
			return false;
		p = need(c, NBD_REQ_LEN);
		if (nbd_req_parse(p, &c->req) < 0) {
			proto_fail(c, "bad request magic");
			return false;
		}
		c->err = nbd_req_check(&c->req, c->ctx->exp);
		/* a request that arrives while we stop is refused, not
		 * dropped: the client learns it was not done (a WRITE's
		 * payload is read and discarded) */
		if (c->shutting && !c->err && c->req.type != NBD_CMD_DISC)
			c->err = NBD_ESHUTDOWN;
		c->batch++;
		req_start(c);
		return true;
	case CONN_WRITE_DATA:
	case CONN_WRITE_DISCARD:
		if (send_room(c) < NBD_REPLY_LEN)
			return false;
		return write_step(c);
	case CONN_READ_DATA:
		return read_step(c);
	case CONN_CLOSING:
	case CONN_DEAD:
		return false;
	}
	return false;
}

void nbd_conn_process(struct nbd_conn *c)
{
	struct nbd_stats *st = c->ctx->stats;

	c->batch = 0;
	while (step(c))
		;
	if (c->batch) {
		stat_add(&st->depth[nbd_depth_bucket(c->batch)], 1);
		if (c->batch > atomic_load_explicit(&st->depth_max, memory_order_relaxed))
			atomic_store_explicit(&st->depth_max, c->batch, memory_order_relaxed);
	}
}

bool nbd_conn_send_next(struct nbd_conn *c, const uint8_t **p, size_t *len)
{
	if (!c->sbusy) {
		if (c->slen[c->sfill] == 0)
			return false;
		c->sfill ^= 1;
		c->sbusy = true;
		c->soff = 0;
	}
	unsigned s = c->sfill ^ 1;
	*p = c->sbuf[s] + c->soff;
	*len = c->slen[s] - c->soff;
	return true;
}

void nbd_conn_sent(struct nbd_conn *c, size_t n)
{
	unsigned s = c->sfill ^ 1;
	c->soff += n;
	if (c->soff >= c->slen[s]) {
		c->slen[s] = 0;
		c->soff = 0;
		c->sbusy = false;
	}
}

bool nbd_conn_want_writable(const struct nbd_conn *c)
{
	return c->want_out && c->state != CONN_DEAD;
}

void nbd_conn_writable(struct nbd_conn *c)
{
	c->want_out = false;
}

bool nbd_conn_dead(const struct nbd_conn *c)
{
	return c->state == CONN_DEAD;
}

bool nbd_conn_closing(const struct nbd_conn *c)
{
	return c->state == CONN_CLOSING;
}

bool nbd_conn_send_idle(const struct nbd_conn *c)
{
	return !c->sbusy && c->slen[c->sfill] == 0;
}
