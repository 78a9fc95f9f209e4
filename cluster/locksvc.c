/* locksvc.c - the lock service of a home node (locksvc.h).
 *
 * Beside the table, a list of the waits the table queued for a client,
 * each queued or granted-but-not-yet-collected, and a list of sessions
 * with their connection counts. A waiting thread looks its wait up again
 * after every wake-up (a departure may have dropped it meanwhile), so no
 * pointer into either list outlives the mutex. */
#include "cluster/locksvc.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "common/clock.h"

struct lsv_wait {
	struct lt_owner who;
	uint64_t id, file;
	enum lt_class cls;
	struct lt_range r;
	bool granted;
	struct lsv_wait *next;
};

struct lsv_session {
	uint32_t node;
	uint64_t client;
	unsigned refs;
	struct lsv_session *next;
};

struct locksvc {
	pthread_mutex_t mx;
	pthread_cond_t cv;
	struct locktab *tab;
	struct lsv_wait *waits;
	struct lsv_session *sessions;
	size_t nsessions;
	bool stopping;
	uint64_t grace_end_ns;
	uint64_t granted_waits, deadlocks, released;
};

static bool same(const struct lt_owner *a, const struct lt_owner *b)
{
	return a->node == b->node && a->client == b->client &&
	       a->owner == b->owner;
}

static struct lsv_wait **wait_find(struct locksvc *s, const struct lt_owner *o,
				   uint64_t id)
{
	struct lsv_wait **pp = &s->waits;
	for (; *pp; pp = &(*pp)->next)
		if ((*pp)->id == id && same(&(*pp)->who, o))
			break;
	return pp;
}

static void on_granted(void *arg, uint64_t id, const struct lt_owner *o)
{
	struct locksvc *s = arg;
	struct lsv_wait *w = *wait_find(s, o, id);
	if (w) {
		w->granted = true;
		s->granted_waits++;
		pthread_cond_broadcast(&s->cv);
	}
}

int locksvc_new(struct locksvc **out, size_t max_locks)
{
	struct locksvc *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	int rc = locktab_new(&s->tab, max_locks, on_granted, s);
	if (rc < 0) {
		free(s);
		return rc;
	}
	pthread_mutex_init(&s->mx, NULL);
	clock_cond_init(&s->cv);
	*out = s;
	return 0;
}

void locksvc_stop(struct locksvc *s)
{
	pthread_mutex_lock(&s->mx);
	s->stopping = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mx);
}

void locksvc_grace(struct locksvc *s, uint64_t until_ns)
{
	pthread_mutex_lock(&s->mx);
	s->grace_end_ns = until_ns;
	pthread_mutex_unlock(&s->mx);
}

void locksvc_grace_wait(struct locksvc *s)
{
	pthread_mutex_lock(&s->mx);
	uint64_t now;
	while (!s->stopping && (now = clock_now_ns()) < s->grace_end_ns) {
		struct timespec dl;
		clock_deadline(&dl, s->grace_end_ns - now);
		pthread_cond_timedwait(&s->cv, &s->mx, &dl);
	}
	pthread_mutex_unlock(&s->mx);
}

void locksvc_free(struct locksvc *s)
{
	if (!s)
		return;
	for (struct lsv_wait *w = s->waits, *n; w; w = n) {
		n = w->next;
		free(w);
	}
	for (struct lsv_session *x = s->sessions, *n; x; x = n) {
		n = x->next;
		free(x);
	}
	locktab_free(s->tab);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mx);
	free(s);
}

static struct lsv_session **session_find(struct locksvc *s, uint32_t node,
					 uint64_t client)
{
	struct lsv_session **pp = &s->sessions;
	for (; *pp; pp = &(*pp)->next)
		if ((*pp)->node == node && (*pp)->client == client)
			break;
	return pp;
}

/* Forget the waits of matching owners (the table dropped them already). */
static void waits_drop(struct locksvc *s, uint32_t node, const uint64_t *client)
{
	for (struct lsv_wait **pp = &s->waits; *pp;) {
		struct lsv_wait *w = *pp;
		if (w->who.node == node && (!client || w->who.client == *client)) {
			*pp = w->next;
			free(w);
		} else {
			pp = &w->next;
		}
	}
	pthread_cond_broadcast(&s->cv);
}

