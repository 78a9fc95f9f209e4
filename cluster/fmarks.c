/* fmarks.c - dirty marks of a node's blocks, at the node and at its
 * shadow (fmarks.h).
 *
 * Both sides keep, per object (and at the shadow per owner and object),
 * a vector of block indexes sorted ascending, each with a sequence
 * number: files are mostly written in order, so an insert is mostly an
 * append, and a look-up is a binary search. The objects are in a chained
 * hash table under one mutex; at the owner, a writer's stripe lock (by
 * object and block, so writers of different blocks of one file do not
 * wait for each other) is taken before it. */
#include "cluster/fmarks.h"
#include "common/clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define OBJ_BUCKETS 4096u
#define STRIPES 256u

struct fm_pair {
	uint64_t blk, seq;
};

struct fm_obj {
	uint32_t owner;
	uint64_t obj;
	struct fm_pair *v;
	size_t n, cap;
	struct fm_obj *next;
};

struct fm_objs {
	struct fm_obj *b[OBJ_BUCKETS];
	size_t count;   /* pairs in all vectors */
};

static size_t obj_hash(uint32_t owner, uint64_t obj)
{
	uint64_t h = (obj ^ (uint64_t)owner << 56) * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 40) % OBJ_BUCKETS;
}

static struct fm_obj **obj_slot(struct fm_objs *t, uint32_t owner, uint64_t obj)
{
	struct fm_obj **pp = &t->b[obj_hash(owner, obj)];
	while (*pp && ((*pp)->owner != owner || (*pp)->obj != obj))
		pp = &(*pp)->next;
	return pp;
}

