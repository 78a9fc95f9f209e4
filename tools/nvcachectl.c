/* nvcachectl - show the state and counters of the nvcache daemons running on
 * this machine, and send them commands. It talks to each daemon's control
 * socket (common/ctl.h) in the run directory. */
#include "common/ctl.h"
#include "tools/ctl_cluster.h"
#include "tools/ctl_ckpt.h"
#include "tools/ctl_status.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char reply[CTL_MAX_REPLY];

static void usage(FILE *f)
{
	fprintf(f,
"usage: nvcachectl [--run-dir DIR] COMMAND [TARGET] [ARGS...]\n"
"\n"
"commands:\n"
"  status [--json] [--interval S]  every daemon on this machine: a line each\n"
"                               (kind, name, pid, uptime, state, key figures,\n"
"                               rates over S seconds, default 1), then a line\n"
"                               per problem; exit 1 when there is one\n"
"  metrics [--interval S]       every counter of every daemon in Prometheus's\n"
"                               text format (node_exporter's textfile collector)\n"
"  stats TARGET                 all counters of one daemon\n"
"  watch TARGET [SECONDS]       stats every SECONDS (default 1) until ^C\n"
"  send TARGET COMMAND...       send a raw command (e.g. 'shrink 512M', 'fail 3')\n"
"  shrink NODE SIZE             node NODE offers at most SIZE (0: nothing); the\n"
"                               swapping nodes migrate its excess pages away\n"
"  grow NODE                    lift that cap: NODE offers its idle memory again\n"
"  ckpt list|show|delete DIR [JOB]  persistent MPI windows' checkpoints in DIR\n"
"                               (an NVCACHE_CKPT_DIR; docs/checkpoints.md)\n"
"\n"
"TARGET is a mount point of nvcachefs (/mnt/nvcache), or --swap NAME (an\n"
"nvswapd export), --node ID (an nvcached), --socket PATH.\n"
"status, stats and watch also take --cluster FILE [--timeout MS]: every node\n"
"of that cluster file asked over the network (status: one line per node,\n"
"alive or not, capacity, pages; stats: each node's counters; 2000 ms default).\n"
"Run directory: $NVCACHE_RUN_DIR or /run/nvcache.\n");
}

/* Resolve argv[*i] (and maybe argv[*i+1]) to a socket path. */
static int target_path(int argc, char **argv, int *i, char *out, size_t len)
{
	const char *kind = NULL, *name = NULL;
	char esc[PATH_MAX], real[PATH_MAX];

	if (*i >= argc)
		return -EINVAL;
	if (!strcmp(argv[*i], "--swap"))
		kind = "swap";
	else if (!strcmp(argv[*i], "--node"))
		kind = "node";
	else if (!strcmp(argv[*i], "--socket")) {
		if (*i + 1 >= argc)
			return -EINVAL;
		snprintf(out, len, "%s", argv[*i + 1]);
		*i += 2;
		return 0;
	}
	if (kind) {
		if (*i + 1 >= argc)
			return -EINVAL;
		name = argv[*i + 1];
		*i += 2;
		return ctl_socket_path(kind, name, out, len);
	}
	/* A mount point: name it the way nvcachefs does. */
	if (!realpath(argv[*i], real))
		snprintf(real, sizeof(real), "%s", argv[*i]);
	ctl_name_from_path(real, esc, sizeof(esc));
	*i += 1;
	return ctl_socket_path("fs", esc, out, len);
}

/* Why a request to path failed (ctl_request's -errno), on stderr. */
static void say_failed(const char *path, ssize_t n)
{
	fprintf(stderr, "nvcachectl: %s: %s%s\n", path, strerror((int)-n),
		n == -ENOENT || n == -ECONNREFUSED ?
		" (is the daemon running? see 'nvcachectl status')" : "");
}

static void put_reply(ssize_t n)
{
	fputs(reply, stdout);
	if (n && reply[n - 1] != '\n')
		putchar('\n');
}

static int ask(const char *path, const char *cmd, int quiet)
{
	ssize_t n = ctl_request(path, cmd, reply, sizeof(reply), 5000);

	if (n < 0) {
		if (!quiet)
			say_failed(path, n);
		return 1;
	}
	put_reply(n);
	return !strncmp(reply, "error:", 6);
}

/* stats every secs seconds until killed. The screen is cleared only once
 * the next stats are in hand (on a terminal; elsewhere each round starts
 * with its time), so an error never wipes the last good figures: it is
 * printed under them, and the watch goes on (a daemon restarting answers
 * again). A daemon that does not answer at the start, or answers an
 * error: 1, as stats. */
