/* fdcl.c - the data path of a cluster mount (cluster=): every block range
 * goes to its owner's file cache, the file's size and open count to its
 * home; see fs.h and docs/nvcachefs-cluster.md. Nothing of a file's data
 * is kept here. */
#include "fs/fs.h"
#include "fs/fcl.h"

#include "cluster/fcache.h"
#include "cluster/fmarks.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

/* A block the owner does not hold: its backing bytes go with the write;
 * another writer may have installed (or written back and dropped) it
 * meanwhile, so a few rounds at most. */
#define WRITE_ROUNDS 8

/* A write that relied on the bound leaves the home's mtime of the file
 * as it was; one SETSIZE a second at most sets it again while writes go
 * on, and a close, fsync or stat from here sets it at once. */
#define MTIME_EVERY_NS 1000000000ull

/* After a bounded read an owner could not vouch for (it has no record of
 * the file: read from the backing), this many reads ask the home in the
 * same round, as without a bound, before one tries again. */
#define PLAIN_READS 16

/* Tries of a request to a home that comes back while it waits (home_down's
 * -EAGAIN): a home that answers and is down again at once fails it (EIO). */
#define HOME_TRIES 3

static int home_down(struct fs *fs, struct fs_inode *ino, uint64_t gid,
		     uint64_t *size);
static int home_getattr_down(struct fs *fs, struct fs_inode *ino,
			     struct fcl_req *q);
static bool home_back(struct fs *fs, uint32_t idx, uint64_t gid);

struct ident {
	uint64_t gid;
	struct fcache_ident h;
};

/* The file's handle (the same on every node of a shared backing) and its
 * cluster-wide id, a hash of it. */
static int ident_get(struct fs_inode *ino, struct ident *id)
{
	int r = fcache_ident(ino->fd, "", AT_EMPTY_PATH, &id->h);

	if (r < 0)
		return r;
	uint32_t a = crc32c(id->h.type, id->h.handle, id->h.len);
	uint32_t b = crc32c(~id->h.type, id->h.handle, id->h.len);
	id->gid = (uint64_t)a << 32 | b;
	if (!id->gid)
		id->gid = 1;
	return 0;
}

/* ino's id, learnt once (0 if its handle cannot be had) */
static uint64_t gid_of(struct fs_inode *ino)
{
	struct ident id;

	pthread_mutex_lock(&ino->lk);
	uint64_t g = ino->gid;
	pthread_mutex_unlock(&ino->lk);
	if (g || ident_get(ino, &id) < 0)
		return g;
	pthread_mutex_lock(&ino->lk);
	ino->gid = id.gid;
	pthread_mutex_unlock(&ino->lk);
	return id.gid;
}

/* The file's stripe unit in bytes: the mounts' (fixed), or with
 * stripe_unit=auto the one its home fixed, as learnt; 0: not learnt. */
static uint64_t unit_of(struct fs *fs, struct fs_inode *ino)
{
	uint64_t u = fcl_unit(fs->cl);

	if (u)
		return u;
	pthread_mutex_lock(&ino->lk);
	u = ino->sunit;
	pthread_mutex_unlock(&ino->lk);
	return u;
}

/* ---- size bounds (cluster/fcache.h, "Size epochs") ---- */

/* A home's reply (OPEN with HOME, GETATTR, SETSIZE) of size and epoch:
 * the bound reads and writes within it rely on. A newer epoch replaces
 * the bound (a shrink came); within one, sizes only grow, but an open
 * (open: true) takes the home's word as it is (close-to-open). */
static void bound_learn(struct fs_inode *ino, const struct frame_fop *rf, bool open)
{
	if (!rf->epoch)
		return;
	pthread_mutex_lock(&ino->lk);
	if (rf->epoch > ino->cl_epoch || (open && rf->epoch == ino->cl_epoch) ||
	    (rf->epoch == ino->cl_epoch && rf->size > ino->cl_bound)) {
		ino->cl_epoch = rf->epoch;
		ino->cl_bound = rf->size;
	}
	pthread_mutex_unlock(&ino->lk);
}

/* The n requests of q, a range ending at end: with BOUND and the epoch if
 * the range lies within the bound. Whether they go so. */
static bool bound_mark(struct fs_inode *ino, uint64_t end, struct fcl_req *q,
		       unsigned n)
{
	pthread_mutex_lock(&ino->lk);
	uint64_t e = end <= ino->cl_bound ? ino->cl_epoch : 0;
	pthread_mutex_unlock(&ino->lk);
	for (unsigned k = 0; e && k < n; k++) {
		q[k].f.flags |= FRAME_FILE_BOUND;
		q[k].f.epoch = e;
	}
	return e != 0;
}

/* Every one of the n answered (a read's -ENOENT too: the backing holds
 * the bytes) and its owner said the bound holds. */
static bool bound_vouched(const struct fcl_req *q, unsigned n, bool read)
{
	for (unsigned k = 0; k < n; k++)
		if ((q[k].rc && !(read && q[k].rc == -ENOENT)) ||
		    !(q[k].rf.flags & FRAME_FILE_BOUND_OK))
			return false;
	return n > 0;
}

/* The time of the last write the home's mtime owes (0: none). */
static uint64_t mtime_owed(struct fs_inode *ino)
{
	pthread_mutex_lock(&ino->lk);
	uint64_t t = ino->cl_owed_ns;
	pthread_mutex_unlock(&ino->lk);
	return t;
}

/* A SETSIZE from here set the file's mtime at the home: at (clock_now_ns)
 * to a write's time, 0: to a time set (utimens), which the next write
 * moves at once; the debt of the writes up to owed (mtime_owed before
 * it was sent) paid, not that of a write since. */
static void mtime_paid(struct fs_inode *ino, uint64_t at, uint64_t owed)
{
	pthread_mutex_lock(&ino->lk);
	ino->cl_mtime_at = at;
	if (ino->cl_owed_ns == owed)
		ino->cl_owed_ns = 0;
	pthread_mutex_unlock(&ino->lk);
}

/* The home's reply said the file's unit (blocks; 0: it has none yet). */
static void unit_learn(struct fs *fs, struct fs_inode *ino, uint32_t blocks)
{
	if (!blocks || fcl_unit(fs->cl))
		return;
	pthread_mutex_lock(&ino->lk);
	ino->sunit = (uint64_t)blocks * fcl_block(fs->cl);
	pthread_mutex_unlock(&ino->lk);
}

/* The unit the file's home put on its backing file (FCACHE_UNIT_XATTR)
 * into v (len bytes, NUL-ended): its length, or -errno (-ENODATA: none) */
static ssize_t unit_label_get(struct fs_inode *ino, char *v, size_t len)
{
	char link[64];

	snprintf(link, sizeof(link), "/proc/self/fd/%d", ino->fd);
	ssize_t n = getxattr(link, FCACHE_UNIT_XATTR, v, len - 1);
	if (n < 0)
		return -errno;
	v[n] = 0;
	return n;
}

/* stripe_unit=auto and the home down: the unit it wrote on the backing
 * file when it fixed it (FCACHE_UNIT_XATTR), learnt; 0: none there. */
static uint64_t unit_from_backing(struct fs *fs, struct fs_inode *ino)
{
	char v[24];
	uint64_t u = 0, B = fcl_block(fs->cl);

	if (unit_label_get(ino, v, sizeof(v)) <= 0)
		return 0;
	if (sscanf(v, "%" SCNu64, &u) != 1 || !u || u % B || u / B > FCACHE_UNIT_MAX)
		return 0;   /* not ours to trust: as if none */
	unit_learn(fs, ino, (uint32_t)(u / B));
	return u;
}

static int send_open_unit(struct fs *fs, struct fs_inode *ino, uint32_t idx,
			  bool home, struct fdcl_attr *a, bool *down, uint64_t offer,
			  uint64_t token);

