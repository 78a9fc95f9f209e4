/* test_ctl.c - control sockets: request/reply, unknown commands, a second
 * daemon refused, a stale socket replaced, oversize commands cut off,
 * idle clients that do not hold up the others. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/ctl.h"

static char dir[64];
static int calls;

static ssize_t handler(void *arg, const char *cmd, char *out, size_t len)
{
	calls++;
	if (!strcmp(cmd, "stats"))
		return snprintf(out, len, "hits: %d\n", *(int *)arg);
	return -ENOENT;
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/nvtest-ctl-%d", (int)getpid());
	setenv("NVCACHE_RUN_DIR", dir, 1);
	calls = 0;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rmdir(dir);
	return 0;
}

static void names(void **state)
{
	char b[64];
	(void)state;
	ctl_name_from_path("/mnt/nvcache/", b, sizeof(b));
	assert_string_equal(b, "mnt-nvcache");
	ctl_name_from_path("/", b, sizeof(b));
	assert_string_equal(b, "root");
	ctl_name_from_path("//a//b", b, sizeof(b));
	assert_string_equal(b, "a-b");
}

static void request_reply(void **state)
{
	struct ctl_server *s, *s2;
	char path[128], out[256];
	int hits = 42;
	(void)state;

	assert_int_equal(ctl_server_start(&s, "fs", "t1", handler, &hits), 0);
	assert_int_equal(ctl_socket_path("fs", "t1", path, sizeof(path)), 0);
	assert_true(ctl_request(path, "stats", out, sizeof(out), 2000) > 0);
	assert_string_equal(out, "hits: 42\n");
	assert_true(ctl_request(path, "bogus", out, sizeof(out), 2000) > 0);
	assert_non_null(strstr(out, "error: bogus: unknown command"));
	assert_true(ctl_request(path, "ping", out, sizeof(out), 2000) > 0);
	assert_string_equal(out, "pong\n");
	assert_int_equal(calls, 2);
	/* A second daemon under the same name is refused while the first lives. */
	assert_int_equal(ctl_server_start(&s2, "fs", "t1", handler, &hits), -EADDRINUSE);
	ctl_server_stop(s);
	assert_int_equal(ctl_request(path, "stats", out, sizeof(out), 500), -ENOENT);
}

static void stale_socket_replaced(void **state)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ctl_server *s;
	char out[64];
	int hits = 7, fd;
	(void)state;

	/* A socket file left by a killed daemon: bound, nobody listening. */
	mkdir(dir, 0700);
	assert_int_equal(ctl_socket_path("swap", "t2", sa.sun_path, sizeof(sa.sun_path)), 0);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	assert_int_equal(ctl_server_start(&s, "swap", "t2", handler, &hits), 0);
	assert_true(ctl_request(sa.sun_path, "stats", out, sizeof(out), 2000) > 0);
	assert_string_equal(out, "hits: 7\n");
	ctl_server_stop(s);
}

static void oversize_command(void **state)
{
	struct ctl_server *s;
	char path[128], out[64], big[CTL_MAX_CMD + 10];
	int hits = 1;
	(void)state;

	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	assert_int_equal(ctl_server_start(&s, "node", "t3", handler, &hits), 0);
	assert_int_equal(ctl_socket_path("node", "t3", path, sizeof(path)), 0);
	assert_int_equal(ctl_request(path, big, out, sizeof(out), 2000), -E2BIG);
	ctl_server_stop(s);
}

/* Clients that connect and say nothing: each used to hold the server
 * 2 s, one after the other, so three delayed every request by 6 s. Now
 * they wait beside it and a request is answered at once; the silent ones
 * are dropped after 2 s. */
static void idle_clients_do_not_block(void **state)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ctl_server *s;
	char out[64], buf[8];
	int hits = 5, idle[3];
	(void)state;

	assert_int_equal(ctl_server_start(&s, "fs", "t4", handler, &hits), 0);
	assert_int_equal(ctl_socket_path("fs", "t4", sa.sun_path, sizeof(sa.sun_path)), 0);
	for (int i = 0; i < 3; i++) {
		idle[i] = socket(AF_UNIX, SOCK_STREAM, 0);
		assert_int_equal(connect(idle[i], (struct sockaddr *)&sa, sizeof(sa)), 0);
	}
	/* 1.5 s: less than even one idle client's 2 s used to take. */
	assert_true(ctl_request(sa.sun_path, "stats", out, sizeof(out), 1500) > 0);
	assert_string_equal(out, "hits: 5\n");
	/* The silent ones are closed by the server (read sees EOF). */
	for (int i = 0; i < 3; i++) {
		struct timeval tv = { .tv_sec = 5 };
		setsockopt(idle[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		assert_int_equal(read(idle[i], buf, sizeof(buf)), 0);
		close(idle[i]);
	}
	ctl_server_stop(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(names),
		cmocka_unit_test_setup_teardown(request_reply, setup, teardown),
		cmocka_unit_test_setup_teardown(stale_socket_replaced, setup, teardown),
		cmocka_unit_test_setup_teardown(oversize_command, setup, teardown),
		cmocka_unit_test_setup_teardown(idle_clients_do_not_block, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
