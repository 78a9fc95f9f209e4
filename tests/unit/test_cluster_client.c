/* test_cluster_client.c - the client library against real nodes started in
 * this process on 127.0.0.1 (node.h, the code nvcached runs): pages round
 * trip bit-exact, version rules, parity XOR, the node table, capacity
 * limits, a wrong secret, a forged proof, and bad frames after the
 * handshake (error reply, connection closed, the node keeps serving); the
 * node's counters over the wire (NODE_STATS), and the client's checks of
 * them against a fake node that sends chunks that do not add up; requests
 * in flight several at once, and fetch replies checked against their
 * requests (a fake node that answers about another page or version);
 * file locks at their home node (FILE_LOCK): a conflict names its holder,
 * an F_SETLKW answered "in progress" until the holder unlocks, a second
 * session on one connection refused, and a mount's locks released when
 * its connection ends; and a mount's side of them (fs/locks.h): two
 * mounts, fcntl and flock, an F_SETLKW that waits in a thread until the
 * other mount unlocks, one interrupted, and a mount that goes away; the
 * TCP congestion control of connections, both ends (conn_set_congestion). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "cluster/auth.h"
#include "cluster/batch.h"
#include "cluster/client.h"
#include "cluster/conn.h"
#include "cluster/node.h"
#include "common/log.h"
#include "fs/locks.h"
#include <sys/file.h>

#define NNODES 2

static struct cluster_config cfg;
static struct node *nodes[NNODES];
static char ctlbuf[65536];

static int listen_any(uint16_t *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 64), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

static int setup(void **state)
{
	char text[512];
	int fds[NNODES];
	uint16_t ports[NNODES];
	char err[256];
	(void)state;

	log_init("test_cluster_client", LOG_LVL_WARN);
	for (int i = 0; i < NNODES; i++)
		fds[i] = listen_any(&ports[i]);
	snprintf(text, sizeof(text),
		 "secret s\nnode 1 127.0.0.1:%u mem=64M\nnode 2 127.0.0.1:%u\n",
		 ports[0], ports[1]);
	assert_int_equal(config_parse_text(text, "test", &cfg, err, sizeof(err)), 0);
	memcpy(cfg.secret, "unit-test-secret-0123456789", 27);
	cfg.secret_len = 27;
	for (int i = 0; i < NNODES; i++) {
		struct node_opts o = {
			.cfg = &cfg, .self = (uint32_t)i + 1, .heartbeat_ms = 50,
			.timeout_ms = 400, .listen_fd = fds[i],
		};
		assert_int_equal(node_start(&nodes[i], &o), 0);
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	for (int i = 0; i < NNODES; i++)
		node_stop(nodes[i]);
	return 0;
}

static struct cluster_client *open_client(uint32_t node, uint64_t owner)
{
	struct cluster_client *c = NULL;
	char err[256];
	int rc = cluster_client_open_node(&c, &cfg, node, 0, owner, 3000, err,
					  sizeof(err));
	if (rc)
		fail_msg("open node %u: %s", node, err);
	return c;
}

static void fill(uint8_t *p, uint64_t seed)
{
	for (int i = 0; i < FRAME_PAGE_SIZE; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		p[i] = (uint8_t)(seed >> 56);
	}
}

static void pages_roundtrip_and_versions(void **state)
{
	static uint8_t a[FRAME_PAGE_SIZE], b[FRAME_PAGE_SIZE], got[FRAME_PAGE_SIZE];
	uint64_t v = 0;
	(void)state;

	struct cluster_client *c = open_client(1, 7);
	assert_int_equal(cluster_client_node(c), 1);
	fill(a, 1);
	fill(b, 2);
	for (uint64_t p = 0; p < 64; p++) {
		fill(a, p + 100);
		assert_int_equal(cluster_client_page_store(c, p, 1, a), 0);
	}
	for (uint64_t p = 0; p < 64; p++) {
		fill(a, p + 100);
		assert_int_equal(cluster_client_page_fetch(c, p, 1, got, &v), 0);
		assert_memory_equal(got, a, FRAME_PAGE_SIZE);
		assert_true(v == 1);
	}
	/* newer version overwrites; older is refused and changes nothing */
	assert_int_equal(cluster_client_page_store(c, 5, 3, b), 0);
	assert_int_equal(cluster_client_page_store(c, 5, 2, a), -ESTALE);
	assert_non_null(strstr(cluster_client_last_error(c), "stale"));
	assert_int_equal(cluster_client_page_fetch(c, 5, 3, got, &v), 0);
	assert_memory_equal(got, b, FRAME_PAGE_SIZE);
	/* fetch of a version the node does not hold */
	assert_int_equal(cluster_client_page_fetch(c, 5, 4, got, &v), -ESTALE);
	assert_true(v == 3);
	/* version 0: whatever is there */
	assert_int_equal(cluster_client_page_fetch(c, 5, 0, got, &v), 0);
	assert_int_equal(cluster_client_page_fetch(c, 999, 0, got, NULL), -ENOENT);
	/* a drop about an older version leaves the newer page */
	assert_int_equal(cluster_client_page_drop(c, 5, 2), -ESTALE);
	assert_int_equal(cluster_client_page_drop(c, 5, 3), 0);
	assert_int_equal(cluster_client_page_fetch(c, 5, 0, got, NULL), -ENOENT);
	assert_int_equal(cluster_client_page_drop(c, 5, 3), -ENOENT);

	/* owners are separate name spaces */
	struct cluster_client *c2 = open_client(1, 8);
	assert_int_equal(cluster_client_page_fetch(c2, 6, 0, got, NULL), -ENOENT);
	assert_int_equal(cluster_client_page_store(c2, 6, 1, b), 0);
	fill(a, 6 + 100);
	assert_int_equal(cluster_client_page_fetch(c, 6, 1, got, NULL), 0);
	assert_memory_equal(got, a, FRAME_PAGE_SIZE);

	/* MIGRATE puts a page on another node under the same owner */
	struct cluster_client *m = open_client(2, 7);
	assert_int_equal(cluster_client_page_migrate(m, 6, 1, 1, a), 0);
	assert_int_equal(cluster_client_page_fetch(m, 6, 1, got, NULL), 0);
	assert_memory_equal(got, a, FRAME_PAGE_SIZE);
	assert_int_equal(cluster_client_page_drop(m, 6, 1), 0);
	cluster_client_close(m);

	for (uint64_t p = 0; p < 64; p++)
		cluster_client_page_drop(c, p, 1);
	cluster_client_page_drop(c2, 6, 1);
	cluster_client_close(c);
	cluster_client_close(c2);
}

static void parity_xor(void **state)
{
	static uint8_t d1[FRAME_PAGE_SIZE], d2[FRAME_PAGE_SIZE], x[FRAME_PAGE_SIZE],
		got[FRAME_PAGE_SIZE];
	uint64_t v;
	(void)state;

	struct cluster_client *c = open_client(2, 9);
	fill(d1, 11);
	fill(d2, 12);
	for (int i = 0; i < FRAME_PAGE_SIZE; i++)
		x[i] = d1[i] ^ d2[i];
	assert_int_equal(cluster_client_parity_fetch(c, 42, got, NULL), -ENOENT);
	assert_int_equal(cluster_client_parity_update(c, 42, 1, d1), 0);
	assert_int_equal(cluster_client_parity_fetch(c, 42, got, &v), 0);
	assert_memory_equal(got, d1, FRAME_PAGE_SIZE);
	assert_int_equal(cluster_client_parity_update(c, 42, 2, d2), 0);
	assert_int_equal(cluster_client_parity_fetch(c, 42, got, &v), 0);
	assert_memory_equal(got, x, FRAME_PAGE_SIZE);
	assert_true(v == 2);
	/* parity group 42 and data page 42 are different keys */
	assert_int_equal(cluster_client_page_fetch(c, 42, 0, got, NULL), -ENOENT);
	/* XOR d2 again takes it out */
	assert_int_equal(cluster_client_parity_update(c, 42, 3, d2), 0);
	assert_int_equal(cluster_client_parity_fetch(c, 42, got, &v), 0);
	assert_memory_equal(got, d1, FRAME_PAGE_SIZE);
	assert_int_equal(cluster_client_parity_drop(c, 42, 3), 0);
	assert_int_equal(cluster_client_parity_fetch(c, 42, got, NULL), -ENOENT);
	cluster_client_close(c);
}

static bool both_alive(struct cluster_client *c)
{
	struct frame_node tab[FRAME_MAX_NODES];
	unsigned n = 0;
	int alive = 0;

	assert_int_equal(cluster_client_node_table(c, tab, FRAME_MAX_NODES, &n), 0);
	assert_int_equal(n, NNODES);
	for (unsigned i = 0; i < n; i++)
		if (tab[i].state == FN_ALIVE || tab[i].state == FN_SELF)
			alive++;
	return alive == NNODES;
}

static void node_table_shows_peers(void **state)
{
	(void)state;
	struct cluster_client *c = open_client(1, 1);
	int tries = 0;
	while (!both_alive(c) && tries++ < 100)
		usleep(50000);
	assert_true(both_alive(c));
	struct frame_node tab[FRAME_MAX_NODES];
	unsigned n;
	assert_int_equal(cluster_client_node_table(c, tab, FRAME_MAX_NODES, &n), 0);
	/* node 1 offers at most its mem=64M */
	for (unsigned i = 0; i < n; i++)
		if (tab[i].node_id == 1)
			assert_true(tab[i].cap.offered <= 64ULL << 20);
	cluster_client_close(c);
}

