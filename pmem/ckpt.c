/* ckpt.c - the double-buffered checkpoint area; see ckpt.h. */
#include "pmem/ckpt.h"

#include "common/clock.h"
#include "common/crc32c.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#define CKPT_MAGIC "NVCKPT\0\1"
#define CKPT_FORMAT 1u
#define PAGE 4096ull
#define REC_OFF PAGE            /* page 1: the two commit records */
#define REC_STRIDE 2048ull
#define SLOT_OFF (2 * PAGE)

struct ckpt_super {
	char magic[8];
	uint32_t format;
	uint32_t extra_max;
	uint64_t data_size;
	uint64_t live_size;
	uint64_t created_ns;
	uint32_t rank, nranks;
	char job[CKPT_NAME_MAX];
	char name[CKPT_NAME_MAX];
	uint32_t crc;           /* of everything above */
};

struct ckpt_rec {
	uint64_t version;       /* 0: empty */
	uint64_t consistent;
	uint64_t time_ns;
	uint32_t extra_len;
	uint32_t data_crc;
	uint32_t extra_crc;
	uint32_t slot;
	uint32_t crc;           /* of everything above */
};

struct ckpt {
	struct region *r;
	uint8_t *base;
	struct ckpt_geom g;
	uint64_t created_ns;
	uint64_t slot_size;
	/* DRAM copy of the valid records; version 0 where a slot is empty,
	 * torn, or (verified) its data fails its CRC */
	struct ckpt_rec rec[CKPT_SLOTS];
	/* the CRC32C of slot's data bytes [0, crc_len) as ckpt_write copied
	 * them in order since ckpt_begin; crc_len = CRC_NONE once a write
	 * went elsewhere (commit then reads the whole slot) */
	uint64_t crc_len[CKPT_SLOTS];
	uint32_t crc[CKPT_SLOTS];
	struct ckpt_times t;
};

#define CRC_NONE UINT64_MAX
#define CRC_CHUNK (64u << 10) /* checked, then copied while in the cache */

static uint64_t round_page(uint64_t n)
{
	return (n + PAGE - 1) & ~(PAGE - 1);
}

static uint64_t slot_size(const struct ckpt_geom *g)
{
	return round_page(g->data_size + g->extra_max);
}

uint64_t ckpt_file_size(const struct ckpt_geom *g)
{
	return SLOT_OFF + CKPT_SLOTS * slot_size(g) + round_page(g->live_size);
}

static struct ckpt_rec *rec_at(struct ckpt *c, int slot)
{
	return (struct ckpt_rec *)(c->base + REC_OFF + (uint64_t)slot * REC_STRIDE);
}

static uint32_t rec_crc(const struct ckpt_rec *r)
{
	return crc32c(0, r, offsetof(struct ckpt_rec, crc));
}

static bool geom_ok(const struct ckpt_geom *g)
{
	return g->data_size > 0 && g->nranks > 0 && g->rank < g->nranks &&
	       memchr(g->job, 0, CKPT_NAME_MAX) && memchr(g->name, 0, CKPT_NAME_MAX) &&
	       g->data_size < (1ull << 48) && g->live_size < (1ull << 48);
}

static struct ckpt *ckpt_new(struct region *r)
{
	struct ckpt *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->r = r;
	c->base = region_base(r);
	return c;
}

/* Refuse a file another process holds before removing it: that is the
 * running job of the same name. */
static int ckpt_check_free(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int ret = 0;

	if (fd < 0)
		return 0;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
	close(fd);
	return ret;
}

