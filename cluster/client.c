/* client.c - requests to one nvcached, one at a time or a few pipelined on
 * the connection; see client.h. */
#include "cluster/client.h"

#include "cluster/auth.h"
#include "cluster/batch.h"
#include "cluster/conn.h"
#include "common/clock.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

struct cluster_client {
	struct conn c;
	bool broken;
	uint64_t owner;
	uint32_t self_node;
	uint64_t incarnation;   /* ours: the open time */
	struct auth_peer peer;
	uint64_t next_id;
	struct frame_hdr req, rep;
	/* Requests sent whose replies are not taken yet, oldest first (the
	 * node answers one connection's requests in order). */
	struct pending {
		uint64_t id, key, version;
		uint32_t type, kind;
	} q[CLUSTER_CLIENT_MAX_INFLIGHT];
	unsigned qhead, qn;
	uint8_t batch_req[FRAME_BATCH_MAX * FRAME_OW_ENTRY];
	char last_error[FRAME_MAX_TEXT + 64];
};



int cluster_client_open(struct cluster_client **out,
			const struct cluster_client_opts *o, char *err,
			size_t errlen)
{
	struct cluster_client *c = calloc(1, sizeof(*c));
	const char *why = "";
	int rc;

	if (!c)
		return -ENOMEM;
	c->owner = o->owner;
	c->self_node = o->self_node;
	c->incarnation = clock_wall_ns();
	int tmo = o->timeout_ms > 0 ? o->timeout_ms : 5000;
	rc = conn_connect(&c->c, o->host, o->port, tmo);
	if (rc) {
		snprintf(err, errlen, "%s:%u: %s", o->host, o->port, strerror(-rc));
		free(c);
		return rc;
	}
	struct auth_identity me = { o->self_node, c->incarnation, o->secret,
				    o->secret_len };
	rc = auth_client(&c->c, &me, &c->peer, &why);
	if (rc) {
		snprintf(err, errlen, "%s:%u: %s", o->host, o->port,
			 why && *why ? why : strerror(-rc));
		conn_close(&c->c);
		free(c);
		return rc;
	}
	c->next_id = 16;
	/* PAGE_FETCH_MANY replies are larger than a page */
	conn_set_max_payload(&c->c, FRAME_MAX_CONN_PAYLOAD);
	*out = c;
	return 0;
}

int cluster_client_open_node(struct cluster_client **out,
			     const struct cluster_config *cfg, uint32_t node_id,
			     uint32_t self_node, uint64_t owner, int timeout_ms,
			     char *err, size_t errlen)
{
	const struct cluster_node *cn = config_node_find(cfg, node_id);

	if (!cn) {
		snprintf(err, errlen, "node %u is not in the cluster file", node_id);
		return -ENOENT;
	}
	struct cluster_client_opts o = {
		.host = cn->host, .port = cn->port, .secret = cfg->secret,
		.secret_len = cfg->secret_len, .self_node = self_node,
		.owner = owner, .timeout_ms = timeout_ms,
	};
	int rc = cluster_client_open(out, &o, err, errlen);
	if (!rc && cluster_client_node(*out) != node_id) {
		snprintf(err, errlen, "%s:%u answers as node %u, not %u", cn->host,
			 cn->port, cluster_client_node(*out), node_id);
		cluster_client_close(*out);
		return -EPROTO;
	}
	return rc;
}

void cluster_client_close(struct cluster_client *c)
{
	if (!c)
		return;
	conn_close(&c->c);
	free(c);
}

void cluster_client_shutdown(struct cluster_client *c)
{
	if (c && c->c.fd >= 0)
		shutdown(c->c.fd, SHUT_RDWR);
}

uint32_t cluster_client_node(const struct cluster_client *c)
{
	return c->peer.node_id;
}

uint64_t cluster_client_incarnation(const struct cluster_client *c)
{
	return c->peer.incarnation;
}

int cluster_client_set_timeout(struct cluster_client *c, int timeout_ms)
{
	return timeout_ms > 0 ? conn_set_timeout(&c->c, timeout_ms) : -EINVAL;
}

