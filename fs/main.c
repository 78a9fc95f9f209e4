/* main.c - nvcachefs: options (also as mount.fuse3 passes them), checks that
 * refuse a bad backing dir or NVRAM file before daemonising, recovery, the
 * mount, the control socket, and the write-back at unmount. */
#include "fs/fcl.h"
#include "fs/locks.h"
#include "fs/killpriv.h"
#include "fs/ops.h"

#include "common/ctl.h"
#include "common/fdlimit.h"
#include "common/log.h"
#include "common/opts.h"
#include "common/outbuf.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <fcntl.h>
#include <fuse_opt.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_CACHE (1ull << 30)
#define DEFAULT_BLOCK (16u << 10)
#define DEFAULT_STRIPE (1ull << 20)
/* op_init's max_readahead, 1 MiB (raise_readahead) */
#define READAHEAD_KIB "1024"

struct cli {
	char *backing, *nvram, *cache_size, *stripe_unit, *wb_delay, *fsync,
	     *down_wait;
	char *replicas;
	char *lat, *flush, *bw, *block, *log, *cluster, *node;
	int writeback_cache, noxattr, foreground, help, version;
	char *arg[2];
	int nargs;
};

#define OPT(t, f) { t, offsetof(struct cli, f), 1 }
static const struct fuse_opt cli_spec[] = {
	OPT("backing=%s", backing),
	OPT("nvram=%s", nvram),
	OPT("cache_size=%s", cache_size),
	OPT("stripe_unit=%s", stripe_unit),
	OPT("block_size=%s", block),
	OPT("writeback_delay=%s", wb_delay),
	OPT("down_wait=%s", down_wait),
	OPT("fsync=%s", fsync),
	OPT("replicas=%s", replicas),
	OPT("nvram_lat_ns=%s", lat),
	OPT("nvram_flush_ns=%s", flush),
	OPT("nvram_bw=%s", bw),
	OPT("log=%s", log),
	OPT("cluster=%s", cluster),
	OPT("node=%s", node),
	OPT("writeback_cache", writeback_cache),
	OPT("noxattr", noxattr),
	OPT("-f", foreground),
	OPT("-h", help),
	OPT("--help", help),
	OPT("-V", version),
	OPT("--version", version),
	/* fstab words mount.fuse3 may hand through: not FUSE options */
	FUSE_OPT_KEY("nofail", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("_netdev", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("auto", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("noauto", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("user", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("nouser", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("users", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_KEY("defaults", FUSE_OPT_KEY_DISCARD),
	FUSE_OPT_END
};

static int cli_proc(void *data, const char *arg, int key,
		    struct fuse_args *out)
{
	struct cli *c = data;
	(void)out;

	if (key == FUSE_OPT_KEY_NONOPT) {
		if (c->nargs >= 2) {
			fprintf(stderr, "nvcachefs: too many arguments: %s\n", arg);
			return -1;
		}
		c->arg[c->nargs++] = strdup(arg);
		return 0;
	}
	if (key == FUSE_OPT_KEY_OPT && !strcmp(arg, "-d")) {
		c->foreground = 1;
		return 1;
	}
	return 1; /* keep: a FUSE option (allow_other, ro, ...) */
}

static void usage(const char *prog)
{
	printf("usage: %s [BACKING] MOUNTPOINT -o backing=DIR[,options] [-f]\n"
"\n"
"nvcachefs: a persistent NVRAM cache over a slow backing directory.\n"
"Writes are acknowledged once persisted in NVRAM; files are written back to\n"
"the backing dir after their last close (plus a delay) and at unmount.\n"
"\n"
"options:\n"
"  backing=DIR            the backing directory (or the first argument, as\n"
"                         mount -t fuse.nvcachefs DIR MNT passes it)\n"
"  nvram=FILE             the NVRAM file (default /dev/shm/nvcache-<mountpoint\n"
"                         with / as ->.nvram); survives process crashes\n"
"  cache_size=SIZE        file data held in NVRAM (default 1G, or a quarter of\n"
"                         RAM if less); must match an existing NVRAM file\n"
"  stripe_unit=SIZE|auto  stripe unit over the cache managers (default 1M;\n"
"                         auto = one equal part of a file per manager, of\n"
"                         its size when first cached; with cluster=, every\n"
"                         mount of the cluster must say the same)\n"
"  block_size=SIZE        NVRAM cache block (default 16K, 4K..1M)\n"
"  writeback_delay=SECS   delay between a file's last close and its\n"
"                         write-back (default 1, may be fractional)\n"
"  fsync=nvram|backing    fsync returns once data is in NVRAM (default), or\n"
"                         also written and fsync'ed in the backing file\n"
"  writeback_cache        let the kernel cache writes (faster small writes,\n"
"                         but a write is acknowledged before it is in NVRAM)\n"
"  noxattr                no extended attributes (calls fail, EOPNOTSUPP)\n"
"  nvram_lat_ns=N         emulated NVRAM latency per access (default 0)\n"
"  nvram_flush_ns=N       emulated cost per persisted cache line (default 0)\n"
"  nvram_bw=SIZE          emulated NVRAM bandwidth per second (default off)\n"
"  allow_other, ro, ...   usual FUSE mount options (permissions are always\n"
"                         checked by the kernel: default_permissions)\n"
"  cluster=FILE,node=N    one file system across the nodes of the cluster\n"
"                         file: each file's stripes live in the nodes'\n"
"                         nvcached file caches (nvcached --cache-size);\n"
"                         no NVRAM file here (docs/nvcachefs-cluster.md)\n"
"  down_wait=SECS         cluster: what needs a node that is down (a write\n"
"                         to it, a read of its dirty blocks, a file whose\n"
"                         size only it has) waits this long for it to come\n"
"                         back (default 60; 0: EIO at once)\n"
"  replicas=1|2           cluster: each dirty block in its owner's NVRAM\n"
"                         (1, default) or also in the next node's (2: a\n"
"                         node lost for good loses no acknowledged write);\n"
"                         every mount and node of a cluster agree\n"
"  log=FILE               without -f: log here (default: syslog when a syslog\n"
"                         daemon listens, else /var/log/nvcachefs-<mountpoint\n"
"                         with / as ->.log); errors at mount also on stderr\n"
"  -f                     stay in the foreground, log to stderr\n"
"\n"
"Stats: nvcachectl stats MOUNTPOINT (control socket in $NVCACHE_RUN_DIR,\n"
"default /run/nvcache). Unmount: fusermount3 -u MOUNTPOINT; the daemon writes\n"
"everything back before it exits.\n", prog);
}

/* opt=v: seconds, 0..86400, fractions allowed; -1 (said why) if not. */
static int parse_secs(const char *opt, const char *v, double *out)
{
	char *end;
	*out = strtod(v, &end);
	if (end == v || *end || !isfinite(*out) || *out < 0 || *out > 86400) {
		fprintf(stderr, "nvcachefs: %s=%s: seconds, 0..86400\n", opt, v);
		return -1;
	}
	return 0;
}

static int parse_u32(const char *s, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v > UINT32_MAX)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static int config_from_cli(struct fs_config *cfg, struct cli *c)
{
	const char *backing = c->backing, *mnt;
	char path[PATH_MAX];
	struct sysinfo si;

	if (c->nargs == 2) {
		mnt = c->arg[1];
		if (!backing)
			backing = c->arg[0];
	} else if (c->nargs == 1) {
		mnt = c->arg[0];
	} else {
		fprintf(stderr, "nvcachefs: no mount point given (see --help)\n");
		return -1;
	}
	if (!backing) {
		fprintf(stderr, "nvcachefs: no backing directory: -o backing=DIR\n");
		return -1;
	}
	if (!realpath(backing, path)) {
		fprintf(stderr, "nvcachefs: backing dir %s: %s\n", backing, strerror(errno));
		return -1;
	}
	cfg->backing = strdup(path);
	if (!realpath(mnt, path)) {
		fprintf(stderr, "nvcachefs: mount point %s: %s\n", mnt, strerror(errno));
		return -1;
	}
	cfg->mountpoint = strdup(path);
	cfg->cache_size = DEFAULT_CACHE;
	if (sysinfo(&si) == 0 && (uint64_t)si.totalram * si.mem_unit / 4 < DEFAULT_CACHE)
		cfg->cache_size = (uint64_t)si.totalram * si.mem_unit / 4;
	if (c->cache_size && (opts_parse_size(c->cache_size, &cfg->cache_size) < 0 ||
			      cfg->cache_size < (1u << 20))) {
		fprintf(stderr, "nvcachefs: cache_size=%s: give a size of at least 1M, e.g. 4G\n",
			c->cache_size);
		return -1;
	}
	uint64_t bs = DEFAULT_BLOCK;
	if (c->block && (opts_parse_size(c->block, &bs) < 0 || bs < 4096 ||
			 bs > (1u << 20) || (bs & (bs - 1)))) {
		fprintf(stderr, "nvcachefs: block_size=%s: a power of two from 4K to 1M\n", c->block);
		return -1;
	}
	cfg->block_size = (uint32_t)bs;
	cfg->stripe_unit = DEFAULT_STRIPE;
	if (c->stripe_unit) {
		if (!strcmp(c->stripe_unit, "auto"))
			cfg->stripe_unit = 0;
		else if (opts_parse_size(c->stripe_unit, &cfg->stripe_unit) < 0 ||
			 !cfg->stripe_unit || cfg->stripe_unit % bs) {
			fprintf(stderr, "nvcachefs: stripe_unit=%s: a multiple of the "
				"block size (%llu) or 'auto'\n", c->stripe_unit,
				(unsigned long long)bs);
			return -1;
		}
	}
	double d;
	cfg->wb_delay_ns = 1000000000ull;
	if (c->wb_delay) {
		if (parse_secs("writeback_delay", c->wb_delay, &d) < 0)
			return -1;
		cfg->wb_delay_ns = (uint64_t)(d * 1e9);
	}
	cfg->down_wait_ms = 60000;
	if (c->down_wait) {
		if (parse_secs("down_wait", c->down_wait, &d) < 0)
			return -1;
		if (!c->cluster) {
			fprintf(stderr, "nvcachefs: down_wait=%s: a cluster mount's "
				"option (cluster=FILE)\n", c->down_wait);
			return -1;
		}
		cfg->down_wait_ms = (uint32_t)(d * 1e3);
	}
	if (c->fsync) {
		if (!strcmp(c->fsync, "backing"))
			cfg->fsync_backing = true;
		else if (strcmp(c->fsync, "nvram")) {
			fprintf(stderr, "nvcachefs: fsync=%s: nvram or backing\n", c->fsync);
			return -1;
		}
	}
	if ((c->lat && parse_u32(c->lat, &cfg->lat_ns) < 0) ||
	    (c->flush && parse_u32(c->flush, &cfg->flush_ns) < 0) ||
	    (c->bw && opts_parse_size(c->bw, &cfg->bw_bps) < 0)) {
		fprintf(stderr, "nvcachefs: nvram_lat_ns/nvram_flush_ns take "
			"nanoseconds, nvram_bw a size per second (e.g. 9G)\n");
		return -1;
	}
	if (!c->cluster != !c->node) {
		fprintf(stderr, "nvcachefs: cluster=FILE and node=N go together\n");
		return -1;
	}
	if (c->cluster) {
		if (parse_u32(c->node, &cfg->node) < 0 || !cfg->node ||
		    cfg->node > 65535) {
			fprintf(stderr, "nvcachefs: node=%s: a node id, 1..65535\n", c->node);
			return -1;
		}
		cfg->cluster = strdup(c->cluster);
		if (cfg->stripe_unit % (64u << 10)) {
			fprintf(stderr, "nvcachefs: stripe_unit=%s: on a cluster mount a "
				"multiple of 64K (the nodes' block)\n", c->stripe_unit);
			return -1;
		}
		if (c->writeback_cache) {
			fprintf(stderr, "nvcachefs: writeback_cache: not on a cluster "
				"mount (other nodes would read stale bytes)\n");
			return -1;
		}
		/* the nodes hold the data: their --cache-size, --cache-nvram */
		if (c->cache_size || c->nvram)
			fprintf(stderr, "nvcachefs: warning: %s%s%s: not used by a "
				"cluster mount (the nodes' nvcached --cache-size and "
				"--cache-nvram are)\n", c->cache_size ? "cache_size" : "",
				c->cache_size && c->nvram ? ", " : "",
				c->nvram ? "nvram" : "");
	}
	cfg->replicas = 1;
	if (c->replicas) {
		if (strcmp(c->replicas, "1") && strcmp(c->replicas, "2")) {
			fprintf(stderr, "nvcachefs: replicas=%s: 1 or 2\n", c->replicas);
			return -1;
		}
		if (!c->cluster && !strcmp(c->replicas, "2")) {
			fprintf(stderr, "nvcachefs: replicas=2: a cluster mount's "
				"option (cluster=FILE)\n");
			return -1;
		}
		cfg->replicas = (uint32_t)(c->replicas[0] - '0');
	}
	cfg->writeback_cache = c->writeback_cache;
	cfg->no_xattr = c->noxattr;
	cfg->foreground = c->foreground;
	if (c->nvram) {
		cfg->nvram = strdup(c->nvram);
	} else {
		char name[PATH_MAX];
		ctl_name_from_path(cfg->mountpoint, name, sizeof(name));
		if (asprintf(&cfg->nvram, "/dev/shm/nvcache-%s.nvram", name) < 0)
			return -1;
	}
	return 0;
}

/* Every file the kernel holds a reference to keeps a descriptor open here
 * (its O_PATH inode, as in libfuse's passthrough_ll), and an open file two
 * more. The usual soft limit of 1024 is not enough for a tar of a source
 * tree (EMFILE to the user), so take what the hard limit allows, and with
 * the privilege for it the system's maximum. */
static void raise_open_files(struct fs *fs)
{
	uint64_t soft = fdlimit_raise();
	/* data fds of closed files are kept while they take at most a
	 * quarter (inode_close_idle) */
	fs->datafd_budget = soft == UINT64_MAX ? UINT64_MAX : soft / 4;
	/* looked-up inodes (one O_PATH fd each) up to half (forget.c): with
	 * the data fds, a quarter is left for open files and directories */
	fs->inode_high = soft == UINT64_MAX ? UINT64_MAX : soft / 2;
	fs->inode_low = fs->inode_high - fs->inode_high / 5;
	/* files waiting for write-back (each holds its O_PATH fd until
	 * written) up to a quarter, within that half (dirty_wait_files) */
	fs->dirty_files_max = soft == UINT64_MAX ? 0 : soft / 4;
	log_info("open files: up to %llu (one per file the kernel holds, "
		 "three while it is open; past %llu held, the kernel is asked to "
		 "forget idle ones)", (unsigned long long)soft,
		 (unsigned long long)fs->inode_high);
}

/* The largest file the backing takes (ext4: 16 TiB with 4 KiB blocks):
 * ftruncate of an empty file, bisected (it allocates nothing where files
 * can be sparse; on vfat/exfat it would write zeros, and such a backing
 * is no parallel file system). A write
 * past it would be acknowledged into NVRAM and then never written back
 * (EFBIG forever, and the next mount refused), so writes are held to it.
 * A file-size rlimit counts too: it binds the write-back as well. */
static uint64_t probe_max_size(int fd)
{
	uint64_t lo = 0, hi = (uint64_t)INT64_MAX;
	void (*old)(int) = signal(SIGXFSZ, SIG_IGN);

	if (ftruncate(fd, (off_t)hi) == 0)
		lo = hi;
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (ftruncate(fd, (off_t)mid) == 0) {
			lo = mid;
		} else if (errno == EFBIG || errno == EINVAL) {
			hi = mid;
		} else {
			/* another failure says nothing of the size: no limit
			 * rather than a wrong one (0 would refuse every write) */
			log_warn("backing dir: its largest file size unknown "
				 "(%s); writes are not held to one", strerror(errno));
			lo = (uint64_t)INT64_MAX;
			break;
		}
	}
	if (ftruncate(fd, 0) < 0)
		log_debug("backing probe: %s", strerror(errno));
	signal(SIGXFSZ, old);
	return lo ? lo : (uint64_t)INT64_MAX;
}

/* Open the backing dir and lock it: refused (-1) if another cache holds
 * it. Nothing is made in it. */
static int lock_backing(struct fs *fs)
{
	fs->backing_fd = open(fs->cfg.backing, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fs->backing_fd < 0) {
		log_err("backing dir %s: %s", fs->cfg.backing, strerror(errno));
		return -1;
	}
	/* One cache per backing: a second mount of it (another mount point,
	 * tools/quickstart.sh --mount, its default backing) would serve its
	 * own stale cached blocks and write them back over the first mount's
	 * acknowledged writes (a 1-byte write through it costs the rest of
	 * the block). A cluster's mounts and nodes share theirs (one cache
	 * across them: LOCK_SH, cluster/fcache.c too); a one-node mount
	 * holds its alone. The lock lives as long as this daemon, across its
	 * fork. */
	bool cl = fs->cfg.cluster != NULL;
	if (flock(fs->backing_fd, (cl ? LOCK_SH : LOCK_EX) | LOCK_NB) < 0) {
		if (errno == EWOULDBLOCK) {
			log_err("backing dir %s is in use by %s: two caches over "
				"one backing overwrite each other's writes; stop "
				"it first (grep '^%s ' /proc/mounts)",
				fs->cfg.backing, cl ? "a one-node nvcachefs" :
				"another nvcachefs (a one-node mount, or a "
				"cluster's mount or node)", fs->cfg.backing);
			return -1;
		}
		log_warn("backing dir %s: cannot lock it (%s): a second mount "
			 "of it would not be refused", fs->cfg.backing,
			 strerror(errno));
	}
	return 0;
}

/* Refuse a backing dir we could not write back into (lock_backing's). */
static int check_backing(struct fs *fs)
{
	struct statvfs sv;
	char probe[PATH_MAX];
	int fd;

	if (fstatvfs(fs->backing_fd, &sv) == 0 && (sv.f_flag & ST_RDONLY)) {
		log_err("backing dir %s: read-only file system; write-back "
			"would fail", fs->cfg.backing);
		return -1;
	}
	snprintf(probe, sizeof(probe), ".nvcachefs-probe-%d", (int)getpid());
	fd = openat(fs->backing_fd, probe, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0) {
		log_err("backing dir %s: cannot create files in it: %s",
			fs->cfg.backing, strerror(errno));
		return -1;
	}
	fs->max_file_size = probe_max_size(fd);
	close(fd);
	unlinkat(fs->backing_fd, probe, 0);
	return 0;
}

static int open_cache(struct fs *fs)
{
	struct bstore_open_opts o = { .create = true, .drop_clean = true };
	int r;

	bstore_geom_for_size(fs->cfg.cache_size, fs->cfg.block_size, &o.geom);
	o.tag = fs->cfg.backing;
	o.region.lat_ns = fs->cfg.lat_ns;
	o.region.flush_ns = fs->cfg.flush_ns;
	o.region.bw_bps = fs->cfg.bw_bps;
	r = cache_local_open(&fs->mgr[0], fs->cfg.nvram, &o);
	if (r < 0) {
		log_err("NVRAM file %s unusable (%s); not mounting", fs->cfg.nvram,
			r == -EMEDIUMTYPE ? "see above" : strerror(-r));
		return -1;
	}
	fs->nmgr = 1;
	return 0;
}

static ssize_t fs_ctl(void *arg, const char *cmd, char *out, size_t len)
{
	struct fs *fs = arg;
	struct cache_mgr *m = fs_mgr_for(fs, NULL, 0);
	struct bstore_stats bst = { 0 };
	struct fs_stats *s = &fs->st;
	struct outbuf o = outbuf_of(out, len);
	char a[32];

	if (strcmp(cmd, "stats") != 0)
		return -ENOENT;
	if (m)  /* a cluster mount's data is in the nodes' caches */
		m->ops->stats(m, &bst);
	uint64_t used = bst.blocks_used * bst.block_size;
	uint64_t total = bst.blocks_total * bst.block_size;
	outbuf_printf(&o, "mountpoint: %s\nbacking: %s\nnvram_file: %s\n",
		      fs->cfg.mountpoint, fs->cfg.backing, fs->cfg.nvram);
	outbuf_printf(&o, "nvram_used: %s\n", opts_format_size(used, a, sizeof(a)));
	outbuf_printf(&o, "nvram_total: %s\n", opts_format_size(total, a, sizeof(a)));
	const struct outbuf_kv counters[] = {
		{ "nvram_used_bytes", used },
		{ "nvram_total_bytes", total },
		{ "block_size", bst.block_size },
		{ "hits", atomic_load(&s->hits) },
		{ "misses", atomic_load(&s->misses) },
		{ "down_node_backing_reads", atomic_load(&s->down_reads) },
		{ "down_node_lost_reads", atomic_load(&s->down_lost) },
		{ "down_node_backing_sizes", atomic_load(&s->down_sizes) },
		{ "down_node_lost_sizes", atomic_load(&s->down_lost_sizes) },
		{ "down_node_waits", atomic_load(&s->down_waits) },
		{ "down_node_replica_reads", atomic_load(&s->down_replica_reads) },
		{ "last_close_writebacks", atomic_load(&s->last_close_wb) },
		{ "last_close_clean", atomic_load(&s->last_close_clean) },
		{ "prefetched_bytes", atomic_load(&s->prefetched) },
		{ "dirty_bytes", bst.blocks_dirty * bst.block_size },
		{ "written_back_bytes", atomic_load(&s->written_back) },
		{ "evictions", bst.evictions },
		{ "writeback_queue", dirty_count(fs) },
		{ "backing_errors", atomic_load(&s->backing_errors) },
		{ "writeback_failing", atomic_load(&s->wb_failed_ns) != 0 },
		{ "cluster_nodes", fs->cl ? fcl_nodes(fs->cl) : 0 },
		{ "cluster_node", fs->cl ? fs->cfg.node : 0 },
		{ "cluster_nodes_down", fs->cl ? fcl_nodes_down(fs->cl) : 0 },
		{ "backpressure_waits", atomic_load(&s->bp_waits) },
		{ "dropped_unlinked_files", atomic_load(&s->dropped_unlinked) },
		{ "cluster_invals", atomic_load(&s->cl_invals) },
		{ "cluster_pages_dropped_files", atomic_load(&s->cl_dropped) },
		{ "lookups_stale", atomic_load(&s->lookups_stale) },
		{ "recovered_files", atomic_load(&s->recovered_files) },
		{ "recovered_bytes", atomic_load(&s->recovered_bytes) },
		{ "cached_files", bst.objs_used },
		{ "inodes_held", itab_count(fs) },
		{ "forget_requests", atomic_load(&s->forget_asks) },
		{ "forget_removed_elsewhere", atomic_load(&s->forget_gone) },
		{ "writeback_fd_closes", atomic_load(&s->wb_fd_steals) },
		{ "spliced_write_bytes", atomic_load(&s->spliced) },
		{ "read_ops", atomic_load(&s->read_ops) },
		{ "read_bytes", atomic_load(&s->read_bytes) },
		{ "write_ops", atomic_load(&s->write_ops) },
		{ "write_bytes", atomic_load(&s->write_bytes) },
	};
	outbuf_u64s(&o, counters, sizeof(counters) / sizeof(counters[0]));
	if (fs->locks) {
		/* a cluster mount's fcntl/flock requests to the files' homes */
		struct fs_locks_stats ls;
		fs_locks_stats(fs->locks, &ls);
		const struct outbuf_kv lkv[] = {
			{ "lock_sets", ls.sets },
			{ "lock_gets", ls.gets },
			{ "lock_waits", ls.waits },
			{ "lock_conflicts", ls.conflicts },
			{ "lock_errors", ls.errors },
			{ "locks_reclaimed", ls.reclaimed },
		};
		outbuf_u64s(&o, lkv, sizeof(lkv) / sizeof(lkv[0]));
	}
	if (fs->cl) {
		pthread_mutex_lock(&fs->lost_mx);
		unsigned n = fs->nlost < FS_LOST_FILES ? fs->nlost : FS_LOST_FILES;
		for (unsigned k = 0; k < n; k++)
			outbuf_printf(&o, "down_node_lost_file: %s\n",
				      fs->lost[(fs->nlost - n + k) % FS_LOST_FILES]);
		pthread_mutex_unlock(&fs->lost_mx);
	}
	outbuf_printf(&o, "killpriv_v2: %s\n", killpriv_granted() ? "yes" : "no");
	return outbuf_done(&o);
}

/* The FUSE arguments nvcachefs adds to the user's. */
static void add_fuse_args(struct fuse_args *args, const struct fs_config *cfg)
{
	/* /proc/mounts shows "BACKING MNT fuse.nvcachefs", as fstab writes it */
	if (!strchr(cfg->backing, ',')) {
		char *o = NULL;
		if (asprintf(&o, "-osubtype=nvcachefs,fsname=%s", cfg->backing) > 0) {
			fuse_opt_add_arg(args, o);
			free(o);
		}
	}
	/* The daemon opens backing files as root: without this, a mount with
	 * allow_other would let any user read and write any file through it.
	 * The kernel then checks mode bits (and ACLs, see op_init) as the
	 * backing would. */
	fuse_opt_add_arg(args, "-odefault_permissions");
}

/* Everything before the mount: the backing and NVRAM checked and opened,
 * the tables made, and what a previous run left in NVRAM written back.
 * 0, or -1 (logged). */
static int fs_prepare(struct fs *fs)
{
	int r;

	if (fs->cfg.cluster) {
		/* refused before anything is made */
		struct fcl_opts co = { .cluster = fs->cfg.cluster, .node = fs->cfg.node,
				       .backing = fs->cfg.backing,
				       .stripe_unit = fs->cfg.stripe_unit,
				       .replicas = fs->cfg.replicas };
		if (lock_backing(fs) < 0 || fcl_open(&fs->cl, &co) < 0 ||
		    check_backing(fs) < 0)
			return -1;
		if (fs_locks_open(&fs->locks, fcl_config(fs->cl), fs->cfg.node,
				  fs->cfg.down_wait_ms) < 0) {
			log_err("file locks: out of memory");
			return -1;
		}
		fcl_on_restart(fs->cl, fdcl_restarted, fs);
		pthread_mutex_init(&fs->lost_mx, NULL);
		raise_open_files(fs);
		if ((r = itab_open(fs)) < 0) {
			log_err("backing dir %s: %s", fs->cfg.backing, strerror(-r));
			return -1;
		}
		return 0;
	}
	if (lock_backing(fs) < 0 || check_backing(fs) < 0 || open_cache(fs) < 0)
		return -1;
	raise_open_files(fs);
	if ((r = itab_open(fs)) < 0) {
		log_err("backing dir %s: %s", fs->cfg.backing, strerror(-r));
		return -1;
	}
	/* If a file cannot be written back, mounting would show its stale
	 * backing copy while the newer bytes sit in NVRAM: refuse, keep them
	 * safe. */
	int left = recovery_run(fs);
	if (left != 0) {
		log_err("recovery: %d files could not be written back to %s "
			"(see above); their data is safe in %s. Fix the "
			"backing (space, permissions) and mount again; not "
			"mounting", left, fs->cfg.backing, fs->cfg.nvram);
		return -1;
	}
	return 0;
}

/* mountinfo's path field, its octal escapes (\040 for a space) undone in
 * place */
static void mountinfo_unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = 0;
}

/* The kernel reads a FUSE file ahead by at most its device's
 * read_ahead_kb, 128 KiB, whatever max_readahead says (INIT's value only
 * lowers it): a 1 MiB sequential read then reaches us as eight 128 KiB
 * READs, and in cluster mode each is a round trip to the owners and the
 * home. Root may raise it (/sys/class/bdi/MAJ:MIN, the mount's device
 * numbers from mountinfo; the newest mount on the path is the last line).
 * The INIT reply that follows keeps the smaller of this and
 * max_readahead (op_init: 1 MiB). Without the privilege, reads stay at
 * the kernel's default. */
static void raise_readahead(const char *mnt)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[PATH_MAX + 512], dev[32] = "";

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char d[32], path[PATH_MAX], *sep = strstr(line, " - ");
		if (!sep || sscanf(line, "%*u %*u %31s %*s %4095s", d, path) != 2 ||
		    strncmp(sep + 3, "fuse", 4))
			continue;
		mountinfo_unescape(path);
		if (!strcmp(path, mnt))
			snprintf(dev, sizeof(dev), "%s", d);
	}
	fclose(f);
	if (!dev[0])
		return;
	char sys[96];
	snprintf(sys, sizeof(sys), "/sys/class/bdi/%s/read_ahead_kb", dev);
	int fd = open(sys, O_WRONLY | O_CLOEXEC);
	bool ok = fd >= 0 && write(fd, READAHEAD_KIB, strlen(READAHEAD_KIB)) > 0;
	if (fd >= 0)
		close(fd);
	if (ok)
		log_info("read-ahead: %s KiB (%s)", READAHEAD_KIB, sys);
	else
		log_info("read-ahead: the kernel's default, %s not writable: "
			 "sequential reads come in 128 KiB requests", sys);
}

static void log_mounted(const struct fs_config *cfg)
{
	if (cfg->cluster) {
		char unit[64] = "auto (one equal part of a file per node)";
		if (cfg->stripe_unit)
			snprintf(unit, sizeof(unit), "%llu KiB",
				 (unsigned long long)(cfg->stripe_unit >> 10));
		log_info("mounted %s: backing %s, cluster %s as node %u, stripe "
			 "unit %s, write-back delay %.1fs, fsync=%s, replicas=%u, "
			 "down_wait %.1fs",
			 cfg->mountpoint, cfg->backing, cfg->cluster, cfg->node, unit,
			 (double)cfg->wb_delay_ns / 1e9,
			 cfg->fsync_backing ? "backing" : "nvram", cfg->replicas,
			 cfg->down_wait_ms / 1e3);
		return;
	}
	log_info("mounted %s: backing %s, NVRAM %s (%llu MiB cache, %u KiB "
		 "blocks, stripe unit %s), write-back delay %.1fs, fsync=%s%s",
		 cfg->mountpoint, cfg->backing, cfg->nvram,
		 (unsigned long long)(cfg->cache_size >> 20),
		 cfg->block_size >> 10,
		 cfg->stripe_unit ? "fixed" : "auto",
		 (double)cfg->wb_delay_ns / 1e9,
		 cfg->fsync_backing ? "backing" : "nvram",
		 cfg->writeback_cache ? ", kernel writeback_cache ON" : "");
}

/* Mounted and daemonised: start the threads and the control socket, serve
 * until unmounted or signalled, then stop and write everything back.
 * Returns the exit code: 0, 1 (the session failed), 3 (files left dirty). */
static int fs_run(struct fs *fs, struct fuse_session *se, bool serve)
{
	struct ctl_server *ctl = NULL;
	int ret = 1;

	if (serve && engine_start(fs) < 0) {
		log_err("cannot start the write-back threads");
		serve = false;
	}
	if (serve) {
		if (forget_start(fs, se) < 0)
			log_warn("cannot start the forget thread: the kernel keeps every "
				 "file it looked up, one descriptor each");
		if (fs->cl && clwatch_start(fs) < 0)
			log_warn("cannot start the watch thread: a restarted node is "
				 "noticed only at this mount's next request to it");
		if (fs->cl && fcl_drops_start(fs->cl, fdcl_dropped, fs) < 0)
			log_warn("cannot start the drop threads: a reader here may "
				 "read older bytes after another node's fsync");
		char name[PATH_MAX];
		ctl_name_from_path(fs->cfg.mountpoint, name, sizeof(name));
		int r = ctl_server_start(&ctl, "fs", name, fs_ctl, fs);
		if (r < 0)
			log_warn("control socket for %s: %s; stats unavailable",
				 name, strerror(-r));
		/* New entries get the caller's umask, not ours on top of it (a
		 * user's umask 002 must give 0664 files, not 0644): worker
		 * threads set their own per request (take_caller_umask in
		 * ops.c). Our own files are all made by now. */
		umask(0);
		struct fuse_loop_config *lc = fuse_loop_cfg_create();
		/* keep idle workers: libfuse would otherwise create a thread
		 * per request under a synchronous load */
		fuse_loop_cfg_set_idle_threads(lc, 16);
		/* a cluster mount's requests may wait for a down node
		 * (down_wait): enough workers that the others go on */
		if (fs->cl)
			fuse_loop_cfg_set_max_threads(lc, 64);
		/* a positive value is the signal that ended the loop: a clean stop */
		ret = fuse_session_loop_mt(se, lc) < 0 ? 1 : 0;
		fuse_loop_cfg_destroy(lc);
	}
	forget_stop(fs);
	clwatch_stop(fs);
	if (fs->cl)
		fcl_drops_stop(fs->cl);
	if (fs->locks)
		fs_locks_stop(fs->locks);  /* lock waits answer before se goes */
	fuse_session_unmount(se);
	int left = engine_stop(fs);
	if (left) {
		log_err("unmount: %d files could not be written back; "
			"their data stays in %s and is written back at "
			"the next mount", left, fs->cfg.nvram);
		ret = 3; /* tell scripts the backing is not complete */
	} else
		log_info("unmount: everything written back");
	ctl_server_stop(ctl);
	return ret;
}

/* At exit: every inode freed, clean cached data forgotten (dirty data
 * stays for the next mount), the cache closed. */
static void fs_close(struct fs *fs)
{
	itab_free_all(fs);
	if (fs->nmgr) {
		struct cache_mgr *m = fs_mgr_for(fs, NULL, 0);
		size_t n = m->ops->obj_list(m, NULL, 0);
		uint64_t *ids = calloc(n ? n : 1, sizeof(*ids));
		if (ids) {
			n = m->ops->obj_list(m, ids, n);
			for (size_t i = 0; i < n; i++)
				if (m->ops->blocks(m, ids[i], 1, NULL, 0) == 0)
					m->ops->obj_delete(m, ids[i]);
			free(ids);
		}
		m->ops->close(m);
	}
	fs_locks_close(fs->locks);   /* the homes release our locks */
	fcl_close(fs->cl);
	if (fs->backing_fd > 0)
		close(fs->backing_fd);
	free(fs->cfg.cluster);
	free(fs->cfg.backing);
	free(fs->cfg.mountpoint);
	free(fs->cfg.nvram);
	fdwait_destroy(&fs->fdw);
}

/* Without -f the daemon outlives the command that started it (mount -t
 * fuse.nvcachefs, an fstab line), and that command's terminal is not its
 * log: lines go to log=FILE, else to syslog when a syslog daemon listens,
 * else to /var/log/nvcachefs-MOUNT.log (the quick start's name). Until it
 * detaches, errors also go to the caller's stderr: a mount that fails
 * says why where it was asked for. */
static void log_setup(const struct fs_config *cfg, const char *file)
{
	char def[PATH_MAX + 32], name[PATH_MAX];

	if (cfg->foreground)
		return;
	if (!file && log_syslog_listening()) {
		log_use_syslog(true);
	} else {
		if (!file) {
			ctl_name_from_path(cfg->mountpoint, name, sizeof(name));
			snprintf(def, sizeof(def), "/var/log/nvcachefs-%s.log", name);
			file = def;
		}
		int rc = log_to_file(file);
		if (rc < 0) {
			fprintf(stderr, "nvcachefs: log file %s: %s; logging to syslog\n",
				file, strerror(-rc));
			log_use_syslog(true);
		}
	}
	log_copy_errors_to_stderr(true);
}

static void cli_free(struct cli *c)
{
	free(c->backing); free(c->nvram); free(c->cache_size);
	free(c->stripe_unit); free(c->wb_delay); free(c->fsync); free(c->replicas);
	free(c->down_wait);
	free(c->lat); free(c->flush); free(c->bw); free(c->block); free(c->log);
	free(c->cluster); free(c->node);
	free(c->arg[0]); free(c->arg[1]);
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct cli cli = { 0 };
	struct fs *fs = calloc(1, sizeof(*fs));
	struct fuse_session *se = NULL;
	int ret = 1;
	bool handlers = false;

	log_init("nvcachefs", LOG_LVL_INFO);
	if (!fs || fuse_opt_parse(&args, &cli, cli_spec, cli_proc) < 0)
		return 1;
	fdwait_init(&fs->fdw);
	dirty_init(fs);
	if (cli.help) {
		usage(argv[0]);
		return 0;
	}
	if (cli.version) {
		printf("nvcachefs 0.1.0, libfuse %s\n", fuse_pkgversion());
		return 0;
	}
	if (config_from_cli(&fs->cfg, &cli) < 0)
		return 1;
	log_setup(&fs->cfg, cli.log);
	add_fuse_args(&args, &fs->cfg);
	/* Before anything is made: libfuse refuses an unknown option here,
	 * and a refusal after open_cache would leave a new NVRAM file behind
	 * in /dev/shm. Nothing is served until the session is mounted. */
	se = fuse_session_new(&args, &fs_ops, sizeof(fs_ops), fs);
	if (!se)
		return 1;
	fs->se = se;
	if (fs_prepare(fs) == 0 && fuse_set_signal_handlers(se) == 0) {
		handlers = true;
		if (fuse_session_mount(se, fs->cfg.mountpoint) == 0) {
			log_mounted(&fs->cfg);
			raise_readahead(fs->cfg.mountpoint);
			bool up = fuse_daemonize(fs->cfg.foreground) == 0;
			log_copy_errors_to_stderr(false);
			ret = fs_run(fs, se, up);
		}
	}
	if (handlers)
		fuse_remove_signal_handlers(se);
	fuse_session_destroy(se);
	fs_close(fs);
	fuse_opt_free_args(&args);
	cli_free(&cli);
	free(fs);
	return ret;
}