static void capacity_limit(void **state)
{
	static uint8_t a[FRAME_PAGE_SIZE];
	(void)state;

	assert_true(node_ctl(nodes[1], "limit 8K", ctlbuf, sizeof(ctlbuf)) > 0);
	struct cluster_client *c = open_client(2, 33);
	fill(a, 3);
	assert_int_equal(cluster_client_page_store(c, 1, 1, a), 0);
	assert_int_equal(cluster_client_page_store(c, 2, 1, a), 0);
	assert_int_equal(cluster_client_page_store(c, 3, 1, a), -ENOSPC);
	assert_int_equal(cluster_client_page_store(c, 2, 2, a), 0); /* overwrite */
	assert_true(node_ctl(nodes[1], "limit 0", ctlbuf, sizeof(ctlbuf)) > 0);
	assert_int_equal(cluster_client_page_store(c, 3, 1, a), 0);
	ssize_t n = node_ctl(nodes[1], "stats", ctlbuf, sizeof(ctlbuf) - 1);
	assert_true(n > 0);
	ctlbuf[n] = 0;
	assert_non_null(strstr(ctlbuf, "nospace_refused: 1\n"));
	assert_non_null(strstr(ctlbuf, "pages: 3\n"));
	assert_int_equal(node_ctl(nodes[1], "limit lots", ctlbuf, sizeof(ctlbuf)), -EINVAL);
	assert_int_equal(node_ctl(nodes[1], "frobnicate", ctlbuf, sizeof(ctlbuf)), -ENOENT);
	for (uint64_t p = 1; p <= 3; p++)
		cluster_client_page_drop(c, p, 2);
	cluster_client_close(c);
}

static uint64_t stat_of(struct node *n, const char *key)
{
	ssize_t len = node_ctl(n, "stats", ctlbuf, sizeof(ctlbuf) - 1);
	assert_true(len > 0);
	ctlbuf[len] = 0;
	char *p = strstr(ctlbuf, key);
	assert_non_null(p);
	return strtoull(p + strlen(key), NULL, 10);
}

static void wrong_secret_refused(void **state)
{
	static struct cluster_config bad;
	struct cluster_client *c = NULL;
	char err[256];
	(void)state;

	uint64_t before = stat_of(nodes[0], "auth_failures: ");
	bad = cfg;
	memcpy(bad.secret, "a-different-secret-0123456789", 29);
	bad.secret_len = 29;
	assert_int_equal(cluster_client_open_node(&c, &bad, 1, 0, 1, 3000, err,
						  sizeof(err)), -EACCES);
	assert_null(c);
	assert_non_null(strstr(err, "failed to prove"));
	/* The node counts it once it has read our hang-up: poll briefly. */
	for (int i = 0; i < 100 && stat_of(nodes[0], "auth_failures: ") == before; i++)
		usleep(20000);
	assert_true(stat_of(nodes[0], "auth_failures: ") == before + 1);
}

/* A client that skips checking the server and sends a forged proof. */
static void forged_proof_refused(void **state)
{
	static struct conn c;
	static struct frame_hdr h, r;
	(void)state;

	const struct cluster_node *cn = config_node_find(&cfg, 2);
	assert_int_equal(conn_connect(&c, cn->host, cn->port, 3000), 0);
	h.type = FT_HELLO;
	h.proto_version = AUTH_PROTO_VERSION;
	assert_int_equal(conn_send(&c, &h, NULL), 0);
	assert_int_equal(conn_recv(&c, &r, NULL, NULL), 0);
	assert_int_equal(r.type, FT_CHALLENGE);
	memset(&h, 0, sizeof(h));
	h.type = FT_AUTH;
	memset(h.proof, 0xab, sizeof(h.proof));
	assert_int_equal(conn_send(&c, &h, NULL), 0);
	assert_int_equal(conn_recv(&c, &r, NULL, NULL), 0);
	assert_int_equal(r.type, FT_AUTH);
	assert_int_equal(r.status, FS_AUTH_FAILED);
	/* and then the node hangs up */
	assert_int_equal(conn_recv(&c, &r, NULL, NULL), -ECONNRESET);
	conn_close(&c);
}

static void bad_frames_after_auth(void **state)
{
	static struct conn c;
	static struct frame_hdr r;
	static uint8_t page[FRAME_PAGE_SIZE];
	struct auth_peer peer;
	struct auth_identity me = { 0, 1, cfg.secret, cfg.secret_len };
	const struct cluster_node *cn = config_node_find(&cfg, 1);
	(void)state;

	static const uint8_t junk[][20] = {
		/* valid prefix shape, CRC wrong */
		{ 'N', 'V', 'C', 'L', 1, 0, 0, 4, 0, 0, 0, 0, 1, 2, 3, 4, 8, 1, 16, 1 },
		/* bad magic */
		{ 'G', 'E', 'T', ' ', '/', ' ', 'H', 'T', 'T', 'P', '/', '1', '.', '1',
		  '\r', '\n', '\r', '\n', 0, 0 },
		/* payload length 4 GiB - 1 */
		{ 'N', 'V', 'C', 'L', 1, 0, 0, 4, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 8, 1,
		  16, 1 },
	};
	uint64_t before = stat_of(nodes[0], "bad_frames: ");
	for (unsigned j = 0; j < sizeof(junk) / sizeof(junk[0]); j++) {
		assert_int_equal(conn_connect(&c, cn->host, cn->port, 3000), 0);
		assert_int_equal(auth_client(&c, &me, &peer, NULL), 0);
		assert_int_equal(send(c.fd, junk[j], sizeof(junk[j]), MSG_NOSIGNAL),
				 (ssize_t)sizeof(junk[j]));
		assert_int_equal(conn_recv(&c, &r, NULL, NULL), 0);
		assert_int_equal(r.type, FT_ERROR);
		assert_int_equal(r.status, FS_BAD_FRAME);
		assert_true(strlen(r.text) > 0);
		assert_int_equal(conn_recv(&c, &r, NULL, NULL), -ECONNRESET);
		conn_close(&c);
	}
	/* A truncated frame then a hang-up: nothing to answer, no harm. */
	assert_int_equal(conn_connect(&c, cn->host, cn->port, 3000), 0);
	assert_int_equal(auth_client(&c, &me, &peer, NULL), 0);
	assert_int_equal(send(c.fd, junk[0], 10, MSG_NOSIGNAL), 10);
	conn_close(&c);

	assert_true(stat_of(nodes[0], "bad_frames: ") == before + 3);
	/* The node still serves. */
	struct cluster_client *ok = open_client(1, 77);
	fill(page, 5);
	assert_int_equal(cluster_client_page_store(ok, 1, 1, page), 0);
	assert_int_equal(cluster_client_page_drop(ok, 1, 1), 0);
	cluster_client_close(ok);
}

static void unauthenticated_request_refused(void **state)
{
	static struct conn c;
	static struct frame_hdr h, r;
	static uint8_t page[FRAME_PAGE_SIZE];
	(void)state;

	const struct cluster_node *cn = config_node_find(&cfg, 1);
	assert_int_equal(conn_connect(&c, cn->host, cn->port, 3000), 0);
	h.type = FT_PAGE_STORE;
	h.payload_len = FRAME_PAGE_SIZE;
	assert_int_equal(conn_send(&c, &h, page), 0);
	assert_int_equal(conn_recv(&c, &r, NULL, NULL), 0);
	assert_int_equal(r.type, FT_ERROR);
	assert_int_equal(r.status, FS_NOT_AUTHENTICATED);
	assert_int_equal(conn_recv(&c, &r, NULL, NULL), -ECONNRESET);
	conn_close(&c);
}

static void node_stats_over_the_wire(void **state)
{
	static char text[FRAME_MAX_STATS + 1];
	static uint8_t page[FRAME_PAGE_SIZE];
	size_t len = 0;
	(void)state;

	struct cluster_client *c = open_client(1, 91);
	fill(page, 9);
	assert_int_equal(cluster_client_page_store(c, 1, 1, page), 0);
	assert_int_equal(cluster_client_parity_update(c, 4, 1, page), 0);
	assert_int_equal(cluster_client_node_stats(c, text, sizeof(text), &len), 0);
	assert_int_equal(strlen(text), len);
	assert_true(!strncmp(text, "node: 1\n", 8));
	/* the same counters the control socket gives */
	char *p = strstr(text, "pages_data: ");
	assert_non_null(p);
	assert_true(strtoull(p + 12, NULL, 10) == stat_of(nodes[0], "pages_data: "));
	p = strstr(text, "pages_parity: ");
	assert_non_null(p);
	assert_true(strtoull(p + 14, NULL, 10) >= 1);
	p = strstr(text, "owners: ");
	assert_non_null(p);
	assert_true(strtoull(p + 8, NULL, 10) >= 1);
	/* too small a buffer: refused, and the handle still works */
	assert_int_equal(cluster_client_node_stats(c, text, 16, &len), -EMSGSIZE);
	assert_int_equal(cluster_client_page_drop(c, 1, 1), 0);
	assert_int_equal(cluster_client_parity_drop(c, 4, 1), 0);
	cluster_client_close(c);
}

