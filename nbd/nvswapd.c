/* nvswapd.c - the NBD server the kernel swaps to: options, swap hygiene
 * (mlockall, PR_SET_IO_FLUSHER, oom_score_adj), the page store, the
 * control socket, and the server threads. See docs/nvswapd.md. */
#include "nbd/backend.h"
#include "nbd/backend_flat.h"
#include "nbd/backend_remote.h"
#include "nbd/backend_store.h"
#include "nbd/server.h"

#include "common/bigmem.h"
#include "common/ctl.h"
#include "common/log.h"
#include "common/opts.h"
#include "common/outbuf.h"
#include "common/paths.h"
#include "pmem/policy.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

#define MIN_BLOCK  512U
#define PREF_BLOCK 4096U
#define MAX_BLOCK  (32U << 20)

struct cfg {
	uint64_t size, mram, dram;
	bool dram_set, mram_set;
	const char *unix_path, *listen, *name, *flash, *policy, *nvram, *store;
	const char *cluster, *redundancy;   /* --store remote */
	const char *trace_out;              /* --store tiered */
	const char *profile;                /* --store tiered */
	unsigned node;
	unsigned threads, max_conns, handshake_s;
	bool foreground;
};

static void usage(FILE *f)
{
	fprintf(f,
"usage: nvswapd --size SIZE [--unix PATH | --listen HOST:PORT] [options]\n"
"\n"
"An NBD server the kernel can swap to (nbdfuse + losetup + swapon, or\n"
"nbd-client where the nbd driver exists), keeping pages in a tiered store:\n"
"MRAM (a libpmem2-mapped file), DRAM (locked anonymous memory) and an\n"
"optional flash spill file. Sizes take K/M/G/T suffixes.\n"
"\n"
"  --size SIZE       export size (required)\n"
"  --unix PATH       listen on a Unix socket (a dead server's socket there\n"
"                    is replaced; any other file refuses the start)\n"
"  --listen H:P      listen on TCP (default 127.0.0.1:10809 when no --unix;\n"
"                    port 0: any free port, logged)\n"
"  --name NAME       export name (default \"swap\"; a client asking for \"\"\n"
"                    gets it too; not empty, no '/' nor control characters);\n"
"                    the control socket is $NVCACHE_RUN_DIR/swap-NAME.sock\n"
"  --mram SIZE       MRAM tier (default 64M, at most --size)\n"
"  --dram SIZE       DRAM tier (default: the rest of --size)\n"
"  --flash FILE      flash spill file (needed when MRAM + DRAM < size);\n"
"                    refused on tmpfs: swap backed by tmpfs deadlocks\n"
"  --policy NAME     tiering policy (default lru; known: %s)\n"
"                    --mram, --dram and --policy need --store tiered;\n"
"                    --flash needs --store tiered or remote\n"
"  --nvram FILE      MRAM file (default /dev/shm/nvswapd-NAME.mram)\n"
"  --store KIND      tiered (default) or flat (one DRAM array, no tiers:\n"
"                    measures the protocol path alone) or remote (pages in\n"
"                    the memory of the nvcached nodes of --cluster)\n"
"  --cluster FILE    cluster file for --store remote (docs/nvcached.md)\n"
"  --node ID         this node's id in it (never used as a target)\n"
"  --redundancy R    --store remote: mirror (default: two copies on two\n"
"                    nodes), none, parity[:N] (groups of N pages, default\n"
"                    4, XOR page on one parity node) or parity-dist[:N]\n"
"                    (parity pages spread over the nodes); with --store\n"
"                    remote, --flash FILE (on disk) takes the pages no node\n"
"                    has room for, in every mode; they move back to the\n"
"                    nodes when room returns\n"
"  --trace-out FILE  record every page access the tiered store presents to\n"
"                    its policy (nvt, gzip if FILE ends in .gz) for\n"
"                    nvsim --trace FILE; written by a background thread,\n"
"                    complete at SIGTERM; an access that finds the ring\n"
"                    full is dropped and counted (stats trace_dropped)\n"
"  --profile FILE    the paper's profiling run: an access log a previous\n"
"                    run wrote with --trace-out (not this run's); each\n"
"                    page's access count ranks it: mram-fixed and lowpower\n"
"                    pin that run's hottest pages from their first touch,\n"
"                    adaptive ranks its pin set by it (without it they\n"
"                    learn online; lru ignores it)\n"
"  --threads N       server threads, each with its own io_uring\n"
"                    (default: the number of CPUs, at most 4)\n"
"  --max-conns N     connections served at once (default 32)\n"
"  --handshake-timeout S  close a connection still negotiating after S\n"
"                    seconds (default 30, 0: never)\n"
"  -f, --foreground  stay in the foreground, log to stderr\n"
"  -h, --help        this text\n"
"\n"
"Stats: nvcachectl stats --swap NAME.  Stop: SIGTERM.\n",
		policy_names());
}

