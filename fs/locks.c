/* locks.c - a cluster mount's fcntl and flock locks at their home nodes
 * (locks.h). */
#include "fs/locks.h"

#include "common/clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "cluster/client.h"
#include "cluster/locktab.h"
#include "common/log.h"

/* Each home's connections; a handle is either in free[] or out with one
 * thread, and counted in n either way. */
struct lk_home {
	pthread_mutex_t mx;
	pthread_cond_t cv;
	struct cluster_client *free[FS_LOCKS_CONNS];
	unsigned nfree, n;
	struct log_limit down_log;
	uint64_t inc;           /* the home's incarnation we talk to (0: none yet) */
	bool lost;              /* hung up while we hold locks there */
	struct locktab *held;   /* what this mount holds there (record only) */
};

struct fs_locks {
	struct cluster_config cfg;
	uint32_t self;
	uint64_t session;
	atomic_uint_fast64_t next_wait;
	atomic_uint_fast64_t sets, gets, waits, conflicts, errors, reclaimed;
	struct lk_home home[CONFIG_MAX_NODES];
	uint32_t down_wait_ms;
	/* the waits running in threads of their own, and the mount's end */
	pthread_mutex_t wmx;
	pthread_cond_t wcv;
	unsigned waiters;
	atomic_bool closing;
};

int fs_locks_open(struct fs_locks **out, const struct cluster_config *cfg,
		  uint32_t self_node, uint32_t down_wait_ms)
{
	struct fs_locks *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->cfg = *cfg;
	l->down_wait_ms = down_wait_ms;
	l->self = self_node;
	if (getrandom(&l->session, sizeof(l->session), 0) !=
	    (ssize_t)sizeof(l->session))
		l->session = (uint64_t)time(NULL) ^ ((uint64_t)self_node << 48);
	atomic_init(&l->next_wait, 1);
	for (unsigned i = 0; i < CONFIG_MAX_NODES; i++) {
		pthread_mutex_init(&l->home[i].mx, NULL);
		pthread_cond_init(&l->home[i].cv, NULL);
	}
	for (unsigned i = 0; i < cfg->n_nodes; i++) {
		if (locktab_new(&l->home[i].held, 0, NULL, NULL) < 0) {
			fs_locks_close(l);
			return -ENOMEM;
		}
		locktab_record_only(l->home[i].held);
	}
	pthread_mutex_init(&l->wmx, NULL);
	pthread_cond_init(&l->wcv, NULL);
	*out = l;
	return 0;
}

void fs_locks_close(struct fs_locks *l)
{
	if (!l)
		return;
	for (unsigned i = 0; i < CONFIG_MAX_NODES; i++) {
		struct lk_home *h = &l->home[i];
		for (unsigned k = 0; k < h->nfree; k++)
			cluster_client_close(h->free[k]);
		locktab_free(h->held);
		pthread_mutex_destroy(&h->mx);
		pthread_cond_destroy(&h->cv);
	}
	pthread_mutex_destroy(&l->wmx);
	pthread_cond_destroy(&l->wcv);
	memset(l->cfg.secret, 0, sizeof(l->cfg.secret));
	free(l);
}

void fs_locks_waiter_enter(struct fs_locks *l)
{
	pthread_mutex_lock(&l->wmx);
	l->waiters++;
	pthread_mutex_unlock(&l->wmx);
}

void fs_locks_waiter_leave(struct fs_locks *l)
{
	pthread_mutex_lock(&l->wmx);
	if (--l->waiters == 0)
		pthread_cond_broadcast(&l->wcv);
	pthread_mutex_unlock(&l->wmx);
}

void fs_locks_stop(struct fs_locks *l)
{
	atomic_store(&l->closing, true);
	pthread_mutex_lock(&l->wmx);
	while (l->waiters)
		pthread_cond_wait(&l->wcv, &l->wmx);
	pthread_mutex_unlock(&l->wmx);
}

/* rc says the connection is gone (the home died or restarted, or the
 * stream broke): the handle is of no more use. */
