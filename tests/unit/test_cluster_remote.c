/* test_cluster_remote.c - the remote swap backend against three real nodes
 * in this process: byte-exact reads after aligned and unaligned writes,
 * pages spread over the nodes, trim, mirror failover and re-mirroring when
 * a node stops, (without mirror) the read errors that mirroring
 * prevents, migration off a node that shrinks, and copies a node's
 * failing flash lost dropped there, not left behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "flash_fail.h"
#include "tier_files.h"

#include "cluster/client.h"
#include "cluster/node.h"
#include "cluster/remote_backend.h"
#include "common/log.h"
#include "pmem/tierstore.h"

#define NMAX 4
#define DEV (4u << 20)

static struct cluster_config cfg;
static struct node *nodes[NMAX];
static int nn = 3;      /* nodes in the cluster file (a test may use NMAX) */
static uint8_t shadow[DEV], got[DEV];
/* A node whose pages live in a tiered store (NULL: DRAM). */
static const struct tierstore_opts *tier_for[NMAX];
static char stats[8192];

static int listen_any(uint16_t *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	/* as nvcached does: a restarted node rebinds while old connections
	 * of its port are still closing */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 64), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

static int listen_on(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 64), 0);
	return fd;
}

static void restart_node(int i)
{
	node_stop(nodes[i]);
	struct node_opts o = {
		.cfg = &cfg, .self = (uint32_t)i + 1, .heartbeat_ms = 50,
		.timeout_ms = 300, .listen_fd = listen_on(cfg.nodes[i].port),
	};
	assert_int_equal(node_start(&nodes[i], &o), 0);
}

static void start_nodes(void)
{
	char text[512], err[256];
	int fds[NMAX], at;
	uint16_t ports[NMAX];

	for (int i = 0; i < nn; i++)
		fds[i] = listen_any(&ports[i]);
	at = snprintf(text, sizeof(text), "secret s\n");
	for (int i = 0; i < nn; i++)
		at += snprintf(text + at, sizeof(text) - (size_t)at, "node %d 127.0.0.1:%u\n",
			       i + 1, ports[i]);
	assert_int_equal(config_parse_text(text, "test", &cfg, err, sizeof(err)), 0);
	memcpy(cfg.secret, "remote-backend-test-secret", 26);
	cfg.secret_len = 26;
	for (int i = 0; i < nn; i++) {
		struct node_opts o = {
			.cfg = &cfg, .self = (uint32_t)i + 1, .heartbeat_ms = 50,
			.timeout_ms = 300, .listen_fd = fds[i], .tier = tier_for[i],
		};
		assert_int_equal(node_start(&nodes[i], &o), 0);
	}
}

static void stop_nodes(void)
{
	for (int i = 0; i < NMAX; i++) {
		node_stop(nodes[i]);
		nodes[i] = NULL;
	}
}

static uint64_t rnd(void)
{
	static uint64_t x = 88172645463325252ULL;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return x;
}

#define RUN (64 * 4096)  /* a run of whole pages, as the kernel writes */

/* len random bytes written at off, and into the shadow. */
static void write_random(struct remote_backend *rb, uint64_t off, uint32_t len)
{
	static uint8_t buf[65 * 4096];
	assert_true(len <= sizeof(buf));
	for (uint32_t i = 0; i < len; i++)
		buf[i] = (uint8_t)rnd();
	assert_int_equal(remote_write(rb, buf, off, len), 0);
	memcpy(shadow + off, buf, len);
}

static void scribble(struct remote_backend *rb, int n)
{
	for (int k = 0; k < n; k++) {
		uint32_t len = (uint32_t)(512 * (1 + rnd() % 24));
		uint64_t off = (rnd() % (DEV / 512)) * 512;
		if (off + len > DEV)
			off = DEV - len;
		write_random(rb, off, len);
	}
}

static void check_all(struct remote_backend *rb)
{
	memset(got, 0xee, sizeof(got));
	/* in 64 KiB reads, and one unaligned read */
	for (uint32_t off = 0; off < DEV; off += 65536)
		assert_int_equal(remote_read(rb, got + off, off, 65536), 0);
	assert_memory_equal(got, shadow, DEV);
	assert_int_equal(remote_read(rb, got, 1000, 9000), 0);
	assert_memory_equal(got, shadow + 1000, 9000);
}

