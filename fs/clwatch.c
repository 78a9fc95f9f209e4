/* clwatch.c - a cluster mount's watch for restarted nodes (fs.h,
 * "clwatch.c"): twice a second, the idle connections of the data pool
 * (fcl_watch) and of the lock pool (fs_locks_watch) are looked at; a node
 * that hung up is connected to again, and a new incarnation found there
 * gets this mount's open counts and locks again within its grace
 * (cluster/fcache.h), even when no program here is using the mount. */
#include "fs/fs.h"
#include "fs/fcl.h"
#include "fs/locks.h"

#include "common/clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#define CLWATCH_PERIOD_MS 500

struct fs_clwatch {
	struct fs *fs;
	pthread_t th;
	pthread_mutex_t mx;
	pthread_cond_t cv;
	bool stop;
};

static void *clwatch_main(void *arg)
{
	struct fs_clwatch *w = arg;

	pthread_mutex_lock(&w->mx);
	while (!w->stop) {
		struct timespec dl;
		clock_deadline(&dl, CLWATCH_PERIOD_MS * 1000000ull);
		pthread_cond_timedwait(&w->cv, &w->mx, &dl);
		if (w->stop)
			break;
		pthread_mutex_unlock(&w->mx);
		fcl_watch(w->fs->cl);
		fs_locks_watch(w->fs->locks);
		pthread_mutex_lock(&w->mx);
	}
	pthread_mutex_unlock(&w->mx);
	return NULL;
}

int clwatch_start(struct fs *fs)
{
	struct fs_clwatch *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	w->fs = fs;
	pthread_mutex_init(&w->mx, NULL);
	clock_cond_init(&w->cv);
	int r = pthread_create(&w->th, NULL, clwatch_main, w);
	if (r) {
		free(w);
		return -r;
	}
	fs->clwatch = w;
	return 0;
}

void clwatch_stop(struct fs *fs)
{
	struct fs_clwatch *w = fs->clwatch;

	if (!w)
		return;
	pthread_mutex_lock(&w->mx);
	w->stop = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mx);
	pthread_join(w->th, NULL);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mx);
	fs->clwatch = NULL;
	free(w);
}
