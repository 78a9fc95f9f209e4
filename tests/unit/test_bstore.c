/* test_bstore.c - the NVRAM block store: commits, copy-on-write, recovery,
 * refusal of foreign files, eviction, torn records, and a crash test that
 * kills a child at every persist point in turn. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/crc32c.h"
#include "pmem/bstore.h"
#include "crash_point.h"

#define BS 4096u

static const uint8_t zeros_for_test[BS];

static char path[96], path2[96];

static int setup(void **state)
{
	(void)state;
	snprintf(path, sizeof(path), "/dev/shm/nvtest-bstore-%d", (int)getpid());
	snprintf(path2, sizeof(path2), "/dev/shm/nvtest-bstore-%d.ref", (int)getpid());
	unlink(path);
	unlink(path2);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(path);
	unlink(path2);
	return 0;
}

static struct bstore_open_opts opts(uint64_t nblocks)
{
	struct bstore_open_opts o = { .create = true, .tag = "test" };
	o.geom.block_size = BS;
	o.geom.nblocks = nblocks;
	o.geom.nobjs = 16;
	return o;
}

static struct bstore *open_store(const char *p, uint64_t nblocks)
{
	struct bstore_open_opts o = opts(nblocks);
	struct bstore *bs = NULL;

	assert_int_equal(bstore_open(&bs, p, &o), 0);
	return bs;
}

static uint64_t new_obj(struct bstore *bs, const char *name)
{
	struct bstore_obj o = { 0 };

	snprintf(o.path, sizeof(o.path), "%s", name);
	assert_int_equal(bstore_obj_create(bs, &o), 0);
	assert_true(o.id != 0);
	return o.id;
}

static void fill(uint8_t *b, size_t n, int seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(seed * 31 + i * 7);
}

static void write_read_reopen(void **state)
{
	uint8_t in[BS], out[BS], exp[BS];
	struct bstore_binfo bi;
	struct bstore *bs = open_store(path, 32);
	uint64_t id;
	(void)state;

	id = new_obj(bs, "f");
	fill(in, BS, 1);
	assert_int_equal(bstore_block_write(bs, id, 7, 0, in, BS, true, false, &bi), 0);
	assert_int_equal(bi.valid, BS);
	assert_true(bi.dirty);
	/* partial overwrite keeps head and tail (copy-on-write merge) */
	memcpy(exp, in, BS);
	memset(exp + 100, 0xAB, 50);
	memset(in, 0xAB, 50);
	assert_int_equal(bstore_block_write(bs, id, 7, 100, in, 50, true, false, &bi), 0);
	assert_int_equal(bstore_block_read(bs, id, 7, 0, out, BS, &bi), 0);
	assert_memory_equal(out, exp, BS);
	/* a gap past the valid length reads as zeros */
	assert_int_equal(bstore_block_write(bs, id, 8, 1000, in, 10, true, false, &bi), 0);
	assert_int_equal(bi.valid, 1010);
	assert_int_equal(bstore_block_read(bs, id, 8, 0, out, BS, &bi), 0);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(out[i], 0);
	assert_memory_equal(out + 1000, in, 10);
	for (unsigned i = 1010; i < BS; i++)
		assert_int_equal(out[i], 0);
	assert_int_equal(bstore_block_read(bs, id, 9, 0, out, 10, NULL), -ENOENT);
	/* if_absent never overwrites */
	assert_int_equal(bstore_block_write(bs, id, 7, 0, in, 10, false, true, NULL), -EEXIST);
	struct bstore_obj o;
	assert_int_equal(bstore_obj_get(bs, id, &o), 0);
	o.size = 12345;
	assert_int_equal(bstore_obj_update(bs, &o), 0);
	bstore_close(bs);

	bs = open_store(path, 32);
	assert_int_equal(bstore_obj_get(bs, id, &o), 0);
	assert_int_equal(o.size, 12345);
	assert_string_equal(o.path, "f");
	assert_int_equal(bstore_block_read(bs, id, 7, 0, out, BS, &bi), 0);
	assert_memory_equal(out, exp, BS);
	assert_true(bi.dirty);
	uint64_t idx[4];
	assert_int_equal(bstore_obj_blocks(bs, id, true, idx, 4), 2);
	assert_int_equal(idx[0], 7);
	assert_int_equal(idx[1], 8);
	/* clean, truncate, drop */
	assert_int_equal(bstore_block_clean(bs, id, 7, bi.version + 1), -ESTALE);
	assert_int_equal(bstore_block_clean(bs, id, 7, bi.version), 0);
	assert_int_equal(bstore_obj_blocks(bs, id, true, idx, 4), 1);
	assert_int_equal(bstore_block_truncate(bs, id, 8, 500), 0);
	assert_int_equal(bstore_block_info(bs, id, 8, &bi), 0);
	assert_int_equal(bi.valid, 500);
	/* a dirty block keeps the object from a clean-only delete */
	assert_int_equal(bstore_obj_delete_clean(bs, id), -EBUSY);
	assert_int_equal(bstore_obj_get(bs, id, &o), 0);
	assert_int_equal(bstore_block_drop(bs, id, 8), 0);
	assert_int_equal(bstore_block_info(bs, id, 8, &bi), -ENOENT);
	bstore_close(bs);

	bs = open_store(path, 32);
	assert_int_equal(bstore_block_info(bs, id, 7, &bi), 0);
	assert_false(bi.dirty);
	assert_int_equal(bstore_block_info(bs, id, 8, &bi), -ENOENT);
	/* only a clean block left: it goes, and a write to it fails */
	assert_int_equal(bstore_obj_delete_clean(bs, id), 0);
	assert_int_equal(bstore_block_write(bs, id, 7, 0, in, 10, true, false, NULL), -ENOENT);
	assert_int_equal(bstore_obj_list(bs, idx, 4), 0);
	bstore_close(bs);
	bs = open_store(path, 32);
	assert_int_equal(bstore_obj_list(bs, idx, 4), 0);
	struct bstore_stats st;
	bstore_stats_get(bs, &st);
	assert_int_equal(st.blocks_used, 0);
	bstore_close(bs);
}