static uint64_t stat(struct remote_backend *rb, const char *key)
{
	ssize_t n = remote_stats(rb, stats, sizeof(stats) - 1);
	assert_true(n > 0);
	stats[n] = 0;
	char *p = strstr(stats, key);
	assert_non_null(p);
	return strtoull(p + strlen(key), NULL, 10);
}

static uint64_t node_stat(int i, const char *key)
{
	ssize_t n = node_ctl(nodes[i], "stats", stats, sizeof(stats) - 1);
	assert_true(n > 0);
	stats[n] = 0;
	char *p = strstr(stats, key);
	assert_non_null(p);
	return strtoull(p + strlen(key), NULL, 10);
}

static struct remote_backend *open_rb(enum remote_redundancy red)
{
	struct remote_backend *rb = NULL;
	struct remote_opts o = {
		.cfg = &cfg, .self_node = 0, .owner = 42, .size = DEV,
		.redundancy = red, .conns_per_node = 2, .timeout_ms = 2000,
		.refresh_ms = 100,
	};
	assert_int_equal(remote_open(&rb, &o), 0);
	return rb;
}

static void mirror_roundtrip_failover(void **state)
{
	(void)state;
	start_nodes();
	memset(shadow, 0, sizeof(shadow));
	struct remote_backend *rb = open_rb(REMOTE_MIRROR);

	/* never written: zeros */
	check_all(rb);
	/* runs of 64 pages, on new slots, then over the same in use: both
	 * copies of every page travel in the run's few requests (one per
	 * node), not a request per copy; each node then holds exactly the
	 * copies the map says */
	uint64_t req0 = 0, req1 = 0, held = 0;
	for (int i = 0; i < 3; i++)
		req0 += node_stat(i, "requests: ");
	for (uint32_t r = 0; r < 6; r++) {
		write_random(rb, (uint64_t)(r % 3) * 2 * RUN + 4096, RUN);
	}
	for (int i = 0; i < 3; i++) {
		req1 += node_stat(i, "requests: ");
		held += node_stat(i, "pages_data: ");
	}
	assert_true(req1 - req0 < 6 * 64);     /* a copy each: 768 */
	assert_int_equal(stat(rb, "remote_slots_mapped: "), 3 * 64);
	assert_int_equal(held, 2 * 3 * 64);
	check_all(rb);
	scribble(rb, 400);
	check_all(rb);
	/* two copies of every mapped slot, spread over all three nodes */
	uint64_t mapped = stat(rb, "remote_slots_mapped: ");
	assert_true(mapped > 100);
	uint64_t placed = 0;
	for (int i = 1; i <= 3; i++) {
		char key[64];
		snprintf(key, sizeof(key), "remote_node.%d: up free_pages=", i);
		assert_non_null(strstr(stats, key));
		char *p = strstr(strstr(stats, key), "placed=");
		uint64_t pl = strtoull(p + 7, NULL, 10);
		assert_true(pl > mapped / 10); /* every node got a share */
		placed += pl;
	}
	assert_true(placed >= 2 * mapped);

	/* trim: whole slots dropped, edges zeroed */
	assert_int_equal(remote_trim(rb, 4096 * 10 + 100, 4096 * 20), 0);
	memset(shadow + 4096 * 10 + 100, 0, 4096 * 20);
	check_all(rb);
	assert_true(stat(rb, "remote_slots_mapped: ") <= mapped);

	/* a node stops: every page is still read (from its mirror), and the
	 * lost copies are re-created on the surviving nodes */
	node_stop(nodes[1]);
	nodes[1] = NULL;
	/* the backend learns it from the node table (timeout 300 ms) and
	 * rebuilds in the background; reads meanwhile fail over */
	check_all(rb);
	for (int i = 0; i < 100 && stat(rb, "remote_rebuild_passes: ") == 0; i++)
		usleep(20000);
	assert_true(stat(rb, "remote_rebuild_passes: ") > 0);
	assert_true(stat(rb, "remote_remirrors: ") > 0);
	assert_int_equal(stat(rb, "remote_read_errors: "), 0);
	/* writing goes on, on the two nodes left */
	scribble(rb, 100);
	check_all(rb);
	/* a second node stops: the re-mirrored copies on node 3 carry every
	 * page */
	node_stop(nodes[0]);
	nodes[0] = NULL;
	check_all(rb);
	assert_int_equal(stat(rb, "remote_read_errors: "), 0);
	/* with one node left, mirroring cannot place a second copy */
	static uint8_t page[4096];
	int rc = remote_write(rb, page, 0, 4096);
	assert_true(rc == -ENOSPC || rc == -EIO);

	assert_int_equal(remote_read(rb, page, DEV - 100, 4096), -EINVAL);
	assert_int_equal(remote_write(rb, page, DEV, 1), -EINVAL);
	remote_close(rb);
	stop_nodes();
}

