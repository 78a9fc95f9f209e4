/* ops.c - the FUSE low-level operations of nvcachefs. Namespace and
 * metadata pass through to the backing directory (inodes held by O_PATH
 * fds, lookup counts and forget as in libfuse's passthrough_ll.c); file data
 * goes through the cache (fdata.c). */
#define FUSE_USE_VERSION 314
#include "fs/ops.h"

#include "common/log.h"
#include "fs/killpriv.h"
#include "fs/locks.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

/* How long the kernel may trust an entry or attributes. A cluster mount
 * trusts nothing: other nodes create, rename, truncate and write. */
#define TIMEOUT(fs) ((fs)->cl ? 0.0 : 1.0)

/* An open file description. lk_owner: the fcntl lock owners that set a
 * lock through it (a cluster mount's, under owners_mx); lk_posix: those
 * also seen in a FLUSH, a close's, which names the closing process's
 * owner: POSIX locks, dropped there. The others are open file
 * description locks (F_OFD_SETLK; their owner is the description),
 * dropped at its release, as the kernel does. */
#define HANDLE_LK_OWNERS 4
struct handle {
	int fd;
	int flags;
	uint64_t lk_owner[HANDLE_LK_OWNERS];
	uint8_t lk_n, lk_posix;
};
static pthread_mutex_t owners_mx = PTHREAD_MUTEX_INITIALIZER;

static struct fs *FS(fuse_req_t req) { return fuse_req_userdata(req); }

static struct fs_inode *I(fuse_req_t req, fuse_ino_t n)
{
	if (n == FUSE_ROOT_ID)
		return &FS(req)->root;
	struct fs_inode *ino = (struct fs_inode *)(uintptr_t)n;
	/* in use: spared by the next idle scan (a load first: most requests
	 * find it set and leave the cache line clean) */
	if (!atomic_load_explicit(&ino->touched, memory_order_relaxed))
		atomic_store_explicit(&ino->touched, true, memory_order_relaxed);
	return ino;
}

/* The attributes the kernel gets: the backing's, with the cache's size
 * and mtime (on a cluster mount, the size the file's home keeps: -EIO
 * while the home is down with the only copy of it); a: what the home
 * answered within this request (NULL: ask it). */
static int fix_attr_from(struct fs *fs, struct fs_inode *ino, struct stat *st,
			 const struct fdcl_attr *a)
{
	inode_fix_attr(ino, st);
	return fs->cl ? fdcl_fix_attr(fs, ino, st, a) : 0;
}

static int fix_attr(struct fs *fs, struct fs_inode *ino, struct stat *st)
{
	return fix_attr_from(fs, ino, st, NULL);
}

/* The entry of name in parent as the backing has it (its size the
 * backing file's: a cluster mount's fix_attr gives the file's). */
static int lookup_backing(struct fs *fs, struct fs_inode *parent, const char *name,
			  struct fuse_entry_param *e)
{
	struct fs_inode *ino;
	int fd, r;