static int parse_args(int argc, char **argv, struct cfg *c)
{
	static const struct option lo[] = {
		{ "size", required_argument, NULL, 's' },
		{ "unix", required_argument, NULL, 'u' },
		{ "listen", required_argument, NULL, 'l' },
		{ "name", required_argument, NULL, 'n' },
		{ "mram", required_argument, NULL, 'm' },
		{ "dram", required_argument, NULL, 'd' },
		{ "flash", required_argument, NULL, 'F' },
		{ "policy", required_argument, NULL, 'p' },
		{ "nvram", required_argument, NULL, 'N' },
		{ "store", required_argument, NULL, 'S' },
		{ "cluster", required_argument, NULL, 'K' },
		{ "node", required_argument, NULL, 'I' },
		{ "redundancy", required_argument, NULL, 'R' },
		{ "trace-out", required_argument, NULL, 'T' },
		{ "profile", required_argument, NULL, 'P' },
		{ "threads", required_argument, NULL, 't' },
		{ "max-conns", required_argument, NULL, 'c' },
		{ "handshake-timeout", required_argument, NULL, 'H' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	int o;
	uint64_t v;

	while ((o = getopt_long(argc, argv, "fh", lo, NULL)) != -1) {
		switch (o) {
		case 's': case 'm': case 'd':
			if (opts_parse_size(optarg, &v) < 0) {
				fprintf(stderr, "nvswapd: bad size '%s'\n", optarg);
				return -1;
			}
			if (o == 's') c->size = v;
			if (o == 'm') { c->mram = v; c->mram_set = true; }
			if (o == 'd') { c->dram = v; c->dram_set = true; }
			break;
		case 'u': c->unix_path = optarg; break;
		case 'l': c->listen = optarg; break;
		case 'n': c->name = optarg; break;
		case 'F': c->flash = optarg; break;
		case 'p': c->policy = optarg; break;
		case 'N': c->nvram = optarg; break;
		case 'S': c->store = optarg; break;
		case 'K': c->cluster = optarg; break;
		case 'I': {
			char *end;
			unsigned long id = strtoul(optarg, &end, 10);
			if (!*optarg || *end || id == 0 || id > 65535) {
				fprintf(stderr, "nvswapd: --node %s: a node id "
					"(1-65535) of the cluster file\n", optarg);
				return -1;
			}
			c->node = (unsigned)id;
			break;
		}
		case 'R': c->redundancy = optarg; break;
		case 'T': c->trace_out = optarg; break;
		case 'P': c->profile = optarg; break;
		case 't': c->threads = (unsigned)atoi(optarg); break;
		case 'c': c->max_conns = (unsigned)atoi(optarg); break;
		case 'H': {
			char *end;
			unsigned long s = strtoul(optarg, &end, 10);
			if (end == optarg || *end || s > 86400) {
				fprintf(stderr, "nvswapd: --handshake-timeout "
					"takes seconds, 0..86400\n");
				return -1;
			}
			c->handshake_s = (unsigned)s;
			break;
		}
		case 'f': c->foreground = true; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "nvswapd: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	if (!c->size) {
		fprintf(stderr, "nvswapd: --size is required, and more than 0 "
			"(e.g. --size 1G)\n");
		return -1;
	}
	if (c->size % PREF_BLOCK) {
		fprintf(stderr, "nvswapd: --size must be a multiple of 4 KiB\n");
		return -1;
	}
	if (c->unix_path && c->listen) {
		fprintf(stderr, "nvswapd: give --unix or --listen, not both\n");
		return -1;
	}
	if (strcmp(c->store, "tiered") && strcmp(c->store, "flat") &&
	    strcmp(c->store, "remote")) {
		fprintf(stderr, "nvswapd: --store is 'tiered', 'flat' or 'remote'\n");
		return -1;
	}
	if (c->trace_out && strcmp(c->store, "tiered")) {
		fprintf(stderr, "nvswapd: --trace-out records the tiered "
			"store's accesses: it needs --store tiered\n");
		return -1;
	}
	if (c->profile && strcmp(c->store, "tiered")) {
		fprintf(stderr, "nvswapd: --profile ranks the tiered store's "
			"pages: it needs --store tiered\n");
		return -1;
	}
	/* Options of a store other than the one chosen are refused, not
	 * dropped: a user would think the policy or the tier sizes apply. */
	if (strcmp(c->store, "tiered")) {
		const char *opt = c->mram_set ? "--mram" : c->dram_set ?
				  "--dram" : c->policy ? "--policy" : NULL;
		if (opt) {
			fprintf(stderr, "nvswapd: %s applies to the tiered store's "
				"tiers: it needs --store tiered (--store %s has "
				"none)\n", opt, c->store);
			return -1;
		}
	}
	if (c->flash && !strcmp(c->store, "flat")) {
		fprintf(stderr, "nvswapd: --flash is a spill file: it needs "
			"--store tiered (or remote); --store flat keeps every "
			"page in RAM\n");
		return -1;
	}
	if (strcmp(c->store, "remote")) {
		const char *opt = c->cluster ? "--cluster" : c->node ? "--node" :
				  c->redundancy ? "--redundancy" : NULL;
		if (opt) {
			fprintf(stderr, "nvswapd: %s is for the cluster's nodes: it "
				"needs --store remote (--store %s keeps pages "
				"here)\n", opt, c->store);
			return -1;
		}
	}
	if (!strcmp(c->store, "remote") && !c->cluster) {
		fprintf(stderr, "nvswapd: --store remote needs --cluster FILE\n");
		return -1;
	}
	/* The name names the control socket (swap-NAME.sock) that
	 * nvcachectl stats --swap NAME asks, and the default MRAM file. */
	if (!c->name[0]) {
		fprintf(stderr, "nvswapd: --name: give a name, not \"\" (a "
			"client asking for export \"\" gets this export "
			"whatever its name)\n");
		return -1;
	}
	bool bad_char = false;
	for (const char *p = c->name; *p; p++)
		if (*p == '/' || (unsigned char)*p < 0x20 || *p == 0x7f)
			bad_char = true;
	if (strlen(c->name) > 255 || bad_char) {
		fprintf(stderr, "nvswapd: --name: at most 255 bytes, no '/' "
			"nor control characters\n");
		return -1;
	}
	char cpath[PATH_MAX];
	if (ctl_socket_path("swap", c->name, cpath, sizeof(cpath)) < 0) {
		fprintf(stderr, "nvswapd: --name: the control socket %s/swap-"
			"NAME.sock would be too long for a Unix socket (at most "
			"%zu bytes); give a shorter name\n", ctl_run_dir(),
			sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
		return -1;
	}
	if (c->threads < 1 || c->threads > 64 || c->max_conns < 1 ||
	    c->max_conns > 4096) {
		fprintf(stderr, "nvswapd: --threads 1..64, --max-conns 1..4096\n");
		return -1;
	}
	return 0;
}

/* getaddrinfo() takes "99999" and wraps it (to 34463): the range is
 * checked here. */
static bool port_ok(const char *p)
{
	char *end;
	unsigned long v;

	if (*p < '0' || *p > '9')
		return false;
	errno = 0;
	v = strtoul(p, &end, 10);
	return !*end && !errno && v <= 65535;
}

/* Bytes of RAM this machine has (0: unknown, nothing is checked). What
 * a store must keep in memory (locked, under mlockall) is checked against
 * it at start: over it, nvswapd would grow until the OOM killer ends it. */
static uint64_t ram_total(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	return pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
}

/* A file nvswapd may create at start (flash, MRAM, access log), and
 * whether it was there before: a refused start removes what it created
 * itself (a 0-byte flash file refused on tmpfs, an MRAM file whose
 * mapping failed), and nothing it found. */
struct own_file {
	const char *path;
	const char *what;
	bool existed;
};

static void own_note(struct own_file *f, const char *path, const char *what)
{
	struct stat st;

	f->path = path;
	f->what = what;
	f->existed = !path || lstat(path, &st) == 0 || errno != ENOENT;
}

static void own_remove(const struct own_file *f)
{
	if (!f->existed)
		path_remove_unlocked(f->path, f->what);
}

/* Swap hygiene, before any thread exists (PR_SET_IO_FLUSHER is inherited
 * by threads created afterwards). */
static void swap_hygiene(void)
{
	bool flusher = true, oom = true;

	if (prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0) < 0) {
		flusher = false;
		log_warn("PR_SET_IO_FLUSHER: %s (needs Linux >= 5.6 and "
			 "CAP_SYS_RESOURCE); memory reclaim may recurse into "
			 "this daemon's own I/O", strerror(errno));
	}
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "-1000", 5) != 5) {
		oom = false;
		log_warn("oom_score_adj -1000: %s (needs CAP_SYS_RESOURCE); "
			 "the OOM killer may pick this daemon and lose swapped "
			 "pages", strerror(errno));
	}
	if (fd >= 0)
		close(fd);
	if (UNDER_ASAN) {
		log_warn("built with AddressSanitizer: not calling mlockall "
			 "(it would lock terabytes of shadow memory); do not "
			 "swap to this build");
	} else if (mlockall(MCL_CURRENT | MCL_FUTURE) < 0) {
		/* Everything mapped now and later would be resident and
		 * locked: buffers, stacks, the DRAM tier. */
		log_warn("mlockall: %s; pages of this daemon may be swapped "
			 "out to itself", strerror(errno));
	} else {
		log_info("memory locked (mlockall); PR_SET_IO_FLUSHER %s; "
			 "oom_score_adj %s", flusher ? "set" : "NOT set",
			 oom ? "-1000" : "NOT set");
	}
}

/* Fork; the parent waits until the child reports that it serves (or
 * failed), so "nvswapd ... && nbdinfo ..." works. */
static int daemonize(int *notify_fd)
{
	int p[2];
	char st = 1;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		close(p[1]);
		if (read(p[0], &st, 1) != 1)
			st = 1;
		_exit(st);
	}
	close(p[0]);
	setsid();
	*notify_fd = p[1];
	return 0;
}

