/* crc32c.c - CRC-32C with a hardware path (SSE4.2) and a table fallback.
 *
 * The hardware path runs three streams at once on long buffers: the crc32
 * instruction takes three cycles to give its result but accepts a new one
 * every cycle, so one chain of them uses a third of it. A block is three
 * lanes of LANE bytes; lane A continues the running CRC, B and C start
 * from 0, and the block's CRC is shift(A, 2 LANE) ^ shift(B, LANE) ^ C,
 * where shift(x, n) is the register after n zero bytes from x: linear in
 * x (no inversion inside crc_hw), so a table per byte of x gives it. */
#include "common/crc32c.h"

#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

static uint32_t crc_table[256];

static void crc_table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		crc_table[i] = c;
	}
}

static uint32_t crc_sw(uint32_t crc, const unsigned char *p, size_t len)
{
	while (len--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t crc_hw(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t c = crc;

	while (len >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}

static int have_sse42(void)
{
	unsigned a, b, c, d;
	return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_2);
}

#define LANE 4096u

/* shift(x, n) as four tables of 256, one per byte of x */
struct crc_shift { uint32_t t[4][256]; };
static struct crc_shift shift1, shift2;

static uint32_t crc_shift_apply(const struct crc_shift *s, uint32_t x)
{
	return s->t[0][x & 0xff] ^ s->t[1][(x >> 8) & 0xff] ^
	       s->t[2][(x >> 16) & 0xff] ^ s->t[3][x >> 24];
}

__attribute__((target("sse4.2")))
static void crc_shift_init(struct crc_shift *s, size_t n)
{
	static const unsigned char zeros[2 * LANE];
	uint32_t col[32];

	for (int i = 0; i < 32; i++)
		col[i] = crc_hw(1u << i, zeros, n);
	for (int k = 0; k < 4; k++)
		for (int b = 0; b < 256; b++) {
			uint32_t v = 0;
			for (int j = 0; j < 8; j++)
				if (b >> j & 1)
					v ^= col[8 * k + j];
			s->t[k][b] = v;
		}
}

__attribute__((target("sse4.2")))
static uint32_t crc_hw3(uint32_t crc, const unsigned char *p, size_t len)
{
	while (len >= 3 * LANE) {
		uint64_t a = crc, b = 0, c = 0;
		for (size_t i = 0; i < LANE; i += 8) {
			uint64_t va, vb, vc;
			memcpy(&va, p + i, 8);
			memcpy(&vb, p + LANE + i, 8);
			memcpy(&vc, p + 2 * LANE + i, 8);
			a = __builtin_ia32_crc32di(a, va);
			b = __builtin_ia32_crc32di(b, vb);
			c = __builtin_ia32_crc32di(c, vc);
		}
		crc = crc_shift_apply(&shift2, (uint32_t)a) ^
		      crc_shift_apply(&shift1, (uint32_t)b) ^ (uint32_t)c;
		p += 3 * LANE;
		len -= 3 * LANE;
	}
	return crc_hw(crc, p, len);
}
#endif

static uint32_t (*crc_impl)(uint32_t, const unsigned char *, size_t);

__attribute__((constructor))
static void crc_select(void)
{
	crc_table_init();
	crc_impl = crc_sw;
#if defined(__x86_64__)
	if (have_sse42()) {
		crc_shift_init(&shift1, LANE);
		crc_shift_init(&shift2, 2 * LANE);
		crc_impl = crc_hw3;
	}
#endif
}

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
	return ~crc_impl(~crc, buf, len);
}