bool cluster_client_hung_up(const struct cluster_client *c)
{
	struct pollfd p = { .fd = c->c.fd, .events = POLLIN | POLLRDHUP };

	if (c->broken || c->qn)
		return c->broken;
	/* idle, nothing is owed to us: anything to read is the end */
	return poll(&p, 1, 0) != 0;
}

const char *cluster_client_last_error(const struct cluster_client *c)
{
	return c->last_error;
}

/* Start a request in c->req. */
static struct frame_hdr *req_init(struct cluster_client *c, uint32_t type)
{
	struct frame_hdr *q = &c->req;

	memset(q, 0, sizeof(*q));
	q->type = type;
	q->request_id = c->next_id++;
	q->node_id = c->self_node;
	q->incarnation = c->incarnation;
	q->owner = c->owner;
	return q;
}

/* The stream cannot be trusted any more: the handle is broken for good. */
static int fail_transport(struct cluster_client *c, int rc)
{
	c->broken = true;
	c->qn = 0;      /* no reply will come */
	conn_close(&c->c);
	return rc;
}

/* Send c->req (+ payload in npl pieces) and queue it for its reply;
 * more: another request follows at once (MSG_MORE). */
static int send_req_iov(struct cluster_client *c, const struct iovec *pl, unsigned npl,
			bool more)
{
	c->last_error[0] = 0;
	if (c->broken)
		return -ENOTCONN;
	if (c->qn == CLUSTER_CLIENT_MAX_INFLIGHT)
		return -EBUSY;
	int rc = conn_sendv_more(&c->c, &c->req, pl, npl, more);
	if (rc)
		return fail_transport(c, rc);
	struct pending *p = &c->q[(c->qhead + c->qn++) % CLUSTER_CLIENT_MAX_INFLIGHT];
	p->id = c->req.request_id;
	p->type = c->req.type;
	p->kind = c->req.kind;
	p->key = c->req.kind == FK_PARITY ? c->req.parity_group : c->req.page_id;
	p->version = c->req.version;
	return 0;
}

static int send_req(struct cluster_client *c, const void *payload)
{
	struct iovec iov = { .iov_base = (void *)payload, .iov_len = c->req.payload_len };

	return send_req_iov(c, &iov, c->req.payload_len ? 1 : 0, false);
}

/* Receive the reply to the oldest request in flight into c->rep, *p gets
 * that request. Returns the reply's status as -errno, with *payload_out
 * set when it carries one. */
static int recv_rep_into(struct cluster_client *c, void *dst, size_t dstlen,
			 const uint8_t **payload_out, struct pending *p);

static int recv_rep(struct cluster_client *c, const uint8_t **payload_out,
		    struct pending *p)
{
	return recv_rep_into(c, NULL, 0, payload_out, p);
}

/* The same, a payload of at most dstlen bytes read straight into dst
 * (conn_recv_into). */
static int recv_rep_into(struct cluster_client *c, void *dst, size_t dstlen,
			 const uint8_t **payload_out, struct pending *p)
{
	const char *why = "";
	int rc;

	if (c->broken)
		return -ENOTCONN;
	if (!c->qn)
		return -EINVAL;         /* nothing in flight: our caller's bug */
	*p = c->q[c->qhead];
	c->qhead = (c->qhead + 1) % CLUSTER_CLIENT_MAX_INFLIGHT;
	c->qn--;
	rc = conn_recv_into(&c->c, &c->rep, dst, dstlen, payload_out, &why);
	if (!rc && c->rep.type == FT_ERROR) {
		snprintf(c->last_error, sizeof(c->last_error), "%s: %s",
			 frame_status_name(c->rep.status), c->rep.text);
		rc = -EPROTO;
	} else if (!rc && (!c->rep.reply || c->rep.type != p->type ||
			   c->rep.request_id != p->id)) {
		snprintf(c->last_error, sizeof(c->last_error),
			 "reply does not match the request");
		rc = -EPROTO;
	} else if (rc && why && *why) {
		snprintf(c->last_error, sizeof(c->last_error), "%s", why);
	}
	if (rc)
		return fail_transport(c, rc);
	if (c->rep.status != FS_OK)
		snprintf(c->last_error, sizeof(c->last_error), "%s%s%s",
			 frame_status_name(c->rep.status), c->rep.text[0] ? ": " : "",
			 c->rep.text);
	return frame_status_errno(c->rep.status);
}