static void no_redundancy_loses_pages(void **state)
{
	(void)state;
	start_nodes();
	memset(shadow, 0, sizeof(shadow));
	struct remote_backend *rb = open_rb(REMOTE_NONE);
	scribble(rb, 300);
	check_all(rb);
	node_stop(nodes[2]);
	nodes[2] = NULL;
	/* some pages lived only on node 3 */
	int errors = 0;
	for (uint32_t off = 0; off < DEV; off += 4096)
		if (remote_read(rb, got, off, 4096) == -EIO)
			errors++;
	assert_true(errors > 0);
	assert_true(stat(rb, "remote_read_errors: ") > 0);
	/* new whole-page writes go to the nodes left and read back */
	static uint8_t page[4096], back[4096];
	for (uint32_t off = 0; off < DEV; off += 4096 * 7) {
		memset(page, (int)(off / 4096), sizeof(page));
		assert_int_equal(remote_write(rb, page, off, 4096), 0);
		assert_int_equal(remote_read(rb, back, off, 4096), 0);
		assert_memory_equal(page, back, 4096);
	}
	remote_close(rb);
	stop_nodes();
}

/* A node restarts faster than the failure detector notices: the new
 * incarnation tells the backend its copies are gone. */
static void quick_restart_rebuilds(void **state)
{
	(void)state;
	start_nodes();
	memset(shadow, 0, sizeof(shadow));
	struct remote_backend *rb = open_rb(REMOTE_MIRROR);
	scribble(rb, 300);
	check_all(rb);
	restart_node(0);
	check_all(rb);
	for (int i = 0; i < 100 && stat(rb, "remote_rebuild_passes: ") == 0; i++)
		usleep(20000);
	assert_true(stat(rb, "remote_remirrors: ") > 0);
	assert_int_equal(stat(rb, "remote_read_errors: "), 0);
	/* now the other two stop: node 1's new copies carry what they held */
	node_stop(nodes[1]);
	nodes[1] = NULL;
	check_all(rb);
	assert_int_equal(stat(rb, "remote_read_errors: "), 0);
	remote_close(rb);
	stop_nodes();
}

/* Pages an earlier device with the same owner left behind: dropped at
 * open, and a leftover with a newer version never blocks a write. */
static void leftovers_of_earlier_device(void **state)
{
	static uint8_t page[4096], back[4096];
	char err[256];
	(void)state;

	start_nodes();
	memset(shadow, 0, sizeof(shadow));
	struct remote_backend *rb = open_rb(REMOTE_NONE);
	scribble(rb, 100);
	remote_close(rb);               /* a clean stop drops its pages */
	uint64_t held = 0;
	for (int i = 0; i < nn; i++) {
		ssize_t n = node_ctl(nodes[i], "stats", stats, sizeof(stats) - 1);
		stats[n] = 0;
		held += strtoull(strstr(stats, "pages_data: ") + 12, NULL, 10);
	}
	assert_int_equal(held, 0);
	/* a crashed device's pages (owner 42), stored as it would have */
	memset(page, 0x55, sizeof(page));
	for (uint32_t id = 1; id <= (uint32_t)nn; id++) {
		struct cluster_client *c;
		assert_int_equal(cluster_client_open_node(&c, &cfg, id, 0, 42, 2000, err,
							  sizeof(err)), 0);
		for (uint64_t slot = 0; slot < 10; slot++)
			assert_int_equal(cluster_client_page_store(c, slot, 1, page), 0);
		cluster_client_close(c);
	}
	rb = open_rb(REMOTE_NONE);      /* resets owner 42 everywhere */
	/* at open, or (a node slow to answer then) in the background */
	for (int i = 0; i < nn; i++) {
		for (int t = 0; t < 100; t++) {
			ssize_t n = node_ctl(nodes[i], "stats", stats, sizeof(stats) - 1);
			stats[n] = 0;
			if (strstr(stats, "pages_data: 0\n"))
				break;
			usleep(50000);
		}
		assert_non_null(strstr(stats, "pages_data: 0\n"));
	}
	/* a leftover at version 1000 on every node for slot 5 */
	memset(page, 0x77, sizeof(page));
	for (uint32_t id = 1; id <= (uint32_t)nn; id++) {
		struct cluster_client *c;
		assert_int_equal(cluster_client_open_node(&c, &cfg, id, 0, 42, 2000, err,
							  sizeof(err)), 0);
		assert_int_equal(cluster_client_page_store(c, 5, 1000, page), 0);
		cluster_client_close(c);
	}
	memset(page, 0x11, sizeof(page));
	assert_int_equal(remote_write(rb, page, 5 * 4096, 4096), 0);
	assert_int_equal(remote_read(rb, back, 5 * 4096, 4096), 0);
	assert_memory_equal(page, back, 4096);
	remote_close(rb);
	stop_nodes();
}

