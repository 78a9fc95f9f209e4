/* ctl_status.c - 'nvcachectl status' and 'nvcachectl metrics': the daemons
 * on this machine at a glance; see ctl_status.h.
 *
 * A daemon is a control socket in the run directory whose name starts
 * with a kind (fs-, swap-, node-). What a line shows comes from the
 * daemon's own stats text (tools/kvtext.h), read by one small function
 * per kind (the views table below): a kind's counters change, its view
 * changes, nothing else does. */
#include "tools/ctl_status.h"

#include "common/clock.h"
#include "common/ctl.h"
#include "tools/json.h"
#include "tools/kvtext.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <mntent.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_DAEMONS 64
#define MAX_FIGS 16
#define MAX_PROBLEMS 16
#define ASK_MS 2000

/* One figure of a status line: JSON key, value, and how it is shown. */
enum unit { U_MBS, U_IOPS, U_PCT, U_BYTES, U_COUNT, U_PER_S };

struct fig {
	const char *key;
	const char *label;
	enum unit unit;
	double v;
};

struct daemon {
	char sock[PATH_MAX];
	char kind[16];
	char name[256];
	bool up;                /* answered info and stats */
	int err;                /* why not (ctl_request's -errno) */
	bool mounted;           /* a dead fs daemon's mount point is still mounted */
	long pid;
	double uptime_s;
	char *s0, *s1;          /* stats text at the two samples (s1 may be NULL) */
	double dt;              /* seconds between them */
	struct fig figs[MAX_FIGS];
	unsigned nfigs;
	char problems[MAX_PROBLEMS][512];
	unsigned nproblems;
};

static char reply[CTL_MAX_REPLY];

/* --- reading the counters ------------------------------------------------ */

static bool now_num(const struct daemon *d, const char *key, double *v)
{
	const char *s = d->s1 ? d->s1 : d->s0;
	return s && kvtext_num(s, key, v);
}

/* The change of key per second over the interval; false without one. */
static bool rate(const struct daemon *d, const char *key, double *r)
{
	double a, b;

	if (!d->s1 || d->dt <= 0 || !kvtext_num(d->s0, key, &a) ||
	    !kvtext_num(d->s1, key, &b))
		return false;
	*r = (b - a) / d->dt;
	return true;
}

static void add_fig(struct daemon *d, const char *key, const char *label,
		    enum unit u, double v)
{
	if (d->nfigs < MAX_FIGS)
		d->figs[d->nfigs++] = (struct fig){ key, label, u, v };
}