/* One request, one reply; nothing else may be in flight on c. */
static int roundtrip(struct cluster_client *c, const void *payload,
		     const uint8_t **payload_out)
{
	struct pending p;

	if (!c->broken && c->qn)
		return -EBUSY;
	int rc = send_req(c, payload);
	return rc ? rc : recv_rep(c, payload_out, &p);
}

unsigned cluster_client_pending(const struct cluster_client *c)
{
	return c->qn;
}

int cluster_client_page_store_start(struct cluster_client *c, uint64_t page_id,
				    uint64_t version, const void *page)
{
	struct frame_hdr *q = req_init(c, FT_PAGE_STORE);

	q->page_id = page_id;
	q->version = version;
	q->payload_len = FRAME_PAGE_SIZE;
	return send_req(c, page);
}

int cluster_client_wait(struct cluster_client *c)
{
	struct pending p;

	if (!c->broken && c->qn && (c->q[c->qhead].type == FT_PAGE_FETCH ||
				    c->q[c->qhead].type == FT_PAGE_FETCH_MANY ||
				    c->q[c->qhead].type == FT_PAGE_STORE_MANY ||
				    c->q[c->qhead].type == FT_PARITY_UPDATE_MANY ||
				    c->q[c->qhead].type == FT_PAGE_OVERWRITE_MANY ||
				    c->q[c->qhead].type == FT_PAGE_DROP_MANY))
		return -EINVAL; /* its results need their own wait */
	return recv_rep(c, NULL, &p);
}

int cluster_client_page_store(struct cluster_client *c, uint64_t page_id,
			      uint64_t version, const void *page)
{
	struct frame_hdr *q = req_init(c, FT_PAGE_STORE);

	q->page_id = page_id;
	q->version = version;
	q->payload_len = FRAME_PAGE_SIZE;
	return roundtrip(c, page, NULL);
}

static struct frame_hdr *overwrite_init(struct cluster_client *c, uint64_t page_id,
					 uint64_t version, uint64_t old_version,
					 uint32_t parity_node, uint64_t group,
					 uint64_t parity_version)
{
	struct frame_hdr *q = req_init(c, FT_PAGE_OVERWRITE);

	q->page_id = page_id;
	q->version = version;
	q->old_version = old_version;
	q->peer_node = parity_node;
	q->parity_group = group;
	q->parity_version = parity_version;
	q->payload_len = FRAME_PAGE_SIZE;
	return q;
}

int cluster_client_page_overwrite(struct cluster_client *c, uint64_t page_id,
				  uint64_t version, uint64_t old_version,
				  uint32_t parity_node, uint64_t group,
				  uint64_t parity_version, const void *page)
{
	overwrite_init(c, page_id, version, old_version, parity_node, group,
		       parity_version);
	return roundtrip(c, page, NULL);
}

int cluster_client_page_overwrite_start(struct cluster_client *c, uint64_t page_id,
					uint64_t version, uint64_t old_version,
					uint32_t parity_node, uint64_t group,
					uint64_t parity_version, const void *page)
{
	overwrite_init(c, page_id, version, old_version, parity_node, group,
		       parity_version);
	return send_req(c, page);
}

void cluster_client_set_owner(struct cluster_client *c, uint64_t owner)
{
	c->owner = owner;
}

int cluster_client_owner_reset(struct cluster_client *c)
{
	req_init(c, FT_OWNER_RESET);
	return roundtrip(c, NULL, NULL);
}

int cluster_client_page_migrate(struct cluster_client *c, uint64_t page_id,
				uint64_t version, uint32_t from_node,
				const void *page)
{
	struct frame_hdr *q = req_init(c, FT_MIGRATE);

	q->page_id = page_id;
	q->version = version;
	q->peer_node = from_node;
	q->payload_len = FRAME_PAGE_SIZE;
	return roundtrip(c, page, NULL);
}

