/* tracelog.c - the live store's access log; see tracelog.h.
 *
 * A ring slot packs one access into 64 bits: bit 0 write, bits 1-12 the
 * offset in the page, bits 13-24 length - 1, bits 25-63 the page (2^39
 * pages of 4 KiB, far above any store's page space). The drain thread
 * polls: the producer never signals it, because a wake-up would be a
 * system call on the swap path. At 2 ms per poll a 2^18-record ring
 * absorbs any rate a 4 KiB-page store reaches (500k pages/s is 1000
 * records a poll). */
#include "pmem/tracelog.h"

#include "common/log.h"
#include "pmem/nvt.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A ring record is page << 25 | (len - 1) << 13 | in << 1 | write; no
 * access has in + len > 4096, so in = len - 1 = 4095 marks a free. */
#define FREE_MARK ((uint64_t)0xfff << 13 | (uint64_t)0xfff << 1)
#define DRAIN_BATCH 1024
#define DRAIN_POLL_NS 2000000L

int trace_ring_init(struct trace_ring *r, size_t cap)
{
	memset(r, 0, sizeof(*r));
	if (cap < 2 || (cap & (cap - 1)))
		return -EINVAL;
	r->slot = malloc(cap * sizeof(*r->slot));
	if (!r->slot)
		return -ENOMEM;
	/* Touched now: the producer must not take page faults later. */
	memset(r->slot, 0, cap * sizeof(*r->slot));
	r->mask = cap - 1;
	return 0;
}

void trace_ring_destroy(struct trace_ring *r)
{
	free(r->slot);
	r->slot = NULL;
}

bool trace_ring_push(struct trace_ring *r, uint64_t v)
{
	uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);

	if (h - r->tail_seen > r->mask) {
		r->tail_seen = atomic_load_explicit(&r->tail,
						    memory_order_acquire);
		if (h - r->tail_seen > r->mask) {
			/* One producer: a plain add, no locked instruction. */
			atomic_store_explicit(&r->dropped, atomic_load_explicit(
				&r->dropped, memory_order_relaxed) + 1,
				memory_order_relaxed);
			return false;
		}
	}
	r->slot[h & r->mask] = v;
	/* Release: the slot is written before the consumer sees head move. */
	atomic_store_explicit(&r->head, h + 1, memory_order_release);
	return true;
}

size_t trace_ring_pop(struct trace_ring *r, uint64_t *out, size_t n)
{
	uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
	uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
	size_t k = 0;

	while (k < n && t + k < h) {
		out[k] = r->slot[(t + k) & r->mask];
		k++;
	}
	/* Release: the slots are read before the producer may reuse them. */
	if (k)
		atomic_store_explicit(&r->tail, t + k, memory_order_release);
	return k;
}

void trace_ring_counts(const struct trace_ring *r, uint64_t *pushed,
		       uint64_t *dropped)
{
	*pushed = atomic_load_explicit(&r->head, memory_order_relaxed);
	*dropped = atomic_load_explicit(&r->dropped, memory_order_relaxed);
}

struct tracelog {
	struct trace_ring ring;
	struct trace_writer *w;
	pthread_t thread;
	_Atomic bool stop;
	_Atomic uint64_t lost;      /* drained but not written: file failed */
	_Atomic uint64_t frees;     /* free records accepted (the producer's) */
	int err;                    /* the drain thread's; read after join */
	char path[4096];
};

static void drain_one(struct tracelog *tl, uint64_t v)
{
	uint64_t page = v >> 25;
	uint32_t in = (uint32_t)(v >> 1) & 0xfff;
	uint32_t len = ((uint32_t)(v >> 13) & 0xfff) + 1;
	struct trace_rec rec = {
		.addr = page * TRACELOG_PAGE + in, .size = len,
		.op = (v & 1) ? TRACE_S : TRACE_L,
	};
	if ((v & FREE_MARK) == FREE_MARK)
		rec = (struct trace_rec){ .addr = page * TRACELOG_PAGE, .op = TRACE_FREE };

	if (!tl->err) {
		int rc = trace_write(tl->w, &rec);
		if (rc < 0) {
			tl->err = rc;
			log_err("access log %s: write failed (%s); the rest of "
				"the accesses are counted as dropped", tl->path,
				strerror(-rc));
		}
	}
	if (tl->err)
		atomic_fetch_add_explicit(&tl->lost, 1, memory_order_relaxed);
}

