/* nvckpt.h - what a program may ask of libnvckpt, the persistent MPI windows
 * library. None of it is needed: an unchanged MPI program run with
 * LD_PRELOAD=libnvckpt.so gets its windows checkpointed at every
 * synchronization. These calls let it find out that it was restarted, keep
 * its own scalars (loop counter, residual) with the windows, and use the
 * zero-copy double-buffered checkpoints. See docs/checkpoints.md.
 *
 * A program that must also run without the library declares the calls it
 * uses weak and checks them for NULL (tests/mpi/hpccg.c does).
 *
 * Threads: call from the thread that makes the MPI calls. */
#pragma once
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version the windows were restored from in a restarted job (the
 * number of the window's synchronization that committed it), or 0 in a
 * job that started afresh. Valid once the windows are created; the same
 * number is the info key "nvcache_version" of each restored window
 * (MPI_Win_get_info). */
uint64_t nvckpt_version(void);

/* Keep size bytes at ptr in every checkpoint from now on, under id (any
 * number the program chooses; at most 64 ids, 64 KiB in all). In a
 * restarted job the bytes saved under id come back into ptr: at this call
 * if the windows are already restored, else when they are. Returns 0, or
 * -EINVAL (size 0 or too large, id known with another size), -ENOSPC. */
int nvckpt_protect(int id, void *ptr, size_t size);

/* Double-buffered checkpoints (the seed paper's application-level method,
 * without a copy): two buffers of size bytes in NVRAM, the current state
 * in one, the next state computed into the other, then committed.
 *   nvckpt_db_alloc: *cur = the buffer holding the last version all ranks
 *     of comm committed (restart) or a zeroed buffer (fresh start); returns
 *     1 when restored, 0 when fresh, or -errno (logged).
 *   nvckpt_db_next: the other buffer, forgotten as a version so that the
 *     program may write its next state into it.
 *   nvckpt_db_commit: persists the next buffer (and the protected bytes)
 *     as a new version, agrees with the other ranks, and makes it current;
 *     returns it. One MPI_Allreduce on a duplicate of comm.
 * name is unique per job (the file's name). With NVCACHE_CKPT=off the two
 * buffers are plain memory and nothing is checkpointed. */
struct nvckpt_db;
int nvckpt_db_alloc(struct nvckpt_db **db, const char *name, size_t size,
		    MPI_Comm comm, void **cur);
void *nvckpt_db_next(struct nvckpt_db *db);
void *nvckpt_db_commit(struct nvckpt_db *db);
void nvckpt_db_free(struct nvckpt_db *db);

#ifdef __cplusplus
}
#endif