static void daemon_ready(int notify_fd, char status)
{
	if (notify_fd < 0)
		return;
	if (status == 0) {
		int fd = open("/dev/null", O_RDWR);
		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
			dup2(fd, 2);
			if (fd > 2)
				close(fd);
		}
		log_use_syslog(true);
	}
	/* A failed write means the parent is gone: nothing to tell. */
	ssize_t w = write(notify_fd, &status, 1);
	(void)w;
	close(notify_fd);
}

struct daemon_state {
	struct nbd_server *srv;
	struct nbd_backend *be;
	const char *store;
};

static ssize_t swap_ctl(void *arg, const char *cmd, char *out,
			   size_t outlen)
{
	struct daemon_state *d = arg;

	if (strcmp(cmd, "stats") != 0)
		return -ENOENT;
	ssize_t n = nbd_server_stats(d->srv, out, outlen);
	if (n < 0)
		return n;
	struct outbuf o = { out, outlen, (size_t)n };
	outbuf_printf(&o, "store: %s\n", d->store);
	n = outbuf_done(&o);
	ssize_t k = d->be->ops->stats(d->be->priv, out + n, outlen - (size_t)n);
	return k < 0 ? k : n + k;
}

/* --listen [HOST][:PORT] into host and port (kept where not given).
 * -1 with the reason on stderr. */
