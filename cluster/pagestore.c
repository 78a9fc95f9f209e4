/* pagestore.c - the page table of a node's page service; see pagestore.h
 * for the version rules. A chained hash table of entries. In DRAM (the
 * default) each entry is one allocation holding its 4 KiB page, so memory
 * follows what is stored. (A page-aligned page of its own cost 8.5 KiB of
 * RSS per stored page: posix_memalign's padding is not reused; this costs
 * 4.1 KiB.) Tiered, an entry holds a slot of a tierstore's page space
 * instead, and the page lives where the store's policy puts it. */
#include "cluster/pagestore.h"
#include "pmem/tierstore.h"

#include "common/log.h"
#include "common/xor.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct entry {
	struct entry *next;
	struct pagestore_key key;
	uint64_t version;
	/* Parity: the version of its last whole store. A delta sent before
	 * it (version <= base) is late: the store already holds what the
	 * owner computed without it. Deltas after it commute (XOR), so they
	 * apply in whatever order they come (from several data nodes). */
	uint64_t base;
	uint32_t slot;          /* tiered: the page's place in the tierstore */
	/* DRAM: PAGESTORE_PAGE bytes; a tiered entry is allocated without */
	_Alignas(16) uint8_t page[];
};

/* Pages per owner (one per swap device: a handful), for the stats. */
struct owner_count {
	uint64_t owner, pages;
};

struct pagestore {
	pthread_mutex_t lock;
	struct entry **buckets;
	uint64_t nbuckets;      /* power of two */
	/* Read without the lock (pagestore_pages, the limit): a node's
	 * heartbeats must not wait behind a page copy or a flash I/O. */
	_Atomic uint64_t limit;
	_Atomic uint64_t npages;
	struct pagestore_stats st;
	unsigned n_owners;
	struct owner_count owners[PAGESTORE_MAX_OWNERS];
	/* tiered: the page store and its free slots (a stack) */
	struct tierstore *ts;
	uint32_t *free_slots;
	uint64_t nfree;
	_Alignas(64) uint8_t tmp[PAGESTORE_PAGE];   /* xor, under the lock */
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
	atomic_store(&ps->limit, limit_pages);
	pthread_mutex_init(&ps->lock, NULL);
	*out = ps;
	return 0;
}

int pagestore_open_tiered(struct pagestore **out, uint64_t expected_pages,
			  const struct tierstore_opts *to)
{
	struct pagestore *ps;
	int rc = pagestore_open(&ps, to->pages, expected_pages);
	if (rc)
		return rc;
	if (to->pages > UINT32_MAX) {
		log_err("tiered store: at most %u pages", UINT32_MAX);
		pagestore_close(ps);
		return -EINVAL;
	}
	ps->free_slots = malloc(to->pages * sizeof(uint32_t));
	if (!ps->free_slots) {
		pagestore_close(ps);
		return -ENOMEM;
	}
	/* Lowest slot on top: a lightly used store stays at the start of
	 * the flash file. */
	for (uint64_t i = 0; i < to->pages; i++)
		ps->free_slots[i] = (uint32_t)(to->pages - 1 - i);
	ps->nfree = to->pages;
	if ((rc = tierstore_open(&ps->ts, to)) < 0) {
		pagestore_close(ps);
		return rc;
	}
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
	if (ps->ts)
		tierstore_close(ps->ts);
	free(ps->free_slots);
	pthread_mutex_destroy(&ps->lock);
	free(ps);
}

/* --- the page of an entry: inline (DRAM) or in the tierstore ---------- */

static uint64_t slot_off(const struct entry *e)
{
	return (uint64_t)e->slot * PAGESTORE_PAGE;
}

static int page_get(struct pagestore *ps, const struct entry *e, void *buf)
{
	if (!ps->ts) {
		memcpy(buf, e->page, PAGESTORE_PAGE);
		return 0;
	}
	return tierstore_pread(ps->ts, buf, slot_off(e), PAGESTORE_PAGE);
}

static int page_put(struct pagestore *ps, struct entry *e, const void *buf)
{
	if (!ps->ts) {
		memcpy(e->page, buf, PAGESTORE_PAGE);
		return 0;
	}
	return tierstore_pwrite(ps->ts, buf, slot_off(e), PAGESTORE_PAGE);
}

/* page ^= delta. A new tiered entry's slot was never written or was
 * trimmed: it reads as zeros, the XOR of no pages. */
