/* nvcached - the node daemon: one per node. Serves other nodes' pages from
 * this node's idle memory (an Nswap server), heartbeats the other nodes of
 * the cluster file, and answers `nvcachectl stats --node ID`. See
 * docs/nvcached.md. */
#include "cluster/conn.h"
#include "cluster/config.h"
#include "cluster/node.h"
#include "cluster/fcache.h"
#include "cluster/peerpool.h"
#include "pmem/policy.h"
#include "pmem/tierstore.h"
#include "common/bigmem.h"
#include "common/ctl.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/opts.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f,
"usage: nvcached --cluster FILE --node ID [options]\n"
"\n"
"  -c, --cluster FILE     the cluster file (node and secret lines)\n"
"  -n, --node ID          which node of the cluster file this is\n"
"  -f, --foreground       stay in the foreground, log to stderr (else to\n"
"                         syslog, or /var/log/nvcached-ID.log when no syslog\n"
"                         daemon listens)\n"
"      --heartbeat MS     heartbeat interval (default %d)\n"
"      --timeout MS       declare a node dead after this long without a\n"
"                         heartbeat (default %d; > 2 intervals)\n"
"      --reserve SIZE     memory kept for local processes (default 10%% of\n"
"                         RAM, at least 256M)\n"
"      --meminfo PATH     where to read MemAvailable (default /proc/meminfo)\n"
"      --max-conns N      inbound connections served at once (default %d)\n"
"      --peer-conns N     connections to each other node that forward parity\n"
"                         updates, shared by all inbound ones (default %d,\n"
"                         at most %d)\n"
"      --no-mlock         do not lock the daemon's memory\n"
"      --tier-size SIZE   keep other nodes' pages in a tiered store of this\n"
"                         many bytes (MRAM, DRAM and a flash file, placed by\n"
"                         --policy) and offer exactly that; without it they\n"
"                         are kept in DRAM and the offer follows idle memory\n"
"      --mram SIZE        its MRAM tier (default 64M, at most --tier-size)\n"
"      --dram SIZE        its DRAM tier (default: the rest of --tier-size)\n"
"      --flash FILE       its flash spill file (needed when MRAM + DRAM <\n"
"                         --tier-size; not on tmpfs)\n"
"      --nvram FILE       its MRAM file (default /dev/shm/nvcached-ID.mram)\n"
"      --policy NAME      its tiering policy (default lru; known: %s)\n"
"      --trace-out FILE   log every page access its policy sees (nvt, for\n"
"                         nvsim; gzip if FILE ends in .gz)\n"
"      --profile FILE     the paper's profiling run: an access log an\n"
"                         earlier run wrote with --trace-out ranks the\n"
"                         pages (mram-fixed and lowpower pin that run's\n"
"                         hottest from their first touch, adaptive ranks\n"
"                         its pin set by it; lru ignores it)\n"
"      --cache-size SIZE  serve a file cache of this size to nvcachefs\n"
"                         mounts of the cluster (-o cluster=FILE,node=N)\n"
"      --cache-nvram FILE its NVRAM file (default RUN_DIR/fcache-ID.nvram)\n"
"  -v, --verbose          debug logging\n"
"  -h, --help\n"
"\n"
"While running (nvcachectl send --node ID COMMAND): stats, peers,\n"
"'limit SIZE' (cap the offer; 'limit 0' lifts it), 'shrink SIZE' (give\n"
"memory back: offer at most SIZE, 0 included; the swapping nodes migrate\n"
"the excess away; also 'nvcachectl shrink ID SIZE'), 'grow' (lift that\n"
"cap: offer idle memory again).\n",
		NODE_DEFAULT_HEARTBEAT_MS, NODE_DEFAULT_TIMEOUT_MS,
		NODE_DEFAULT_MAX_CONNS, NODE_DEFAULT_PEER_CONNS, PEERPOOL_MAX_SIZE,
		policy_names());
}

static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || !*s || *s == '-' || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Fork; the parent exits once the child reports it is serving (or failed),
 * so that "nvcached ..." returning 0 means the node is up. */
static int daemonize(int *ready_fd)
{
	int p[2];

	if (pipe(p) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		char c = 1;
		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			c = 1;
		_exit(c ? 1 : 0);
	}
	close(p[0]);
	if (setsid() < 0)
		return -errno;
	/* No chdir("/"): --flash, --nvram, --trace-out and --profile are
	 * opened after this, and relative ones mean the caller's directory. */
	*ready_fd = p[1];
	return 0;
}

