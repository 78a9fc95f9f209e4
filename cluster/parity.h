/* parity.h - parity group bookkeeping for the remote swap's parity modes
 * (Nswap's dynamic parity, paper sections III-IV): which slots make up a
 * group, on which node each lives, which node holds the group's parity
 * page, and the XOR arithmetic. No I/O here: cluster/remote/ does
 * the network side and calls these under its locks.
 *
 * A group is OPEN while it fills: its parity page is the client's own
 * parity-logging buffer (the "parity pool"); every member on a different
 * node. When it has N members (or no node is left that is not in it) it
 * is CLOSED: the parity page is sent to the parity node and the buffer is
 * reused. Members leave a group (TRIM, re-homing after a loss, merging)
 * by XORing their contents out of the parity page.
 *
 * Threads: nothing here locks; the caller serialises access to a group
 * (cluster/remote/: the group's lock stripe) and to the free list
 * (parity_group_alloc/free take the table's own mutex). */
#pragma once
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PARITY_MAX_N 8          /* largest group */
#define PARITY_NO_NODE 0xff
#define PARITY_PAGE 4096

enum parity_state { PG_FREE = 0, PG_OPEN, PG_CLOSED };

struct parity_member {
	uint64_t slot;
	uint64_t version;
	uint8_t node;           /* node index */
	uint8_t gen;            /* the node's generation at placement */
};

struct parity_group {
	uint8_t state;          /* enum parity_state */
	uint8_t nmem;
	uint8_t pn;             /* parity node index; PARITY_NO_NODE: none
				 * (open, or parity lost) */
	uint8_t pgen;           /* pn's generation when parity was stored */
	uint8_t parity_lost;    /* closed, but its parity page must be
				 * rebuilt from the members */
	uint64_t pkey;          /* the parity page's key on the node: the
				 * group id and an allocation epoch, so a
				 * reused id never meets an old page */
	uint64_t pver;          /* last version sent with a parity update */
	uint8_t *local;         /* open: the parity-logging buffer */
	struct parity_member m[PARITY_MAX_N];
};

/* The group table grows by chunks, and a chunk never moves: a group's
 * address stays valid while other threads allocate. It starts with room
 * for the usual layout (groups of N) and grows, up to `max`, only when the
 * layout degrades: with few nodes left groups shrink (a one-member group
 * is a mirror), so that a page always finds a group. */
#define PARITY_CHUNK 1024u      /* groups per chunk (~224 KiB) */

struct parity_table {
	struct parity_group **chunk;    /* max / PARITY_CHUNK (rounded up) */
	_Atomic uint32_t n;             /* ids below n exist */
	uint32_t max;
	uint32_t *free;         /* stack of free group ids, room for max */
	uint32_t nfree;
	uint32_t epoch;
	uint32_t grows;         /* chunks added after init */
	unsigned gsize;         /* N: data pages per group */
	pthread_mutex_t lock;   /* the free list, growth */
};

/* ngroups groups now (at least 1), up to max_groups later (>= ngroups), of
 * up to gsize (2..PARITY_MAX_N) members. 0 or -EINVAL, -ENOMEM. */
int parity_table_init(struct parity_table *t, uint32_t ngroups,
		      uint32_t max_groups, unsigned gsize);
void parity_table_fini(struct parity_table *t);
static inline struct parity_group *parity_group_at(struct parity_table *t, uint32_t id)
{
	return &t->chunk[id / PARITY_CHUNK][id % PARITY_CHUNK];
}
/* How many ids exist now (acquire: their chunks are there). */
static inline uint32_t parity_table_size(struct parity_table *t)
{
	return atomic_load_explicit(&t->n, memory_order_acquire);
}
/* Bytes the table holds now: its chunks and the free list. */
uint64_t parity_table_bytes(struct parity_table *t);
/* A fresh OPEN group (no members, parity buffer local), its id; the table
 * grows by a chunk when every group is in use; -ENOSPC at max (or when
 * the chunk cannot be allocated). */
int64_t parity_group_alloc(struct parity_table *t, uint8_t *local);
void parity_group_free(struct parity_table *t, uint32_t id);
uint32_t parity_groups_used(struct parity_table *t);

/* Member bookkeeping. add: 0, -ENOSPC (group full), -EEXIST (a member
 * already lives on that node). find: index or -ENOENT. remove: by index
 * (order is not kept). */
int parity_member_add(struct parity_group *g, unsigned gsize, uint64_t slot,
		      uint64_t version, uint8_t node, uint8_t gen);
int parity_member_find(const struct parity_group *g, uint64_t slot);
void parity_member_remove(struct parity_group *g, unsigned idx);
bool parity_group_has_node(const struct parity_group *g, uint8_t node);
/* A closed group with so few members that its parity page costs more than
 * it protects: merge its members into open groups. */
bool parity_group_sparse(const struct parity_group *g, unsigned gsize);

/* XOR arithmetic. delta = old ^ new: applied to a parity page it takes the
 * old contents out and puts the new in (a page joins: old = zeros; leaves:
 * new = zeros). */
void parity_delta(void *delta, const void *old_page, const void *new_page);
/* out = parity ^ pages[0] ^ ... ^ pages[n-1]: the missing member. */
void parity_reconstruct(void *out, const void *parity,
			const void *const *pages, unsigned n);