static void refuses_foreign_files(void **state)
{
	struct bstore_open_opts o = opts(32);
	struct bstore *bs = open_store(path, 32);
	uint8_t buf[64];
	(void)state;

	uint64_t id = new_obj(bs, "x");
	fill(buf, sizeof(buf), 3);
	assert_int_equal(bstore_block_write(bs, id, 0, 0, buf, 64, true, false, NULL), 0);
	bstore_close(bs);
	/* another geometry */
	o.geom.nblocks = 64;
	assert_int_equal(bstore_open(&bs, path, &o), -EMEDIUMTYPE);
	o = opts(32);
	o.geom.block_size = 8192;
	assert_int_equal(bstore_open(&bs, path, &o), -EMEDIUMTYPE);
	/* another tag */
	o = opts(32);
	o.tag = "other";
	assert_int_equal(bstore_open(&bs, path, &o), -EMEDIUMTYPE);
	/* the data is still there */
	bs = open_store(path, 32);
	uint8_t out[64];
	assert_int_equal(bstore_block_read(bs, id, 0, 0, out, 64, NULL), 0);
	assert_memory_equal(out, buf, 64);
	bstore_close(bs);
	/* not a store at all */
	int fd = open(path2, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "hello, not a store", 18), 18);
	close(fd);
	o = opts(32);
	assert_int_equal(bstore_open(&bs, path2, &o), -EMEDIUMTYPE);
	/* a directory */
	assert_true(bstore_open(&bs, "/dev/shm", &o) < 0);
	/* bad geometry */
	o.geom.block_size = 1000;
	assert_int_equal(bstore_open(&bs, path2, &o), -EINVAL);
}