int locksvc_set(struct locksvc *s, uint64_t file, enum lt_class c,
		const struct lt_owner *o, const struct lt_range *r, bool wait,
		uint64_t wait_id, int timeout_ms, struct lt_holder *holder)
{
	pthread_mutex_lock(&s->mx);
	int rc = -ENOTCONN;
	if (!*session_find(s, o->node, o->client))
		goto out;
	if (!wait || !*wait_find(s, o, wait_id)) {
		rc = locktab_set(s->tab, file, c, o, r, wait, wait_id, holder);
		if (rc == -EDEADLK)
			s->deadlocks++;
		if (rc != 1)
			goto out;
		struct lsv_wait *w = calloc(1, sizeof(*w));
		if (!w) {
			locktab_cancel(s->tab, o, wait_id);
			rc = -ENOMEM;
			goto out;
		}
		*w = (struct lsv_wait){ .who = *o, .id = wait_id, .file = file,
					.cls = c, .r = *r, .next = s->waits };
		s->waits = w;
	}
	struct timespec dl;
	clock_deadline(&dl, (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000u);
	bool late = false;
	for (;;) {
		struct lsv_wait **pp = wait_find(s, o, wait_id);
		if (!*pp) {
			rc = -ENOTCONN;    /* dropped by a departure */
			break;
		}
		if ((*pp)->granted) {
			struct lsv_wait *w = *pp;
			*pp = w->next;
			free(w);
			rc = 0;
			break;
		}
		if (s->stopping || late) {
			rc = s->stopping ? -ESHUTDOWN : -EINPROGRESS;
			break;
		}
		late = pthread_cond_timedwait(&s->cv, &s->mx, &dl) == ETIMEDOUT;
	}
out:
	pthread_mutex_unlock(&s->mx);
	return rc;
}

int locksvc_get(struct locksvc *s, uint64_t file, enum lt_class c,
		const struct lt_owner *o, const struct lt_range *r,
		struct lt_holder *holder)
{
	pthread_mutex_lock(&s->mx);
	int rc = locktab_get(s->tab, file, c, o, r, holder);
	pthread_mutex_unlock(&s->mx);
	return rc;
}

int locksvc_cancel(struct locksvc *s, uint64_t file, enum lt_class c,
		   const struct lt_owner *o, uint64_t wait_id)
{
	pthread_mutex_lock(&s->mx);
	struct lsv_wait **pp = wait_find(s, o, wait_id);
	struct lsv_wait *w = *pp;
	int rc = -ENOENT;
	if (w && w->file == file && w->cls == c) {
		*pp = w->next;
		if (w->granted) {
			struct lt_range un = w->r;
			un.type = LT_UNLCK;
			rc = locktab_set(s->tab, file, c, o, &un, false, 0, NULL);
		} else {
			rc = locktab_cancel(s->tab, o, wait_id);
		}
		free(w);
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mx);
	return rc;
}

size_t locksvc_release_owner(struct locksvc *s, uint64_t file,
			     enum lt_class c, const struct lt_owner *o)
{
	pthread_mutex_lock(&s->mx);
	size_t n = locktab_release_owner(s->tab, file, c, o);
	for (struct lsv_wait **pp = &s->waits; *pp;) {
		struct lsv_wait *w = *pp;
		if (w->file == file && w->cls == c && same(&w->who, o)) {
			*pp = w->next;
			free(w);
		} else {
			pp = &w->next;
		}
	}
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mx);
	return n;
}

int locksvc_session_get(struct locksvc *s, uint32_t node, uint64_t client)
{
	pthread_mutex_lock(&s->mx);
	struct lsv_session *x = *session_find(s, node, client);
	int rc = 0;
	if (x) {
		x->refs++;
	} else if ((x = calloc(1, sizeof(*x)))) {
		*x = (struct lsv_session){ .node = node, .client = client,
					   .refs = 1, .next = s->sessions };
		s->sessions = x;
		s->nsessions++;
	} else {
		rc = -ENOMEM;
	}
	pthread_mutex_unlock(&s->mx);
	return rc;
}

void locksvc_session_put(struct locksvc *s, uint32_t node, uint64_t client)
{
	pthread_mutex_lock(&s->mx);
	struct lsv_session **pp = session_find(s, node, client);
	struct lsv_session *x = *pp;
	if (x && --x->refs == 0) {
		*pp = x->next;
		free(x);
		s->nsessions--;
		s->released += locktab_release_client(s->tab, node, client);
		waits_drop(s, node, &client);
	}
	pthread_mutex_unlock(&s->mx);
}

void locksvc_stats(struct locksvc *s, struct locksvc_stats *st)
{
	pthread_mutex_lock(&s->mx);
	locktab_stats(s->tab, &st->tab);
	st->sessions = s->nsessions;
	st->granted_waits = s->granted_waits;
	st->deadlocks = s->deadlocks;
	st->released_on_departure = s->released;
	pthread_mutex_unlock(&s->mx);
}
