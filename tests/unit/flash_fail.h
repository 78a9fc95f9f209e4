/* flash_fail.h - a failing flash for tests of the tiered store: between
 * flash_fail_begin(bytes) and flash_fail_end(), every write of this
 * process past `bytes` of a file fails with EFBIG (RLIMIT_FSIZE, SIGXFSZ
 * ignored), as a full file system fails a spill file's write-backs.
 * Include after cmocka.h. */
#pragma once
#include <signal.h>
#include <sys/resource.h>

static struct rlimit flash_fail_saved;

static inline void flash_fail_begin(rlim_t bytes)
{
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &flash_fail_saved), 0);
	struct rlimit lim = { bytes, flash_fail_saved.rlim_max };
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
}

static inline void flash_fail_end(void)
{
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &flash_fail_saved), 0);
	signal(SIGXFSZ, SIG_DFL);
}