/* A fake node that answers NODE_STATS requests by a script, to check what
 * the client does with chunks a real node never sends. */
enum fake_mode { FAKE_GOOD, FAKE_CONTROL_BYTE, FAKE_LENGTH_CHANGES,
		 FAKE_WRONG_OFFSET, FAKE_EMPTY_CHUNK };
#define FAKE_TEXT 9000
struct fake {
	int listen_fd;
	enum fake_mode mode;
	char text[FAKE_TEXT];
};

/* A fake node's side of a connection: accept one client on listen_fd and
 * authenticate as node 7. 0, or -1 (c closed, or never opened). */
static int fake_accept(int listen_fd, struct conn *c)
{
	struct auth_identity me = { 7, 42, cfg.secret, cfg.secret_len };
	struct auth_peer peer;
	int fd = accept(listen_fd, NULL, NULL);

	c->fd = -1;
	c->big = NULL;
	if (fd < 0)
		return -1;
	conn_init(c, fd);
	conn_set_timeout(c, 3000);
	return auth_server(c, &me, NULL, NULL, &peer, NULL) ? -1 : 0;
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	static struct conn c;
	static struct frame_hdr q, r;

	if (fake_accept(f->listen_fd, &c))
		goto out;
	while (!conn_recv(&c, &q, NULL, NULL) && q.type == FT_NODE_STATS) {
		size_t off = q.page_id, total = FAKE_TEXT;
		memset(&r, 0, sizeof(r));
		r.type = FT_NODE_STATS;
		r.reply = true;
		r.request_id = q.request_id;
		r.node_id = 7;
		r.incarnation = 42;
		r.page_id = off;
		if (f->mode == FAKE_LENGTH_CHANGES && off)
			total -= 100;
		if (f->mode == FAKE_WRONG_OFFSET && off)
			r.page_id = off - 1;
		r.version = total;
		r.payload_len = total - off < FRAME_STATS_CHUNK ?
				(uint32_t)(total - off) : FRAME_STATS_CHUNK;
		if (f->mode == FAKE_EMPTY_CHUNK && off)
			r.payload_len = 0;
		if (conn_send(&c, &r, r.payload_len ? f->text + off : NULL))
			break;
	}
out:
	conn_close(&c);
	return NULL;
}

static void node_stats_client_checks(void **state)
{
	static struct fake f;
	static char text[FRAME_MAX_STATS + 1];
	(void)state;

	for (int i = 0; i < FAKE_TEXT; i++)
		f.text[i] = i % 64 == 63 ? '\n' : (char)('a' + i % 26);
	for (int mode = FAKE_GOOD; mode <= FAKE_EMPTY_CHUNK; mode++) {
		uint16_t port;
		pthread_t t;
		char err[256];
		size_t len = 0;
		struct cluster_client *c = NULL;

		f.listen_fd = listen_any(&port);
		f.mode = mode;
		f.text[5000] = mode == FAKE_CONTROL_BYTE ? 0x1b : 'x';
		assert_int_equal(pthread_create(&t, NULL, fake_main, &f), 0);
		struct cluster_client_opts o = {
			.host = "127.0.0.1", .port = port, .secret = cfg.secret,
			.secret_len = cfg.secret_len, .timeout_ms = 3000,
		};
		assert_int_equal(cluster_client_open(&c, &o, err, sizeof(err)), 0);
		int rc = cluster_client_node_stats(c, text, sizeof(text), &len);
		if (mode == FAKE_GOOD) {
			/* three chunks, put together */
			assert_int_equal(rc, 0);
			assert_int_equal(len, FAKE_TEXT);
			assert_memory_equal(text, f.text, FAKE_TEXT);
			assert_int_equal(text[FAKE_TEXT], 0);
		} else {
			assert_int_equal(rc, -EPROTO);
			assert_true(strlen(cluster_client_last_error(c)) > 0);
			/* broken: no more requests on it */
			assert_int_equal(cluster_client_node_stats(c, text, sizeof(text),
								   &len), -ENOTCONN);
		}
		cluster_client_close(c);
		pthread_join(t, NULL);
		close(f.listen_fd);
	}
}

/* The split API: several requests in flight on one handle (the node
 * answers in order) and on two handles at once; each wait takes the
 * oldest reply, checked against its request. */
static void split_requests_pipelined(void **state)
{
	static uint8_t a[3][FRAME_PAGE_SIZE], b[FRAME_PAGE_SIZE],
		got[FRAME_PAGE_SIZE], par[FRAME_PAGE_SIZE];
	uint64_t v = 0;
	(void)state;

	struct cluster_client *c = open_client(1, 61);
	struct cluster_client *p = open_client(2, 61);
	for (uint64_t k = 0; k < 3; k++) {
		fill(a[k], k + 500);
		assert_int_equal(cluster_client_page_store(c, k, 1, a[k]), 0);
	}
	fill(b, 600);
	fill(par, 601);
	assert_int_equal(cluster_client_parity_update(p, 9, 1, par), 0);

	/* in flight on two handles at once, several on one */
	assert_int_equal(cluster_client_parity_fetch_start(p, 9), 0);
	assert_int_equal(cluster_client_page_fetch_start(c, 0, 1), 0);
	assert_int_equal(cluster_client_page_fetch_start(c, 1, 1), 0);
	/* the old page, then the new one in its place: one round trip */
	assert_int_equal(cluster_client_page_fetch_start(c, 2, 1), 0);
	assert_int_equal(cluster_client_page_store_start(c, 2, 2, b), 0);
	assert_int_equal(cluster_client_page_fetch_start(c, 2, 2), 0);
	assert_int_equal(cluster_client_page_fetch_start(c, 99, 0), 0);
	assert_int_equal(cluster_client_page_fetch_start(c, 1, 5), 0);
	assert_int_equal(cluster_client_pending(c), 7);
	assert_int_equal(cluster_client_pending(p), 1);
	/* no synchronous call meanwhile, no wait of the wrong kind */
	assert_int_equal(cluster_client_page_fetch(c, 0, 1, got, NULL), -EBUSY);
	assert_int_equal(cluster_client_page_store(c, 5, 1, b), -EBUSY);
	assert_int_equal(cluster_client_wait(c), -EINVAL);
	assert_int_equal(cluster_client_pending(c), 7);

	assert_int_equal(cluster_client_wait_fetch(p, got, &v), 0);
	assert_memory_equal(got, par, FRAME_PAGE_SIZE);
	assert_true(v == 1);
	for (int k = 0; k < 3; k++) {
		memset(got, 0, sizeof(got));
		assert_int_equal(cluster_client_wait_fetch(c, got, &v), 0);
		assert_memory_equal(got, a[k], FRAME_PAGE_SIZE);
		assert_true(v == 1);
	}
	assert_int_equal(cluster_client_wait_fetch(c, got, NULL), -EINVAL);
	assert_int_equal(cluster_client_wait(c), 0);
	assert_int_equal(cluster_client_wait_fetch(c, got, &v), 0);
	assert_memory_equal(got, b, FRAME_PAGE_SIZE);
	assert_true(v == 2);
	assert_int_equal(cluster_client_wait_fetch(c, got, NULL), -ENOENT);
	assert_int_equal(cluster_client_wait_fetch(c, got, &v), -ESTALE);
	assert_true(v == 1);
	assert_int_equal(cluster_client_pending(c), 0);
	/* nothing in flight */
	assert_int_equal(cluster_client_wait(c), -EINVAL);
	assert_int_equal(cluster_client_wait_fetch(c, got, NULL), -EINVAL);

	/* a bounded number in flight; the handle works on after */
	for (int k = 0; k < CLUSTER_CLIENT_MAX_INFLIGHT; k++)
		assert_int_equal(cluster_client_page_fetch_start(c, 0, 1), 0);
	assert_int_equal(cluster_client_page_fetch_start(c, 0, 1), -EBUSY);
	for (int k = 0; k < CLUSTER_CLIENT_MAX_INFLIGHT; k++) {
		assert_int_equal(cluster_client_wait_fetch(c, got, NULL), 0);
		assert_memory_equal(got, a[0], FRAME_PAGE_SIZE);
	}
	assert_int_equal(cluster_client_page_fetch(c, 1, 1, got, NULL), 0);
	assert_memory_equal(got, a[1], FRAME_PAGE_SIZE);

	for (uint64_t k = 0; k < 3; k++)
		assert_int_equal(cluster_client_page_drop(c, k, UINT64_MAX), 0);
	assert_int_equal(cluster_client_parity_drop(p, 9, UINT64_MAX), 0);
	cluster_client_close(c);
	cluster_client_close(p);
}

/* PAGE_FETCH_MANY against a real node: each entry answered on its own
 * (found, any version, parity, missing, stale), pages in request order,
 * two pipelined; the node refuses bad entries with an error reply and
 * serves on; the client refuses what it cannot send. */
