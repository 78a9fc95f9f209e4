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
	bool fsetid;           /* has CAP_FSETID */
	gid_t fsgid;
	gid_t groups[64];
	int ngroups;
};

/* The caller's capability and groups from /proc/PID/status. Read only for
 * set-id files, which are rare; a caller we cannot see counts as root only
 * if its uid is 0. */
static void caller_of(fuse_req_t req, struct caller *c)
{
	const struct fuse_ctx *x = fuse_req_ctx(req);
	char path[64], line[1024];
	FILE *f;

	c->fsetid = x->uid == 0;
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
			c->fsetid = (strtoull(line + 7, NULL, 16) >> CAP_FSETID) & 1;
		}
	}
	fclose(f);
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
 * in the file's group; none if the caller has CAP_FSETID. */
static mode_t sxid_to_drop(fuse_req_t req, const struct stat *st)
{
	mode_t kill = st->st_mode & S_ISUID;
	bool sgid = st->st_mode & S_ISGID;
	struct caller c;

	if (!kill && !sgid)
		return 0;
	caller_of(req, &c);
	if (sgid && ((st->st_mode & S_IXGRP) || (!c.fsetid && !in_group(&c, st->st_gid))))
		kill |= S_ISGID;
	return c.fsetid ? 0 : kill;
}

int killpriv_on_modify(fuse_req_t req, struct fs_inode *ino)
{
	char proc[64];
	struct stat st;

	if (!killpriv_granted() || atomic_load(&ino->nosec))
		return 0;
	if (fstatat(ino->fd, "", &st, AT_EMPTY_PATH) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return 0;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", ino->fd);
	mode_t kill = sxid_to_drop(req, &st);
	if (kill && chmod(proc, st.st_mode & ~kill & 07777) < 0) {
		int e = errno;
		log_warn("dropping set-id bits of inode %lu: %s", (unsigned long)st.st_ino, strerror(e));
		return -e;
	}
	/* any write drops file capabilities, whoever writes */
	if (!atomic_load(&ino->no_caps)) {
		if (removexattr(proc, "security.capability") < 0 &&
		    errno != ENODATA && errno != ENOTSUP) {
			int e = errno;
			log_warn("dropping the capabilities of inode %lu: %s",
				 (unsigned long)st.st_ino, strerror(e));
			return -e;
		}
		atomic_store(&ino->no_caps, true);
	}
	/* a set-id file is checked at every write, as the kernel does */
	if (!(st.st_mode & (S_ISUID | S_ISGID)))
		atomic_store(&ino->nosec, true);
	return 0;
}