static int listen_parse(const char *listen, char *host, size_t hostlen,
			char *port, size_t portlen)
{
	const char *colon = strrchr(listen, ':');
	size_t hl = colon ? (size_t)(colon - listen) : strlen(listen);

	if (hl >= hostlen || (colon && strlen(colon + 1) >= portlen)) {
		fprintf(stderr, "nvswapd: bad --listen '%s'\n", listen);
		return -1;
	}
	if (hl) {
		memcpy(host, listen, hl);
		host[hl] = 0;
	}
	if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
		memmove(host, host + 1, hl - 2);
		host[hl - 2] = 0;
	}
	if (colon && colon[1])
		strcpy(port, colon + 1);
	if (!port_ok(port)) {
		fprintf(stderr, "nvswapd: bad --listen '%s': the port "
			"is a number from 0 to 65535 (0: any free "
			"port, logged)\n", listen);
		return -1;
	}
	return 0;
}

/* The remote store: its slot table (16 bytes a 4 KiB page, and 4 more
 * for the parity group, at the least; about 80 with parity's tables) is
 * allocated and locked at start, so an export larger than RAM allows is
 * refused before it is made (--size 1T would lock 20 GB). */
static int store_remote(struct nbd_backend *be, const struct cfg *c)
{
	uint64_t ram = ram_total(), table = c->size / 4096 * 20;

	if (ram && table >= ram) {
		log_err("remote store of %llu GiB: its per-page tables alone "
			"(at least %llu MiB) exceed this machine's %llu MiB "
			"of RAM; give a --size of at most about %llu GiB",
			(unsigned long long)(c->size >> 30),
			(unsigned long long)(table >> 20),
			(unsigned long long)(ram >> 20),
			(unsigned long long)(ram / 80 * 4096 >> 30) / 2);
		return -ENOMEM;
	}
	struct nbd_remote_opts ro = {
		.size = c->size, .cluster = c->cluster,
		.self_node = c->node, .redundancy = c->redundancy,
		.name = c->name, .spill_path = c->flash,
	};
	return nbd_backend_remote_create(be, &ro);
}

