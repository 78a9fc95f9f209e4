/* forget.c - keeps the inodes the kernel holds looked up, each an O_PATH
 * fd here, under the open-files limit (fs.h, "forget.c").
 *
 * The kernel forgets a FUSE inode when its last dentry goes, and it drops
 * unused dentries only under memory pressure: left alone, a tar of 25,000
 * files into the mount holds 25,000 fds open here, past the usual hard
 * limit. Past fs->inode_high this thread sends the kernel
 * FUSE_NOTIFY_PRUNE with the node ids of idle inodes (no open handle, no
 * queued write-back, no request since the previous scan). The kernel
 * drops only the dentries nobody uses (d_prune_aliases): not a working
 * directory, a mount point, an open file or a directory with cached
 * children. Inodes left with none are evicted, FORGET comes, and
 * itab_forget closes the fd; a later use is one lookup again. Every 2 s
 * it also asks to prune the idle inodes whose backing file has no link
 * left (sweep_gone): a file removed through another node's mount stays
 * looked up in this kernel otherwise, and its fd here keeps its space on
 * the backing. A prune takes no directory lock, so it never waits for a
 * request in flight (FUSE_NOTIFY_INVAL_ENTRY would, and can hang the
 * daemon at SIGTERM; it also detaches mounts on the entries it drops).
 *
 * FUSE_NOTIFY_PRUNE came with Linux 6.18 (protocol 7.45). libfuse 3.14
 * cannot send it, so it is written to the session's fd here. On an older
 * kernel it is refused (EINVAL): the log says so once, and files stay
 * looked up until the kernel forgets them on its own. */
#define FUSE_USE_VERSION 314
#include "fs/fs.h"

#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

/* The kernel's ABI (include/uapi/linux/fuse.h, 7.45); Debian 12's headers
 * predate it. */
#define NOTIFY_PRUNE 9
struct notify_out_header {
	uint32_t len;
	int32_t code;    /* error field: the notify code */
	uint64_t unique; /* 0: a notification */
};
struct notify_prune_out {
	uint32_t count;
	uint32_t padding;
	uint64_t spare;
};

#define BATCH 512
/* how often the table is looked over for files removed elsewhere, and
 * how many inodes each time (an fstat each: a table of 100,000 in 50 s) */
#define GONE_EVERY_NS 2000000000ull
#define GONE_LOOK 4096

struct fs_forget {
	struct fs *fs;
	struct fuse_session *se;
	pthread_t th;
	struct log_limit said;   /* the sweep's line, once a minute */
	bool no_prune;           /* the kernel refused FUSE_NOTIFY_PRUNE */
};

/* Ask the kernel to prune n node ids. 0, or -errno. */
static int send_prune(struct fs_forget *f, uint64_t *ids, size_t n)
{
	struct notify_prune_out po = { .count = (uint32_t)n };
	struct notify_out_header oh = {
		.len = (uint32_t)(sizeof(oh) + sizeof(po) + n * sizeof(*ids)),
		.code = NOTIFY_PRUNE,
	};
	struct iovec iov[3] = {
		{ &oh, sizeof(oh) }, { &po, sizeof(po) }, { ids, n * sizeof(*ids) },
	};
	ssize_t w = writev(fuse_session_fd(f->se), iov, 3);
	return w < 0 ? -errno : 0;
}

/* Ask the kernel to forget idle inodes until the table is down to
 * inode_low (what it answers comes as FORGETs). False if some were wanted
 * and none was idle. */