static bool broken(int rc)
{
	return rc == -ENOTCONN || rc == -ECONNRESET || rc == -EPIPE ||
	       rc == -ETIMEDOUT || rc == -EPROTO;
}

/* The locks this mount holds at a home, as reclaim requests. */
struct held_list {
	struct frame_lock *v;
	size_t n, cap;
	bool short_of_memory;
};

static void held_collect(void *arg, uint64_t file, enum lt_class c,
			 const struct lt_holder *hd)
{
	struct held_list *hl = arg;
	if (hl->n == hl->cap) {
		size_t cap = hl->cap ? 2 * hl->cap : 16;
		struct frame_lock *v = realloc(hl->v, cap * sizeof(*v));
		if (!v) {
			hl->short_of_memory = true;
			return;
		}
		hl->v = v;
		hl->cap = cap;
	}
	hl->v[hl->n++] = (struct frame_lock){
		.obj = file, .op = FL_SET, .cls = (uint32_t)c,
		.type = (uint32_t)hd->r.type, .start = hd->r.start,
		.end = hd->r.end, .owner = hd->who.owner, .pid = hd->who.pid,
		.reclaim = true };
}

/* The home restarted (a new incarnation): set every lock this mount
 * holds there again, on c, in the home's grace (fcache.h). A lock
 * another mount took meanwhile (it cannot, in the grace) is lost and
 * logged. 0, or the transport error that broke c. */
static int reclaim(struct fs_locks *l, uint32_t home, struct cluster_client *c)
{
	struct lk_home *h = &l->home[home];
	struct held_list hl = { 0 };
	uint32_t id = l->cfg.nodes[home].id;
	int rc = 0;
	size_t set = 0, lost = 0;

	pthread_mutex_lock(&h->mx);
	locktab_each(h->held, held_collect, &hl);
	pthread_mutex_unlock(&h->mx);
	if (hl.short_of_memory)
		log_err("file locks: node %u restarted: out of memory listing the "
			"locks held there; some are not set again", id);
	for (size_t k = 0; k < hl.n; k++) {
		hl.v[k].node = l->self;
		hl.v[k].session = l->session;
		rc = cluster_client_lock(c, &hl.v[k], NULL);
		if (broken(rc))
			break;
		if (rc == 0) {
			set++;
			continue;
		}
		lost++;
		log_err("file locks: node %u restarted: the lock on file %016llx "
			"[%llu, %llu] held here (pid %u) could not be set again: %s; "
			"its process no longer holds it", id,
			(unsigned long long)hl.v[k].obj,
			(unsigned long long)hl.v[k].start,
			(unsigned long long)hl.v[k].end, hl.v[k].pid, strerror(-rc));
		rc = 0;
	}
	if (!broken(rc))
		log_info("file locks: node %u restarted: %zu locks held here set "
			 "again there%s", id, set, lost ? ", some lost (above)" : "");
	atomic_fetch_add(&l->reclaimed, set);
	free(hl.v);
	return broken(rc) ? rc : 0;
}

/* A connection to home, or NULL (logged, rate-limited) when it cannot be
 * opened. A new connection that finds a new incarnation of the home sets
 * this mount's locks there again first. */
static struct cluster_client *conn_get(struct fs_locks *l, uint32_t home)
{
	if (home >= l->cfg.n_nodes)
		return NULL;
	struct lk_home *h = &l->home[home];
	pthread_mutex_lock(&h->mx);
	while (!h->nfree && h->n >= FS_LOCKS_CONNS)
		pthread_cond_wait(&h->cv, &h->mx);
	if (h->nfree) {
		struct cluster_client *c = h->free[--h->nfree];
		pthread_mutex_unlock(&h->mx);
		return c;
	}
	h->n++;
	pthread_mutex_unlock(&h->mx);