static void evicts_clean_backpressure_dirty(void **state)
{
	struct bstore *bs = open_store(path, 16);
	uint8_t buf[BS];
	struct bstore_binfo bi[16];
	struct bstore_stats st;
	(void)state;

	uint64_t id = new_obj(bs, "e");
	fill(buf, BS, 5);
	for (int i = 0; i < 16; i++)
		assert_int_equal(bstore_block_write(bs, id, (uint64_t)i, 0, buf, BS, true, false, &bi[i]), 0);
	/* all dirty: a new block is refused, a rewrite of one also needs a
	 * free block (copy-on-write) */
	assert_int_equal(bstore_block_write(bs, id, 100, 0, buf, BS, true, false, NULL), -ENOSPC);
	assert_int_equal(bstore_evict(bs, 4), 0);
	/* clean two; the next writes evict the least recently used clean */
	assert_int_equal(bstore_block_clean(bs, id, 3, bi[3].version), 0);
	assert_int_equal(bstore_block_clean(bs, id, 4, bi[4].version), 0);
	uint8_t out[16];
	assert_int_equal(bstore_block_read(bs, id, 3, 0, out, 16, NULL), 0); /* 3 now recent */
	assert_int_equal(bstore_block_write(bs, id, 100, 0, buf, BS, true, false, NULL), 0);
	assert_int_equal(bstore_block_info(bs, id, 4, NULL), -ENOENT);
	assert_int_equal(bstore_block_info(bs, id, 3, NULL), 0);
	bstore_stats_get(bs, &st);
	assert_int_equal(st.evictions, 1);
	assert_int_equal(st.blocks_used, 16);
	assert_int_equal(st.blocks_dirty, 15);
	assert_int_equal(bstore_evict(bs, 10), 1);
	bstore_close(bs);
}

/* Pinned blocks stay intact while rewritten or dropped; write_over starts an
 * absent block from the given base bytes. */
static void pin_and_base(void **state)
{
	struct bstore *bs = open_store(path, 16);
	uint8_t a[BS], b[BS], out[BS];
	struct bstore_binfo bi;
	struct bstore_stats st;
	const void *data;
	uint32_t tok;
	(void)state;

	uint64_t id = new_obj(bs, "p");
	fill(a, BS, 1);
	fill(b, BS, 2);
	assert_int_equal(bstore_block_write(bs, id, 0, 0, a, BS, true, false, NULL), 0);
	assert_int_equal(bstore_block_pin(bs, id, 0, &data, &tok, &bi), 0);
	assert_int_equal(bi.valid, BS);
	assert_int_equal(bstore_block_write(bs, id, 0, 0, b, BS, true, false, NULL), 0);
	assert_memory_equal(data, a, BS); /* the old copy is still ours */
	assert_int_equal(bstore_block_drop(bs, id, 0), 0);
	assert_memory_equal(data, a, BS);
	bstore_stats_get(bs, &st);
	assert_int_equal(st.blocks_used, 1); /* pinned, not yet free */
	bstore_block_unpin(bs, tok);
	bstore_stats_get(bs, &st);
	assert_int_equal(st.blocks_used, 0);
	assert_int_equal(bstore_block_pin(bs, id, 0, &data, &tok, &bi), -ENOENT);

	/* base: the block is absent, so its head and tail come from base */
	assert_int_equal(bstore_block_write_over(bs, id, 3, 100, b, 50, a, 1000, true, false, &bi), 0);
	assert_int_equal(bi.valid, 1000);
	assert_int_equal(bstore_block_read(bs, id, 3, 0, out, 1000, NULL), 0);
	assert_memory_equal(out, a, 100);
	assert_memory_equal(out + 100, b, 50);
	assert_memory_equal(out + 150, a + 150, 850);
	/* present now: base is ignored */
	assert_int_equal(bstore_block_write_over(bs, id, 3, 0, b, 10, zeros_for_test, BS, true, false, &bi), 0);
	assert_int_equal(bi.valid, 1000);
	assert_int_equal(bstore_block_read(bs, id, 3, 0, out, 1000, NULL), 0);
	assert_memory_equal(out, b, 10);
	assert_memory_equal(out + 150, a + 150, 850);
	bstore_close(bs);
}

/* A stream source: hands out the next bytes of a buffer, or fails. */
struct stream { const uint8_t *next; int fail; };
static int stream_fill(void *ctx, void *dst, uint32_t len)
{
	struct stream *s = ctx;
	if (s->fail)
		return -EPIPE;
	memcpy(dst, s->next, len);
	s->next += len;
	return 0;
}

/* Bytes from a stream land in place over the old copy's head and tail; a
 * stream that fails leaves the block as it was and costs no block. */