static void fetch_many_over_the_wire(void **state)
{
	static uint8_t pg[70][FRAME_PAGE_SIZE], par[FRAME_PAGE_SIZE];
	static uint8_t got[2 * FRAME_BATCH_MAX][FRAME_PAGE_SIZE];
	static struct cluster_fetch f[2 * FRAME_BATCH_MAX];
	static struct conn c;
	static struct frame_hdr h, r;
	static uint8_t raw[FRAME_BATCH_ENTRY];
	struct auth_peer peer;
	struct auth_identity me = { 0, 1, cfg.secret, cfg.secret_len };
	(void)state;

	struct cluster_client *cl = open_client(1, 91);
	for (uint64_t k = 0; k < 70; k++) {
		fill(pg[k], k + 900);
		assert_int_equal(cluster_client_page_store(cl, k, 3, pg[k]), 0);
	}
	fill(par, 999);
	assert_int_equal(cluster_client_parity_update(cl, 12, 1, par), 0);

	/* 64 entries: 60 pages (even ones at their version, odd ones at any),
	 * the parity page, a missing page, a stale version, a parity page
	 * that does not exist */
	for (unsigned k = 0; k < 60; k++)
		f[k] = (struct cluster_fetch){ .kind = FK_DATA, .key = k,
					       .version = k % 2 ? 0 : 3, .page = got[k] };
	f[60] = (struct cluster_fetch){ .kind = FK_PARITY, .key = 12, .page = got[60] };
	f[61] = (struct cluster_fetch){ .kind = FK_DATA, .key = 5000, .page = got[61] };
	f[62] = (struct cluster_fetch){ .kind = FK_DATA, .key = 61, .version = 2,
					.page = got[62] };
	f[63] = (struct cluster_fetch){ .kind = FK_PARITY, .key = 13, .page = got[63] };
	/* the next 6 pages in a second request, pipelined */
	for (unsigned k = 64; k < 70; k++)
		f[k] = (struct cluster_fetch){ .kind = FK_DATA, .key = k, .version = 3,
					       .page = got[k] };
	assert_int_equal(cluster_client_fetch_many_start(cl, f, 64), 0);
	assert_int_equal(cluster_client_fetch_many_start(cl, f + 64, 6), 0);
	assert_int_equal(cluster_client_pending(cl), 2);
	/* waits of the wrong kind or size refuse without breaking anything */
	assert_int_equal(cluster_client_wait(cl), -EINVAL);
	assert_int_equal(cluster_client_wait_fetch(cl, got[0], NULL), -EINVAL);
	assert_int_equal(cluster_client_wait_fetch_many(cl, f, 63), -EINVAL);
	assert_int_equal(cluster_client_wait_fetch_many(cl, f, 64), 0);
	assert_int_equal(cluster_client_wait_fetch_many(cl, f + 64, 6), 0);
	assert_int_equal(cluster_client_pending(cl), 0);
	for (unsigned k = 0; k < 70; k++) {
		if (k >= 60 && k < 64)
			continue;
		assert_int_equal(f[k].rc, 0);
		assert_true(f[k].version_out == 3);
		assert_memory_equal(got[k], pg[k], FRAME_PAGE_SIZE);
	}
	assert_int_equal(f[60].rc, 0);
	assert_memory_equal(got[60], par, FRAME_PAGE_SIZE);
	assert_int_equal(f[61].rc, -ENOENT);
	assert_int_equal(f[62].rc, -ESTALE);
	assert_true(f[62].version_out == 3);
	assert_int_equal(f[63].rc, -ENOENT);
	/* too many, too few, a bad kind: refused before sending */
	assert_int_equal(cluster_client_fetch_many_start(cl, f, FRAME_BATCH_MAX + 1), -EINVAL);
	assert_int_equal(cluster_client_fetch_many_start(cl, f, 0), -EINVAL);
	f[0].kind = FK_COUNT;
	assert_int_equal(cluster_client_fetch_many_start(cl, f, 1), -EINVAL);
	assert_int_equal(cluster_client_pending(cl), 0);

	/* A request whose entry has a reserved byte set: an error reply
	 * (bad frame), and the connection serves on. */
	const struct cluster_node *cn = config_node_find(&cfg, 1);
	assert_int_equal(conn_connect(&c, cn->host, cn->port, 3000), 0);
	assert_int_equal(auth_client(&c, &me, &peer, NULL), 0);
	struct batch_entry e = { .key = 1, .version = 3, .kind = FK_DATA };
	batch_request_put(raw, &e, 1);
	raw[20] = 1;
	memset(&h, 0, sizeof(h));
	h.type = FT_PAGE_FETCH_MANY;
	h.request_id = 5;
	h.owner = 91;
	h.payload_len = FRAME_BATCH_ENTRY;
	assert_int_equal(conn_send(&c, &h, raw), 0);
	assert_int_equal(conn_recv(&c, &r, NULL, NULL), 0);
	assert_true(r.reply && r.type == FT_PAGE_FETCH_MANY);
	assert_int_equal(r.status, FS_BAD_FRAME);
	assert_true(strlen(r.text) > 0);
	raw[20] = 0;
	h.request_id = 6;
	const uint8_t *pl;
	/* a connection that did not raise its payload cap refuses the reply
	 * from its prefix; one that did takes it */
	assert_int_equal(conn_send(&c, &h, raw), 0);
	assert_int_equal(conn_recv(&c, &r, &pl, NULL), -EMSGSIZE);
	conn_close(&c);
	assert_int_equal(conn_connect(&c, cn->host, cn->port, 3000), 0);
	assert_int_equal(auth_client(&c, &me, &peer, NULL), 0);
	conn_set_max_payload(&c, ~0U);
	assert_int_equal(c.max_payload, FRAME_MAX_CONN_PAYLOAD);
	assert_int_equal(conn_send(&c, &h, raw), 0);
	assert_int_equal(conn_recv(&c, &r, &pl, NULL), 0);
	assert_int_equal(r.status, FS_OK);
	assert_int_equal(r.payload_len, batch_reply_len(1));
	struct batch_entry res;
	const uint8_t *page;
	const char *why;
	assert_int_equal(batch_result_get(pl, r.payload_len, 1, 0, &res, &page, &why), 0);
	assert_int_equal(res.status, FS_OK);
	assert_memory_equal(page, pg[1], FRAME_PAGE_SIZE);
	conn_close(&c);

	for (uint64_t k = 0; k < 70; k++)
		assert_int_equal(cluster_client_page_drop(cl, k, UINT64_MAX), 0);
	assert_int_equal(cluster_client_parity_drop(cl, 12, UINT64_MAX), 0);
	cluster_client_close(cl);
}

/* PAGE_STORE_MANY against a real node: every entry stored with its own
 * result (new, parity kind, an older version refused as stale), two
 * requests pipelined, the pages read back as stored; waits of the wrong
 * kind refuse; an entry with a reserved byte set gets an error reply and
 * the node serves on. */
static void store_many_over_the_wire(void **state)
{
	static uint8_t pg[70][FRAME_PAGE_SIZE], got[FRAME_PAGE_SIZE], old[FRAME_PAGE_SIZE];
	static uint8_t raw[FRAME_BATCH_ENTRY + FRAME_PAGE_SIZE];
	static struct cluster_store s[70];
	static struct conn c;
	static struct frame_hdr h, r;
	struct auth_peer peer;
	struct auth_identity me = { 0, 1, cfg.secret, cfg.secret_len };
	uint64_t v = 0;
	(void)state;

	struct cluster_client *cl = open_client(1, 93);
	fill(old, 5);
	assert_int_equal(cluster_client_page_store(cl, 62, 7, old), 0);
	for (unsigned k = 0; k < 70; k++) {
		fill(pg[k], k + 1300);
		s[k] = (struct cluster_store){ .kind = FK_DATA, .key = k, .version = 4,
					       .page = pg[k] };
	}
	s[61].kind = FK_PARITY;        /* parity group 61 */
	s[62].version = 6;              /* older than the stored 7: refused */
	assert_int_equal(cluster_client_store_many_start(cl, s, 64), 0);
	assert_int_equal(cluster_client_store_many_start(cl, s + 64, 6), 0);
	assert_int_equal(cluster_client_pending(cl), 2);
	assert_int_equal(cluster_client_wait(cl), -EINVAL);
	assert_int_equal(cluster_client_wait_fetch_many(cl, NULL, 64), -EINVAL);
	assert_int_equal(cluster_client_wait_store_many(cl, s, 63), -EINVAL);
	assert_int_equal(cluster_client_wait_store_many(cl, s, 64), 0);
	assert_int_equal(cluster_client_wait_store_many(cl, s + 64, 6), 0);
	assert_int_equal(cluster_client_pending(cl), 0);
	for (unsigned k = 0; k < 70; k++) {
		if (k == 61 || k == 62)
			continue;
		assert_int_equal(s[k].rc, 0);
		assert_int_equal(cluster_client_page_fetch(cl, k, 4, got, &v), 0);
		assert_memory_equal(got, pg[k], FRAME_PAGE_SIZE);
	}
	assert_int_equal(s[61].rc, 0);
	assert_int_equal(cluster_client_parity_fetch(cl, 61, got, &v), 0);
	assert_memory_equal(got, pg[61], FRAME_PAGE_SIZE);
	assert_int_equal(s[62].rc, -ESTALE);
	assert_int_equal(cluster_client_page_fetch(cl, 62, 7, got, &v), 0);
	assert_memory_equal(got, old, FRAME_PAGE_SIZE);
	/* too many, too few, a bad kind: refused before sending */
	assert_int_equal(cluster_client_store_many_start(cl, s, FRAME_BATCH_MAX + 1), -EINVAL);
	assert_int_equal(cluster_client_store_many_start(cl, s, 0), -EINVAL);
	s[0].kind = FK_COUNT;
	assert_int_equal(cluster_client_store_many_start(cl, s, 1), -EINVAL);
	assert_int_equal(cluster_client_pending(cl), 0);

	/* an entry with a reserved byte set: an error reply, nothing
	 * stored, and the connection serves on */
	const struct cluster_node *cn = config_node_find(&cfg, 1);
	assert_int_equal(conn_connect(&c, cn->host, cn->port, 3000), 0);
	assert_int_equal(auth_client(&c, &me, &peer, NULL), 0);
	struct batch_entry e = { .key = 500, .version = 1, .kind = FK_DATA };
	batch_request_put(raw, &e, 1);
	memcpy(raw + FRAME_BATCH_ENTRY, pg[0], FRAME_PAGE_SIZE);
	raw[19] = 1;
	memset(&h, 0, sizeof(h));
	h.type = FT_PAGE_STORE_MANY;
	h.request_id = 8;
	h.owner = 93;
	h.payload_len = batch_store_len(1);
	assert_int_equal(conn_send(&c, &h, raw), 0);
	assert_int_equal(conn_recv(&c, &r, NULL, NULL), 0);
	assert_true(r.reply && r.type == FT_PAGE_STORE_MANY);
	assert_int_equal(r.status, FS_BAD_FRAME);
	assert_int_equal(cluster_client_page_fetch(cl, 500, 0, got, &v), -ENOENT);
	raw[19] = 0;
	h.request_id = 9;
	const uint8_t *pl;
	assert_int_equal(conn_send(&c, &h, raw), 0);
	assert_int_equal(conn_recv(&c, &r, &pl, NULL), 0);
	assert_int_equal(r.status, FS_OK);
	assert_int_equal(r.payload_len, batch_store_reply_len(1));
	assert_int_equal(cluster_client_page_fetch(cl, 500, 1, got, &v), 0);
	assert_memory_equal(got, pg[0], FRAME_PAGE_SIZE);
	conn_close(&c);

	for (uint64_t k = 0; k < 70; k++)
		if (k != 61)
			assert_int_equal(cluster_client_page_drop(cl, k, UINT64_MAX), 0);
	assert_int_equal(cluster_client_page_drop(cl, 500, UINT64_MAX), 0);
	assert_int_equal(cluster_client_parity_drop(cl, 61, UINT64_MAX), 0);
	cluster_client_close(cl);
}

