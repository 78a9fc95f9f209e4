/* pagestore.c - the DRAM page table of a node's page service; see
 * pagestore.h for the version rules. A chained hash table of entries, each
 * one allocation holding its 4 KiB page, so memory follows what is stored.
 * (A page-aligned page of its own cost 8.5 KiB of RSS per stored page:
 * posix_memalign's padding is not reused; this costs 4.1 KiB.) */
#include "cluster/pagestore.h"

#include "common/xor.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct entry {
	struct entry *next;
	struct pagestore_key key;
	uint64_t version;
	_Alignas(16) uint8_t page[PAGESTORE_PAGE];
};

/* Pages per owner (one per swap device: a handful), for the stats. */
struct owner_count {
	uint64_t owner, pages;
};

struct pagestore {
	pthread_mutex_t lock;
	struct entry **buckets;
	uint64_t nbuckets;      /* power of two */
	uint64_t limit;
	struct pagestore_stats st;
	unsigned n_owners;
	struct owner_count owners[PAGESTORE_MAX_OWNERS];
};

/* Caller holds the lock. A page of owner came (+1) or went (-1). */
static void owner_count(struct pagestore *ps, uint64_t owner, int delta)
{
	unsigned i;

	for (i = 0; i < ps->n_owners && ps->owners[i].owner != owner; i++)
		;
	if (i == ps->n_owners) {
		if (delta < 0 || i == PAGESTORE_MAX_OWNERS) {
			ps->st.owners_untracked_pages += (uint64_t)(int64_t)delta;
			return;
		}
		ps->owners[ps->n_owners++] = (struct owner_count){ owner, 0 };
	}
	ps->owners[i].pages += (uint64_t)(int64_t)delta;
	if (!ps->owners[i].pages)
		ps->owners[i] = ps->owners[--ps->n_owners];
}

static uint64_t key_hash(const struct pagestore_key *k)
{
	/* splitmix64 finaliser over the mixed fields */
	uint64_t x = k->owner * 0x9E3779B97F4A7C15ULL ^ k->id ^ ((uint64_t)k->kind << 63);
	x ^= x >> 30;
	x *= 0xBF58476D1CE4E5B9ULL;
	x ^= x >> 27;
	x *= 0x94D049BB133111EBULL;
	return x ^ (x >> 31);
}

static bool key_eq(const struct pagestore_key *a, const struct pagestore_key *b)
{
	return a->owner == b->owner && a->kind == b->kind && a->id == b->id;
}

int pagestore_open(struct pagestore **out, uint64_t limit_pages,
		   uint64_t expected_pages)
{
	struct pagestore *ps = calloc(1, sizeof(*ps));
	uint64_t nb = 1024;

	if (!ps)
		return -ENOMEM;
	while (nb < expected_pages && nb < (1ULL << 22))
		nb <<= 1;
	ps->buckets = calloc(nb, sizeof(*ps->buckets));
	if (!ps->buckets) {
		free(ps);
		return -ENOMEM;
	}
	ps->nbuckets = nb;
	ps->limit = limit_pages;
	pthread_mutex_init(&ps->lock, NULL);
	*out = ps;
	return 0;
}

void pagestore_close(struct pagestore *ps)
{
	if (!ps)
		return;
	for (uint64_t i = 0; i < ps->nbuckets; i++) {
		struct entry *e = ps->buckets[i];
		while (e) {
			struct entry *n = e->next;
			free(e);
			e = n;
		}
	}
	free(ps->buckets);
	pthread_mutex_destroy(&ps->lock);
	free(ps);
}

void pagestore_set_limit(struct pagestore *ps, uint64_t limit_pages)
{
	pthread_mutex_lock(&ps->lock);
	ps->limit = limit_pages;
	pthread_mutex_unlock(&ps->lock);
}

/* Caller holds the lock. *prevp: the link pointing at the result. */
static struct entry *find(struct pagestore *ps, const struct pagestore_key *k,
			  struct entry ***prevp)
{
	struct entry **pp = &ps->buckets[key_hash(k) & (ps->nbuckets - 1)];

	for (; *pp; pp = &(*pp)->next) {
		if (key_eq(&(*pp)->key, k)) {
			if (prevp)
				*prevp = pp;
			return *pp;
		}
	}
	if (prevp)
		*prevp = pp;
	return NULL;
}

/* Caller holds the lock; counts and limits checked by the caller. */
static struct entry *insert(struct pagestore *ps, const struct pagestore_key *k,
			    struct entry **link)
{
	struct entry *e = malloc(sizeof(*e));
	if (!e)
		return NULL;
	e->key = *k;
	e->version = 0;
	e->next = NULL;
	*link = e;
	owner_count(ps, k->owner, 1);
	ps->st.pages++;
	if (k->kind == FK_PARITY)
		ps->st.parity_pages++;
	else
		ps->st.data_pages++;
	return e;
}

