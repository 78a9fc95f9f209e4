/* names.h - the names the kernel knows an inode by: a directory entry is
 * (parent directory, name), the parent by identity (dev, ino) so that it
 * stays right when the parent is renamed or forgotten first. A file with
 * hard links has several. forget.c asks the kernel to drop each of them;
 * dropping one would leave the inode held by the others.
 *
 * A list kept per inode, newest first, at most NAMES_MAX long (the oldest
 * goes): a stale entry (unlinked, renamed behind our back) only costs a
 * request the kernel answers ENOENT. Callers lock (fs.itab_lk). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define NAMES_MAX 8
#define NAME_BYTES 256 /* NAME_MAX + 1: the longest name the kernel sends */

struct fs_name {
	struct fs_name *next;
	dev_t pdev;
	ino_t pino;
	char name[];
};

/* parent/name at the front of *list (moved there if it is in it). False
 * when out of memory or the name is too long: the list is unchanged. */
bool names_add(struct fs_name **list, dev_t pdev, ino_t pino, const char *name);
/* The entry (from) became (to): a rename. Added if from is not there. */
bool names_move(struct fs_name **list, dev_t fpdev, ino_t fpino,
		const char *from, dev_t pdev, ino_t pino, const char *to);
size_t names_count(const struct fs_name *list);
void names_free(struct fs_name **list);