static void *drain_main(void *arg)
{
	struct tracelog *tl = arg;
	uint64_t v[DRAIN_BATCH];
	const struct timespec poll = { 0, DRAIN_POLL_NS };

	for (;;) {
		/* Read stop first: an empty pop after it means the producer
		 * had finished and everything it logged is written. */
		bool stopping = atomic_load(&tl->stop);
		size_t n = trace_ring_pop(&tl->ring, v, DRAIN_BATCH);
		for (size_t i = 0; i < n; i++)
			drain_one(tl, v[i]);
		if (n == DRAIN_BATCH)
			continue;          /* a backlog: keep going */
		if (stopping) {
			if (n == 0)
				break;
			continue;
		}
		/* Less than a batch waiting: let records gather rather than
		 * chase the producer's index record by record. */
		nanosleep(&poll, NULL);
	}
	return NULL;
}

int tracelog_open(struct tracelog **out, const char *path,
		  size_t ring_records)
{
	struct tracelog *tl;
	int rc;

	*out = NULL;
	tl = calloc(1, sizeof(*tl));
	if (!tl)
		return -ENOMEM;
	snprintf(tl->path, sizeof(tl->path), "%s", path);
	rc = trace_ring_init(&tl->ring,
			     ring_records ? ring_records : TRACELOG_RING_DEFAULT);
	if (rc < 0) {
		log_err("access log %s: ring of %zu records: %s", path,
			ring_records, strerror(-rc));
		free(tl);
		return rc;
	}
	rc = trace_writer_open(&tl->w, path, NVT_F_PAGES | NVT_F_STORE | NVT_F_FREES);
	if (rc == 0 && (rc = trace_writer_fast(tl->w)) < 0) {
		log_err("access log %s: cannot set gzip's level", path);
		trace_writer_close(tl->w);
	}
	if (rc < 0) {
		trace_ring_destroy(&tl->ring);
		free(tl);
		return rc;
	}
	rc = pthread_create(&tl->thread, NULL, drain_main, tl);
	if (rc) {
		log_err("access log %s: cannot start its thread: %s", path,
			strerror(rc));
		trace_writer_close(tl->w);
		trace_ring_destroy(&tl->ring);
		free(tl);
		return -rc;
	}
	/* Its own name, so that top -H shows what the log costs. */
	pthread_setname_np(tl->thread, "nvtrace-drain");
	*out = tl;
	return 0;
}

void tracelog_add(struct tracelog *tl, uint64_t page, uint32_t in,
		  uint32_t len, bool write)
{
	trace_ring_push(&tl->ring, page << 25 | (uint64_t)(len - 1) << 13 |
				   (uint64_t)in << 1 | (write ? 1 : 0));
}

void tracelog_free(struct tracelog *tl, uint64_t page)
{
	if (trace_ring_push(&tl->ring, page << 25 | FREE_MARK))
		atomic_store_explicit(&tl->frees, atomic_load_explicit(&tl->frees,
				      memory_order_relaxed) + 1, memory_order_relaxed);
}

void tracelog_counts(struct tracelog *tl, uint64_t *records,
		     uint64_t *dropped)
{
	uint64_t lost = atomic_load_explicit(&tl->lost, memory_order_relaxed);
	uint64_t pushed, full;

	trace_ring_counts(&tl->ring, &pushed, &full);
	*records = pushed - lost;
	*dropped = full + lost;
}

int tracelog_close(struct tracelog *tl)
{
	uint64_t records, dropped;
	int rc;

	if (!tl)
		return 0;
	atomic_store(&tl->stop, true);
	pthread_join(tl->thread, NULL);
	rc = trace_writer_close(tl->w);
	if (rc < 0 && !tl->err)
		log_err("access log %s: closing it failed: %s", tl->path,
			strerror(-rc));
	if (!rc)
		rc = tl->err;
	tracelog_counts(tl, &records, &dropped);
	uint64_t frees = atomic_load(&tl->frees);
	log_info("access log %s: %llu accesses and %llu pages freed logged, "
		 "%llu dropped%s", tl->path,
		 (unsigned long long)(records > frees ? records - frees : 0),
		 (unsigned long long)frees, (unsigned long long)dropped,
		 rc < 0 ? "; the file is incomplete (write error)" : "");
	trace_ring_destroy(&tl->ring);
	free(tl);
	return rc;
}