/* The first index of o->v whose blk is >= blk. */
static size_t lower(const struct fm_obj *o, uint64_t blk)
{
	size_t lo = 0, hi = o->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (o->v[mid].blk < blk)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct fm_pair *pair_find(struct fm_objs *t, uint32_t owner, uint64_t obj,
				 uint64_t blk)
{
	struct fm_obj *o = *obj_slot(t, owner, obj);
	if (!o)
		return NULL;
	size_t i = lower(o, blk);
	return i < o->n && o->v[i].blk == blk ? &o->v[i] : NULL;
}

/* Put (blk, seq) in, or raise the seq of the one there. 0, -ENOMEM. */
static int pair_set(struct fm_objs *t, uint32_t owner, uint64_t obj,
		    uint64_t blk, uint64_t seq)
{
	struct fm_obj **pp = obj_slot(t, owner, obj), *o = *pp;
	if (!o) {
		if (!(o = calloc(1, sizeof(*o))))
			return -ENOMEM;
		o->owner = owner;
		o->obj = obj;
		*pp = o;
	}
	size_t i = lower(o, blk);
	if (i < o->n && o->v[i].blk == blk) {
		if (seq > o->v[i].seq)
			o->v[i].seq = seq;
		return 0;
	}
	if (o->n == o->cap) {
		size_t cap = o->cap ? 2 * o->cap : 8;
		struct fm_pair *v = realloc(o->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		o->v = v;
		o->cap = cap;
	}
	memmove(o->v + i + 1, o->v + i, (o->n - i) * sizeof(*o->v));
	o->v[i] = (struct fm_pair){ blk, seq };
	o->n++;
	t->count++;
	return 0;
}

static void obj_free_if_empty(struct fm_obj **pp)
{
	struct fm_obj *o = *pp;
	if (o && !o->n) {
		*pp = o->next;
		free(o->v);
		free(o);
	}
}

/* Take blk out if its seq is at most max_seq. */
static void pair_clear(struct fm_objs *t, uint32_t owner, uint64_t obj,
		       uint64_t blk, uint64_t max_seq)
{
	struct fm_obj **pp = obj_slot(t, owner, obj), *o = *pp;
	if (!o)
		return;
	size_t i = lower(o, blk);
	if (i < o->n && o->v[i].blk == blk && o->v[i].seq <= max_seq) {
		memmove(o->v + i, o->v + i + 1, (o->n - i - 1) * sizeof(*o->v));
		o->n--;
		t->count--;
	}
	obj_free_if_empty(pp);
}

static void obj_drop(struct fm_objs *t, uint32_t owner, uint64_t obj)
{
	struct fm_obj **pp = obj_slot(t, owner, obj), *o = *pp;
	if (!o)
		return;
	t->count -= o->n;
	o->n = 0;
	obj_free_if_empty(pp);
}

/* Every object matching owner (all when all). */
static void objs_drop_owner(struct fm_objs *t, uint32_t owner, bool all)
{
	for (size_t b = 0; b < OBJ_BUCKETS; b++)
		for (struct fm_obj **pp = &t->b[b]; *pp;) {
			struct fm_obj *o = *pp;
			if (!all && o->owner != owner) {
				pp = &o->next;
				continue;
			}
			t->count -= o->n;
			*pp = o->next;
			free(o->v);
			free(o);
		}
}

/* ---- the owner's side ---- */

struct fmark_sent {
	pthread_mutex_t stripe[STRIPES];
	pthread_mutex_t mx;   /* objs */
	struct fm_objs objs;
	atomic_uint_fast64_t seq;
};

static size_t stripe_of(uint64_t obj, uint64_t blk)
{
	uint64_t h = (obj + blk * 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;
	return (size_t)(h >> 48) % STRIPES;
}

int fmark_sent_new(struct fmark_sent **out)
{
	struct fmark_sent *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < STRIPES; i++)
		pthread_mutex_init(&s->stripe[i], NULL);
	pthread_mutex_init(&s->mx, NULL);
	atomic_init(&s->seq, clock_wall_ns());
	*out = s;
	return 0;
}

void fmark_sent_free(struct fmark_sent *s)
{
	if (!s)
		return;
	objs_drop_owner(&s->objs, 0, true);
	for (size_t i = 0; i < STRIPES; i++)
		pthread_mutex_destroy(&s->stripe[i]);
	pthread_mutex_destroy(&s->mx);
	free(s);
}

void fmark_sent_lock(struct fmark_sent *s, uint64_t obj, uint64_t blk)
{
	pthread_mutex_lock(&s->stripe[stripe_of(obj, blk)]);
}

void fmark_sent_unlock(struct fmark_sent *s, uint64_t obj, uint64_t blk)
{
	pthread_mutex_unlock(&s->stripe[stripe_of(obj, blk)]);
}

bool fmark_sent_trylock(struct fmark_sent *s, uint64_t obj, uint64_t blk,
			uint64_t held)
{
	size_t i = stripe_of(obj, blk);
	return i != stripe_of(obj, held) && pthread_mutex_trylock(&s->stripe[i]) == 0;
}

size_t fmark_sent_take_obj(struct fmark_sent *s, uint64_t obj, uint64_t **out)
{
	size_t n = 0;

	*out = NULL;
	pthread_mutex_lock(&s->mx);
	struct fm_obj *o = *obj_slot(&s->objs, 0, obj);
	uint64_t *v = o && o->n ? malloc(o->n * sizeof(*v)) : NULL;
	for (size_t k = 0; v && k < o->n; k++)
		v[n++] = o->v[k].blk;
	pthread_mutex_unlock(&s->mx);
	for (size_t k = 0; k < n; k++) {
		fmark_sent_lock(s, obj, v[k]);
		fmark_sent_remove(s, obj, v[k]);
		fmark_sent_unlock(s, obj, v[k]);
	}
	*out = v;
	return n;
}

bool fmark_sent_has(struct fmark_sent *s, uint64_t obj, uint64_t blk)
{
	pthread_mutex_lock(&s->mx);
	bool has = pair_find(&s->objs, 0, obj, blk) != NULL;
	pthread_mutex_unlock(&s->mx);
	return has;
}

int fmark_sent_add(struct fmark_sent *s, uint64_t obj, uint64_t blk)
{
	pthread_mutex_lock(&s->mx);
	int rc = pair_set(&s->objs, 0, obj, blk, 0);
	pthread_mutex_unlock(&s->mx);
	return rc;
}

void fmark_sent_remove(struct fmark_sent *s, uint64_t obj, uint64_t blk)
{
	pthread_mutex_lock(&s->mx);
	pair_clear(&s->objs, 0, obj, blk, UINT64_MAX);
	pthread_mutex_unlock(&s->mx);
}

void fmark_sent_drop_obj(struct fmark_sent *s, uint64_t obj)
{
	/* no writer may be between its look-up and its write: every stripe */
	for (size_t i = 0; i < STRIPES; i++)
		pthread_mutex_lock(&s->stripe[i]);
	pthread_mutex_lock(&s->mx);
	obj_drop(&s->objs, 0, obj);
	pthread_mutex_unlock(&s->mx);
	for (size_t i = STRIPES; i-- > 0;)
		pthread_mutex_unlock(&s->stripe[i]);
}

size_t fmark_sent_each(struct fmark_sent *s, fmark_each_fn fn, void *arg)
{
	size_t n = 0;
	/* every stripe held: a writer that sent its SET has put its block
	 * in, and one that has not yet sends it after this */
	for (size_t i = 0; i < STRIPES; i++)
		pthread_mutex_lock(&s->stripe[i]);
	pthread_mutex_lock(&s->mx);
	for (size_t b = 0; b < OBJ_BUCKETS; b++)
		for (struct fm_obj *o = s->objs.b[b]; o; o = o->next)
			for (size_t k = 0; k < o->n; k++, n++)
				fn(arg, o->obj, o->v[k].blk);
	pthread_mutex_unlock(&s->mx);
	for (size_t i = STRIPES; i-- > 0;)
		pthread_mutex_unlock(&s->stripe[i]);
	return n;
}

uint64_t fmark_next_seq(struct fmark_sent *s)
{
	return atomic_fetch_add(&s->seq, 1) + 1;
}

uint64_t fmark_last_seq(struct fmark_sent *s)
{
	return atomic_load(&s->seq);
}

size_t fmark_sent_count(struct fmark_sent *s)
{
	pthread_mutex_lock(&s->mx);
	size_t n = s->objs.count;
	pthread_mutex_unlock(&s->mx);
	return n;
}

/* ---- the shadow's side ---- */

struct fmark_tab {
	pthread_mutex_t mx;
	struct fm_objs objs;
	bool synced[FMARK_OWNERS];
};

int fmark_tab_new(struct fmark_tab **out)
{
	struct fmark_tab *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->mx, NULL);
	*out = t;
	return 0;
}

void fmark_tab_free(struct fmark_tab *t)
{
	if (!t)
		return;
	objs_drop_owner(&t->objs, 0, true);
	pthread_mutex_destroy(&t->mx);
	free(t);
}

int fmark_tab_apply(struct fmark_tab *t, const struct frame_fop *f,
		    const uint8_t *payload, uint32_t *reply_flags)
{
	const uint32_t known = FRAME_MARK_SET | FRAME_MARK_CLEAR |
			       FRAME_MARK_CLEAR_OBJ | FRAME_MARK_SYNC_BEGIN |
			       FRAME_MARK_SYNC_END | FRAME_MARK_PING;
	uint32_t owner = f->off;
	int rc = 0;

	*reply_flags = 0;
	if ((f->flags & ~FRAME_MARK_RANGE) == FRAME_MARK_REPLICA &&
	    owner < FMARK_OWNERS) {
		/* a block's bytes, kept by the caller: no mark changes */
		pthread_mutex_lock(&t->mx);
		if (t->synced[owner])
			*reply_flags = FRAME_MARK_SYNCED;
		pthread_mutex_unlock(&t->mx);
		return 0;
	}
	if (owner >= FMARK_OWNERS || (f->flags & ~known) || f->len % 8 ||
	    (f->len && !(f->flags & (FRAME_MARK_SET | FRAME_MARK_CLEAR))) ||
	    (f->len && (f->flags & FRAME_MARK_SET) && (f->flags & FRAME_MARK_CLEAR)))
		return -EPROTO;
	pthread_mutex_lock(&t->mx);
	/* in this order when several come together */
	if (f->flags & FRAME_MARK_SYNC_BEGIN) {
		objs_drop_owner(&t->objs, owner, false);
		t->synced[owner] = false;
	}
	/* SET: blk, or the payload's blocks */
	for (uint32_t k = 0; (f->flags & FRAME_MARK_SET) && !rc &&
			     k < (f->len ? f->len / 8 : 1); k++) {
		uint64_t blk = f->blk;
		if (f->len)
			memcpy(&blk, payload + 8 * k, 8);
		if (t->objs.count >= FMARK_MAX)
			rc = -ENOSPC;
		else if (pair_set(&t->objs, owner, f->obj, blk, f->size) < 0)
			rc = -ENOMEM;
		if (rc)
			t->synced[owner] = false;
	}
	if (f->flags & FRAME_MARK_CLEAR)
		for (uint32_t k = 0; k < f->len / 8; k++) {
			uint64_t blk;
			memcpy(&blk, payload + 8 * k, 8);
			pair_clear(&t->objs, owner, f->obj, blk, f->size);
		}
	if (f->flags & FRAME_MARK_CLEAR_OBJ)
		obj_drop(&t->objs, owner, f->obj);
	if ((f->flags & FRAME_MARK_SYNC_END) && !rc)
		t->synced[owner] = true;
	if (t->synced[owner])
		*reply_flags = FRAME_MARK_SYNCED;
	pthread_mutex_unlock(&t->mx);
	return rc;
}

uint32_t fmark_tab_query(struct fmark_tab *t, uint32_t owner, uint64_t obj,
			 uint64_t blk)
{
	if (owner >= FMARK_OWNERS)
		return FRAME_SHADOW_UNKNOWN;
	pthread_mutex_lock(&t->mx);
	uint32_t r = !t->synced[owner] ? FRAME_SHADOW_UNKNOWN :
		     pair_find(&t->objs, owner, obj, blk) ? FRAME_SHADOW_DIRTY : 0;
	pthread_mutex_unlock(&t->mx);
	return r;
}

bool fmark_tab_has(struct fmark_tab *t, uint32_t owner, uint64_t obj,
		   uint64_t blk)
{
	if (owner >= FMARK_OWNERS)
		return false;
	pthread_mutex_lock(&t->mx);
	bool has = pair_find(&t->objs, owner, obj, blk) != NULL;
	pthread_mutex_unlock(&t->mx);
	return has;
}

uint64_t fmark_tab_seq(struct fmark_tab *t, uint32_t owner, uint64_t obj,
		       uint64_t blk)
{
	if (owner >= FMARK_OWNERS)
		return 0;
	pthread_mutex_lock(&t->mx);
	struct fm_pair *p = pair_find(&t->objs, owner, obj, blk);
	uint64_t seq = p ? p->seq : 0;
	pthread_mutex_unlock(&t->mx);
	return seq;
}

size_t fmark_tab_count(struct fmark_tab *t)
{
	pthread_mutex_lock(&t->mx);
	size_t n = t->objs.count;
	pthread_mutex_unlock(&t->mx);
	return n;
}

uint64_t fmark_tab_top_seq(struct fmark_tab *t, uint32_t owner, bool *synced)
{
	uint64_t top = 0;

	*synced = false;
	if (owner >= FMARK_OWNERS)
		return 0;
	pthread_mutex_lock(&t->mx);
	*synced = t->synced[owner];
	for (size_t b = 0; b < OBJ_BUCKETS; b++)
		for (struct fm_obj *o = t->objs.b[b]; o; o = o->next)
			for (size_t i = 0; o->owner == owner && i < o->n; i++)
				if (o->v[i].seq > top)
					top = o->v[i].seq;
	pthread_mutex_unlock(&t->mx);
	return top;
}

size_t fmark_tab_clear_owner(struct fmark_tab *t, uint32_t owner, uint64_t max_seq)
{
	size_t gone = 0;

	if (owner >= FMARK_OWNERS)
		return 0;
	pthread_mutex_lock(&t->mx);
	for (size_t b = 0; b < OBJ_BUCKETS; b++)
		for (struct fm_obj **pp = &t->objs.b[b]; *pp;) {
			struct fm_obj *o = *pp;
			if (o->owner != owner) {
				pp = &o->next;
				continue;
			}
			size_t k = 0;
			for (size_t i = 0; i < o->n; i++)
				if (o->v[i].seq > max_seq)
					o->v[k++] = o->v[i];
			gone += o->n - k;
			t->objs.count -= o->n - k;
			o->n = k;
			obj_free_if_empty(pp);
			if (*pp == o)
				pp = &o->next;
		}
	pthread_mutex_unlock(&t->mx);
	return gone;
}