static void add_problem(struct daemon *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void add_problem(struct daemon *d, const char *fmt, ...)
{
	va_list ap;

	if (d->nproblems >= MAX_PROBLEMS)
		return;
	va_start(ap, fmt);
	vsnprintf(d->problems[d->nproblems++], sizeof(d->problems[0]), fmt, ap);
	va_end(ap);
}

/* read/write MB/s and IOPS from byte and operation counters. */
static void add_io_rates(struct daemon *d, const char *rbytes, const char *rops,
			 const char *wbytes, const char *wops)
{
	double v;

	if (rate(d, rbytes, &v))
		add_fig(d, "read_mb_s", "read", U_MBS, v / 1e6);
	if (rate(d, rops, &v))
		add_fig(d, "read_iops", NULL, U_IOPS, v);
	if (rate(d, wbytes, &v))
		add_fig(d, "write_mb_s", "write", U_MBS, v / 1e6);
	if (rate(d, wops, &v))
		add_fig(d, "write_iops", NULL, U_IOPS, v);
}

/* A state that is a problem while above zero (pages lost, degraded). */
static void problem_if(struct daemon *d, const char *key, const char *what)
{
	double v;

	if (now_num(d, key, &v) && v > 0)
		add_problem(d, "%.0f %s", v, what);
}

/* An event counter (errors, refused peers) is a problem while it rises:
 * one bad try an hour ago must not mark a daemon for ever. Without an
 * interval, any count since the start is shown as that. */
static void problem_if_rising(struct daemon *d, const char *key, const char *what)
{
	double a, b;

	if (d->s1 && kvtext_num(d->s0, key, &a) && kvtext_num(d->s1, key, &b)) {
		if (b > a)
			add_problem(d, "%.0f %s in the last %.1f s", b - a, what, d->dt);
	} else if (now_num(d, key, &b) && b > 0) {
		add_problem(d, "%.0f %s since the start", b, what);
	}
}

/* Write-back failing now (the state failing_key), or failures within
 * the sample (errors_key rising): what names the write-back. */
static void problem_wb(struct daemon *d, const char *failing_key,
		       const char *errors_key, const char *what)
{
	char msg[160];
	double v;

	if (now_num(d, failing_key, &v) && v > 0) {
		add_problem(d, "%s failing (backing full or failing: the data stays "
			    "in NVRAM, tried again; see the log)", what);
		return;
	}
	snprintf(msg, sizeof(msg), "%ss failed (backing full or failing: the "
		 "data stays in NVRAM; see the log)", what);
	problem_if_rising(d, errors_key, msg);
}

struct peer_scan {
	struct daemon *d;
	const char *prefix;     /* "node." or "remote_node." */
	const char *bad;        /* the state word that is a problem */
	const char *what;       /* "peer" or "node" */
	unsigned total, good;
};

static void scan_peer(void *arg, const char *key, size_t klen, const char *val,
		      size_t vlen)
{
	struct peer_scan *ps = arg;
	size_t pl = strlen(ps->prefix);

	if (klen <= pl || strncmp(key, ps->prefix, pl))
		return;
	ps->total++;
	size_t bl = strlen(ps->bad);
	if (vlen >= bl && !strncmp(val, ps->bad, bl) && (vlen == bl || val[bl] == ' '))
		add_problem(ps->d, "%s %.*s %s", ps->what, (int)(klen - pl), key + pl,
			    ps->bad);
	else
		ps->good++;
}

/* Lines "PREFIX<id>: <state> ...": counts them, and each in state bad
 * is a problem. */
static void scan_peers(struct daemon *d, const char *prefix, const char *bad,
		       const char *what, unsigned *total, unsigned *good)
{
	struct peer_scan ps = { d, prefix, bad, what, 0, 0 };
	const char *s = d->s1 ? d->s1 : d->s0;

	kvtext_each(s, scan_peer, &ps);
	*total = ps.total;
	*good = ps.good;
}

/* --- one view per kind --------------------------------------------------- */

static void hit_rate(struct daemon *d)
{
	double dh, dm, h, m;

	if (rate(d, "hits", &dh) && rate(d, "misses", &dm) && dh + dm > 0)
		add_fig(d, "hit_pct", "hit", U_PCT, 100 * dh / (dh + dm));
	else if (now_num(d, "hits", &h) && now_num(d, "misses", &m) && h + m > 0)
		add_fig(d, "hit_pct", "hit", U_PCT, 100 * h / (h + m));
}

static void view_fs(struct daemon *d)
{
	double v, t, self;

	add_io_rates(d, "read_bytes", "read_ops", "write_bytes", "write_ops");
	if (now_num(d, "cluster_nodes", &t) && t > 0 && now_num(d, "cluster_node", &self)) {
		/* a cluster mount keeps no data: the nodes' caches do
		 * (status --cluster shows them) */
		add_fig(d, "cluster_node", "cluster node", U_COUNT, self);
		add_fig(d, "cluster_nodes", "of", U_COUNT, t);
	} else {
		hit_rate(d);
		if (now_num(d, "dirty_bytes", &v))
			add_fig(d, "dirty_bytes", "dirty", U_BYTES, v);
		if (now_num(d, "nvram_used_bytes", &v) &&
		    now_num(d, "nvram_total_bytes", &t)) {
			add_fig(d, "cache_used_bytes", "cache", U_BYTES, v);
			add_fig(d, "cache_total_bytes", "of", U_BYTES, t);
		}
		if (now_num(d, "writeback_queue", &v))
			add_fig(d, "writeback_queue", "write-back queue", U_COUNT, v);
	}
	problem_wb(d, "writeback_failing", "backing_errors", "write-back");
	problem_if(d, "cluster_nodes_down", "cluster nodes not answering (requests "
		   "that need them wait, down_wait, then fail)");
}

static void view_swap(struct daemon *d)
{
	double v, a, b, c;
	unsigned total, good;

	add_io_rates(d, "nbd_bytes_read", "nbd_reads", "nbd_bytes_written", "nbd_writes");
	if (now_num(d, "remote_slots_mapped", &v))
		add_fig(d, "pages", "pages", U_COUNT, v);
	else if (now_num(d, "mram_pages", &a) && now_num(d, "dram_pages", &b) &&
		 now_num(d, "flash_pages", &c))
		add_fig(d, "pages", "pages", U_COUNT, a + b + c);
	if (now_num(d, "mram_hit_rate", &v) && now_num(d, "page_reads", &a) && a > 0)
		add_fig(d, "mram_hit_pct", "MRAM hit", U_PCT, 100 * v);
	scan_peers(d, "remote_node.", "dead", "node", &total, &good);
	if (total) {
		add_fig(d, "nodes_up", "nodes up", U_COUNT, good);
		add_fig(d, "nodes", "of", U_COUNT, total);
	}
	problem_if(d, "pages_lost", "pages lost (their reads fail with EIO)");
	problem_if_rising(d, "flash_errors", "flash file I/O errors");
	problem_if_rising(d, "remote_read_errors", "reads failed (EIO to the kernel)");
	problem_if_rising(d, "remote_write_errors", "writes failed (EIO to the kernel)");
	problem_if(d, "remote_slots_degraded",
		   "pages without their redundancy (rebuild pending)");
	if (now_num(d, "remote_short_of_room", &v) && v > 0)
		add_problem(d, "the cluster is short of room (pages held here or "
			    "spilled; see the log)");
	problem_if_rising(d, "nbd_request_errors", "NBD requests answered with an error");
}

static void view_node(struct daemon *d)
{
	double v, t, alive, dead, unk;
	unsigned total, good;

	if (now_num(d, "nodes_alive", &alive) && now_num(d, "nodes_dead", &dead) &&
	    now_num(d, "nodes_unknown", &unk)) {
		add_fig(d, "nodes_alive", "nodes alive", U_COUNT, alive + 1);
		add_fig(d, "nodes", "of", U_COUNT, alive + dead + unk + 1);
	}
	if (now_num(d, "pages", &v))
		add_fig(d, "pages_held", "pages held", U_COUNT, v);
	if (now_num(d, "used_bytes", &v))
		add_fig(d, "used_bytes", "using", U_BYTES, v);
	if (now_num(d, "offered_bytes", &v))
		add_fig(d, "offered_bytes", "offering", U_BYTES, v);
	if (rate(d, "page_stores", &v))
		add_fig(d, "stores_s", "stores", U_PER_S, v);
	if (rate(d, "page_fetches", &v))
		add_fig(d, "fetches_s", "fetches", U_PER_S, v);
	/* the file cache of cluster mounts (nvcached --cache-size) */
	double used, dirty;
	if (now_num(d, "fcache_total_bytes", &t) && t > 0 &&
	    now_num(d, "fcache_used_bytes", &used) &&
	    now_num(d, "fcache_dirty_bytes", &dirty)) {
		add_fig(d, "fcache_used_bytes", "file cache", U_BYTES, used);
		add_fig(d, "fcache_total_bytes", "of", U_BYTES, t);
		add_fig(d, "fcache_dirty_bytes", "file cache dirty", U_BYTES, dirty);
	}
	scan_peers(d, "node.", "dead", "peer", &total, &good);
	problem_if_rising(d, "auth_failures", "connections failed authentication (wrong secret?)");
	problem_if_rising(d, "bad_frames", "corrupt frames from peers");
	problem_if(d, "over_offer_bytes", "bytes held over this node's offer (local "
		   "programs need the memory; pages move away)");
	problem_wb(d, "fcache_writeback_failing", "fcache_writeback_errors",
		   "file cache write-back");
	if (now_num(d, "fcache_full_recent", &v) && v > 0)
		add_problem(d, "writes or opens held for room in the last 10 s (the "
			    "file cache is full and its write-back makes none: a slow "
			    "or stalled backing?)");
}

/* A kind: its socket name prefix, the stats key that names a daemon
 * to a person (the socket's name is a mangled form of it), its view. */
static const struct view {
	const char *kind;
	const char *name_key;
	void (*fill)(struct daemon *d);
} views[] = {
	{ "fs", "mountpoint", view_fs },
	{ "swap", "export", view_swap },
	{ "node", "node", view_node },
};

static const struct view *view_of(const char *kind)
{
	for (size_t i = 0; i < sizeof(views) / sizeof(views[0]); i++)
		if (!strcmp(views[i].kind, kind))
			return &views[i];
	return NULL;
}

/* --- finding and asking the daemons --------------------------------------- */

static int by_sock(const void *a, const void *b)
{
	return strcmp(((const struct daemon *)a)->sock, ((const struct daemon *)b)->sock);
}

/* The control sockets of the run directory, sorted; returns how many. */
static unsigned discover(struct daemon *ds, unsigned max)
{
	const char *dir = ctl_run_dir();
	struct dirent *de;
	unsigned n = 0;
	DIR *dh = opendir(dir);

	if (!dh)
		return 0;
	while ((de = readdir(dh)) && n < max) {
		size_t l = strlen(de->d_name);
		if (l < 6 || strcmp(de->d_name + l - 5, ".sock"))
			continue;
		const char *dash = strchr(de->d_name, '-');
		if (!dash)
			continue;
		struct daemon *d = &ds[n];
		memset(d, 0, sizeof(*d));
		snprintf(d->kind, sizeof(d->kind), "%.*s", (int)(dash - de->d_name),
			 de->d_name);
		/* Control sockets only: the run dir also holds others, such
		 * as nvswapd's NBD socket in the quick start. */
		if (!view_of(d->kind))
			continue;
		snprintf(d->name, sizeof(d->name), "%.*s", (int)(l - 5 - (size_t)(dash + 1 - de->d_name)),
			 dash + 1);
		snprintf(d->sock, sizeof(d->sock), "%s/%s", dir, de->d_name);
		n++;
	}
	closedir(dh);
	qsort(ds, n, sizeof(*ds), by_sock);
	return n;
}

/* The daemon's stats text, or NULL with why in *err (-EPROTO: it
 * answered an error). */
static char *ask_stats(const struct daemon *d, int *err)
{
	ssize_t n = ctl_request(d->sock, "stats", reply, sizeof(reply), ASK_MS);

	*err = n < 0 ? (int)n : !strncmp(reply, "error:", 6) ? -EPROTO : 0;
	return *err ? NULL : strdup(reply);
}

static void ask_info(struct daemon *d)
{
	double v;

	ssize_t r = ctl_request(d->sock, "info", reply, sizeof(reply), ASK_MS);
	if (r < 0) {
		d->err = (int)r;
		return;
	}
	/* a daemon older than "info" answers an error: shown without */
	if (kvtext_num(reply, "pid", &v))
		d->pid = (long)v;
	d->uptime_s = kvtext_num(reply, "uptime_s", &v) ? v : -1;
	d->s0 = ask_stats(d, &d->err);
	d->up = d->s0 != NULL;
}

/* Sample every daemon, wait interval seconds, sample them again. */
static void sample_all(struct daemon *ds, unsigned n, double interval)
{
	uint64_t t0 = clock_now_ns();

	for (unsigned i = 0; i < n; i++)
		ask_info(&ds[i]);
	if (interval <= 0)
		return;
	struct timespec ts = { (time_t)interval,
			       (long)((interval - (double)(time_t)interval) * 1e9) };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	double dt = (double)(clock_now_ns() - t0) / 1e9;
	for (unsigned i = 0; i < n; i++) {
		if (!ds[i].up)
			continue;
		int err;
		ds[i].s1 = ask_stats(&ds[i], &err);
		ds[i].dt = dt;
	}
}

/* A dead nvcachefs's mount point, found by the name its socket was made
 * from (ctl_name_from_path): its mounts stay until unmounted, and then
 * every access there fails ("Transport endpoint is not connected"). */
static void find_mount(struct daemon *d)
{
	FILE *f = setmntent("/proc/mounts", "r");
	struct mntent *m;
	char name[sizeof(d->name)];

	if (!f)
		return;
	while ((m = getmntent(f))) {
		/* (plain "fuse": a mount whose options could not name
		 * its subtype, fs/main.c) */
		if (strcmp(m->mnt_type, "fuse.nvcachefs") && strcmp(m->mnt_type, "fuse"))
			continue;
		ctl_name_from_path(m->mnt_dir, name, sizeof(name));
		if (!strcmp(name, d->name)) {
			snprintf(d->name, sizeof(d->name), "%s", m->mnt_dir);
			d->mounted = true;
			break;
		}
	}
	endmntent(f);
}

/* Why a daemon did not answer, and what to do about it. */
static void explain_down(struct daemon *d)
{
	if (d->err == -ETIMEDOUT) {
		add_problem(d, "alive but not answering within %.0f s (busy or "
			    "stuck; its log says more)", ASK_MS / 1000.0);
		return;
	}
	if (d->err == -EPROTO) {
		add_problem(d, "answers, but refuses its stats (another program's "
			    "socket, or a daemon of another version?): 'nvcachectl "
			    "stats --socket %s' says why", d->sock);
		return;
	}
	if (d->err != -ECONNREFUSED && d->err != -ENOENT) {
		add_problem(d, "not answering: %s (socket %s)", strerror(-d->err), d->sock);
		return;
	}
	if (!strcmp(d->kind, "fs"))
		find_mount(d);
	if (d->mounted)
		add_problem(d, "nvcachefs is not running but its mount stays (files "
			    "there fail: 'Transport endpoint is not connected'): "
			    "fusermount3 -u '%s', then mount it again", d->name);
	else
		add_problem(d, "not running: a dead daemon's stale socket %s (safe "
			    "to remove)", d->sock);
}

static void fill_all(struct daemon *ds, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (!ds[i].up) {
			explain_down(&ds[i]);
			continue;
		}
		const struct view *v = view_of(ds[i].kind);
		char name[sizeof(ds[i].name)];
		if (kvtext_get(ds[i].s1 ? ds[i].s1 : ds[i].s0, v->name_key, name, sizeof(name)))
			memcpy(ds[i].name, name, sizeof(name));
		v->fill(&ds[i]);
	}
}