static int fetch_start(struct cluster_client *c, uint32_t kind, uint64_t id,
		       uint64_t version)
{
	struct frame_hdr *q = req_init(c, FT_PAGE_FETCH);

	q->kind = kind;
	if (kind == FK_PARITY)
		q->parity_group = id;
	else
		q->page_id = id;
	q->version = version;
	return send_req(c, NULL);
}

int cluster_client_page_fetch_start(struct cluster_client *c, uint64_t page_id,
				    uint64_t version)
{
	return fetch_start(c, FK_DATA, page_id, version);
}

int cluster_client_parity_fetch_start(struct cluster_client *c, uint64_t group)
{
	return fetch_start(c, FK_PARITY, group, 0);
}

/* The reply to a fetch: it must be about the page we asked for, in the
 * version we asked for, and carry exactly one page (the decoder checked
 * the size against the type; we check again before copying). */
int cluster_client_wait_fetch(struct cluster_client *c, void *page,
			      uint64_t *version_out)
{
	const uint8_t *pl = NULL;
	struct pending p;

	if (!c->broken && (!c->qn || c->q[c->qhead].type != FT_PAGE_FETCH))
		return -EINVAL;
	int rc = recv_rep(c, &pl, &p);
	if (c->broken)
		return rc;      /* no reply: nothing to check */
	uint64_t key = p.kind == FK_PARITY ? c->rep.parity_group : c->rep.page_id;
	const char *bad = NULL;
	if (c->rep.kind != p.kind || key != p.key)
		bad = "fetch reply about another page";
	else if (!rc && (c->rep.payload_len != FRAME_PAGE_SIZE || !pl))
		bad = "fetch reply without a whole page";
	else if (!rc && p.version && c->rep.version != p.version)
		bad = "fetch reply with another version";
	if (bad) {
		snprintf(c->last_error, sizeof(c->last_error), "%s", bad);
		return fail_transport(c, -EPROTO);
	}
	if (version_out && (rc == 0 || rc == -ESTALE))
		*version_out = c->rep.version;
	if (rc == 0)
		memcpy(page, pl, FRAME_PAGE_SIZE);
	return rc;
}

/* Send a batch request of n entries (payload in npl pieces, len bytes)
 * and remember n, which its wait must name. */
static int send_batch(struct cluster_client *c, uint32_t type, unsigned n,
		      const struct iovec *pl, unsigned npl, uint32_t len)
{
	struct frame_hdr *q = req_init(c, type);

	q->payload_len = len;
	int rc = send_req_iov(c, pl, npl, false);
	if (!rc)
		c->q[(c->qhead + c->qn - 1) % CLUSTER_CLIENT_MAX_INFLIGHT].key = n;
	return rc;
}

/* The reply to the oldest request, which must be a batch of this type
 * and n entries (-EINVAL, nothing taken, otherwise). */
static bool batch_next(const struct cluster_client *c, uint32_t type, unsigned n)
{
	return c->broken || (c->qn && c->q[c->qhead].type == type &&
			     c->q[c->qhead].key == n);
}

static int recv_batch(struct cluster_client *c, uint32_t type, unsigned n,
		      const uint8_t **pl)
{
	struct pending p;

	if (!batch_next(c, type, n))
		return -EINVAL;
	return recv_rep(c, pl, &p);
}

/* A batch request of entries only (PAGE_FETCH_MANY, PAGE_DROP_MANY). */
static int entries_send(struct cluster_client *c, uint32_t type,
			const struct batch_entry *e, unsigned n)
{
	batch_request_put(c->batch_req, e, n);
	struct iovec iov = { .iov_base = c->batch_req, .iov_len = batch_request_len(n) };
	return send_batch(c, type, n, &iov, 1, iov.iov_len);
}