static void write_from_stream(void **state)
{
	struct bstore *bs = open_store(path, 16);
	uint8_t a[BS], b[BS], out[BS];
	struct stream st = { .next = b };
	struct bstore_src src = { .fill = stream_fill, .ctx = &st };
	struct bstore_stats s0, s1;
	(void)state;

	uint64_t id = new_obj(bs, "s");
	fill(a, BS, 3);
	fill(b, BS, 4);
	assert_int_equal(bstore_block_write(bs, id, 0, 0, a, BS, true, false, NULL), 0);
	assert_int_equal(bstore_block_write_src(bs, id, 0, 100, &src, 200, NULL, 0, BSTORE_DIRTY, 0, NULL), 0);
	assert_ptr_equal(st.next, b + 200); /* consumed once, in order */
	assert_int_equal(bstore_block_write_src(bs, id, 0, 300, &src, 50, NULL, 0, BSTORE_DIRTY, 0, NULL), 0);
	assert_int_equal(bstore_block_read(bs, id, 0, 0, out, BS, NULL), 0);
	assert_memory_equal(out, a, 100);
	assert_memory_equal(out + 100, b, 250);
	assert_memory_equal(out + 350, a + 350, BS - 350);

	bstore_stats_get(bs, &s0);
	st.fail = 1;
	assert_int_equal(bstore_block_write_src(bs, id, 0, 0, &src, BS, NULL, 0, BSTORE_DIRTY, 0, NULL), -EPIPE);
	assert_int_equal(bstore_block_write_src(bs, id, 1, 0, &src, BS, NULL, 0, BSTORE_DIRTY, 0, NULL), -EPIPE);
	bstore_stats_get(bs, &s1);
	assert_int_equal(s1.blocks_used, s0.blocks_used);
	assert_int_equal(bstore_block_info(bs, id, 1, NULL), -ENOENT);
	assert_int_equal(bstore_block_read(bs, id, 0, 0, out, BS, NULL), 0);
	assert_memory_equal(out + 100, b, 250);

	/* need_old: an absent block is not started from zeros under a
	 * partial write; with base it is */
	struct bstore_src mem = { .buf = b };
	assert_int_equal(bstore_block_write_src(bs, id, 2, 10, &mem, 20, NULL, 0, BSTORE_DIRTY | BSTORE_NEED_OLD, 0, NULL), -ENODATA);
	assert_int_equal(bstore_block_info(bs, id, 2, NULL), -ENOENT);
	assert_int_equal(bstore_block_write_src(bs, id, 2, 10, &mem, 20, a, 100, BSTORE_DIRTY | BSTORE_NEED_OLD, 0, NULL), 0);
	assert_int_equal(bstore_block_read(bs, id, 2, 0, out, 100, NULL), 0);
	assert_memory_equal(out, a, 10);
	assert_memory_equal(out + 10, b, 20);
	assert_memory_equal(out + 30, a + 30, 70);
	/* present: need_old changes nothing */
	assert_int_equal(bstore_block_write_src(bs, id, 2, 0, &mem, 5, NULL, 0, BSTORE_DIRTY | BSTORE_NEED_OLD, 0, NULL), 0);
	bstore_close(bs);

	/* and after a reopen (recovery) too */
	bs = open_store(path, 16);
	assert_int_equal(bstore_block_read(bs, id, 0, 0, out, BS, NULL), 0);
	assert_memory_equal(out, a, 100);
	assert_memory_equal(out + 100, b, 250);
	assert_int_equal(bstore_block_info(bs, id, 1, NULL), -ENOENT);
	bstore_close(bs);
}

/* Backing bytes read while another copy of the block was written back and
 * evicted may be older than that copy: with the absence token taken before
 * the read, installing them is refused (-ESTALE), as a read's install, a
 * prefetch's, and a partial write's base; with a fresh token they go in.
 * (Before the token, a read that fetched the block just before another
 * writer's copy reached the backing file put the old bytes back.) */