static void free_all(struct daemon *ds, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		free(ds[i].s0);
		free(ds[i].s1);
	}
}

static int parse_interval(int argc, char **argv, int *i, double *interval)
{
	char *end;

	if (*i + 1 >= argc) {
		fprintf(stderr, "nvcachectl: --interval needs SECONDS\n");
		return 2;
	}
	errno = 0;
	*interval = strtod(argv[*i + 1], &end);
	if (errno || *end || *interval < 0 || *interval > 60) {
		fprintf(stderr, "nvcachectl: --interval: '%s' is not 0 to 60 seconds\n",
			argv[*i + 1]);
		return 2;
	}
	(*i)++;
	return 0;
}

/* --- the table and its JSON ------------------------------------------------ */

static void human_bytes(char *buf, size_t len, double b)
{
	static const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	unsigned k = 0;

	while (b >= 1024 && k + 1 < sizeof(u) / sizeof(u[0])) {
		b /= 1024;
		k++;
	}
	snprintf(buf, len, k ? "%.1f %s" : "%.0f %s", b, u[k]);
}

static void human_age(char *buf, size_t len, double s)
{
	unsigned long t = s < 0 ? 0 : (unsigned long)s;

	if (s < 0)
		snprintf(buf, len, "-");
	else if (t < 60)
		snprintf(buf, len, "%lus", t);
	else if (t < 3600)
		snprintf(buf, len, "%lum%02lus", t / 60, t % 60);
	else if (t < 86400)
		snprintf(buf, len, "%luh%02lum", t / 3600, t / 60 % 60);
	else
		snprintf(buf, len, "%lud%02luh", t / 86400, t / 3600 % 24);
}