/* The flat store: one mapping, the whole export, locked by mlockall as
 * it is mapped; it cannot spill, so it must fit in RAM. */
static int store_flat(struct nbd_backend *be, const struct cfg *c)
{
	uint64_t ram = ram_total();

	if (ram && c->size > ram) {
		log_err("flat store of %llu MiB: more than this "
			"machine's %llu MiB of RAM, and the flat store "
			"keeps the whole export in memory; give a "
			"smaller --size, or --store tiered with --flash "
			"FILE", (unsigned long long)(c->size >> 20),
			(unsigned long long)(ram >> 20));
		return -ENOMEM;
	}
	int rc = nbd_backend_flat_create(be, c->size);
	if (rc < 0)
		log_err("flat store of %llu bytes: %s",
			(unsigned long long)c->size, strerror(-rc));
	return rc;
}

/* The tiered store (MRAM, DRAM, flash). */
static int store_tiered(struct nbd_backend *be, const struct cfg *c)
{
	/* The store caps MRAM at the export size without a word, and
	 * allocates an explicit --dram whole even when MRAM + DRAM exceed
	 * the export: said once, so the user can shrink it. */
	uint64_t mram = c->mram_set ? c->mram : 64ULL << 20;
	uint64_t mcap = mram < c->size ? mram : c->size;
	char a[32], b[32];

	if (c->mram_set && c->mram > c->size)
		log_info("MRAM (--mram %s) is larger than the export "
			 "(%s): capped at the export size",
			 opts_format_size(c->mram, a, sizeof(a)),
			 opts_format_size(c->size, b, sizeof(b)));
	else if (c->dram_set && c->dram > c->size - mcap)
		log_info("MRAM + DRAM (%s) is larger than the export "
			 "(%s): the pages they hold are capped at the "
			 "export size (the DRAM tier is still allocated "
			 "whole)", opts_format_size(mcap + c->dram, a,
			 sizeof(a)), opts_format_size(c->size, b, sizeof(b)));
	struct nbd_store_opts so = {
		.size = c->size,
		.mram = mram,
		.dram = c->dram,
		.dram_set = c->dram_set,
		.flash_path = c->flash,
		.nvram_path = c->nvram,
		.policy = c->policy ? c->policy : "lru",
		.trace_path = c->trace_out,
		.profile_path = c->profile,
		.ram = ram_total(),
	};
	return nbd_backend_store_create(be, &so);
}

