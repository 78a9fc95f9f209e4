/* names.c - the names an inode is known by (names.h). */
#include "fs/names.h"

#include <stdlib.h>
#include <string.h>

static struct fs_name **find(struct fs_name **list, dev_t pdev, ino_t pino,
			     const char *name)
{
	for (; *list; list = &(*list)->next)
		if ((*list)->pdev == pdev && (*list)->pino == pino &&
		    strcmp((*list)->name, name) == 0)
			return list;
	return NULL;
}

bool names_add(struct fs_name **list, dev_t pdev, ino_t pino, const char *name)
{
	struct fs_name **pp = find(list, pdev, pino, name), *e;

	if (pp) {
		e = *pp;
		*pp = e->next;
	} else {
		size_t len = strlen(name);
		if (len >= NAME_BYTES || !(e = malloc(sizeof(*e) + len + 1)))
			return false;
		e->pdev = pdev;
		e->pino = pino;
		memcpy(e->name, name, len + 1);
	}
	e->next = *list;
	*list = e;
	/* past the cap the oldest goes */
	size_t n = 0;
	for (pp = list; *pp; pp = &(*pp)->next)
		if (++n > NAMES_MAX) {
			names_free(pp);
			break;
		}
	return true;
}

bool names_move(struct fs_name **list, dev_t fpdev, ino_t fpino,
		const char *from, dev_t pdev, ino_t pino, const char *to)
{
	struct fs_name **pp = find(list, fpdev, fpino, from);

	if (pp) {
		struct fs_name *old = *pp;
		*pp = old->next;
		free(old);
	}
	return names_add(list, pdev, pino, to);
}

size_t names_count(const struct fs_name *list)
{
	size_t n = 0;
	for (; list; list = list->next)
		n++;
	return n;
}

void names_free(struct fs_name **list)
{
	while (*list) {
		struct fs_name *e = *list;
		*list = e->next;
		free(e);
	}
}
