/* locktab.c - the cluster's file locks (locktab.h).
 *
 * A file with a lock or a wait has a record in a chained hash table; each
 * record keeps its held ranges per class in an unordered list. Waits live
 * in one table-wide list in arrival order (a file's waits are that list
 * filtered by file), which also serves the deadlock walk. A record goes
 * when its last lock and wait go. */
#include "cluster/locktab.h"

#include <errno.h>
#include <stdlib.h>

#define LT_BUCKETS 4096u

struct lt_file;

struct lt_lock {
	struct lt_owner who;
	struct lt_range r;
	struct lt_lock *next;
};

struct lt_wait {
	struct lt_owner who;
	struct lt_range r;
	enum lt_class cls;
	uint64_t id;
	struct lt_file *f;
	struct lt_wait *next, *prev;
};

struct lt_file {
	uint64_t id;
	struct lt_lock *locks[2];   /* by class */
	size_t nwaits;
	struct lt_file *hnext;
};

struct locktab {
	struct lt_file *bucket[LT_BUCKETS];
	struct lt_wait *whead, *wtail;
	size_t max, nfiles, nlocks, nwaits;
	bool record;   /* locktab_record_only */
	lt_granted_fn granted;
	void *arg;
};

static size_t hash(uint64_t id)
{
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdull;
	id ^= id >> 33;
	return (size_t)(id % LT_BUCKETS);
}

static bool same_owner(const struct lt_owner *a, const struct lt_owner *b)
{
	return a->node == b->node && a->client == b->client &&
	       a->owner == b->owner;
}

static bool overlap(const struct lt_range *a, const struct lt_range *b)
{
	return a->start <= b->end && b->start <= a->end;
}

static bool touch(const struct lt_range *a, const struct lt_range *b)
{
	return overlap(a, b) || a->end + 1 == b->start || b->end + 1 == a->start;
}

static bool conflicts(const struct lt_range *held, const struct lt_range *r)
{
	return overlap(held, r) &&
	       (held->type == LT_WRLCK || r->type == LT_WRLCK);
}

int locktab_new(struct locktab **out, size_t max_locks, lt_granted_fn granted,
		void *arg)
{
	struct locktab *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->max = max_locks ? max_locks : (size_t)1 << 20;
	t->granted = granted;
	t->arg = arg;
	*out = t;
	return 0;
}

static struct lt_file *file_find(struct locktab *t, uint64_t id, bool make)
{
	struct lt_file **pp = &t->bucket[hash(id)];
	for (struct lt_file *f = *pp; f; f = f->hnext)
		if (f->id == id)
			return f;
	if (!make)
		return NULL;
	struct lt_file *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->id = id;
	f->hnext = *pp;
	*pp = f;
	t->nfiles++;
	return f;
}

/* Free f if nothing is left in it. */
static void file_put(struct locktab *t, struct lt_file *f)
{
	if (f->locks[0] || f->locks[1] || f->nwaits)
		return;
	for (struct lt_file **pp = &t->bucket[hash(f->id)]; *pp;
	     pp = &(*pp)->hnext)
		if (*pp == f) {
			*pp = f->hnext;
			break;
		}
	free(f);
	t->nfiles--;
}

void locktab_free(struct locktab *t)
{
	if (!t)
		return;
	for (struct lt_wait *w = t->whead, *n; w; w = n) {
		n = w->next;
		free(w);
	}
	for (size_t b = 0; b < LT_BUCKETS; b++)
		for (struct lt_file *f = t->bucket[b], *fn; f; f = fn) {
			fn = f->hnext;
			for (int c = 0; c < 2; c++)
				for (struct lt_lock *l = f->locks[c], *ln; l;
				     l = ln) {
					ln = l->next;
					free(l);
				}
			free(f);
		}
	free(t);
}

static const struct lt_lock *first_conflict(const struct lt_file *f,
					    enum lt_class c,
					    const struct lt_owner *o,
					    const struct lt_range *r)
{
	for (const struct lt_lock *l = f->locks[c]; l; l = l->next)
		if (!same_owner(&l->who, o) && conflicts(&l->r, r))
			return l;
	return NULL;
}

static int range_check(const struct lt_range *r)
{
	if (r->start > r->end || r->end > LT_EOF ||
	    (r->type != LT_UNLCK && r->type != LT_RDLCK &&
	     r->type != LT_WRLCK))
		return -EINVAL;
	return 0;
}

/* Replace what o holds of r's range by r (LT_UNLCK: by nothing). Never
 * fails: what needs memory is allocated before anything changes. */
