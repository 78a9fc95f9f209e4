/* xor.h - XOR of buffers, the arithmetic of parity pages. */
#pragma once
#include <stddef.h>

/* dst ^= src over len bytes. */
void xor_into(void *dst, const void *src, size_t len);