/* The NBD server and the control socket over the store, started; then
 * wait for SIGINT or SIGTERM (SIGHUP is ignored), all three blocked in
 * set. On return *srv and *ctl are whatever was made, for the caller to
 * stop; *serving says the export was served. The server keeps pointing
 * at *exp until it is destroyed (its connections drain after we return):
 * the caller owns it. 0 or -errno. */
static int serve(const struct cfg *c, const char *host, const char *port,
		 struct nbd_backend *be, struct nbd_export *exp,
		 struct nbd_server **srv, struct ctl_server **ctl,
		 struct daemon_state *ds, const sigset_t *set, int *notify_fd,
		 bool *serving)
{
	*exp = (struct nbd_export){
		.name = c->name,
		.description = !strcmp(c->store, "remote") ?
			       "nvswapd swap store in other nodes' memory" :
			       !strcmp(c->store, "flat") ? "nvswapd flat swap store" :
			       "nvswapd tiered swap store",
		.size = c->size,
		/* FLUSH/FUA: every write is in the shared store before its
		 * reply, so their effect is visible on all connections. */
		.tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH |
			  NBD_FLAG_SEND_FUA | NBD_FLAG_SEND_TRIM |
			  NBD_FLAG_SEND_WRITE_ZEROES | NBD_FLAG_CAN_MULTI_CONN,
		.min_block = MIN_BLOCK,
		.pref_block = PREF_BLOCK,
		.max_block = MAX_BLOCK,
	};
	struct nbd_server_opts sopts = {
		.unix_path = c->unix_path, .host = host, .port = port,
		.threads = c->threads, .max_conns = c->max_conns,
		.handshake_s = c->handshake_s,
	};
	int rc, sig;

	rc = nbd_server_create(srv, &sopts, exp, be);
	if (rc < 0)
		return rc;
	*ds = (struct daemon_state){ *srv, be, c->store };
	rc = ctl_server_start(ctl, "swap", c->name, swap_ctl, ds);
	if (rc < 0) {
		log_err("control socket in %s: %s (another nvswapd with export "
			"name '%s'?)", ctl_run_dir(), strerror(-rc), c->name);
		return rc;
	}
	rc = nbd_server_start(*srv);
	if (rc < 0)
		return rc;
	/* The MRAM line above says its tmpfs mapping survives a crash; the
	 * export does not (it starts empty at every start), and the log
	 * says so, so that no one counts on it. */
	log_info("serving export '%s' (%llu bytes, %s store); it starts empty "
		 "at every start: nothing written to it outlives this process, "
		 "as swap does not outlive its kernel", c->name,
		 (unsigned long long)c->size, c->store);
	daemon_ready(*notify_fd, 0);
	*notify_fd = -1;
	*serving = true;

	do {
		if (sigwait(set, &sig) != 0)
			break;
	} while (sig == SIGHUP);
	log_info("signal %d: stopping", sig);
	return 0;
}

