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
#include "tools/json.h"
#include "tools/kvtext.h"

#include "cluster/conn.h"
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

/* One node's line of 'status --cluster', for the table and the JSON. */
struct row {
	uint32_t id;
	char addr[80];
	const char *state;      /* alive, dead, unreachable, auth-failed */
	char peers[64];         /* what the others think: "alive:3" */
	bool have_inc, have[5];
	uint64_t inc, v[5];     /* offered, used (bytes), pages data, parity, owners */
	const char *err;        /* why we could not ask it, or its stats */
};

enum { R_OFF, R_USED, R_DATA, R_PAR, R_OWN };
static const char *const row_keys[] = {
	"offered_bytes", "used_bytes", "pages_data", "pages_parity", "owners",
};

static void row_of(const struct cluster_config *cfg, const struct probe *pr,
		   unsigned i, struct row *r)
{
	const struct probe *p = &pr[i];
	const struct cluster_node *cn = p->cn;
	const struct frame_node *fresh;

	memset(r, 0, sizeof(*r));
	r->id = cn->id;
	snprintf(r->addr, sizeof(r->addr), strchr(cn->host, ':') ? "[%s]:%u" : "%s:%u",
		 cn->host, cn->port);
	peers_view(cfg, pr, cn->id, r->peers, sizeof(r->peers), &fresh);
	if (p->rc) {
		/* Dead if the freshest word of those who answered says
		 * so; otherwise only we cannot reach it. */
		bool dead = fresh ? fresh->state == FN_DEAD : false;
		r->state = p->rc == -EACCES ? "auth-failed" : dead ? "dead" : "unreachable";
		r->have_inc = fresh && fresh->incarnation;
		r->inc = fresh ? fresh->incarnation : 0;
		r->err = p->err;
		return;
	}
	r->state = "alive";
	r->have_inc = true;
	r->inc = p->incarnation;
	for (unsigned k = 0; k < 5; k++)
		r->have[k] = stat_u64(p, row_keys[k], &r->v[k]);
	/* Without counters (an older node), capacity from its own entry
	 * of its table. */
	const struct frame_node *self = table_entry(p, cn->id);
	if (!r->have[R_OFF] && self) {
		r->v[R_OFF] = self->cap.offered;
		r->have[R_OFF] = true;
	}
	if (!r->have[R_USED] && self) {
		r->v[R_USED] = self->cap.used;
		r->have[R_USED] = true;
	}
	if (p->stats_rc)
		r->err = p->stats_err;
}

/* Problems a node that answered reports of itself: states, not event
 * counts (one sample has no interval to see those rise; 'nvcachectl
 * status' on the node shows them). */
static unsigned node_problems(const struct probe *p, char out[][160], unsigned max)
{
	/* flag: a 0/1 state, said without its value */
	static const struct { const char *key, *what; bool flag; } checks[] = {
		{ "nodes_dead", "peers it sees dead", false },
		{ "over_offer_bytes", "bytes held over its offer (pages move away)", false },
		{ "fcache_alone_s", "s of writes kept in its NVRAM alone: its shadow "
				    "(the next node) is down (replicas=2)", false },
		{ "fcache_writeback_failing", "file cache write-back failing (backing "
		  "full or failing: the data stays in NVRAM, tried again)", true },
		{ "fcache_full_recent", "file cache full: writers held for room in "
		  "the last 10 s (a slow or stalled backing?)", true },
	};
	unsigned n = 0;
	uint64_t v;

	for (size_t k = 0; k < sizeof(checks) / sizeof(checks[0]) && n < max; k++)
		if (stat_u64(p, checks[k].key, &v) && v) {
			if (checks[k].flag)
				snprintf(out[n++], 160, "%s", checks[k].what);
			else
				snprintf(out[n++], 160, "%" PRIu64 " %s", v, checks[k].what);
		}
	return n;
}

/* A node's file cache (nvcached --cache-size): its figures in v (the
 * order of fcache_keys), or false when it did not answer or has none. */
#define FCACHE_FIGS 6
static const char *const fcache_keys[FCACHE_FIGS] = {
	"fcache_total_bytes", "fcache_used_bytes", "fcache_dirty_bytes",
	"fcache_written_back_bytes", "fcache_served_bytes", "fcache_files",
};

static bool fcache_of(const struct probe *p, uint64_t v[FCACHE_FIGS])
{
	bool have = !p->rc;
	for (unsigned k = 0; k < FCACHE_FIGS && have; k++)
		have = stat_u64(p, fcache_keys[k], &v[k]);
	return have;
}

/* The nodes' file caches, one line each, after the table: nothing when
 * no node that answered has one. */
static void print_fcache(const struct cluster_config *cfg, const struct probe *pr)
{
	bool header = false;

	for (unsigned i = 0; i < cfg->n_nodes; i++) {
		uint64_t v[FCACHE_FIGS];
		if (!fcache_of(&pr[i], v))
			continue;
		if (!header) {
			printf("file cache: %-5s %9s %9s %10s %17s %15s %7s\n", "node",
			       "size_MiB", "used_MiB", "dirty_MiB", "written_back_MiB",
			       "served_MiB", "files");
			header = true;
		}
		printf("            %-5u %9" PRIu64 " %9" PRIu64 " %10" PRIu64 " %17" PRIu64
		       " %15" PRIu64 " %7" PRIu64 "\n", pr[i].cn->id, v[0] >> 20, v[1] >> 20,
		       v[2] >> 20, v[3] >> 20, v[4] >> 20, v[5]);
	}
}

