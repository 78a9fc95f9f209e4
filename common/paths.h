/* paths.h - questions about file names shared by the tools. */
#pragma once
#include <stdbool.h>

/* Do a and b name the same file, whether it exists yet or is about to be
 * created? Existing files compare by device and inode (hard links, other
 * spellings); a name not yet there compares by its directory's real path
 * plus its last component. NULL names nothing and matches nothing. Used
 * to refuse one file in two roles (an input that an output would
 * truncate, a flash file that is also the access log). */
bool path_same_file(const char *a, const char *b);
