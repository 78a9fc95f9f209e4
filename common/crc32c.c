/* crc32c.c - CRC-32C with a hardware path (SSE4.2) and a table fallback. */
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
#endif

static uint32_t (*crc_impl)(uint32_t, const unsigned char *, size_t);

__attribute__((constructor))
static void crc_select(void)
{
	crc_table_init();
	crc_impl = crc_sw;
#if defined(__x86_64__)
	if (have_sse42())
		crc_impl = crc_hw;
#endif
}

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
	return ~crc_impl(~crc, buf, len);
}