/* The file's unit as its home has it (asked with a GETATTR if not
 * learnt), 0: none yet (stripe_unit=auto and the file was of one block
 * at most when first cached: its first truncate or write past that
 * block fixes it), or -1: no answer (its home down, or without a record
 * of it). */
static int64_t unit_known(struct fs *fs, struct fs_inode *ino)
{
	uint64_t u = unit_of(fs, ino), size;

	if (u)
		return (int64_t)u;
	if (fdcl_size(fs, ino, &size) < 0)
		return -1;
	return (int64_t)unit_of(fs, ino);
}

/* stripe_unit=auto and the home down: a backing file of one block at
 * most that its home put no unit on (its user xattrs work) has no unit
 * fixed (a home puts it there before it answers the request that fixed
 * it): no node holds a block of it past the first, the home's under any
 * unit, so it opens as any cut would, none learnt. */
static bool unit_unset_on_backing(struct fs *fs, struct fs_inode *ino)
{
	char v[24];
	struct stat st;

	return !fcl_unit(fs->cl) && unit_label_get(ino, v, sizeof(v)) == -ENODATA &&
	       fstatat(ino->fd, "", &st, AT_EMPTY_PATH) == 0 &&
	       (uint64_t)st.st_size <= fcl_block(fs->cl);
}

/* Whether a file whose home is down is cut as its home would here: its
 * unit learnt, on its backing file, or fixed nowhere yet. */
static bool unit_down_known(struct fs *fs, struct fs_inode *ino)
{
	return unit_of(fs, ino) || unit_from_backing(fs, ino) ||
	       unit_unset_on_backing(fs, ino);
}

/* auto's unit for a file of size bytes; one of a block at most has no
 * size to share (its block is the home's under any unit): 1 MiB */
static uint64_t unit_for(struct fs *fs, uint64_t size)
{
	return fcl_auto_unit(fs->cl, size <= fcl_block(fs->cl) ? 0 : size);
}

/* unit_for the backing file's size */
static uint64_t unit_auto(struct fs *fs, struct fs_inode *ino)
{
	struct stat st;

	return unit_for(fs, fstatat(ino->fd, "", &st, AT_EMPTY_PATH) < 0 ?
			0 : (uint64_t)st.st_size);
}

/* The unit a size set offers its home (SETSIZE off, blocks): none but
 * with stripe_unit=auto for a file whose unit this mount has not learnt,
 * and then only past one block (a truncate or fallocate that sizes a new
 * file before its first write; the home takes the first offer). */
static uint32_t unit_offer(struct fs *fs, struct fs_inode *ino, uint64_t size)
{
	if (unit_of(fs, ino) || size <= fcl_block(fs->cl))
		return 0;
	return (uint32_t)(unit_for(fs, size) / fcl_block(fs->cl));
}

/* The unit for a write that ends at end, in *unit: learnt, or the one
 * the home fixed; none learnt, this mount has the home fix one (an OPEN
 * that offers unit_auto: 1 MiB for a file of one block at most;
 * the first offer wins, and the reply says the winner). A write never
 * places a block by a cut its home has not fixed: the home down, this
 * waits for it (down_wait), then fails (EIO). But a write within the
 * first block needs none: that block is the home's under every unit (a
 * small file's, then, stays unfixed, for a truncate to fix). */
static int unit_need(struct fs *fs, struct fs_inode *ino, uint64_t end,
		     uint64_t *unit)
{
	uint64_t gid = gid_of(ino);
	uint32_t home = fcl_home(fs->cl, gid);

	if ((*unit = unit_of(fs, ino)))
		return 0;
	if (end <= fcl_block(fs->cl)) {
		*unit = FCL_UNIT_EMPTY;
		return 0;
	}
	for (int tries = 0; tries <= HOME_TRIES; tries++) {
		bool down = false;
		int r = send_open_unit(fs, ino, home, false, NULL, &down, unit_auto(fs, ino), 0);
		if (!r)
			return (*unit = unit_of(fs, ino)) ? 0 : -EIO;
		if (!down || !home_back(fs, home, gid))
			return down ? -EIO : r;
	}
	return -EIO;
}

/* The unit for a read that ends at end: the home's, but one not fixed
 * yet stays so (no node holds a block of such a file past its first,
 * the home's under any unit: any cut reads it; a write that fixes it
 * meanwhile is read once its writer's sync or close is followed by this
 * mount's next look at the home). Within the first block, none asked. */
static uint64_t unit_read(struct fs *fs, struct fs_inode *ino, uint64_t end)
{
	uint64_t l = unit_of(fs, ino);
	if (l || end <= fcl_block(fs->cl))
		return l ? l : FCL_UNIT_EMPTY;
	int64_t u = unit_known(fs, ino);
	if (u > 0)
		return (uint64_t)u;
	/* (the home down, or it has no record: the unit it put on the
	 * backing file, if it fixed one) */
	uint64_t b = unit_from_backing(fs, ino);
	return b ? b : unit_auto(fs, ino);
}

/* OPEN at node idx: the record made there if missing (size: the
 * backing's; stripe unit: the file's, or auto's for that size; with
 * auto, none for a file of one block at most: its first truncate or
 * write past that block fixes it),
 * an open counted if home. The home's answer of size and mtime in *a
 * (if not NULL); *down (if not NULL): the node could not be reached. */
static int send_open(struct fs *fs, struct fs_inode *ino, uint32_t idx,
		     bool home, struct fdcl_attr *a, bool *down)
{
	return send_open_unit(fs, ino, idx, home, a, down, 0, 0);
}

/* Between the sends of a request its node answered FULL. */
#define FULL_PAUSE_US 100000

/* Whether an answer says the node's cache stayed full while it held the
 * request (FRAME_FILE_FULL: a stalled backing, its write-back making no
 * room): back-pressure, as on one node, never ENOSPC. */
static bool is_full(int rc, const struct frame_fop *rf)
{
	return rc == -ENOSPC && (rf->flags & FRAME_FILE_FULL);
}

/* After an answer FULL from node idx: counted, logged, and a pause
 * before the request goes again. Returns 0, or -EIO once the mount is
 * stopping, -EINTR once the caller is being killed (fs_caller_killed). */
static int full_pause(struct fs *fs, uint32_t idx)
{
	static struct log_limit full_log;
	char note[64];

	atomic_fetch_add(&fs->st.bp_waits, 1);
	if (log_limit(&full_log, 30, note, sizeof(note)))
		log_warn("cluster: node %u's cache stayed full while it held a "
			 "request, its write-back making no room (a slow or "
			 "stalled backing?): writes and opens wait for room%s",
			 fcl_node_id(fs->cl, idx), note);
	if (fs_leaving(fs))
		return -EIO;     /* unmounted meanwhile */
	if (fs_caller_killed())
		return -EINTR;   /* no one left to answer */
	/* (held 2 s there; the pause lets this mount's other requests to
	 * the node have a connection) */
	usleep(FULL_PAUSE_US);
	return 0;
}

/* send_open offering the unit offer (bytes; 0: as send_open's), and
 * with home, the open's token (fcl_open_token; 0: none) */
static int send_open_unit(struct fs *fs, struct fs_inode *ino, uint32_t idx,
			  bool home, struct fdcl_attr *a, bool *down, uint64_t offer,
			  uint64_t token)
{
	bool unreached = false;

	struct ident id;
	struct stat st;
	struct frame_fop rf;
	int r = ident_get(ino, &id);

	if (r < 0)
		return r;
	if (fstatat(ino->fd, "", &st, AT_EMPTY_PATH) < 0)
		return -errno;
	uint64_t unit = offer ? offer : unit_of(fs, ino);
	if (!unit && (uint64_t)st.st_size > fcl_block(fs->cl))
		unit = unit_for(fs, (uint64_t)st.st_size);
	struct frame_fop f = { .obj = id.gid, .len = id.h.len, .handle_type = id.h.type,
			       .size = (uint64_t)st.st_size,
			       .off = (uint32_t)(unit / fcl_block(fs->cl)),
			       .flags = home ? FRAME_FILE_HOME : 0,
			       .token = home ? token : 0 };
	struct iovec iov = { id.h.handle, id.h.len };
	/* a full object table there: the open waits for room as a write */
	do
		r = fcl_call_down(fs->cl, idx, FT_FILE_OPEN, &f, &iov, 1, &rf, &unreached);
	while (is_full(r, &rf) && !(r = full_pause(fs, idx)));
	if (down)
		*down = unreached;
	if (!r && idx == fcl_home(fs->cl, id.gid)) {
		unit_learn(fs, ino, rf.off);
		bound_learn(ino, &rf, home);
	}
	if (!r && a && home && idx == fcl_home(fs->cl, id.gid))
		*a = (struct fdcl_attr){ .known = true, .size = rf.size, .mtime_ns = rf.blk };
	return r;
}