/* No node has room: pages go to the local spill file, come back intact,
 * and move to the nodes again once they have room. */
static void spill_when_no_room(void **state)
{
	static uint8_t page[4096], back[4096];
	char path[] = "/var/tmp/nvspill.XXXXXX";
	(void)state;

	start_nodes();
	for (int i = 0; i < nn; i++)
		assert_true(node_ctl(nodes[i], "limit 8K", stats, sizeof(stats)) > 0);
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	struct remote_backend *rb = NULL;
	struct remote_opts o = {
		.cfg = &cfg, .owner = 43, .size = DEV, .redundancy = REMOTE_NONE,
		.timeout_ms = 2000, .refresh_ms = 50, .spill_path = path,
	};
	/* never on tmpfs */
	o.spill_path = "/dev/shm/nvspill-test";
	assert_int_equal(remote_open(&rb, &o), -EINVAL);
	unlink("/dev/shm/nvspill-test");
	o.spill_path = path;
	assert_int_equal(remote_open(&rb, &o), 0);

	for (uint32_t p = 0; p < 20; p++) {
		memset(page, (int)p + 1, sizeof(page));
		assert_int_equal(remote_write(rb, page, p * 4096, 4096), 0);
	}
	assert_true(stat(rb, "remote_slots_spilled: ") >= 14);
	for (uint32_t p = 0; p < 20; p++) {
		memset(page, (int)p + 1, sizeof(page));
		assert_int_equal(remote_read(rb, back, p * 4096, 4096), 0);
		assert_memory_equal(page, back, 4096);
	}
	/* trim a spilled slot: zeros */
	assert_int_equal(remote_trim(rb, 19 * 4096, 4096), 0);
	assert_int_equal(remote_read(rb, back, 19 * 4096, 4096), 0);
	memset(page, 0, sizeof(page));
	assert_memory_equal(page, back, 4096);
	/* room again: overwrites go to the nodes, the spill empties */
	for (int i = 0; i < nn; i++)
		assert_true(node_ctl(nodes[i], "limit 0", stats, sizeof(stats)) > 0);
	usleep(400000); /* heartbeats carry the new offers, then a refresh */
	for (uint32_t p = 0; p < 19; p++) {
		memset(page, (int)p + 101, sizeof(page));
		assert_int_equal(remote_write(rb, page, p * 4096, 4096), 0);
	}
	assert_int_equal(stat(rb, "remote_slots_spilled: "), 0);
	for (uint32_t p = 0; p < 19; p++) {
		memset(page, (int)p + 101, sizeof(page));
		assert_int_equal(remote_read(rb, back, p * 4096, 4096), 0);
		assert_memory_equal(page, back, 4096);
	}
	remote_close(rb);
	unlink(path);
	/* without a spill file, a write with no room anywhere fails */
	for (int i = 0; i < nn; i++)
		assert_true(node_ctl(nodes[i], "limit 4K", stats, sizeof(stats)) > 0);
	o.spill_path = NULL;
	o.owner = 44;
	assert_int_equal(remote_open(&rb, &o), 0);
	int rc = 0;
	for (uint32_t p = 0; p < 20 && !rc; p++)
		rc = remote_write(rb, page, p * 4096, 4096);
	assert_int_equal(rc, -ENOSPC);
	remote_close(rb);
	stop_nodes();
}


