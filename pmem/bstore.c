/* bstore.c - crash-consistent keyed block store; see bstore.h for the layout
 * and the commit protocol. */
#include "pmem/bstore.h"

#include "common/crc32c.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SB_MAGIC "NVCBSTO1"
#define SB_VERSION 1u
#define SB_SIZE 4096u
#define OREC_MAGIC 0x4f524543u /* "OREC" */
#define BREC_MAGIC 0x42524543u /* "BREC" */
#define OREC_DEAD 1u
/* The record has utime. Records written before it had a path field of
 * 336 bytes where path and utime now are: without this flag, utime is
 * 0 and a path with no NUL in its first BSTORE_PATH_MAX bytes is
 * dropped (a caller with no path uses the file handle). */
#define OREC_UTIME 2u
#define BREC_DIRTY 1u
#define KEY_LOCKS 256u
#define GONE_SLOTS 16384u /* power of two; see bstore_block_gen */
#define NIL UINT32_MAX

struct sb {
	char magic[8];
	uint32_t version;
	uint32_t crc;
	uint32_t block_size;
	uint32_t nobjs;
	uint64_t nblocks;
	uint64_t region_size;
	uint64_t obj_off, blk_off, data_off;
	char tag[BSTORE_TAG_MAX];
};

struct orec {
	uint32_t magic;
	uint32_t crc;
	uint64_t seq;
	uint64_t id;
	uint64_t size;
	uint32_t flags;
	uint32_t uflags;
	uint32_t htype;
	uint32_t hlen;
	uint8_t handle[BSTORE_HANDLE_MAX];
	char path[BSTORE_PATH_MAX];
	uint64_t utime;
};
_Static_assert(sizeof(struct orec) == 512, "object record is 512 bytes");

struct brec {
	uint32_t magic;
	uint32_t crc;
	uint64_t seq;
	uint64_t obj;
	uint64_t idx;
	uint32_t valid;
	uint32_t flags;
	uint8_t pad[24];
};
_Static_assert(sizeof(struct brec) == 64, "block record is 64 bytes");

/* DRAM state of one physical block. */
struct pblk {
	uint64_t obj, idx, seq;
	uint32_t valid;
	uint8_t used, dirty, active; /* active: which record slot is current */
	uint8_t dead;                /* freed while pinned */
	uint32_t pins;
	uint32_t hnext;              /* hash chain */
	uint32_t lprev, lnext;       /* clean LRU list, or free list (lnext) */
	uint32_t oprev, onext;       /* the owning object's block list */
};

/* DRAM state of one object slot. */
struct oslot {
	uint64_t id, seq, size;
	uint8_t used, active;
	uint32_t head;          /* first block in the object's list */
	uint64_t nblocks, ndirty;
	struct orec rec;        /* last committed record (for updates) */
};

struct bstore {
	struct region *r;
	struct bstore_geom g;
	uint8_t *base;
	struct orec *orecs;   /* 2 per slot */
	struct brec *brecs;   /* 2 per slot */
	uint8_t *data;

	pthread_mutex_t lk;
	pthread_cond_t unpinned;
	pthread_mutex_t keylk[KEY_LOCKS];
	uint64_t seq, next_id;
	struct pblk *pb;
	struct oslot *os;
	uint32_t *buckets;
	uint32_t nbuckets;
	uint32_t free_head;
	uint64_t nfree;
	uint32_t lru_head, lru_tail; /* head = most recent */
	uint64_t ndirty, nused_objs, evictions;
	uint32_t obj_cursor;
	/* how often a block of a key hashing here left the store (lk) */
	uint32_t gone[GONE_SLOTS];
};

static const uint8_t zeros[65536];

void bstore_geom_for_size(uint64_t cache_bytes, uint32_t block_size,
			  struct bstore_geom *g)
{
	uint64_t n = cache_bytes / block_size;

	if (n < 16)
		n = 16;
	g->block_size = block_size;
	g->nblocks = n;
	n /= 4;
	g->nobjs = (uint32_t)(n < 256 ? 256 : n > 65536 ? 65536 : n);
}

static void layout(const struct bstore_geom *g, uint64_t *obj_off,
		   uint64_t *blk_off, uint64_t *data_off, uint64_t *total)
{
	uint64_t o = SB_SIZE;
	uint64_t b = o + (uint64_t)g->nobjs * 2 * sizeof(struct orec);
	uint64_t d = b + g->nblocks * 2 * sizeof(struct brec);

	d = (d + 65535) & ~65535ull;
	*obj_off = o;
	*blk_off = b;
	*data_off = d;
	*total = d + g->nblocks * g->block_size;
}

uint64_t bstore_region_size(const struct bstore_geom *g)
{
	uint64_t a, b, c, t;

	layout(g, &a, &b, &c, &t);
	return t;
}

static uint32_t rec_crc(const void *rec, size_t len)
{
	/* crc field is the second u32: checksum with it taken as zero */
	uint32_t c = crc32c(0, rec, 4);
	c = crc32c(c, zeros, 4);
	return crc32c(c, (const uint8_t *)rec + 8, len - 8);
}

static uint32_t sb_crc(const struct sb *s)
{
	struct sb c = *s;

	c.crc = 0;
	return crc32c(0, &c, sizeof(c));
}

static bool orec_ok(const struct orec *r)
{
	return r->magic == OREC_MAGIC && r->crc == rec_crc(r, sizeof(*r)) &&
	       r->hlen <= BSTORE_HANDLE_MAX;
}