static void stale_fetch_refused(void **state)
{
	struct bstore *bs = open_store(path, 16);
	uint8_t oldb[BS], newb[BS], out[BS];
	struct bstore_src mem = { .buf = oldb };
	(void)state;

	uint64_t id = new_obj(bs, "g");
	fill(oldb, BS, 5);
	fill(newb, BS, 6);
	/* never cached: the token holds, the install goes in */
	uint32_t g = bstore_block_gen(bs, id, 3);
	assert_int_equal(bstore_block_write_src(bs, id, 3, 0, &mem, BS, NULL, 0,
						BSTORE_IF_ABSENT | BSTORE_GEN, g, NULL), 0);
	assert_int_equal(bstore_block_drop(bs, id, 3), 0);

	/* a reader takes the token and reads the backing file's old bytes;
	 * meanwhile a writer's copy is written back (clean) and evicted */
	g = bstore_block_gen(bs, id, 3);
	struct bstore_binfo bi;
	assert_int_equal(bstore_block_write(bs, id, 3, 0, newb, BS, true, false, &bi), 0);
	assert_int_equal(bstore_block_clean(bs, id, 3, bi.version), 0);
	assert_int_equal(bstore_evict(bs, 16), 1);
	assert_int_equal(bstore_block_write_src(bs, id, 3, 0, &mem, BS, NULL, 0,
						BSTORE_IF_ABSENT | BSTORE_GEN, g, NULL), -ESTALE);
	assert_int_equal(bstore_block_info(bs, id, 3, NULL), -ENOENT);
	/* the same for a partial write's base */
	struct bstore_src part = { .buf = newb };
	assert_int_equal(bstore_block_write_src(bs, id, 3, 10, &part, 20, oldb, BS,
						BSTORE_DIRTY | BSTORE_GEN, g, NULL), -ESTALE);
	/* a drop (truncate) counts as leaving too */
	uint32_t g2 = bstore_block_gen(bs, id, 3);
	assert_int_not_equal(g2, g);
	assert_int_equal(bstore_block_write(bs, id, 3, 0, newb, 100, true, false, NULL), 0);
	assert_int_equal(bstore_block_truncate(bs, id, 3, 0), 0);
	assert_int_equal(bstore_block_write_src(bs, id, 3, 0, &mem, BS, NULL, 0,
						BSTORE_IF_ABSENT | BSTORE_GEN, g2, NULL), -ESTALE);
	/* a fresh token: the (now current) backing bytes go in */
	g = bstore_block_gen(bs, id, 3);
	mem.buf = newb;
	assert_int_equal(bstore_block_write_src(bs, id, 3, 0, &mem, BS, NULL, 0,
						BSTORE_IF_ABSENT | BSTORE_GEN, g, NULL), 0);
	assert_int_equal(bstore_block_read(bs, id, 3, 0, out, BS, NULL), 0);
	assert_memory_equal(out, newb, BS);
	/* a present block is unaffected by the token: -EEXIST as before, and
	 * a rewrite of it does not change the token */
	assert_int_equal(bstore_block_write_src(bs, id, 3, 0, &mem, BS, NULL, 0,
						BSTORE_IF_ABSENT | BSTORE_GEN, g - 1, NULL), -EEXIST);
	assert_int_equal(bstore_block_write(bs, id, 3, 0, oldb, 64, true, false, NULL), 0);
	assert_int_equal(bstore_block_gen(bs, id, 3), g);
	bstore_close(bs);
}

/* A partial rewrite of the least recently used clean block when the store is
 * full: the allocation must evict some other block, never the one being
 * copied (that once put a block on the free list twice). */
