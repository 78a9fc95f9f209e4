/* fdlimit.h - the open-file limit a daemon can have. */
#pragma once
#include <stdint.h>

/* Raise RLIMIT_NOFILE's soft limit to the hard one, and both to the
 * system's maximum (/proc/sys/fs/nr_open) when privileged: the usual soft
 * limit of 1024 runs out in a daemon that keeps a descriptor per file or
 * per connection. Returns the soft limit now (UINT64_MAX: unlimited). */
uint64_t fdlimit_raise(void);