static bool brec_ok(const struct bstore *bs, const struct brec *r)
{
	return r->magic == BREC_MAGIC && r->crc == rec_crc(r, sizeof(*r)) &&
	       r->valid <= bs->g.block_size;
}

static inline uint8_t *blk_data(struct bstore *bs, uint32_t p)
{
	return bs->data + (uint64_t)p * bs->g.block_size;
}

/* ---- DRAM index ---- */

static uint32_t hash_key(const struct bstore *bs, uint64_t obj, uint64_t idx)
{
	uint64_t h = obj * 0x9E3779B97F4A7C15ull ^ (idx + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full;
	return (uint32_t)(h >> 32) & (bs->nbuckets - 1);
}

static uint32_t gone_slot(uint64_t obj, uint64_t idx)
{
	uint64_t h = (obj + 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull ^
		     idx * 0x94D049BB133111EBull;
	return (uint32_t)(h >> 40) & (GONE_SLOTS - 1);
}

static uint32_t idx_find(const struct bstore *bs, uint64_t obj, uint64_t idx)
{
	for (uint32_t p = bs->buckets[hash_key(bs, obj, idx)]; p != NIL;
	     p = bs->pb[p].hnext)
		if (bs->pb[p].obj == obj && bs->pb[p].idx == idx)
			return p;
	return NIL;
}

static void idx_insert(struct bstore *bs, uint32_t p)
{
	uint32_t h = hash_key(bs, bs->pb[p].obj, bs->pb[p].idx);

	bs->pb[p].hnext = bs->buckets[h];
	bs->buckets[h] = p;
}

static void idx_remove(struct bstore *bs, uint32_t p)
{
	uint32_t *pp = &bs->buckets[hash_key(bs, bs->pb[p].obj, bs->pb[p].idx)];

	while (*pp != NIL && *pp != p)
		pp = &bs->pb[*pp].hnext;
	if (*pp == p)
		*pp = bs->pb[p].hnext;
	bs->pb[p].hnext = NIL;
}

static void lru_remove(struct bstore *bs, uint32_t p)
{
	struct pblk *b = &bs->pb[p];

	if (b->lprev == NIL && bs->lru_head != p)
		return; /* not on the list */
	if (b->lprev != NIL)
		bs->pb[b->lprev].lnext = b->lnext;
	else
		bs->lru_head = b->lnext;
	if (b->lnext != NIL)
		bs->pb[b->lnext].lprev = b->lprev;
	else
		bs->lru_tail = b->lprev;
	b->lprev = b->lnext = NIL;
}

static void lru_push(struct bstore *bs, uint32_t p)
{
	struct pblk *b = &bs->pb[p];

	b->lprev = NIL;
	b->lnext = bs->lru_head;
	if (bs->lru_head != NIL)
		bs->pb[bs->lru_head].lprev = p;
	bs->lru_head = p;
	if (bs->lru_tail == NIL)
		bs->lru_tail = p;
}

/* Object ids encode their slot: id = generation * nobjs + slot, so a lookup
 * is one array access and an id is never reused. */
static struct oslot *obj_find(struct bstore *bs, uint64_t id, uint32_t *slot)
{
	uint32_t s = (uint32_t)(id % bs->g.nobjs);

	if (!id || !bs->os[s].used || bs->os[s].id != id)
		return NULL;
	if (slot)
		*slot = s;
	return &bs->os[s];
}

static void olist_add(struct bstore *bs, struct oslot *o, uint32_t p)
{
	struct pblk *b = &bs->pb[p];

	b->oprev = NIL;
	b->onext = o->head;
	if (o->head != NIL)
		bs->pb[o->head].oprev = p;
	o->head = p;
	o->nblocks++;
	if (b->dirty)
		o->ndirty++;
}

static void olist_remove(struct bstore *bs, struct oslot *o, uint32_t p)
{
	struct pblk *b = &bs->pb[p];

	if (b->oprev != NIL)
		bs->pb[b->oprev].onext = b->onext;
	else
		o->head = b->onext;
	if (b->onext != NIL)
		bs->pb[b->onext].oprev = b->oprev;
	b->oprev = b->onext = NIL;
	o->nblocks--;
	if (b->dirty)
		o->ndirty--;
}

/* ---- persistent records ---- */

static void brec_clear(struct bstore *bs, uint32_t p)
{
	struct brec *r = &bs->brecs[2 * (uint64_t)p];

	memset(r, 0, 2 * sizeof(*r));
	region_persist(bs->r, r, 2 * sizeof(*r));
}

/* Commit b's DRAM state into the slot's inactive record. */
static void brec_commit(struct bstore *bs, uint32_t p, bool fresh)
{
	struct pblk *b = &bs->pb[p];
	uint8_t slot = fresh ? 0 : (uint8_t)!b->active;
	struct brec *r = &bs->brecs[2 * (uint64_t)p + slot];
	struct brec n = { .magic = BREC_MAGIC, .seq = ++bs->seq, .obj = b->obj,
			  .idx = b->idx, .valid = b->valid,
			  .flags = b->dirty ? BREC_DIRTY : 0 };

	n.crc = rec_crc(&n, sizeof(n));
	*r = n;
	region_persist(bs->r, r, sizeof(*r));
	b->seq = n.seq;
	b->active = slot;
}

/* Write a fresh block's record (slot 0) without persisting it; the caller
 * persists it outside the lock. Caller holds lk. */
static struct brec *brec_prepare(struct bstore *bs, uint32_t p)
{
	struct pblk *b = &bs->pb[p];
	struct brec *r = &bs->brecs[2 * (uint64_t)p];
	struct brec n = { .magic = BREC_MAGIC, .seq = ++bs->seq, .obj = b->obj,
			  .idx = b->idx, .valid = b->valid,
			  .flags = b->dirty ? BREC_DIRTY : 0 };

	n.crc = rec_crc(&n, sizeof(n));
	*r = n;
	b->seq = n.seq;
	b->active = 0;
	return r;
}

static void orec_commit(struct bstore *bs, uint32_t s, const struct orec *src,
			uint32_t flags)
{
	struct oslot *o = &bs->os[s];
	uint8_t slot = o->used ? (uint8_t)!o->active : 0;
	struct orec *r = &bs->orecs[2 * (uint64_t)s + slot];
	struct orec n = *src;

	n.magic = OREC_MAGIC;
	n.seq = ++bs->seq;
	n.flags = flags | OREC_UTIME;
	n.crc = 0;
	n.crc = rec_crc(&n, sizeof(n));
	*r = n;
	region_persist(bs->r, r, sizeof(*r));
	o->active = slot;
	o->seq = n.seq;
	o->rec = n;
}

/* Free physical block p (index, lists, records). Caller holds lk. */
static void blk_free(struct bstore *bs, uint32_t p, bool clear)
{
	struct pblk *b = &bs->pb[p];
	struct oslot *o = obj_find(bs, b->obj, NULL);

	if (clear)
		brec_clear(bs, p);
	idx_remove(bs, p);
	lru_remove(bs, p);
	if (o)
		olist_remove(bs, o, p);
	if (b->dirty)
		bs->ndirty--;
	b->used = 0;
	b->dirty = 0;
	if (b->pins) {
		b->dead = 1; /* the last unpin puts it on the free list */
		return;
	}
	b->lnext = bs->free_head;
	bs->free_head = p;
	bs->nfree++;
}

/* Block p's key leaves the store (evicted, dropped, deleted): bytes read
 * from elsewhere before now may be older than the ones it held. */
static void blk_gone(struct bstore *bs, uint32_t p, bool clear)
{
	bs->gone[gone_slot(bs->pb[p].obj, bs->pb[p].idx)]++;
	blk_free(bs, p, clear);
}

static void blk_unpin(struct bstore *bs, uint32_t p)
{
	struct pblk *b = &bs->pb[p];

	if (--b->pins == 0) {
		if (b->dead) {
			b->dead = 0;
			b->lnext = bs->free_head;
			bs->free_head = p;
			bs->nfree++;
		}
		pthread_cond_broadcast(&bs->unpinned);
	}
}

/* Take a free block, evicting a clean one if needed. Caller holds lk. An
 * evicted block still has its records: *dirty_recs tells the caller to
 * clear them (outside the lock) before reusing the block. */
static uint32_t blk_alloc(struct bstore *bs, bool *dirty_recs)
{
	uint32_t p;

	*dirty_recs = false;
	if (bs->free_head == NIL) {
		for (p = bs->lru_tail; p != NIL; p = bs->pb[p].lprev)
			if (!bs->pb[p].pins)
				break;
		if (p == NIL)
			return NIL;
		blk_gone(bs, p, false);
		bs->evictions++;
		*dirty_recs = true;
	}
	p = bs->free_head;
	bs->free_head = bs->pb[p].lnext;
	bs->nfree--;
	bs->pb[p].lnext = bs->pb[p].lprev = NIL;
	return p;
}

/* ---- open, format, recover ---- */

static int check_sb(const struct sb *s, const char *path,
		    const struct bstore_open_opts *o)
{
	const struct bstore_geom *g = &o->geom;

	if (memcmp(s->magic, SB_MAGIC, 8) != 0 ||
	    s->crc != sb_crc(s)) {
		log_err("NVRAM file %s: not an nvcache store (bad magic or "
			"checksum); refusing to touch it - remove it or choose "
			"another nvram= file", path);
		return -EMEDIUMTYPE;
	}
	if (s->version != SB_VERSION) {
		log_err("NVRAM file %s: store version %u, this program knows %u",
			path, s->version, SB_VERSION);
		return -EMEDIUMTYPE;
	}
	if (s->block_size != g->block_size || s->nblocks != g->nblocks ||
	    s->nobjs != g->nobjs) {
		log_err("NVRAM file %s: made for %llu blocks of %u bytes (%llu MiB"
			" cache), not %llu blocks of %u bytes; it may hold dirty "
			"data: mount with its cache size, or remove it after a "
			"clean unmount", path, (unsigned long long)s->nblocks,
			s->block_size,
			(unsigned long long)(s->nblocks * s->block_size >> 20),
			(unsigned long long)g->nblocks, g->block_size);
		return -EMEDIUMTYPE;
	}
	if (o->tag && strncmp(o->tag, s->tag, BSTORE_TAG_MAX) != 0) {
		log_err("NVRAM file %s: belongs to '%.*s', not '%s'; it may hold "
			"dirty data for it", path, BSTORE_TAG_MAX, s->tag, o->tag);
		return -EMEDIUMTYPE;
	}
	return 0;
}

/* Look at the file before mapping it: 1 = absent or all-zero header
 * (format it), 0 = valid superblock, <0 = refuse. */
static int probe(const char *path, const struct bstore_open_opts *o)
{
	struct sb s;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		if (errno == ENOENT)
			return 1;
		log_err("NVRAM file %s: %s", path, strerror(errno));
		return -errno;
	}
	n = pread(fd, &s, sizeof(s), 0);
	if (n < 0) {
		int e = errno;
		close(fd);
		log_err("NVRAM file %s: %s", path, strerror(e));
		return -e;
	}
	close(fd);
	if (n < (ssize_t)sizeof(s))
		memset((char *)&s + n, 0, sizeof(s) - (size_t)n);
	if (!memcmp(&s, zeros, sizeof(s)))
		return 1;
	return check_sb(&s, path, o);
}

static void format(struct bstore *bs, const char *tag)
{
	struct sb *s = (struct sb *)bs->base;
	uint64_t meta = (uint64_t)((uint8_t *)bs->data - bs->base);

	memset(bs->base + SB_SIZE, 0, meta - SB_SIZE);
	region_persist(bs->r, bs->base + SB_SIZE, meta - SB_SIZE);
	struct sb n = { .version = SB_VERSION, .block_size = bs->g.block_size,
			.nobjs = bs->g.nobjs, .nblocks = bs->g.nblocks,
			.region_size = region_size(bs->r) };
	memcpy(n.magic, SB_MAGIC, 8);
	n.obj_off = (uint64_t)((uint8_t *)bs->orecs - bs->base);
	n.blk_off = (uint64_t)((uint8_t *)bs->brecs - bs->base);
	n.data_off = meta;
	if (tag)
		snprintf(n.tag, sizeof(n.tag), "%s", tag);
	n.crc = sb_crc(&n);
	*s = n;
	region_persist(bs->r, s, sizeof(*s));
}

static void recover(struct bstore *bs, bool drop_clean)
{
	uint64_t nobj = 0, nblk = 0, ndropped = 0;

	/* objects: the newer valid record of each slot */
	for (uint32_t s = 0; s < bs->g.nobjs; s++) {
		struct orec *a = &bs->orecs[2 * (uint64_t)s];
		bool va = orec_ok(&a[0]), vb = orec_ok(&a[1]);
		int pick = va && vb ? (a[1].seq > a[0].seq) : vb ? 1 : va ? 0 : -1;
		struct oslot *o = &bs->os[s];

		o->head = NIL;
		if (pick < 0)
			continue;
		if (a[pick].seq > bs->seq)
			bs->seq = a[pick].seq;
		if (a[pick].id / bs->g.nobjs >= bs->next_id)
			bs->next_id = a[pick].id / bs->g.nobjs + 1;
		o->id = a[pick].id; /* dead ones are cleared below */
		o->active = (uint8_t)pick;
		o->seq = a[pick].seq;
		o->rec = a[pick];
		if (a[pick].flags & OREC_DEAD)
			continue;
		o->used = 1;
		o->size = a[pick].size;
		bs->nused_objs++;
		nobj++;
	}
	/* blocks: newest record per slot, then newest slot per key */
	for (uint32_t p = 0; p < bs->g.nblocks; p++) {
		struct brec *a = &bs->brecs[2 * (uint64_t)p];
		bool va = brec_ok(bs, &a[0]), vb = brec_ok(bs, &a[1]);
		int pick = va && vb ? (a[1].seq > a[0].seq) : vb ? 1 : va ? 0 : -1;
		struct pblk *b = &bs->pb[p];
		uint32_t q;

		b->hnext = b->lprev = b->lnext = b->oprev = b->onext = NIL;
		if (pick < 0 || !obj_find(bs, a[pick].obj, NULL) ||
		    (drop_clean && !(a[pick].flags & BREC_DIRTY))) {
			if (pick >= 0) {
				brec_clear(bs, p);
				ndropped++;
			}
			b->lnext = bs->free_head;
			bs->free_head = p;
			bs->nfree++;
			continue;
		}
		if (a[pick].seq > bs->seq)
			bs->seq = a[pick].seq;
		b->obj = a[pick].obj;
		b->idx = a[pick].idx;
		b->seq = a[pick].seq;
		b->valid = a[pick].valid;
		b->dirty = !!(a[pick].flags & BREC_DIRTY);
		b->active = (uint8_t)pick;
		q = idx_find(bs, b->obj, b->idx);
		if (q != NIL) {
			/* a crash between a commit and the clearing of the
			 * older copy: the older one goes */
			uint32_t loser = bs->pb[q].seq < b->seq ? q : p;
			if (loser == q) {
				blk_free(bs, q, true);
			} else {
				brec_clear(bs, p);
				b->lnext = bs->free_head;
				bs->free_head = p;
				bs->nfree++;
				ndropped++;
				continue;
			}
			ndropped++;
		}
		b->used = 1;
		idx_insert(bs, p);
		olist_add(bs, obj_find(bs, b->obj, NULL), p);
		if (b->dirty)
			bs->ndirty++;
		else
			lru_push(bs, p);
		nblk++;
	}
	/* finish deletions that a crash interrupted: free dead slots */
	for (uint32_t s = 0; s < bs->g.nobjs; s++) {
		struct oslot *o = &bs->os[s];
		if (!o->used && o->id) {
			struct orec *a = &bs->orecs[2 * (uint64_t)s];
			memset(a, 0, 2 * sizeof(*a));
			region_persist(bs->r, a, 2 * sizeof(*a));
			o->id = 0;
		}
	}
	if (!bs->next_id)
		bs->next_id = 1;
	if (nobj || nblk || ndropped)
		log_info("NVRAM store: recovered %llu objects, %llu blocks "
			 "(%llu dirty), %llu stale records dropped",
			 (unsigned long long)nobj, (unsigned long long)nblk,
			 (unsigned long long)bs->ndirty,
			 (unsigned long long)ndropped);
}

int bstore_open(struct bstore **out, const char *path,
		const struct bstore_open_opts *o)
{
	const struct bstore_geom *g = &o->geom;
	struct region_opts ro = o->region;
	uint64_t oo, bo, dof, total;
	struct bstore *bs;
	int fresh, ret;

	if (g->block_size < 4096 || g->block_size > (4u << 20) ||
	    (g->block_size & (g->block_size - 1)) || !g->nblocks ||
	    g->nblocks >= NIL || !g->nobjs) {
		log_err("NVRAM store %s: bad geometry", path);
		return -EINVAL;
	}
	fresh = probe(path, o);
	if (fresh < 0)
		return fresh;
	if (fresh && !o->create)
		return -ENOENT;
	layout(g, &oo, &bo, &dof, &total);
	ro.size = total;
	ro.create = fresh;
	bs = calloc(1, sizeof(*bs));
	if (!bs)
		return -ENOMEM;
	bs->g = *g;
	bs->pb = calloc(g->nblocks, sizeof(*bs->pb));
	bs->os = calloc(g->nobjs, sizeof(*bs->os));
	for (bs->nbuckets = 16; bs->nbuckets < 2 * g->nblocks; bs->nbuckets *= 2)
		;
	bs->buckets = malloc(bs->nbuckets * sizeof(*bs->buckets));
	if (!bs->pb || !bs->os || !bs->buckets) {
		ret = -ENOMEM;
		goto fail;
	}
	memset(bs->buckets, 0xff, bs->nbuckets * sizeof(*bs->buckets));
	ret = region_open(&bs->r, path, &ro);
	if (ret < 0) {
		if (ret == -EINVAL)
			log_err("NVRAM file %s: not a regular file, or smaller "
				"than the %llu bytes this geometry needs", path,
				(unsigned long long)total);
		goto fail;
	}
	bs->base = region_base(bs->r);
	bs->orecs = (struct orec *)(bs->base + oo);
	bs->brecs = (struct brec *)(bs->base + bo);
	bs->data = bs->base + dof;
	pthread_mutex_init(&bs->lk, NULL);
	pthread_cond_init(&bs->unpinned, NULL);
	for (unsigned i = 0; i < KEY_LOCKS; i++)
		pthread_mutex_init(&bs->keylk[i], NULL);
	bs->free_head = bs->lru_head = bs->lru_tail = NIL;
	if (fresh)
		format(bs, o->tag);
	recover(bs, o->drop_clean);
	*out = bs;
	return 0;
fail:
	free(bs->pb);
	free(bs->os);
	free(bs->buckets);
	free(bs);
	return ret;
}

void bstore_close(struct bstore *bs)
{
	if (!bs)
		return;
	region_close(bs->r);
	pthread_mutex_destroy(&bs->lk);
	pthread_cond_destroy(&bs->unpinned);
	for (unsigned i = 0; i < KEY_LOCKS; i++)
		pthread_mutex_destroy(&bs->keylk[i]);
	free(bs->pb);
	free(bs->os);
	free(bs->buckets);
	free(bs);
}

struct region *bstore_region(struct bstore *bs) { return bs->r; }
const struct bstore_geom *bstore_geom(const struct bstore *bs) { return &bs->g; }

/* ---- objects ---- */

static void orec_from(struct orec *r, const struct bstore_obj *o)
{
	memset(r, 0, sizeof(*r));
	r->id = o->id;
	r->size = o->size;
	r->uflags = o->uflags;
	r->htype = o->handle_type;
	r->hlen = o->handle_len > BSTORE_HANDLE_MAX ? 0 : o->handle_len;
	memcpy(r->handle, o->handle, r->hlen);
	memcpy(r->path, o->path, sizeof(r->path));
	r->path[sizeof(r->path) - 1] = 0;
	r->utime = o->utime;
}

int bstore_obj_create(struct bstore *bs, struct bstore_obj *o)
{
	struct orec r;
	int ret = -ENOSPC;

	pthread_mutex_lock(&bs->lk);
	for (uint32_t i = 0; i < bs->g.nobjs && bs->nused_objs < bs->g.nobjs; i++) {
		uint32_t s = (bs->obj_cursor + i) % bs->g.nobjs;
		struct oslot *os = &bs->os[s];
		if (os->used)
			continue;
		bs->obj_cursor = s + 1;
		o->id = bs->next_id++ * bs->g.nobjs + s;
		orec_from(&r, o);
		orec_commit(bs, s, &r, 0);
		os->used = 1;
		os->id = o->id;
		os->size = o->size;
		os->head = NIL;
		os->nblocks = os->ndirty = 0;
		bs->nused_objs++;
		ret = 0;
		break;
	}
	pthread_mutex_unlock(&bs->lk);
	return ret;
}

int bstore_obj_update(struct bstore *bs, const struct bstore_obj *o)
{
	struct oslot *os;
	struct orec r;
	uint32_t s;
	int ret = -ENOENT;

	pthread_mutex_lock(&bs->lk);
	os = obj_find(bs, o->id, &s);
	if (os) {
		orec_from(&r, o);
		orec_commit(bs, s, &r, 0);
		os->size = o->size;
		ret = 0;
	}
	pthread_mutex_unlock(&bs->lk);
	return ret;
}

int bstore_obj_get(struct bstore *bs, uint64_t id, struct bstore_obj *o)
{
	struct oslot *os;
	int ret = -ENOENT;

	pthread_mutex_lock(&bs->lk);
	os = obj_find(bs, id, NULL);
	if (os) {
		const struct orec *r = &os->rec;
		o->id = r->id;
		o->size = r->size;
		o->uflags = r->uflags;
		o->handle_type = r->htype;
		o->handle_len = r->hlen;
		memcpy(o->handle, r->handle, sizeof(o->handle));
		memcpy(o->path, r->path, sizeof(o->path));
		o->utime = r->utime;
		if (!(r->flags & OREC_UTIME)) {
			o->utime = 0;
			if (!memchr(o->path, 0, sizeof(o->path)))
				o->path[0] = 0;
		}
		ret = 0;
	}
	pthread_mutex_unlock(&bs->lk);
	return ret;
}

static int obj_delete(struct bstore *bs, uint64_t id, bool clean_only)
{
	struct oslot *os;
	uint32_t s;
	int ret = -ENOENT;

	pthread_mutex_lock(&bs->lk);
	os = obj_find(bs, id, &s);
	if (os && clean_only && os->ndirty) {
		ret = -EBUSY;
	} else if (os) {
		struct orec r = os->rec;
		orec_commit(bs, s, &r, OREC_DEAD); /* the commit point */
		while (os->head != NIL)
			blk_gone(bs, os->head, true);
		struct orec *a = &bs->orecs[2 * (uint64_t)s];
		memset(a, 0, 2 * sizeof(*a));
		region_persist(bs->r, a, 2 * sizeof(*a));
		os->used = 0;
		os->id = 0;
		bs->nused_objs--;
		ret = 0;
	}
	pthread_mutex_unlock(&bs->lk);
	return ret;
}

int bstore_obj_delete(struct bstore *bs, uint64_t id)
{
	return obj_delete(bs, id, false);
}

int bstore_obj_delete_clean(struct bstore *bs, uint64_t id)
{
	return obj_delete(bs, id, true);
}

size_t bstore_obj_list(struct bstore *bs, uint64_t *ids, size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&bs->lk);
	for (uint32_t s = 0; s < bs->g.nobjs; s++) {
		if (!bs->os[s].used)
			continue;
		if (n < max)
			ids[n] = bs->os[s].id;
		n++;
	}
	pthread_mutex_unlock(&bs->lk);
	return n;
}

