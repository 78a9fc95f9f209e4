/* hold.c - pages no node takes: the hold (parity modes: outside every
 * group, in the spill file if there is one, else in our own memory) and
 * the spill file (every mode), and the one warning a minute that the
 * cluster is short of room. */
#include "cluster/remote/rb.h"

/* Entry x's page. */
static uint8_t *hold_page(struct remote_backend *rb, uint32_t x)
{
	return rb->hold_chunk[x / HOLD_CHUNK] + (size_t)(x % HOLD_CHUNK) * PAGE;
}

/* Reserve room for slot i's page in the hold (made now, so that hold_put
 * cannot fail): true, or false when the hold is at its cap or out of
 * memory, or the spill file's disk is full (said once per SHORT_LOG_S,
 * see short_log). With a spill file the room is the slot's own block
 * there, allocated now. Caller holds the stripe. */
bool rb_hold_reserve(struct remote_backend *rb, uint64_t i)
{
	bool ok = false;

	if (rb->spill_fd >= 0) {
		int rc = fallocate(rb->spill_fd, 0, (off_t)(i * PAGE), PAGE) ? errno : 0;
		ok = !rc || rc == EOPNOTSUPP;
		goto refused;
	}
	pthread_mutex_lock(&rb->hold_lock);
	if (!rb->hold_slot) {
		uint32_t nc = (rb->hold_max + HOLD_CHUNK - 1) / HOLD_CHUNK;
		rb->hold_slot = calloc(rb->hold_max, sizeof(*rb->hold_slot));
		rb->hold_chunk = calloc(nc, sizeof(*rb->hold_chunk));
		rb->hold_free = calloc(rb->hold_max, sizeof(*rb->hold_free));
		if (!rb->hold_slot || !rb->hold_chunk || !rb->hold_free) {
			free(rb->hold_slot);
			free(rb->hold_chunk);
			free(rb->hold_free);
			rb->hold_slot = NULL;
			rb->hold_chunk = NULL;
			rb->hold_free = NULL;
			goto out;
		}
	}
	if (rb->hold_nfree <= rb->hold_reserved && rb->hold_n < rb->hold_max) {
		uint8_t *c = malloc((size_t)HOLD_CHUNK * PAGE);
		if (c) {
			uint32_t n = rb->hold_max - rb->hold_n < HOLD_CHUNK ?
				     rb->hold_max - rb->hold_n : HOLD_CHUNK;
			rb->hold_chunk[rb->hold_n / HOLD_CHUNK] = c;
			for (uint32_t x = rb->hold_n + n; x-- > rb->hold_n;)
				rb->hold_free[rb->hold_nfree++] = x;
			rb->hold_n += n;
		}
	}
	if (rb->hold_nfree > rb->hold_reserved) {
		rb->hold_reserved++;
		ok = true;
	}
out:
	pthread_mutex_unlock(&rb->hold_lock);
refused:
	if (!ok) {
		atomic_fetch_add(&rb->hold_refused, 1);
		atomic_store(&rb->retry_due, 1);
	}
	return ok;
}

/* A reservation not used (slot i found a node). The spill file's block
 * stays allocated for the slot's next spill. */
void rb_hold_unreserve(struct remote_backend *rb, uint64_t i)
{
	(void)i;
	if (rb->spill_fd >= 0)
		return;
	pthread_mutex_lock(&rb->hold_lock);
	rb->hold_reserved--;
	pthread_mutex_unlock(&rb->hold_lock);
}

/* Slot i (on no node, in no group) keeps `page` in the hold, in the room
 * a hold_reserve made; the slot stays mapped. A spill file that fails
 * the write (a disk error, its block allocated) leaves the slot lost:
 * reads give EIO until a write or a trim; -EIO then, else 0. Caller
 * holds the stripe. */
