/* profile_load.h - the paper's profile for a live store: each page's
 * access count from a previous run's access log (nvswapd --trace-out),
 * handed to the tiering policy before the first access
 * (policy_set_profile). mram-fixed and lowpower then pin the pages that
 * were hottest over that whole run from their first touch, as the paper's
 * profile-based paging does; adaptive ranks its pin set by it.
 *
 * Threads: call before the store serves anything. */
#pragma once
#include <stdint.h>

#include "pmem/policy.h"

struct profile_summary {
	uint64_t accesses;   /* page accesses counted */
	uint64_t pages;      /* distinct pages with a count */
	uint64_t outside;    /* accesses to pages >= the store's size: ignored */
};

/* Read the nvt access log at path (gzip or plain) and give every page
 * below `pages` its count. Frees in the log are not accesses and are
 * skipped. A log cut short (its run was killed) gives the counts read
 * before the cut, with a warning. Errors, logged with the path: -EINVAL
 * (not a live store's access log: a lackey or CPU-level trace; or
 * unreadable from the start), -ENOENT etc.
 * from opening it, -ENOMEM, and policy_set_profile's. */
int profile_load(struct policy *p, const char *path, uint64_t pages,
		 struct profile_summary *sum);