static void lock_memory(bool want)
{
#if defined(__SANITIZE_ADDRESS__)
	(void)want;
	log_info("built with AddressSanitizer: not locking memory (mlockall of the "
		 "shadow memory would fail)");
#else
	if (!want)
		return;
	/* Pages held for other nodes are their swap: they must not be
	 * swapped out here. */
	if (mlockall(MCL_CURRENT | MCL_FUTURE) < 0)
		log_warn("mlockall: %s: stored pages may be swapped out under memory "
			 "pressure (run as root or raise RLIMIT_MEMLOCK)", strerror(errno));
#endif
}

/* What the command line asks for. */
struct args {
	struct cluster_config cfg;
	struct node_opts o;
	struct tierstore_opts to;       /* o.tier points here when given */
	char nvram[64];
	const char *cluster;
	uint64_t cache_size;            /* --cache-size, 0: no file cache */
	const char *cache_nvram;
	struct fcache *fc;
	bool fg, mlock, verbose;
};

/* The tiered store's options, as given. */
struct tier_args {
	uint64_t size, mram, dram;
	bool mram_set, dram_set, given;
	const char *flash, *nvram, *policy, *trace, *profile;
};

/* The tiered store's layout from its options: -1 to go on, or the exit
 * status (said on stderr). */
static int tier_layout(const struct tier_args *t, struct args *a)
{
	const char *nvram = t->nvram;

	if (!t->given)
		return -1;
	if (!t->size) {
		fprintf(stderr, "nvcached: --mram, --dram, --flash, --nvram, "
			"--policy, --trace-out and --profile describe "
			"the tiered store: give its --tier-size too\n");
		return 2;
	}
	if (!nvram) {
		snprintf(a->nvram, sizeof(a->nvram), "/dev/shm/nvcached-%u.mram", a->o.self);
		nvram = a->nvram;
	}
	uint64_t mram = t->mram_set ? t->mram : 64ULL << 20;
	if (mram > t->size)
		mram = t->size;
	uint64_t dram = t->dram_set ? t->dram : t->size - mram;
	if (mram + dram > t->size) {
		/* Memory beyond the page space would be locked and never
		 * used. */
		fprintf(stderr, "nvcached: --mram + --dram (%llu MiB) exceed "
			"--tier-size (%llu MiB)\n",
			(unsigned long long)((mram + dram) >> 20),
			(unsigned long long)(t->size >> 20));
		return 2;
	}
	a->to = (struct tierstore_opts){
		.pages = t->size / 4096, .mram_pages = mram / 4096,
		.dram_pages = dram / 4096, .nvram_path = nvram,
		.flash_path = t->flash, .policy = t->policy,
		.trace_path = t->trace, .profile_path = t->profile,
	};
	a->o.tier = &a->to;
	return -1;
}

/* The command line into a: -1 to go on, or the exit status (--help: 0;
 * a bad option: 2, said on stderr). */
