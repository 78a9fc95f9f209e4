/* crc32c.h - CRC-32C (Castagnoli), the checksum of every persistent record
 * and wire frame. Uses the SSE4.2 instruction when the CPU has it, and
 * VPCLMULQDQ folding for long buffers where it has AVX-512 too. */
#pragma once
#include <stddef.h>
#include <stdint.h>

/* Continue a CRC: start with crc = 0. */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);
/* For tests: the CRC by one implementation (0 table, 1 SSE4.2, 2 SSE4.2
 * three streams, 3 AVX-512 VPCLMULQDQ folding) into *out; -ENOTSUP where
 * this CPU lacks it. */
int crc32c_variant(int v, uint32_t crc, const void *buf, size_t len,
		   uint32_t *out);
