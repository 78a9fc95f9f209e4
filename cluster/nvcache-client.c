/* nvcache-client - talk to one nvcached from the shell, through the client
 * library (cluster/client.h): read its node table, store pages with known
 * contents and verify them bit-exact, drop them. For operators checking a
 * cluster, and for the system tests. */
#include "cluster/auth.h"
#include "cluster/client.h"
#include "cluster/config.h"
#include "cluster/conn.h"
#include "cluster/membership.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f,
"usage: nvcache-client --cluster FILE --node ID [--owner N] [--secret FILE]\n"
"                      [--timeout MS] COMMAND [ARGS]\n"
"\n"
"commands:\n"
"  table                       the node's view of the cluster\n"
"  fill FIRST COUNT [SEED]     store pages FIRST.. with contents from SEED\n"
"                              (version 1)\n"
"  verify FIRST COUNT [SEED]   fetch them and compare bit-exact\n"
"  drop FIRST COUNT            drop them\n"
"  raw                         authenticate, send stdin as raw bytes, print\n"
"                              the node's answer (for protocol tests)\n"
"  raw-all                     the same, every answer, a line each, until\n"
"                              the node closes or is silent for the timeout\n"
"\n"
"Exit status: 0 success, 1 failure (the reason on stderr), 2 usage.\n");
}

static void fill_page(uint8_t *p, uint64_t seed, uint64_t page)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ULL ^ (page + 1) * 0xBF58476D1CE4E5B9ULL;
	for (int i = 0; i < FRAME_PAGE_SIZE; i += 8) {
		x ^= x >> 31;
		x *= 0x94D049BB133111EBULL;
		x ^= x >> 29;
		memcpy(p + i, &x, 8);
	}
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || *end || !*s || *s == '-')
		return -1;
	*out = v;
	return 0;
}

static int cmd_table(struct cluster_client *c)
{
	static struct frame_node tab[FRAME_MAX_NODES];
	unsigned n;
	int rc = cluster_client_node_table(c, tab, FRAME_MAX_NODES, &n);

	if (rc) {
		fprintf(stderr, "nvcache-client: table: %s\n", strerror(-rc));
		return 1;
	}
	printf("%-6s %-8s %-20s %14s %14s %10s\n", "node", "state", "incarnation",
	       "offered", "used", "heard_ms");
	for (unsigned i = 0; i < n; i++)
		printf("%-6u %-8s %-20" PRIu64 " %14" PRIu64 " %14" PRIu64 " %10" PRIu64 "\n",
		       tab[i].node_id, membership_state_name(tab[i].state),
		       tab[i].incarnation, tab[i].cap.offered, tab[i].cap.used,
		       tab[i].age_ms);
	return 0;
}

static int cmd_pages(struct cluster_client *c, const char *cmd, uint64_t first,
		     uint64_t count, uint64_t seed)
{
	static uint8_t want[FRAME_PAGE_SIZE], got[FRAME_PAGE_SIZE];
	uint64_t bad = 0;

	for (uint64_t p = first; p < first + count; p++) {
		int rc;
		fill_page(want, seed, p);
		if (!strcmp(cmd, "fill")) {
			rc = cluster_client_page_store(c, p, 1, want);
		} else if (!strcmp(cmd, "drop")) {
			rc = cluster_client_page_drop(c, p, 1);
		} else {
			rc = cluster_client_page_fetch(c, p, 1, got, NULL);
			if (!rc && memcmp(want, got, FRAME_PAGE_SIZE)) {
				if (bad++ < 5)
					fprintf(stderr, "nvcache-client: page %" PRIu64
						": contents differ\n", p);
				continue;
			}
		}
		if (rc) {
			fprintf(stderr, "nvcache-client: %s page %" PRIu64 ": %s%s%s\n", cmd, p,
				strerror(-rc), *cluster_client_last_error(c) ? ": " : "",
				cluster_client_last_error(c));
			return 1;
		}
	}
	if (bad) {
		fprintf(stderr, "nvcache-client: %" PRIu64 " of %" PRIu64
			" pages differ\n", bad, count);
		return 1;
	}
	printf("%s: %" PRIu64 " pages ok\n", cmd, count);
	return 0;
}