static int watch(const char *path, int secs)
{
	bool tty = isatty(STDOUT_FILENO), shown = false;

	for (;;) {
		ssize_t n = ctl_request(path, "stats", reply, sizeof(reply), 5000);
		bool refused = n >= 0 && !strncmp(reply, "error:", 6);
		char at[16];
		time_t now = time(NULL);
		strftime(at, sizeof(at), "%H:%M:%S", localtime(&now));
		if (!shown && (n < 0 || refused)) {
			if (n < 0)
				say_failed(path, n);
			else
				put_reply(n);
			return 1;
		}
		if (n < 0 || refused) {
			reply[strcspn(reply, "\n")] = 0;
			printf("nvcachectl: %s at %s: %s; trying again\n", path, at,
			       n < 0 ? strerror((int)-n) : reply);
		} else {
			printf(tty ? "\033[H\033[2J" : "--- %s\n", at);
			put_reply(n);
			shown = true;
		}
		fflush(stdout);
		sleep(secs > 0 ? (unsigned)secs : 1);
	}
}

/* --cluster FILE anywhere after the verb (status --json --cluster F)
 * moved to argv[i], the place ctl_cluster_run reads it from; the other
 * words keep their order. -1 (said) if no FILE follows it. */
static int cluster_first(int argc, char **argv, int i)
{
	for (int k = i; k < argc; k++) {
		if (strcmp(argv[k], "--cluster"))
			continue;
		if (k + 1 >= argc) {
			fprintf(stderr, "nvcachectl: --cluster needs a FILE\n");
			return -1;
		}
		char *opt = argv[k], *file = argv[k + 1];
		memmove(&argv[i + 2], &argv[i], (size_t)(k - i) * sizeof(*argv));
		argv[i] = opt;
		argv[i + 1] = file;
		return 0;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "run-dir", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	char path[PATH_MAX], cmd[CTL_MAX_CMD];
	int c, i;

	/* Stop at the first non-option: the rest belongs to the command. */
	while ((c = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
		switch (c) {
		case 'r': setenv("NVCACHE_RUN_DIR", optarg, 1); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	const char *verb = argv[optind];
	i = optind + 1;
	bool clusterable = !strcmp(verb, "status") || !strcmp(verb, "stats") ||
			   !strcmp(verb, "watch");
	if (clusterable && cluster_first(argc, argv, i))
		return 2;
	if (i < argc && !strcmp(argv[i], "--cluster") && clusterable)
		return ctl_cluster_run(verb, argc, argv, i);
	if (!strcmp(verb, "ckpt"))
		return ctl_ckpt_run(argc, argv, i);
	if (!strcmp(verb, "status"))
		return ctl_status_run(argc, argv, i);
	if (!strcmp(verb, "metrics"))
		return ctl_metrics_run(argc, argv, i);
	/* shrink NODE SIZE, grow NODE: sugar for send --node NODE ... */
	if (!strcmp(verb, "shrink") || !strcmp(verb, "grow")) {
		int want = !strcmp(verb, "shrink") ? 2 : 1;
		if (argc - i != want ||
		    ctl_socket_path("node", argv[i], path, sizeof(path))) {
			fprintf(stderr, "nvcachectl: usage: %s\n", want == 2 ?
				"shrink NODE SIZE" : "grow NODE");
			return 2;
		}
		snprintf(cmd, sizeof(cmd), "%s%s%s", verb, want == 2 ? " " : "",
			 want == 2 ? argv[i + 1] : "");
		return ask(path, cmd, 0);
	}
	if (strcmp(verb, "stats") && strcmp(verb, "watch") && strcmp(verb, "send")) {
		fprintf(stderr, "nvcachectl: unknown command '%s'\n", verb);
		usage(stderr);
		return 2;
	}
	if (target_path(argc, argv, &i, path, sizeof(path))) {
		fprintf(stderr, "nvcachectl: %s needs a TARGET\n", verb);
		usage(stderr);
		return 2;
	}
	if (!strcmp(verb, "stats"))
		return ask(path, "stats", 0);
	if (!strcmp(verb, "watch"))
		return watch(path, i < argc ? atoi(argv[i]) : 1);
	/* send: the remaining words are the command. */
	cmd[0] = 0;
	for (; i < argc; i++) {
		if (strlen(cmd) + strlen(argv[i]) + 2 > sizeof(cmd)) {
			fprintf(stderr, "nvcachectl: command too long\n");
			return 2;
		}
		if (cmd[0])
			strcat(cmd, " ");
		strcat(cmd, argv[i]);
	}
	if (!cmd[0]) {
		fprintf(stderr, "nvcachectl: send needs a COMMAND\n");
		return 2;
	}
	return ask(path, cmd, 0);
}
