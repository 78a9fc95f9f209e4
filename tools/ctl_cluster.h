/* ctl_cluster.h - nvcachectl's view of a whole cluster: 'status', 'stats'
 * and 'watch' with --cluster FILE ask every node of the cluster file over
 * the network (cluster/client.h, authenticated with the cluster's secret)
 * for its node table and its counters (NODE_STATS), one thread per node,
 * each bounded by a timeout, so that a dead or unreachable node shows as
 * such and never holds the command up.
 *
 * Threads: called from nvcachectl's main thread; it starts and joins its
 * own workers. */
#pragma once

/* argv[i] is "--cluster"; the rest: FILE [--timeout MS] [SECONDS for
 * watch]. verb is "status", "stats" or "watch". Returns the exit status:
 * 0 when at least one node answered, 1 when none did (or the file or its
 * secret could not be read), 2 on a usage error. */
int ctl_cluster_run(const char *verb, int argc, char **argv, int i);
