/* ctl_status.h - nvcachectl's view of the daemons on this machine:
 * 'status' (one line per daemon, then one per problem; --json for
 * scripts) and 'metrics' (every counter in Prometheus's text format, for
 * node_exporter's textfile collector).
 *
 * Each daemon's control socket in the run directory is asked "info" (kind,
 * name, pid, age: answered by common/ctl.c for every daemon) and "stats"
 * twice, an interval apart; rates are the difference over that interval,
 * so a figure says what the daemon does now, not since it started.
 *
 * Threads: nvcachectl's main thread only. */
#pragma once

/* argv[i..] are status's options: [--json] [--interval SECONDS] (default
 * 1; 0: no rates, one sample). Returns the exit status: 0 when every
 * daemon answered and none has a problem, 1 when one has (or does not
 * answer), 2 on a usage error. No daemon at all is 0. */
int ctl_status_run(int argc, char **argv, int i);

/* argv[i..]: [--interval SECONDS] (default 0: counters only). Prints the
 * metrics of every daemon; returns 0, or 2 on a usage error. */
int ctl_metrics_run(int argc, char **argv, int i);
