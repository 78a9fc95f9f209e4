/* xor.c - word-at-a-time XOR; the compiler vectorises the loop. */
#include "common/xor.h"

#include <stdint.h>
#include <string.h>

void xor_into(void *dst, const void *src, size_t len)
{
	unsigned char *d = dst;
	const unsigned char *s = src;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		uint64_t a, b;
		memcpy(&a, d + i, 8);
		memcpy(&b, s + i, 8);
		a ^= b;
		memcpy(d + i, &a, 8);
	}
	for (; i < len; i++)
		d[i] ^= s[i];
}