static int page_xor(struct pagestore *ps, struct entry *e, const void *delta)
{
	if (!ps->ts) {
		xor_into(e->page, delta, PAGESTORE_PAGE);
		return 0;
	}
	int rc = page_get(ps, e, ps->tmp);
	if (rc == 0) {
		xor_into(ps->tmp, delta, PAGESTORE_PAGE);
		rc = page_put(ps, e, ps->tmp);
	}
	return rc;
}

void pagestore_set_limit(struct pagestore *ps, uint64_t limit_pages)
{
	atomic_store(&ps->limit, limit_pages);
}

uint64_t pagestore_pages(struct pagestore *ps)
{
	return atomic_load(&ps->npages);
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
	if (ps->ts && !ps->nfree)
		return NULL;
	struct entry *e = malloc(sizeof(*e) + (ps->ts ? 0 : PAGESTORE_PAGE));
	if (!e)
		return NULL;
	if (ps->ts)
		e->slot = ps->free_slots[--ps->nfree];
	e->key = *k;
	e->version = 0;
	e->base = 0;
	e->next = NULL;
	*link = e;
	owner_count(ps, k->owner, 1);
	ps->st.pages++;
	atomic_store(&ps->npages, ps->st.pages);
	if (k->kind == FK_PARITY)
		ps->st.parity_pages++;
	else
		ps->st.data_pages++;
	return e;
}

/* Caller holds the lock: no room for a new key. */
static bool full(const struct pagestore *ps)
{
	return ps->st.pages >= atomic_load(&ps->limit) || (ps->ts && !ps->nfree);
}

static void unlink_entry(struct pagestore *ps, struct entry **link)
{
	struct entry *e = *link;

	*link = e->next;
	if (ps->ts) {
		/* The slot reads as zeros again and holds no memory. */
		tierstore_trim(ps->ts, slot_off(e), PAGESTORE_PAGE);
		ps->free_slots[ps->nfree++] = e->slot;
	}
	owner_count(ps, e->key.owner, -1);
	ps->st.pages--;
	atomic_store(&ps->npages, ps->st.pages);
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
	} else if (!e && full(ps)) {
		ps->st.nospace_refused++;
		rc = -ENOSPC;
	} else if (!e && !(e = insert(ps, k, link))) {
		rc = -ENOMEM;
	} else if ((rc = page_put(ps, e, page)) < 0) {
		/* The tierstore's flash failed (logged there). A page whose
		 * bytes are uncertain is not kept, the old version neither:
		 * a fetch finds nothing (the owner rebuilds from its mirror
		 * or parity) rather than wrong bytes. */
		unlink_entry(ps, link);
	} else {
		e->version = version;
		e->base = version;
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
		} else if ((rc = page_get(ps, e, page)) == 0) {
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
	if (e && version <= e->base) {
		/* Sent before the page's last whole store (its owner rebuilt
		 * it meanwhile, without this delta: a request that sat in a
		 * stalled node's socket runs after the owner gave up on it).
		 * Deltas are not idempotent: applied, it would corrupt the
		 * page, and the next failure would rebuild wrong bytes.
		 * Refused; the owner, if it still waits, recomputes the page. */
		ps->st.stale_refused++;
		rc = -ESTALE;
	} else if (!e && full(ps)) {
		ps->st.nospace_refused++;
		rc = -ENOSPC;
	} else {
		if (!e) {
			e = insert(ps, k, link);
			if (!e) {
				pthread_mutex_unlock(&ps->lock);
				return -ENOMEM;
			}
			if (!ps->ts)   /* a tiered slot reads as zeros already */
				memset(e->page, 0, PAGESTORE_PAGE); /* XOR of no pages */
		}
		if ((rc = page_xor(ps, e, delta)) == 0) {
			if (version > e->version)
				e->version = version;
			ps->st.xors++;
		} else {
			unlink_entry(ps, link);   /* as a failed store */
		}
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
	st->limit = atomic_load(&ps->limit);
	st->owners = ps->n_owners + (ps->st.owners_untracked_pages ? 1 : 0);
	pthread_mutex_unlock(&ps->lock);
}

ssize_t pagestore_tier_stats(struct pagestore *ps, char *out, size_t len)
{
	if (!ps->ts || len == 0)
		return 0;
	return tierstore_stats_format(ps->ts, out, len);
}
