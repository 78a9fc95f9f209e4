/* crc32c.h - CRC-32C (Castagnoli), the checksum of every persistent record
 * and wire frame. Uses the SSE4.2 instruction when the CPU has it. */
#pragma once
#include <stddef.h>
#include <stdint.h>

/* Continue a CRC: start with crc = 0. */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);