/* A request whose node could not be reached (q->down), sent again while
 * fcl_wait_up lets it (down_wait: the node may be restarting) and the
 * mount is not leaving: its rc, q->down still set if it never got
 * through. */
static int wait_down(struct fs *fs, struct fcl_req *q)
{
	uint64_t since = 0;

	if (q->down)
		atomic_fetch_add(&fs->st.down_waits, 1);
	while (q->down && !fs_leaving(fs) &&
	       fcl_wait_up(fs->cl, q->idx, fs->cfg.down_wait_ms, &since))
		fcl_call_many(fs->cl, q, 1);
	return q->rc;
}

/* One request to node idx, waiting for it while it is down (wait_down),
 * but an APPEND. */
static int call_waiting(struct fs *fs, uint32_t idx, uint32_t type,
			const struct frame_fop *f, struct frame_fop *rf)
{
	struct fcl_req q = { .idx = idx, .type = type, .f = *f };

	fcl_call_many(fs->cl, &q, 1);
	/* an APPEND the node may have taken before it went down is not
	 * sent again (it would reserve the range twice) */
	int r = f->flags & FRAME_FILE_APPEND ? q.rc : wait_down(fs, &q);
	*rf = q.rf;
	return r;
}

/* One request to every node at once, then each that was down sent again
 * while it may be coming back (wait_down), as a single request is: a
 * truncate or punch that went on without a restarting owner would leave
 * its blocks past the cut, to show again at a regrow or reach the
 * backing at its write-back. The first error. */
static int call_all_waiting(struct fs *fs, uint32_t type, const struct frame_fop *f)
{
	uint32_t n = fcl_nodes(fs->cl);
	struct fcl_req q[CONFIG_MAX_NODES];
	int first = 0;

	for (uint32_t i = 0; i < n; i++)
		q[i] = (struct fcl_req){ .idx = i, .type = type, .f = *f };
	fcl_call_many(fs->cl, q, n);
	for (uint32_t i = 0; i < n; i++) {
		int r = wait_down(fs, &q[i]);
		if (!first)
			first = r;
	}
	return first;
}

/* Whether node idx (gid's home) answers within down_wait (wait_down). */
static bool home_back(struct fs *fs, uint32_t idx, uint64_t gid)
{
	struct fcl_req p = { .idx = idx, .type = FT_FILE_GETATTR, .f = { .obj = gid },
			     .rc = -EIO, .down = true };
	wait_down(fs, &p);
	return !p.down;
}

/* SETSIZE at the home (f: obj, size, flags; its reply in rf if not
 * NULL); a home that has no record of the file yet gets one first. */
static int home_setsize(struct fs *fs, struct fs_inode *ino, const struct frame_fop *f,
			struct frame_fop *rf)
{
	uint32_t home = fcl_home(fs->cl, f->obj);
	struct frame_fop own;

	if (!rf)
		rf = &own;
	uint64_t owed = mtime_owed(ino);
	int r = call_waiting(fs, home, FT_FILE_SETSIZE, f, rf);
	if (r == -ESTALE && !(r = send_open(fs, ino, home, false, NULL, NULL)))
		r = call_waiting(fs, home, FT_FILE_SETSIZE, f, rf);
	if (!r) {
		unit_learn(fs, ino, rf->off);
		bound_learn(ino, rf, false);
		mtime_paid(ino, clock_now_ns(), owed);   /* every SETSIZE sets it */
	}
	return r;
}

/* The mtime a write that relied on the bound left unset at the home:
 * the time of the last such write, which the home takes unless its mtime
 * changed since (a time set through another mount after it wins). At a
 * close, an fsync, a stat from here. */
static void mtime_pay(struct fs *fs, struct fs_inode *ino)
{
	uint64_t owed = mtime_owed(ino);
	struct frame_fop f = { .obj = gid_of(ino), .size = owed,
			       .flags = FRAME_FILE_MTIME | FRAME_FILE_MTIME_PAY }, rf;

	if (!owed || !f.obj)
		return;
	int r = fcl_call(fs->cl, fcl_home(fs->cl, f.obj), FT_FILE_SETSIZE, &f, NULL, 0,
			 &rf, NULL, 0);
	/* (no record there: the backing's time, moved by the write-back) */
	if (!r || r == -ESTALE)
		mtime_paid(ino, clock_now_ns(), owed);
}

/* A change to the file's bytes or size goes out from this mount: its
 * next CLOSE says so (FRAME_FILE_WRITER), so that the last close
 * cluster-wide has the owners write back. */
static void wrote_mark(struct fs_inode *ino)
{
	pthread_mutex_lock(&ino->lk);
	ino->cl_wrote = ino->cl_inval = true;
	pthread_mutex_unlock(&ino->lk);
}

/* The other mounts holding ino open drop their kernels' pages of it
 * before this returns, if this mount changed it since it last asked
 * (cluster/fcache_inval.c): what a reader there reads next is what its
 * node holds. A home that cannot be asked leaves it owed (logged). */
static void others_drop(struct fs *fs, struct fs_inode *ino)
{
	static struct log_limit fail_log;
	uint64_t gid = gid_of(ino);
	char note[96];

	pthread_mutex_lock(&ino->lk);
	bool owed = ino->cl_inval;
	ino->cl_inval = false;
	pthread_mutex_unlock(&ino->lk);
	if (!owed || !gid)
		return;
	struct frame_fop f = { .obj = gid };
	int r = fcl_call(fs->cl, fcl_home(fs->cl, gid), FT_FILE_INVAL, &f, NULL, 0,
			 NULL, NULL, 0);
	if (!r) {
		atomic_fetch_add(&fs->st.cl_invals, 1);
		return;
	}
	wrote_mark(ino);
	if (log_limit(&fail_log, 30, note, sizeof(note)))
		log_warn("cluster: file %016llx: its home did not have the other "
			 "mounts drop their cached pages (%s): a reader there may "
			 "read older bytes until it reopens the file%s",
			 (unsigned long long)gid, strerror(-r), note);
}

void fdcl_dropped(void *arg, const uint64_t *gids, unsigned n)
{
	struct fs *fs = arg;
	/* (n <= FRAME_WATCH_MAX, one open inode an id) */
	struct fs_inode *v[FRAME_WATCH_MAX];
	size_t k = itab_gid_holders(fs, gids, n, v, FRAME_WATCH_MAX);

	for (size_t j = 0; j < k; j++) {
		fs_drop_pages(fs, v[j]);
		itab_unref(fs, v[j]);
	}
	atomic_fetch_add(&fs->st.cl_dropped, k);
}