/* "read 1.2 MB/s 300 IOPS, hit 98.1%, dirty 1.0 MiB, cache 2.0 MiB of 8.0 GiB" */
static void figures_text(const struct daemon *d, char *out, size_t len)
{
	size_t w = 0;
	char num[48];

	out[0] = 0;
	for (unsigned k = 0; k < d->nfigs; k++) {
		const struct fig *f = &d->figs[k];
		switch (f->unit) {
		case U_MBS: snprintf(num, sizeof(num), "%.1f MB/s", f->v); break;
		case U_IOPS: snprintf(num, sizeof(num), "%.0f IOPS", f->v); break;
		case U_PCT: snprintf(num, sizeof(num), "%.1f%%", f->v); break;
		case U_BYTES: human_bytes(num, sizeof(num), f->v); break;
		case U_COUNT: snprintf(num, sizeof(num), "%.0f", f->v); break;
		case U_PER_S: snprintf(num, sizeof(num), "%.0f/s", f->v); break;
		}
		/* a figure without a label, or labelled "of", continues the
		 * one before it */
		bool cont = !f->label || !strcmp(f->label, "of");
		int n = snprintf(out + w, len - w, "%s%s%s%s", w ? (cont ? " " : ", ") : "",
				 f->label ? f->label : "", f->label ? " " : "", num);
		if (n < 0 || (size_t)n >= len - w)
			break;
		w += (size_t)n;
	}
	if (!w)
		snprintf(out, len, "-");
}