int rb_hold_put(struct remote_backend *rb, uint64_t i, const void *page)
{
	struct slot *s = &rb->slots[i];

	if (rb->spill_fd >= 0) {
		int rc = rb_spill_io(rb, true, i, (void *)page);
		if (rc)
			s->lost = 1;
		s->spilled = 1;
		atomic_fetch_add(&rb->spilled_now, 1);
		atomic_fetch_add(&rb->spills, 1);
		atomic_fetch_add(&rb->short_held, 1);
		atomic_store(&rb->retry_due, 1);
		return rc;
	}
	pthread_mutex_lock(&rb->hold_lock);
	uint32_t x = rb->hold_free[--rb->hold_nfree];
	rb->hold_reserved--;
	rb->hold_slot[x] = i;
	s->hold = (uint16_t)(x + 1);
	pthread_mutex_unlock(&rb->hold_lock);
	memcpy(hold_page(rb, x), page, PAGE);
	s->spilled = 1;
	atomic_fetch_add(&rb->held_now, 1);
	atomic_fetch_add(&rb->holds, 1);
	atomic_fetch_add(&rb->short_held, 1);
	atomic_store(&rb->retry_due, 1);
	return 0;
}

/* Slot i leaves the hold (placed on a node, trimmed). Caller holds the
 * stripe. */
static void hold_release(struct remote_backend *rb, uint64_t i)
{
	pthread_mutex_lock(&rb->hold_lock);
	uint32_t x = rb->slots[i].hold - 1u;
	rb->slots[i].hold = 0;
	rb->hold_free[rb->hold_nfree++] = x;
	pthread_mutex_unlock(&rb->hold_lock);
	atomic_fetch_sub(&rb->held_now, 1);
}

/* The cluster is short of room: one warning per SHORT_LOG_S, with what
 * happened since the last one, never one per page. */
void rb_short_log(struct remote_backend *rb)
{
	/* Not room but nodes: with groups of N on N + 1 nodes, one lost,
	 * no node is left outside a group for its parity page, and memory
	 * would not help. A warning of its own, with its own limit, so that
	 * it never holds back the room warning below (nor that one it). */
	if (atomic_load(&rb->short_nodes) &&
	    log_limit(&rb->nodes_log, SHORT_LOG_S, NULL, 0))
		log_warn("remote swap: %" PRIu64 " parity pages not placed: no node "
			 "outside their group is up (a group of %u pages needs "
			 "%u nodes up); their groups are unprotected until a node "
			 "returns or the recovery pass regroups them, since the "
			 "last such message",
			 (uint64_t)atomic_exchange(&rb->short_nodes, 0), rb->gsize,
			 rb->gsize + 1);
	/* nothing to say: the window stays open for the next shortage */
	if (!atomic_load(&rb->short_parity) && !atomic_load(&rb->short_held) &&
	    !atomic_load(&rb->short_kept) && !atomic_load(&rb->hold_refused))
		return;
	if (!log_limit(&rb->room_log, SHORT_LOG_S, NULL, 0))
		return;         /* counted on, for the next line */
	uint64_t par = atomic_exchange(&rb->short_parity, 0);
	uint64_t held = atomic_exchange(&rb->short_held, 0);
	uint64_t kept = atomic_exchange(&rb->short_kept, 0);
	uint64_t refused = atomic_exchange(&rb->hold_refused, 0);
	uint64_t failed = atomic_exchange(&rb->short_writes, 0);
	if (!par && !held && !kept && !refused && !failed)
		return;
	char where[96];
	if (rb->spill_fd >= 0)
		snprintf(where, sizeof(where), "in the spill file (%" PRIu64 " now)",
			 (uint64_t)atomic_load(&rb->spilled_now));
	else
		snprintf(where, sizeof(where), "in nvswapd's memory (%" PRIu64
			 " now, at most %u MiB)", (uint64_t)atomic_load(&rb->held_now),
			 rb->hold_max / (1048576 / PAGE));
	log_warn("remote swap: the cluster is short of room (no node takes our "
		 "pages): %" PRIu64 " writes failed (no spill file: --flash), %"
		 PRIu64 " parity pages not placed (their groups are "
		 "unprotected), %" PRIu64 " pages held %s, %" PRIu64 " lost pages "
		 "left in their groups to be rebuilt later%s, since the last such "
		 "message; retrying with back-off. Give the nodes memory "
		 "(mem=, nvcachectl grow) or add a node", failed, par, held, where,
		 kept, refused ? (rb->spill_fd >= 0 ? " (the spill file's disk is "
		 "full: another loss in those groups loses their pages)" :
		 " (the hold is full: another loss in those groups loses their "
		 "pages)") : "");
}