int ckpt_create(struct ckpt **out, const char *path, const struct ckpt_geom *g,
		const struct region_opts *ro)
{
	struct region_opts o = ro ? *ro : (struct region_opts){ 0 };
	struct region *r;
	struct ckpt *c;
	struct timespec ts;
	int ret;

	if (!geom_ok(g))
		return -EINVAL;
	if ((ret = ckpt_check_free(path)))
		return ret;
	unlink(path);
	o.size = ckpt_file_size(g);
	o.create = true;
	if ((ret = region_open(&r, path, &o)))
		return ret;
	if (!(c = ckpt_new(r))) {
		region_close(r);
		unlink(path);
		return -ENOMEM;
	}
	c->g = *g;
	c->slot_size = slot_size(g);
	clock_gettime(CLOCK_REALTIME, &ts);
	c->created_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;

	/* Records empty first, then the superblock that makes this an area. */
	memset(c->base + REC_OFF, 0, PAGE);
	region_persist(r, c->base + REC_OFF, PAGE);
	struct ckpt_super s = { .format = CKPT_FORMAT, .extra_max = g->extra_max,
		.data_size = g->data_size, .live_size = g->live_size,
		.created_ns = c->created_ns, .rank = g->rank, .nranks = g->nranks };
	memcpy(s.magic, CKPT_MAGIC, 8);
	memcpy(s.job, g->job, CKPT_NAME_MAX);
	memcpy(s.name, g->name, CKPT_NAME_MAX);
	s.crc = crc32c(0, &s, offsetof(struct ckpt_super, crc));
	memcpy(c->base, &s, sizeof(s));
	region_persist(r, c->base, sizeof(s));
	*out = c;
	return 0;
}

/* A slot whose data fails its record's CRC: forgotten (logged). */
static void rec_bad(struct ckpt *c, int slot, uint64_t version)
{
	log_warn("checkpoint %s/%s rank %u: version %llu in slot %d fails its "
		 "checksum (torn or damaged): ignored", c->g.job, c->g.name,
		 c->g.rank, (unsigned long long)version, slot);
	memset(&c->rec[slot], 0, sizeof(c->rec[slot]));
}

/* Load record slot into DRAM if its CRC (and with verify, its data's)
 * holds; else the slot counts as empty. */
static void rec_load(struct ckpt *c, int slot, bool verify)
{
	struct ckpt_rec r = *rec_at(c, slot);

	memset(&c->rec[slot], 0, sizeof(c->rec[slot]));
	if (r.version == 0)
		return;
	if (r.crc != rec_crc(&r) || r.slot != (uint32_t)slot ||
	    r.extra_len > c->g.extra_max) {
		log_warn("checkpoint %s/%s rank %u: slot %d's commit record is torn "
			 "(CRC): ignored", c->g.job, c->g.name, c->g.rank, slot);
		return;
	}
	c->rec[slot] = r;
	if (verify && (crc32c(0, ckpt_data(c, slot), c->g.data_size) != r.data_crc ||
		       crc32c(0, ckpt_extra(c, slot), r.extra_len) != r.extra_crc))
		rec_bad(c, slot, r.version);
}

int ckpt_open(struct ckpt **out, const char *path, bool verify,
	      const struct region_opts *ro)
{
	struct region_opts o = ro ? *ro : (struct region_opts){ 0 };
	struct ckpt_super s;
	struct region *r;
	struct ckpt *c;
	int ret;

	o.size = 0;
	o.create = false;
	if ((ret = region_open(&r, path, &o)))
		return ret;
	if (region_size(r) < SLOT_OFF) {
		log_err("%s: not a checkpoint area (%llu bytes)", path,
			(unsigned long long)region_size(r));
		region_close(r);
		return -EMEDIUMTYPE;
	}
	memcpy(&s, region_base(r), sizeof(s));
	if (memcmp(s.magic, CKPT_MAGIC, 8) || s.format != CKPT_FORMAT ||
	    s.crc != crc32c(0, &s, offsetof(struct ckpt_super, crc))) {
		log_err("%s: not a checkpoint area of this format (or its "
			"superblock is damaged)", path);
		region_close(r);
		return -EMEDIUMTYPE;
	}
	if (!(c = ckpt_new(r))) {
		region_close(r);
		return -ENOMEM;
	}
	c->g = (struct ckpt_geom){ .data_size = s.data_size, .live_size = s.live_size,
		.extra_max = s.extra_max, .rank = s.rank, .nranks = s.nranks };
	memcpy(c->g.job, s.job, CKPT_NAME_MAX);
	memcpy(c->g.name, s.name, CKPT_NAME_MAX);
	c->g.job[CKPT_NAME_MAX - 1] = c->g.name[CKPT_NAME_MAX - 1] = 0;
	c->created_ns = s.created_ns;
	c->slot_size = slot_size(&c->g);
	if (!geom_ok(&c->g) || ckpt_file_size(&c->g) > region_size(r)) {
		log_err("%s: checkpoint area geometry does not fit the file", path);
		ckpt_close(c);
		return -EMEDIUMTYPE;
	}
	for (int i = 0; i < CKPT_SLOTS; i++)
		rec_load(c, i, verify);
	*out = c;
	return 0;
}