static const char *state_of(const struct daemon *d)
{
	return !d->up ? "down" : d->nproblems ? "problem" : "ok";
}

static void print_table(const struct daemon *ds, unsigned n)
{
	char age[32], figs[1024];
	unsigned problems = 0, wname = 4;

	for (unsigned i = 0; i < n; i++) {
		size_t l = strlen(ds[i].name);
		if (l > wname)
			wname = l > 40 ? 40 : (unsigned)l;
	}
	printf("%-5s %-*s %8s %8s %-7s %s\n", "KIND", (int)wname, "NAME", "PID",
	       "UPTIME", "STATE", "FIGURES");
	for (unsigned i = 0; i < n; i++) {
		const struct daemon *d = &ds[i];
		char pid[24];
		human_age(age, sizeof(age), d->up ? d->uptime_s : -1);
		figures_text(d, figs, sizeof(figs));
		if (d->pid)
			snprintf(pid, sizeof(pid), "%ld", d->pid);
		else
			snprintf(pid, sizeof(pid), "-");
		printf("%-5s %-*s %8s %8s %-7s %s\n", d->kind, (int)wname, d->name, pid,
		       age, state_of(d), d->up ? figs : "-");
		problems += d->nproblems;
	}
	if (!problems)
		return;
	printf("%u problem%s:\n", problems, problems == 1 ? "" : "s");
	for (unsigned i = 0; i < n; i++)
		for (unsigned k = 0; k < ds[i].nproblems; k++)
			printf("  %s %s: %s\n", ds[i].kind, ds[i].name, ds[i].problems[k]);
}

