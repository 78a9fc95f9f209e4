/* ops.h - the FUSE low-level operation table of nvcachefs (ops.c), the top
 * layer of fs/ (fs.h). The session's userdata is the struct fs. Operations
 * run on libfuse's worker threads, any number at once; see fs.h for the
 * locks they take. */
#pragma once
#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 314
#endif
#include <fuse_lowlevel.h>

#include "fs/fs.h"

extern const struct fuse_lowlevel_ops fs_ops;
