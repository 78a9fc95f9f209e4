/* caller.c - the request a FUSE worker serves, and whether its caller is
 * being killed (fs.h: fs_serving, fs_caller_killed): a wait for cache
 * space asks, below the FUSE glue that knows the request; and whether
 * the session is ending (fs_session_ending). */
#define FUSE_USE_VERSION 314
#include "fs/fs.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

bool fs_session_ending(struct fs *fs)
{
	return fs->se && fuse_session_exited(fs->se);
}

/* The write, open or create this worker serves; NULL between them. */
static __thread fuse_req_t serving;

void fs_serving(fuse_req_t req)
{
	serving = req;
}

/* Whether signal sig is in a "SigPnd:" or "ShdPnd:" mask of a
 * /proc/PID/status. */
static bool status_pending(FILE *f, int sig)
{
	char line[128];
	unsigned long long mask;

	while (fgets(line, sizeof(line), f))
		if ((sscanf(line, "SigPnd: %llx", &mask) == 1 ||
		     sscanf(line, "ShdPnd: %llx", &mask) == 1) &&
		    (mask & (1ull << (sig - 1))))
			return true;
	return false;
}

bool fs_caller_killed(void)
{
	fuse_req_t req = serving;
	char path[40];

	if (!req || !fuse_req_interrupted(req))
		return false;
	pid_t pid = fuse_req_ctx(req)->pid;  /* the calling thread */
	if (pid <= 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return errno == ENOENT;   /* gone already */
	bool killed = status_pending(f, SIGKILL);
	fclose(f);
	return killed;
}