int cluster_client_fetch_many_start(struct cluster_client *c,
				    const struct cluster_fetch *f, unsigned n)
{
	struct batch_entry e[FRAME_BATCH_MAX];

	if (n == 0 || n > FRAME_BATCH_MAX)
		return -EINVAL;
	for (unsigned k = 0; k < n; k++) {
		if (f[k].kind >= FK_COUNT)
			return -EINVAL;
		e[k] = (struct batch_entry){ .key = f[k].key, .version = f[k].version,
					     .kind = f[k].kind };
	}
	return entries_send(c, FT_PAGE_FETCH_MANY, e, n);
}

int cluster_client_wait_fetch_many(struct cluster_client *c,
				   struct cluster_fetch *f, unsigned n)
{
	const uint8_t *pl = NULL;
	int rc = recv_batch(c, FT_PAGE_FETCH_MANY, n, &pl);
	if (c->broken || rc)
		return rc;
	/* Check every result before taking any page: a reply that does not
	 * answer our request means the stream is out of step. */
	const char *bad = NULL;
	for (unsigned k = 0; k < n && !bad; k++) {
		struct batch_entry r;
		const uint8_t *pg;
		if (batch_result_get(pl, c->rep.payload_len, n, k, &r, &pg, &bad))
			break;
		if (r.key != f[k].key || r.kind != f[k].kind)
			bad = "fetch-many reply about another page";
		else if (r.status == FS_OK && f[k].version && r.version != f[k].version)
			bad = "fetch-many reply with another version";
	}
	if (bad) {
		snprintf(c->last_error, sizeof(c->last_error), "%s", bad);
		return fail_transport(c, -EPROTO);
	}
	for (unsigned k = 0; k < n; k++) {
		struct batch_entry r;
		const uint8_t *pg;
		(void)batch_result_get(pl, c->rep.payload_len, n, k, &r, &pg, &bad);
		f[k].rc = frame_status_errno(r.status);
		f[k].version_out = r.version;
		if (!f[k].rc)
			memcpy(f[k].page, pg, FRAME_PAGE_SIZE);
	}
	return 0;
}

/* PAGE_STORE_MANY or PARITY_UPDATE_MANY (the same payloads). */
static int store_many_start(struct cluster_client *c, uint32_t type,
			    const struct cluster_store *s, unsigned n)
{
	struct batch_entry e[FRAME_BATCH_MAX];
	struct iovec iov[FRAME_BATCH_MAX + 1];

	if (n == 0 || n > FRAME_BATCH_MAX)
		return -EINVAL;
	for (unsigned k = 0; k < n; k++) {
		if (s[k].kind >= FK_COUNT || !s[k].page ||
		    (type == FT_PARITY_UPDATE_MANY && s[k].kind != FK_PARITY))
			return -EINVAL;
		e[k] = (struct batch_entry){ .key = s[k].key, .version = s[k].version,
					     .kind = s[k].kind };
		/* the pages go from where they are: no copy */
		iov[k + 1] = (struct iovec){ .iov_base = (void *)s[k].page,
					     .iov_len = FRAME_PAGE_SIZE };
	}
	/* the entries in the buffer fetch-many requests use */
	batch_request_put(c->batch_req, e, n);
	iov[0] = (struct iovec){ .iov_base = c->batch_req, .iov_len = batch_request_len(n) };
	return send_batch(c, type, n, iov, n + 1, batch_store_len(n));
}

/* Its reply: n results, each about the entry asked (key, kind and
 * version), their statuses as errnos into rcs. A result about
 * something else breaks the handle (-EPROTO). */
static int results_take(struct cluster_client *c, uint32_t type, unsigned n,
			const struct batch_entry *asked, int *rcs)
{
	const uint8_t *pl = NULL;
	struct batch_entry r[FRAME_BATCH_MAX];
	int rc = recv_batch(c, type, n, &pl);
	if (c->broken || rc)
		return rc;
	const char *bad = NULL;
	for (unsigned k = 0; k < n && !bad; k++) {
		if (batch_store_result_get(pl, c->rep.payload_len, n, k, &r[k], &bad))
			break;
		if (r[k].key != asked[k].key || r[k].kind != asked[k].kind ||
		    r[k].version != asked[k].version)
			bad = "batch reply about another page";
	}
	if (bad) {
		snprintf(c->last_error, sizeof(c->last_error), "%s", bad);
		return fail_transport(c, -EPROTO);
	}
	for (unsigned k = 0; k < n; k++)
		rcs[k] = frame_status_errno(r[k].status);
	return 0;
}

