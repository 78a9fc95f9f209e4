/* membership.c - the node table and failure detector; see membership.h. */
#include "cluster/membership.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct membership {
	pthread_mutex_t lock;
	uint32_t self;
	uint64_t timeout_ns;
	uint64_t last_tick_ns;  /* membership_tick's last call, 0: none */
	unsigned n;
	struct member m[CONFIG_MAX_NODES];
};

int membership_create(struct membership **out, const struct cluster_config *cfg,
		      uint32_t self, uint64_t timeout_ns)
{
	struct membership *mb = calloc(1, sizeof(*mb));

	if (!mb)
		return -ENOMEM;
	pthread_mutex_init(&mb->lock, NULL);
	mb->self = self;
	mb->timeout_ns = timeout_ns;
	for (unsigned i = 0; i < cfg->n_nodes; i++) {
		mb->m[i].id = cfg->nodes[i].id;
		mb->m[i].state = cfg->nodes[i].id == self ? FN_SELF : FN_UNKNOWN;
	}
	mb->n = cfg->n_nodes;
	*out = mb;
	return 0;
}

void membership_destroy(struct membership *mb)
{
	if (!mb)
		return;
	pthread_mutex_destroy(&mb->lock);
	free(mb);
}

static struct member *lookup(struct membership *mb, uint32_t id)
{
	for (unsigned i = 0; i < mb->n; i++)
		if (mb->m[i].id == id)
			return &mb->m[i];
	return NULL;
}

static int check_locked(struct membership *mb, uint32_t id, uint64_t inc,
			struct member **mp)
{
	struct member *m = lookup(mb, id);

	if (!m || m->state == FN_SELF)
		return -ENOENT;
	if (inc < m->incarnation)
		return -ESTALE;
	*mp = m;
	return 0;
}

int membership_check(struct membership *mb, uint32_t id, uint64_t incarnation)
{
	struct member *m;

	pthread_mutex_lock(&mb->lock);
	int rc = check_locked(mb, id, incarnation, &m);
	pthread_mutex_unlock(&mb->lock);
	return rc;
}

int membership_heard(struct membership *mb, uint32_t id, uint64_t incarnation,
		     const struct frame_capacity *cap, uint64_t now_ns,
		     uint64_t *old_inc)
{
	struct member *m;
	int ev = MB_NONE;

	pthread_mutex_lock(&mb->lock);
	int rc = check_locked(mb, id, incarnation, &m);
	if (rc) {
		pthread_mutex_unlock(&mb->lock);
		return rc;
	}
	if (m->state == FN_UNKNOWN) {
		ev = MB_UP;
	} else if (incarnation > m->incarnation) {
		ev = MB_REJOIN;
		m->prev_incarnation = m->incarnation;
		m->rejoins++;
		if (old_inc)
			*old_inc = m->incarnation;
		/* what the old incarnation offered is gone with it */
		memset(&m->cap, 0, sizeof(m->cap));
	} else if (m->state == FN_DEAD) {
		ev = MB_BACK;
	}
	m->incarnation = incarnation;
	m->state = FN_ALIVE;
	m->last_heard_ns = now_ns;
	m->heartbeats++;
	if (cap)
		m->cap = *cap;
	pthread_mutex_unlock(&mb->lock);
	return ev;
}

unsigned membership_tick(struct membership *mb, uint64_t now_ns,
			 uint32_t *dead, unsigned max)
{
	unsigned n = 0;

	pthread_mutex_lock(&mb->lock);
	/* Ticks come every half heartbeat. A gap of half the timeout means
	 * this process itself stood still (SIGSTOP, a paused VM, a starved
	 * CPU): the silence it sees is its own, and the heartbeats queued
	 * meanwhile are not read yet. Every peer gets a fresh timeout
	 * instead of a death verdict (a node back from a stall declared
	 * all its peers dead, and a swapping node that asked it believed
	 * it: every page of a group written off). */
	bool stood_still = mb->last_tick_ns && now_ns > mb->last_tick_ns &&
			   now_ns - mb->last_tick_ns > mb->timeout_ns / 2;
	mb->last_tick_ns = now_ns;
	for (unsigned i = 0; i < mb->n; i++) {
		struct member *m = &mb->m[i];
		if (stood_still && m->state == FN_ALIVE) {
			m->last_heard_ns = now_ns;
			continue;
		}
		if (m->state != FN_ALIVE || now_ns < m->last_heard_ns ||
		    now_ns - m->last_heard_ns <= mb->timeout_ns)
			continue;
		m->state = FN_DEAD;
		m->deaths++;
		if (n < max)
			dead[n] = m->id;
		n++;
	}
	pthread_mutex_unlock(&mb->lock);
	return n < max ? n : max;
}

int membership_get(struct membership *mb, uint32_t id, struct member *out)
{
	int rc = -ENOENT;

	pthread_mutex_lock(&mb->lock);
	struct member *m = lookup(mb, id);
	if (m) {
		*out = *m;
		rc = 0;
	}
	pthread_mutex_unlock(&mb->lock);
	return rc;
}

unsigned membership_snapshot(struct membership *mb, uint64_t now_ns,
			     uint64_t self_inc, const struct frame_capacity *self_cap,
			     struct frame_node *out, unsigned max)
{
	unsigned n = 0;

	pthread_mutex_lock(&mb->lock);
	for (unsigned i = 0; i < mb->n && n < max; i++) {
		const struct member *m = &mb->m[i];
		struct frame_node *o = &out[n++];
		memset(o, 0, sizeof(*o));
		o->node_id = m->id;
		o->state = m->state;
		if (m->state == FN_SELF) {
			o->incarnation = self_inc;
			o->cap = *self_cap;
			continue;
		}
		o->incarnation = m->incarnation;
		o->cap = m->cap;
		o->age_ms = m->last_heard_ns && now_ns > m->last_heard_ns ?
			    (now_ns - m->last_heard_ns) / 1000000 : 0;
	}
	pthread_mutex_unlock(&mb->lock);
	return n;
}

void membership_counts(struct membership *mb, unsigned *alive, unsigned *dead,
		       unsigned *unknown)
{
	*alive = *dead = *unknown = 0;
	pthread_mutex_lock(&mb->lock);
	for (unsigned i = 0; i < mb->n; i++) {
		switch (mb->m[i].state) {
		case FN_ALIVE: (*alive)++; break;
		case FN_DEAD: (*dead)++; break;
		case FN_UNKNOWN: (*unknown)++; break;
		default: break;
		}
	}
	pthread_mutex_unlock(&mb->lock);
}

const char *membership_state_name(uint32_t state)
{
	switch (state) {
	case FN_ALIVE: return "alive";
	case FN_DEAD: return "dead";
	case FN_SELF: return "self";
	default: return "unknown";
	}
}
