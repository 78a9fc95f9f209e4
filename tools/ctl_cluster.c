/* ctl_cluster.c - 'nvcachectl status|stats|watch --cluster FILE': every node
 * of a cluster asked over the network; see ctl_cluster.h.
 *
 * Each node is asked by its own thread (connect, handshake, NODE_TABLE,
 * NODE_STATS), every step bounded by the timeout: the slowest node costs
 * one timeout, not one per node. A node that does not answer is shown with
 * our reason and with what the nodes that did answer think of it (their
 * node tables), which tells "dead" (they declared it so) from "unreachable
 * from here" (they still hear it). */
#include "tools/ctl_cluster.h"
#include "tools/kvtext.h"

#include "cluster/client.h"
#include "cluster/config.h"
#include "cluster/frame.h"
#include "cluster/membership.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_MS 2000

/* What we learnt from one node. */
struct probe {
	const struct cluster_config *cfg;
	const struct cluster_node *cn;
	int timeout_ms;
	pthread_t thread;
	bool started;

	int rc;                 /* 0: it answered (handshake and table) */
	char err[320];
	uint64_t incarnation;
	unsigned n_table;
	struct frame_node table[FRAME_MAX_NODES];
	int stats_rc;           /* 0: stats below */
	char stats_err[320];
	char stats[FRAME_MAX_STATS + 1];
	size_t stats_len;
};

static void *probe_main(void *arg)
{
	struct probe *p = arg;
	struct cluster_client *c;

	p->stats_rc = -ENOTCONN;
	p->rc = cluster_client_open_node(&c, p->cfg, p->cn->id, 0, 0,
					 p->timeout_ms, p->err, sizeof(p->err));
	if (p->rc)
		return NULL;
	p->incarnation = cluster_client_incarnation(c);
	p->rc = cluster_client_node_table(c, p->table, FRAME_MAX_NODES, &p->n_table);
	if (p->rc) {
		snprintf(p->err, sizeof(p->err), "node table: %s%s%s",
			 strerror(-p->rc), *cluster_client_last_error(c) ? ": " : "",
			 cluster_client_last_error(c));
	} else {
		p->stats_rc = cluster_client_node_stats(c, p->stats, sizeof(p->stats),
							&p->stats_len);
		if (p->stats_rc)
			snprintf(p->stats_err, sizeof(p->stats_err), "%s%s%s%s",
				 strerror(-p->stats_rc),
				 *cluster_client_last_error(c) ? ": " : "",
				 cluster_client_last_error(c),
				 p->stats_rc == -EOPNOTSUPP || p->stats_rc == -EPROTO ?
				 " (an nvcached older than NODE_STATS?)" : "");
	}
	cluster_client_close(c);
	return NULL;
}

/* A counter of p's stats text; false also when p has none. */
static bool stat_u64(const struct probe *p, const char *key, uint64_t *v)
{
	return !p->rc && !p->stats_rc && kvtext_u64(p->stats, key, v);
}

/* Node id's entry in p's table, or NULL. */
static const struct frame_node *table_entry(const struct probe *p, uint32_t id)
{
	if (p->rc)
		return NULL;
	for (unsigned i = 0; i < p->n_table; i++)
		if (p->table[i].node_id == id)
			return &p->table[i];
	return NULL;
}

/* Ask every node at once; returns how many answered. */
static unsigned probe_all(const struct cluster_config *cfg, struct probe *pr,
			  int timeout_ms)
{
	unsigned answered = 0;

	for (unsigned i = 0; i < cfg->n_nodes; i++) {
		struct probe *p = &pr[i];
		memset(p, 0, sizeof(*p));
		p->cfg = cfg;
		p->cn = &cfg->nodes[i];
		p->timeout_ms = timeout_ms;
		int rc = pthread_create(&p->thread, NULL, probe_main, p);
		if (rc) {
			p->rc = -rc;
			snprintf(p->err, sizeof(p->err), "cannot start a thread: %s",
				 strerror(rc));
			continue;
		}
		p->started = true;
	}
	for (unsigned i = 0; i < cfg->n_nodes; i++) {
		if (pr[i].started)
			pthread_join(pr[i].thread, NULL);
		answered += !pr[i].rc;
	}
	return answered;
}

/* What the nodes that answered (other than id) think of node id:
 * "alive:3", "dead:2,alive:1", or "-" when none did. Also the freshest
 * entry any of them has, for a node that did not answer us. */