/* PAGE_OVERWRITE: node 1 replaces the page and sends old ^ new to node 2
 * (the parity node) before it answers; a wrong old version stores
 * nothing; a parity node that refuses the delta gives -EREMOTEIO with the
 * page stored; a parity node not in the cluster file is refused. */
static void overwrite_forwards_parity(void **state)
{
	static uint8_t a[FRAME_PAGE_SIZE], b[FRAME_PAGE_SIZE], c2[FRAME_PAGE_SIZE],
		par[FRAME_PAGE_SIZE], want[FRAME_PAGE_SIZE], got[FRAME_PAGE_SIZE];
	(void)state;

	struct cluster_client *d = open_client(1, 81);   /* data node */
	struct cluster_client *p = open_client(2, 81);   /* parity node */
	fill(a, 810);
	fill(b, 811);
	fill(c2, 812);
	fill(par, 813);
	assert_int_equal(cluster_client_page_store(d, 4, 1, a), 0);
	assert_int_equal(cluster_client_parity_update(p, 8, 1, par), 0);
	uint64_t fw = stat_of(nodes[0], "parity_forwards: ");

	assert_int_equal(cluster_client_page_overwrite(d, 4, 2, 1, 2, 8, 2, b), 0);
	assert_int_equal(cluster_client_page_fetch(d, 4, 2, got, NULL), 0);
	assert_memory_equal(got, b, FRAME_PAGE_SIZE);
	memcpy(want, par, FRAME_PAGE_SIZE);
	for (unsigned k = 0; k < FRAME_PAGE_SIZE; k++)
		want[k] ^= a[k] ^ b[k];
	uint64_t v = 0;
	assert_int_equal(cluster_client_parity_fetch(p, 8, got, &v), 0);
	assert_memory_equal(got, want, FRAME_PAGE_SIZE);
	assert_true(v == 2);
	assert_true(stat_of(nodes[0], "parity_forwards: ") == fw + 1);

	/* the old version is gone: nothing stored, parity untouched */
	assert_int_equal(cluster_client_page_overwrite(d, 4, 3, 1, 2, 8, 3, c2), -ESTALE);
	assert_int_equal(cluster_client_page_overwrite(d, 99, 3, 1, 2, 8, 3, c2), -ENOENT);
	assert_int_equal(cluster_client_page_fetch(d, 4, 0, got, &v), 0);
	assert_memory_equal(got, b, FRAME_PAGE_SIZE);
	assert_int_equal(cluster_client_parity_fetch(p, 8, got, NULL), 0);
	assert_memory_equal(got, want, FRAME_PAGE_SIZE);

	/* a parity node without room for a new parity page refuses the
	 * delta: the page is stored all the same, and the caller told */
	assert_true(node_ctl(nodes[1], "limit 4K", ctlbuf, sizeof(ctlbuf)) > 0);
	assert_int_equal(cluster_client_page_overwrite(d, 4, 3, 2, 2, 9, 1, c2), -EREMOTEIO);
	assert_true(strlen(cluster_client_last_error(d)) > 0);
	assert_int_equal(cluster_client_page_fetch(d, 4, 3, got, NULL), 0);
	assert_memory_equal(got, c2, FRAME_PAGE_SIZE);
	assert_int_equal(cluster_client_parity_fetch(p, 9, got, NULL), -ENOENT);
	assert_true(node_ctl(nodes[1], "limit 0", ctlbuf, sizeof(ctlbuf)) > 0);
	assert_true(stat_of(nodes[0], "parity_forward_errors: ") >= 1);

	/* no such parity node, or the data node itself: refused, not stored */
	assert_int_equal(cluster_client_page_overwrite(d, 4, 4, 3, 77, 8, 3, a), -EPROTO);
	assert_int_equal(cluster_client_page_overwrite(d, 4, 4, 3, 1, 8, 3, a), -EPROTO);
	assert_int_equal(cluster_client_page_fetch(d, 4, 0, got, &v), 0);
	assert_true(v == 3);

	assert_int_equal(cluster_client_page_drop(d, 4, UINT64_MAX), 0);
	assert_int_equal(cluster_client_parity_drop(p, 8, UINT64_MAX), 0);
	cluster_client_close(d);
	cluster_client_close(p);
}

/* A run of PAGE_OVERWRITEs on one connection, more than the node keeps
 * in flight, with two that fail before the parity node is asked (a stale
 * old version, an unknown parity node) in the middle: every reply comes
 * back in order with its own result, and the parity page holds exactly
 * the deltas of the ones that succeeded. */
static void overwrites_pipelined(void **state)
{
	enum { N = 12 };
	static uint8_t old[N][FRAME_PAGE_SIZE], nw[N][FRAME_PAGE_SIZE],
		par[FRAME_PAGE_SIZE], want[FRAME_PAGE_SIZE], got[FRAME_PAGE_SIZE];
	(void)state;

	struct cluster_client *d = open_client(1, 82);
	struct cluster_client *p = open_client(2, 82);
	fill(par, 820);
	assert_int_equal(cluster_client_parity_update(p, 30, 1, par), 0);
	memcpy(want, par, FRAME_PAGE_SIZE);
	for (unsigned k = 0; k < N; k++) {
		fill(old[k], 821 + k);
		fill(nw[k], 851 + k);
		assert_int_equal(cluster_client_page_store(d, 20 + k, 1, old[k]), 0);
	}
	for (unsigned k = 0; k < N; k++) {
		uint64_t oldv = k == 4 ? 7 : 1;         /* 4: stale */
		uint32_t pn = k == 6 ? 77 : 2;          /* 6: no such node */
		assert_int_equal(cluster_client_page_overwrite_start(d, 20 + k, 2, oldv, pn,
								    30, 2 + k, nw[k]), 0);
	}
	for (unsigned k = 0; k < N; k++) {
		int want_rc = k == 4 ? -ESTALE : k == 6 ? -EPROTO : 0;
		assert_int_equal(cluster_client_wait(d), want_rc);
		if (want_rc)
			continue;
		for (unsigned b = 0; b < FRAME_PAGE_SIZE; b++)
			want[b] ^= old[k][b] ^ nw[k][b];
	}
	for (unsigned k = 0; k < N; k++) {
		uint64_t v = 0;
		assert_int_equal(cluster_client_page_fetch(d, 20 + k, 0, got, &v), 0);
		bool stored = k != 4 && k != 6;
		assert_true(v == (stored ? 2u : 1u));
		assert_memory_equal(got, stored ? nw[k] : old[k], FRAME_PAGE_SIZE);
	}
	uint64_t v = 0;
	assert_int_equal(cluster_client_parity_fetch(p, 30, got, &v), 0);
	assert_memory_equal(got, want, FRAME_PAGE_SIZE);
	assert_true(v == N + 1);
	for (unsigned k = 0; k < N; k++)
		assert_int_equal(cluster_client_page_drop(d, 20 + k, UINT64_MAX), 0);
	assert_int_equal(cluster_client_parity_drop(p, 30, UINT64_MAX), 0);
	cluster_client_close(d);
	cluster_client_close(p);
}

