/* test_cluster_auth.c - the shared-secret handshake over a real socket
 * pair: same secret admits, a different secret is refused on both sides,
 * the admit hook can refuse, another protocol version is refused on
 * both sides, and proofs depend on every input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "cluster/auth.h"

static const uint8_t secret_a[] = "the-cluster-secret-aaaa";
static const uint8_t secret_b[] = "the-cluster-secret-bbbb";

struct side {
	struct conn c;
	struct auth_identity id;
	struct auth_peer peer;
	int rc;
	const char *why;
	bool refuse;
};

static int admit(void *arg, const struct auth_peer *p, const char **why)
{
	struct side *s = arg;
	if (s->refuse || p->node_id == 99) {
		*why = "unknown node id";
		return -EACCES;
	}
	return 0;
}

static void *server_thread(void *arg)
{
	struct side *s = arg;
	s->rc = auth_server(&s->c, &s->id, admit, s, &s->peer, &s->why);
	return NULL;
}

static void *client_thread(void *arg)
{
	struct side *s = arg;
	s->rc = auth_client(&s->c, &s->id, &s->peer, &s->why);
	return NULL;
}

static void run(struct side *cli, struct side *srv)
{
	int sv[2];
	pthread_t t;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	conn_init(&cli->c, sv[0]);
	conn_init(&srv->c, sv[1]);
	conn_set_timeout(&cli->c, 5000);
	conn_set_timeout(&srv->c, 5000);
	assert_int_equal(pthread_create(&t, NULL, server_thread, srv), 0);
	cli->rc = auth_client(&cli->c, &cli->id, &cli->peer, &cli->why);
	if (cli->rc)
		conn_close(&cli->c); /* unblock a server waiting for us */
	pthread_join(t, NULL);
	conn_close(&cli->c);
	conn_close(&srv->c);
}

/* One side s (its thread fn) against a raw connection *raw the test
 * drives frame by frame; join *t when done. */
static void against_raw(struct conn *raw, struct side *s, void *(*fn)(void *),
			pthread_t *t)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	conn_init(raw, sv[0]);
	conn_init(&s->c, sv[1]);
	conn_set_timeout(&s->c, 5000);
	assert_int_equal(pthread_create(t, NULL, fn, s), 0);
}

/* h sent on raw to the server side srv (its thread t): answered ERROR
 * with status, and the server's handshake ends with -EPROTO. */
static void server_refuses(struct conn *raw, struct frame_hdr *h, uint32_t status,
			   struct side *srv, pthread_t t)
{
	struct frame_hdr r;

	assert_int_equal(conn_send(raw, h, NULL), 0);
	assert_int_equal(conn_recv(raw, &r, NULL, NULL), 0);
	assert_int_equal(r.type, FT_ERROR);
	assert_int_equal(r.status, status);
	pthread_join(t, NULL);
	assert_int_equal(srv->rc, -EPROTO);
}

static void setup_sides(struct side *cli, struct side *srv, const uint8_t *ks,
			const uint8_t *kc)
{
	memset(cli, 0, sizeof(*cli));
	memset(srv, 0, sizeof(*srv));
	srv->id = (struct auth_identity){ 1, 111, ks, sizeof(secret_a) - 1 };
	cli->id = (struct auth_identity){ 2, 222, kc, sizeof(secret_a) - 1 };
}

static void same_secret_admits(void **state)
{
	static struct side cli, srv;
	(void)state;
	setup_sides(&cli, &srv, secret_a, secret_a);
	run(&cli, &srv);
	assert_int_equal(cli.rc, 0);
	assert_int_equal(srv.rc, 0);
	assert_int_equal(cli.peer.node_id, 1);
	assert_true(cli.peer.incarnation == 111);
	assert_int_equal(srv.peer.node_id, 2);
	assert_true(srv.peer.incarnation == 222);
}

static void wrong_secret_refused(void **state)
{
	static struct side cli, srv;
	(void)state;
	setup_sides(&cli, &srv, secret_a, secret_b);
	run(&cli, &srv);
	/* The client sees the server's proof fail first and hangs up. */
	assert_int_equal(cli.rc, -EACCES);
	assert_int_equal(srv.rc, -EACCES);
	assert_non_null(strstr(cli.why, "server failed to prove"));
}

