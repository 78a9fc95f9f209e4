/* pagestore.h - a node's store for other nodes' pages (Nswap's "Nswap
 * Cache"): 4 KiB data pages keyed by (owner, page id) and parity pages
 * keyed by (owner, parity group), each with the owner's version counter.
 *
 * This is the small interface the page service uses. By default it is a
 * DRAM hash table (memory is taken per page, about 4.1 KiB of RSS each, and
 * given back to the allocator on drop, for the next stores to reuse).
 * Opened tiered (nvcached --tier-size), the pages live in a tierstore
 * (pmem/tierstore.h: MRAM, DRAM and a flash file, placed by its tiering
 * policy) of a fixed page space, and the table keeps only keys, versions
 * and slots. A flash error there fails the store, fetch or parity update
 * with -EIO and drops the page: a later fetch finds nothing (its owner
 * rebuilds it) rather than wrong bytes.
 *
 * Versions resolve racing operations (Nswap's usage/migration counts):
 *   store  refused (-ESTALE) if the stored version is newer; an equal
 *          version overwrites (a retried store is harmless);
 *   fetch  with version v != 0: -ESTALE unless the stored version is v;
 *   drop   with version v: -ESTALE if the stored version is newer than v
 *          (a newer write arrived; the drop was about the old one);
 *   xor    parity: page ^= delta, creating a zero page when absent; the
 *          stored version becomes max(stored, v).
 * A limit (pages) caps what the store accepts: stores of new keys beyond it
 * fail -ENOSPC; overwrites and drops always work. Lowering the limit below
 * what is held frees nothing by itself (the caller migrates; over_limit
 * in the stats says by how much).
 *
 * Threads: every function may be called from any thread; one mutex guards
 * the table and the counters; page copies happen under it. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cluster/frame.h"

#define PAGESTORE_PAGE FRAME_PAGE_SIZE

struct pagestore;

struct pagestore_key {
	uint64_t owner;
	uint32_t kind;          /* FK_DATA or FK_PARITY */
	uint64_t id;            /* page id, or parity group */
};

/* Owners whose pages are counted one by one; pages of more owners than
 * this are counted together (owners_untracked_pages, and one more owner in
 * owners: approximate only beyond this many). */
#define PAGESTORE_MAX_OWNERS 256

struct pagestore_stats {
	uint64_t pages, data_pages, parity_pages, limit;
	uint64_t owners;                /* owners with at least one page here */
	uint64_t owners_untracked_pages;
	uint64_t stores, fetches, drops, xors;
	uint64_t stale_refused, nospace_refused, not_found;
};

/* expected_pages sizes the hash table (it still works beyond it). */
int pagestore_open(struct pagestore **out, uint64_t limit_pages,
		   uint64_t expected_pages);
struct tierstore_opts;
/* Tiered: at most to->pages pages (the limit starts there; a store of a
 * new key beyond them fails -ENOSPC whatever the limit). Errors are
 * tierstore_open's (logged), -EINVAL for more than 2^32 pages. */
int pagestore_open_tiered(struct pagestore **out, uint64_t expected_pages,
			  const struct tierstore_opts *to);
/* Tiered: the tierstore's "key: value" stats lines (policy, tiers, MRAM
 * hit rate, the model's time and energy); 0 bytes when not tiered. */
ssize_t pagestore_tier_stats(struct pagestore *ps, char *out, size_t len);
void pagestore_close(struct pagestore *ps);
void pagestore_set_limit(struct pagestore *ps, uint64_t limit_pages);
/* Pages held now. Neither this nor pagestore_set_limit takes the lock
 * (a node's heartbeats and capacity updates must not wait behind a page
 * copy or a tiered store's flash I/O). */
uint64_t pagestore_pages(struct pagestore *ps);

/* 0 or -ESTALE, -ENOSPC, -ENOMEM, -EINVAL (bad kind), -EIO (tiered). */
int pagestore_store(struct pagestore *ps, const struct pagestore_key *k,
		    uint64_t version, const void *page);
/* 0 or -ENOENT, -ESTALE, -EIO (tiered). *version_out (may be NULL) gets
 * the stored one. */
int pagestore_fetch(struct pagestore *ps, const struct pagestore_key *k,
		    uint64_t version, void *page, uint64_t *version_out);
/* 0 or -ENOENT, -ESTALE. */
int pagestore_drop(struct pagestore *ps, const struct pagestore_key *k,
		   uint64_t version);
/* Parity update: delta XORed into the page (deltas commute: any order).
 * 0 or -ESTALE (version not past the page's last whole store: a delta
 * that store already left out, not applied), -ENOSPC (a new parity page
 * over the limit), -ENOMEM, -EIO (tiered). */
int pagestore_xor(struct pagestore *ps, const struct pagestore_key *k,
		  uint64_t version, const void *delta);
/* Drop every page of owner; returns how many. */
uint64_t pagestore_drop_owner(struct pagestore *ps, uint64_t owner);

void pagestore_get_stats(struct pagestore *ps, struct pagestore_stats *st);