void fdcl_restarted(void *arg, uint32_t idx, struct fcl_reclaim *r)
{
	struct fs *fs = arg;
	size_t max = itab_count(fs) + 64, files = 0, handles = 0, failed = 0;
	struct fs_inode **v = calloc(max, sizeof(*v));

	if (!v) {
		log_err("cluster: node %u restarted: out of memory listing the "
			"files open here; their opens are not counted there",
			fcl_node_id(fs->cl, idx));
		return;
	}
	size_t n = itab_hold_all(fs, v, max);
	for (size_t k = 0; k < n; k++) {
		struct fs_inode *ino = v[k];
		struct ident id;
		struct stat st;
		pthread_mutex_lock(&ino->lk);
		uint32_t opens = ino->opens;
		uint64_t gid = ino->gid;
		pthread_mutex_unlock(&ino->lk);
		/* (other threads wait for the node meanwhile: no open or
		 * release of this file changes these until we are done) */
		if (!opens || !gid || fcl_home(fs->cl, gid) != idx)
			continue;
		int e = ident_get(ino, &id);
		if (!e && fstatat(ino->fd, "", &st, AT_EMPTY_PATH) < 0)
			e = -errno;
		if (!e) {
			struct frame_fop f = { .obj = id.gid, .len = id.h.len,
					       .handle_type = id.h.type,
					       .size = (uint64_t)st.st_size, .blk = opens,
					       .off = (uint32_t)(unit_of(fs, ino) /
								 fcl_block(fs->cl)),
					       .flags = FRAME_FILE_HOME | FRAME_FILE_RECLAIM },
					 rf;
			struct iovec iov = { id.h.handle, id.h.len };
			e = fcl_reclaim_call(r, FT_FILE_OPEN, &f, &iov, 1, &rf);
		}
		if (e) {
			failed++;
			log_warn("cluster: node %u restarted: file %016llx open here "
				 "(%u handles) not counted there: %s",
				 fcl_node_id(fs->cl, idx), (unsigned long long)gid, opens,
				 strerror(-e));
		} else {
			files++;
			handles += opens;
			/* opened while it was down: counted there now */
			pthread_mutex_lock(&ino->lk);
			ino->opens_uncounted = 0;
			pthread_mutex_unlock(&ino->lk);
		}
	}
	for (size_t k = 0; k < n; k++)
		itab_unref(fs, v[k]);
	free(v);
	log_info("cluster: node %u restarted: %zu files open here (%zu handles) "
		 "counted there again%s", fcl_node_id(fs->cl, idx), files, handles,
		 failed ? ", some not (above)" : "");
}

int fdcl_inode_init(struct fs *fs, struct fs_inode *ino)
{
	pthread_mutex_lock(&ino->lk);
	int r = inode_datafd(fs, ino) < 0 ? -errno : 0;
	pthread_mutex_unlock(&ino->lk);
	if (!r && !gid_of(ino))
		r = -EOPNOTSUPP;
	return r;
}

int fdcl_open(struct fs *fs, struct fs_inode *ino, struct fdcl_attr *a)
{
	static struct log_limit down_log;
	uint64_t gid = gid_of(ino);
	uint32_t home = fcl_home(fs->cl, gid);
	bool down = false, uncounted = false;
	char note[96];
	struct fdcl_attr own;

	if (!a)
		a = &own;
	*a = (struct fdcl_attr){ 0 };
	/* one token for every send of this open: a home that counted it
	 * before the reply was lost does not count it again */
	uint64_t token = fcl_open_token(fs->cl);
	int r = send_open_unit(fs, ino, home, true, a, &down, 0, token), h = -EIO;

	/* the home down: the file opens with its size from the backing or
	 * the home's shadow (home_down), or else, the home back within
	 * down_wait, there */
	for (int tries = 0; r < 0 && down; tries++) {
		if (unit_down_known(fs, ino)) {
			h = home_down(fs, ino, gid, NULL);
			if (h != -EAGAIN)
				break;
		} else if (!home_back(fs, home, gid)) {
			break;   /* stripe_unit=auto: how it is cut is the home's */
		}
		h = -EIO;
		if (tries == HOME_TRIES)
			break;
		r = send_open_unit(fs, ino, home, true, a, &down, 0, token);
	}
	if (r < 0 && down && !unit_down_known(fs, ino)) {
		if (log_limit(&down_log, 30, note, sizeof(note)))
			log_err("cluster: node %u, home of file %016llx, is down, and "
				"only it knows the file's stripe unit (stripe_unit=auto; "
				"this mount has not opened it before): EIO%s",
				fcl_node_id(fs->cl, home), (unsigned long long)gid, note);
	} else if (r < 0 && down && (h == -ENOENT || h == 0)) {
		/* its size is the backing's (or its shadow's copy): readable
		 * meanwhile; a restarted home counts this open
		 * (fdcl_restarted) */
		uncounted = true;
		if (log_limit(&down_log, 30, note, sizeof(note)))
			log_warn("cluster: node %u, home of file %016llx, is down: "
				 "opened with its size from %s (its writes wait for "
				 "the node, down_wait)%s", fcl_node_id(fs->cl, home),
				 (unsigned long long)gid,
				 h ? "the backing" : "the home's shadow", note);
		r = 0;
	} else if (r < 0 && down) {
		r = h;
	}
	if (r < 0)
		return r;
	itab_ref(fs, ino);
	pthread_mutex_lock(&ino->lk);
	ino->opens++;
	ino->opens_uncounted += uncounted;
	pthread_mutex_unlock(&ino->lk);
	return 0;
}

void fdcl_release(struct fs *fs, struct fs_inode *ino)
{
	uint64_t gid = gid_of(ino);
	struct frame_fop f = { .obj = gid }, rf = { 0 };
	int r = -EIO;

	/* an open the home never counted is not closed there */
	pthread_mutex_lock(&ino->lk);
	bool uncounted = ino->opens_uncounted > 0;
	ino->opens_uncounted -= uncounted;
	bool wrote = ino->cl_wrote;
	ino->cl_wrote = false;
	pthread_mutex_unlock(&ino->lk);
	bool down = false;
	/* a last close after writes has the home write its own blocks back
	 * (and says whether another owner holds any) */
	f.flags = FRAME_FILE_WB | (wrote ? FRAME_FILE_WRITER : 0);
	f.size = fs->cfg.wb_delay_ns;
	if (!uncounted)
		r = fcl_call_down(fs->cl, fcl_home(fs->cl, gid), FT_FILE_CLOSE, &f, NULL,
				  0, &rf, &down);
	if (r < 0 && wrote)
		wrote_mark(ino);   /* not told: the next CLOSE from here tells it */
	if (uncounted || down) {
		/* the home cannot say: the owners write back, as after a
		 * last close (early at worst; a home lost for good would
		 * leave the other owners' dirty blocks in their NVRAM) */
		r = 0;
		rf.flags = FRAME_FILE_LAST | FRAME_FILE_WRITER;
	}
	f = (struct frame_fop){ .obj = gid };
	if (!r && (rf.flags & FRAME_FILE_DOOMED)) {
		/* unlinked while open, closed everywhere: its home drops it
		 * everywhere once its linger is over (UNLINK_LINGER_NS), if
		 * still open nowhere. Not a DROP from here: another mount's
		 * OPEN, looked up before the unlink, may be counted at the
		 * home before the DROP arrives, and would read the file's
		 * blocks gone (an empty file) */
		atomic_fetch_add(&fs->st.dropped_unlinked, 1);
	} else if (!r && (rf.flags & FRAME_FILE_LAST) && (rf.flags & FRAME_FILE_WRITER) &&
		   (rf.flags & FRAME_FILE_WB)) {
		/* the home, the only owner, writes back: no one else to ask */
		atomic_fetch_add(&fs->st.last_close_wb, 1);
	} else if (!r && (rf.flags & FRAME_FILE_LAST) && (rf.flags & FRAME_FILE_WRITER)) {
		f.size = fs->cfg.wb_delay_ns;
		int e = fcl_call_all(fs->cl, FT_FILE_WRITEBACK, &f);
		if (e)   /* (the home has cleared its bit: the 30 s pass it is) */
			log_warn("cluster: file %016llx closed: not every owner was "
				 "asked to write it back (%s); they do within 30 s",
				 (unsigned long long)gid, strerror(-e));
		atomic_fetch_add(&fs->st.last_close_wb, 1);
	} else if (!r && (rf.flags & FRAME_FILE_LAST)) {
		/* nothing written since the owners were last told: a
		 * read-only open, or a writer's that wrote nothing */
		atomic_fetch_add(&fs->st.last_close_clean, 1);
	}
	pthread_mutex_lock(&ino->lk);
	ino->opens--;
	bool last = !ino->opens;
	pthread_mutex_unlock(&ino->lk);
	if (last)
		inode_close_idle(fs, ino);
	itab_unref(fs, ino);
}