static bool sweep(struct fs_forget *f, uint64_t *batch)
{
	struct fs *fs = f->fs;
	uint64_t held, asked = 0;

	held = itab_count(fs);
	if (held <= fs->inode_low)
		return true;
	uint64_t want = held - fs->inode_low;
	while (asked < want && !fuse_session_exited(f->se)) {
		size_t n = itab_idle(fs, batch, want - asked < BATCH ? want - asked : BATCH);
		if (n == 0)
			break;
		int r = send_prune(f, batch, n);
		if (r == -EINVAL) {
			fdwait_set_on(&fs->fdw, false);
			log_warn("this kernel cannot be asked to forget files "
				 "(FUSE_NOTIFY_PRUNE needs Linux 6.18): each file it "
				 "keeps looked up holds a descriptor here, %llu now; "
				 "past the open-files limit, lookups fail with EMFILE",
				 (unsigned long long)held);
			return true;
		}
		if (r < 0) {
			log_debug("prune: %s", strerror(-r));
			break;
		}
		asked += n;
	}
	if (asked == 0)
		return false;
	atomic_fetch_add(&fs->st.forget_asks, asked);
	if (log_limit(&f->said, 60, NULL, 0))
		log_info("%llu files looked up, over %llu: asked the kernel to forget "
			 "%llu idle ones (each holds a descriptor here)",
			 (unsigned long long)held, (unsigned long long)fs->inode_high,
			 (unsigned long long)asked);
	return true;
}

/* Ask the kernel to forget the idle inodes whose backing file is gone
 * (itab_gone): removed through another node's mount, a file stays
 * looked up here while this kernel keeps the old name's dentry, which it
 * drops only under memory pressure, and the fd here keeps the removed
 * file's space and pages on the backing. A later lookup of the name
 * finds it gone, whether the kernel pruned it or not. */
static void sweep_gone(struct fs_forget *f, uint64_t *batch)
{
	struct fs *fs = f->fs;
	if (f->no_prune)
		return;
	size_t n = itab_gone(fs, batch, BATCH, GONE_LOOK);
	int r = n ? send_prune(f, batch, n) : -EAGAIN;
	if (r == -EINVAL)
		f->no_prune = true;   /* (sweep says why, if it ever must) */
	if (r == 0) {
		atomic_fetch_add(&fs->st.forget_gone, n);
		log_debug("asked the kernel to forget %zu files removed elsewhere", n);
	}
}

static void *forget_main(void *arg)
{
	struct fs_forget *f = arg;
	struct fs *fs = f->fs;
	uint64_t *batch = malloc(BATCH * sizeof(*batch));

	if (!batch) {
		log_warn("forget thread: out of memory; idle files stay looked up");
		fdwait_set_on(&fs->fdw, false);
		return NULL;
	}
	uint64_t gone_at = 0;
	bool kicked;
	while (fdwait_next_kick(&fs->fdw, GONE_EVERY_NS, &kicked)) {
		if (clock_now_ns() - gone_at >= GONE_EVERY_NS) {
			sweep_gone(f, batch);
			gone_at = clock_now_ns();
		}
		if (!kicked)
			continue;   /* (the table was not over inode_high) */
		bool found = sweep(f, batch);
		/* The FORGETs come back over the next moments: counted again
		 * before then, the same inodes would be asked for again; and
		 * with nothing idle (all open, say) the table would be walked
		 * twice for nothing: a pause. Still over the mark after a
		 * sweep that found some, no pause: lookups outrun one (8
		 * parallel lstat loops at a limit of 600 do). */
		bool over = itab_count(fs) > fs->inode_high;
		if (!found || !over)
			nanosleep(&(struct timespec){ .tv_nsec = found ? 2000000 : 50000000 }, NULL);
		if (found && over)
			fdwait_kick(&fs->fdw);
	}
	free(batch);
	return NULL;
}

int forget_start(struct fs *fs, struct fuse_session *se)
{
	struct fs_forget *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->fs = fs;
	f->se = se;
	fdwait_set_on(&fs->fdw, true);
	int r = pthread_create(&f->th, NULL, forget_main, f);
	if (r != 0) {
		fdwait_set_on(&fs->fdw, false);
		free(f);
		return -r;
	}
	fs->forget = f;
	return 0;
}

void forget_stop(struct fs *fs)
{
	struct fs_forget *f = fs->forget;

	if (!f)
		return;
	fdwait_set_on(&fs->fdw, false);
	pthread_join(f->th, NULL);
	fs->forget = NULL;
	free(f);
}

void fs_drop_pages(struct fs *fs, struct fs_inode *ino)
{
	atomic_store(&ino->cl_read, false);
	if (fs->se && ino != &fs->root)
		fuse_lowlevel_notify_inval_inode(fs->se, (fuse_ino_t)(uintptr_t)ino, 0, 0);
}