static int apply(struct locktab *t, struct lt_file *f, enum lt_class c,
		 const struct lt_owner *o, const struct lt_range *r, bool unlock)
{
	/* at most one new lock (r itself) and one split (a held range cut
	 * in two by r) */
	struct lt_lock *spare[2];
	size_t nspare = 0;
	size_t need = unlock ? 1 : 2;
	for (; nspare < need; nspare++)
		if (!(spare[nspare] = malloc(sizeof(struct lt_lock)))) {
			while (nspare)
				free(spare[--nspare]);
			return -ENOMEM;
		}

	struct lt_range nr = *r;
	bool grew;
again:
	grew = false;
	struct lt_lock **pp = &f->locks[c];
	while (*pp) {
		struct lt_lock *l = *pp;
		if (!same_owner(&l->who, o)) {
			pp = &l->next;
			continue;
		}
		if (!unlock && l->r.type == r->type && touch(&l->r, &nr)) {
			/* same type: merge into the new range (which may
			 * now touch a range passed over: look again) */
			if (l->r.start < nr.start)
				nr.start = l->r.start, grew = true;
			if (l->r.end > nr.end)
				nr.end = l->r.end, grew = true;
		} else if (overlap(&l->r, r)) {
			/* keep the parts outside r */
			bool left = l->r.start < r->start;
			bool right = l->r.end > r->end;
			if (left && right) {
				struct lt_lock *rl = spare[--nspare];
				*rl = *l;
				rl->r.start = r->end + 1;
				rl->next = l->next;
				l->next = rl;
				l->r.end = r->start - 1;
				t->nlocks++;
				pp = &rl->next;
				continue;
			}
			if (left) {
				l->r.end = r->start - 1;
				pp = &l->next;
				continue;
			}
			if (right) {
				l->r.start = r->end + 1;
				pp = &l->next;
				continue;
			}
		} else {
			pp = &l->next;
			continue;
		}
		*pp = l->next;
		free(l);
		t->nlocks--;
	}
	if (grew)
		goto again;
	if (!unlock) {
		struct lt_lock *nl = spare[--nspare];
		nl->who = *o;
		nl->r = nr;
		nl->next = f->locks[c];
		f->locks[c] = nl;
		t->nlocks++;
	}
	while (nspare)
		free(spare[--nspare]);
	return 0;
}

static void wait_unlink(struct locktab *t, struct lt_wait *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		t->whead = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		t->wtail = w->prev;
	w->f->nwaits--;
	t->nwaits--;
}

/* Grant f's waits that nothing held blocks, earlier ones first, until a
 * pass grants none (a grant can change its owner's other ranges). */
static void grant(struct locktab *t, struct lt_file *f)
{
	bool again = true;
	while (again && f->nwaits) {
		again = false;
		for (struct lt_wait *w = t->whead, *n; w; w = n) {
			n = w->next;
			if (w->f != f || first_conflict(f, w->cls, &w->who, &w->r))
				continue;
			if (apply(t, f, w->cls, &w->who, &w->r, false) < 0)
				continue;  /* no memory now: a later pass */
			wait_unlink(t, w);
			if (t->granted)
				t->granted(t->arg, w->id, &w->who);
			free(w);
			again = true;
		}
	}
}

/* Would o, waiting for holder, close a cycle of waits? */
static bool deadlock(struct locktab *t, const struct lt_owner *o,
		     const struct lt_owner *holder)
{
	struct lt_owner h = *holder;
	for (int depth = 0; depth < LT_DEADLOCK_DEPTH; depth++) {
		if (same_owner(&h, o))
			return true;
		const struct lt_lock *next = NULL;
		for (struct lt_wait *w = t->whead; w && !next; w = w->next)
			if (w->cls == LT_POSIX && same_owner(&w->who, &h))
				next = first_conflict(w->f, LT_POSIX, &w->who,
						      &w->r);
		if (!next)
			return false;
		h = next->who;
	}
	return false;
}

int locktab_set(struct locktab *t, uint64_t file, enum lt_class c,
		const struct lt_owner *o, const struct lt_range *r, bool wait,
		uint64_t wait_id, struct lt_holder *holder)
{
	int rc = range_check(r);
	if (rc < 0 || (c != LT_POSIX && c != LT_FLOCK))
		return rc < 0 ? rc : -EINVAL;
	bool unlock = r->type == LT_UNLCK;
	struct lt_file *f = file_find(t, file, !unlock);
	if (!f)
		return unlock ? 0 : -ENOMEM;
	if (!unlock) {
		const struct lt_lock *l = t->record ? NULL :
					  first_conflict(f, c, o, r);
		if (l) {
			if (holder) {
				holder->who = l->who;
				holder->r = l->r;
			}
			if (!wait)
				return -EAGAIN;
			if (c == LT_POSIX && deadlock(t, o, &l->who))
				return -EDEADLK;
			if (t->nlocks + t->nwaits >= t->max)
				return -ENOLCK;
			struct lt_wait *w = calloc(1, sizeof(*w));
			if (!w)
				return -ENOMEM;
			w->who = *o;
			w->r = *r;
			w->cls = c;
			w->id = wait_id;
			w->f = f;
			w->prev = t->wtail;
			if (t->wtail)
				t->wtail->next = w;
			else
				t->whead = w;
			t->wtail = w;
			f->nwaits++;
			t->nwaits++;
			return 1;
		}
		if (t->nlocks + t->nwaits + 1 > t->max) {
			file_put(t, f);
			return -ENOLCK;
		}
	}
	rc = apply(t, f, c, o, r, unlock);
	if (rc == 0)
		grant(t, f);
	file_put(t, f);
	return rc;
}