int bstore_obj_counts(struct bstore *bs, uint64_t id, uint64_t *nblocks,
		      uint64_t *ndirty)
{
	struct oslot *os;
	int ret = -ENOENT;

	pthread_mutex_lock(&bs->lk);
	os = obj_find(bs, id, NULL);
	if (os) {
		if (nblocks)
			*nblocks = os->nblocks;
		if (ndirty)
			*ndirty = os->ndirty;
		ret = 0;
	}
	pthread_mutex_unlock(&bs->lk);
	return ret;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

size_t bstore_obj_blocks(struct bstore *bs, uint64_t id, bool dirty_only,
			 uint64_t *idx, size_t max)
{
	struct oslot *os;
	size_t n = 0;

	pthread_mutex_lock(&bs->lk);
	os = obj_find(bs, id, NULL);
	for (uint32_t p = os ? os->head : NIL; p != NIL; p = bs->pb[p].onext) {
		if (dirty_only && !bs->pb[p].dirty)
			continue;
		if (n < max)
			idx[n] = bs->pb[p].idx;
		n++;
	}
	pthread_mutex_unlock(&bs->lk);
	if (n && max)
		qsort(idx, n < max ? n : max, sizeof(*idx), cmp_u64);
	return n;
}

/* ---- blocks ---- */

static pthread_mutex_t *key_lock(struct bstore *bs, uint64_t obj, uint64_t idx)
{
	return &bs->keylk[(obj * 31 + idx) % KEY_LOCKS];
}

static void fill_info(const struct pblk *b, struct bstore_binfo *info)
{
	if (info) {
		info->valid = b->valid;
		info->dirty = b->dirty;
		info->version = b->seq;
	}
}

static void zero_fill(struct bstore *bs, uint8_t *dst, size_t len)
{
	while (len) {
		size_t n = len < sizeof(zeros) ? len : sizeof(zeros);
		region_write(bs->r, dst, zeros, n);
		dst += n;
		len -= n;
	}
}

int bstore_block_write(struct bstore *bs, uint64_t obj, uint64_t idx,
		       uint32_t off, const void *buf, uint32_t len, bool dirty,
		       bool if_absent, struct bstore_binfo *info)
{
	return bstore_block_write_over(bs, obj, idx, off, buf, len, NULL, 0,
				       dirty, if_absent, info);
}

int bstore_block_write_over(struct bstore *bs, uint64_t obj, uint64_t idx,
			    uint32_t off, const void *buf, uint32_t len,
			    const void *base, uint32_t base_len, bool dirty,
			    bool if_absent, struct bstore_binfo *info)
{
	struct bstore_src in = { .buf = buf };

	return bstore_block_write_src(bs, obj, idx, off, &in, len, base,
				      base_len,
				      (dirty ? BSTORE_DIRTY : 0) |
				      (if_absent ? BSTORE_IF_ABSENT : 0),
				      0, info);
}

int bstore_block_write_src(struct bstore *bs, uint64_t obj, uint64_t idx,
			   uint32_t off, const struct bstore_src *in,
			   uint32_t len, const void *base, uint32_t base_len,
			   unsigned flags, uint32_t gen,
			   struct bstore_binfo *info)
{
	bool dirty = flags & BSTORE_DIRTY, if_absent = flags & BSTORE_IF_ABSENT;
	pthread_mutex_t *kl = key_lock(bs, obj, idx);
	uint32_t old, p, oldvalid = 0, valid;
	const uint8_t *src = NULL;
	struct brec *rec;
	struct oslot *os;
	bool dirty_recs;
	uint8_t *dst;
	int ret = 0;

	if ((uint64_t)off + len > bs->g.block_size || !len ||
	    base_len > bs->g.block_size)
		return -EINVAL;
	pthread_mutex_lock(kl);
	pthread_mutex_lock(&bs->lk);
	if (!(os = obj_find(bs, obj, NULL))) {
		ret = -ENOENT;
		goto out_unlock;
	}
	old = idx_find(bs, obj, idx);
	if (old != NIL && if_absent) {
		ret = -EEXIST;
		goto out_unlock;
	}
	if (old == NIL && (flags & BSTORE_NEED_OLD) && !base) {
		ret = -ENODATA;
		goto out_unlock;
	}
	/* the caller's bytes from elsewhere (a fetch from the backing file)
	 * may predate a version that was here, written back and evicted
	 * since: installing them would bring the old bytes back */
	if (old == NIL && (flags & BSTORE_GEN) &&
	    bs->gone[gone_slot(obj, idx)] != gen) {
		ret = -ESTALE;
		goto out_unlock;
	}
	/* pin the old copy first: the allocation below may evict a clean
	 * block, and it must not be the one we are about to copy */
	if (old != NIL)
		bs->pb[old].pins++;
	p = blk_alloc(bs, &dirty_recs);
	if (p == NIL) {
		if (old != NIL)
			blk_unpin(bs, old);
		ret = -ENOSPC;
		goto out_unlock;
	}
	bs->pb[p].pins = 1; /* invisible until committed; keeps eviction off */
	if (old != NIL) {
		oldvalid = bs->pb[old].valid;
		src = blk_data(bs, old);
	} else if (base) {
		oldvalid = base_len;
		src = base;
	}
	pthread_mutex_unlock(&bs->lk);

	/* Persists happen outside the index lock (concurrent writers of other
	 * keys must not queue behind each other's flushes); the key lock and
	 * the pins keep p and old ours meanwhile. */
	if (dirty_recs)
		brec_clear(bs, p);
	/* copy-on-write: the new block gets old head, new bytes, old tail,
	 * streamed (a free block's lines are not worth reading into the
	 * cache first: a 4 KiB write into a 64 KiB block copies 60 KiB) */
	dst = blk_data(bs, p);
	valid = off + len > oldvalid ? off + len : oldvalid;
	if (src && off > 0 && oldvalid)
		region_stream(bs->r, dst, src, off < oldvalid ? off : oldvalid);
	if (off > oldvalid)
		zero_fill(bs, dst + oldvalid, off - oldvalid);
	if (in->fill)
		ret = region_fill(bs->r, dst + off, len, in->fill, in->ctx);
	else
		region_stream(bs->r, dst + off, in->buf, len);
	if (ret == 0 && src && off + len < oldvalid)
		region_stream(bs->r, dst + off + len, src + off + len,
			      oldvalid - off - len);
	if (ret == 0)
		region_persist(bs->r, dst, valid);

	pthread_mutex_lock(&bs->lk);
	struct pblk *b = &bs->pb[p];
	if (ret < 0 || !obj_find(bs, obj, NULL)) {
		/* the source failed, or the object was deleted while we
		 * copied: p was never committed */
		b->pins = 0;
		b->lnext = bs->free_head;
		bs->free_head = p;
		bs->nfree++;
		if (old != NIL)
			blk_unpin(bs, old);
		if (ret == 0)
			ret = -ENOENT;
		goto out_unlock;
	}
	b->obj = obj;
	b->idx = idx;
	b->valid = valid;
	b->dirty = dirty || (old != NIL && bs->pb[old].dirty);
	b->used = 1;
	rec = brec_prepare(bs, p);
	pthread_mutex_unlock(&bs->lk);

	region_persist(bs->r, rec, sizeof(*rec)); /* the commit point */
	if (old != NIL)
		brec_clear(bs, old);

	pthread_mutex_lock(&bs->lk);
	b->pins = 0;
	if (old != NIL) {
		if (bs->pb[old].used)
			blk_free(bs, old, false);
		blk_unpin(bs, old);
	}
	if (!(os = obj_find(bs, obj, NULL))) {
		/* deleted after our commit; recovery would drop the record,
		 * clear it now so that p can be reused */
		b->used = 0;
		brec_clear(bs, p);
		b->lnext = bs->free_head;
		bs->free_head = p;
		bs->nfree++;
		ret = -ENOENT;
		goto out_unlock;
	}
	idx_insert(bs, p);
	olist_add(bs, os, p);
	if (b->dirty)
		bs->ndirty++;
	else
		lru_push(bs, p);
	fill_info(b, info);
out_unlock:
	pthread_mutex_unlock(&bs->lk);
	pthread_mutex_unlock(kl);
	return ret;
}

uint32_t bstore_block_gen(struct bstore *bs, uint64_t obj, uint64_t idx)
{
	pthread_mutex_lock(&bs->lk);
	uint32_t g = bs->gone[gone_slot(obj, idx)];
	pthread_mutex_unlock(&bs->lk);
	return g;
}

int bstore_block_read(struct bstore *bs, uint64_t obj, uint64_t idx,
		      uint32_t off, void *buf, uint32_t len,
		      struct bstore_binfo *info)
{
	uint32_t p, valid;

	if ((uint64_t)off + len > bs->g.block_size)
		return -EINVAL;
	pthread_mutex_lock(&bs->lk);
	p = idx_find(bs, obj, idx);
	if (p == NIL) {
		pthread_mutex_unlock(&bs->lk);
		return -ENOENT;
	}
	bs->pb[p].pins++;
	if (!bs->pb[p].dirty) {
		lru_remove(bs, p);
		lru_push(bs, p);
	}
	fill_info(&bs->pb[p], info);
	valid = bs->pb[p].valid;
	pthread_mutex_unlock(&bs->lk);

	if (off < valid) {
		uint32_t n = valid - off < len ? valid - off : len;
		region_read(bs->r, buf, blk_data(bs, p) + off, n);
		if (n < len)
			memset((uint8_t *)buf + n, 0, len - n);
	} else {
		memset(buf, 0, len);
	}
	pthread_mutex_lock(&bs->lk);
	blk_unpin(bs, p);
	pthread_mutex_unlock(&bs->lk);
	return 0;
}

int bstore_block_pin(struct bstore *bs, uint64_t obj, uint64_t idx,
		     const void **data, uint32_t *token,
		     struct bstore_binfo *info)
{
	uint32_t p;

	pthread_mutex_lock(&bs->lk);
	p = idx_find(bs, obj, idx);
	if (p != NIL) {
		bs->pb[p].pins++;
		if (!bs->pb[p].dirty) {
			lru_remove(bs, p);
			lru_push(bs, p);
		}
		fill_info(&bs->pb[p], info);
		*data = blk_data(bs, p);
		*token = p;
	}
	pthread_mutex_unlock(&bs->lk);
	return p == NIL ? -ENOENT : 0;
}

void bstore_block_unpin(struct bstore *bs, uint32_t token)
{
	if (token >= bs->g.nblocks)
		return;
	pthread_mutex_lock(&bs->lk);
	blk_unpin(bs, token);
	pthread_mutex_unlock(&bs->lk);
}

int bstore_block_info(struct bstore *bs, uint64_t obj, uint64_t idx,
		      struct bstore_binfo *info)
{
	uint32_t p;

	pthread_mutex_lock(&bs->lk);
	p = idx_find(bs, obj, idx);
	if (p != NIL)
		fill_info(&bs->pb[p], info);
	pthread_mutex_unlock(&bs->lk);
	return p == NIL ? -ENOENT : 0;
}

int bstore_block_clean(struct bstore *bs, uint64_t obj, uint64_t idx,
		       uint64_t version)
{
	pthread_mutex_t *kl = key_lock(bs, obj, idx);
	struct oslot *os;
	uint32_t p;
	int ret = 0;

	pthread_mutex_lock(kl);
	pthread_mutex_lock(&bs->lk);
	p = idx_find(bs, obj, idx);
	if (p == NIL) {
		ret = -ENOENT;
	} else if (bs->pb[p].seq != version) {
		ret = -ESTALE;
	} else if (bs->pb[p].dirty) {
		os = obj_find(bs, obj, NULL);
		bs->pb[p].dirty = 0;
		brec_commit(bs, p, false);
		bs->ndirty--;
		if (os)
			os->ndirty--;
		lru_push(bs, p);
	}
	pthread_mutex_unlock(&bs->lk);
	pthread_mutex_unlock(kl);
	return ret;
}

int bstore_block_truncate(struct bstore *bs, uint64_t obj, uint64_t idx,
			  uint32_t valid)
{
	pthread_mutex_t *kl = key_lock(bs, obj, idx);
	uint32_t p;
	int ret = 0;

	pthread_mutex_lock(kl);
	pthread_mutex_lock(&bs->lk);
	p = idx_find(bs, obj, idx);
	if (p == NIL) {
		ret = -ENOENT;
	} else if (valid == 0) {
		blk_gone(bs, p, true);
	} else if (valid < bs->pb[p].valid) {
		bs->pb[p].valid = valid;
		brec_commit(bs, p, false);
	}
	pthread_mutex_unlock(&bs->lk);
	pthread_mutex_unlock(kl);
	return ret;
}

int bstore_block_drop(struct bstore *bs, uint64_t obj, uint64_t idx)
{
	return bstore_block_truncate(bs, obj, idx, 0);
}

uint64_t bstore_evict(struct bstore *bs, uint64_t n)
{
	uint64_t done = 0;
	uint32_t p, prev;

	pthread_mutex_lock(&bs->lk);
	for (p = bs->lru_tail; p != NIL && done < n; p = prev) {
		prev = bs->pb[p].lprev;
		if (bs->pb[p].pins)
			continue;
		blk_gone(bs, p, true);
		bs->evictions++;
		done++;
	}
	pthread_mutex_unlock(&bs->lk);
	return done;
}

void bstore_stats_get(struct bstore *bs, struct bstore_stats *st)
{
	pthread_mutex_lock(&bs->lk);
	st->blocks_total = bs->g.nblocks;
	st->blocks_used = bs->g.nblocks - bs->nfree;
	st->blocks_dirty = bs->ndirty;
	st->objs_total = bs->g.nobjs;
	st->objs_used = bs->nused_objs;
	st->evictions = bs->evictions;
	st->block_size = bs->g.block_size;
	pthread_mutex_unlock(&bs->lk);
}