static void unlink_entry(struct pagestore *ps, struct entry **link)
{
	struct entry *e = *link;

	*link = e->next;
	owner_count(ps, e->key.owner, -1);
	ps->st.pages--;
	if (e->key.kind == FK_PARITY)
		ps->st.parity_pages--;
	else
		ps->st.data_pages--;
	free(e);
}

int pagestore_store(struct pagestore *ps, const struct pagestore_key *k,
		    uint64_t version, const void *page)
{
	struct entry **link;
	int rc = 0;

	if (k->kind >= FK_COUNT)
		return -EINVAL;
	pthread_mutex_lock(&ps->lock);
	struct entry *e = find(ps, k, &link);
	if (e && e->version > version) {
		ps->st.stale_refused++;
		rc = -ESTALE;
	} else if (!e && ps->st.pages >= ps->limit) {
		ps->st.nospace_refused++;
		rc = -ENOSPC;
	} else if (!e && !(e = insert(ps, k, link))) {
		rc = -ENOMEM;
	} else {
		memcpy(e->page, page, PAGESTORE_PAGE);
		e->version = version;
		ps->st.stores++;
	}
	pthread_mutex_unlock(&ps->lock);
	return rc;
}

int pagestore_fetch(struct pagestore *ps, const struct pagestore_key *k,
		    uint64_t version, void *page, uint64_t *version_out)
{
	int rc = 0;

	pthread_mutex_lock(&ps->lock);
	struct entry *e = find(ps, k, NULL);
	if (!e) {
		ps->st.not_found++;
		rc = -ENOENT;
	} else {
		if (version_out)
			*version_out = e->version;
		if (version && e->version != version) {
			ps->st.stale_refused++;
			rc = -ESTALE;
		} else {
			memcpy(page, e->page, PAGESTORE_PAGE);
			ps->st.fetches++;
		}
	}
	pthread_mutex_unlock(&ps->lock);
	return rc;
}

int pagestore_drop(struct pagestore *ps, const struct pagestore_key *k,
		   uint64_t version)
{
	struct entry **link;
	int rc = 0;

	pthread_mutex_lock(&ps->lock);
	struct entry *e = find(ps, k, &link);
	if (!e) {
		ps->st.not_found++;
		rc = -ENOENT;
	} else if (e->version > version) {
		ps->st.stale_refused++;
		rc = -ESTALE;
	} else {
		unlink_entry(ps, link);
		ps->st.drops++;
	}
	pthread_mutex_unlock(&ps->lock);
	return rc;
}

int pagestore_xor(struct pagestore *ps, const struct pagestore_key *k,
		  uint64_t version, const void *delta)
{
	struct entry **link;
	int rc = 0;

	if (k->kind >= FK_COUNT)
		return -EINVAL;
	pthread_mutex_lock(&ps->lock);
	struct entry *e = find(ps, k, &link);
	if (!e && ps->st.pages >= ps->limit) {
		ps->st.nospace_refused++;
		rc = -ENOSPC;
	} else {
		if (!e) {
			e = insert(ps, k, link);
			if (!e) {
				pthread_mutex_unlock(&ps->lock);
				return -ENOMEM;
			}
			memset(e->page, 0, PAGESTORE_PAGE); /* XOR of no pages */
		}
		xor_into(e->page, delta, PAGESTORE_PAGE);
		if (version > e->version)
			e->version = version;
		ps->st.xors++;
	}
	pthread_mutex_unlock(&ps->lock);
	return rc;
}

uint64_t pagestore_drop_owner(struct pagestore *ps, uint64_t owner)
{
	uint64_t n = 0;

	pthread_mutex_lock(&ps->lock);
	for (uint64_t i = 0; i < ps->nbuckets; i++) {
		struct entry **pp = &ps->buckets[i];
		while (*pp) {
			if ((*pp)->key.owner == owner) {
				unlink_entry(ps, pp);
				n++;
			} else {
				pp = &(*pp)->next;
			}
		}
	}
	ps->st.drops += n;
	pthread_mutex_unlock(&ps->lock);
	return n;
}

void pagestore_get_stats(struct pagestore *ps, struct pagestore_stats *st)
{
	pthread_mutex_lock(&ps->lock);
	*st = ps->st;
	st->limit = ps->limit;
	st->owners = ps->n_owners + (ps->st.owners_untracked_pages ? 1 : 0);
	pthread_mutex_unlock(&ps->lock);
}