int ckpt_verify(struct ckpt *c, int slot)
{
	if (slot < 0 || slot >= CKPT_SLOTS || !c->rec[slot].version)
		return -EINVAL;
	rec_load(c, slot, true);
	return c->rec[slot].version ? 0 : -EBADMSG;
}

int ckpt_read_verify(struct ckpt *c, int slot, void *dst)
{
	const uint8_t *src;
	uint8_t *d = dst;
	uint32_t crc = 0;

	if (slot < 0 || slot >= CKPT_SLOTS || !c->rec[slot].version)
		return -EINVAL;
	src = ckpt_data(c, slot);
	for (uint64_t off = 0; off < c->g.data_size; off += CRC_CHUNK) {
		uint64_t n = c->g.data_size - off < CRC_CHUNK ? c->g.data_size - off : CRC_CHUNK;
		crc = crc32c(crc, src + off, n);
		region_stream(c->r, d + off, src + off, n);
	}
	if (crc != c->rec[slot].data_crc ||
	    crc32c(0, ckpt_extra(c, slot), c->rec[slot].extra_len) != c->rec[slot].extra_crc) {
		rec_bad(c, slot, c->rec[slot].version);
		return -EBADMSG;
	}
	return 0;
}

void ckpt_close(struct ckpt *c)
{
	if (!c)
		return;
	region_close(c->r);
	free(c);
}

const struct ckpt_geom *ckpt_geom(const struct ckpt *c) { return &c->g; }
uint64_t ckpt_created_ns(const struct ckpt *c) { return c->created_ns; }
struct region *ckpt_region(struct ckpt *c) { return c->r; }
const struct ckpt_times *ckpt_times(const struct ckpt *c) { return &c->t; }

int ckpt_versions(const struct ckpt *c, struct ckpt_version out[CKPT_SLOTS])
{
	int n = 0;

	for (int i = 0; i < CKPT_SLOTS; i++) {
		if (!c->rec[i].version)
			continue;
		out[n++] = (struct ckpt_version){ .version = c->rec[i].version,
			.consistent = c->rec[i].consistent,
			.time_ns = c->rec[i].time_ns,
			.extra_len = c->rec[i].extra_len, .slot = i };
	}
	if (n == 2 && out[1].version > out[0].version) {
		struct ckpt_version t = out[0];
		out[0] = out[1];
		out[1] = t;
	}
	return n;
}

int ckpt_find(const struct ckpt *c, uint64_t version)
{
	for (int i = 0; i < CKPT_SLOTS; i++)
		if (version && c->rec[i].version == version)
			return i;
	return -ENOENT;
}

int ckpt_next_slot(const struct ckpt *c)
{
	return c->rec[0].version > c->rec[1].version ? 1 : 0;
}

void *ckpt_data(struct ckpt *c, int slot)
{
	return c->base + SLOT_OFF + (uint64_t)slot * c->slot_size;
}

