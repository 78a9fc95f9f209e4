/* profile_load.c - a live store's profile from an access log; see
 * profile_load.h. */
#include "pmem/profile_load.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "pmem/trace.h"
#include "pmem/tracelog.h"

#define RECS 4096

/* Count the log's page accesses into cnt[pages] (saturating). */
static int count_log(struct trace_reader *r, const char *path, uint32_t *cnt,
		     uint64_t pages, struct profile_summary *sum)
{
	struct trace_rec *recs = malloc(RECS * sizeof(*recs));
	if (!recs)
		return -ENOMEM;
	uint64_t instr = 0;
	ssize_t n;
	while ((n = trace_read(r, recs, RECS, &instr)) > 0) {
		for (ssize_t k = 0; k < n; k++) {
			if (recs[k].op == TRACE_FREE)
				continue;
			uint64_t pg = recs[k].addr / TRACELOG_PAGE;
			if (pg >= pages) {
				sum->outside++;
				continue;
			}
			sum->accesses++;
			sum->pages += cnt[pg] == 0;
			if (cnt[pg] != UINT32_MAX)
				cnt[pg]++;
		}
	}
	free(recs);
	if (n < 0 && sum->accesses) {
		/* A run that did not end cleanly (kill -9, a crash) leaves
		 * its log cut short: what came before is still a profile. */
		log_warn("profile %s: unreadable after %llu accesses (see "
			 "above; a log cut short by a crash?): using those",
			 path, (unsigned long long)sum->accesses);
		return 0;
	}
	if (n < 0)
		log_err("profile %s: unreadable access log (see above)", path);
	return n < 0 ? (int)n : 0;
}

int profile_load(struct policy *p, const char *path, uint64_t pages,
		 struct profile_summary *sum)
{
	struct trace_reader *r;
	memset(sum, 0, sizeof(*sum));
	int rc = trace_open(&r, path, TRACE_AUTO);
	if (rc < 0)
		return rc;   /* logged, with the path */
	/* A page store's log, whose records are page accesses; a program's
	 * memory trace (lackey, or nvsim convert) counts something else. */
	if (trace_format_of(r) != TRACE_NVT ||
	    !(trace_flags(r) & NVT_F_STORE)) {
		log_err("profile %s: not a live store's access log (write one "
			"with nvswapd --trace-out FILE)", path);
		trace_close(r);
		return -EINVAL;
	}
	uint32_t *cnt = calloc(pages, sizeof(*cnt));
	if (!cnt) {
		trace_close(r);
		return -ENOMEM;
	}
	rc = count_log(r, path, cnt, pages, sum);
	trace_close(r);
	for (uint64_t pg = 0; pg < pages && rc == 0; pg++)
		if (cnt[pg])
			rc = policy_set_profile(p, pg, cnt[pg]);
	free(cnt);
	if (rc < 0)
		log_err("profile %s: %s", path, strerror(-rc));
	return rc;
}
