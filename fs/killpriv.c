/* killpriv.c - asks the kernel for FUSE_HANDLE_KILLPRIV_V2, which libfuse
 * 3.14 (Debian 12's) cannot negotiate, and does what the flag then leaves
 * to the file system: dropping set-id bits and file capabilities.
 *
 * Why: without it the kernel sends a getxattr("security.capability") round
 * trip before every write, to learn whether the write must drop file
 * capabilities; that round trip costs as much as the write itself and made
 * 4 KiB writes 0.64x passthrough_ll's (which has no xattrs at all). With
 * it the kernel marks inodes S_NOSEC and leaves dropping set-id bits and
 * capabilities on write and truncate to us: killpriv_on_modify, with the
 * rule of Linux's VFS, so the mount behaves as the backing would.
 *
 * How: libfuse builds the INIT reply's flags from the capabilities it knows
 * and sends it with writev(2) on the thread that ran our init callback. The
 * callback arms a thread-local request; this writev, which the executable
 * exports ahead of libc's, adds the one bit to that reply and to nothing
 * else, then calls the real writev. */
#include "fs/killpriv.h"

#include "common/log.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

static __thread bool armed;
static bool granted;

bool killpriv_kernel_has(unsigned proto_minor)
{
	return proto_minor >= 33; /* FUSE 7.33, Linux 5.11 */
}

void killpriv_arm(void) { armed = true; }

bool killpriv_granted(void) { return __atomic_load_n(&granted, __ATOMIC_ACQUIRE); }

typedef ssize_t (*writev_fn)(int, const struct iovec *, int);

static ssize_t sys_writev(int fd, const struct iovec *iov, int cnt)
{
	return syscall(SYS_writev, fd, iov, cnt);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	static writev_fn real;
	writev_fn w = __atomic_load_n(&real, __ATOMIC_RELAXED);

	if (!w) {
		w = (writev_fn)dlsym(RTLD_NEXT, "writev");
		if (!w)
			w = sys_writev;
		__atomic_store_n(&real, w, __ATOMIC_RELAXED);
	}
	if (!armed)
		return w(fd, iov, cnt);
	armed = false;

	/* the INIT reply: a header with no error, then a fuse_init_out */
	if (cnt != 2 || iov[0].iov_len != sizeof(struct fuse_out_header) ||
	    ((const struct fuse_out_header *)iov[0].iov_base)->error != 0 ||
	    iov[1].iov_len < offsetof(struct fuse_init_out, flags) + sizeof(uint32_t) ||
	    iov[1].iov_len > sizeof(struct fuse_init_out))
		return w(fd, iov, cnt);
	struct fuse_init_out out;
	memset(&out, 0, sizeof(out));
	memcpy(&out, iov[1].iov_base, iov[1].iov_len);
	out.flags |= FUSE_HANDLE_KILLPRIV_V2;
	struct iovec v[2] = { iov[0], { &out, iov[1].iov_len } };
	ssize_t r = w(fd, v, 2);
	if (r >= 0)
		__atomic_store_n(&granted, true, __ATOMIC_RELEASE);
	return r;
}

/* ---- what the kernel left to us ---- */

struct caller {
	bool fsetid;           /* has CAP_FSETID over the backing's inodes */
	gid_t fsgid;
	gid_t groups[64];
	int ngroups;
};

/* Whether pid lives in our user namespace: a capability is only good for
 * inodes of its own namespace (capable_wrt_inode_uidgid), and CapEff in
 * /proc is relative to the process's namespace (unshare -Ur gives a full
 * set that counts for nothing here). */
static bool same_userns(pid_t pid)
{
	static struct stat self;
	static bool have;
	char path[64];
	struct stat st;

	if (!__atomic_load_n(&have, __ATOMIC_ACQUIRE)) {
		if (stat("/proc/self/ns/user", &self) < 0)
			return false;
		__atomic_store_n(&have, true, __ATOMIC_RELEASE);
	}
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	return stat(path, &st) == 0 && st.st_ino == self.st_ino && st.st_dev == self.st_dev;
}

/* The caller's capability and groups from /proc/PID/status. Read only for
 * set-id files, which are rare. A caller we cannot see (gone, or another
 * pid namespace) counts as privileged only if its uid is 0 and the kernel
 * did not tell otherwise; its groups are then its fsgid alone, which errs
 * towards dropping set-gid. */