static int store_many_wait(struct cluster_client *c, uint32_t type,
			   struct cluster_store *s, unsigned n)
{
	struct batch_entry asked[FRAME_BATCH_MAX] = { { 0 } };
	int rcs[FRAME_BATCH_MAX];

	if (n == 0 || n > FRAME_BATCH_MAX || !batch_next(c, type, n))
		return -EINVAL;
	for (unsigned k = 0; k < n; k++)
		asked[k] = (struct batch_entry){ .key = s[k].key, .version = s[k].version,
						 .kind = s[k].kind };
	int rc = results_take(c, type, n, asked, rcs);
	for (unsigned k = 0; !rc && k < n; k++)
		s[k].rc = rcs[k];
	return rc;
}

int cluster_client_store_many_start(struct cluster_client *c,
				    const struct cluster_store *s, unsigned n)
{
	return store_many_start(c, FT_PAGE_STORE_MANY, s, n);
}

int cluster_client_wait_store_many(struct cluster_client *c,
				   struct cluster_store *s, unsigned n)
{
	return store_many_wait(c, FT_PAGE_STORE_MANY, s, n);
}

int cluster_client_parity_update_many_start(struct cluster_client *c,
					    const struct cluster_store *s, unsigned n)
{
	return store_many_start(c, FT_PARITY_UPDATE_MANY, s, n);
}

int cluster_client_wait_parity_update_many(struct cluster_client *c,
					   struct cluster_store *s, unsigned n)
{
	return store_many_wait(c, FT_PARITY_UPDATE_MANY, s, n);
}

int cluster_client_drop_many_start(struct cluster_client *c,
				   const struct cluster_store *s, unsigned n)
{
	struct batch_entry e[FRAME_BATCH_MAX];

	if (n == 0 || n > FRAME_BATCH_MAX)
		return -EINVAL;
	for (unsigned k = 0; k < n; k++) {
		if (s[k].kind >= FK_COUNT)
			return -EINVAL;
		e[k] = (struct batch_entry){ .key = s[k].key, .version = s[k].version,
					     .kind = s[k].kind };
	}
	return entries_send(c, FT_PAGE_DROP_MANY, e, n);
}

int cluster_client_wait_drop_many(struct cluster_client *c, struct cluster_store *s,
				  unsigned n)
{
	return store_many_wait(c, FT_PAGE_DROP_MANY, s, n);
}

int cluster_client_overwrite_many_start(struct cluster_client *c,
					const struct cluster_overwrite *o, unsigned n)
{
	struct batch_ow e[FRAME_BATCH_MAX];
	struct iovec iov[FRAME_BATCH_MAX + 1];

	if (n == 0 || n > FRAME_BATCH_MAX)
		return -EINVAL;
	for (unsigned k = 0; k < n; k++) {
		if (!o[k].page || o[k].parity_node > FRAME_MAX_NODE_ID)
			return -EINVAL;
		e[k] = (struct batch_ow){ o[k].page_id, o[k].version, o[k].old_version,
					  o[k].group, o[k].parity_version,
					  o[k].parity_node };
		iov[k + 1] = (struct iovec){ .iov_base = (void *)o[k].page,
					     .iov_len = FRAME_PAGE_SIZE };
	}
	batch_ow_put(c->batch_req, e, n);
	iov[0] = (struct iovec){ .iov_base = c->batch_req,
				 .iov_len = (size_t)n * FRAME_OW_ENTRY };
	return send_batch(c, FT_PAGE_OVERWRITE_MANY, n, iov, n + 1, batch_ow_len(n));
}

int cluster_client_wait_overwrite_many(struct cluster_client *c,
				       struct cluster_overwrite *o, unsigned n)
{
	struct batch_entry asked[FRAME_BATCH_MAX] = { { 0 } };
	int rcs[FRAME_BATCH_MAX];