/* A node shrunk to nothing ("shrink 0"): the backend migrates every copy
 * it had there to the other nodes while I/O goes on, and nothing is lost;
 * "grow" lifts the cap. */
static void shrink_migrates(void **state)
{
	(void)state;
	start_nodes();
	memset(shadow, 0, sizeof(shadow));
	struct remote_backend *rb = open_rb(REMOTE_MIRROR);

	assert_int_equal(node_ctl(nodes[2], "shrink lots", stats, sizeof(stats)), -EINVAL);
	scribble(rb, 400);
	uint64_t before = node_stat(2, "pages_data: ");
	assert_true(before > 10);
	/* a partial shrink moves the excess only */
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "shrink %" PRIu64 "K", before / 2 * 4);
	assert_true(node_ctl(nodes[2], cmd, stats, sizeof(stats)) > 0);
	for (int i = 0; i < 200 && node_stat(2, "pages: ") > before / 2; i++)
		usleep(50000);
	assert_true(node_stat(2, "pages: ") <= before / 2);
	assert_true(node_stat(2, "pages: ") >= before / 2 - 2);
	check_all(rb);
	assert_true(node_ctl(nodes[2], "shrink 0", stats, sizeof(stats)) > 0);
	assert_int_equal(node_stat(2, "offered_bytes: "), 0);
	assert_int_equal(node_stat(2, "shrink_cap_bytes: "), 0);
	/* writes go on meanwhile; the node empties (bounded wait) */
	for (int i = 0; i < 200 && node_stat(2, "pages: ") > 0; i++) {
		scribble(rb, 5);
		usleep(50000);
	}
	assert_int_equal(node_stat(2, "pages: "), 0);
	check_all(rb);
	assert_true(stat(rb, "remote_migrations: ") > 0);
	assert_int_equal(stat(rb, "remote_read_errors: "), 0);
	/* both copies of every slot, on the two other nodes */
	uint64_t mapped = stat(rb, "remote_slots_mapped: ");
	assert_int_equal(node_stat(0, "pages_data: ") + node_stat(1, "pages_data: "),
			 2 * mapped);
	assert_true(node_ctl(nodes[2], "grow", stats, sizeof(stats)) > 0);
	assert_true(node_stat(2, "offered_bytes: ") > 0);
	ssize_t n = node_ctl(nodes[2], "stats", stats, sizeof(stats) - 1);
	stats[n] = 0;
	assert_non_null(strstr(stats, "shrink_cap_bytes: none\n"));
	remote_close(rb);
	stop_nodes();
}

/* Runs of whole pages with parity when one data node is left to take
 * pages (node 1 holds parity, node 3 gave its memory back): every page of
 * a 64-page run opens a group of its own, after the pool entry's open
 * group that already has a member there; the run's groups and parity
 * pages are bounded (the sanitizer build catches an overrun), and every
 * page reads back. */
static void parity_runs_one_data_node(void **state)
{
	(void)state;
	start_nodes();
	memset(shadow, 0, sizeof(shadow));
	struct remote_backend *rb = open_rb(REMOTE_PARITY);
	/* one page into each pool entry's open group (groups of 2: each
	 * stays open), on nodes 2 and 3 */
	for (uint32_t p = 0; p < 4; p++) {
		write_random(rb, p * 2 * 4096, 4096);
	}
	assert_true(node_ctl(nodes[2], "shrink 0", stats, sizeof(stats)) > 0);
	usleep(600000);         /* the backend's refresh sees it */
	for (uint32_t r = 0; r < 8; r++) {
		write_random(rb, (64 + (uint64_t)r * 64) * 4096, 64 * 4096);
	}
	check_all(rb);
	assert_int_equal(stat(rb, "remote_read_errors: "), 0);
	assert_int_equal(stat(rb, "remote_write_errors: "), 0);
	remote_close(rb);
	stop_nodes();
}