/* PAGE_OVERWRITE_MANY: node 1 stores each entry and sends the deltas to
 * node 2 as one PARITY_UPDATE_MANY; each entry gets its own result: a
 * stale old version stores nothing, a delta the parity node refuses (no
 * room for a new parity page) gives -EREMOTEIO with the page stored, the
 * rest 0; the parity pages hold exactly the deltas taken. Two requests
 * pipelined; a request naming an unknown parity node is refused whole
 * and stores nothing; waits of the wrong kind and bad entries refuse. */
static void overwrite_many_forwards_parity(void **state)
{
	enum { N = 70 };
	static uint8_t old[N][FRAME_PAGE_SIZE], nw[N][FRAME_PAGE_SIZE],
		par[FRAME_PAGE_SIZE], want[FRAME_PAGE_SIZE], got[FRAME_PAGE_SIZE];
	static struct cluster_overwrite o[N];
	static struct cluster_store ps[1];
	(void)state;

	struct cluster_client *d = open_client(1, 83);
	struct cluster_client *p = open_client(2, 83);
	fill(par, 830);
	assert_int_equal(cluster_client_parity_update(p, 40, 1, par), 0);
	memcpy(want, par, FRAME_PAGE_SIZE);
	for (unsigned k = 0; k < N; k++) {
		fill(old[k], 1831 + k);
		fill(nw[k], 1931 + k);
		assert_int_equal(cluster_client_page_store(d, 100 + k, 1, old[k]), 0);
		/* even entries: group 40 (its parity page exists); odd: group
		 * 41, a new parity page the full parity node refuses; 3: stale */
		o[k] = (struct cluster_overwrite){ .page_id = 100 + k, .version = 2,
			.old_version = k == 3 ? 5 : 1, .group = k % 2 ? 41 : 40,
			.parity_version = 2 + k, .parity_node = 2, .page = nw[k] };
	}
	uint64_t fw = stat_of(nodes[0], "parity_forwards: ");
	uint64_t fwe = stat_of(nodes[0], "parity_forward_errors: ");
	assert_true(node_ctl(nodes[1], "limit 4K", ctlbuf, sizeof(ctlbuf)) > 0);
	assert_int_equal(cluster_client_overwrite_many_start(d, o, 64), 0);
	assert_int_equal(cluster_client_overwrite_many_start(d, o + 64, N - 64), 0);
	assert_int_equal(cluster_client_wait(d), -EINVAL);
	assert_int_equal(cluster_client_wait_store_many(d, NULL, 64), -EINVAL);
	assert_int_equal(cluster_client_wait_overwrite_many(d, o, 63), -EINVAL);
	assert_int_equal(cluster_client_wait_overwrite_many(d, o, 64), 0);
	assert_int_equal(cluster_client_wait_overwrite_many(d, o + 64, N - 64), 0);
	assert_true(node_ctl(nodes[1], "limit 0", ctlbuf, sizeof(ctlbuf)) > 0);
	unsigned lost = 0, taken = 0;
	for (unsigned k = 0; k < N; k++) {
		int want_rc = k == 3 ? -ESTALE : k % 2 ? -EREMOTEIO : 0;
		assert_int_equal(o[k].rc, want_rc);
		lost += want_rc == -EREMOTEIO;
		if (want_rc == 0) {
			taken++;
			for (unsigned b = 0; b < FRAME_PAGE_SIZE; b++)
				want[b] ^= old[k][b] ^ nw[k][b];
		}
		uint64_t v = 0;
		assert_int_equal(cluster_client_page_fetch(d, 100 + k, 0, got, &v), 0);
		assert_true(v == (k == 3 ? 1u : 2u));
		assert_memory_equal(got, k == 3 ? old[k] : nw[k], FRAME_PAGE_SIZE);
	}
	uint64_t v = 0;
	assert_int_equal(cluster_client_parity_fetch(p, 40, got, &v), 0);
	assert_memory_equal(got, want, FRAME_PAGE_SIZE);
	assert_true(v == 2 + N - 2);    /* the highest parity version taken */
	assert_int_equal(cluster_client_parity_fetch(p, 41, got, NULL), -ENOENT);
	assert_true(stat_of(nodes[0], "parity_forwards: ") == fw + taken);
	assert_true(stat_of(nodes[0], "parity_forward_errors: ") == fwe + lost);

	/* one entry names a node not in the cluster file, another this very
	 * node: the request is refused whole, nothing stored */
	o[0] = (struct cluster_overwrite){ .page_id = 100, .version = 3, .old_version = 2,
					   .group = 40, .parity_version = 99,
					   .parity_node = 77, .page = old[0] };
	assert_int_equal(cluster_client_overwrite_many_start(d, o, 1), 0);
	assert_int_equal(cluster_client_wait_overwrite_many(d, o, 1), -EPROTO);
	o[0].parity_node = 1;
	assert_int_equal(cluster_client_overwrite_many_start(d, o, 1), 0);
	assert_int_equal(cluster_client_wait_overwrite_many(d, o, 1), -EPROTO);
	assert_int_equal(cluster_client_page_fetch(d, 100, 0, got, &v), 0);
	assert_true(v == 2);
	assert_memory_equal(got, nw[0], FRAME_PAGE_SIZE);
	/* refused before sending: too many, none, no page, a data entry in
	 * a parity update batch */
	assert_int_equal(cluster_client_overwrite_many_start(d, o, FRAME_BATCH_MAX + 1), -EINVAL);
	assert_int_equal(cluster_client_overwrite_many_start(d, o, 0), -EINVAL);
	o[0].page = NULL;
	assert_int_equal(cluster_client_overwrite_many_start(d, o, 1), -EINVAL);
	ps[0] = (struct cluster_store){ .kind = FK_DATA, .key = 40, .version = 500,
					.page = par };
	assert_int_equal(cluster_client_parity_update_many_start(p, ps, 1), -EINVAL);
	assert_int_equal(cluster_client_pending(d), 0);
	assert_int_equal(cluster_client_pending(p), 0);

	for (unsigned k = 0; k < N; k++)
		assert_int_equal(cluster_client_page_drop(d, 100 + k, UINT64_MAX), 0);
	assert_int_equal(cluster_client_parity_drop(p, 40, UINT64_MAX), 0);
	cluster_client_close(d);
	cluster_client_close(p);
}

/* PAGE_DROP_MANY: each entry dropped with its own result, a page or a
 * parity page; an absent one is -ENOENT, a newer stored version -ESTALE
 * (kept); the rest are gone afterwards. */
static void drop_many_over_the_wire(void **state)
{
	static uint8_t pg[FRAME_PAGE_SIZE], got[FRAME_PAGE_SIZE];
	static struct cluster_store s[4];
	(void)state;

	struct cluster_client *cl = open_client(1, 84);
	fill(pg, 840);
	assert_int_equal(cluster_client_page_store(cl, 1, 3, pg), 0);
	assert_int_equal(cluster_client_page_store(cl, 2, 9, pg), 0);
	assert_int_equal(cluster_client_parity_store(cl, 7, 1, pg), 0);
	s[0] = (struct cluster_store){ .kind = FK_DATA, .key = 1, .version = UINT64_MAX };
	s[1] = (struct cluster_store){ .kind = FK_DATA, .key = 2, .version = 5 };
	s[2] = (struct cluster_store){ .kind = FK_DATA, .key = 3, .version = UINT64_MAX };
	s[3] = (struct cluster_store){ .kind = FK_PARITY, .key = 7, .version = UINT64_MAX };
	assert_int_equal(cluster_client_drop_many_start(cl, s, 4), 0);
	assert_int_equal(cluster_client_wait(cl), -EINVAL);
	assert_int_equal(cluster_client_wait_drop_many(cl, s, 4), 0);
	assert_int_equal(s[0].rc, 0);
	assert_int_equal(s[1].rc, -ESTALE);
	assert_int_equal(s[2].rc, -ENOENT);
	assert_int_equal(s[3].rc, 0);
	assert_int_equal(cluster_client_page_fetch(cl, 1, 0, got, NULL), -ENOENT);
	assert_int_equal(cluster_client_page_fetch(cl, 2, 9, got, NULL), 0);
	assert_int_equal(cluster_client_parity_fetch(cl, 7, got, NULL), -ENOENT);
	s[0].kind = FK_COUNT;
	assert_int_equal(cluster_client_drop_many_start(cl, s, 1), -EINVAL);
	assert_int_equal(cluster_client_drop_many_start(cl, s, 0), -EINVAL);

	/* a PARITY_UPDATE_MANY with a data entry, sent raw (the client
	 * refuses to): an error reply, nothing XORed into page 2 */
	static uint8_t raw[FRAME_BATCH_ENTRY + FRAME_PAGE_SIZE];
	static struct conn c;
	static struct frame_hdr h, r;
	struct auth_peer peer;
	struct auth_identity me = { 0, 1, cfg.secret, cfg.secret_len };
	const struct cluster_node *cn = config_node_find(&cfg, 1);
	assert_int_equal(conn_connect(&c, cn->host, cn->port, 3000), 0);
	assert_int_equal(auth_client(&c, &me, &peer, NULL), 0);
	struct batch_entry e = { .key = 2, .version = 10, .kind = FK_DATA };
	batch_request_put(raw, &e, 1);
	memset(raw + FRAME_BATCH_ENTRY, 0x5a, FRAME_PAGE_SIZE);
	h.type = FT_PARITY_UPDATE_MANY;
	h.request_id = 8;
	h.owner = 84;
	h.payload_len = batch_store_len(1);
	assert_int_equal(conn_send(&c, &h, raw), 0);
	assert_int_equal(conn_recv(&c, &r, NULL, NULL), 0);
	assert_true(r.reply && r.type == FT_PARITY_UPDATE_MANY);
	assert_int_equal(r.status, FS_BAD_FRAME);
	conn_close(&c);
	uint64_t v = 0;
	assert_int_equal(cluster_client_page_fetch(cl, 2, 0, got, &v), 0);
	assert_true(v == 9);
	assert_memory_equal(got, pg, FRAME_PAGE_SIZE);
	assert_int_equal(cluster_client_page_drop(cl, 2, UINT64_MAX), 0);
	cluster_client_close(cl);
}