static void print_json(const struct daemon *ds, unsigned n, double interval)
{
	printf("{\"interval_s\": %g, \"daemons\": [", interval);
	for (unsigned i = 0; i < n; i++) {
		const struct daemon *d = &ds[i];
		printf("%s\n  {\"kind\": ", i ? "," : "");
		json_put_str(d->kind);
		printf(", \"name\": ");
		json_put_str(d->name);
		printf(", \"socket\": ");
		json_put_str(d->sock);
		printf(", \"pid\": %ld, \"uptime_s\": %.0f, \"state\": \"%s\", \"figures\": {",
		       d->pid, d->up ? d->uptime_s : -1, state_of(d));
		for (unsigned k = 0; k < d->nfigs; k++) {
			printf("%s\"%s\": ", k ? ", " : "", d->figs[k].key);
			json_put_num(d->figs[k].v);
		}
		printf("}, \"problems\": [");
		for (unsigned k = 0; k < d->nproblems; k++) {
			printf("%s", k ? ", " : "");
			json_put_str(d->problems[k]);
		}
		printf("]}");
	}
	printf("\n]}\n");
}

int ctl_status_run(int argc, char **argv, int i)
{
	static struct daemon ds[MAX_DAEMONS];
	double interval = 1;
	bool json = false;
	int rc;

	for (; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!strcmp(argv[i], "--interval")) {
			if ((rc = parse_interval(argc, argv, &i, &interval)))
				return rc;
		} else {
			fprintf(stderr, "nvcachectl: status: unexpected '%s' (options: "
				"--json, --interval SECONDS, --cluster FILE)\n", argv[i]);
			return 2;
		}
	}
	unsigned n = discover(ds, MAX_DAEMONS);
	if (!n && !json) {
		printf("no nvcache daemon running (no control socket in %s)\n",
		       ctl_run_dir());
		return 0;
	}
	sample_all(ds, n, interval);
	fill_all(ds, n);
	if (json)
		print_json(ds, n, interval);
	else
		print_table(ds, n);
	rc = 0;
	for (unsigned k = 0; k < n; k++)
		if (ds[k].nproblems)
			rc = 1;
	free_all(ds, n);
	return rc;
}

