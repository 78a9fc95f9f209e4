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


/* Before the request's caller changes ino's data (write, fallocate,
 * truncate, an O_TRUNC open): drop the set-id bits and file capabilities
 * Linux's VFS would drop, if the kernel left that to us. A file found with
 * nothing to drop is not looked at again until killpriv_recheck. 0 or
 * -errno (the change must then fail, as it would on the backing). */
int killpriv_on_modify(fuse_req_t req, struct fs_inode *ino);

/* ino's mode, owner or xattrs changed. */
static inline void killpriv_recheck(struct fs_inode *ino)
{
	atomic_store(&ino->nosec, false);
}