/* A fake node that answers fetches with a page, but perhaps not the one
 * asked for, or closes the connection once it has a request. */
enum ffake_mode { FF_GOOD, FF_WRONG_PAGE, FF_WRONG_VERSION, FF_WRONG_KIND,
		  FF_CLOSE };
struct ffake {
	int listen_fd;
	enum ffake_mode mode;
};

static void *ffake_main(void *arg)
{
	struct ffake *f = arg;
	static struct conn c;
	static struct frame_hdr q, r;
	static uint8_t page[FRAME_PAGE_SIZE];

	if (fake_accept(f->listen_fd, &c))
		goto out;
	while (!conn_recv(&c, &q, NULL, NULL) && q.type == FT_PAGE_FETCH) {
		if (f->mode == FF_CLOSE)
			break;
		memset(&r, 0, sizeof(r));
		r.type = FT_PAGE_FETCH;
		r.reply = true;
		r.request_id = q.request_id;
		r.node_id = 7;
		r.incarnation = 42;
		r.kind = q.kind;
		r.owner = q.owner;
		r.page_id = q.page_id;
		r.parity_group = q.parity_group;
		r.version = q.version;
		if (f->mode == FF_WRONG_PAGE)
			r.page_id++;
		if (f->mode == FF_WRONG_VERSION)
			r.version++;
		if (f->mode == FF_WRONG_KIND)
			r.kind = FK_PARITY;
		memset(page, (int)q.page_id, sizeof(page));
		r.payload_len = FRAME_PAGE_SIZE;
		if (conn_send(&c, &r, page))
			break;
	}
out:
	conn_close(&c);
	return NULL;
}

static void fetch_reply_checks(void **state)
{
	static struct ffake f;
	static uint8_t got[FRAME_PAGE_SIZE], want[FRAME_PAGE_SIZE];
	(void)state;

	for (int mode = FF_GOOD; mode <= FF_CLOSE; mode++) {
		uint16_t port;
		pthread_t t;
		char err[256];
		uint64_t v = 0;
		struct cluster_client *c = NULL;

		f.listen_fd = listen_any(&port);
		f.mode = mode;
		assert_int_equal(pthread_create(&t, NULL, ffake_main, &f), 0);
		struct cluster_client_opts o = {
			.host = "127.0.0.1", .port = port, .secret = cfg.secret,
			.secret_len = cfg.secret_len, .timeout_ms = 3000,
		};
		assert_int_equal(cluster_client_open(&c, &o, err, sizeof(err)), 0);
		assert_int_equal(cluster_client_page_fetch_start(c, 3, 4), 0);
		assert_int_equal(cluster_client_page_fetch_start(c, 5, 4), 0);
		memset(got, 0xee, sizeof(got));
		int rc = cluster_client_wait_fetch(c, got, &v);
		if (mode == FF_GOOD) {
			assert_int_equal(rc, 0);
			memset(want, 3, sizeof(want));
			assert_memory_equal(got, want, FRAME_PAGE_SIZE);
			assert_true(v == 4);
			assert_int_equal(cluster_client_wait_fetch(c, got, NULL), 0);
			memset(want, 5, sizeof(want));
			assert_memory_equal(got, want, FRAME_PAGE_SIZE);
		} else {
			assert_int_equal(rc, mode == FF_CLOSE ? -ECONNRESET : -EPROTO);
			if (mode != FF_CLOSE)
				assert_true(strlen(cluster_client_last_error(c)) > 0);
			/* nothing copied; the rest in flight is lost */
			memset(want, 0xee, sizeof(want));
			assert_memory_equal(got, want, FRAME_PAGE_SIZE);
			assert_int_equal(cluster_client_pending(c), 0);
			assert_int_equal(cluster_client_wait_fetch(c, got, NULL), -ENOTCONN);
			assert_int_equal(cluster_client_page_fetch_start(c, 3, 4), -ENOTCONN);
		}
		cluster_client_close(c);
		pthread_join(t, NULL);
		close(f.listen_fd);
	}
}

static struct frame_lock lk_req(uint64_t session, uint64_t owner, uint32_t op,
				 uint32_t type, uint64_t start, uint64_t end)
{
	return (struct frame_lock){ .obj = 4242, .op = op, .cls = 0,
				    .type = type, .start = start, .end = end,
				    .node = 2, .session = session,
				    .owner = owner, .pid = 1000 + (uint32_t)owner };
}

static void file_locks_over_the_wire(void **state)
{
	(void)state;
	struct cluster_client *a = open_client(1, 0), *b = open_client(1, 0);
	struct frame_lock h;

	struct frame_lock q = lk_req(11, 1, FL_SET, 2, 0, 99);
	assert_int_equal(cluster_client_lock(a, &q, &h), 0);
	/* another mount: a conflict, with the holder named */
	q = lk_req(22, 7, FL_SET, 1, 50, 60);
	assert_int_equal(cluster_client_lock(b, &q, &h), -EAGAIN);
	assert_true(h.start == 0 && h.end == 99 && h.type == 2 && h.pid == 1001);
	q.op = FL_GET;
	assert_int_equal(cluster_client_lock(b, &q, &h), 0);
	assert_int_equal(h.type, 2);
	/* F_SETLKW: "in progress" (the home waited LOCKSERVE_WAIT_MS) */
	q = lk_req(22, 7, FL_SET, 1, 50, 60);
	q.wait = true;
	q.wait_id = 5;
	assert_int_equal(cluster_client_lock(b, &q, &h), -EINPROGRESS);
	/* the holder unlocks; the same request again collects the grant */
	struct frame_lock un = lk_req(11, 1, FL_SET, 0, 0, FRAME_LOCK_EOF);
	assert_int_equal(cluster_client_lock(a, &un, &h), 0);
	assert_int_equal(cluster_client_lock(b, &q, &h), 0);
	q = lk_req(11, 1, FL_GET, 2, 0, 99);
	assert_int_equal(cluster_client_lock(a, &q, &h), 0);
	assert_true(h.type == 1 && h.start == 50 && h.end == 60);
	/* a connection carries one session */
	q = lk_req(33, 1, FL_GET, 2, 0, 99);
	assert_int_equal(cluster_client_lock(a, &q, &h), -EPROTO);
	cluster_client_close(a);
	a = open_client(1, 0);
	/* b's mount goes: its lock with it */
	cluster_client_close(b);
	q = lk_req(11, 1, FL_SET, 2, 0, 99);
	for (int i = 0; i < 100; i++) {
		if (cluster_client_lock(a, &q, &h) == 0)
			break;
		usleep(10 * 1000);   /* the home sees the close */
	}
	struct cluster_client *c = open_client(1, 0);
	struct frame_lock g = lk_req(44, 9, FL_GET, 2, 0, 99);
	assert_int_equal(cluster_client_lock(c, &g, &h), 0);
	assert_int_equal(h.type, 2);   /* a holds it now */
	assert_int_equal(h.pid, 1001);
	cluster_client_close(a);
	cluster_client_close(c);
}

struct lk_waiter {
	struct fs_locks *m;
	struct flock fl;
	atomic_bool stop;
	int rc;
	bool flock;
};

static bool lk_intr(void *arg)
{
	return atomic_load(&((struct lk_waiter *)arg)->stop);
}

static void *lk_wait_main(void *arg)
{
	struct lk_waiter *w = arg;
	w->rc = w->flock ? fs_locks_flock(w->m, 1, 9, 77, 4000, LOCK_EX, lk_intr, w) :
			   fs_locks_set(w->m, 1, 9, 77, 4000, &w->fl, true, lk_intr, w);
	return NULL;
}

