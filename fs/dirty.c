/* dirty.c - the dirty list: the files with data in NVRAM newer than their
 * backing file, each due for write-back at a time (wb_due_ns), and the
 * back-pressure that makes writers wait for write-back when the cache is
 * full. Writers (fdata.c) put files on it; the write-back thread
 * (engine.c) takes them off. A listed file holds a ref. See fs.h. */
#include "fs/fs.h"

#include "common/clock.h"

/* How long a writer waits for space before it tries again. */
#define SPACE_WAIT_NS 50000000ull
/* How long a write that would list one file too many waits, at most. */
#define FILES_WAIT_NS 10000000000ull

void dirty_init(struct fs *fs)
{
	pthread_mutex_init(&fs->wb_lk, NULL);
	clock_cond_init(&fs->wb_cv);
	clock_cond_init(&fs->space_cv);
}

static void dirty_add(struct fs *fs, struct fs_inode *ino)
{
	ino->on_dirty = true;
	ino->dprev = NULL;
	ino->dnext = fs->dirty_head;
	if (fs->dirty_head)
		fs->dirty_head->dprev = ino;
	else
		fs->dirty_tail = ino;
	fs->dirty_head = ino;
	fs->ndirty_files++;
}

void dirty_remove(struct fs *fs, struct fs_inode *ino)
{
	if (ino->dprev)
		ino->dprev->dnext = ino->dnext;
	else
		fs->dirty_head = ino->dnext;
	if (ino->dnext)
		ino->dnext->dprev = ino->dprev;
	else
		fs->dirty_tail = ino->dprev;
	ino->dnext = ino->dprev = NULL;
	ino->on_dirty = false;
	fs->ndirty_files--;
}

void dirty_to_tail(struct fs *fs, struct fs_inode *ino)
{
	if (fs->dirty_tail == ino)
		return;
	dirty_remove(fs, ino);
	ino->on_dirty = true;
	fs->ndirty_files++;
	ino->dnext = NULL;
	ino->dprev = fs->dirty_tail;
	fs->dirty_tail->dnext = ino;
	fs->dirty_tail = ino;
}

struct fs_inode *dirty_pick(struct fs *fs, uint64_t now, uint64_t *next)
{
	bool forced = fs->wb_urgent || fs->wb_all;

	for (struct fs_inode *i = fs->dirty_head; i; i = i->dnext) {
		if (i->wb_busy)
			continue;
		bool errored_wait = i->backoff_ns && i->wb_due_ns > now;
		if (i->wb_due_ns && i->wb_due_ns <= now)
			return i;
		if (forced && !errored_wait)
			return i;
		if (i->wb_due_ns && i->wb_due_ns < *next)
			*next = i->wb_due_ns;
	}
	return NULL;
}

void dirty_mark(struct fs *fs, struct fs_inode *ino)
{
	bool added = false;

	pthread_mutex_lock(&ino->lk);
	pthread_mutex_lock(&fs->wb_lk);
	/* Open, a file is written back only when the cache needs room
	 * (due 0: dirty_pick's forced picks), deleted or not (fdata_doom). */
	if (!ino->on_dirty && (!ino->doomed || ino->opens)) {
		dirty_add(fs, ino);
		ino->wb_due_ns = ino->opens ? 0 : clock_now_ns() + fs->cfg.wb_delay_ns;
		added = true;
	}
	pthread_mutex_unlock(&fs->wb_lk);
	pthread_mutex_unlock(&ino->lk);
	if (added)
		itab_ref(fs, ino);
}

void dirty_schedule(struct fs *fs, struct fs_inode *ino)
{
	pthread_mutex_lock(&fs->wb_lk);
	if (ino->on_dirty) {
		ino->wb_due_ns = clock_now_ns() + fs->cfg.wb_delay_ns;
		if (ino->backoff_ns)
			ino->wb_due_ns += ino->backoff_ns;
		pthread_cond_signal(&fs->wb_cv);
	}
	pthread_mutex_unlock(&fs->wb_lk);
}

void dirty_hold(struct fs *fs, struct fs_inode *ino)
{
	pthread_mutex_lock(&fs->wb_lk);
	if (ino->on_dirty && !ino->backoff_ns)
		ino->wb_due_ns = 0;
	pthread_mutex_unlock(&fs->wb_lk);
}

bool dirty_forget(struct fs *fs, struct fs_inode *ino)
{
	bool removed = false;

	pthread_mutex_lock(&fs->wb_lk);
	if (ino->on_dirty && !ino->wb_busy) {
		dirty_remove(fs, ino);
		removed = true;
	}
	pthread_mutex_unlock(&fs->wb_lk);
	return removed;
}

uint32_t dirty_count(struct fs *fs)
{
	uint32_t n;

	pthread_mutex_lock(&fs->wb_lk);
	n = fs->ndirty_files;
	pthread_mutex_unlock(&fs->wb_lk);
	return n;
}

void dirty_wait_space(struct fs *fs)
{
	struct timespec ts;

	atomic_fetch_add(&fs->st.bp_waits, 1);
	pthread_mutex_lock(&fs->wb_lk);
	fs->wb_urgent = true;
	pthread_cond_signal(&fs->wb_cv);
	clock_deadline(&ts, SPACE_WAIT_NS);
	pthread_cond_timedwait(&fs->space_cv, &fs->wb_lk, &ts);
	pthread_mutex_unlock(&fs->wb_lk);
}

bool fs_stopping(struct fs *fs)
{
	pthread_mutex_lock(&fs->wb_lk);
	bool stop = fs->stop;
	pthread_mutex_unlock(&fs->wb_lk);
	return stop;
}

bool fs_leaving(struct fs *fs)
{
	return fs_stopping(fs) || fs_session_ending(fs);
}

void dirty_wait_files(struct fs *fs, struct fs_inode *ino)
{
	uint64_t max = fs->dirty_files_max, end = 0;
	struct timespec ts;

	pthread_mutex_lock(&fs->wb_lk);
	while (max && fs->ndirty_files >= max && !ino->on_dirty && !fs->stop) {
		uint64_t now = clock_now_ns();
		if (!end) {
			end = now + FILES_WAIT_NS;
			atomic_fetch_add(&fs->st.bp_waits, 1);
		} else if (now >= end) {
			break;
		}
		/* the listed files are written back now, not after their
		 * delay; each one done wakes us (space_cv) */
		fs->wb_urgent = true;
		pthread_cond_signal(&fs->wb_cv);
		clock_deadline(&ts, SPACE_WAIT_NS);
		pthread_cond_timedwait(&fs->space_cv, &fs->wb_lk, &ts);
	}
	pthread_mutex_unlock(&fs->wb_lk);
}