	struct cluster_client *c = NULL;
	char err[256] = "";
	const struct cluster_node *cn = &l->cfg.nodes[home];
	int rc = cluster_client_open_node(&c, &l->cfg, cn->id, 0, 0, 0, err,
					  sizeof(err));
	if (rc < 0) {
		if (log_limit(&h->down_log, 60, NULL, 0))
			log_warn("file locks: node %u (%s:%u), home of files "
				 "locked here, unreachable: %s", cn->id,
				 cn->host, cn->port, err[0] ? err : strerror(-rc));
		pthread_mutex_lock(&h->mx);
		h->n--;
		pthread_cond_signal(&h->cv);
		pthread_mutex_unlock(&h->mx);
		return NULL;
	}
	uint64_t inc = cluster_client_incarnation(c);
	pthread_mutex_lock(&h->mx);
	uint64_t was = h->inc;
	h->inc = inc;
	h->lost = false;
	pthread_mutex_unlock(&h->mx);
	if (was && was != inc && reclaim(l, home, c) < 0) {
		/* broken midway: the next connection sets them again */
		cluster_client_close(c);
		pthread_mutex_lock(&h->mx);
		if (h->inc == inc)
			h->inc = was;
		h->n--;
		pthread_cond_signal(&h->cv);
		pthread_mutex_unlock(&h->mx);
		return NULL;
	}
	return c;
}

/* Give c back; a broken one (after a transport error) is closed. */
static void conn_put(struct fs_locks *l, uint32_t home,
		     struct cluster_client *c, int rc)
{
	struct lk_home *h = &l->home[home];
	bool is_broken = broken(rc);
	if (is_broken)
		cluster_client_close(c);
	pthread_mutex_lock(&h->mx);
	if (is_broken)
		h->n--;
	else
		h->free[h->nfree++] = c;
	pthread_cond_signal(&h->cv);
	pthread_mutex_unlock(&h->mx);
}

/* One request on one connection; with intr, an F_SETLKW asked again
 * until it is answered. */
static int call_once(struct fs_locks *l, uint32_t home, struct frame_lock *q,
		     struct frame_lock *h, fs_locks_intr_fn intr, void *arg)
{
	struct cluster_client *c = conn_get(l, home);
	if (!c)
		return -EHOSTDOWN;
	int rc = cluster_client_lock(c, q, h);
	while (rc == -EINPROGRESS) {
		bool closing = atomic_load(&l->closing);
		if (closing || (intr && intr(arg))) {
			struct frame_lock cq = *q;
			cq.op = FL_CANCEL;
			rc = cluster_client_lock(c, &cq, NULL);
			/* the mount's end is no signal to the waiting process:
			 * it is told no lock is to be had */
			if (rc == 0 || rc == -ENOENT)
				rc = closing ? -ENOLCK : -EINTR;
			break;
		}
		rc = cluster_client_lock(c, q, h);
	}
	conn_put(l, home, c, rc);
	return rc;
}

/* One request; the home's status, or -ENOLCK for a home we cannot reach
 * (logged). A connection found broken (the pool's idle handles to a home
 * that restarted) is replaced and the request sent again, a few times:
 * every request is safe to repeat (a SET of what one holds, a RELEASE, a
 * GET, a CANCEL of what is gone). */
