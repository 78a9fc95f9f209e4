/* paths.c - see paths.h. */
#include "common/paths.h"

#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* Real path of p's directory plus p's last component, for a name that
 * does not exist yet. 0, or -1 when the directory cannot be resolved. */
static int canon_new(const char *p, char *out, size_t len)
{
	char dir[PATH_MAX], real[PATH_MAX];
	const char *slash = strrchr(p, '/');
	const char *base = slash ? slash + 1 : p;

	if (!slash)
		strcpy(dir, ".");
	else if (slash == p)
		strcpy(dir, "/");
	else if ((size_t)(slash - p) < sizeof(dir)) {
		memcpy(dir, p, (size_t)(slash - p));
		dir[slash - p] = '\0';
	} else
		return -1;
	if (!realpath(dir, real))
		return -1;
	size_t n = strlen(real), m = strlen(base);
	if (n + 1 + m + 1 > len)
		return -1;
	memcpy(out, real, n);
	out[n] = '/';
	memcpy(out + n + 1, base, m + 1);
	return 0;
}

bool path_same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	char ca[PATH_MAX], cb[PATH_MAX];
	bool ea, eb;

	if (!a || !b)
		return false;
	ea = stat(a, &sa) == 0;
	eb = stat(b, &sb) == 0;
	if (ea && eb)
		return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
	if (ea != eb)   /* one exists, the other not (yet): two files */
		return false;
	if (canon_new(a, ca, sizeof(ca)) < 0 || canon_new(b, cb, sizeof(cb)) < 0)
		return strcmp(a, b) == 0;
	return strcmp(ca, cb) == 0;
}

bool paths_first_same(const char *const path[], int n, int *i, int *j)
{
	for (int a = 0; a < n; a++)
		for (int b = a + 1; b < n; b++)
			if (path_same_file(path[a], path[b])) {
				*i = a;
				*j = b;
				return true;
			}
	return false;
}

int spill_lock(int fd, const char *path)
{
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return 0;
	int e = errno;
	if (e == EWOULDBLOCK) {
		log_err("flash file %s is in use by another process (two "
			"stores on one file overwrite each other's pages); give "
			"each its own", path);
		return -EBUSY;
	}
	log_err("flash file %s: lock: %s", path, strerror(e));
	return -e;
}

void spill_discard(const char *path, bool created)
{
	if (!path)
		return;
	/* Through a descriptor we hold locked: never a file another
	 * daemon has taken up since the store closed ours. */
	int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		log_warn("flash file %s: cannot discard its pages: %s", path,
			 strerror(errno));
		return;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		log_warn("flash file %s: in use by another process; left as it "
			 "is", path);
	} else if (created) {
		if (unlink(path) == 0)
			log_info("removed flash file %s", path);
		else
			log_warn("flash file %s: cannot remove it: %s", path,
				 strerror(errno));
	} else if (ftruncate(fd, 0) == 0) {
		log_info("emptied flash file %s (swapped pages are not kept "
			 "after exit)", path);
	} else {
		log_warn("flash file %s: cannot empty it: %s", path,
			 strerror(errno));
	}
	close(fd);
}

void path_remove_unlocked(const char *path, const char *what)
{
	if (!path)
		return;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			log_warn("%s %s: not removed: %s", what, path,
				 strerror(errno));
		return;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		log_warn("%s %s: in use by another process; left as it is",
			 what, path);
	else if (unlink(path) == 0)
		log_info("removed %s %s (created by this refused start)",
			 what, path);
	else if (errno != ENOENT)
		log_warn("%s %s: cannot remove it: %s", what, path,
			 strerror(errno));
	close(fd);
}
