/* forget.c - keeps the inodes the kernel holds looked up, each an O_PATH
 * fd here, under the open-files limit (fs.h, "forget.c").
 *
 * The kernel forgets a FUSE inode when its last dentry goes, and it drops
 * unused dentries only under memory pressure: a tar of 100,000 files into
 * the mount, or a find over one, kept 100,000 fds open here. Past
 * fs->inode_high this thread asks it to drop the entries of idle inodes
 * (no open handle, no queued write-back, no request since the previous
 * scan) with FUSE_NOTIFY_INVAL_ENTRY. The kernel then sends FORGET and
 * forget_one closes the fd; a later use is one lookup again.
 *
 * The notification takes the parent directory's lock in the kernel, which
 * a request in flight in that directory may hold: it is only ever sent
 * from this thread, never from a request's, so it waits and cannot
 * deadlock. */
#define FUSE_USE_VERSION 314
#include "fs/fs.h"

#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH 256

struct fs_forget {
	struct fs *fs;
	struct fuse_session *se;
	pthread_t th;
	pthread_mutex_t lk;
	pthread_cond_t cv;
	bool kicked, stop;
	atomic_bool pending;  /* a kick is waiting: later ones need no lock */
	uint64_t logged_ns;
};

/* Ask the kernel to forget idle inodes until the table is down to
 * inode_low (what it answers comes as FORGETs, later). False if some were
 * wanted and none was idle. */
static bool sweep(struct fs_forget *f, struct fs_idle *batch)
{
	struct fs *fs = f->fs;
	uint64_t held, pending, asked = 0;

	/* those asked already go as their FORGETs come in */
	pthread_mutex_lock(&fs->itab_lk);
	held = fs->ninodes;
	pending = fs->nasked;
	pthread_mutex_unlock(&fs->itab_lk);
	if (held - pending <= fs->inode_low)
		return true;
	uint64_t want = held - pending - fs->inode_low;
	while (asked < want) {
		/* room for one inode's names at least */
		uint64_t cap = want - asked;
		cap = cap < NAMES_MAX ? NAMES_MAX : cap > BATCH ? BATCH : cap;
		size_t n = fs_idle_inodes(fs, batch, cap);
		if (n == 0) {
			fs_idle_done(fs);
			break;
		}
		for (size_t i = 0; i < n; i++) {
			int r = fuse_lowlevel_notify_inval_entry(f->se, batch[i].pnode,
					batch[i].name, strlen(batch[i].name));
			/* -ENOENT: the kernel had already dropped it */
			if (r < 0 && r != -ENOENT)
				log_debug("forget %s: %s", batch[i].name, strerror(-r));
		}
		fs_idle_done(fs);
		asked += n;
	}
	if (asked == 0)
		return false;
	atomic_fetch_add(&fs->st.forget_asks, asked);
	uint64_t now = clock_now_ns();
	if (f->logged_ns == 0 || now - f->logged_ns >= 60000000000ull) {
		f->logged_ns = now;
		log_info("%llu files looked up, over %llu: asked the kernel to forget "
			 "%llu idle ones (each holds a descriptor here)",
			 (unsigned long long)held, (unsigned long long)fs->inode_high,
			 (unsigned long long)asked);
	}
	return true;
}

static void *forget_main(void *arg)
{
	struct fs_forget *f = arg;
	struct fs_idle *batch = malloc(BATCH * sizeof(*batch));

	if (!batch) {
		log_warn("forget thread: out of memory; idle files stay looked up");
		return NULL;
	}
	pthread_mutex_lock(&f->lk);
	while (!f->stop) {
		if (!f->kicked) {
			pthread_cond_wait(&f->cv, &f->lk);
			continue;
		}
		f->kicked = false;
		atomic_store(&f->pending, false);
		pthread_mutex_unlock(&f->lk);
		/* nothing idle (all open, say): the table was walked twice
		 * for nothing; not again at every lookup */
		if (!sweep(f, batch))
			nanosleep(&(struct timespec){ .tv_nsec = 50000000 }, NULL);
		pthread_mutex_lock(&f->lk);
	}
	pthread_mutex_unlock(&f->lk);
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
	pthread_mutex_init(&f->lk, NULL);
	pthread_cond_init(&f->cv, NULL);
	int r = pthread_create(&f->th, NULL, forget_main, f);
	if (r != 0) {
		pthread_mutex_destroy(&f->lk);
		pthread_cond_destroy(&f->cv);
		free(f);
		return -r;
	}
	fs->forget = f;
	return 0;
}

void forget_kick(struct fs *fs)
{
	struct fs_forget *f = fs->forget;

	if (!f || atomic_exchange(&f->pending, true))
		return;
	pthread_mutex_lock(&f->lk);
	f->kicked = true;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->lk);
}

void forget_stop(struct fs *fs)
{
	struct fs_forget *f = fs->forget;

	if (!f)
		return;
	pthread_mutex_lock(&f->lk);
	f->stop = true;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->lk);
	pthread_join(f->th, NULL);
	fs->forget = NULL;
	pthread_mutex_destroy(&f->lk);
	pthread_cond_destroy(&f->cv);
	free(f);
}