static int cmd_raw(const struct cluster_config *cfg, uint32_t node, int tmo, bool all)
{
	static uint8_t buf[1 << 20];
	static struct conn c;
	static struct frame_hdr r;
	struct auth_identity me = { 0, 1, cfg->secret, cfg->secret_len };
	struct auth_peer peer;
	const char *why = "";
	size_t len = 0;
	ssize_t n;

	while (len < sizeof(buf) && (n = read(0, buf + len, sizeof(buf) - len)) > 0)
		len += (size_t)n;
	const struct cluster_node *cn = config_node_find(cfg, node);
	int rc = conn_connect(&c, cn->host, cn->port, tmo);
	if (!rc)
		rc = auth_client(&c, &me, &peer, &why);
	if (rc) {
		fprintf(stderr, "nvcache-client: raw: %s\n", *why ? why : strerror(-rc));
		return 1;
	}
	if (send(c.fd, buf, len, MSG_NOSIGNAL) != (ssize_t)len) {
		printf("closed before all was sent\n");
		return 0;
	}
	/* a truncated frame ends here; with all, the requests are served
	 * (a node drops what a client that hung up still waits for) */
	if (!all)
		shutdown(c.fd, SHUT_WR);
	/* the first answer; with all, a line per answer, in order, until
	 * the node closes or says nothing more within the timeout */
	do {
		rc = conn_recv(&c, &r, NULL, &why);
		if (all && rc == -ETIMEDOUT)
			break;
		if (rc == -ECONNRESET)
			printf("closed\n");
		else if (rc)
			printf("bad answer: %s\n", *why ? why : strerror(-rc));
		else
			printf("reply %s%s status=%s text=%s\n", frame_type_name(r.type),
			       r.reply ? " (reply)" : "", frame_status_name(r.status),
			       r.text);
	} while (all && !rc);
	conn_close(&c);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "cluster", required_argument, NULL, 'c' },
		{ "node", required_argument, NULL, 'n' },
		{ "owner", required_argument, NULL, 'o' },
		{ "secret", required_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	static struct cluster_config cfg;
	const char *cluster = NULL, *secret = NULL;
	uint64_t node = 0, owner = 1, tmo = 5000;
	char err[512];
	int c;

	while ((c = getopt_long(argc, argv, "c:n:o:s:t:h", lopts, NULL)) != -1) {
		switch (c) {
		case 'c': cluster = optarg; break;
		case 'n': if (parse_u64(optarg, &node)) { usage(stderr); return 2; } break;
		case 'o': if (parse_u64(optarg, &owner)) { usage(stderr); return 2; } break;
		case 's': secret = optarg; break;
		case 't': if (parse_u64(optarg, &tmo) || tmo > 600000) { usage(stderr); return 2; } break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!cluster || !node || optind >= argc) {
		usage(stderr);
		return 2;
	}
	if (config_load(cluster, &cfg, err, sizeof(err))) {
		fprintf(stderr, "nvcache-client: %s\n", err);
		return 1;
	}
	conn_set_congestion(cfg.tcp_congestion);
	if (secret) {
		snprintf(cfg.secret_path, sizeof(cfg.secret_path), "%s", secret);
		if (config_secret_load(&cfg, err, sizeof(err))) {
			fprintf(stderr, "nvcache-client: %s\n", err);
			return 1;
		}
	}
	if (!config_node_find(&cfg, (uint32_t)node)) {
		fprintf(stderr, "nvcache-client: node %" PRIu64 " is not in %s\n", node,
			cluster);
		return 1;
	}
	const char *cmd = argv[optind];
	if (!strcmp(cmd, "raw") || !strcmp(cmd, "raw-all"))
		return cmd_raw(&cfg, (uint32_t)node, (int)tmo, !strcmp(cmd, "raw-all"));

	struct cluster_client *cl;
	if (cluster_client_open_node(&cl, &cfg, (uint32_t)node, 0, owner, (int)tmo,
				     err, sizeof(err))) {
		fprintf(stderr, "nvcache-client: %s\n", err);
		return 1;
	}
	int rc = 2;
	if (!strcmp(cmd, "table") && optind + 1 == argc) {
		rc = cmd_table(cl);
	} else if (!strcmp(cmd, "fill") || !strcmp(cmd, "verify") || !strcmp(cmd, "drop")) {
		uint64_t first, count, seed = 1;
		if (optind + 3 > argc || optind + 4 < argc ||
		    parse_u64(argv[optind + 1], &first) ||
		    parse_u64(argv[optind + 2], &count) ||
		    (optind + 3 < argc && parse_u64(argv[optind + 3], &seed)))
			usage(stderr);
		else
			rc = cmd_pages(cl, cmd, first, count, seed);
	} else {
		usage(stderr);
	}
	cluster_client_close(cl);
	return rc;
}
