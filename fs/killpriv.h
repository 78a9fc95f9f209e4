/* killpriv.h - FUSE_HANDLE_KILLPRIV_V2 for libfuse 3.14 (see killpriv.c). */
#pragma once
#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 314
#endif
#include <fuse_lowlevel.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "fs/fs.h"

/* Whether the kernel's FUSE protocol (7.proto_minor) has the flag. */
bool killpriv_kernel_has(unsigned proto_minor);

/* From the init callback, last: have this thread's coming INIT reply (its
 * next writev) ask for FUSE_HANDLE_KILLPRIV_V2. */
void killpriv_arm(void);

/* Whether the reply went out asking for it: from then on set-id bits and
 * security.capability are ours to drop on write and truncate. */
bool killpriv_granted(void);

/* Who the caller is, for the set-id rule: the kernel tells for truncates
 * (FATTR_KILL_SUIDGID in the setattr); otherwise we look (/proc). */
enum killpriv_caller { KP_ASK, KP_NO_FSETID, KP_FSETID };

/* Before the request's caller changes ino's data (write, fallocate,
 * truncate, an O_TRUNC open): drop the set-id bits and file capabilities
 * Linux's VFS would drop, if the kernel left that to us. A file found with
 * nothing to drop is not looked at again until its mode, owner or xattrs
 * change (killpriv_changed). 0 or -errno (the change must then fail, as it
 * would on the backing). */
int killpriv_on_modify(fuse_req_t req, struct fs_inode *ino, enum killpriv_caller who);

/* A chown, before the backing's (root's) chown, or one that changes no id
 * (an empty setattr): drop what Linux drops on a chown by this caller -
 * set-uid, set-gid by its rule, file capabilities. */
int killpriv_on_chown(fuse_req_t req, struct fs_inode *ino);

/* After a change of ino's mode, owner or xattrs has completed (or failed:
 * it may have half happened): facts learnt before it no longer hold. */
static inline void killpriv_changed(struct fs_inode *ino)
{
	atomic_fetch_add(&ino->pgen, 1);
}

/* The generation to learn a fact at: read before looking. */
static inline unsigned killpriv_gen(struct fs_inode *ino)
{
	return atomic_load(&ino->pgen);
}

static inline void killpriv_learn(atomic_uint *fact, unsigned gen)
{
	atomic_store(fact, gen + 1);
}

static inline bool killpriv_known(struct fs_inode *ino, atomic_uint *fact)
{
	return atomic_load(fact) == atomic_load(&ino->pgen) + 1;
}