static void rewrite_lru_block_when_full(void **state)
{
	struct bstore *bs = open_store(path, 16);
	uint8_t buf[BS], out[BS], exp[BS];
	struct bstore_stats st;
	(void)state;

	uint64_t id = new_obj(bs, "l");
	for (int i = 0; i < 16; i++) {
		fill(buf, BS, i);
		assert_int_equal(bstore_block_write(bs, id, (uint64_t)i, 0, buf, BS, false, false, NULL), 0);
	}
	for (int round = 0; round < 40; round++) {
		uint64_t victim = (uint64_t)(round % 16);
		struct bstore_binfo bi;
		int have = bstore_block_read(bs, id, victim, 0, exp, BS, &bi);
		if (have == -ENOENT)
			memset(exp, 0, BS);
		/* touch every other block so that victim is the LRU one */
		for (uint64_t j = 0; j < 16; j++)
			if (j != victim)
				(void)bstore_block_read(bs, id, j, 0, out, 16, NULL);
		memset(buf, 0x5A + round, 100);
		memcpy(exp + 1000, buf, 100);
		assert_int_equal(bstore_block_write(bs, id, victim, 1000, buf, 100, false, false, &bi), 0);
		assert_int_equal(bstore_block_read(bs, id, victim, 0, out, BS, NULL), 0);
		if (have == 0)
			assert_memory_equal(out, exp, BS);
		bstore_stats_get(bs, &st);
		assert_true(st.blocks_used <= 16);
		uint64_t idx[32];
		assert_true(bstore_obj_blocks(bs, id, false, idx, 32) <= 16);
	}
	bstore_close(bs);
	bs = open_store(path, 16);
	bstore_stats_get(bs, &st);
	assert_true(st.blocks_used <= 16);
	bstore_close(bs);
}

static void torn_record_falls_back(void **state)
{
	struct bstore *bs = open_store(path, 16);
	struct bstore_binfo bi;
	uint8_t buf[128];
	(void)state;

	uint64_t id = new_obj(bs, "t");
	fill(buf, sizeof(buf), 9);
	assert_int_equal(bstore_block_write(bs, id, 2, 0, buf, 128, true, false, &bi), 0);
	assert_int_equal(bstore_block_clean(bs, id, 2, bi.version), 0);
	bstore_close(bs);
	/* tear the newer record (the "clean" one): flip a byte in the block
	 * table; the older, dirty record must win */
	struct bstore_geom g = opts(16).geom;
	uint64_t blk_off = 4096 + (uint64_t)g.nobjs * 2 * 512;
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	uint8_t rec[16 * 128];
	assert_int_equal(pread(fd, rec, sizeof(rec), (off_t)blk_off), (ssize_t)sizeof(rec));
	int torn = 0;
	for (int p = 0; p < 16; p++) {
		uint8_t *a = rec + p * 128, *b = a + 64;
		uint64_t sa, sb;
		memcpy(&sa, a + 8, 8);
		memcpy(&sb, b + 8, 8);
		if (sa && sb) {
			uint8_t *newer = sb > sa ? b : a;
			newer[30] ^= 0x55;
			torn++;
		}
	}
	assert_int_equal(torn, 1);
	assert_int_equal(pwrite(fd, rec, sizeof(rec), (off_t)blk_off), (ssize_t)sizeof(rec));
	close(fd);
	bs = open_store(path, 16);
	assert_int_equal(bstore_block_info(bs, id, 2, &bi), 0);
	assert_true(bi.dirty);
	uint8_t out[128];
	assert_int_equal(bstore_block_read(bs, id, 2, 0, out, 128, NULL), 0);
	assert_memory_equal(out, buf, 128);
	bstore_close(bs);
}

/* An object's utime is kept across a reopen; a record written before
 * utime existed (no OREC_UTIME flag, a 336-byte path where path and
 * utime now are) reads with utime 0, and its path only if it ends
 * within BSTORE_PATH_MAX. */
