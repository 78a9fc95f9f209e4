/* fdwait.c - requests short of file descriptors wait for one to be freed
 * (see fs.h, "fdwait.c"). */
#include "fs/fs.h"

#include "common/clock.h"

#include <errno.h>

/* How long one wait for a freed inode lasts, and how many waits an open
 * makes before it gives up (10 s in all: the kernel answers a prune
 * with its FORGETs at its own pace, slower on a loaded machine, and an
 * open that gives up fails the program with EMFILE). */
#define FDWAIT_NS 5000000ull
#define FDWAIT_TRIES 2000

void fdwait_init(struct fs_fdwait *w)
{
	pthread_mutex_init(&w->lk, NULL);
	clock_cond_init(&w->kick_cv);
	clock_cond_init(&w->freed_cv);
}

void fdwait_destroy(struct fs_fdwait *w)
{
	pthread_mutex_destroy(&w->lk);
	pthread_cond_destroy(&w->kick_cv);
	pthread_cond_destroy(&w->freed_cv);
}

void fdwait_set_on(struct fs_fdwait *w, bool on)
{
	pthread_mutex_lock(&w->lk);
	atomic_store(&w->on, on);
	pthread_cond_broadcast(&w->kick_cv);
	pthread_mutex_unlock(&w->lk);
}

void fdwait_kick(struct fs_fdwait *w)
{
	if (!atomic_load(&w->on) || atomic_exchange(&w->pending, true))
		return;
	pthread_mutex_lock(&w->lk);
	w->kicked = true;
	pthread_cond_signal(&w->kick_cv);
	pthread_mutex_unlock(&w->lk);
}

bool fdwait_next_kick(struct fs_fdwait *w, uint64_t within_ns, bool *kicked)
{
	struct timespec until;

	clock_deadline(&until, within_ns);
	pthread_mutex_lock(&w->lk);
	while (atomic_load(&w->on) && !w->kicked)
		if (pthread_cond_timedwait(&w->kick_cv, &w->lk, &until) == ETIMEDOUT)
			break;
	bool on = atomic_load(&w->on);
	*kicked = w->kicked;
	w->kicked = false;
	atomic_store(&w->pending, false);
	pthread_mutex_unlock(&w->lk);
	return on;
}

bool fdwait_retry(struct fs_fdwait *w, int *tries)
{
	int e = errno;
	struct timespec until;

	if ((e != EMFILE && e != ENFILE) || ++*tries > FDWAIT_TRIES ||
	    !atomic_load(&w->on))
		return false;
	fdwait_kick(w);
	clock_deadline(&until, FDWAIT_NS);
	atomic_fetch_add(&w->waiters, 1);
	pthread_mutex_lock(&w->lk);
	pthread_cond_timedwait(&w->freed_cv, &w->lk, &until);
	pthread_mutex_unlock(&w->lk);
	atomic_fetch_sub(&w->waiters, 1);
	errno = e;
	return true;
}

void fdwait_freed(struct fs_fdwait *w)
{
	if (atomic_load(&w->waiters)) {
		pthread_mutex_lock(&w->lk);
		pthread_cond_broadcast(&w->freed_cv);
		pthread_mutex_unlock(&w->lk);
	}
}