/* TRIMs with parity, batched (trim_groups), over four nodes (node 1 the
 * parity node, groups of 3, one member on each data node): ranges that
 * cut groups in two, cover whole groups and cross a batch's end, single
 * pages, and pages of groups still open (each run of 65 pages, in its own
 * pool entry, leaves a group of two open in the backend's buffer: 64
 * leaves {63, 64}, 258 and 259 empty theirs). Every
 * trimmed slot is unmapped and reads zeros. Then a data node stops and,
 * before the backend knows, one member of each of 40 more groups is
 * trimmed: those on the stopped node cannot be fetched, and their groups
 * go the page-by-page way (rebuilt to be taken out). Every page left is
 * then read, those of the stopped node rebuilt from their groups, which
 * works only if each group's parity (or open buffer) took out exactly
 * its trimmed members. Once for each data node. */
static void parity_trims_keep_groups(void **state)
{
	static const uint32_t cut[][2] = { { 11, 40 }, { 64, 1 }, { 101, 1 },
					   { 140, 60 }, { 258, 2 } };
	(void)state;
	nn = 4;
	for (int victim = 1; victim < 4; victim++) {
		start_nodes();
		memset(shadow, 0, sizeof(shadow));
		struct remote_backend *rb = open_rb(REMOTE_PARITY);
		for (uint32_t r = 0; r < 4; r++) {
			write_random(rb, (uint64_t)r * 65 * 4096, 65 * 4096);
		}
		uint64_t mapped = stat(rb, "remote_slots_mapped: ");
		uint64_t upd = stat(rb, "parity_updates: ");
		uint64_t trimmed = 0;
		for (unsigned c = 0; c < sizeof(cut) / sizeof(cut[0]); c++) {
			assert_int_equal(remote_trim(rb, (uint64_t)cut[c][0] * 4096,
						     (uint64_t)cut[c][1] * 4096), 0);
			memset(shadow + (uint64_t)cut[c][0] * 4096, 0, (size_t)cut[c][1] * 4096);
			trimmed += cut[c][1];
		}
		assert_int_equal(stat(rb, "remote_slots_mapped: "), mapped - trimmed);
		/* groups cut in two sent deltas; emptied ones nothing */
		assert_true(stat(rb, "parity_updates: ") > upd);
		check_all(rb);
		/* the emptied groups' parity pages were dropped (with the
		 * data pages' drops): the parity node holds one per closed
		 * group, the pool's open ones (at most 4) none; waited for,
		 * as merging sparse groups moves pages in the background */
		bool even = false;
		for (int w = 0; w < 100 && !even; w++) {
			uint64_t pp = node_stat(0, "pages_parity: ");
			uint64_t ng = stat(rb, "parity_groups: ");
			even = pp <= ng && pp + 4 >= ng;
			if (!even)
				usleep(20000);
		}
		assert_true(even);

		node_stop(nodes[victim]);
		nodes[victim] = NULL;
		uint64_t rec = stat(rb, "parity_reconstructs: ");
		for (uint32_t p = 66; p < 256; p += 3) {
			if ((p > 100 && p < 103) || (p >= 140 && p < 200))
				continue;       /* trimmed above */
			assert_int_equal(remote_trim(rb, (uint64_t)p * 4096, 4096), 0);
			memset(shadow + (uint64_t)p * 4096, 0, 4096);
		}
		assert_true(stat(rb, "parity_reconstructs: ") > rec);
		check_all(rb);
		assert_int_equal(stat(rb, "remote_read_errors: "), 0);
		remote_close(rb);
		stop_nodes();
	}
	nn = 3;
}

/* The parity page of each group a run fills travels with the run's data
 * pages (spec_parity), and is kept only if the group came out as planned.
 * Over four nodes (node 1 the parity node, groups of 3): runs written
 * normally keep theirs. Then a data node refuses new pages before the
 * backend knows (limit), so the runs' pages planned onto it go elsewhere
 * one by one and their groups come out with other members: each such
 * group's page sent with the run is wrong, and must be replaced. Another
 * data node then stops, and every page is read: those on it are rebuilt
 * from their groups' parity, which works only if no wrong page was kept. */