int locktab_get(struct locktab *t, uint64_t file, enum lt_class c,
		const struct lt_owner *o, const struct lt_range *r,
		struct lt_holder *holder)
{
	if (range_check(r) < 0 || (c != LT_POSIX && c != LT_FLOCK))
		return -EINVAL;
	struct lt_file *f = file_find(t, file, false);
	const struct lt_lock *l =
		f && r->type != LT_UNLCK ? first_conflict(f, c, o, r) : NULL;
	if (!l)
		return 0;
	holder->who = l->who;
	holder->r = l->r;
	return 1;
}

int locktab_cancel(struct locktab *t, const struct lt_owner *o,
		   uint64_t wait_id)
{
	for (struct lt_wait *w = t->whead; w; w = w->next)
		if (w->id == wait_id && same_owner(&w->who, o)) {
			struct lt_file *f = w->f;
			wait_unlink(t, w);
			free(w);
			file_put(t, f);
			return 0;
		}
	return -ENOENT;
}

/* Drop the locks of f (classes cls_mask) and the waits (anywhere) that
 * match; grant what that frees; free f if empty. Returns what went. */
typedef bool (*lt_match_fn)(const struct lt_owner *who, const void *key);

static size_t drop_in(struct locktab *t, struct lt_file *f, unsigned cls_mask,
		      lt_match_fn match, const void *key)
{
	size_t n = 0;
	for (int c = 0; c < 2; c++) {
		if (!(cls_mask & (1u << c)))
			continue;
		struct lt_lock **pp = &f->locks[c];
		while (*pp) {
			struct lt_lock *l = *pp;
			if (match(&l->who, key)) {
				*pp = l->next;
				free(l);
				t->nlocks--;
				n++;
			} else {
				pp = &l->next;
			}
		}
	}
	for (struct lt_wait *w = t->whead, *wn; w; w = wn) {
		wn = w->next;
		if (w->f == f && (cls_mask & (1u << w->cls)) &&
		    match(&w->who, key)) {
			wait_unlink(t, w);
			free(w);
			n++;
		}
	}
	if (n)
		grant(t, f);
	file_put(t, f);
	return n;
}

static bool match_owner(const struct lt_owner *who, const void *key)
{
	return same_owner(who, key);
}

struct lt_client_key {
	uint32_t node;
	uint64_t client;
};

static bool match_client(const struct lt_owner *who, const void *key)
{
	const struct lt_client_key *k = key;
	return who->node == k->node && who->client == k->client;
}

static size_t drop_everywhere(struct locktab *t, const struct lt_client_key *k)
{
	size_t n = 0;
	for (size_t b = 0; b < LT_BUCKETS; b++)
		for (struct lt_file *f = t->bucket[b], *fn; f; f = fn) {
			fn = f->hnext;  /* drop_in may free f, never another */
			n += drop_in(t, f, 3u, match_client, k);
		}
	return n;
}

size_t locktab_release_owner(struct locktab *t, uint64_t file, enum lt_class c,
			     const struct lt_owner *o)
{
	struct lt_file *f = file_find(t, file, false);
	if (!f || (c != LT_POSIX && c != LT_FLOCK))
		return 0;
	return drop_in(t, f, 1u << c, match_owner, o);
}

size_t locktab_release_client(struct locktab *t, uint32_t node,
			      uint64_t client)
{
	struct lt_client_key k = { .node = node, .client = client };
	return drop_everywhere(t, &k);
}

void locktab_record_only(struct locktab *t)
{
	t->record = true;
}

size_t locktab_each(const struct locktab *t, lt_each_fn fn, void *arg)
{
	size_t n = 0;
	for (size_t b = 0; b < LT_BUCKETS; b++)
		for (const struct lt_file *f = t->bucket[b]; f; f = f->hnext)
			for (int c = 0; c < 2; c++)
				for (const struct lt_lock *l = f->locks[c]; l;
				     l = l->next) {
					struct lt_holder h = { l->who, l->r };
					fn(arg, f->id, (enum lt_class)c, &h);
					n++;
				}
	return n;
}

void locktab_stats(const struct locktab *t, struct locktab_stats *st)
{
	st->files = t->nfiles;
	st->locks = t->nlocks;
	st->waits = t->nwaits;
}