	memset(e, 0, sizeof(*e));
	e->attr_timeout = TIMEOUT(fs);
	e->entry_timeout = TIMEOUT(fs);
	int tries = 0;
	do
		fd = openat(parent->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	while (fd < 0 && fdwait_retry(&fs->fdw, &tries));
	if (fd < 0)
		return -inode_open_errno(fs);
	r = fstatat(fd, "", &e->attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
	if (r < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	ino = itab_add(fs, fd, &e->attr);
	if (!ino)
		return -ENOMEM;
	e->ino = ino == &fs->root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)ino;
	return 0;
}

/* Lookups of a name that a rename over it keeps changing under them
 * (fix_attr's -ESTALE) before the kernel is told ESTALE. */
#define LOOKUP_TRIES 4

static int do_lookup(struct fs *fs, struct fs_inode *parent, const char *name,
		     struct fuse_entry_param *e)
{
	int r = -ESTALE;

	for (int k = 0; k < LOOKUP_TRIES && r == -ESTALE; k++) {
		r = lookup_backing(fs, parent, name, e);
		if (r < 0 || e->ino == FUSE_ROOT_ID)
			return r;
		struct fs_inode *ino = (struct fs_inode *)(uintptr_t)e->ino;
		if ((r = fix_attr(fs, ino, &e->attr)) < 0) {
			/* no size to give (its home is down with it): not
			 * the backing's either, which may be stale; or
			 * unlinked since the lookup: looked up again */
			itab_forget(fs, ino, 1);
			if (r == -ESTALE)
				atomic_fetch_add(&fs->st.lookups_stale, 1);
		}
	}
	return r;
}

/* Before the backing creates an entry for the request's caller: this
 * thread takes the caller's umask. With POSIX ACLs the kernel sends the
 * mode unmasked (DONT_MASK) and the umask beside it, and whether the
 * umask applies depends on the parent's default ACL, which only the
 * backing knows; with the caller's umask, its create does exactly that.
 * umask is per process, so each worker thread first gets its own. If it
 * cannot, the caller's umask is applied to the mode here (a default ACL
 * then loses to it, the safer way round): returns the mode to use. */
static mode_t take_caller_umask(fuse_req_t req, mode_t mode)
{
	static __thread int own_fs; /* 0 unknown, 1 own umask, -1 cannot */
	mode_t um = fuse_req_ctx(req)->umask & 0777;

	if (own_fs == 0) {
		own_fs = unshare(CLONE_FS) == 0 ? 1 : -1;
		if (own_fs < 0)
			log_warn("unshare(CLONE_FS): %s; the umask of new files "
				 "wins over default ACLs", strerror(errno));
	}
	if (own_fs < 0)
		return mode & ~um;
	umask(um);
	return mode;
}

/* Created by the request's caller, not by the daemon (root). */
static void chown_to_caller(fuse_req_t req, int dirfd, const char *name)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	struct stat d;

	if (geteuid() == 0 && (c->uid || c->gid)) {
		/* in a set-gid directory the entry keeps the directory's group,
		 * which the backing gave it (project directories rely on it) */
		gid_t g = fstat(dirfd, &d) == 0 && (d.st_mode & S_ISGID) ? (gid_t)-1 : c->gid;
		if (fchownat(dirfd, name, c->uid, g, AT_SYMLINK_NOFOLLOW) < 0)
			log_debug("chown of new %s: %s", name, strerror(errno));
	}
}

/* The inode behind parent/name, if cached, with a ref (before unlink/rename). */
static struct fs_inode *peek(struct fs *fs, struct fs_inode *parent,
			     const char *name)
{
	struct stat st;

	if (fstatat(parent->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISREG(st.st_mode))
		return NULL;
	return itab_find(fs, st.st_dev, st.st_ino);
}

/* After an unlink or rename-over: a regular file with no link left drops its
 * dirty data instead of writing it back (DESIGN: deleted before write-back). */
static void maybe_doom(struct fs *fs, struct fs_inode *ino)
{
	struct stat st;

	if (!ino || ino == &fs->root)
		return;
	if (fstatat(ino->fd, "", &st, AT_EMPTY_PATH) == 0 && st.st_nlink == 0)
		fdata_doom(fs, ino);
	itab_unref(fs, ino);
}

/* ---- operations ---- */

/* libfuse splices a request into a pipe (and a write's data can then go
 * from the pipe straight into NVRAM, op_write_buf) only if each worker's
 * pipe grows to its whole buffer, 1 MiB + 4 KiB, which is over the default
 * fs.pipe-max-size for a process without CAP_SYS_RESOURCE. Otherwise it
 * reads every request into a buffer, one copy more per written byte. */
static bool splice_possible(void)
{
	size_t want = 256 * (size_t)sysconf(_SC_PAGESIZE) + 4096;
	int p[2];
	bool ok;

	if (pipe2(p, O_CLOEXEC) != 0)
		return false;
	ok = fcntl(p[0], F_SETPIPE_SZ, (int)want) >= (int)want;
	close(p[0]);
	close(p[1]);
	if (ok)
		log_info("writes: spliced, their data read from the request's "
			 "pipe straight into NVRAM (one copy)");
	else
		log_info("writes: read into a buffer, then copied to NVRAM: a "
			 "pipe of %zu bytes is over fs.pipe-max-size; "
			 "`sysctl fs.pipe-max-size=2097152` saves that copy", want);
	return ok;
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct fs *fs = userdata;

	conn->max_write = 1u << 20;
	conn->max_readahead = 1u << 20;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	if (conn->capable & FUSE_CAP_SPLICE_WRITE)
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	if (!splice_possible())
		conn->want &= ~FUSE_CAP_SPLICE_READ;
	if (fs->cfg.writeback_cache && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	else
		conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	/* O_TRUNC reaches open(), so a truncating open never prefetches */
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	/* Every change to a file's data goes through this mount (keep_cache at
	 * open says the same), so the kernel's page cache is never stale.
	 * libfuse turns AUTO_INVAL_DATA on by default: the kernel then drops a
	 * file's cached pages whenever a getattr shows a new mtime, which is
	 * after every write here, and a read right after a write (MPI-IO's
	 * write phase, then its read phase) would come back through FUSE. */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	/* fcntl and flock locks: a cluster mount keeps them at each file's
	 * home node, so they hold across nodes (op_setlk); one node leaves
	 * them to the kernel, which keeps them itself */
	const unsigned lk_caps = FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS;
	if (fs->locks && (conn->capable & lk_caps) == lk_caps)
		conn->want |= lk_caps;
	else
		conn->want &= ~lk_caps;
	/* POSIX ACLs: the kernel enforces the backing's ACLs (read through
	 * getxattr) on top of the mode bits, and leaves the umask to us
	 * (take_caller_umask) so that a default ACL can replace it */
	if (!fs->cfg.no_xattr && (conn->capable & FUSE_CAP_POSIX_ACL) &&
	    (conn->capable & FUSE_CAP_DONT_MASK))
		conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
	/* without it, a getxattr round trip before every write (killpriv.c) */
	if (!fs->cfg.no_xattr && killpriv_kernel_has(conn->proto_minor)) {
		log_info("asking the kernel for FUSE_HANDLE_KILLPRIV_V2: set-id bits "
			 "and capabilities are dropped here, with no getxattr per write");
		killpriv_arm(); /* last: the INIT reply is the next writev */
	}
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	int r = do_lookup(FS(req), I(req, parent), name, &e);

	if (r < 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_entry(req, &e);
}

static void op_forget(fuse_req_t req, fuse_ino_t n, uint64_t nlookup)
{
	/* not I(): that would mark it used */
	itab_forget(FS(req), (struct fs_inode *)(uintptr_t)n, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *f)
{
	for (size_t i = 0; i < count; i++)
		itab_forget(FS(req), (struct fs_inode *)(uintptr_t)f[i].ino, f[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi)
{
	struct fs_inode *ino = I(req, n);
	struct stat st;
	(void)fi;

	if (fstatat(ino->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		return (void)fuse_reply_err(req, errno);
	int r = fix_attr(FS(req), ino, &st);
	if (r < 0)
		return (void)fuse_reply_err(req, -r);
	fuse_reply_attr(req, &st, TIMEOUT(FS(req)));
}

static void op_setattr(fuse_req_t req, fuse_ino_t n, struct stat *attr,
		       int valid, struct fuse_file_info *fi)
{
	struct fs *fs = FS(req);
	struct fs_inode *ino = I(req, n);
	char proc[64];
	int r = 0;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", ino->fd);
	if (valid & FUSE_SET_ATTR_MODE) {
		/* under the lock killpriv's look-then-chmod takes */
		pthread_mutex_lock(&ino->lk);
		r = fi ? fchmod(((struct handle *)(uintptr_t)fi->fh)->fd, attr->st_mode)
		       : chmod(proc, attr->st_mode);
		pthread_mutex_unlock(&ino->lk);
		killpriv_changed(ino);
		if (r < 0)
			goto err;
	}
	if (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		uid_t u = valid & FUSE_SET_ATTR_UID ? attr->st_uid : (uid_t)-1;
		gid_t g = valid & FUSE_SET_ATTR_GID ? attr->st_gid : (gid_t)-1;
		/* the backing's chown is root's, which keeps a set-gid the
		 * caller's would drop (not group-executable, caller not in
		 * the old group): that part of the chown rule is ours */
		r = killpriv_on_chown(req, ino);
		if (r < 0) {
			errno = -r;
			goto err;
		}
		r = fchownat(ino->fd, "", u, g, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
		killpriv_changed(ino);
		if (r < 0)
			goto err;
	}
	/* With FUSE_HANDLE_KILLPRIV_V2 the kernel sends a chown that changes
	 * no id (chown(f, -1, -1)) as an empty setattr, and leaves what Linux
	 * drops on a chown to us. An empty setattr also comes before a write
	 * the kernel saw privileges to drop on: for a writer without
	 * CAP_FSETID the chown rule drops the same; for one with it, set-uid
	 * goes where a write alone would keep it (a set-uid file with file
	 * capabilities, written by root: the rarer case). */
	if ((valid & ~(FUSE_SET_ATTR_KILL_SUID | FUSE_SET_ATTR_CTIME)) == 0) {
		r = killpriv_on_chown(req, ino);
		if (r < 0) {
			errno = -r;
			goto err;
		}
	}
	if (valid & FUSE_SET_ATTR_SIZE) {
		/* the kernel says whether the caller lacks CAP_FSETID */
		r = killpriv_on_modify(req, ino, valid & FUSE_SET_ATTR_KILL_SUID
						? KP_NO_FSETID : KP_FSETID);
		if (r == 0)
			r = fdata_truncate(fs, ino, (uint64_t)attr->st_size);
		if (r < 0) {
			errno = -r;
			goto err;
		}
	}
	if (valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
		struct timespec tv[2];
		tv[0].tv_sec = tv[1].tv_sec = 0;
		tv[0].tv_nsec = tv[1].tv_nsec = UTIME_OMIT;
		if (valid & FUSE_SET_ATTR_ATIME_NOW)
			tv[0].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_ATIME)
			tv[0] = attr->st_atim;
		if (valid & FUSE_SET_ATTR_MTIME_NOW)
			tv[1].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_MTIME)
			tv[1] = attr->st_mtim;
		r = inode_utimens(ino, fi ? ((struct handle *)(uintptr_t)fi->fh)->fd : -1,
				  proc, tv);
		if (r == 0 && fs->cl && ino != &fs->root)   /* no record: 0 */
			r = fdcl_set_mtime(fs, ino, &tv[1]);
		if (r < 0) {
			errno = -r;
			goto err;
		}
	}
	return op_getattr(req, n, fi);
err:
	fuse_reply_err(req, errno);
}

static void op_readlink(fuse_req_t req, fuse_ino_t n)
{
	char buf[PATH_MAX + 1];
	ssize_t r = readlinkat(I(req, n)->fd, "", buf, sizeof(buf));

	if (r < 0)
		return (void)fuse_reply_err(req, errno);
	if (r == (ssize_t)sizeof(buf))
		return (void)fuse_reply_err(req, ENAMETOOLONG);
	buf[r] = 0;
	fuse_reply_readlink(req, buf);
}

static void make_node(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, dev_t rdev, const char *link)
{
	struct fs_inode *dir = I(req, parent);
	struct fuse_entry_param e;
	int r;

	mode = take_caller_umask(req, mode);
	if (link)
		r = symlinkat(link, dir->fd, name);
	else if (S_ISDIR(mode))
		r = mkdirat(dir->fd, name, mode);
	else
		r = mknodat(dir->fd, name, mode, rdev);
	if (r < 0)
		return (void)fuse_reply_err(req, errno);
	chown_to_caller(req, dir->fd, name);
	r = do_lookup(FS(req), dir, name, &e);
	if (r < 0)
		return (void)fuse_reply_err(req, -r);
	fuse_reply_entry(req, &e);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	make_node(req, parent, name, mode, rdev, NULL);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	make_node(req, parent, name, S_IFDIR | mode, 0, NULL);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	make_node(req, parent, name, S_IFLNK, 0, link);
}

static void op_link(fuse_req_t req, fuse_ino_t n, fuse_ino_t parent,
		    const char *name)
{
	struct fs_inode *ino = I(req, n);
	struct fuse_entry_param e;
	int r;

	if (linkat(ino->fd, "", I(req, parent)->fd, name, AT_EMPTY_PATH) < 0)
		return (void)fuse_reply_err(req, errno);
	r = do_lookup(FS(req), I(req, parent), name, &e);
	if (r < 0)
		return (void)fuse_reply_err(req, -r);
	fuse_reply_entry(req, &e);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = FS(req);
	struct fs_inode *victim = peek(fs, I(req, parent), name);

	if (unlinkat(I(req, parent)->fd, name, 0) < 0) {
		int e = errno;
		if (victim)
			itab_unref(fs, victim);
		return (void)fuse_reply_err(req, e);
	}
	maybe_doom(fs, victim);
	fuse_reply_err(req, 0);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, unlinkat(I(req, parent)->fd, name, AT_REMOVEDIR) < 0 ? errno : 0);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct fs *fs = FS(req);
	struct fs_inode *victim = NULL;

	if (!(flags & RENAME_EXCHANGE))
		victim = peek(fs, I(req, newparent), newname);
	if (renameat2(I(req, parent)->fd, name, I(req, newparent)->fd, newname,
		      flags) < 0) {
		int e = errno;
		if (victim)
			itab_unref(fs, victim);
		return (void)fuse_reply_err(req, e);
	}
	maybe_doom(fs, victim);
	fuse_reply_err(req, 0);
}

/* ---- directories ---- */

struct dirp {
	DIR *dp;
	struct dirent *entry;
	off_t offset;
};

static void op_opendir(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi)
{
	struct dirp *d = calloc(1, sizeof(*d));
	int fd;

	if (!d)
		return (void)fuse_reply_err(req, ENOMEM);
	int tries = 0;
	do
		fd = openat(I(req, n)->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	while (fd < 0 && fdwait_retry(&FS(req)->fdw, &tries));
	if (fd < 0 || !(d->dp = fdopendir(fd))) {
		int e = fd < 0 ? inode_open_errno(FS(req)) : errno;
		if (fd >= 0)
			close(fd);
		free(d);
		return (void)fuse_reply_err(req, e);
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	fi->cache_readdir = 0;
	fuse_reply_open(req, fi);
}

static void op_readdir(fuse_req_t req, fuse_ino_t n, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct dirp *d = (struct dirp *)(uintptr_t)fi->fh;
	char *buf = calloc(1, size), *p = buf;
	size_t rem = size;
	(void)n;

	if (!buf)
		return (void)fuse_reply_err(req, ENOMEM);
	if (off != d->offset) {
		seekdir(d->dp, off);
		d->entry = NULL;
		d->offset = off;
	}
	for (;;) {
		if (!d->entry) {
			errno = 0;
			d->entry = readdir(d->dp);
			if (!d->entry) {
				if (errno && rem == size) {
					int e = errno;
					free(buf);
					return (void)fuse_reply_err(req, e);
				}
				break;
			}
		}
		struct stat st = { .st_ino = d->entry->d_ino,
				   .st_mode = (mode_t)d->entry->d_type << 12 };
		off_t next = d->entry->d_off;
		size_t es = fuse_add_direntry(req, p, rem, d->entry->d_name, &st, next);
		if (es > rem)
			break;
		p += es;
		rem -= es;
		d->entry = NULL;
		d->offset = next;
	}
	fuse_reply_buf(req, buf, size - rem);
	free(buf);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi)
{
	struct dirp *d = (struct dirp *)(uintptr_t)fi->fh;
	(void)n;

	closedir(d->dp);
	free(d);
	fuse_reply_err(req, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t n, int datasync,
			struct fuse_file_info *fi)
{
	int fd = dirfd(((struct dirp *)(uintptr_t)fi->fh)->dp);
	int r = datasync ? fdatasync(fd) : fsync(fd);
	(void)n;

	fuse_reply_err(req, r < 0 ? errno : 0);
}

/* ---- files ---- */

/* A new handle on ino: the cache state, truncation, open counts, prefetch. */
static int open_common(fuse_req_t req, struct fs_inode *ino, int fd, int flags,
		       bool created, struct fuse_file_info *fi, struct fdcl_attr *a)
{
	struct fs *fs = FS(req);
	struct handle *h = calloc(1, sizeof(*h));
	bool trunc = flags & O_TRUNC;
	int r;

	if (!h)
		return -ENOMEM;
	r = fdata_inode_init(fs, ino);
	/* a file this open made is empty, and on a cluster mount new to
	 * every node: its handle, so its id, is new (fdcl.c ident_get) */
	if (created && fs->cl)
		trunc = false;
	if (r == 0 && trunc)
		r = killpriv_on_modify(req, ino, KP_ASK);
	if (r == 0 && trunc)
		r = fdata_truncate(fs, ino, 0);
	if (r < 0) {
		free(h);
		return r;
	}
	if (fs->cl && (r = fdcl_open(fs, ino, a)) < 0) {
		free(h);
		return r;
	}
	h->fd = fd;
	h->flags = flags;
	if (!fs->cl && fdata_open(fs, ino, flags, created))
		engine_prefetch(fs, ino);
	fi->fh = (uint64_t)(uintptr_t)h;
	/* every change goes through this mount; on a cluster mount other
	 * nodes write too: the kernel drops the file's pages at open
	 * (close-to-open) */
	fi->keep_cache = !fs->cl;
	/* O_APPEND on a cluster mount: the mount places each write at the
	 * end the home keeps (op_write_buf), as the kernel, which knows no
	 * other node's writes, cannot; its pages would hold the bytes where
	 * it thought they went, so it keeps none for this handle (a shared
	 * mmap of it fails: ENODEV) */
	fi->direct_io = fs->cl && (flags & O_APPEND);
	return 0;
}

static void create_file(fuse_req_t req, fuse_ino_t parent, const char *name,
			mode_t mode, struct fuse_file_info *fi)
{
	struct fs *fs = FS(req);
	struct fs_inode *dir = I(req, parent);
	struct fuse_entry_param e;
	int fd, r, flags = (fi->flags | O_CREAT) & ~(O_NOFOLLOW | O_TRUNC);
	bool created = false;

	mode = take_caller_umask(req, mode);
	int tries = 0, races = 0;
	for (;;) {
		/* O_EXCL first: whether this open made the file (then it is
		 * the caller's, and new to every node). There (another node
		 * made it): opened without O_CREAT, and if gone meanwhile,
		 * made again; a name that stays there but cannot be opened
		 * so (a dangling symlink): opened as the caller asked. */
		fd = openat(dir->fd, name, flags | O_EXCL | O_CLOEXEC, mode);
		created = fd >= 0;
		if (fd < 0 && errno == EEXIST && !(flags & O_EXCL)) {
			fd = openat(dir->fd, name, (flags & ~O_CREAT) | O_CLOEXEC);
			if (fd < 0 && errno == ENOENT && ++races < 3)
				continue;
			if (fd < 0 && errno == ENOENT)
				fd = openat(dir->fd, name, flags | O_CLOEXEC, mode);
		}
		if (fd >= 0 || !fdwait_retry(&fs->fdw, &tries))
			break;
	}
	if (fd < 0)
		return (void)fuse_reply_err(req, inode_open_errno(fs));
	if (created)
		chown_to_caller(req, dir->fd, name);
	/* the file's size and time: fix_attr below, once it is open */
	r = lookup_backing(fs, dir, name, &e);
	if (r < 0) {
		close(fd);
		return (void)fuse_reply_err(req, -r);
	}
	struct fs_inode *ino = (struct fs_inode *)(uintptr_t)e.ino;
	struct fdcl_attr a = { 0 };
	r = open_common(req, ino, fd, fi->flags, created, fi, &a);
	if (r < 0) {
		close(fd);
		itab_forget(fs, ino, 1);
		return (void)fuse_reply_err(req, -r);
	}
	if (fix_attr_from(fs, ino, &e.attr, &a) < 0)
		e.attr_timeout = 0;
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		/* the caller went away */
	}
}

static void open_file(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi)
{
	struct fs_inode *ino = I(req, n);
	char proc[64];
	int fd, r;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", ino->fd);
	/* the kernel does O_APPEND positioning itself; truncation is ours */
	int tries = 0;
	do
		fd = open(proc, (fi->flags & ~(O_NOFOLLOW | O_TRUNC | O_CREAT | O_EXCL)) | O_CLOEXEC);
	while (fd < 0 && fdwait_retry(&FS(req)->fdw, &tries));
	if (fd < 0)
		return (void)fuse_reply_err(req, inode_open_errno(FS(req)));
	r = open_common(req, ino, fd, fi->flags, false, fi, NULL);
	if (r < 0) {
		close(fd);
		return (void)fuse_reply_err(req, -r);
	}
	fuse_reply_open(req, fi);
}

/* Opens and creates may wait for room (a full object table at the
 * file's home): fs_serving notes the request for fs_caller_killed. */
static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	fs_serving(req);
	create_file(req, parent, name, mode, fi);
	fs_serving(NULL);
}

static void op_open(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi)
{
	fs_serving(req);
	open_file(req, n, fi);
	fs_serving(NULL);
}

static void op_release(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi)
{
	struct fs *fs = FS(req);
	struct fs_inode *ino = I(req, n);
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	uint32_t home;
	uint64_t gid;

	/* the open file's flock lock goes with it, and its OFD locks */
	if (fs->locks && fi->flock_release &&
	    fdcl_lock_target(fs, ino, &home, &gid) == 0)
		fs_locks_release(fs->locks, home, gid, true, fi->lock_owner);
	if (fs->locks && h->lk_n && fdcl_lock_target(fs, ino, &home, &gid) == 0)
		for (unsigned k = 0; k < h->lk_n; k++)
			if (!(h->lk_posix & (1u << k)))
				fs_locks_release(fs->locks, home, gid, false, h->lk_owner[k]);
	close(h->fd);
	fdata_release(fs, ino, h->flags);
	free(h);
	fuse_reply_err(req, 0);
}

static void op_flush(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi)
{
	struct fs *fs = FS(req);
	struct fs_inode *ino = I(req, n);
	uint32_t home;
	uint64_t gid;

	/* a close drops the closer's fcntl locks on the file (POSIX); the
	 * kernel keeps none of a cluster mount's, so it is said here */
	if (fs->locks && atomic_load(&ino->locked) &&
	    fdcl_lock_target(fs, ino, &home, &gid) == 0)
		fs_locks_release(fs->locks, home, gid, false, fi->lock_owner);
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	if (fs->locks && h) {
		pthread_mutex_lock(&owners_mx);
		for (unsigned k = 0; k < h->lk_n; k++)
			if (h->lk_owner[k] == fi->lock_owner)
				h->lk_posix |= (uint8_t)(1u << k);
		pthread_mutex_unlock(&owners_mx);
	}
	if (fs->cl)
		fdcl_flush(fs, ino);
	fuse_reply_err(req, 0);
}

/* ---- fcntl and flock locks of a cluster mount (fs/locks.h; op_init
 * asks the kernel for them only then) ---- */

/* The lock's caller was interrupted, or the mount is leaving: a wait
 * for the holder or for a down home ends (EINTR). */
static bool lock_interrupted(void *req)
{
	return fuse_req_interrupted(req) || fs_leaving(FS(req));
}

/* A lock is held: what other nodes wrote under it before must be read,
 * not this kernel's older pages of the file (ROMIO's data sieving reads
 * the region it locked, then writes it back whole). As NFS does at a
 * lock, the file's page cache goes. */
static void lock_taken(fuse_req_t req, fuse_ino_t n)
{
	struct fs *fs = FS(req);
	if (fs->se)
		fuse_lowlevel_notify_inval_inode(fs->se, n, 0, 0);
}

static int lock_target(fuse_req_t req, fuse_ino_t n, uint32_t *home,
		       uint64_t *gid)
{
	struct fs *fs = FS(req);
	return fs->locks ? fdcl_lock_target(fs, I(req, n), home, gid) : -ENOSYS;
}

static void op_getlk(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi,
		     struct flock *lk)
{
	uint32_t home;
	uint64_t gid;
	int r = lock_target(req, n, &home, &gid);
	if (!r)
		r = fs_locks_get(FS(req)->locks, home, gid, fi->lock_owner, lk);
	if (r)
		fuse_reply_err(req, -r);
	else
		fuse_reply_lock(req, lk);
}

/* One lock request (fcntl or flock), done and answered. */
struct lock_job {
	fuse_req_t req;
	fuse_ino_t n;
	uint32_t home, pid;
	uint64_t gid, owner;
	bool flock;
	int op;                /* flock: LOCK_SH, LOCK_EX, LOCK_UN | LOCK_NB */
	struct flock lk;       /* fcntl */
};

static int lock_do(struct lock_job *j, bool wait)
{
	struct fs *fs = FS(j->req);
	int r = j->flock ?
		fs_locks_flock(fs->locks, j->home, j->gid, j->owner, j->pid,
			       wait ? j->op : j->op | LOCK_NB, lock_interrupted,
			       j->req) :
		fs_locks_set(fs->locks, j->home, j->gid, j->owner, j->pid,
			     &j->lk, wait, lock_interrupted, j->req);
	if (r == -EWOULDBLOCK && !j->flock)
		r = -EAGAIN;
	return r;
}

static void lock_reply(struct lock_job *j, int r)
{
	bool unlock = j->flock ? (j->op & ~LOCK_NB) == LOCK_UN :
				 j->lk.l_type == F_UNLCK;
	if (!r && !unlock)
		lock_taken(j->req, j->n);
	fuse_reply_err(j->req, -r);
}

static void *lock_wait_main(void *arg)
{
	struct lock_job *j = arg;
	struct fs_locks *l = FS(j->req)->locks;
	lock_reply(j, lock_do(j, true));
	free(j);
	fs_locks_waiter_leave(l);
	return NULL;
}

/* A lock that may wait (F_SETLKW, flock without LOCK_NB) waits in a
 * thread of its own, never in a FUSE worker: libfuse runs at most 10,
 * and that many waiters would leave none to serve the unlock they wait
 * for. It is tried without waiting first, so most take no thread. */
static void lock_request(struct lock_job *j, bool wait)
{
	int r = lock_do(j, false);
	if ((r == -EAGAIN || r == -EWOULDBLOCK) && wait) {
		struct lock_job *copy = malloc(sizeof(*copy));
		pthread_attr_t at;
		pthread_t t;
		if (copy) {
			*copy = *j;
			pthread_attr_init(&at);
			pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
			fs_locks_waiter_enter(FS(j->req)->locks);
			int e = pthread_create(&t, &at, lock_wait_main, copy);
			pthread_attr_destroy(&at);
			if (!e)
				return;
			fs_locks_waiter_leave(FS(j->req)->locks);
			free(copy);
		}
		r = lock_do(j, true);   /* no thread: wait here */
	}
	lock_reply(j, r);
}

/* owner sets an fcntl lock through h (one more than HANDLE_LK_OWNERS
 * owners is not kept: such a description's OFD locks stay until the
 * mount goes, as if its process kept it open) */
static void handle_lock_owner(struct handle *h, uint64_t owner)
{
	if (!h)
		return;
	pthread_mutex_lock(&owners_mx);
	unsigned k = 0;
	while (k < h->lk_n && h->lk_owner[k] != owner)
		k++;
	if (k == h->lk_n && k < HANDLE_LK_OWNERS)
		h->lk_owner[h->lk_n++] = owner;
	pthread_mutex_unlock(&owners_mx);
}

static void op_setlk(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi,
		     struct flock *lk, int sleep)
{
	struct lock_job j = { .req = req, .n = n, .owner = fi->lock_owner,
			      .pid = (uint32_t)lk->l_pid, .lk = *lk };
	int r = lock_target(req, n, &j.home, &j.gid);
	if (r)
		return (void)fuse_reply_err(req, -r);
	if (lk->l_type != F_UNLCK) {
		atomic_store(&I(req, n)->locked, true);
		handle_lock_owner((struct handle *)(uintptr_t)fi->fh, fi->lock_owner);
	}
	lock_request(&j, sleep && lk->l_type != F_UNLCK);
}

static void op_flock(fuse_req_t req, fuse_ino_t n, struct fuse_file_info *fi,
		     int op)
{
	struct lock_job j = { .req = req, .n = n, .owner = fi->lock_owner,
			      .pid = (uint32_t)fuse_req_ctx(req)->pid,
			      .flock = true, .op = op & ~LOCK_NB };
	int r = lock_target(req, n, &j.home, &j.gid);
	if (r)
		return (void)fuse_reply_err(req, -r);
	lock_request(&j, !(op & LOCK_NB) && j.op != LOCK_UN);
}

static void op_fsync(fuse_req_t req, fuse_ino_t n, int datasync,
		     struct fuse_file_info *fi)
{
	struct fs *fs = FS(req);
	struct fs_inode *ino = I(req, n);
	int r = 0;
	(void)datasync;
	(void)fi;

	/* every acknowledged write is already persistent in NVRAM */
	if (fs->cl) {
		r = fdcl_fsync(fs, ino);
	} else if (fs->cfg.fsync_backing) {
		r = engine_writeback_inode(fs, ino);
	}
	fuse_reply_err(req, r < 0 ? -r : 0);
}

/* One READ or WRITE answered with bytes: for the rates of nvcachectl. */
static void count_io(atomic_uint_fast64_t *ops, atomic_uint_fast64_t *bytes,
		     uint64_t n)
{
	atomic_fetch_add_explicit(ops, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(bytes, n, memory_order_relaxed);
}

static void op_read(fuse_req_t req, fuse_ino_t n, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fs *fs = FS(req);
	char *buf;
	ssize_t r;
	(void)fi;

	/* cached data goes to the kernel straight from NVRAM (no copy in
	 * between), unless emulated NVRAM read costs must be charged */
	if (!fs->cfg.lat_ns && !fs->cfg.bw_bps) {
		int maxiov = (int)(2 * (size / fs->cfg.block_size + 2));
		struct iovec *iov = malloc((size_t)maxiov * sizeof(*iov));
		struct fdata_pin *pins = malloc((size_t)maxiov * sizeof(*pins));
		int npins = 0, k = -ENOMEM;
		size_t bytes;

		if (iov && pins)
			k = fdata_read_zc(fs, I(req, n), (uint64_t)off, size, iov,
					  maxiov, pins, &npins, &bytes);
		if (k >= 0) {
			if (k == 0)
				fuse_reply_buf(req, NULL, 0);
			else
				fuse_reply_iov(req, iov, k);
			fdata_read_done(pins, npins);
			count_io(&fs->st.read_ops, &fs->st.read_bytes, k ? bytes : 0);
		}
		free(iov);
		free(pins);
		if (k >= 0)
			return;
	}
	buf = malloc(size ? size : 1);
	if (!buf)
		return (void)fuse_reply_err(req, ENOMEM);
	r = fdata_read(fs, I(req, n), (uint64_t)off, size, buf);
	if (r < 0) {
		fuse_reply_err(req, (int)-r);
	} else {
		fuse_reply_buf(req, buf, (size_t)r);
		count_io(&fs->st.read_ops, &fs->st.read_bytes, (uint64_t)r);
	}
	free(buf);
}

/* Copy the next len bytes of a request's data (its pipe) into dst. */
static int fill_from_req(void *ctx, void *dst, uint32_t len)
{
	struct fuse_bufvec to = FUSE_BUFVEC_INIT(len);
	ssize_t got;

	to.buf[0].mem = dst;
	got = fuse_buf_copy(&to, ctx, FUSE_BUF_NO_SPLICE);
	if (got < 0)
		return (int)got;
	return (size_t)got == len ? 0 : -EIO;
}

/* Writes come as a buffer vector so that, with FUSE_CAP_SPLICE_READ, a
 * large write's data is still in the pipe libfuse spliced the request
 * into, and is read from there straight into its NVRAM block: one copy
 * (pipe -> NVRAM) in place of two (/dev/fuse -> buffer -> NVRAM). */
static void op_write_buf(fuse_req_t req, fuse_ino_t n, struct fuse_bufvec *in,
			 off_t off, struct fuse_file_info *fi)
{
	struct fs *fs = FS(req);
	struct fs_inode *ino = I(req, n);
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	size_t size = fuse_buf_size(in);
	const struct fuse_buf *b = &in->buf[in->idx];
	uint64_t max = fs->max_file_size, pos = (uint64_t)off;
	/* a page-cache write-back (writepage) is not the writer's own call */
	bool append = fs->cl && !fi->writepage && h && (h->flags & O_APPEND);

	/* Past the backing's largest file: EFBIG, or a short write up to
	 * it, as the backing itself answers (acknowledged, it could never
	 * be written back) */
	if (!append && pos >= max)
		return (void)fuse_reply_err(req, EFBIG);
	if (!append && size > max - pos)
		size = (size_t)(max - pos);
	fs_serving(fi->writepage ? NULL : req);
	ssize_t r = fi->writepage ? 0 : killpriv_on_modify(req, ino, KP_ASK);

	/* an append's place: the end every node sees (not the kernel's
	 * offset, the end it last saw), taken for it alone */
	if (r == 0 && append)
		r = fdcl_append_at(fs, ino, size, max, &pos);
	if (r == 0 && in->count - in->idx == 1 && !(b->flags & FUSE_BUF_IS_FD))
		r = fdata_write(fs, ino, pos, size, (const char *)b->mem + in->off);
	else if (r == 0) {
		r = fdata_write_src(fs, ino, pos, size,
				    &(struct bstore_src){ .fill = fill_from_req,
							  .ctx = in });
		if (r > 0)
			atomic_fetch_add(&fs->st.spliced, (uint64_t)r);
	}
	fs_serving(NULL);
	/* this node's other handles may hold the page the bytes went to */
	if (append && r > 0)
		fuse_lowlevel_notify_inval_inode(fs->se, n, (off_t)pos, r);
	if (r < 0) {
		fuse_reply_err(req, (int)-r);
	} else {
		fuse_reply_write(req, (size_t)r);
		count_io(&fs->st.write_ops, &fs->st.write_bytes, (uint64_t)r);
	}
}

static void op_statfs(fuse_req_t req, fuse_ino_t n)
{
	struct statvfs sv;
	(void)n;

	if (fstatvfs(FS(req)->backing_fd, &sv) < 0)
		return (void)fuse_reply_err(req, errno);
	fuse_reply_statfs(req, &sv);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t n, int mode, off_t off,
			 off_t len, struct fuse_file_info *fi)
{
	struct fs *fs = FS(req);
	struct fs_inode *ino = I(req, n);
	struct handle *h = (struct handle *)(uintptr_t)fi->fh;
	int r = 0;

	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
		return (void)fuse_reply_err(req, EOPNOTSUPP);
	r = killpriv_on_modify(req, ino, KP_ASK);
	if (r < 0)
		return (void)fuse_reply_err(req, -r);
	if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
		/* the backing file gets the call (its holes are the user's)
		 * and the cache follows, atomically for other I/O */
		r = fdata_punch(fs, ino, h->fd, mode, (uint64_t)off,
				(uint64_t)len);
		return (void)fuse_reply_err(req, -r);
	}
	if (fallocate(h->fd, mode, off, len) < 0)
		return (void)fuse_reply_err(req, errno);
	if (!(mode & FALLOC_FL_KEEP_SIZE))
		fdata_grown(fs, ino, (uint64_t)(off + len));
	fuse_reply_err(req, 0);
}

/* ---- xattrs: through /proc/self/fd of the O_PATH fd ---- */

static void op_setxattr(fuse_req_t req, fuse_ino_t n, const char *name,
			const char *value, size_t size, int flags)
{
	char proc[64];

	if (FS(req)->cfg.no_xattr)
		return (void)fuse_reply_err(req, ENOSYS);
	if (fdcl_xattr_ours(FS(req), name))
		return (void)fuse_reply_err(req, EPERM);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", I(req, n)->fd);
	/* Capabilities set on a file with data still to write back would be
	 * dropped again by that write-back (Linux drops them on any write,
	 * root's too): cp, then setcap, would lose them a second later. So
	 * the file is written back first. */
	if (!strcmp(name, "security.capability")) {
		int r = engine_writeback_inode(FS(req), I(req, n));
		if (r < 0)
			return (void)fuse_reply_err(req, -r);
	}
	int e = setxattr(proc, name, value, size, flags) < 0 ? errno : 0;
	killpriv_changed(I(req, n)); /* after: what was learnt before is stale */
	fuse_reply_err(req, e);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t n, const char *name,
			size_t size)
{
	struct fs_inode *ino = I(req, n);
	char proc[64], *v = NULL;
	ssize_t r;

	if (FS(req)->cfg.no_xattr)
		return (void)fuse_reply_err(req, ENOSYS);
	if (FS(req)->cl && !strcmp(name, FDCL_LAYOUT_XATTR)) {
		/* where a cluster mount's file lives (not stored anywhere) */
		char lay[1024];
		int k = fdcl_layout(FS(req), ino, lay, sizeof(lay));
		if (k < 0)
			return (void)fuse_reply_err(req, -k);
		if (size && size < (size_t)k)
			return (void)fuse_reply_err(req, ERANGE);
		return (void)(size ? fuse_reply_buf(req, lay, (size_t)k) :
				     fuse_reply_xattr(req, (size_t)k));
	}
	if (fdcl_xattr_ours(FS(req), name))
		return (void)fuse_reply_err(req, ENODATA);
	/* the kernel asks for security.capability before writes; "none" is
	 * remembered until the inode's xattrs, mode or owner change */
	bool caps = !strcmp(name, "security.capability");
	if (caps && killpriv_known(ino, &ino->no_caps_at))
		return (void)fuse_reply_err(req, ENODATA);
	unsigned gen = killpriv_gen(ino);

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", I(req, n)->fd);
	if (size) {
		v = malloc(size);
		if (!v)
			return (void)fuse_reply_err(req, ENOMEM);
		r = getxattr(proc, name, v, size);
		if (r < 0 && errno == ENODATA && caps)
			killpriv_learn(&ino->no_caps_at, gen);
		if (r < 0)
			fuse_reply_err(req, errno);
		else
			fuse_reply_buf(req, v, (size_t)r);
		free(v);
		return;
	}
	r = getxattr(proc, name, NULL, 0);
	if (r < 0 && errno == ENODATA && caps)
		killpriv_learn(&ino->no_caps_at, gen);
	if (r < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_xattr(req, (size_t)r);
}

/* The backing file's xattr names (NUL-separated) but the nodes' own
 * (fdcl_xattr_ours), in a buffer of the caller's to free: their length,
 * or -errno. */
static ssize_t xattr_names(struct fs *fs, const char *proc, char **out)
{
	for (int tries = 0; tries < 4; tries++) {
		ssize_t len = listxattr(proc, NULL, 0), r, k = 0;
		if (len < 0)
			return -errno;
		if (!len) {   /* (a size of 0 would only ask again) */
			*out = NULL;
			return 0;
		}
		char *v = malloc((size_t)len + 1);
		if (!v)
			return -ENOMEM;
		if ((r = listxattr(proc, v, (size_t)len)) < 0) {
			int e = errno;
			free(v);
			if (e == ERANGE)   /* one was added meanwhile */
				continue;
			return -e;
		}
		for (ssize_t i = 0; i < r; i += (ssize_t)strlen(v + i) + 1) {
			size_t l = strlen(v + i) + 1;
			if (!fdcl_xattr_ours(fs, v + i)) {
				memmove(v + k, v + i, l);
				k += (ssize_t)l;
			}
		}
		*out = v;
		return k;
	}
	return -ERANGE;
}

static void op_listxattr(fuse_req_t req, fuse_ino_t n, size_t size)
{
	char proc[64], *v = NULL;

	if (FS(req)->cfg.no_xattr)
		return (void)fuse_reply_err(req, ENOSYS);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", I(req, n)->fd);
	ssize_t r = xattr_names(FS(req), proc, &v);
	if (r < 0)
		fuse_reply_err(req, (int)-r);
	else if (!size)
		fuse_reply_xattr(req, (size_t)r);
	else if (size < (size_t)r)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, v, (size_t)r);
	free(v);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t n, const char *name)
{
	char proc[64];

	if (FS(req)->cfg.no_xattr)
		return (void)fuse_reply_err(req, ENOSYS);
	if (fdcl_xattr_ours(FS(req), name))
		return (void)fuse_reply_err(req, EPERM);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", I(req, n)->fd);
	int e = removexattr(proc, name) < 0 ? errno : 0;
	killpriv_changed(I(req, n));
	fuse_reply_err(req, e);
}

/* POSIX byte-range locks and flock(): not implemented here on purpose. With
 * no getlk/setlk/flock operation the kernel keeps both kinds of lock for the
 * mount itself, which is exactly POSIX on one node (ROMIO's F_SETLKW
 * around data sieving works across processes). A multi-node mount would
 * have to forward them to a lock manager. */

const struct fuse_lowlevel_ops fs_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.symlink = op_symlink,
	.link = op_link,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.rename = op_rename,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsyncdir,
	.create = op_create,
	.open = op_open,
	.release = op_release,
	.flush = op_flush,
	.getlk = op_getlk,
	.setlk = op_setlk,
	.flock = op_flock,
	.fsync = op_fsync,
	.read = op_read,
	.write_buf = op_write_buf,
	.statfs = op_statfs,
	.fallocate = op_fallocate,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
};
