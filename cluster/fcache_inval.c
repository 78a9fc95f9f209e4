/* fcache_inval.c - a file's home has the other mounts drop their cached
 * pages of it (FILE_INVAL, FILE_WATCH; docs/nvcachefs-cluster.md,
 * "Coherence").
 *
 * A mount's kernel keeps a file's pages while a program holds it open.
 * A program that only reads gets no request to its mount between its
 * reads: MPI_File_sync does not even fsync a file the process did not
 * write (ROMIO), so sync-barrier-sync alone never reaches it. So the
 * writer's mount, at its fsync, its close after writes, a truncate or a
 * punch, asks the home (INVAL); the
 * home queues the file for every other mount run holding it open (its
 * holds) and answers once each has said it dropped its pages, or after
 * INVAL_WAIT_NS. Every mount keeps one WATCH outstanding at every node:
 * held until a drop is queued for it (WATCH_HOLD_NS at most), answered
 * with up to FRAME_WATCH_MAX file ids; the mount drops their pages
 * (fuse_lowlevel_notify_inval_inode, synchronous in its kernel) and its
 * next WATCH carries the batch's number: acknowledged. A run that sends
 * no WATCH (its connection broke, an older mount) is not waited for. */
#include "cluster/fcache_int.h"

#include <string.h>

/* A writer waits this long for the other runs; a WATCH is held this
 * long (well within a mount's call timeout). */
#define INVAL_WAIT_NS (2000000000ull)
#define WATCH_HOLD_NS (4000000000ull)
/* drops queued for one run at most (one that stopped taking them) */
#define DROP_QUEUE_MAX 4096
#define INVAL_RUNS_MAX 64

void minst_free(struct minst *m)
{
	free(m->drop);
	free(m->drop_seq);
	free(m);
}

/* Under fc->lk. */
static struct minst *minst_find(struct fcache *fc, uint64_t inst)
{
	struct minst *m = fc->mounts;
	while (m && m->inst != inst)
		m = m->next;
	return m;
}

/* Under fc->lk: gid queued for m (once: one already queued keeps its
 * place); its number, or 0 when the queue is full. */
static uint64_t drop_queue(struct minst *m, uint64_t gid)
{
	for (size_t k = 0; k < m->ndrop; k++)
		if (m->drop[k] == gid)
			return m->drop_seq[k];
	if (m->ndrop == m->drop_cap) {
		size_t nc = m->drop_cap ? 2 * m->drop_cap : 16;
		if (nc > DROP_QUEUE_MAX)
			return 0;
		uint64_t *d = realloc(m->drop, nc * sizeof(*d));
		if (!d)
			return 0;
		m->drop = d;
		uint64_t *q = realloc(m->drop_seq, nc * sizeof(*q));
		if (!q)
			return 0;
		m->drop_seq = q;
		m->drop_cap = nc;
	}
	m->drop[m->ndrop] = gid;
	m->drop_seq[m->ndrop++] = ++m->seq;
	return m->seq;
}

/* Under fc->lk: wait on inval_cv until ns (clock_now_ns), 200 ms at most
 * at a time (a stop wakes it too). */
static void inval_wait(struct fcache *fc, uint64_t until)
{
	uint64_t now = clock_now_ns();
	if (now >= until)
		return;
	uint64_t d = until - now < 200000000ull ? until - now : 200000000ull;
	struct timespec ts;
	clock_deadline(&ts, d);
	pthread_cond_timedwait(&fc->inval_cv, &fc->lk, &ts);
}

int serve_inval(struct fcache *fc, const struct frame_fop *f)
{
	static struct log_limit slow_log;
	struct { uint64_t inst, seq; } w[INVAL_RUNS_MAX];
	unsigned n = 0, left = 0;
	char note[96];

	pthread_mutex_lock(&fc->lk);
	struct fobj *o = fobj_find(fc, f->obj);
	for (struct hold *h = o ? o->hold : NULL; h && n < INVAL_RUNS_MAX; h = h->next) {
		struct minst *m;
		if (!h->n || h->inst == f->digest ||
		    !(m = minst_find(fc, h->inst)) || !m->conns || !m->watching)
			continue;
		uint64_t seq = drop_queue(m, f->obj);
		if (seq) {
			w[n].inst = m->inst;
			w[n++].seq = seq;
		}
	}
	if (n) {
		atomic_fetch_add(&fc->inval_drops, n);
		pthread_cond_broadcast(&fc->inval_cv);
	}
	uint64_t until = clock_now_ns() + INVAL_WAIT_NS;
	for (;;) {
		left = 0;
		for (unsigned k = 0; k < n; k++) {
			struct minst *m = minst_find(fc, w[k].inst);
			if (m && m->conns && m->watching && m->acked < w[k].seq)
				left++;
		}
		if (!left || atomic_load(&fc->stopping) || clock_now_ns() >= until)
			break;
		inval_wait(fc, until);
	}
	pthread_mutex_unlock(&fc->lk);
	atomic_fetch_add(&fc->invals, 1);
	if (left) {
		atomic_fetch_add(&fc->inval_timeouts, 1);
		if (log_limit(&slow_log, 30, note, sizeof(note)))
			log_warn("file cache: file %016" PRIx64 ": %u mount(s) holding it "
				 "did not drop their cached pages within %.0f s; they "
				 "may read older bytes until they reopen or sync it%s",
				 f->obj, left, INVAL_WAIT_NS / 1e9, note);
	}
	return 0;
}

int serve_watch(struct fcache *fc, const struct frame_fop *f,
		struct frame_hdr *r, uint8_t *buf, const void **out)
{
	pthread_mutex_lock(&fc->lk);
	struct minst *m = minst_find(fc, f->digest);
	if (!m) {
		pthread_mutex_unlock(&fc->lk);
		return -ESTALE;   /* a connection without its run: none */
	}
	m->watching = true;
	if (f->gen > m->acked && f->gen <= m->seq) {
		m->acked = f->gen;
		pthread_cond_broadcast(&fc->inval_cv);
	}
	/* this connection keeps m (conns > 0) while it waits */
	uint64_t until = clock_now_ns() + WATCH_HOLD_NS;
	while (!m->ndrop && !atomic_load(&fc->stopping) && clock_now_ns() < until)
		inval_wait(fc, until);
	size_t k = m->ndrop < FRAME_WATCH_MAX ? m->ndrop : FRAME_WATCH_MAX;
	r->fop.gen = k ? m->drop_seq[k - 1] : m->acked;
	if (k) {
		memcpy(buf, m->drop, k * sizeof(*m->drop));   /* as MARK's lists */
		memmove(m->drop, m->drop + k, (m->ndrop - k) * sizeof(*m->drop));
		memmove(m->drop_seq, m->drop_seq + k,
			(m->ndrop - k) * sizeof(*m->drop_seq));
		m->ndrop -= k;
	}
	pthread_mutex_unlock(&fc->lk);
	r->fop.len = (uint32_t)(k * 8);
	r->payload_len = r->fop.len;
	*out = k ? buf : NULL;
	atomic_fetch_add(&fc->watches, 1);
	return 0;
}