static void admit_hook_refuses(void **state)
{
	static struct side cli, srv;
	(void)state;
	setup_sides(&cli, &srv, secret_a, secret_a);
	cli.id.node_id = 99;
	run(&cli, &srv);
	assert_int_equal(srv.rc, -EACCES);
	assert_string_equal(srv.why, "unknown node id");
	assert_int_equal(cli.rc, -EACCES);
}

static void not_hello_first(void **state)
{
	static struct side srv;
	static struct conn cli;
	struct frame_hdr h = { 0 };
	pthread_t t;
	(void)state;

	memset(&srv, 0, sizeof(srv));
	srv.id = (struct auth_identity){ 1, 111, secret_a, sizeof(secret_a) - 1 };
	against_raw(&cli, &srv, server_thread, &t);
	h.type = FT_PAGE_DROP;
	server_refuses(&cli, &h, FS_NOT_AUTHENTICATED, &srv, t);
	conn_close(&cli);
	conn_close(&srv.c);
}

/* A HELLO of another protocol version (version 1: a build before WRITER
 * and EXTEND) is refused with UNSUPPORTED, and a client told so says it. */
static void other_version_refused(void **state)
{
	static struct side srv, cli;
	static struct conn raw;
	struct frame_hdr h = { 0 }, r;
	pthread_t t;
	(void)state;

	setup_sides(&cli, &srv, secret_a, secret_a);
	against_raw(&raw, &srv, server_thread, &t);
	h.type = FT_HELLO;
	h.proto_version = AUTH_PROTO_VERSION - 1;
	server_refuses(&raw, &h, FS_UNSUPPORTED, &srv, t);
	assert_non_null(strstr(srv.why, "another protocol version"));
	conn_close(&raw);
	conn_close(&srv.c);

	/* the client's side: this build's HELLO, answered UNSUPPORTED */
	against_raw(&raw, &cli, client_thread, &t);
	assert_int_equal(conn_recv(&raw, &r, NULL, NULL), 0);
	assert_int_equal(r.type, FT_HELLO);
	assert_int_equal(r.proto_version, AUTH_PROTO_VERSION);
	conn_send_error(&raw, 1, FS_UNSUPPORTED, "unsupported protocol version");
	pthread_join(t, NULL);
	assert_int_equal(cli.rc, -EPROTONOSUPPORT);
	assert_non_null(strstr(cli.why, "another protocol version"));
	conn_close(&raw);
	conn_close(&cli.c);
}

static void proof_depends_on_inputs(void **state)
{
	uint8_t nc[FRAME_NONCE_LEN] = { 1 }, ns[FRAME_NONCE_LEN] = { 2 };
	uint8_t p0[32], p1[32];
	(void)state;

	auth_proof(secret_a, sizeof(secret_a) - 1, true, nc, ns, 1, 2, 3, 4, p0);
	auth_proof(secret_a, sizeof(secret_a) - 1, true, nc, ns, 1, 2, 3, 4, p1);
	assert_memory_equal(p0, p1, 32);
	auth_proof(secret_a, sizeof(secret_a) - 1, false, nc, ns, 1, 2, 3, 4, p1);
	assert_memory_not_equal(p0, p1, 32);
	auth_proof(secret_b, sizeof(secret_a) - 1, true, nc, ns, 1, 2, 3, 4, p1);
	assert_memory_not_equal(p0, p1, 32);
	auth_proof(secret_a, sizeof(secret_a) - 1, true, ns, nc, 1, 2, 3, 4, p1);
	assert_memory_not_equal(p0, p1, 32);
	auth_proof(secret_a, sizeof(secret_a) - 1, true, nc, ns, 1, 2, 3, 5, p1);
	assert_memory_not_equal(p0, p1, 32);
	/* nonces are random */
	uint8_t a[32], b[32];
	assert_int_equal(auth_random(a, 32), 0);
	assert_int_equal(auth_random(b, 32), 0);
	assert_memory_not_equal(a, b, 32);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(same_secret_admits),
		cmocka_unit_test(wrong_secret_refused),
		cmocka_unit_test(admit_hook_refuses),
		cmocka_unit_test(not_hello_first),
		cmocka_unit_test(other_version_refused),
		cmocka_unit_test(proof_depends_on_inputs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
