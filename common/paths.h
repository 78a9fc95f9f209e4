/* paths.h - the files a daemon is pointed at: one file in two roles, and
 * a spill file's pages at a clean stop. */
#pragma once
#include <stdbool.h>

/* Do a and b name the same file, whether it exists yet or is about to be
 * created? Existing files compare by device and inode (hard links, other
 * spellings); a name not yet there compares by its directory's real path
 * plus its last component. NULL names nothing and matches nothing. Used
 * to refuse one file in two roles (an input that an output would
 * truncate, a flash file that is also the access log). */
bool path_same_file(const char *a, const char *b);

/* Among n names (NULLs skipped), the first pair that is one file: returns
 * true with *i < *j set, false when all are distinct. */
bool paths_first_same(const char *const path[], int n, int *i, int *j);

/* A flash spill file is one process's: a second daemon on it overwrote
 * the first one's pages (and its stop emptied them). Takes an exclusive
 * lock on fd; -EBUSY, logged with path, when another process holds it. */
int spill_lock(int fd, const char *path);

/* A flash spill file at a clean stop, after the store closed it: its
 * pages were swapped memory, dead now (no later run reads them) yet
 * readable on disk. A file this run created is removed; one it found is
 * emptied (it keeps its name, owner and mode); one another process has
 * locked meanwhile (spill_lock) is left alone. Logged either way. */
void spill_discard(const char *path, bool created);

/* A refused start removes the files it created, but "not there when we
 * started" does not make a file ours: another daemon started on the same
 * name meanwhile may have created it and be using it (a second nvcached
 * stopped during its start-up removed a running one's flash file). The
 * stores hold their NVRAM and flash files flock'ed, so a file locked by
 * another process is left; otherwise it is removed under our lock.
 * `what` names the file in the log. */
void path_remove_unlocked(const char *path, const char *what);