	if (n == 0 || n > FRAME_BATCH_MAX || !batch_next(c, FT_PAGE_OVERWRITE_MANY, n))
		return -EINVAL;
	for (unsigned k = 0; k < n; k++)
		asked[k] = (struct batch_entry){ .key = o[k].page_id,
						 .version = o[k].version, .kind = FK_DATA };
	int rc = results_take(c, FT_PAGE_OVERWRITE_MANY, n, asked, rcs);
	for (unsigned k = 0; !rc && k < n; k++)
		o[k].rc = rcs[k];
	return rc;
}

static int fetch(struct cluster_client *c, uint32_t kind, uint64_t id,
		 uint64_t version, void *page, uint64_t *version_out)
{
	if (!c->broken && c->qn)
		return -EBUSY;
	int rc = fetch_start(c, kind, id, version);
	return rc ? rc : cluster_client_wait_fetch(c, page, version_out);
}

int cluster_client_page_fetch(struct cluster_client *c, uint64_t page_id,
			      uint64_t version, void *page, uint64_t *version_out)
{
	return fetch(c, FK_DATA, page_id, version, page, version_out);
}

static int drop(struct cluster_client *c, uint32_t kind, uint64_t id,
		uint64_t version)
{
	struct frame_hdr *q = req_init(c, FT_PAGE_DROP);

	q->kind = kind;
	if (kind == FK_PARITY)
		q->parity_group = id;
	else
		q->page_id = id;
	q->version = version;
	return roundtrip(c, NULL, NULL);
}

int cluster_client_page_drop(struct cluster_client *c, uint64_t page_id,
			     uint64_t version)
{
	return drop(c, FK_DATA, page_id, version);
}

static void parity_update_init(struct cluster_client *c, uint64_t group,
			       uint64_t version)
{
	struct frame_hdr *q = req_init(c, FT_PARITY_UPDATE);

	q->kind = FK_PARITY;
	q->parity_group = group;
	q->version = version;
	q->payload_len = FRAME_PAGE_SIZE;
}

int cluster_client_parity_update(struct cluster_client *c, uint64_t group,
				 uint64_t version, const void *delta)
{
	parity_update_init(c, group, version);
	return roundtrip(c, delta, NULL);
}

int cluster_client_parity_update_start(struct cluster_client *c, uint64_t group,
				       uint64_t version, const void *delta)
{
	parity_update_init(c, group, version);
	return send_req(c, delta);
}

int cluster_client_parity_store(struct cluster_client *c, uint64_t group,
				uint64_t version, const void *page)
{
	struct frame_hdr *q = req_init(c, FT_PAGE_STORE);

	q->kind = FK_PARITY;
	q->parity_group = group;
	q->version = version;
	q->payload_len = FRAME_PAGE_SIZE;
	return roundtrip(c, page, NULL);
}

int cluster_client_parity_fetch(struct cluster_client *c, uint64_t group,
				void *page, uint64_t *version_out)
{
	return fetch(c, FK_PARITY, group, 0, page, version_out);
}

int cluster_client_parity_drop(struct cluster_client *c, uint64_t group,
			       uint64_t version)
{
	return drop(c, FK_PARITY, group, version);
}

int cluster_client_node_table(struct cluster_client *c, struct frame_node *out,
			      unsigned max, unsigned *n)
{
	req_init(c, FT_NODE_TABLE);
	int rc = roundtrip(c, NULL, NULL);
	if (rc)
		return rc;
	unsigned k = c->rep.n_nodes < max ? c->rep.n_nodes : max;
	memcpy(out, c->rep.nodes, k * sizeof(*out));
	*n = k;
	return 0;
}

/* Text we print: printable ASCII, newlines and tabs (no NUL, no escape
 * sequences a hostile node could send to the operator's terminal). */
static bool stats_text_ok(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((p[i] < 0x20 || p[i] > 0x7e) && p[i] != '\n' && p[i] != '\t')
			return false;
	return true;
}