static void utime_kept_and_old_records_read(void **state)
{
	struct bstore_obj a = { 0 }, b = { 0 }, o;
	struct bstore *bs = open_store(path, 16);
	(void)state;

	snprintf(a.path, sizeof(a.path), "a");
	a.utime = 1234567890123456789ull;
	assert_int_equal(bstore_obj_create(bs, &a), 0);
	memset(b.path, 'p', BSTORE_PATH_MAX - 1);
	b.utime = 99;
	assert_int_equal(bstore_obj_create(bs, &b), 0);
	b.utime = 100;   /* an update keeps the new one */
	assert_int_equal(bstore_obj_update(bs, &b), 0);
	bstore_close(bs);
	bs = open_store(path, 16);
	assert_int_equal(bstore_obj_get(bs, a.id, &o), 0);
	assert_true(o.utime == 1234567890123456789ull);
	assert_string_equal(o.path, "a");
	assert_int_equal(bstore_obj_get(bs, b.id, &o), 0);
	assert_true(o.utime == 100);
	assert_int_equal(strlen(o.path), BSTORE_PATH_MAX - 1);
	bstore_close(bs);

	/* make every record an old one: flag off, b's path 330 bytes long */
	struct bstore_geom g = opts(16).geom;
	uint8_t tab[16 * 2 * 512];
	int fd = open(path, O_RDWR), old = 0;
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, tab, sizeof(tab), 4096), (ssize_t)sizeof(tab));
	for (uint32_t r = 0; r < g.nobjs * 2; r++) {
		uint8_t *rec = tab + r * 512;
		uint32_t magic, flags, crc;
		uint64_t id;
		memcpy(&magic, rec, 4);
		memcpy(&id, rec + 16, 8);
		if (magic != 0x4f524543u)
			continue;
		memcpy(&flags, rec + 32, 4);
		flags &= ~2u;
		memcpy(rec + 32, &flags, 4);
		memset(rec + 176, 0, 336);
		if (id == b.id)
			memset(rec + 176, 'q', 330);
		else
			rec[176] = 'a';
		crc = crc32c(0, rec, 4);
		crc = crc32c(crc, zeros_for_test, 4);
		crc = crc32c(crc, rec + 8, 504);
		memcpy(rec + 4, &crc, 4);
		old++;
	}
	assert_true(old >= 2);
	assert_int_equal(pwrite(fd, tab, sizeof(tab), 4096), (ssize_t)sizeof(tab));
	close(fd);
	bs = open_store(path, 16);
	assert_int_equal(bstore_obj_get(bs, a.id, &o), 0);
	assert_true(o.utime == 0);
	assert_string_equal(o.path, "a");
	assert_int_equal(bstore_obj_get(bs, b.id, &o), 0);
	assert_true(o.utime == 0);
	assert_string_equal(o.path, "");
	/* written again, the record is a new one */
	o.utime = 7;
	assert_int_equal(bstore_obj_update(bs, &o), 0);
	bstore_close(bs);
	bs = open_store(path, 16);
	assert_int_equal(bstore_obj_get(bs, b.id, &o), 0);
	assert_true(o.utime == 7);
	bstore_close(bs);
}

/* ---- crash test ---- */

#define NOPS 16

/* Run ops [0, nops) of the script; after each, write a byte to fd (if >= 0). */
static void script(struct bstore *bs, int nops, int fd)
{
	uint8_t buf[BS];
	uint64_t a = 0, b = 0, c = 0;
	struct bstore_binfo bi = { 0 };
	struct bstore_obj o;

	for (int op = 0; op < nops; op++) {
		fill(buf, BS, op + 1);
		switch (op) {
		case 0: a = new_obj(bs, "a"); break;
		case 1: bstore_block_write(bs, a, 0, 0, buf, BS, true, false, NULL); break;
		case 2: bstore_block_write(bs, a, 1, 100, buf, 200, true, false, NULL); break;
		case 3: bstore_obj_get(bs, a, &o); o.size = BS + 300; bstore_obj_update(bs, &o); break;
		case 4: bstore_block_write(bs, a, 0, 10, buf, 20, true, false, &bi); break;
		case 5: b = new_obj(bs, "b"); break;
		case 6: bstore_block_write(bs, b, 5, 0, buf, 1000, false, true, NULL); break;
		case 7: bstore_block_clean(bs, a, 0, bi.version); break;
		case 8: bstore_block_truncate(bs, a, 1, 50); break;
		case 9: bstore_block_write(bs, b, 5, 500, buf, 1000, true, false, NULL); break;
		case 10: bstore_obj_delete(bs, a); break;
		case 11: c = new_obj(bs, "c"); break;
		case 12: bstore_block_write(bs, c, 0, 0, buf, BS, true, false, NULL); break;
		case 13: bstore_block_write(bs, c, 0, 0, buf, BS / 2, true, false, NULL); break;
		case 14: bstore_block_drop(bs, b, 5); break;
		case 15: bstore_block_write(bs, b, 6, 0, buf, 77, true, false, NULL); break;
		}
		if (fd >= 0 && write(fd, "x", 1) != 1)
			_exit(3);
	}
}