static int call(struct fs_locks *l, uint32_t home, struct frame_lock *q,
		struct frame_lock *h, fs_locks_intr_fn intr, void *arg)
{
	q->node = l->self;
	q->session = l->session;
	int rc = -ENOLCK;
	uint64_t since = clock_now_ns();
	bool told = false;
	for (;;) {
		for (int attempt = 0; attempt < FS_LOCKS_CONNS + 1; attempt++) {
			rc = call_once(l, home, q, h, intr, arg);
			if (!broken(rc))
				break;
		}
		if (rc != -EHOSTDOWN && !broken(rc))
			break;
		/* the home is down: it may be restarting (its locks come
		 * back from the mounts in its grace); as other requests,
		 * a SET or GET waits for it down_wait at most. A RELEASE (a
		 * close's) does not hold the close: the lock is forgotten
		 * here, so the restarted home does not get it back */
		if (q->op == FL_RELEASE || q->op == FL_CANCEL ||
		    atomic_load(&l->closing) ||
		    clock_now_ns() - since >= (uint64_t)l->down_wait_ms * 1000000ull)
			break;
		if (intr && intr(arg))
			return -EINTR;
		if (!told) {
			told = true;
			log_warn("file locks: node %u (home of file %016llx) is down: "
				 "lock requests wait for it, %.0f s at most (down_wait)",
				 l->cfg.nodes[home].id, (unsigned long long)q->obj,
				 l->down_wait_ms / 1e3);
		}
		usleep(200000);
	}
	if (rc == -EHOSTDOWN) {
		atomic_fetch_add(&l->errors, 1);
		rc = -ENOLCK;
	}
	switch (rc) {
	case 0: case -EAGAIN: case -EDEADLK: case -EINTR: case -EINVAL:
	case -ENOLCK:
		return rc;
	default:
		atomic_fetch_add(&l->errors, 1);
		log_warn("file locks: node %u (home of file %016llx): %s",
			 l->cfg.nodes[home].id, (unsigned long long)q->obj,
			 strerror(-rc));
		return -ENOLCK;
	}
}

static uint32_t type_of(short t)
{
	return t == F_RDLCK ? 1 : t == F_WRLCK ? 2 : 0;
}

/* lk's range, as the kernel hands it over (SEEK_SET, l_len 0: to EOF). */
static int range_of(const struct flock *lk, struct frame_lock *q)
{
	if (lk->l_whence != SEEK_SET || lk->l_start < 0 || lk->l_len < 0)
		return -EINVAL;
	q->start = (uint64_t)lk->l_start;
	if (lk->l_len == 0 ||
	    (uint64_t)lk->l_len - 1 > FRAME_LOCK_EOF - q->start)
		q->end = FRAME_LOCK_EOF;
	else
		q->end = q->start + (uint64_t)lk->l_len - 1;
	return 0;
}

int fs_locks_get(struct fs_locks *l, uint32_t home, uint64_t obj,
		 uint64_t owner, struct flock *lk)
{
	struct frame_lock q = { .obj = obj, .op = FL_GET, .cls = 0,
				.type = type_of(lk->l_type), .owner = owner },
			  h = { 0 };
	int rc = range_of(lk, &q);
	if (rc < 0)
		return rc;
	atomic_fetch_add(&l->gets, 1);
	if ((rc = call(l, home, &q, &h, NULL, NULL)) < 0)
		return rc;
	lk->l_whence = SEEK_SET;
	if (h.type == 0) {
		lk->l_type = F_UNLCK;
		return 0;
	}
	lk->l_type = h.type == 1 ? F_RDLCK : F_WRLCK;
	lk->l_start = (off_t)h.start;
	lk->l_len = h.end == FRAME_LOCK_EOF ? 0 : (off_t)(h.end - h.start + 1);
	lk->l_pid = (pid_t)h.pid;
	return 0;
}

/* The record of what this mount holds at home follows a SET it made
 * (an unlock whatever the home said: the process holds nothing there),
 * or a RELEASE (release: the owner's locks of q's class on q's file). */
static void held_note(struct fs_locks *l, uint32_t home,
		      const struct frame_lock *q, bool release)
{
	if (home >= l->cfg.n_nodes)
		return;
	struct lk_home *h = &l->home[home];
	struct lt_owner o = { .node = l->self, .client = l->session,
			      .owner = q->owner, .pid = q->pid };
	struct lt_range r = { .start = q->start, .end = q->end,
			      .type = (enum lt_type)q->type };
	int rc = 0;
	pthread_mutex_lock(&h->mx);
	if (release)
		locktab_release_owner(h->held, q->obj, (enum lt_class)q->cls, &o);
	else
		rc = locktab_set(h->held, q->obj, (enum lt_class)q->cls, &o, &r,
				 false, 0, NULL);
	pthread_mutex_unlock(&h->mx);
	if (rc < 0)
		log_warn("file locks: no record of a lock on file %016llx (%s): "
			 "it is not set again if node %u restarts",
			 (unsigned long long)q->obj, strerror(-rc),
			 l->cfg.nodes[home].id);
}

