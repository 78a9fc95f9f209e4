/* peerpool.c - a few shared connections to each peer; see peerpool.h. */
#include "cluster/peerpool.h"

#include "common/clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct peer_handles {
	struct cluster_client *idle[PEERPOOL_MAX_SIZE];
	unsigned nidle;
	unsigned count;         /* idle + leased + being opened */
	unsigned gen;           /* peerpool_drop calls */
};

struct peerpool {
	pthread_mutex_t lock;
	pthread_cond_t back;    /* a handle came back, or a place freed */
	const struct peerpool_ops *ops;
	void *ctx;
	unsigned npeers, size, leased;
	struct peerpool_stats st;
	struct peer_handles peers[];
};

int peerpool_create(struct peerpool **out, unsigned npeers, unsigned size,
		    const struct peerpool_ops *ops, void *ctx)
{
	if (!npeers || !size || size > PEERPOOL_MAX_SIZE || !ops || !ops->open ||
	    !ops->close)
		return -EINVAL;
	struct peerpool *p = calloc(1, sizeof(*p) + npeers * sizeof(p->peers[0]));
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	clock_cond_init(&p->back);
	p->ops = ops;
	p->ctx = ctx;
	p->npeers = npeers;
	p->size = size;
	*out = p;
	return 0;
}

void peerpool_destroy(struct peerpool *p)
{
	if (!p)
		return;
	for (unsigned j = 0; j < p->npeers; j++)
		for (unsigned k = 0; k < p->peers[j].nidle; k++)
			p->ops->close(p->ctx, p->peers[j].idle[k]);
	pthread_cond_destroy(&p->back);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

int peerpool_get(struct peerpool *p, unsigned peer, int wait_ms,
		 struct peerpool_lease *l, char *err, size_t errlen)
{
	struct peer_handles *h = &p->peers[peer];
	struct timespec dl;
	bool waited = false;
	int rc = 0;

	l->cl = NULL;
	l->peer = peer;
	if (wait_ms > 0)
		clock_deadline(&dl, (uint64_t)wait_ms * 1000000ULL);
	pthread_mutex_lock(&p->lock);
	while (!h->nidle && h->count >= p->size) {
		if (wait_ms <= 0) {
			rc = -EAGAIN;
			break;
		}
		if (!waited)
			p->st.waits++;
		waited = true;
		if (pthread_cond_timedwait(&p->back, &p->lock, &dl) == ETIMEDOUT &&
		    !h->nidle && h->count >= p->size) {
			p->st.wait_timeouts++;
			rc = -ETIMEDOUT;
			break;
		}
	}
	if (rc) {
		pthread_mutex_unlock(&p->lock);
		if (rc == -ETIMEDOUT)
			snprintf(err, errlen, "all %u connections to it busy for %d ms",
				 p->size, wait_ms);
		return rc;
	}
	l->gen = h->gen;
	if (h->nidle) {
		l->cl = h->idle[--h->nidle];
		p->leased++;
		pthread_mutex_unlock(&p->lock);
		return 0;
	}
	h->count++;     /* the place is ours while we open, unlocked */
	pthread_mutex_unlock(&p->lock);
	rc = p->ops->open(p->ctx, peer, &l->cl, err, errlen);
	pthread_mutex_lock(&p->lock);
	if (rc) {
		l->cl = NULL;
		h->count--;
		p->st.open_errors++;
		pthread_cond_broadcast(&p->back);
	} else {
		p->st.opens++;
		p->leased++;
	}
	pthread_mutex_unlock(&p->lock);
	return rc;
}

/* n handles of h closed (by the caller, unlocked): their places free.
 * Counted only after the close, so that a peer never sees more than size
 * connections, not even while one is closing. */
static void places_free(struct peerpool *p, struct peer_handles *h, unsigned n)
{
	pthread_mutex_lock(&p->lock);
	h->count -= n;
	p->st.closes += n;
	pthread_cond_broadcast(&p->back);
	pthread_mutex_unlock(&p->lock);
}

void peerpool_put(struct peerpool *p, struct peerpool_lease *l, bool broken)
{
	struct cluster_client *cl = l->cl;

	if (!cl)
		return;
	l->cl = NULL;
	struct peer_handles *h = &p->peers[l->peer];
	pthread_mutex_lock(&p->lock);
	p->leased--;
	broken = broken || l->gen != h->gen;
	if (!broken) {
		h->idle[h->nidle++] = cl;
		pthread_cond_broadcast(&p->back);
	}
	pthread_mutex_unlock(&p->lock);
	if (broken) {
		p->ops->close(p->ctx, cl);
		places_free(p, h, 1);
	}
}

void peerpool_drop(struct peerpool *p, unsigned peer)
{
	struct peer_handles *h = &p->peers[peer];
	struct cluster_client *idle[PEERPOOL_MAX_SIZE];
	unsigned n;

	pthread_mutex_lock(&p->lock);
	h->gen++;
	n = h->nidle;
	for (unsigned k = 0; k < n; k++)
		idle[k] = h->idle[k];
	h->nidle = 0;
	pthread_mutex_unlock(&p->lock);
	for (unsigned k = 0; k < n; k++)
		p->ops->close(p->ctx, idle[k]);
	if (n)
		places_free(p, h, n);
}

void peerpool_stats_read(struct peerpool *p, struct peerpool_stats *s)
{
	pthread_mutex_lock(&p->lock);
	*s = p->st;
	s->handles = 0;
	for (unsigned j = 0; j < p->npeers; j++)
		s->handles += p->peers[j].count;
	s->leased = p->leased;
	pthread_mutex_unlock(&p->lock);
}