int cluster_client_node_stats(struct cluster_client *c, char *out,
			      size_t outlen, size_t *len)
{
	uint64_t off = 0, total = 0;

	if (!outlen)
		return -EINVAL;
	do {
		struct frame_hdr *q = req_init(c, FT_NODE_STATS);
		const uint8_t *pl = NULL;
		q->page_id = off;
		int rc = roundtrip(c, NULL, &pl);
		if (rc)
			return rc;
		/* The decoder checked version <= FRAME_MAX_STATS and that the
		 * chunk lies within it; the rest is ours to check. */
		const char *bad = NULL;
		if (c->rep.page_id != off)
			bad = "stats chunk at the wrong offset";
		else if (off && c->rep.version != total)
			bad = "stats text changed length between chunks";
		else if (!c->rep.payload_len && c->rep.version != off)
			bad = "empty stats chunk before the end";
		else if (c->rep.payload_len && !stats_text_ok(pl, c->rep.payload_len))
			bad = "stats text with non-printable bytes";
		if (bad) {
			snprintf(c->last_error, sizeof(c->last_error), "%s", bad);
			return fail_transport(c, -EPROTO);
		}
		total = c->rep.version;
		if (total >= outlen)
			return -EMSGSIZE;
		if (c->rep.payload_len)
			memcpy(out + off, pl, c->rep.payload_len);
		off += c->rep.payload_len;
	} while (off < total);
	out[total] = 0;
	*len = (size_t)total;
	return 0;
}

int cluster_client_lock(struct cluster_client *c, const struct frame_lock *lk,
			struct frame_lock *holder)
{
	struct frame_hdr *q = req_init(c, FT_FILE_LOCK);
	q->lk = *lk;
	int rc = roundtrip(c, NULL, NULL);
	if (c->broken)
		return rc;
	/* the reply speaks of the request's file and class */
	if (c->rep.lk.obj != lk->obj || c->rep.lk.cls != lk->cls) {
		snprintf(c->last_error, sizeof(c->last_error),
			 "FILE_LOCK reply about another file");
		return fail_transport(c, -EPROTO);
	}
	if (holder)
		*holder = c->rep.lk;
	return rc;
}

int cluster_client_file_start(struct cluster_client *c, uint32_t type,
			      const struct frame_fop *f, const struct iovec *pl,
			      unsigned npl, bool more)
{
	size_t plen = 0;

	if (!frame_type_file(type))
		return -EINVAL;
	for (unsigned k = 0; k < npl; k++)
		plen += pl[k].iov_len;
	struct frame_hdr *q = req_init(c, type);
	q->fop = *f;
	q->payload_len = (uint32_t)plen;
	return send_req_iov(c, pl, npl, more);
}

int cluster_client_file_wait(struct cluster_client *c, struct frame_fop *rf,
			     void *buf, size_t buflen)
{
	const uint8_t *payload = NULL;
	struct pending p = { 0 };

	if (!c->broken && (!c->qn || !frame_type_file(c->q[c->qhead].type)))
		return -EINVAL;
	/* a FILE_READ's bytes straight into buf */
	int rc = recv_rep_into(c, buf, buflen, &payload, &p);
	if (c->broken)
		return rc;      /* transport error: nothing came back */
	if (c->rep.payload_len > buflen) {
		snprintf(c->last_error, sizeof(c->last_error),
			 "%s reply of %u bytes, %zu asked for", frame_type_name(p.type),
			 c->rep.payload_len, buflen);
		return fail_transport(c, -EPROTO);
	}
	if (c->rep.payload_len && payload != buf)
		memcpy(buf, payload, c->rep.payload_len);
	if (rf)
		*rf = c->rep.fop;
	return rc;
}

int cluster_client_file_call(struct cluster_client *c, uint32_t type,
			     const struct frame_fop *f, const struct iovec *pl,
			     unsigned npl, struct frame_fop *rf, void *buf,
			     size_t buflen)
{
	if (!c->broken && c->qn)
		return -EBUSY;
	int rc = cluster_client_file_start(c, type, f, pl, npl, false);
	return rc ? rc : cluster_client_file_wait(c, rf, buf, buflen);
}