static void mount_locks(void **state)
{
	(void)state;
	struct fs_locks *m1, *m2;
	assert_int_equal(fs_locks_open(&m1, &cfg, 1, 0), 0);
	assert_int_equal(fs_locks_open(&m2, &cfg, 2, 0), 0);
	/* home index 1: node 2 of the cluster file */
	struct flock w = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
			   .l_start = 100, .l_len = 50 };
	assert_int_equal(fs_locks_set(m1, 1, 9, 5, 3000, &w, false, NULL, NULL), 0);
	struct flock g = { .l_type = F_RDLCK, .l_whence = SEEK_SET,
			   .l_start = 0, .l_len = 0 };
	assert_int_equal(fs_locks_get(m2, 1, 9, 77, &g), 0);
	assert_int_equal(g.l_type, F_WRLCK);
	assert_true(g.l_start == 100 && g.l_len == 50 && g.l_pid == 3000);
	struct flock r = { .l_type = F_RDLCK, .l_whence = SEEK_SET,
			   .l_start = 120, .l_len = 1 };
	assert_int_equal(fs_locks_set(m2, 1, 9, 77, 4000, &r, false, NULL, NULL), -EAGAIN);

	/* F_SETLKW in a thread: it waits until m1 unlocks */
	struct lk_waiter lw = { .m = m2, .fl = r };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, lk_wait_main, &lw), 0);
	usleep(300 * 1000);
	struct flock un = { .l_type = F_UNLCK, .l_whence = SEEK_SET };
	assert_int_equal(fs_locks_set(m1, 1, 9, 5, 3000, &un, false, NULL, NULL), 0);
	pthread_join(t, NULL);
	assert_int_equal(lw.rc, 0);
	g = (struct flock){ .l_type = F_WRLCK, .l_whence = SEEK_SET };
	assert_int_equal(fs_locks_get(m1, 1, 9, 5, &g), 0);
	assert_true(g.l_type == F_RDLCK && g.l_start == 120 && g.l_pid == 4000);

	/* a wait interrupted holds nothing: m1's write lock waits on m2's
	 * read lock, is interrupted, and m2's unlock leaves nothing held */
	struct lk_waiter li = { .m = m1, .fl = w };
	li.fl.l_start = 0;
	li.fl.l_len = 0;
	assert_int_equal(pthread_create(&t, NULL, lk_wait_main, &li), 0);
	usleep(200 * 1000);
	atomic_store(&li.stop, true);
	pthread_join(t, NULL);
	assert_int_equal(li.rc, -EINTR);

	/* flock: a class of its own; LOCK_NB refused while m1 holds it */
	assert_int_equal(fs_locks_flock(m1, 1, 9, 6, 3000, LOCK_EX, NULL, NULL), 0);
	assert_int_equal(fs_locks_flock(m2, 1, 9, 78, 4000, LOCK_SH | LOCK_NB, NULL, NULL),
			 -EWOULDBLOCK);
	struct lk_waiter lf = { .m = m2, .flock = true };
	assert_int_equal(pthread_create(&t, NULL, lk_wait_main, &lf), 0);
	usleep(200 * 1000);
	/* m1's open file goes (release with flock_release) */
	fs_locks_release(m1, 1, 9, true, 6);
	pthread_join(t, NULL);
	assert_int_equal(lf.rc, 0);

	/* m2 goes away (killed): its locks go with its connections */
	fs_locks_close(m2);
	int rc = -EAGAIN;
	for (int i = 0; i < 100 && rc == -EAGAIN; i++) {
		rc = fs_locks_flock(m1, 1, 9, 6, 3000, LOCK_EX | LOCK_NB, NULL, NULL);
		if (rc == -EWOULDBLOCK)
			usleep(10 * 1000), rc = -EAGAIN;
	}
	assert_int_equal(rc, 0);
	g = (struct flock){ .l_type = F_WRLCK, .l_whence = SEEK_SET };
	assert_int_equal(fs_locks_get(m1, 1, 9, 999, &g), 0);
	assert_int_equal(g.l_type, F_UNLCK);  /* m2's read lock went too */
	struct fs_locks_stats st;
	fs_locks_stats(m1, &st);
	assert_true(st.waits == 2 && st.errors == 0);  /* the interrupted one, a flock */
	fs_locks_close(m1);
}

static void client_breaks_on_dead_node(void **state)
{
	static uint8_t page[FRAME_PAGE_SIZE];
	(void)state;

	struct cluster_client *c = open_client(1, 5);
	node_stop(nodes[0]);
	nodes[0] = NULL;
	int rc = cluster_client_page_store(c, 1, 1, page);
	assert_true(rc == -ECONNRESET || rc == -EPIPE);
	assert_int_equal(cluster_client_page_store(c, 1, 1, page), -ENOTCONN);
	cluster_client_close(c);
}

/* The congestion control fd uses. */
static void congestion_of(int fd, char *name, size_t len)
{
	socklen_t sl = (socklen_t)len;
	memset(name, 0, len);
	assert_int_equal(getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &sl), 0);
}

static bool kernel_has(const char *path, const char *name)
{
	char buf[256] = "";
	FILE *f = fopen(path, "r");
	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = 0;
		fclose(f);
	}
	for (char *t = strtok(buf, " \n"); t; t = strtok(NULL, " \n"))
		if (!strcmp(t, name))
			return true;
	return false;
}

/* One connection through conn_connect to a listener conn_prepare_socket
 * prepared: the congestion control of each end. */
static void connect_pair(char *client_cc, char *server_cc)
{
	uint16_t port;
	int lfd = listen_any(&port);
	conn_prepare_socket(lfd);   /* (after listen: only new connections) */
	struct conn c;
	assert_int_equal(conn_connect(&c, "127.0.0.1", port, 1000), 0);
	int afd = accept(lfd, NULL, NULL);
	assert_true(afd >= 0);
	congestion_of(c.fd, client_cc, 16);
	congestion_of(afd, server_cc, 16);
	close(afd);
	close(lfd);
	conn_close(&c);
}

static void congestion_control_set(void **state)
{
	char cc[16], sc[16], sys[16] = "";
	(void)state;

	if (!kernel_has("/proc/sys/net/ipv4/tcp_available_congestion_control", "cubic") ||
	    !kernel_has("/proc/sys/net/ipv4/tcp_available_congestion_control", "reno"))
		skip();
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_congestion_control", "r");
	assert_non_null(f);
	assert_non_null(fgets(sys, sizeof(sys), f));
	fclose(f);
	sys[strcspn(sys, "\n")] = 0;

	conn_set_congestion(NULL);            /* the default */
	connect_pair(cc, sc);
	if (geteuid() == 0 || kernel_has("/proc/sys/net/ipv4/tcp_allowed_congestion_control",
					 "cubic")) {
		assert_string_equal(cc, "cubic");
		assert_string_equal(sc, "cubic");
	}
	conn_set_congestion("reno");          /* allowed to everyone */
	connect_pair(cc, sc);
	assert_string_equal(cc, "reno");
	assert_string_equal(sc, "reno");
	conn_set_congestion("system");
	connect_pair(cc, sc);
	assert_string_equal(cc, sys);
	assert_string_equal(sc, sys);
	/* a name the kernel lacks: logged, the connection made anyway */
	conn_set_congestion("no-such-cc");
	connect_pair(cc, sc);
	assert_string_equal(cc, sys);
	conn_set_congestion(NULL);
}

/* An unprivileged process (a mount run by a user) where cubic is not in
 * net.ipv4.tcp_allowed_congestion_control: the default falls back to
 * reno, allowed to everyone, not to the machine's (BBR here). Run in a
 * child that gives up root; it reports by its exit status (no cmocka
 * there). */
static int unprivileged_child(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	char got[16] = "";
	struct conn c;

	if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
		return 10;
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(lfd, 4) || getsockname(lfd, (struct sockaddr *)&sa, &sl))
		return 11;
	conn_set_congestion(NULL);
	conn_prepare_socket(lfd);
	if (conn_connect(&c, "127.0.0.1", ntohs(sa.sin_port), 1000))
		return 12;
	sl = sizeof(got) - 1;
	if (getsockopt(c.fd, IPPROTO_TCP, TCP_CONGESTION, got, &sl))
		return 13;
	return strcmp(got, CONN_CONGESTION_UNPRIVILEGED) ? 14 : 0;
}

static void congestion_control_unprivileged(void **state)
{
	(void)state;

	/* root gives itself up in the child; where cubic is allowed to
	 * everyone there is no fallback to see */
	if (geteuid() != 0 ||
	    !kernel_has("/proc/sys/net/ipv4/tcp_available_congestion_control", "cubic") ||
	    kernel_has("/proc/sys/net/ipv4/tcp_allowed_congestion_control", "cubic"))
		skip();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(unprivileged_child());
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(pages_roundtrip_and_versions),
		cmocka_unit_test(parity_xor),
		cmocka_unit_test(node_table_shows_peers),
		cmocka_unit_test(capacity_limit),
		cmocka_unit_test(wrong_secret_refused),
		cmocka_unit_test(forged_proof_refused),
		cmocka_unit_test(bad_frames_after_auth),
		cmocka_unit_test(unauthenticated_request_refused),
		cmocka_unit_test(node_stats_over_the_wire),
		cmocka_unit_test(node_stats_client_checks),
		cmocka_unit_test(split_requests_pipelined),
		cmocka_unit_test(fetch_many_over_the_wire),
		cmocka_unit_test(store_many_over_the_wire),
		cmocka_unit_test(overwrite_forwards_parity),
		cmocka_unit_test(overwrites_pipelined),
		cmocka_unit_test(overwrite_many_forwards_parity),
		cmocka_unit_test(drop_many_over_the_wire),
		cmocka_unit_test(fetch_reply_checks),
		cmocka_unit_test(file_locks_over_the_wire),
		cmocka_unit_test(mount_locks),
		cmocka_unit_test(client_breaks_on_dead_node),
		cmocka_unit_test(congestion_control_set),
		cmocka_unit_test(congestion_control_unprivileged),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
