/* test_cluster_config.c - the cluster file parser and the secret loader:
 * good files, each kind of bad line, and secret file checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "cluster/config.h"

static struct cluster_config cfg;
static char err[256];

static void parse_good(void **state)
{
	(void)state;
	const char *text =
		"# a test cluster\n"
		"secret keys/secret   # relative to this file\n"
		"\n"
		"node 1 127.0.0.1:7001 mem=1G\n"
		"  node\t2 localhost:7002\n"
		"node 65535 [::1]:7003 mem=64M\r\n";
	assert_int_equal(config_parse_text(text, "/etc/nv/cluster.conf", &cfg, err,
					   sizeof(err)), 0);
	assert_int_equal(cfg.n_nodes, 3);
	assert_int_equal(cfg.nodes[0].id, 1);
	assert_string_equal(cfg.nodes[0].host, "127.0.0.1");
	assert_int_equal(cfg.nodes[0].port, 7001);
	assert_true(cfg.nodes[0].mem == 1ULL << 30);
	assert_string_equal(cfg.nodes[1].host, "localhost");
	assert_true(cfg.nodes[1].mem == 0);
	assert_false(cfg.nodes[1].mem_given);
	assert_true(cfg.nodes[0].mem_given);
	assert_string_equal(cfg.nodes[2].host, "::1");
	assert_int_equal(cfg.nodes[2].port, 7003);
	assert_string_equal(cfg.secret_path, "/etc/nv/keys/secret");
	assert_non_null(config_node_find(&cfg, 65535));
	assert_null(config_node_find(&cfg, 4));

	assert_int_equal(config_parse_text("secret s\nnode 1 :7001\nnode 2 7002\n",
					   "c", &cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg.nodes[0].host, "127.0.0.1");
	assert_int_equal(cfg.nodes[0].port, 7001);
	assert_string_equal(cfg.nodes[1].host, "127.0.0.1");
	assert_int_equal(cfg.nodes[1].port, 7002);
	assert_int_equal(config_parse_text("secret /abs\nnode 1 h:1\n", "c", &cfg,
					   err, sizeof(err)), 0);
	assert_string_equal(cfg.secret_path, "/abs");
	assert_int_equal(config_parse_text("secret s\nnode 1 h:1\n", "c", &cfg,
					   err, sizeof(err)), 0);
	assert_string_equal(cfg.secret_path, "./s");
	assert_string_equal(cfg.tcp_congestion, "");
	assert_int_equal(config_parse_text("secret s\ntcp_congestion reno\nnode 1 h:1\n",
					   "c", &cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg.tcp_congestion, "reno");
}

static void expect_bad(const char *text, const char *needle)
{
	err[0] = 0;
	assert_int_equal(config_parse_text(text, "c.conf", &cfg, err, sizeof(err)),
			 -EINVAL);
	if (!strstr(err, needle))
		fail_msg("error '%s' does not mention '%s'", err, needle);
}

static void parse_bad(void **state)
{
	(void)state;
	expect_bad("secret s\nnode 0 h:1\n", "c.conf:2: node id");
	expect_bad("secret s\nnode 65536 h:1\n", "node id");
	expect_bad("secret s\nnode -1 h:1\n", "node id");
	expect_bad("secret s\nnode x h:1\n", "node id");
	expect_bad("secret s\nnode 1\n", "expected 'node ID");
	expect_bad("secret s\nnode 1 h\n", "not HOST:PORT");
	expect_bad("secret s\nnode 1 :\n", "not HOST:PORT");
	expect_bad("secret s\nnode 1 :x1\n", "not HOST:PORT");
	expect_bad("secret s\nnode 1 h:0\n", "not HOST:PORT");
	expect_bad("secret s\nnode 1 h:70000\n", "not HOST:PORT");
	expect_bad("secret s\nnode 1 h:12x\n", "not HOST:PORT");
	expect_bad("secret s\nnode 1 ::1:5\n", "not HOST:PORT");
	expect_bad("secret s\nnode 1 [::1]5\n", "not HOST:PORT");
	expect_bad("secret s\nnode 1 h:1 mem=lots\n", "bad size");
	expect_bad("secret s\nnode 1 h:1 cpu=4\n", "unknown node option");
	expect_bad("secret s\nnode 1 h:1\nnode 1 h:2\n", "c.conf:3: node 1 listed twice");
	expect_bad("secret s\nnode 1 h:1\nnode 2 h:1\n", "share h:1");
	expect_bad("secret s\nnodes 1 h:1\n", "unknown keyword 'nodes'");
	expect_bad("secret s\nsecret t\nnode 1 h:1\n", "second 'secret'");
	expect_bad("secret\nnode 1 h:1\n", "expected 'secret FILE'");
	expect_bad("node 1 h:1\n", "no 'secret FILE'");
	expect_bad("secret s\n# only comments\n", "no 'node' lines");
	expect_bad("", "no 'node' lines");
	expect_bad("secret s\nnode 1 h:1\ntcp_congestion\n", "expected 'tcp_congestion NAME'");
	expect_bad("secret s\nnode 1 h:1\ntcp_congestion a b\n", "expected 'tcp_congestion NAME'");
	expect_bad("secret s\nnode 1 h:1\ntcp_congestion abcdefghijklmnopq\n",
		   "expected 'tcp_congestion NAME'");
	expect_bad("secret s\nnode 1 h:1\ntcp_congestion reno\ntcp_congestion bbr\n",
		   "second 'tcp_congestion'");

	/* More nodes than the cap. */
	char *big = malloc(100 * 40);
	size_t n = (size_t)sprintf(big, "secret s\n");
	for (int i = 1; i <= CONFIG_MAX_NODES + 1; i++)
		n += (size_t)sprintf(big + n, "node %d h:%d\n", i, 1000 + i);
	expect_bad(big, "more than");
	free(big);

	/* An over-long line. */
	char *longl = malloc(3000);
	memset(longl, 'a', 2999);
	longl[2999] = 0;
	expect_bad(longl, "line too long");
	free(longl);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	assert_int_equal(chmod(path, mode), 0);
}

static void secret_and_load(void **state)
{
	char dir[] = "/tmp/nvcfg.XXXXXX", path[256], sec[256];
	(void)state;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/cluster.conf", dir);
	snprintf(sec, sizeof(sec), "%s/secret", dir);
	write_file(path, "secret secret\nnode 1 127.0.0.1:7001\n", 0644);

	assert_int_equal(config_load(path, &cfg, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "secret"));

	write_file(sec, "0123456789abcdef0123\n\n", 0600);
	assert_int_equal(config_load(path, &cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.secret_len, 20); /* trailing newlines dropped */
	assert_memory_equal(cfg.secret, "0123456789abcdef0123", 20);

	chmod(sec, 0644);
	assert_int_equal(config_load(path, &cfg, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "chmod 600"));

	write_file(sec, "short\n", 0600);
	assert_int_equal(config_load(path, &cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "bytes"));

	unlink(sec);
	assert_int_equal(mkdir(sec, 0700), 0);
	assert_int_equal(config_load(path, &cfg, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a regular file"));
	rmdir(sec);

	char missing[300];
	snprintf(missing, sizeof(missing), "%s/nope.conf", dir);
	assert_int_equal(config_load(missing, &cfg, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "nope.conf"));

	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parse_good),
		cmocka_unit_test(parse_bad),
		cmocka_unit_test(secret_and_load),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