void *ckpt_extra(struct ckpt *c, int slot)
{
	return (uint8_t *)ckpt_data(c, slot) + c->g.data_size;
}

void *ckpt_live(struct ckpt *c)
{
	return c->g.live_size ? c->base + SLOT_OFF + CKPT_SLOTS * c->slot_size : NULL;
}

static void rec_clear(struct ckpt *c, int slot)
{
	memset(rec_at(c, slot), 0, sizeof(struct ckpt_rec));
	region_persist(c->r, rec_at(c, slot), sizeof(struct ckpt_rec));
	memset(&c->rec[slot], 0, sizeof(c->rec[slot]));
}

int ckpt_begin(struct ckpt *c, int slot)
{
	if (slot < 0 || slot >= CKPT_SLOTS)
		return -EINVAL;
	uint64_t t0 = clock_now_ns();
	rec_clear(c, slot);
	c->t.record_ns += clock_now_ns() - t0;
	c->crc_len[slot] = 0;
	c->crc[slot] = 0;
	return 0;
}

void ckpt_write(struct ckpt *c, int slot, uint64_t off, const void *src,
		uint64_t len)
{
	uint8_t *dst = (uint8_t *)ckpt_data(c, slot) + off;
	const uint8_t *s = src;

	uint64_t t0 = clock_now_ns(), t1;

	if (c->crc_len[slot] != off) {
		c->crc_len[slot] = CRC_NONE;
		region_stream(c->r, dst, src, len);
		c->t.copy_ns += clock_now_ns() - t0;
		return;
	}
	/* in order from the start: the CRC in the same pass as the copy */
	for (uint64_t done = 0; done < len; ) {
		uint64_t n = len - done < CRC_CHUNK ? len - done : CRC_CHUNK;
		c->crc[slot] = crc32c(c->crc[slot], s + done, n);
		t1 = clock_now_ns();
		c->t.crc_ns += t1 - t0;
		region_stream(c->r, dst + done, s + done, n);
		t0 = clock_now_ns();
		c->t.copy_ns += t0 - t1;
		done += n;
	}
	c->crc_len[slot] += len;
}

int ckpt_commit(struct ckpt *c, int slot, uint64_t version,
		uint64_t consistent, uint32_t extra_len)
{
	struct timespec ts;

	if (slot < 0 || slot >= CKPT_SLOTS || extra_len > c->g.extra_max ||
	    version <= c->rec[1 - slot].version || version <= c->rec[slot].version)
		return -EINVAL;
	uint64_t t0 = clock_now_ns();
	region_persist(c->r, ckpt_data(c, slot), c->g.data_size + extra_len);
	uint64_t t1 = clock_now_ns();
	clock_gettime(CLOCK_REALTIME, &ts);
	struct ckpt_rec r = { .version = version, .consistent = consistent,
		.time_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec,
		.extra_len = extra_len, .slot = (uint32_t)slot,
		.data_crc = c->crc_len[slot] <= c->g.data_size ?
			    crc32c(c->crc[slot], (uint8_t *)ckpt_data(c, slot) + c->crc_len[slot],
				   c->g.data_size - c->crc_len[slot]) :
			    crc32c(0, ckpt_data(c, slot), c->g.data_size),
		.extra_crc = crc32c(0, ckpt_extra(c, slot), extra_len) };
	uint64_t t2 = clock_now_ns();
	r.crc = rec_crc(&r);
	*rec_at(c, slot) = r;
	region_persist(c->r, rec_at(c, slot), sizeof(r));
	c->rec[slot] = r;
	c->t.persist_ns += t1 - t0;
	c->t.crc_ns += t2 - t1;
	c->t.record_ns += clock_now_ns() - t2;
	return 0;
}

void ckpt_drop_newer(struct ckpt *c, uint64_t version)
{
	for (int i = 0; i < CKPT_SLOTS; i++)
		if (c->rec[i].version > version)
			rec_clear(c, i);
}