/* Pages in the hold now (the spill file's, with one). */
uint64_t rb_hold_count(struct remote_backend *rb)
{
	return rb->spill_fd >= 0 ? atomic_load(&rb->spilled_now) :
				   atomic_load(&rb->held_now);
}

/* The held slot after *cur (a cursor, 0 to start), or UINT64_MAX when
 * there are no more: hold entries in order, or the spill file's slots.
 * The caller checks, under the slot's stripe, that it is still held. */
uint64_t rb_hold_next(struct remote_backend *rb, uint64_t *cur)
{
	if (rb->spill_fd >= 0) {
		for (; *cur < rb->nslots; (*cur)++) {
			uint64_t i = *cur;
			pthread_mutex_lock(rb_stripe(rb, i));
			bool held = rb->slots[i].spilled;
			pthread_mutex_unlock(rb_stripe(rb, i));
			if (held) {
				(*cur)++;
				return i;
			}
		}
		return UINT64_MAX;
	}
	for (;;) {
		pthread_mutex_lock(&rb->hold_lock);
		uint64_t x = *cur;
		bool more = x < rb->hold_n;
		uint64_t i = more ? rb->hold_slot[x] : 0;
		bool used = more && rb->slots[i].hold == x + 1;
		pthread_mutex_unlock(&rb->hold_lock);
		if (!more)
			return UINT64_MAX;
		(*cur)++;
		if (used)
			return i;
	}
}

/* Held slot i's page read, or replaced by `page`. Caller holds the
 * stripe. */
int rb_hold_io(struct remote_backend *rb, bool write, uint64_t i, void *page)
{
	if (rb->spill_fd >= 0)
		return rb_spill_io(rb, write, i, page);
	uint8_t *h = hold_page(rb, rb->slots[i].hold - 1u);
	memcpy(write ? h : page, write ? page : h, PAGE);
	return 0;
}

/* Slot i, if held, leaves the hold. Caller holds the stripe. */
void rb_hold_forget(struct remote_backend *rb, uint64_t i)
{
	struct slot *s = &rb->slots[i];

	if (rb->spill_fd >= 0) {
		rb_spill_forget(rb, i);
		return;
	}
	if (!s->spilled)
		return;
	s->spilled = 0;
	hold_release(rb, i);
}

/* Slot i's page in the spill file (none and mirror), read or written.
 * Caller holds the stripe. */
int rb_spill_io(struct remote_backend *rb, bool write, uint64_t i, void *page)
{
	ssize_t n = write ? pwrite(rb->spill_fd, page, PAGE, (off_t)(i * PAGE)) :
			    pread(rb->spill_fd, page, PAGE, (off_t)(i * PAGE));
	if (n == PAGE)
		return 0;
	log_err("remote swap: spill file %s of slot %" PRIu64 ": %s",
		write ? "write" : "read", i, n < 0 ? strerror(errno) : "short");
	return -EIO;
}

/* Slot i, if spilled, leaves the spill file. Caller holds the stripe. */
void rb_spill_forget(struct remote_backend *rb, uint64_t i)
{
	struct slot *s = &rb->slots[i];

	if (!s->spilled)
		return;
	s->spilled = 0;
	atomic_fetch_sub(&rb->spilled_now, 1);
	/* give the file's blocks back; failure only costs disk space */
	(void)fallocate(rb->spill_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			(off_t)(i * PAGE), PAGE);
}