static void caller_of(fuse_req_t req, enum killpriv_caller who, struct caller *c)
{
	const struct fuse_ctx *x = fuse_req_ctx(req);
	char path[64], line[4096];
	bool seen = false, ns = false;
	FILE *f;

	c->fsetid = who == KP_ASK ? x->uid == 0 : who == KP_FSETID;
	c->fsgid = x->gid;
	c->ngroups = 0;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)x->pid);
	if (x->pid <= 0 || !(f = fopen(path, "re")))
		return;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "Gid:", 4)) {
			unsigned r, e, s, fs;
			if (sscanf(line + 4, "%u %u %u %u", &r, &e, &s, &fs) == 4)
				c->fsgid = fs;
		} else if (!strncmp(line, "Groups:", 7)) {
			char *p = line + 7, *end;
			for (;;) {
				unsigned long g = strtoul(p, &end, 10);
				if (end == p || c->ngroups == (int)(sizeof(c->groups) / sizeof(c->groups[0])))
					break;
				c->groups[c->ngroups++] = (gid_t)g;
				p = end;
			}
		} else if (!strncmp(line, "CapEff:", 7)) {
			seen = (strtoull(line + 7, NULL, 16) >> CAP_FSETID) & 1;
			ns = true;
		}
	}
	fclose(f);
	if (who == KP_ASK && ns)
		c->fsetid = seen && same_userns(x->pid);
}

static bool in_group(const struct caller *c, gid_t g)
{
	if (c->fsgid == g)
		return true;
	for (int i = 0; i < c->ngroups; i++)
		if (c->groups[i] == g)
			return true;
	return false;
}

/* The set-id bits Linux's setattr_should_drop_suidgid() would drop for this
 * caller: set-uid always, set-gid when group-executable or the caller is not
 * in the file's group; none if the caller has CAP_FSETID. For a chown
 * (setattr_should_drop_sgid and chown_common) the capability spares only
 * a set-gid that is not group-executable. */
static mode_t sxid_to_drop(fuse_req_t req, enum killpriv_caller who,
			   const struct stat *st, bool chown)
{
	mode_t suid = st->st_mode & S_ISUID;
	bool sgid = st->st_mode & S_ISGID;
	struct caller c;

	if (!suid && !sgid)
		return 0;
	caller_of(req, who, &c);
	bool sgid_goes = sgid && ((st->st_mode & S_IXGRP) ||
				  (!c.fsetid && !in_group(&c, st->st_gid)));
	if (!chown && c.fsetid)
		return 0;
	return suid | (sgid_goes ? S_ISGID : 0);
}

static int drop(fuse_req_t req, struct fs_inode *ino, enum killpriv_caller who, bool chown)
{
	unsigned gen = killpriv_gen(ino);
	char proc[64];
	struct stat st;
	int ret = 0;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", ino->fd);
	/* the look and the chmod under the inode's lock, as op_setattr's
	 * chmod: a chmod in between would otherwise be undone */
	pthread_mutex_lock(&ino->lk);
	if (fstatat(ino->fd, "", &st, AT_EMPTY_PATH) < 0) {
		ret = -errno;
	} else if (S_ISREG(st.st_mode)) {
		mode_t kill = sxid_to_drop(req, who, &st, chown);
		if (kill && chmod(proc, st.st_mode & ~kill & 07777) < 0) {
			ret = -errno;
			log_warn("dropping set-id bits of inode %lu: %s",
				 (unsigned long)st.st_ino, strerror(-ret));
		}
	}
	pthread_mutex_unlock(&ino->lk);
	if (ret < 0 || !S_ISREG(st.st_mode))
		return ret;
	/* any write drops file capabilities, whoever writes */
	if (!killpriv_known(ino, &ino->no_caps_at)) {
		if (removexattr(proc, "security.capability") < 0 &&
		    errno != ENODATA && errno != ENOTSUP) {
			ret = -errno;
			log_warn("dropping the capabilities of inode %lu: %s",
				 (unsigned long)st.st_ino, strerror(-ret));
			return ret;
		}
		killpriv_learn(&ino->no_caps_at, gen);
	}
	/* a set-id file is checked at every write, as the kernel does */
	if (!(st.st_mode & (S_ISUID | S_ISGID)))
		killpriv_learn(&ino->nosec_at, gen);
	return 0;
}

int killpriv_on_modify(fuse_req_t req, struct fs_inode *ino, enum killpriv_caller who)
{
	if (!killpriv_granted() || killpriv_known(ino, &ino->nosec_at))
		return 0;
	return drop(req, ino, who, false);
}

int killpriv_on_chown(fuse_req_t req, struct fs_inode *ino)
{
	if (!killpriv_granted())
		return 0;
	return drop(req, ino, KP_ASK, true);
}