/* fdcl_size, and the mtime the home keeps in *mtime_ns (0: none, the
 * backing's holds; also while the home is down); *asked (if not NULL):
 * the answer is the home's own, not one made while it is down. */
static int home_attr(struct fs *fs, struct fs_inode *ino, uint64_t *size,
		     uint64_t *mtime_ns, bool *asked)
{
	uint64_t gid = gid_of(ino);
	struct fcl_req q = { .idx = fcl_home(fs->cl, gid), .type = FT_FILE_GETATTR,
			     .f = { .obj = gid } };

	*mtime_ns = 0;
	if (!gid)
		return -ENOENT;
	fcl_call_many(fs->cl, &q, 1);
	int r = home_getattr_down(fs, ino, &q);
	if (asked)
		*asked = !q.down;
	if (!r)
		*size = q.rf.size;
	if (!r && !q.down) {   /* the home's answer */
		*mtime_ns = q.rf.blk;
		unit_learn(fs, ino, q.rf.off);
		bound_learn(ino, &q.rf, false);
	}
	return r;
}

int fdcl_size(struct fs *fs, struct fs_inode *ino, uint64_t *size)
{
	uint64_t mtime_ns;

	return home_attr(fs, ino, size, &mtime_ns, NULL);
}

int fdcl_fix_attr(struct fs *fs, struct fs_inode *ino, struct stat *st,
		  const struct fdcl_attr *a)
{
	uint64_t size, mtime_ns;
	int r;

	if (!S_ISREG(st->st_mode))
		return 0;
	/* an OPEN's answer holds unless this mount owes the home an mtime */
	if (a && a->known && !mtime_owed(ino)) {
		size = a->size;
		mtime_ns = a->mtime_ns;
		goto set;
	}
	mtime_pay(fs, ino);   /* this mount's writes show in its own stat */
	bool asked = false;
	if ((r = home_attr(fs, ino, &size, &mtime_ns, &asked)) < 0) {
		/* no record: the backing's holds, but not for a backing file
		 * with no name left (unlinked, or renamed over, since it was
		 * looked up): its record, and its size, may have gone with
		 * the unlink. STALE: looked up again (ops.c's lookup, the
		 * kernel's LOOKUP_REVAL), the name gives what it holds now,
		 * as if the request came after the unlink. Looked at after
		 * the home's answer: the mount that unlinks it unlinks the
		 * backing file before the home drops the record (st may be
		 * from before). Not when the home is down (home_down's
		 * -ENOENT: the backing's size holds, a file unlinked while
		 * open too) */
		struct stat now;
		if (r == -ENOENT && asked && fstatat(ino->fd, "", &now, AT_EMPTY_PATH) == 0 &&
		    now.st_nlink == 0)
			return -ESTALE;
		return r == -EIO ? r : 0;
	}
set:
	stat_set_size(st, size);
	/* the last change through any mount (the owners' write-backs move
	 * the backing's) */
	if (mtime_ns)
		stat_set_mtime(st, (struct timespec){
			.tv_sec = (time_t)(mtime_ns / 1000000000ull),
			.tv_nsec = (long)(mtime_ns % 1000000000ull) });
	return 0;
}

