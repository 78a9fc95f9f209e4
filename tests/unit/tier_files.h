/* tier_files.h - what the tests of a tiered store share: its two files,
 * `nvram` (the MRAM region, on /dev/shm) and `flash` (the spill file, on
 * /var/tmp: never tmpfs), named per process and test program; removed by
 * tier_files_remove(), which a group teardown calls so that they go also
 * when a test fails; and the page pattern the tests write and check.
 * Include after cmocka.h, in one file of a test program. */
#pragma once
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char nvram[64], flash[64];

/* tag: a few letters naming the test program in the file names. */
static inline void tier_files_name(const char *tag)
{
	snprintf(nvram, sizeof(nvram), "/dev/shm/nvtest-%s-%d.mram", tag, (int)getpid());
	snprintf(flash, sizeof(flash), "/var/tmp/nvtest-%s-%d.flash", tag, (int)getpid());
}

static inline void tier_files_remove(void)
{
	unlink(nvram);
	unlink(flash);
}

/* 4 KiB of bytes that differ for every (id, gen) and every 8-byte word. */
static inline void tier_fill(uint8_t *b, uint64_t id, unsigned gen)
{
	for (unsigned i = 0; i < 4096; i += 8) {
		uint64_t v = (id << 20) ^ i ^ ((uint64_t)gen << 56);
		memcpy(b + i, &v, 8);
	}
}