static void print_status(const char *file, const struct cluster_config *cfg,
			 const struct probe *pr, unsigned answered)
{
	uint64_t tot[5] = { 0 };
	unsigned no_stats = 0, problems = 0;
	char pl[8][160];

	printf("%-5s %-22s %-11s %-20s %9s %9s %10s %12s %6s  %s\n", "node",
	       "address", "state", "incarnation", "offer_MiB", "used_MiB",
	       "pages_data", "pages_parity", "owners", "peers_see");
	for (unsigned i = 0; i < cfg->n_nodes; i++) {
		struct row r;
		char inc[24], f[5][24];

		row_of(cfg, pr, i, &r);
		fmt_u64(inc, sizeof(inc), r.have_inc, r.inc);
		for (unsigned k = 0; k < 5; k++) {
			uint64_t v = k <= R_USED ? r.v[k] >> 20 : r.v[k];
			fmt_u64(f[k], sizeof(f[k]), r.have[k], v);
			tot[k] += r.v[k];
		}
		if (!pr[i].rc)
			no_stats += !(r.have[R_DATA] && r.have[R_PAR]);
		printf("%-5u %-22s %-11s %-20s %9s %9s %10s %12s %6s  %s", r.id, r.addr,
		       r.state, inc, f[R_OFF], f[R_USED], f[R_DATA], f[R_PAR], f[R_OWN],
		       r.peers);
		if (pr[i].rc)
			printf("  (from here: %s)", r.err);
		else if (r.err)
			printf("  (no counters: %s)", r.err);
		putchar('\n');
	}
	printf("cluster %s: %u/%u nodes answered, offered %" PRIu64 " MiB, used %"
	       PRIu64 " MiB, pages_data %" PRIu64 ", pages_parity %" PRIu64 "%s\n",
	       file, answered, cfg->n_nodes, tot[R_OFF] >> 20, tot[R_USED] >> 20,
	       tot[R_DATA], tot[R_PAR], no_stats ? " (some nodes without counters)" : "");
	print_fcache(cfg, pr);
	for (unsigned i = 0; i < cfg->n_nodes; i++) {
		const struct probe *p = &pr[i];
		unsigned n = p->rc ? 0 : node_problems(p, pl, 8);
		if (!p->rc && !n)
			continue;
		if (!problems++)
			printf("problems:\n");
		if (p->rc) {
			struct row r;
			row_of(cfg, pr, i, &r);
			printf("  node %u: %s (from here: %s)\n", r.id, r.state, r.err);
		}
		for (unsigned k = 0; k < n; k++)
			printf("  node %u: %s\n", p->cn->id, pl[k]);
	}
}

static void print_status_json(const char *file, const struct cluster_config *cfg,
			      const struct probe *pr)
{
	char pl[8][160];

	printf("{\"cluster\": ");
	json_put_str(file);
	printf(", \"nodes\": [");
	for (unsigned i = 0; i < cfg->n_nodes; i++) {
		struct row r;
		row_of(cfg, pr, i, &r);
		printf("%s\n  {\"id\": %u, \"address\": ", i ? "," : "", r.id);
		json_put_str(r.addr);
		printf(", \"state\": \"%s\", \"peers_see\": ", r.state);
		json_put_str(r.peers);
		if (r.have_inc)
			printf(", \"incarnation\": %" PRIu64, r.inc);
		for (unsigned k = 0; k < 5; k++)
			if (r.have[k])
				printf(", \"%s\": %" PRIu64, row_keys[k], r.v[k]);
		if (r.err) {
			printf(", \"error\": ");
			json_put_str(r.err);
		}
		/* "file_cache": {"total_bytes": ..., "files": ...}, the
		 * counters without their fcache_ prefix */
		uint64_t fv[FCACHE_FIGS];
		if (fcache_of(&pr[i], fv)) {
			printf(", \"file_cache\": {");
			for (unsigned k = 0; k < FCACHE_FIGS; k++)
				printf("%s\"%s\": %" PRIu64, k ? ", " : "",
				       fcache_keys[k] + strlen("fcache_"), fv[k]);
			printf("}");
		}
		printf(", \"problems\": [");
		unsigned n = pr[i].rc ? 0 : node_problems(&pr[i], pl, 8);
		for (unsigned k = 0; k < n; k++) {
			printf("%s", k ? ", " : "");
			json_put_str(pl[k]);
		}
		printf("]}");
	}
	printf("\n]}\n");
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
	bool watch = !strcmp(verb, "watch"), json = false;

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
		} else if (!strcmp(verb, "status") && !strcmp(argv[i], "--json")) {
			json = true;
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
	conn_set_congestion(cfg.tcp_congestion);
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
		else if (json)
			print_status_json(file, &cfg, pr);
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