int fdcl_set_mtime(struct fs *fs, struct fs_inode *ino, const struct timespec *t)
{
	uint64_t gid = gid_of(ino);
	struct frame_fop f = { .obj = gid, .flags = FRAME_FILE_MTIME }, rf;
	struct stat sb;

	if (!gid || t->tv_nsec == UTIME_OMIT)
		return 0;
	/* only a regular file has a record at its home: a directory's or a
	 * symlink's time is the backing's alone */
	if (fstatat(ino->fd, "", &sb, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(sb.st_mode))
		return 0;
	if (t->tv_nsec == UTIME_NOW)
		f.size = 0;                  /* the home's clock */
	else if (t->tv_sec < 0)
		f.size = FRAME_MTIME_NONE;   /* before 1970: the backing's holds */
	else
		f.size = (uint64_t)t->tv_sec * 1000000000ull + (uint64_t)t->tv_nsec;
	if (!f.size && t->tv_nsec != UTIME_NOW)
		f.size = 1;                  /* the epoch itself (0 says now) */
	uint64_t owed = mtime_owed(ino);
	int r = call_waiting(fs, fcl_home(fs->cl, gid), FT_FILE_SETSIZE, &f, &rf);
	/* no record there: the backing's, just set, holds. The home down
	 * past down_wait: -EIO, as it keeps the file's time in NVRAM and
	 * would show its older one once back (the writes' time still owed) */
	if (r == -ESTALE)
		r = 0;
	if (!r)   /* a time set wins over the one the writes before it owe */
		mtime_paid(ino, 0, owed);
	return r;
}

/* n bytes of the backing file at pos (zeros past its end) */
static int backing_read(struct fs *fs, struct fs_inode *ino, uint64_t pos,
			char *buf, uint32_t n, uint32_t *got)
{
	pthread_mutex_lock(&ino->lk);
	int fd = inode_datafd(fs, ino);
	pthread_mutex_unlock(&ino->lk);
	uint32_t done = 0;

	if (fd < 0)
		return fd;
	while (done < n) {
		ssize_t k = pread(fd, buf + done, n - done, (off_t)(pos + done));
		if (k < 0)
			return -errno;
		if (k == 0)
			break;
		done += (uint32_t)k;
	}
	if (got)
		*got = done;
	memset(buf + done, 0, n - done);
	return 0;
}

/* The pieces of [off, off+len) cut at block edges, as requests of type
 * to their owners (data: the bytes of a write, or where a read's go),
 * after `first` zeroed requests left for the caller; *n in all. */
static struct fcl_req *pieces(struct fs *fs, uint64_t gid, uint64_t unit,
			      uint32_t type, uint64_t off, size_t len, char *data,
			      unsigned first, unsigned *n)
{
	uint32_t B = fcl_block(fs->cl);
	unsigned max = (unsigned)(len / B + 2) + first, k = first;
	struct fcl_req *r = calloc(max, sizeof(*r));
	size_t done = 0;

	if (!r)
		return NULL;
	while (done < len) {
		uint64_t pos = off + done, blk = pos / B;
		uint32_t boff = (uint32_t)(pos % B);
		uint32_t m = B - boff < len - done ? B - boff : (uint32_t)(len - done);
		r[k].idx = fcl_owner(fs->cl, gid, blk, unit);
		r[k].type = type;
		r[k].f = (struct frame_fop){ .obj = gid, .blk = blk, .off = boff, .len = m };
		if (type == FT_FILE_WRITE) {
			r[k].pl[0] = (struct iovec){ data + done, m };
			r[k].npl = 1;
		} else {
			r[k].buf = data + done;
			r[k].buflen = m;
		}
		k++;
		done += m;
	}
	*n = k;
	return r;
}

/* The file's name under the mount point (its backing path, through
 * its O_PATH descriptor), kept among the last FS_LOST_FILES for
 * nvcachectl stats. True: another file than the last one kept. */
static bool lost_name(struct fs *fs, struct fs_inode *ino, char *name, size_t len)
{
	char link[64], path[PATH_MAX];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", ino->fd);
	ssize_t n = readlink(link, path, sizeof(path) - 1);
	size_t bl = strlen(fs->cfg.backing);
	path[n > 0 ? n : 0] = 0;
	if (n > 0 && !strncmp(path, fs->cfg.backing, bl) && path[bl] == '/')
		snprintf(name, len, "%s%s", fs->cfg.mountpoint, path + bl);
	else
		snprintf(name, len, "inode %llu", (unsigned long long)ino->ino);
	pthread_mutex_lock(&fs->lost_mx);
	unsigned last = (fs->nlost + FS_LOST_FILES - 1) % FS_LOST_FILES;
	bool other = !fs->nlost || strcmp(fs->lost[last], name) != 0;
	if (other)
		snprintf(fs->lost[fs->nlost++ % FS_LOST_FILES], sizeof(fs->lost[0]),
			 "%s", name);
	pthread_mutex_unlock(&fs->lost_mx);
	return other;
}

/* A read's range whose owner could not be reached: its shadow knows
 * whether the owner holds the block dirty (cluster/fmarks.h). -ENOENT
 * (clean there: the backing holds the bytes), 0 (dirty there, and the
 * shadow's replica of it, replicas=2, read into q->buf; for
 * FMARK_SIZE_BLK the size it keeps, in q->rf.size), or -EIO (dirty
 * there, the only copy of its newest bytes; or nobody knows), logged;
 * not last: -EAGAIN for that, neither counted nor logged (the caller
 * waits for the owner first). */
static int down_owner(struct fs *fs, struct fs_inode *ino, struct fcl_req *q,
		      bool last)
{
	static struct log_limit lost_log;
	uint32_t shadow = fcl_shadow(fs->cl, q->idx);
	struct frame_fop f = { .obj = q->f.obj, .blk = q->f.blk, .off = q->idx },
			 rf = { 0 };
	char note[96];
	/* the home's size of a file (an open, a stat, a create) is counted
	 * apart from a read's bytes */
	bool size = q->f.blk == FMARK_SIZE_BLK;

	if (shadow == q->idx)
		return -EIO;
	int r = fcl_call(fs->cl, shadow, FT_FILE_SHADOW, &f, NULL, 0, &rf, NULL, 0);
	if (!r && !rf.flags) {
		atomic_fetch_add(size ? &fs->st.down_sizes : &fs->st.down_reads, 1);
		return -ENOENT;
	}
	if (!r && q->f.blk == FMARK_SIZE_BLK && (rf.flags & FRAME_SHADOW_DIRTY) &&
	    (rf.flags & FRAME_SHADOW_REPLICA)) {
		/* the home's size, as its shadow keeps it (replicas=2) */
		q->rf.size = rf.size;
		atomic_fetch_add(&fs->st.down_replica_reads, 1);
		return 0;
	}
	if (!r && (rf.flags & FRAME_SHADOW_DIRTY) && (rf.flags & FRAME_SHADOW_REPLICA)) {
		/* the owner's bytes, as the shadow keeps them */
		struct frame_fop rq = q->f, rr = { 0 };
		rq.flags = FRAME_FILE_REPLICA;
		rq.gen = q->idx;
		int e = fcl_call(fs->cl, shadow, FT_FILE_READ, &rq, NULL, 0, &rr,
				 q->buf, q->f.len);
		if (e == 0) {
			atomic_fetch_add(&fs->st.down_replica_reads, 1);
			return 0;
		}
		/* gone since: written back (the mark went first), or the
		 * owner is back and sends its copies again (marked still) */
		if (e == -ENOENT)
			e = fcl_call(fs->cl, shadow, FT_FILE_SHADOW, &f, NULL, 0, &rf,
				     NULL, 0);
		if (e == 0 && !rf.flags) {
			atomic_fetch_add(&fs->st.down_reads, 1);   /* (not a size) */
			return -ENOENT;
		}
		r = e;
	}
	if (!last)
		return -EAGAIN;
	atomic_fetch_add(size ? &fs->st.down_lost_sizes : &fs->st.down_lost, 1);
	char name[256];
	/* each file named once at least; a file's repeats limited */
	note[0] = 0;
	if (lost_name(fs, ino, name, sizeof(name)) ||
	    log_limit(&lost_log, 10, note, sizeof(note)))
		log_err("cluster: node %u is down and holds %s %llu of %s "
			"(file %016llx) %s: EIO%s", fcl_node_id(fs->cl, q->idx),
			q->f.blk == FMARK_SIZE_BLK ? "the size, block" : "block",
			(unsigned long long)q->f.blk, name, (unsigned long long)q->f.obj,
			r ? "(its shadow is down too, or lacks its replica)" :
			rf.flags & FRAME_SHADOW_DIRTY ? "dirty, not written back" :
			"perhaps dirty (its shadow lacks its list)", note);
	return -EIO;
}

/* A read's range whose owner could not be reached: down_owner's verdict;
 * where the bytes are only there (a loss), the read waits for the owner
 * (wait_down), then the verdict again if it never came. */
static int read_down(struct fs *fs, struct fs_inode *ino, struct fcl_req *q)
{
	int r = down_owner(fs, ino, q, false);
	if (r != -EAGAIN)
		return r;
	r = wait_down(fs, q);
	return q->down ? down_owner(fs, ino, q, true) : r;
}

/* The home of gid could not be reached: its shadow knows whether the
 * home's size of the file is ahead of the backing's (FMARK_SIZE_BLK).
 * -ENOENT (not: the backing's size holds), 0 (it is, and the shadow
 * keeps it, replicas=2: in *size), -EAGAIN (it is, or nobody knows, and
 * the home answered within down_wait: ask it again), or -EIO (the home
 * did not answer; logged with the file's name). */
static int home_down(struct fs *fs, struct fs_inode *ino, uint64_t gid,
		     uint64_t *size)
{
	struct fcl_req q = { .idx = fcl_home(fs->cl, gid),
			     .f = { .obj = gid, .blk = FMARK_SIZE_BLK } };
	int r = down_owner(fs, ino, &q, false);
	if (r == -EAGAIN)   /* only the home knows the size: wait for it */
		r = home_back(fs, q.idx, gid) ? -EAGAIN : down_owner(fs, ino, &q, true);
	if (!r && size)
		*size = q.rf.size;
	return r;
}

/* A GETATTR q to gid's home (q->f.obj) that found it down (q->down):
 * the size from the home's shadow or the backing's (home_down: 0 with
 * q->rf.size, or -ENOENT; q->down stays set), or, the home back within
 * down_wait, q's answer there (HOME_TRIES times at most), else -EIO. */
static int home_getattr_down(struct fs *fs, struct fs_inode *ino,
			     struct fcl_req *q)
{
	for (int tries = 0; q->down; tries++) {
		q->rc = home_down(fs, ino, q->f.obj, &q->rf.size);
		if (q->rc != -EAGAIN)
			break;
		q->rc = -EIO;
		if (tries == HOME_TRIES)
			break;
		fcl_call_many(fs->cl, q, 1);   /* the home is back */
	}
	return q->rc;
}

ssize_t fdcl_read(struct fs *fs, struct fs_inode *ino, uint64_t off,
		  size_t len, char *buf)
{
	uint32_t B = fcl_block(fs->cl);
	uint64_t gid = gid_of(ino), size;
	unsigned n;
	int r = 0;

	if (!gid)
		return -EOPNOTSUPP;
	if (!atomic_load_explicit(&ino->cl_read, memory_order_relaxed))
		atomic_store(&ino->cl_read, true);   /* the kernel keeps these pages */
	/* the size from the home, in the same round as the blocks, unless
	 * the range is within the bound and its owners vouch for it; then
	 * only if one could not */
	struct fcl_req *q = pieces(fs, gid, unit_read(fs, ino, off + len), FT_FILE_READ, off, len,
				   buf, 1, &n);
	if (!q)
		return -ENOMEM;
	q[0].idx = fcl_home(fs->cl, gid);
	q[0].type = FT_FILE_GETATTR;
	q[0].f.obj = gid;
	pthread_mutex_lock(&ino->lk);
	bool plain = ino->cl_plain_reads > 0;
	ino->cl_plain_reads -= plain;
	pthread_mutex_unlock(&ino->lk);
	bool bounded = !plain && n > 1 && bound_mark(ino, off + len, q + 1, n - 1);
	fcl_call_many(fs->cl, q + bounded, n - bounded);
	if (bounded && bound_vouched(q + 1, n - 1, true)) {
		q[0].rc = 0;
		q[0].rf.size = off + len;   /* at least: all that is asked */
	} else if (bounded) {
		pthread_mutex_lock(&ino->lk);
		ino->cl_plain_reads = PLAIN_READS;
		pthread_mutex_unlock(&ino->lk);
		fcl_call_many(fs->cl, q, 1);
	}
	if (!q[0].rc)
		bound_learn(ino, &q[0].rf, false);   /* (vouched: no epoch, nothing) */
	if (q[0].down && !home_getattr_down(fs, ino, &q[0]) && !q[0].down)
		bound_learn(ino, &q[0].rf, false);   /* the home came back */
	if (q[0].rc == -ENOENT) {
		/* never cached: the backing's size holds */
		struct stat st;
		q[0].rc = fstatat(ino->fd, "", &st, AT_EMPTY_PATH) < 0 ? -errno : 0;
		q[0].rf.size = (uint64_t)st.st_size;
	}
	if (q[0].rc < 0) {
		r = q[0].rc;
		free(q);
		return r;
	}
	size = q[0].rf.size;
	len = off >= size ? 0 : len > size - off ? (size_t)(size - off) : len;
	size_t done = 0;
	for (unsigned k = 1; k < n && done < len && r >= 0; k++) {
		r = q[k].rc;
		if (q[k].down)
			r = read_down(fs, ino, &q[k]);
		if (r == -ENOENT) {
			/* not cached: the backing holds the bytes */
			atomic_fetch_add(&fs->st.misses, 1);
			r = backing_read(fs, ino, q[k].f.blk * B + q[k].f.off, q[k].buf,
					 q[k].f.len, NULL);
		} else if (!r) {
			atomic_fetch_add(&fs->st.hits, 1);
		}
		if (r >= 0)
			done += q[k].f.len;
	}
	free(q);
	if (done > len)
		done = len;
	/* a block that failed fails the request, not a short read: the
	 * kernel takes a short READ for the end of the file (it cuts the
	 * size it knows there and zero-fills the rest of the page); a
	 * read of single pages again (the kernel's, after a read-ahead
	 * that failed) still gets those before the failed block */
	return r < 0 ? r : (ssize_t)done;
}

/* One block's range to its owner: without base first; when the owner
 * lacks the block, with the backing's bytes of it; while its cache stays
 * full (is_full), again and again. */
static int write_piece(struct fs *fs, struct fs_inode *ino, uint64_t gid,
		       uint64_t unit, uint64_t blk, uint32_t boff, const char *data,
		       uint32_t n, char *base)
{
	uint32_t B = fcl_block(fs->cl);
	uint32_t owner = fcl_owner(fs->cl, gid, blk, unit);
	struct frame_fop f = { .obj = gid, .blk = blk, .off = boff, .len = n };
	struct frame_fop rf = { 0 };
	uint32_t base_len = 0;
	int r = -EIO;

	for (int round = 0; round < WRITE_ROUNDS; round++) {
		struct iovec iov[2] = { { base, base_len }, { (void *)data, n } };
		struct fcl_req q = { .idx = owner, .type = FT_FILE_WRITE, .f = f,
				     .npl = base_len ? 2 : 1 };
		memcpy(q.pl, base_len ? iov : iov + 1, q.npl * sizeof(*iov));
		fcl_call_many(fs->cl, &q, 1);
		if (q.down && (f.flags & FRAME_FILE_GEN)) {
			/* the node may restart while we wait, its gen tokens
			 * (DRAM) with it: the write goes again without the
			 * backing's bytes, and the owner asks for them anew */
			f.flags = 0;
			f.gen = f.base_len = base_len = 0;
			q.f = f;
			q.npl = 1;
			q.pl[0] = (struct iovec){ (void *)data, n };
		}
		r = wait_down(fs, &q);
		rf = q.rf;
		if (is_full(r, &rf)) {
			if ((r = full_pause(fs, owner)) < 0)
				return r;
			round--;
			continue;
		}
		if (r == -ESTALE) {
			/* no record there: the handle for its write-back (a
			 * full object table there may reclaim the record before
			 * the write comes, as it is idle: then again). A gen
			 * token of the record that went may match the new
			 * one's: the write goes without the backing's bytes,
			 * and the owner asks for them anew */
			f.flags = 0;
			f.gen = f.base_len = base_len = 0;
			r = send_open(fs, ino, owner, false, NULL, NULL);
			if (r < 0)
				return r;
			r = -ESTALE;   /* (not written yet, if the rounds end) */
			continue;
		}
		if (r != -ENOENT)
			return r;
		/* rf.gen was taken before this read of the backing */
		r = backing_read(fs, ino, blk * B, base, B, &base_len);
		if (r < 0)
			return r;
		f.flags = FRAME_FILE_GEN;
		f.gen = rf.gen;
		f.base_len = base_len;   /* 0 past the backing's end */
	}
	return r == -ENOENT || r == -ESTALE ? -EIO : r;
}

ssize_t fdcl_write(struct fs *fs, struct fs_inode *ino, uint64_t off,
		   size_t len, const struct bstore_src *src)
{
	uint32_t B = fcl_block(fs->cl);
	uint64_t gid = gid_of(ino);
	char *data = (char *)src->buf, *tmp = NULL, *base = NULL;
	size_t done = 0;
	unsigned n = 0;
	int r = 0;

	if (!data) {
		/* a stream (the request's pipe): into memory, to send it */
		if (!(tmp = malloc(len ? len : 1)))
			return -ENOMEM;
		r = src->fill(src->ctx, tmp, (uint32_t)len);
		data = tmp;
	}
	uint64_t unit = 0;
	if (!r)
		r = unit_need(fs, ino, off + len, &unit);
	struct fcl_req *q = r ? NULL : pieces(fs, gid, unit, FT_FILE_WRITE,
					      off, len, data, 0, &n);
	if (!r && !q)
		r = -ENOMEM;
	bool bounded = q && bound_mark(ino, off + len, q, n);
	/* past the bound, in one block at the home: the home grows the size
	 * once written (EXTEND), saving the SETSIZE's round trip */
	uint64_t owed = 0;
	if (q && !bounded && n == 1 && q[0].idx == fcl_home(fs->cl, gid)) {
		q[0].f.flags |= FRAME_FILE_EXTEND;
		q[0].f.size = off + len;
		owed = mtime_owed(ino);
	}
	if (q) {
		wrote_mark(ino);
		fcl_call_many(fs->cl, q, n);
	}
	/* within the bound, its owners vouching for it: no SETSIZE, the
	 * size needs none, the home's mtime one a second at most */
	bool vouched = bounded && bound_vouched(q, n, false);
	if (vouched) {
		uint64_t now = clock_wall_ns();
		pthread_mutex_lock(&ino->lk);
		vouched = clock_now_ns() - ino->cl_mtime_at < MTIME_EVERY_NS;
		if (vouched)
			ino->cl_owed_ns = now;
		pthread_mutex_unlock(&ino->lk);
	}
	/* in order: the bytes written are the prefix that succeeded; a
	 * block its owner lacks (or an owner without the file's record)
	 * goes again with what it needs */
	for (unsigned k = 0; k < n && !r; k++) {
		r = q[k].down ? wait_down(fs, &q[k]) : q[k].rc;
		bool again = r == -ENOENT || r == -ESTALE ||
			     (is_full(r, &q[k].rf) && !(r = full_pause(fs, q[k].idx)));
		if (again && (base || (base = malloc(B))))
			r = write_piece(fs, ino, gid, unit, q[k].f.blk, q[k].f.off,
					q[k].pl[0].iov_base, q[k].f.len, base);
		else if (again)
			r = -ENOMEM;
		if (!r)
			done += q[k].f.len;
	}
	bool extended = q && n == 1 && done == len && !q[0].rc &&
			(q[0].f.flags & FRAME_FILE_EXTEND) &&
			(q[0].rf.flags & FRAME_FILE_EXTEND) && q[0].rf.epoch;
	if (extended) {   /* as home_setsize's answer */
		bound_learn(ino, &q[0].rf, false);
		mtime_paid(ino, clock_now_ns(), owed);
	}
	if (done && !(vouched && done == len) && !extended) {
		struct frame_fop f = { .obj = gid, .size = off + done,
				       .flags = FRAME_FILE_EXTEND };
		int e = home_setsize(fs, ino, &f, NULL);
		if (e < 0) {
			r = e;      /* the size did not follow: an error */
			done = 0;
		}
	}
	free(q);
	free(tmp);
	free(base);
	return done ? (ssize_t)done : r;   /* a short write past a failure */
}

int fdcl_truncate(struct fs *fs, struct fs_inode *ino, uint64_t size)
{
	uint64_t gid = gid_of(ino);
	struct frame_fop f = { .obj = gid, .size = size, .off = unit_offer(fs, ino, size) };
	int r;

	if (!gid)
		return -EOPNOTSUPP;
	if (size > fs->max_file_size)
		return -EFBIG;
	wrote_mark(ino);
	/* the home's size first (every node sees it), then the blocks past
	 * it go, then the backing file is cut; the owners learn the epoch a
	 * shrink began (the bounds given before it end) */
	struct frame_fop rf = { 0 };
	r = home_setsize(fs, ino, &f, &rf);
	f.epoch = rf.epoch;
	if (!r)
		r = call_all_waiting(fs, FT_FILE_TRUNC, &f);
	if (r < 0)
		return r;
	pthread_mutex_lock(&ino->lk);
	int fd = inode_datafd(fs, ino);
	r = fd < 0 ? fd : ftruncate(fd, (off_t)size) < 0 ? -errno : 0;
	pthread_mutex_unlock(&ino->lk);
	others_drop(fs, ino);
	return r;
}

int fdcl_append_at(struct fs *fs, struct fs_inode *ino, size_t len, uint64_t max,
		   uint64_t *off)
{
	uint64_t gid = gid_of(ino);
	struct frame_fop f = { .obj = gid, .size = len, .blk = max,
			       .flags = FRAME_FILE_APPEND }, rf = { 0 };

	if (!gid)
		return -EOPNOTSUPP;
	int r = home_setsize(fs, ino, &f, &rf);
	if (!r)
		*off = rf.size;
	return r;
}

int fdcl_punch(struct fs *fs, struct fs_inode *ino, int fd, int mode,
	       uint64_t off, uint64_t len)
{
	uint64_t gid = gid_of(ino), end = off + len;
	int r;

	if (!gid)
		return -EOPNOTSUPP;
	if (end < off || end > fs->max_file_size)
		return -EFBIG;
	wrote_mark(ino);
	/* the backing first, to learn whether it can */
	if (fallocate(fd, mode, (off_t)off, (off_t)len) < 0)
		return -errno;
	if (!(mode & FALLOC_FL_KEEP_SIZE)) {
		/* ZERO_RANGE past the end: every node sees the new size */
		struct frame_fop f = { .obj = gid, .size = end, .flags = FRAME_FILE_EXTEND,
				       .off = unit_offer(fs, ino, end) };
		if ((r = home_setsize(fs, ino, &f, NULL)) < 0)
			return r;
	}
	struct frame_fop f = { .obj = gid, .size = off, .blk = end,
			       .flags = FRAME_FILE_PUNCH };
	if ((r = call_all_waiting(fs, FT_FILE_TRUNC, &f)) < 0)
		return r;
	/* again: a write-back that was under way at an owner wrote what it
	 * had read before; what the owners hold now, nothing older, comes */
	r = fallocate(fd, mode, (off_t)off, (off_t)len) < 0 ? -errno : 0;
	others_drop(fs, ino);
	return r;
}

void fdcl_grown(struct fs *fs, struct fs_inode *ino, uint64_t size)
{
	struct frame_fop f = { .obj = gid_of(ino), .size = size,
			       .flags = FRAME_FILE_EXTEND, .off = unit_offer(fs, ino, size) };

	home_setsize(fs, ino, &f, NULL);
}

void fdcl_flush(struct fs *fs, struct fs_inode *ino)
{
	mtime_pay(fs, ino);
	/* close-barrier-sync: MPI_File_close syncs (the MPI standard), and
	 * ROMIO's makes no fsync; a reader elsewhere that keeps the file
	 * open (its MPI_File_sync no fsync either) reads the bytes written
	 * here once this close returns */
	others_drop(fs, ino);
}

void fdcl_doom(struct fs *fs, struct fs_inode *ino)
{
	uint64_t gid = gid_of(ino);
	struct frame_fop f = { .obj = gid }, rf = { 0 };

	if (!gid)
		return;
	int r = fcl_call(fs->cl, fcl_home(fs->cl, gid), FT_FILE_UNLINK, &f, NULL, 0,
			 &rf, NULL, 0);
	/* open somewhere: dropped at its last close; else now, everywhere */
	if (!r && !(rf.flags & FRAME_FILE_DOOMED)) {
		fcl_call_all(fs->cl, FT_FILE_DROP, &f);
		atomic_fetch_add(&fs->st.dropped_unlinked, 1);
	}
}

int fdcl_fsync(struct fs *fs, struct fs_inode *ino)
{
	uint64_t gid = gid_of(ino);
	struct frame_fop f = { .obj = gid, .flags = FRAME_FILE_SYNC };

	mtime_pay(fs, ino);
	/* sync-barrier-sync: the readers elsewhere drop what they cached */
	others_drop(fs, ino);
	/* and pages this mount read: the writers' own fsync or close had
	 * them dropped already (others_drop there), unless their home could
	 * not be asked. Pages it only wrote are its own bytes, or another
	 * writer's since, who had them dropped: a writer that read nothing
	 * keeps its pages (dropping them costs as much as writing them) */
	if (atomic_exchange(&ino->cl_read, false))
		fs_drop_pages(fs, ino);
	if (!fs->cfg.fsync_backing || !gid)
		return 0;
	/* every owner's blocks in the backing: a restarting one's too */
	return call_all_waiting(fs, FT_FILE_WRITEBACK, &f);
}

int fdcl_lock_target(struct fs *fs, struct fs_inode *ino, uint32_t *home,
		     uint64_t *gid)
{
	uint64_t g = gid_of(ino);
	if (!g)
		return -ENOLCK;
	*gid = g;
	*home = fcl_home(fs->cl, g);
	return 0;
}

bool fdcl_xattr_ours(const struct fs *fs, const char *name)
{
	return fs->cl && !strcmp(name, FCACHE_UNIT_XATTR);
}

int fdcl_layout(struct fs *fs, struct fs_inode *ino, char *buf, size_t len)
{
	uint64_t gid = gid_of(ino);
	uint32_t n = fcl_nodes(fs->cl);
	int k;

	if (!gid)
		return -ENODATA;
	/* (looking does not fix an auto unit not fixed yet) */
	int64_t u = unit_known(fs, ino);
	char us[24];
	if (u == 0)
		snprintf(us, sizeof(us), "unset");
	else
		snprintf(us, sizeof(us), "%llu", (unsigned long long)(u > 0 ? (uint64_t)u :
										unit_auto(fs, ino)));
	k = snprintf(buf, len, "id=%016llx block=%u stripe_unit=%s home=%u nodes=",
		     (unsigned long long)gid, fcl_block(fs->cl), us,
		     fcl_node_id(fs->cl, fcl_home(fs->cl, gid)));
	/* the stripes' owners in turn, from stripe 0 */
	for (uint32_t i = 0; i < n && k > 0 && (size_t)k < len; i++)
		k += snprintf(buf + k, len - (size_t)k, "%s%u", i ? "," : "",
			      fcl_node_id(fs->cl, (fcl_home(fs->cl, gid) + i) % n));
	return k > 0 && (size_t)k < len ? k : -ERANGE;
}
