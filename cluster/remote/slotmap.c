/* slotmap.c - the slot map's locks: a slot's stripe, several stripes in
 * order, one of a set of pool locks; and the rate-limited logging of pages
 * that could not be read or rebuilt. */
#include "cluster/remote/rb.h"

/* A read of slot i failed for good (EIO to the kernel): counted, and
 * logged at most every 10 s; read_errors in the stats has them all. */
void rb_lost_read(struct remote_backend *rb, uint64_t i, uint64_t version,
		  const char *what)
{
	char note[96];
	atomic_fetch_add(&rb->read_errors, 1);
	if (log_limit(&rb->lost_log, 10, note, sizeof(note)))
		log_err("remote swap: slot %" PRIu64 " (version %" PRIu64
			") %s%s", i, version, what, note);
}

/* Slot `slot` cannot be rebuilt from parity: slot `other` of its group is
 * lost too (rc). Logged at most every 10 s, as lost_read. */
void rb_rebuild_failed(struct remote_backend *rb, uint64_t slot,
		       uint64_t other, int rc)
{
	char note[96];
	if (log_limit(&rb->rebuild_log, 10, note, sizeof(note)))
		log_err("remote swap: slot %" PRIu64 " cannot be rebuilt: slot %"
			PRIu64 " of its group is lost too (%s)%s", slot, other,
			strerror(-rc), note);
}

/* Lock one of n mutexes, the first at `first`, each `stride` bytes
 * after the one before (a member of each entry of an array): a free one
 * if any, else the next in turn (*rr). Returns its index. */
unsigned rb_lock_one(pthread_mutex_t *first, size_t stride, unsigned n,
		     atomic_uint *rr)
{
	unsigned start = atomic_fetch_add(rr, 1);
	pthread_mutex_t *at;

	for (unsigned k = 0; k < n; k++) {
		unsigned x = (start + k) % n;
		at = (pthread_mutex_t *)((char *)first + x * stride);
		if (pthread_mutex_trylock(at) == 0)
			return x;
	}
	at = (pthread_mutex_t *)((char *)first + start % n * stride);
	pthread_mutex_lock(at);
	return start % n;
}

static int cmp_u16(const void *a, const void *b)
{
	return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

/* Lock the stripes of slots[0..n) (n <= WBATCH), each once, in stripe
 * order (the order every path that holds several takes them in); their
 * indexes go to order[], the count is returned for stripes_unlock. */
unsigned rb_stripes_lock(struct remote_backend *rb, const uint64_t *slots,
			 unsigned n, uint16_t *order)
{
	unsigned u = 0;

	for (unsigned k = 0; k < n; k++)
		order[k] = (uint16_t)(slots[k] % STRIPES);
	qsort(order, n, sizeof(order[0]), cmp_u16);
	for (unsigned k = 0; k < n; k++)
		if (!u || order[u - 1] != order[k])
			order[u++] = order[k];
	for (unsigned k = 0; k < u; k++)
		pthread_mutex_lock(&rb->stripes[order[k]]);
	return u;
}

void rb_stripes_unlock(struct remote_backend *rb, const uint16_t *order, unsigned u)
{
	for (unsigned k = u; k-- > 0;)
		pthread_mutex_unlock(&rb->stripes[order[k]]);
}