static int parse_args(int argc, char **argv, struct args *a)
{
	static const struct option lopts[] = {
		{ "cluster", required_argument, NULL, 'c' },
		{ "node", required_argument, NULL, 'n' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "heartbeat", required_argument, NULL, 'H' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "reserve", required_argument, NULL, 'R' },
		{ "meminfo", required_argument, NULL, 'M' },
		{ "max-conns", required_argument, NULL, 'C' },
		{ "peer-conns", required_argument, NULL, 'K' },
		{ "no-mlock", no_argument, NULL, 'L' },
		{ "tier-size", required_argument, NULL, 'S' },
		{ "mram", required_argument, NULL, 'm' },
		{ "dram", required_argument, NULL, 'd' },
		{ "flash", required_argument, NULL, 'F' },
		{ "nvram", required_argument, NULL, 'N' },
		{ "policy", required_argument, NULL, 'p' },
		{ "trace-out", required_argument, NULL, 'O' },
		{ "profile", required_argument, NULL, 'P' },
		{ "cache-size", required_argument, NULL, 'Z' },
		{ "cache-nvram", required_argument, NULL, 'Y' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct tier_args t = { .policy = "lru" };
	struct node_opts *o = &a->o;
	unsigned long v;
	int c;

	while ((c = getopt_long(argc, argv, "c:n:fvh", lopts, NULL)) != -1) {
		switch (c) {
		case 'c': a->cluster = optarg; break;
		case 'n':
			if (parse_uint(optarg, 65535, &v) || !v) {
				fprintf(stderr, "nvcached: --node %s: not a node id (1..65535)\n", optarg);
				return 2;
			}
			o->self = (uint32_t)v;
			break;
		case 'f': a->fg = true; break;
		case 'H':
		case 'T':
			if (parse_uint(optarg, 3600000, &v) || !v) {
				fprintf(stderr, "nvcached: %s: not a number of milliseconds\n", optarg);
				return 2;
			}
			if (c == 'H')
				o->heartbeat_ms = (uint32_t)v;
			else
				o->timeout_ms = (uint32_t)v;
			break;
		case 'R':
			if (opts_parse_size(optarg, &o->reserve)) {
				fprintf(stderr, "nvcached: --reserve %s: not a size (e.g. 512M)\n", optarg);
				return 2;
			}
			break;
		case 'M': o->meminfo = optarg; break;
		case 'C':
			if (parse_uint(optarg, 100000, &v) || !v) {
				fprintf(stderr, "nvcached: --max-conns %s: not a count\n", optarg);
				return 2;
			}
			o->max_conns = (unsigned)v;
			break;
		case 'K':
			if (parse_uint(optarg, PEERPOOL_MAX_SIZE, &v) || !v) {
				fprintf(stderr, "nvcached: --peer-conns %s: not a count "
					"(1..%d)\n", optarg, PEERPOOL_MAX_SIZE);
				return 2;
			}
			o->peer_conns = (unsigned)v;
			break;
		case 'L': a->mlock = false; break;
		case 'S': case 'm': case 'd': {
			uint64_t *dst = c == 'S' ? &t.size : c == 'm' ? &t.mram : &t.dram;
			if (opts_parse_size(optarg, dst) || *dst % 4096 ||
			    (c == 'S' && !*dst)) {
				fprintf(stderr, "nvcached: %s: not a size in 4 KiB pages "
					"(e.g. 256M)\n", optarg);
				return 2;
			}
			if (c == 'm')
				t.mram_set = true;
			if (c == 'd')
				t.dram_set = true;
			t.given = true;
			break;
		}
		case 'F': t.flash = optarg; t.given = true; break;
		case 'N': t.nvram = optarg; t.given = true; break;
		case 'p': t.policy = optarg; t.given = true; break;
		case 'O': t.trace = optarg; t.given = true; break;
		case 'P': t.profile = optarg; t.given = true; break;
		case 'Z':
			if (opts_parse_size(optarg, &a->cache_size) ||
			    a->cache_size < (4u << 20)) {
				fprintf(stderr, "nvcached: --cache-size %s: give a size of "
					"at least 4M (e.g. 8G)\n", optarg);
				return 2;
			}
			break;
		case 'Y': a->cache_nvram = optarg; break;
		case 'v': a->verbose = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (a->cache_nvram && !a->cache_size) {
		fprintf(stderr, "nvcached: --cache-nvram names the file cache's "
			"NVRAM: give its --cache-size too\n");
		return 2;
	}
	if (!a->cluster || !o->self || optind != argc) {
		usage(stderr);
		return 2;
	}
	return tier_layout(&t, a);
}

/* A running node: what set_up started and run stops. */
struct daemon {
	struct node *n;
	struct ctl_server *ctl;
	sigset_t sigs;                  /* taken by sigwait in run */
	bool own_nvram, own_flash;      /* created by us: removed by us */
	bool own_fcache;                /* the file cache's NVRAM file too */
	char fcache_path[4096];
};

/* The files a failed start created go again. */
static void undo_files(const struct args *a, const struct daemon *d)
{
	if (d->own_nvram)
		path_remove_unlocked(a->to.nvram_path, "NVRAM file");
	if (d->own_flash)
		path_remove_unlocked(a->to.flash_path, "flash file");
	/* (on tmpfs a kept file is RAM: --cache-size of it) */
	if (d->own_fcache)
		path_remove_unlocked(d->fcache_path, "file cache NVRAM file");
}

/* The node started as a asks, with its control socket; in the background
 * unless --foreground, the caller's terminal released once it serves.
 * -1 to go on, or the exit status (logged). */
static int set_up(struct args *a, struct daemon *d)
{
	const struct node_opts *o = &a->o;
	char err[512];
	int ready_fd = -1;

	log_init("nvcached", a->verbose ? LOG_LVL_DEBUG : LOG_LVL_INFO);
	if (config_load(a->cluster, &a->cfg, err, sizeof(err))) {
		fprintf(stderr, "nvcached: %s\n", err);
		return 1;
	}
	conn_set_congestion(a->cfg.tcp_congestion);
	if (!config_node_find(&a->cfg, o->self)) {
		fprintf(stderr, "nvcached: node %u is not in %s\n", o->self, a->cluster);
		return 1;
	}
	if (!a->fg) {
		int rc = daemonize(&ready_fd);
		if (rc) {
			fprintf(stderr, "nvcached: cannot daemonize: %s\n", strerror(-rc));
			return 1;
		}
		/* stderr stays until it serves: a start that fails says why
		 * on the terminal (syslog may not exist: no /dev/log here) */
	}
	lock_memory(a->mlock);

	/* Signals are taken synchronously by run; every thread created
	 * from here on inherits the block. */
	sigemptyset(&d->sigs);
	sigaddset(&d->sigs, SIGINT);
	sigaddset(&d->sigs, SIGTERM);
	sigaddset(&d->sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &d->sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* A flash file over the file-size limit: EFBIG, that page lost and
	 * logged, not the whole daemon (and every page it holds) killed. */
	signal(SIGXFSZ, SIG_IGN);

	/* The emulated MRAM file is ours to remove if we create it (another
	 * nvcached of the same id may be using an existing one). */
	d->own_nvram = o->tier && a->to.mram_pages && access(a->to.nvram_path, F_OK) != 0;
	d->own_flash = o->tier && a->to.flash_path && access(a->to.flash_path, F_OK) != 0;
	/* A large --tier-size takes a while to reserve: a SIGTERM or ^C
	 * stops the start-up between steps. */
	bigmem_set_stop(bigmem_stop_signal_pending);
	int rc = 0;
	if (a->cache_size) {
		if (a->cache_nvram)
			snprintf(d->fcache_path, sizeof(d->fcache_path), "%s",
				 a->cache_nvram);
		else
			snprintf(d->fcache_path, sizeof(d->fcache_path),
				 "%s/fcache-%u.nvram", ctl_run_dir(), o->self);
		d->own_fcache = access(d->fcache_path, F_OK) != 0;
		struct fcache_opts fo = {
			.path = d->fcache_path,
			.size = a->cache_size, .digest = config_digest(&a->cfg),
			.self = o->self,
		};
		rc = fcache_open(&a->fc, &fo);
		if (rc) {
			undo_files(a, d);
			return 1; /* logged */
		}
		a->o.fcache = a->fc;
	}
	rc = node_start(&d->n, o);
	if (rc) {
		fcache_close(a->fc);
		undo_files(a, d);
		if (rc == -EINTR && bigmem_stopping()) {
			log_info("stopped by a signal during start-up");
			return 0;
		}
		return 1; /* logged */
	}
	char name[16];
	snprintf(name, sizeof(name), "%u", o->self);
	rc = ctl_server_start(&d->ctl, "node", name, node_ctl, d->n);
	if (rc) {
		log_err("control socket node-%s.sock in %s: %s%s", name, ctl_run_dir(),
			strerror(-rc), rc == -EADDRINUSE ?
			" (another nvcached runs as this node)" : "");
		fcache_stop(a->fc);
		node_stop(d->n);
		fcache_close(a->fc);
		undo_files(a, d);
		return 1;
	}
	if (ready_fd >= 0) {
		/* detached: syslog, or where the quick start's nodes log
		 * when no syslog daemon listens (syslog(3) would drop every
		 * line); a file refused is said on the caller's terminal */
		char file[64];
		snprintf(file, sizeof(file), "/var/log/nvcached-%u.log", o->self);
		int lrc = log_syslog_listening() ? 1 : log_to_file(file);
		if (lrc < 0)
			fprintf(stderr, "nvcached: log file %s: %s; logging to "
				"syslog\n", file, strerror(-lrc));
		char ok = 0;
		if (write(ready_fd, &ok, 1) != 1)
			log_debug("ready pipe: %s", strerror(errno));
		close(ready_fd);
		int devnull = open("/dev/null", O_RDWR);
		if (devnull >= 0) {
			dup2(devnull, 0);
			dup2(devnull, 1);
			dup2(devnull, 2);
			if (devnull > 2)
				close(devnull);
		}
		if (lrc != 0)
			log_use_syslog(true);
	}
	return -1;
}

/* Serve until a signal, then stop. The exit status. */
static int run(const struct args *a, struct daemon *d)
{
	int sig = 0;

	sigwait(&d->sigs, &sig);
	log_info("signal %d: stopping node %u", sig, a->o.self);
	ctl_server_stop(d->ctl);
	/* the file cache's thread sends through the node: stopped first */
	fcache_stop(a->fc);
	node_stop(d->n);
	fcache_close(a->fc);
	/* The emulated MRAM held only other nodes' pages, gone with us. */
	if (a->o.tier && a->to.mram_pages && unlink(a->to.nvram_path) < 0 &&
	    errno != ENOENT)
		log_warn("%s: %s", a->to.nvram_path, strerror(errno));
	if (a->o.tier)
		spill_discard(a->to.flash_path, d->own_flash);
	log_info("node %u stopped", a->o.self);
	return 0;
}

int main(int argc, char **argv)
{
	static struct args a = { .o = { .listen_fd = -1 }, .mlock = true };
	struct daemon d = { 0 };
	int rc;

	a.o.cfg = &a.cfg;
	if ((rc = parse_args(argc, argv, &a)) >= 0)
		return rc;
	if ((rc = set_up(&a, &d)) >= 0)
		return rc;
	return run(&a, &d);
}