/* --- Prometheus text format ------------------------------------------------ */

struct sample {
	char metric[128];
	char labels[384];
	double v;
	unsigned order;         /* keeps a daemon's lines in their order */
};

struct samples {
	struct sample *s;
	unsigned n, cap;
	const struct daemon *d;
};

/* name[] := "nvcache_<kind>_<key>", every other byte than [a-zA-Z0-9_]
 * turned into '_'. */
static void metric_name(char *out, size_t len, const char *kind, const char *key,
			size_t klen)
{
	int w = snprintf(out, len, "nvcache_%s_", kind);
	size_t k = w > 0 ? (size_t)w : 0;

	for (size_t i = 0; i < klen && k + 1 < len; i++) {
		char c = key[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '_';
		out[k++] = ok ? c : '_';
	}
	out[k] = 0;
}

/* a label value with \, " and newline escaped */
static void label_pair(char *out, size_t len, const char *name, const char *val,
		       size_t vlen)
{
	size_t k = 0;
	int w = snprintf(out, len, "%s=\"", name);

	k = w > 0 ? (size_t)w : 0;
	for (size_t i = 0; i < vlen && k + 3 < len; i++) {
		if (val[i] == '\\' || val[i] == '"')
			out[k++] = '\\';
		out[k++] = val[i] == '\n' ? ' ' : val[i];
	}
	if (k + 2 <= len) {
		out[k++] = '"';
		out[k] = 0;
	}
}

static void push(struct samples *ss, const char *metric, const char *extra, double v)
{
	if (ss->n == ss->cap) {
		unsigned cap = ss->cap ? 2 * ss->cap : 256;
		struct sample *p = realloc(ss->s, cap * sizeof(*p));
		if (!p)
			return;
		ss->s = p;
		ss->cap = cap;
	}
	struct sample *s = &ss->s[ss->n];
	char name[300];
	label_pair(name, sizeof(name), "name", ss->d->name, strlen(ss->d->name));
	snprintf(s->metric, sizeof(s->metric), "%s", metric);
	snprintf(s->labels, sizeof(s->labels), "%s%s%s", name, extra ? "," : "",
		 extra ? extra : "");
	s->v = v;
	s->order = ss->n++;
}

static bool parse_num(const char *s, size_t len, double *v)
{
	char buf[48], *end;

	if (!len || len >= sizeof(buf))
		return false;
	memcpy(buf, s, len);
	buf[len] = 0;
	errno = 0;
	*v = strtod(buf, &end);
	return !errno && !*end && end != buf;
}

/* One stats line. "key: 123" is a sample; "prefix.ID: state k=v ..."
 * (a peer's line) gives <prefix>_up{peer="ID"} (1 unless the state is
 * dead/down) and one sample per numeric k=v. Other values (sizes with
 * units, yes/no, paths) are left out: the same figures are there in
 * bytes or counts. */
static void stat_line(void *arg, const char *key, size_t klen, const char *val,
		      size_t vlen)
{
	struct samples *ss = arg;
	char metric[128], peer[96];
	double v;

	if (parse_num(val, vlen, &v)) {
		metric_name(metric, sizeof(metric), ss->d->kind, key, klen);
		push(ss, metric, NULL, v);
		return;
	}
	const char *dot = memchr(key, '.', klen);
	if (!dot)
		return;
	size_t pl = (size_t)(dot - key);
	label_pair(peer, sizeof(peer), "peer", dot + 1, klen - pl - 1);
	const char *sp = memchr(val, ' ', vlen);
	size_t wl = sp ? (size_t)(sp - val) : vlen;
	bool down = (wl == 4 && (!strncmp(val, "dead", 4) || !strncmp(val, "down", 4)));
	char base[96];
	snprintf(base, sizeof(base), "%.*s_up", (int)pl, key);
	metric_name(metric, sizeof(metric), ss->d->kind, base, strlen(base));
	push(ss, metric, peer, down ? 0 : 1);
	for (const char *p = sp; p && p < val + vlen; ) {
		while (p < val + vlen && *p == ' ')
			p++;
		const char *e = memchr(p, ' ', (size_t)(val + vlen - p));
		size_t tl = e ? (size_t)(e - p) : (size_t)(val + vlen - p);
		const char *eq = memchr(p, '=', tl);
		if (eq && parse_num(eq + 1, tl - (size_t)(eq + 1 - p), &v)) {
			snprintf(base, sizeof(base), "%.*s_%.*s", (int)pl, key,
				 (int)(eq - p), p);
			metric_name(metric, sizeof(metric), ss->d->kind, base, strlen(base));
			push(ss, metric, peer, v);
		}
		p = e;
	}
}

static int by_metric(const void *a, const void *b)
{
	const struct sample *x = a, *y = b;
	int c = strcmp(x->metric, y->metric);

	return c ? c : (x->order > y->order) - (x->order < y->order);
}

int ctl_metrics_run(int argc, char **argv, int i)
{
	static struct daemon ds[MAX_DAEMONS];
	struct samples ss = { 0 };
	double interval = 0;
	int rc;

	for (; i < argc; i++) {
		if (!strcmp(argv[i], "--interval")) {
			if ((rc = parse_interval(argc, argv, &i, &interval)))
				return rc;
		} else {
			fprintf(stderr, "nvcachectl: metrics: unexpected '%s'\n", argv[i]);
			return 2;
		}
	}
	unsigned n = discover(ds, MAX_DAEMONS);
	sample_all(ds, n, interval);
	fill_all(ds, n);
	for (unsigned k = 0; k < n; k++) {
		struct daemon *d = &ds[k];
		char kind[64];
		ss.d = d;
		label_pair(kind, sizeof(kind), "kind", d->kind, strlen(d->kind));
		push(&ss, "nvcache_up", kind, d->up);
		push(&ss, "nvcache_problems", kind, d->nproblems);
		if (!d->up)
			continue;
		push(&ss, "nvcache_uptime_seconds", kind, d->uptime_s);
		for (unsigned f = 0; f < d->nfigs; f++) {
			char m[128];
			if (d->figs[f].unit != U_MBS && d->figs[f].unit != U_IOPS &&
			    d->figs[f].unit != U_PER_S)
				continue;
			snprintf(m, sizeof(m), "nvcache_%s_rate_%s", d->kind, d->figs[f].key);
			push(&ss, m, NULL, d->figs[f].v);
		}
		kvtext_each(d->s1 ? d->s1 : d->s0, stat_line, &ss);
	}
	qsort(ss.s, ss.n, sizeof(*ss.s), by_metric);
	for (unsigned k = 0; k < ss.n; k++) {
		if (!k || strcmp(ss.s[k].metric, ss.s[k - 1].metric))
			printf("# TYPE %s untyped\n", ss.s[k].metric);
		printf("%s{%s} %.17g\n", ss.s[k].metric, ss.s[k].labels, ss.s[k].v);
	}
	free(ss.s);
	free_all(ds, n);
	return 0;
}