/* A canonical text of everything the store holds, ordered by name. */
static void dump(struct bstore *bs, char *out, size_t len)
{
	uint64_t ids[16], idx[64];
	size_t n = bstore_obj_list(bs, ids, 16), pos = 0;
	const char *names[] = { "a", "b", "c" };

	out[0] = 0;
	for (int k = 0; k < 3; k++) {
		for (size_t i = 0; i < n; i++) {
			struct bstore_obj o;
			assert_int_equal(bstore_obj_get(bs, ids[i], &o), 0);
			if (strcmp(o.path, names[k]))
				continue;
			pos += (size_t)snprintf(out + pos, len - pos, "%s size=%llu:",
						o.path, (unsigned long long)o.size);
			size_t nb = bstore_obj_blocks(bs, ids[i], false, idx, 64);
			for (size_t j = 0; j < nb; j++) {
				uint8_t buf[BS];
				struct bstore_binfo bi;
				assert_int_equal(bstore_block_read(bs, ids[i], idx[j], 0, buf, BS, &bi), 0);
				pos += (size_t)snprintf(out + pos, len - pos,
					" [%llu v=%u d=%d c=%08x]", (unsigned long long)idx[j],
					bi.valid, bi.dirty, crc32c(0, buf, BS));
			}
			pos += (size_t)snprintf(out + pos, len - pos, "\n");
		}
	}
}

static void reference(int nops, char *out, size_t len)
{
	unlink(path2);
	struct bstore *bs = open_store(path2, 32);
	script(bs, nops, -1);
	dump(bs, out, len);
	bstore_close(bs);
	unlink(path2);
}

/* The child's script: open the store, run the NOPS operations. */
static int script_child(void *arg, int fd)
{
	struct bstore_open_opts o = opts(32);
	struct bstore *bs;
	(void)arg;

	if (bstore_open(&bs, path, &o))
		return 2;
	script(bs, NOPS, fd);
	bstore_close(bs);
	return 0;
}

static void crash_at_every_persist_point(void **state)
{
	static char got[8192], before[8192], after[8192];
	int crashes = 0;
	(void)state;

	for (uint64_t n = 1; n < 1000; n++) {
		bool through;
		unlink(path);
		int done = crash_point_run(n, script_child, NULL, NOPS, &through);
		if (through)
			break; /* ran to the end without reaching point n */
		crashes++;
		/* recover: the state is that after `done` ops, or after done+1
		 * if the op in flight had passed its commit point */
		struct bstore *bs = open_store(path, 32);
		dump(bs, got, sizeof(got));
		/* and the store still works */
		uint64_t id = new_obj(bs, "z");
		uint8_t buf[64] = { 1 };
		assert_int_equal(bstore_block_write(bs, id, 0, 0, buf, 64, true, false, NULL), 0);
		bstore_close(bs);
		reference(done, before, sizeof(before));
		reference(done + 1 > NOPS ? NOPS : done + 1, after, sizeof(after));
		if (strcmp(got, before) && strcmp(got, after)) {
			fprintf(stderr, "crash at %llu after %d ops:\n--got\n%s--before\n%s--after\n%s",
				(unsigned long long)n, done, got, before, after);
			fail();
		}
	}
	fprintf(stderr, "crash test: %d crash points checked\n", crashes);
	assert_true(crashes > 20);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(write_read_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(refuses_foreign_files, setup, teardown),
		cmocka_unit_test_setup_teardown(evicts_clean_backpressure_dirty, setup, teardown),
		cmocka_unit_test_setup_teardown(pin_and_base, setup, teardown),
		cmocka_unit_test_setup_teardown(write_from_stream, setup, teardown),
		cmocka_unit_test_setup_teardown(stale_fetch_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(rewrite_lru_block_when_full, setup, teardown),
		cmocka_unit_test_setup_teardown(torn_record_falls_back, setup, teardown),
		cmocka_unit_test_setup_teardown(utime_kept_and_old_records_read, setup, teardown),
		cmocka_unit_test_setup_teardown(crash_at_every_persist_point, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
