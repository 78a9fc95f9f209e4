/* bigmem.h - large zeroed tables whose reservation a stop request can cut
 * short.
 *
 * Why: nvswapd and nvcached run under mlockall(MCL_FUTURE), where a new
 * mapping is zeroed and locked by the mmap call itself, and no blocked or
 * handled signal interrupts that call. A 1 TiB export's 22 GiB of
 * per-page tables took 60 s in one such call, and a SIGTERM sent then
 * waited for all of it. Here a large table is mapped inaccessible and
 * opened in steps of BIGMEM_STEP (each step is populated and locked as it
 * opens), and the stop hook is asked between steps.
 *
 * Threads: the hook is set once, before any table is made. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define BIGMEM_STEP ((size_t)256 << 20)
/* From this size up a table is its own page-aligned mapping (a DRAM tier
 * is read and written with O_DIRECT); below it, calloc's. */
#define BIGMEM_PAGE_MIN ((size_t)4096)

/* The question asked between steps (NULL, the default: never stop). */
void bigmem_set_stop(bool (*stop)(void));
/* A hook for a daemon that blocks SIGINT and SIGTERM to take them with
 * sigwait once it serves: true while either is pending. */
bool bigmem_stop_signal_pending(void);
/* True when the hook says a stop was asked for: a long start-up loop of
 * its own (filling a table) asks this too. */
bool bigmem_stopping(void);

/* A zeroed table of len bytes: NULL with errno ENOMEM, or EINTR when a
 * stop was asked for while it was made (nothing is left mapped). With
 * lock_err, each step is also mlock'ed (for a process without mlockall),
 * and *lock_err gets the first mlock errno, or 0. Tables under
 * BIGMEM_PAGE_MIN come from calloc (and mlock, with lock_err). */
void *bigmem_alloc(size_t len, int *lock_err);
/* Frees what bigmem_alloc(len, ...) gave (NULL is fine). */
void bigmem_free(void *p, size_t len);
