/* bigmem.c - large zeroed tables made in steps (see bigmem.h). */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "common/bigmem.h"

static bool (*stop_hook)(void);

void bigmem_set_stop(bool (*stop)(void))
{
	stop_hook = stop;
}

bool bigmem_stop_signal_pending(void)
{
	sigset_t p;
	return sigpending(&p) == 0 &&
	       (sigismember(&p, SIGTERM) == 1 || sigismember(&p, SIGINT) == 1);
}

bool bigmem_stopping(void)
{
	return stop_hook && stop_hook();
}

void *bigmem_alloc(size_t len, int *lock_err)
{
	if (lock_err)
		*lock_err = 0;
	if (len < BIGMEM_PAGE_MIN) {
		void *q = calloc(1, len ? len : 1);
		if (q && lock_err && len && mlock(q, len) != 0)
			*lock_err = errno;
		return q;
	}
	/* Inaccessible, it is neither populated nor locked by mmap even
	 * under mlockall(MCL_FUTURE): mprotect does that, step by step. */
	char *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	if (p == MAP_FAILED) {
		errno = ENOMEM;
		return NULL;
	}
	for (size_t off = 0; off < len; off += BIGMEM_STEP) {
		size_t n = len - off < BIGMEM_STEP ? len - off : BIGMEM_STEP;
		int err = 0;
		if (bigmem_stopping())
			err = EINTR;
		else if (mprotect(p + off, n, PROT_READ | PROT_WRITE) != 0)
			err = ENOMEM;
		if (err) {
			munmap(p, len);
			errno = err;
			return NULL;
		}
		if (lock_err && mlock(p + off, n) != 0 && !*lock_err)
			*lock_err = errno;
	}
	return p;
}

void bigmem_free(void *p, size_t len)
{
	if (!p)
		return;
	if (len < BIGMEM_PAGE_MIN)
		free(p);
	else
		munmap(p, len);
}