int main(int argc, char **argv)
{
	struct cfg c = { .name = "swap", .store = "tiered",
			 .threads = 0, .max_conns = 32, .handshake_s = 30 };
	char host[256] = "127.0.0.1", port[16] = "10809", nvram[512];
	struct nbd_backend be = { 0 };
	struct nbd_export exp;
	struct nbd_server *srv = NULL;
	struct ctl_server *ctl = NULL;
	struct daemon_state ds;
	int notify_fd = -1, rc;
	sigset_t set;

	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	c.threads = ncpu < 1 ? 1 : ncpu > 4 ? 4 : (unsigned)ncpu;
	if (parse_args(argc, argv, &c) < 0)
		return 2;
	if (c.listen && listen_parse(c.listen, host, sizeof(host), port,
				     sizeof(port)) < 0)
		return 2;
	if (!c.nvram) {
		snprintf(nvram, sizeof(nvram), "/dev/shm/nvswapd-%s.mram",
			 c.name);
		c.nvram = nvram;
	}

	log_init("nvswapd", LOG_LVL_INFO);
	if (!c.foreground && daemonize(&notify_fd) < 0) {
		log_err("cannot fork into the background: %s", strerror(errno));
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	/* A flash file over the file-size limit: EFBIG, that page lost and
	 * logged, not the whole daemon (and every page it holds) killed. */
	signal(SIGXFSZ, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	swap_hygiene();
	/* The store's tables take a while for a large export (a minute for
	 * 1 TiB): a SIGTERM or ^C then stops the start-up between steps. */
	bigmem_set_stop(bigmem_stop_signal_pending);

	/* A second nvswapd for the same export name would open (and at its
	 * exit remove) the first one's MRAM file, which is the same default
	 * path: refused before any store is opened. The control socket
	 * check in serve stays for two starts at the same moment. */
	char cpath[PATH_MAX], probe[16];
	if (ctl_socket_path("swap", c.name, cpath,
			    sizeof(cpath)) == 0 &&
	    ctl_request(cpath, "ping", probe, sizeof(probe), 500) >= 0) {
		log_err("another nvswapd serves export name '%s' (%s answers); "
			"not starting", c.name, cpath);
		daemon_ready(notify_fd, 1);
		return 1;
	}

	struct own_file own[3];
	own_note(&own[0], c.flash, "flash file");
	own_note(&own[1], c.trace_out, "access log");
	own_note(&own[2], strcmp(c.store, "tiered") ? NULL : c.nvram,
		 "NVRAM file");
	bool serving = false;

	if (!strcmp(c.store, "remote"))
		rc = store_remote(&be, &c);
	else if (!strcmp(c.store, "flat"))
		rc = store_flat(&be, &c);
	else
		rc = store_tiered(&be, &c);
	if (rc == 0)
		rc = serve(&c, host, port, &be, &exp, &srv, &ctl, &ds, &set,
			   &notify_fd, &serving);
	if (rc == -EINTR && bigmem_stopping()) {
		log_info("stopped by a signal during start-up");
		rc = 0;
	}
	if (srv)
		nbd_server_destroy(srv);
	ctl_server_stop(ctl);
	if (be.ops)
		be.ops->destroy(be.priv);
	for (unsigned i = 0; !serving && i < 3; i++)
		own_remove(&own[i]);
	if (serving)
		spill_discard(own[0].path, !own[0].existed);
	daemon_ready(notify_fd, 1);
	return rc < 0 ? 1 : 0;
}