static void peers_view(const struct cluster_config *cfg, const struct probe *pr,
		       uint32_t id, char *out, size_t len,
		       const struct frame_node **freshest)
{
	unsigned count[FN_COUNT] = { 0 };
	unsigned total = 0;
	size_t w = 0;

	*freshest = NULL;
	for (unsigned i = 0; i < cfg->n_nodes; i++) {
		if (cfg->nodes[i].id == id)
			continue;
		const struct frame_node *e = table_entry(&pr[i], id);
		if (!e || e->state >= FN_COUNT)
			continue;
		count[e->state]++;
		total++;
		if (e->state != FN_UNKNOWN &&
		    (!*freshest || e->age_ms < (*freshest)->age_ms))
			*freshest = e;
	}
	out[0] = 0;
	if (!total) {
		snprintf(out, len, "-");
		return;
	}
	static const uint32_t order[] = { FN_ALIVE, FN_DEAD, FN_UNKNOWN };
	for (unsigned k = 0; k < 3; k++) {
		if (!count[order[k]])
			continue;
		int n = snprintf(out + w, len - w, "%s%s:%u", w ? "," : "",
				 membership_state_name(order[k]), count[order[k]]);
		if (n > 0 && (size_t)n < len - w)
			w += (size_t)n;
	}
}

static void fmt_u64(char *buf, size_t len, bool have, uint64_t v)
{
	if (have)
		snprintf(buf, len, "%" PRIu64, v);
	else
		snprintf(buf, len, "-");
}

static void print_status(const char *file, const struct cluster_config *cfg,
			 const struct probe *pr, unsigned answered)
{
	uint64_t t_off = 0, t_used = 0, t_data = 0, t_par = 0;
	unsigned no_stats = 0;

	printf("%-5s %-22s %-11s %-20s %9s %9s %10s %12s %6s  %s\n", "node",
	       "address", "state", "incarnation", "offer_MiB", "used_MiB",
	       "pages_data", "pages_parity", "owners", "peers_see");
	for (unsigned i = 0; i < cfg->n_nodes; i++) {
		const struct probe *p = &pr[i];
		const struct cluster_node *cn = p->cn;
		const struct frame_node *fresh;
		char addr[80], peers[64], inc[24], off[24], used[24], dat[24], par[24];
		char own[24];
		uint64_t o = 0, u = 0, d = 0, q = 0, w = 0;
		const char *state;

		snprintf(addr, sizeof(addr), strchr(cn->host, ':') ? "[%s]:%u" : "%s:%u",
			 cn->host, cn->port);
		peers_view(cfg, pr, cn->id, peers, sizeof(peers), &fresh);
		if (!p->rc) {
			/* Without counters (an older node), capacity from its
			 * own entry of its table. */
			const struct frame_node *self = table_entry(p, cn->id);
			bool ho = stat_u64(p, "offered_bytes", &o);
			bool hu = stat_u64(p, "used_bytes", &u);
			if (!ho && self) {
				o = self->cap.offered;
				ho = true;
			}
			if (!hu && self) {
				u = self->cap.used;
				hu = true;
			}
			bool hd = stat_u64(p, "pages_data", &d);
			bool hq = stat_u64(p, "pages_parity", &q);
			bool hw = stat_u64(p, "owners", &w);
			state = "alive";
			fmt_u64(inc, sizeof(inc), true, p->incarnation);
			fmt_u64(off, sizeof(off), ho, o >> 20);
			fmt_u64(used, sizeof(used), hu, u >> 20);
			fmt_u64(dat, sizeof(dat), hd, d);
			fmt_u64(par, sizeof(par), hq, q);
			fmt_u64(own, sizeof(own), hw, w);
			t_off += o;
			t_used += u;
			t_data += d;
			t_par += q;
			no_stats += !(hd && hq);
		} else {
			/* Dead if the freshest word of those who answered
			 * says so; otherwise only we cannot reach it. */
			bool dead = fresh ? fresh->state == FN_DEAD : false;
			state = p->rc == -EACCES ? "auth-failed" :
				dead ? "dead" : "unreachable";
			fmt_u64(inc, sizeof(inc), fresh && fresh->incarnation,
				fresh ? fresh->incarnation : 0);
			snprintf(off, sizeof(off), "-");
			snprintf(used, sizeof(used), "-");
			snprintf(dat, sizeof(dat), "-");
			snprintf(par, sizeof(par), "-");
			snprintf(own, sizeof(own), "-");
		}
		printf("%-5u %-22s %-11s %-20s %9s %9s %10s %12s %6s  %s", cn->id,
		       addr, state, inc, off, used, dat, par, own, peers);
		if (p->rc)
			printf("  (from here: %s)", p->err);
		else if (p->stats_rc)
			printf("  (no counters: %s)", p->stats_err);
		putchar('\n');
	}
	printf("cluster %s: %u/%u nodes answered, offered %" PRIu64 " MiB, used %"
	       PRIu64 " MiB, pages_data %" PRIu64 ", pages_parity %" PRIu64 "%s\n",
	       file, answered, cfg->n_nodes, t_off >> 20, t_used >> 20, t_data,
	       t_par, no_stats ? " (some nodes without counters)" : "");
}