static void parity_pages_sent_with_runs(void **state)
{
	(void)state;
	nn = 4;
	start_nodes();
	memset(shadow, 0, sizeof(shadow));
	struct remote_backend *rb = open_rb(REMOTE_PARITY);
	for (uint32_t r = 0; r < 8; r++) {
		write_random(rb, (uint64_t)r * RUN, RUN);
	}
	uint64_t kept = stat(rb, "parity_sends_with_data: ");
	assert_true(kept >= 8 * 64 / 3 - 8);
	assert_int_equal(stat(rb, "parity_sends_redone: "), 0);
	check_all(rb);

	assert_true(node_ctl(nodes[3], "limit 4K", stats, sizeof(stats)) > 0);
	for (uint32_t r = 8; r < 12; r++) {
		write_random(rb, (uint64_t)r * RUN, RUN);
	}
	assert_true(stat(rb, "parity_sends_redone: ") > 0);
	assert_true(node_ctl(nodes[3], "limit 0", stats, sizeof(stats)) > 0);
	node_stop(nodes[1]);
	nodes[1] = NULL;
	check_all(rb);
	assert_true(stat(rb, "parity_reconstructs: ") > 0);
	assert_int_equal(stat(rb, "remote_read_errors: "), 0);
	remote_close(rb);
	stop_nodes();
	nn = 3;
}

/* The tiered node's files (tier_files.h). */
static int group_setup(void **state)
{
	(void)state;
	tier_files_name("rb");
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	tier_files_remove();
	return 0;
}

/* A node whose flash fails (a tiered node; writes past 64 KiB of its
 * flash file refused, as a full file system would) loses the copies whose
 * write-back failed. Reads get every byte from the mirror copies, or
 * rebuilt from their parity groups, and the unreadable copy is dropped on
 * its node before a new one is placed (elsewhere, or there again):
 * nothing is left on it after a trim of everything. Before, copies placed
 * again on another node stayed on the failing one for good. */
static void unreadable_copies_dropped(enum remote_redundancy red,
				      const char *replaced)
{
	/* All three offer 4 MiB (tiered), so node 3 gets its share; only
	 * node 3 has a flash file, and little memory. */
	struct tierstore_opts to = {
		.pages = 1024, .mram_pages = 4, .dram_pages = 12,
		.nvram_path = nvram, .flash_path = flash, .policy = "lru",
	};
	struct tierstore_opts mem = { .pages = 1024, .dram_pages = 1024, .policy = "lru" };
	tier_for[0] = tier_for[1] = &mem;
	tier_for[2] = &to;
	start_nodes();
	tier_for[0] = tier_for[1] = tier_for[2] = NULL;
	memset(shadow, 0, sizeof(shadow));
	struct remote_backend *rb = open_rb(red);
	flash_fail_begin(16 * 4096);
	for (uint32_t r = 0; r < 6; r++)
		write_random(rb, (uint64_t)r * RUN, RUN);
	flash_fail_end();
	assert_true(node_stat(2, "pages_lost: ") > 16);
	check_all(rb);
	assert_int_equal(stat(rb, "remote_read_errors: "), 0);
	/* a read that tried node 3's copy found it unreadable */
	assert_true(stat(rb, replaced) > 0);
	assert_int_equal(remote_trim(rb, 0, DEV), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(node_stat(i, "pages: "), 0);
	remote_close(rb);
	stop_nodes();
	tier_files_remove();
}

static void unreadable_copies_are_dropped(void **state)
{
	(void)state;
	unreadable_copies_dropped(REMOTE_MIRROR, "remote_remirrors: ");
}

static void unreadable_parity_members_are_dropped(void **state)
{
	(void)state;
	unreadable_copies_dropped(REMOTE_PARITY, "parity_reconstructs: ");
}

int main(void)
{
	log_init("test_cluster_remote", LOG_LVL_ERR);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(mirror_roundtrip_failover),
		cmocka_unit_test(no_redundancy_loses_pages),
		cmocka_unit_test(quick_restart_rebuilds),
		cmocka_unit_test(leftovers_of_earlier_device),
		cmocka_unit_test(spill_when_no_room),
		cmocka_unit_test(shrink_migrates),
		cmocka_unit_test(parity_runs_one_data_node),
		cmocka_unit_test(parity_trims_keep_groups),
		cmocka_unit_test(parity_pages_sent_with_runs),
		cmocka_unit_test(unreadable_copies_are_dropped),
		cmocka_unit_test(unreadable_parity_members_are_dropped),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