static int set(struct fs_locks *l, uint32_t home, struct frame_lock *q,
	       bool wait, fs_locks_intr_fn intr, void *arg)
{
	struct frame_lock h = { 0 };
	q->op = FL_SET;
	q->wait = wait && q->type != 0;
	if (q->wait) {
		q->wait_id = atomic_fetch_add(&l->next_wait, 1);
		atomic_fetch_add(&l->waits, 1);
	}
	atomic_fetch_add(&l->sets, 1);
	int rc = call(l, home, q, &h, q->wait ? intr : NULL, arg);
	if (rc == -EAGAIN)
		atomic_fetch_add(&l->conflicts, 1);
	if (rc == 0 || q->type == 0)
		held_note(l, home, q, false);
	return rc;
}

int fs_locks_set(struct fs_locks *l, uint32_t home, uint64_t obj,
		 uint64_t owner, uint32_t pid, const struct flock *lk,
		 bool wait, fs_locks_intr_fn intr, void *arg)
{
	struct frame_lock q = { .obj = obj, .cls = 0,
				.type = type_of(lk->l_type), .owner = owner,
				.pid = pid };
	int rc = range_of(lk, &q);
	return rc < 0 ? rc : set(l, home, &q, wait, intr, arg);
}

int fs_locks_flock(struct fs_locks *l, uint32_t home, uint64_t obj,
		   uint64_t owner, uint32_t pid, int op, fs_locks_intr_fn intr,
		   void *arg)
{
	int kind = op & ~LOCK_NB;
	struct frame_lock q = { .obj = obj, .cls = 1, .owner = owner,
				.pid = pid, .start = 0, .end = FRAME_LOCK_EOF };
	if (kind == LOCK_SH)
		q.type = 1;
	else if (kind == LOCK_EX)
		q.type = 2;
	else if (kind != LOCK_UN)
		return -EINVAL;
	int rc = set(l, home, &q, !(op & LOCK_NB), intr, arg);
	return rc == -EAGAIN ? -EWOULDBLOCK : rc;
}

void fs_locks_release(struct fs_locks *l, uint32_t home, uint64_t obj,
		      bool flock_class, uint64_t owner)
{
	struct frame_lock q = { .obj = obj, .op = FL_RELEASE,
				.cls = flock_class ? 1 : 0, .owner = owner,
				.end = FRAME_LOCK_EOF };
	/* a lost home released everything of ours already */
	(void)call(l, home, &q, NULL, NULL, NULL);
	held_note(l, home, &q, true);
}

void fs_locks_watch(struct fs_locks *l)
{
	for (unsigned i = 0; i < l->cfg.n_nodes; i++) {
		struct lk_home *h = &l->home[i];
		struct cluster_client *gone[FS_LOCKS_CONNS];
		struct locktab_stats st;
		unsigned ng = 0;
		pthread_mutex_lock(&h->mx);
		for (unsigned k = 0; k < h->nfree;) {
			if (cluster_client_hung_up(h->free[k])) {
				gone[ng++] = h->free[k];
				h->free[k] = h->free[--h->nfree];
				h->n--;
			} else {
				k++;
			}
		}
		locktab_stats(h->held, &st);
		if (ng && st.locks)
			h->lost = true;
		bool again = h->lost;
		pthread_mutex_unlock(&h->mx);
		for (unsigned k = 0; k < ng; k++)
			cluster_client_close(gone[k]);
		if (again) {
			/* a new connection sets the locks again (conn_get) */
			struct cluster_client *c = conn_get(l, i);
			if (c)
				conn_put(l, i, c, 0);
		}
	}
}

void fs_locks_stats(struct fs_locks *l, struct fs_locks_stats *st)
{
	st->sets = atomic_load(&l->sets);
	st->gets = atomic_load(&l->gets);
	st->waits = atomic_load(&l->waits);
	st->conflicts = atomic_load(&l->conflicts);
	st->errors = atomic_load(&l->errors);
	st->reclaimed = atomic_load(&l->reclaimed);
}