static void print_stats(const struct cluster_config *cfg, const struct probe *pr)
{
	for (unsigned i = 0; i < cfg->n_nodes; i++) {
		const struct probe *p = &pr[i];
		const struct frame_node *fresh;
		char peers[64];

		peers_view(cfg, pr, p->cn->id, peers, sizeof(peers), &fresh);
		printf("== node %u (%s:%u)", p->cn->id, p->cn->host, p->cn->port);
		if (p->rc) {
			printf(": %s; from here: %s; the other nodes see it: %s\n",
			       p->rc == -EACCES ? "authentication failed" :
			       fresh && fresh->state == FN_DEAD ? "dead" : "unreachable",
			       p->err, peers);
			continue;
		}
		printf(": alive, incarnation %" PRIu64 "; the other nodes see it: %s\n",
		       p->incarnation, peers);
		if (p->stats_rc) {
			printf("no counters: %s\n", p->stats_err);
			continue;
		}
		fputs(p->stats, stdout);
		if (p->stats_len && p->stats[p->stats_len - 1] != '\n')
			putchar('\n');
	}
}

/* Why nobody answered, in one line an operator can act on. */
static void explain_none(const char *file, const struct cluster_config *cfg,
			 const struct probe *pr)
{
	unsigned denied = 0;

	for (unsigned i = 0; i < cfg->n_nodes; i++)
		denied += pr[i].rc == -EACCES;
	if (denied)
		fprintf(stderr, "nvcachectl: %s: authentication failed at %u of %u "
			"nodes, no node answered (is %s the cluster's secret?)\n",
			file, denied, cfg->n_nodes, cfg->secret_path);
	else
		fprintf(stderr, "nvcachectl: %s: no node answered (reasons above; "
			"are the nodes running, is this the right file?)\n", file);
}

static int parse_ms(const char *s, int *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v <= 0 || v > 600000)
		return -1;
	*out = (int)v;
	return 0;
}

int ctl_cluster_run(const char *verb, int argc, char **argv, int i)
{
	static struct cluster_config cfg;
	int timeout_ms = DEFAULT_TIMEOUT_MS, secs = 1;
	const char *file;
	char err[512];
	bool watch = !strcmp(verb, "watch");

	if (i + 1 >= argc) {
		fprintf(stderr, "nvcachectl: --cluster needs a FILE\n");
		return 2;
	}
	file = argv[i + 1];
	for (i += 2; i < argc; i++) {
		if (!strcmp(argv[i], "--timeout")) {
			if (i + 1 >= argc || parse_ms(argv[i + 1], &timeout_ms)) {
				fprintf(stderr, "nvcachectl: --timeout needs a time in ms "
					"(1 to 600000)\n");
				return 2;
			}
			i++;
		} else if (watch && atoi(argv[i]) > 0) {
			secs = atoi(argv[i]);
		} else {
			fprintf(stderr, "nvcachectl: %s --cluster FILE: unexpected '%s'\n",
				verb, argv[i]);
			return 2;
		}
	}
	if (config_load(file, &cfg, err, sizeof(err))) {
		fprintf(stderr, "nvcachectl: %s\n", err);
		return 1;
	}
	struct probe *pr = calloc(cfg.n_nodes ? cfg.n_nodes : 1, sizeof(*pr));
	if (!pr) {
		fprintf(stderr, "nvcachectl: out of memory\n");
		return 1;
	}
	int rc;
	for (;;) {
		unsigned answered = probe_all(&cfg, pr, timeout_ms);
		if (watch)
			printf("\033[H\033[2J");
		if (!strcmp(verb, "stats"))
			print_stats(&cfg, pr);
		else
			print_status(file, &cfg, pr, answered);
		fflush(stdout);
		rc = answered ? 0 : 1;
		if (!answered)
			explain_none(file, &cfg, pr);
		if (!watch)
			break;
		sleep((unsigned)secs);
	}
	free(pr);
	memset(cfg.secret, 0, sizeof(cfg.secret));
	return rc;
}
