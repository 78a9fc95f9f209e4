/* tierstore.c - the tiered page store; see tierstore.h.
 *
 * Each page has a tier (TIER_NONE when it holds nothing) and, in a memory
 * tier, a slot: the index of its 4 KiB frame in that tier's mapping. Free
 * frames sit on a stack per tier, so a frame freed by TRIM is the next one
 * reused. The policy is the authority on where pages go; this file keeps
 * its own copy of each page's tier to check every move against, so a
 * policy bug becomes a logged -EIO rather than a silently wrong page. */
#include "pmem/tierstore.h"
#include "pmem/model.h"

#include "common/bigmem.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/paths.h"
#include "pmem/profile_load.h"
#include "pmem/region.h"
#include "pmem/tracelog.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#define PG TIERSTORE_PAGE
#define NO_SLOT UINT32_MAX

struct frames {                 /* one memory tier */
	uint8_t *base;
	uint64_t cap;
	uint32_t *free;             /* stack of free slots */
	uint64_t nfree;
	/* Freed while some tierstore_read_map() caller may still be sending
	 * from them: reused only once no mapping is out (retire_flush). */
	uint32_t *retired;
	uint64_t nretired;
};

struct tierstore {
	pthread_mutex_t lock;
	/* Held shared by each tierstore_read_map() caller until its unmap;
	 * taken exclusive (under lock) only to wait for those to finish
	 * before a retired frame is reused. pins counts the holders. */
	pthread_rwlock_t maps;
	atomic_uint pins;
	bool no_map;                /* MRAM latency emulated: copy instead */
	struct policy *pol;
	uint64_t pages;
	uint8_t *tier;              /* per page: enum tier */
	uint64_t lost_logged;       /* pages ever marked lost */
	uint64_t unread_logged;     /* flash loads that failed */
	uint64_t retry_after_ns;    /* no read retried before (a failing
				     * disk may take long per read, under
				     * the store's lock) */
	uint64_t failed_load;       /* page whose load failed in this
				     * access's moves, or UINT64_MAX */
	uint8_t *lost;              /* per page: PAGE_OK, PAGE_LOST or
				     * PAGE_UNREAD (below) */
	uint32_t *slot;             /* per page: frame in its memory tier */
	uint32_t *nreads, *nwrites; /* per page, saturating */
	struct frames fr[2];        /* TIER_MRAM, TIER_DRAM */
	struct region *mram;
	size_t dram_len;
	int flash_fd;
	char flash_path[256];
	struct io_uring ring;
	bool ring_ok;
	uint64_t flash_pages;
	struct tierstore_stats st;
	/* The time/energy model's inputs, under lock (pmem/model.h). */
	struct model_params mp;
	struct model_counts mc;
	struct tracelog *log;       /* --trace-out, or NULL */
};

/* Per-page and per-frame tables: gigabytes for a large export, made in
 * steps that a stop request (SIGTERM during start-up) cuts short. */
static void *table(uint64_t n, size_t each)
{
	return bigmem_alloc((size_t)n * each, NULL);
}

static void table_free(void *t, uint64_t n, size_t each)
{
	bigmem_free(t, (size_t)n * each);
}

static int frames_init(struct frames *f, uint8_t *base, uint64_t cap)
{
	f->base = base;
	f->cap = cap;
	f->free = table(cap, sizeof(uint32_t));
	f->retired = table(cap, sizeof(uint32_t));
	if (!f->free || !f->retired)
		return -errno;
	/* Low slots on top, so a lightly used store touches few frames. */
	for (uint64_t i = 0; i < cap; i++)
		f->free[i] = (uint32_t)(cap - 1 - i);
	f->nfree = cap;
	return 0;
}

static uint8_t *frame(struct tierstore *ts, unsigned t, uint32_t s)
{
	return ts->fr[t].base + (uint64_t)s * PG;
}

static int flash_open(struct tierstore *ts, const char *path)
{
	struct statfs sfs;
	int fd;

	snprintf(ts->flash_path, sizeof(ts->flash_path), "%s", path);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_DIRECT, 0600);
	if (fd < 0 && errno == EINVAL)   /* no O_DIRECT on this fs */
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		int rc = -errno;
		log_err("flash file %s: %s", path, strerror(-rc));
		return rc;
	}
	int lk = spill_lock(fd, path);
	if (lk < 0) {
		close(fd);
		return lk;
	}
	if (fstatfs(fd, &sfs) == 0 &&
	    (sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC)) {
		log_err("flash file %s is on tmpfs/ramfs: refused (swap pages "
			"spilled to tmpfs can be swapped out to this very "
			"device, and the kernel deadlocks); put it on a disk "
			"file system such as /var/tmp", path);
		close(fd);
		return -EINVAL;
	}
	/* Sparse: blocks are used only by pages actually spilled. */
	if (ftruncate(fd, (off_t)(ts->pages * PG)) < 0) {
		int rc = -errno;
		log_err("flash file %s: cannot size it to %llu bytes: %s", path,
			(unsigned long long)(ts->pages * PG), strerror(-rc));
		close(fd);
		return rc;
	}
	int rc = io_uring_queue_init(8, &ts->ring, 0);
	if (rc < 0) {
		log_err("flash file %s: io_uring: %s", path, strerror(-rc));
		close(fd);
		return rc;
	}
	ts->ring_ok = true;
	ts->flash_fd = fd;
	return 0;
}

/* One synchronous page transfer through the store's ring (under the
 * lock: the ring is not shared otherwise). */
static int flash_io(struct tierstore *ts, bool write, uint64_t page, void *buf,
		    bool quiet)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ts->ring);
	struct io_uring_cqe *cqe;
	int rc;

	if (!sqe)
		return -EIO;
	if (write)
		io_uring_prep_write(sqe, ts->flash_fd, buf, PG, page * PG);
	else
		io_uring_prep_read(sqe, ts->flash_fd, buf, PG, page * PG);
	rc = io_uring_submit_and_wait(&ts->ring, 1);
	if (rc >= 0)
		rc = io_uring_wait_cqe(&ts->ring, &cqe);
	if (rc < 0)
		goto fail;
	rc = cqe->res;
	io_uring_cqe_seen(&ts->ring, cqe);
	if (rc == (int)PG)
		return 0;
	if (rc >= 0)
		rc = -EIO;   /* short transfer on a sized regular file */
fail:
	ts->st.flash_errors++;
	if (!quiet)
		log_err("flash file %s: %s of page %llu: %s", ts->flash_path,
			write ? "write" : "read", (unsigned long long)page,
			strerror(-rc));
	return -EIO;
}

/* The policy's profile from a previous run's access log (before any
 * memory is reserved, and before this run's log is created: a bad file
 * costs nothing). */
static int load_profile(struct tierstore *ts, const struct tierstore_opts *o)
{
	struct profile_summary sum;
	int rc = profile_load(ts->pol, o->profile_path, o->pages, &sum);
	if (rc < 0)
		return rc;
	ts->st.profile_pages = sum.pages;
	log_info("profile %s: %llu accesses to %llu pages; %s %s",
		 o->profile_path, (unsigned long long)sum.accesses,
		 (unsigned long long)sum.pages, policy_name(ts->pol),
		 strcmp(policy_name(ts->pol), "lru") == 0
		 ? "does not use a profile (mram-fixed, lowpower and adaptive do)"
		 : "ranks pages by it");
	if (sum.outside)
		log_warn("profile %s: %llu accesses to pages beyond this "
			 "export's %llu ignored (a log of a larger device?)",
			 o->profile_path, (unsigned long long)sum.outside,
			 (unsigned long long)o->pages);
	return 0;
}

int tierstore_open(struct tierstore **out, const struct tierstore_opts *o)
{
	struct tierstore *ts;
	int rc;

	*out = NULL;
	if (!o->pages || o->pages >= NO_SLOT || o->mram_pages >= NO_SLOT ||
	    o->dram_pages >= NO_SLOT || o->mram_pages + o->dram_pages == 0) {
		log_err("tiered store: bad sizes (pages %llu, MRAM %llu, DRAM "
			"%llu pages)", (unsigned long long)o->pages,
			(unsigned long long)o->mram_pages,
			(unsigned long long)o->dram_pages);
		return -EINVAL;
	}
	/* One file in two roles: the store would write pages over its own
	 * MRAM or log, or a log over the profile it reads (silent
	 * corruption). Checked before any of them is created. */
	const char *role[] = { "flash file", "MRAM file", "access log",
			       "profile" };
	const char *path[] = { o->flash_path,
			       o->mram_pages ? o->nvram_path : NULL,
			       o->trace_path, o->profile_path };
	int i, j;
	if (paths_first_same(path, 4, &i, &j)) {
		log_err("tiered store: %s %s and %s %s are the same file; give "
			"each its own", role[i], path[i], role[j], path[j]);
		return -EINVAL;
	}
	if (!o->flash_path && o->mram_pages + o->dram_pages < o->pages) {
		log_err("tiered store: MRAM + DRAM (%llu MiB) is smaller than "
			"the export (%llu MiB) and there is no flash file: give "
			"--flash FILE or a larger --dram",
			(unsigned long long)((o->mram_pages + o->dram_pages) >> 8),
			(unsigned long long)(o->pages >> 8));
		return -EINVAL;
	}
	if (o->mram_pages && !o->nvram_path) {
		log_err("tiered store: an MRAM tier needs an NVRAM file");
		return -EINVAL;
	}
	ts = calloc(1, sizeof(*ts));
	if (!ts)
		return -ENOMEM;
	pthread_mutex_init(&ts->lock, NULL);
	pthread_rwlock_init(&ts->maps, NULL);
	ts->no_map = o->mram_lat_ns != 0;
	model_params_default(&ts->mp);
	ts->flash_fd = -1;
	ts->pages = o->pages;
	ts->tier = table(o->pages, 1);
	ts->slot = table(o->pages, sizeof(uint32_t));
	ts->nreads = table(o->pages, sizeof(uint32_t));
	ts->nwrites = table(o->pages, sizeof(uint32_t));
	ts->lost = table(o->pages, 1);
	if (!ts->tier || !ts->slot || !ts->nreads || !ts->nwrites || !ts->lost) {
		rc = -errno;
		goto fail;
	}
	memset(ts->tier, TIER_NONE, o->pages);
	memset(ts->slot, 0xff, o->pages * sizeof(uint32_t));

	struct policy_config pc = {
		.mram_pages = o->mram_pages, .dram_pages = o->dram_pages,
		.max_pages = o->pages, .alpha = o->alpha ? o->alpha : 0.9,
	};
	rc = policy_create(&ts->pol, o->policy, &pc);
	if (rc < 0 && rc != -EINTR) {
		log_err("tiering policy '%s': %s (known: %s)", o->policy,
			rc == -ENOENT ? "unknown" : strerror(-rc),
			policy_names());
	}
	if (rc < 0)
		goto fail;
	if (o->profile_path && (rc = load_profile(ts, o)) < 0)
		goto fail;
	/* The access log is created only now, after the profile was read
	 * (it may be the previous run's log of the same name), and before
	 * memory is reserved and locked: a bad path costs nothing. */
	if (o->trace_path &&
	    (rc = tracelog_open(&ts->log, o->trace_path, o->trace_ring)) < 0)
		goto fail;

	uint8_t *mbase = NULL;
	if (o->mram_pages) {
		struct region_opts ro = { .size = o->mram_pages * PG,
					  .create = true, .lock = true,
					  .lat_ns = o->mram_lat_ns };
		rc = region_open(&ts->mram, o->nvram_path, &ro);
		if (rc < 0) {
			log_err("MRAM tier on %s: %s", o->nvram_path,
				strerror(-rc));
			goto fail;
		}
		mbase = region_base(ts->mram);
	}
	if ((rc = frames_init(&ts->fr[TIER_MRAM], mbase, o->mram_pages)) < 0)
		goto fail;

	uint8_t *dbase = NULL;
	if (o->dram_pages) {
		ts->dram_len = o->dram_pages * PG;
		/* Locked and resident from the start: a swap store must not
		 * fault (allocate) on the I/O path nor be swapped itself. */
		int lerr;
		dbase = bigmem_alloc(ts->dram_len, &lerr);
		if (!dbase) {
			rc = -errno;
			if (rc != -EINTR)
				log_err("DRAM tier of %llu MiB: cannot map it",
					(unsigned long long)(ts->dram_len >> 20));
			goto fail;
		}
		if (lerr)
			log_warn("DRAM tier: mlock of %llu MiB failed (%s); its "
				 "pages may be swapped out",
				 (unsigned long long)(ts->dram_len >> 20),
				 strerror(lerr));
	}
	if ((rc = frames_init(&ts->fr[TIER_DRAM], dbase, o->dram_pages)) < 0)
		goto fail;

	if (o->flash_path) {
		if ((rc = flash_open(ts, o->flash_path)) < 0)
			goto fail;
		ts->flash_pages = o->pages;
	}
	log_info("tiered store: %llu pages; MRAM %llu pages on %s, DRAM %llu "
		 "pages, flash %s; policy %s",
		 (unsigned long long)o->pages, (unsigned long long)o->mram_pages,
		 o->mram_pages ? o->nvram_path : "-",
		 (unsigned long long)o->dram_pages,
		 o->flash_path ? o->flash_path : "none", policy_name(ts->pol));
	*out = ts;
	return 0;
fail:
	tierstore_close(ts);
	return rc;
}

void tierstore_close(struct tierstore *ts)
{
	if (!ts)
		return;
	tracelog_close(ts->log);
	if (ts->ring_ok)
		io_uring_queue_exit(&ts->ring);
	if (ts->flash_fd >= 0)
		close(ts->flash_fd);
	bigmem_free(ts->fr[TIER_DRAM].base, ts->dram_len);
	if (ts->mram)
		region_close(ts->mram);
	for (unsigned t = 0; t < 2; t++) {
		table_free(ts->fr[t].free, ts->fr[t].cap, sizeof(uint32_t));
		table_free(ts->fr[t].retired, ts->fr[t].cap, sizeof(uint32_t));
	}
	policy_destroy(ts->pol);
	table_free(ts->tier, ts->pages, 1);
	table_free(ts->slot, ts->pages, sizeof(uint32_t));
	table_free(ts->nreads, ts->pages, sizeof(uint32_t));
	table_free(ts->nwrites, ts->pages, sizeof(uint32_t));
	table_free(ts->lost, ts->pages, 1);
	pthread_rwlock_destroy(&ts->maps);
	pthread_mutex_destroy(&ts->lock);
	free(ts);
}

/* Retired frames back to the free stack. Lock held; wait: block until
 * every mapping is given back (none can start meanwhile: maps are taken
 * under lock), else only when none is out now. */
static void retire_flush(struct tierstore *ts, struct frames *f, bool wait)
{
	if (wait)
		pthread_rwlock_wrlock(&ts->maps);
	else if (pthread_rwlock_trywrlock(&ts->maps) != 0)
		return;
	while (f->nretired)
		f->free[f->nfree++] = f->retired[--f->nretired];
	pthread_rwlock_unlock(&ts->maps);
}

static int slot_take(struct tierstore *ts, unsigned t, uint32_t *s)
{
	struct frames *f = &ts->fr[t];
	if (f->nretired)
		retire_flush(ts, f, f->nfree == 0);
	if (!f->nfree)
		return -EIO;
	*s = f->free[--f->nfree];
	return 0;
}

/* A frame another thread may be sending from (a mapping is out) is not
 * reused until that send is over: it would go out with another page's
 * bytes. pins only rises under lock, so 0 here means no mapping of
 * this frame can be out. */
static void slot_put(struct tierstore *ts, unsigned t, uint32_t s)
{
	struct frames *f = &ts->fr[t];
	/* acquire: pairs with the unmap's release, so that the sender's
	 * reads of the frame are over before we may hand it out again */
	if (atomic_load_explicit(&ts->pins, memory_order_acquire))
		f->retired[f->nretired++] = s;
	else
		f->free[f->nfree++] = s;
}

/* Copies into and out of frames: MRAM goes through the region so that
 * emulated latency/bandwidth (when configured) is charged. */
static void frame_put(struct tierstore *ts, unsigned t, uint8_t *dst,
		      const void *src, size_t n)
{
	if (t == TIER_MRAM)
		region_write(ts->mram, dst, src, n);
	else
		memcpy(dst, src, n);
}

static void frame_get(struct tierstore *ts, unsigned t, void *dst,
		      const uint8_t *src, size_t n)
{
	if (t == TIER_MRAM)
		region_read(ts->mram, dst, src, n);
	else
		memcpy(dst, src, n);
}

/* lost[] states. PAGE_LOST: the bytes are gone (a write-back failed, so
 * the flash copy is not whole): reads fail until the page is written
 * whole or trimmed. PAGE_UNREAD: its load from flash failed, so its frame
 * does not hold its bytes, but the flash copy is intact (nothing wrote
 * over it): the read is tried again at each access, and leaving memory
 * writes nothing over that copy. A flash read error may pass (a loose
 * cable, a full queue, a file restored); a page swapped out is not given
 * up on for one. */
enum { PAGE_OK, PAGE_LOST, PAGE_UNREAD };

static int move_bad(struct tierstore *ts, const struct tier_move *m)
{
	log_err("tiering policy %s: move of page %llu from tier %u to %u "
		"(kind %u) does not match the store (page is in tier %u); "
		"failing the access", policy_name(ts->pol),
		(unsigned long long)m->page, m->from, m->to, m->kind,
		m->page < ts->pages ? ts->tier[m->page] : 255);
	return -EIO;
}

/* A flash write-back of page p failed (logged by flash_io): the store
 * stays in step with the policy, and the page's bytes are gone. Reads of
 * it fail with -EIO, never return other bytes, until it is written whole
 * or trimmed; the other pages are untouched. */
static void page_lost(struct tierstore *ts, uint64_t p)
{
	if (ts->lost[p] == PAGE_LOST)
		return;
	if (ts->lost[p] == PAGE_UNREAD)
		ts->st.pages_unread--;
	ts->lost[p] = PAGE_LOST;
	ts->st.pages_lost++;
	/* The first few one by one; then one line per 1024 (a failing disk
	 * takes thousands), the total in the stats. */
	if (++ts->lost_logged <= 8)
		log_err("page %llu lost to that flash error: reads of it fail "
			"until it is written again", (unsigned long long)p);
	else if (ts->lost_logged % 1024 == 0)
		log_err("%llu pages lost to flash errors so far (pages_lost in "
			"the stats: those not written again since)",
			(unsigned long long)ts->lost_logged);
}

/* Its load failed (PAGE_UNREAD above); a page already lost stays lost. */
static void page_unread(struct tierstore *ts, uint64_t p)
{
	if (ts->lost[p] != PAGE_OK)
		return;
	ts->lost[p] = PAGE_UNREAD;
	ts->st.pages_unread++;
	if (++ts->unread_logged <= 8)
		log_err("page %llu not read from flash: its copy there is kept "
			"and the read tried again at its next access",
			(unsigned long long)p);
	else if (ts->unread_logged % 1024 == 0)
		log_err("%llu flash loads failed so far (pages_unread in the "
			"stats: those not read back since)",
			(unsigned long long)ts->unread_logged);
}

/* Good again: written whole, trimmed, or its flash copy read or kept. */
static void page_found(struct tierstore *ts, uint64_t p)
{
	if (ts->lost[p] == PAGE_LOST)
		ts->st.pages_lost--;
	else if (ts->lost[p] == PAGE_UNREAD)
		ts->st.pages_unread--;
	ts->lost[p] = PAGE_OK;
}

/* An access to an unread page in memory tier t, frame s: its load again.
 * 0 (read, the page is good) or -EIO (still unreadable). Not in the access
 * whose load just failed, and at most one failed try per 100 ms in the
 * store: each failed read may have taken long (a dying disk's timeouts)
 * with every other access waiting for the lock, and is counted in
 * flash_errors but not logged again (page_unread said it). */
static int page_reload(struct tierstore *ts, uint64_t p, unsigned t, uint32_t s)
{
	if (ts->failed_load == p)
		return -EIO;
	uint64_t now = clock_now_ns();
	if (now < ts->retry_after_ns)
		return -EIO;
	if (flash_io(ts, false, p, frame(ts, t, s), true) < 0) {
		ts->retry_after_ns = clock_now_ns() + 100000000ull;
		return -EIO;
	}
	ts->st.loads++;
	ts->st.reloads++;
	page_found(ts, p);
	if (ts->unread_logged <= 8)
		log_info("page %llu read from flash at a later try",
			 (unsigned long long)p);
	return 0;
}

/* Apply one policy move. full_write: the accessed page is about to be
 * overwritten whole, so a new frame for it needs no zeroing. */
static int move_apply(struct tierstore *ts, const struct tier_move *m,
		      uint64_t accessed, bool full_write)
{
	uint64_t p = m->page;
	uint32_t s;
	int rc;

	if (p >= ts->pages || ts->tier[p] != m->from)
		return move_bad(ts, m);
	switch (m->kind) {
	case MOVE_PLACE:
		if (m->to > TIER_DRAM || slot_take(ts, m->to, &s) < 0)
			return move_bad(ts, m);
		if (!(p == accessed && full_write)) {
			static const uint8_t zero[PG];
			frame_put(ts, m->to, frame(ts, m->to, s), zero, PG);
		}
		break;
	case MOVE_LOAD:
		if (m->to > TIER_DRAM || ts->flash_fd < 0 ||
		    slot_take(ts, m->to, &s) < 0)
			return move_bad(ts, m);
		if (p == accessed && full_write) {
			/* About to be written whole: its old bytes are not
			 * needed (the policy still counts a load). */
			ts->st.loads_skipped++;
		} else if (flash_io(ts, false, p, frame(ts, m->to, s), false) < 0) {
			/* The policy has the page in memory now: so does the
			 * store (in step, or every later move mismatches),
			 * without its bytes until a read works. */
			static const uint8_t zero[PG];
			frame_put(ts, m->to, frame(ts, m->to, s), zero, PG);
			page_unread(ts, p);
			ts->failed_load = p;
		} else {
			ts->st.loads++;
		}
		break;
	case MOVE_MIGRATE:
		if (m->from > TIER_DRAM || m->to > TIER_DRAM ||
		    m->from == m->to || slot_take(ts, m->to, &s) < 0)
			return move_bad(ts, m);
		if (m->to == TIER_MRAM)
			frame_put(ts, TIER_MRAM, frame(ts, TIER_MRAM, s),
				  frame(ts, m->from, ts->slot[p]), PG);
		else
			frame_get(ts, TIER_MRAM, frame(ts, m->to, s),
				  frame(ts, m->from, ts->slot[p]), PG);
		slot_put(ts, m->from, ts->slot[p]);
		ts->st.migrations++;
		break;
	case MOVE_WRITE:
	case MOVE_DROP:
		if (m->from > TIER_DRAM || m->to != TIER_FLASH ||
		    ts->flash_fd < 0)
			return move_bad(ts, m);
		if (ts->lost[p] == PAGE_UNREAD) {
			/* Its frame never got its bytes, and was never
			 * written since (a partial write needs them first):
			 * the flash copy is the page. Kept, not overwritten,
			 * even if the policy counts it dirty. */
			page_found(ts, p);
			ts->st.drops++;
		} else if (m->kind == MOVE_WRITE) {
			/* The frame is page-aligned, as O_DIRECT wants. */
			rc = flash_io(ts, true, p, frame(ts, m->from, ts->slot[p]), false);
			if (rc < 0)
				page_lost(ts, p);   /* the frame is the policy's now */
			else
				ts->st.writebacks++;
		} else {
			ts->st.drops++;
		}
		slot_put(ts, m->from, ts->slot[p]);
		s = NO_SLOT;
		break;
	default:
		return move_bad(ts, m);
	}
	if (m->from == TIER_FLASH)
		ts->st.pages_used[TIER_FLASH]--;
	if (m->to == TIER_FLASH)
		ts->st.pages_used[TIER_FLASH]++;
	ts->tier[p] = m->to;
	ts->slot[p] = s;
	return 0;
}

/* Present one page access to the policy and apply its moves. On success
 * the page is in memory: *t and *s say where. Lock held. */
static int page_access(struct tierstore *ts, uint64_t p, bool write,
		       size_t in, size_t nbytes, unsigned *t, uint32_t *s)
{
	bool full_write = write && nbytes == PG;
	struct tier_move mv[POLICY_MAX_MOVES];
	enum tier served;
	unsigned n = policy_access(ts->pol, p, write, mv, &served);
	int rc;

	ts->failed_load = UINT64_MAX;
	/* Logged under the lock: the log's order is the policy's. */
	if (ts->log)
		tracelog_add(ts->log, p, (uint32_t)in, (uint32_t)nbytes, write);

	for (unsigned i = 0; i < n; i++) {
		if ((rc = move_apply(ts, &mv[i], p, full_write)) < 0)
			return rc;
		if (!model_load_skipped(&mv[i], p, full_write))
			model_count_move(&ts->mc, &mv[i]);
	}
	if (served > TIER_DRAM || ts->tier[p] != served) {
		log_err("tiering policy %s: page %llu served from tier %u but "
			"the store has it in tier %u", policy_name(ts->pol),
			(unsigned long long)p, served, ts->tier[p]);
		return -EIO;
	}
	if (ts->lost[p] != PAGE_OK) {
		if (full_write)
			page_found(ts, p);    /* written whole: good again */
		else if (ts->lost[p] == PAGE_LOST ||
			 page_reload(ts, p, served, ts->slot[p]) < 0)
			return -EIO;   /* no bytes to read or merge into */
	}
	model_count_access(&ts->mc, served, write,
			   (nbytes + ts->mp.line_bytes - 1) / ts->mp.line_bytes);
	if (served == TIER_MRAM)
		ts->st.served_mram++;
	else
		ts->st.served_dram++;
	*t = served;
	*s = ts->slot[p];
	return 0;
}

static void count(uint32_t *c)
{
	if (*c != UINT32_MAX)
		(*c)++;
}

static bool range_ok(const struct tierstore *ts, uint64_t off, uint64_t len)
{
	uint64_t end = ts->pages * PG;
	return off <= end && len <= end - off;
}

int tierstore_pread(struct tierstore *ts, void *buf, uint64_t off, size_t len)
{
	uint8_t *b = buf;
	int rc = 0;

	if (!range_ok(ts, off, len))
		return -EINVAL;
	pthread_mutex_lock(&ts->lock);
	while (len) {
		uint64_t p = off / PG;
		size_t in = off % PG, n = PG - in < len ? PG - in : len;
		unsigned t;
		uint32_t s;

		ts->st.reads++;
		count(&ts->nreads[p]);
		if (ts->tier[p] == TIER_NONE) {
			/* Never written: zeros, and no frame spent on them. */
			memset(b, 0, n);
			ts->st.zero_reads++;
		} else {
			if ((rc = page_access(ts, p, false, in, n, &t, &s)) < 0)
				break;
			frame_get(ts, t, b, frame(ts, t, s) + in, n);
		}
		b += n;
		off += n;
		len -= n;
	}
	pthread_mutex_unlock(&ts->lock);
	return rc;
}

int tierstore_read_map(struct tierstore *ts, uint64_t off, size_t len,
		       struct iovec *iov, unsigned max, size_t *mapped,
		       uint64_t *seen)
{
	static const uint8_t zero[PG];
	unsigned n = 0;
	int rc = 0;

	*mapped = 0;
	if (!range_ok(ts, off, len))
		return -EINVAL;
	if (ts->no_map)
		return -EOPNOTSUPP;
	/* At most max pages: each needs one iovec at most. */
	uint64_t first = off / PG;
	if (len && (off + len - 1) / PG - first + 1 > max)
		len = max ? (first + max) * PG - off : 0;
	pthread_mutex_lock(&ts->lock);
	ts->failed_load = UINT64_MAX;
	/* First every access and its moves, as tierstore_pread() does; only
	 * then the frames, so none of them is one a later page's moves freed
	 * meanwhile. */
	for (uint64_t o = off, left = len; left;) {
		uint64_t p = o / PG;
		size_t in = o % PG, k = PG - in < left ? PG - in : left;
		unsigned t;
		uint32_t s;

		/* A piece an earlier map of this READ already presented (its
		 * send went out short): not an access again, unless the page
		 * has left memory since and must be loaded back. */
		bool again = o < *seen && (ts->tier[p] == TIER_NONE ||
					   ts->tier[p] <= TIER_DRAM);
		if (!again) {
			ts->st.reads++;
			count(&ts->nreads[p]);
		}
		if (ts->tier[p] == TIER_NONE) {
			ts->st.zero_reads += !again;
		} else if (again && ts->lost[p] != PAGE_OK &&
			   (ts->lost[p] == PAGE_LOST ||
			    page_reload(ts, p, ts->tier[p], ts->slot[p]) < 0)) {
			/* Lost or unread since the earlier map (it left
			 * memory and came back without its bytes): an error,
			 * not whatever the frame holds now. */
			rc = -EIO;
			break;
		} else if (!again && (rc = page_access(ts, p, false, in, k, &t, &s)) < 0) {
			break;
		}
		o += k;
		left -= k;
	}
	if (rc == 0 && off + len > *seen)
		*seen = off + len;
	while (rc == 0 && len) {
		uint64_t p = off / PG;
		size_t in = off % PG, k = PG - in < len ? PG - in : len;
		uint8_t t = ts->tier[p];
		uint8_t *src;

		if (t == TIER_NONE)
			src = (uint8_t *)zero + in;
		else if (t <= TIER_DRAM)
			src = frame(ts, t, ts->slot[p]) + in;
		else
			break;   /* a later page of ours evicted it: not mapped */
		if (n && (uint8_t *)iov[n - 1].iov_base + iov[n - 1].iov_len == src) {
			iov[n - 1].iov_len += k;
		} else {
			iov[n].iov_base = src;
			iov[n++].iov_len = k;
		}
		*mapped += k;
		off += k;
		len -= k;
	}
	if (n) {
		/* Shared: maps on other threads go on at once; a thread about
		 * to reuse a retired frame waits for every map to end. */
		pthread_rwlock_rdlock(&ts->maps);
		atomic_fetch_add_explicit(&ts->pins, 1, memory_order_relaxed);
	}
	pthread_mutex_unlock(&ts->lock);
	if (rc < 0) {
		*mapped = 0;
		return rc;
	}
	return (int)n;
}

void tierstore_read_unmap(struct tierstore *ts)
{
	atomic_fetch_sub_explicit(&ts->pins, 1, memory_order_release);
	pthread_rwlock_unlock(&ts->maps);
}

int tierstore_pwrite(struct tierstore *ts, const void *buf, uint64_t off,
		     size_t len)
{
	const uint8_t *b = buf;
	int rc = 0;

	if (!range_ok(ts, off, len))
		return -EINVAL;
	pthread_mutex_lock(&ts->lock);
	while (len) {
		uint64_t p = off / PG;
		size_t in = off % PG, n = PG - in < len ? PG - in : len;
		unsigned t;
		uint32_t s;

		ts->st.writes++;
		count(&ts->nwrites[p]);
		/* A partial page is read-modify-written: the access brings
		 * its old contents (or zeros) into memory first. */
		if ((rc = page_access(ts, p, true, in, n, &t, &s)) < 0)
			break;
		frame_put(ts, t, frame(ts, t, s) + in, b, n);
		b += n;
		off += n;
		len -= n;
	}
	pthread_mutex_unlock(&ts->lock);
	return rc;
}

/* Free one page: its frame goes back to its tier, the policy forgets it. */
static void page_free(struct tierstore *ts, uint64_t p)
{
	uint8_t t = ts->tier[p];

	if (t == TIER_NONE)
		return;
	if (t <= TIER_DRAM)
		slot_put(ts, t, ts->slot[p]);
	else
		ts->st.pages_used[TIER_FLASH]--;
	policy_forget(ts->pol, p);
	if (ts->log)
		tracelog_free(ts->log, p);
	ts->tier[p] = TIER_NONE;
	ts->slot[p] = NO_SLOT;
	page_found(ts, p);   /* trimmed: reads as zeros again */
	ts->st.trims++;
}

int tierstore_trim(struct tierstore *ts, uint64_t off, uint64_t len)
{
	static const uint8_t zero[PG];
	int rc = 0;

	if (!range_ok(ts, off, len))
		return -EINVAL;
	uint64_t first = (off + PG - 1) / PG, last = (off + len) / PG;
	/* Partial pages at the edges keep their other bytes: zero ours. */
	if (first > last) {
		/* Inside one page. */
		if (ts->tier[off / PG] != TIER_NONE)
			rc = tierstore_pwrite(ts, zero, off, len);
		return rc;
	}
	if (off % PG && ts->tier[off / PG] != TIER_NONE &&
	    (rc = tierstore_pwrite(ts, zero, off, first * PG - off)) < 0)
		return rc;
	if ((off + len) % PG && ts->tier[last] != TIER_NONE &&
	    (rc = tierstore_pwrite(ts, zero, last * PG,
				   off + len - last * PG)) < 0)
		return rc;
	pthread_mutex_lock(&ts->lock);
	for (uint64_t p = first; p < last; p++)
		page_free(ts, p);
	/* Under the lock: a page of this range written and spilled by
	 * another thread right after must not lose its new flash copy. */
	if (ts->flash_fd >= 0 && last > first &&
	    fallocate(ts->flash_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      (off_t)(first * PG), (off_t)((last - first) * PG)) < 0 &&
	    errno != EOPNOTSUPP)
		log_warn("flash file %s: punching out trimmed pages: %s",
			 ts->flash_path, strerror(errno));
	pthread_mutex_unlock(&ts->lock);
	return 0;
}

void tierstore_get_stats(struct tierstore *ts, struct tierstore_stats *st)
{
	pthread_mutex_lock(&ts->lock);
	*st = ts->st;
	for (unsigned t = 0; t < 2; t++) {
		st->pages_used[t] = ts->fr[t].cap - ts->fr[t].nfree -
				    ts->fr[t].nretired;
		st->pages_cap[t] = ts->fr[t].cap;
	}
	st->pages_cap[TIER_FLASH] = ts->flash_pages;
	pthread_mutex_unlock(&ts->lock);
	if (ts->log)
		tracelog_counts(ts->log, &st->trace_records, &st->trace_dropped);
}

enum tier tierstore_page_tier(struct tierstore *ts, uint64_t page)
{
	enum tier t;
	if (page >= ts->pages)
		return TIER_NONE;
	pthread_mutex_lock(&ts->lock);
	t = (enum tier)ts->tier[page];
	pthread_mutex_unlock(&ts->lock);
	return t;
}

void tierstore_page_counts(struct tierstore *ts, uint64_t page,
			   uint32_t *reads, uint32_t *writes)
{
	*reads = *writes = 0;
	if (page >= ts->pages)
		return;
	pthread_mutex_lock(&ts->lock);
	*reads = ts->nreads[page];
	*writes = ts->nwrites[page];
	pthread_mutex_unlock(&ts->lock);
}

const char *tierstore_policy_name(const struct tierstore *ts)
{
	return policy_name(ts->pol);
}

ssize_t tierstore_stats_format(struct tierstore *ts, char *out, size_t len)
{
	struct tierstore_stats st;
	tierstore_get_stats(ts, &st);
	uint64_t served = st.served_mram + st.served_dram;
	int n = snprintf(out, len,
		"policy: %s\n"
		"mram_pages: %llu\n" "mram_capacity_pages: %llu\n"
		"mram_bytes: %llu\n"
		"dram_pages: %llu\n" "dram_capacity_pages: %llu\n"
		"dram_bytes: %llu\n"
		"flash_pages: %llu\n" "flash_bytes: %llu\n"
		"page_reads: %llu\n" "page_writes: %llu\n"
		"zero_page_reads: %llu\n"
		"pages_trimmed: %llu\n"
		"migrations_mram_dram: %llu\n"
		"flash_loads: %llu\n" "flash_writebacks: %llu\n"
		"flash_clean_drops: %llu\n" "flash_errors: %llu\n"
		"mram_hit_rate: %.4f\n"
		"trace_records: %llu\n" "trace_dropped: %llu\n"
		"profile_pages: %llu\n" "pages_lost: %llu\n"
		"pages_unread: %llu\n" "flash_reloads: %llu\n"
		"flash_loads_skipped: %llu\n",
		policy_name(ts->pol),
		(unsigned long long)st.pages_used[TIER_MRAM],
		(unsigned long long)st.pages_cap[TIER_MRAM],
		(unsigned long long)st.pages_used[TIER_MRAM] * PG,
		(unsigned long long)st.pages_used[TIER_DRAM],
		(unsigned long long)st.pages_cap[TIER_DRAM],
		(unsigned long long)st.pages_used[TIER_DRAM] * PG,
		(unsigned long long)st.pages_used[TIER_FLASH],
		(unsigned long long)st.pages_used[TIER_FLASH] * PG,
		(unsigned long long)st.reads, (unsigned long long)st.writes,
		(unsigned long long)st.zero_reads,
		(unsigned long long)st.trims,
		(unsigned long long)st.migrations,
		(unsigned long long)st.loads,
		(unsigned long long)st.writebacks,
		(unsigned long long)st.drops,
		(unsigned long long)st.flash_errors,
		served ? (double)st.served_mram / (double)served : 0.0,
		(unsigned long long)st.trace_records,
		(unsigned long long)st.trace_dropped,
		(unsigned long long)st.profile_pages,
		(unsigned long long)st.pages_lost,
		(unsigned long long)st.pages_unread,
		(unsigned long long)st.reloads,
		(unsigned long long)st.loads_skipped);
	if (n < 0)
		return -EIO;
	/* The time/energy model's estimate of what the accesses so far
	 * would cost on real MRAM/DRAM/flash (the seed paper's Table 2). */
	if ((size_t)n < len) {
		struct model_counts mc;
		pthread_mutex_lock(&ts->lock);
		mc = ts->mc;
		pthread_mutex_unlock(&ts->lock);
		n += model_stats_format(&ts->mp, &mc,
					st.pages_cap[TIER_MRAM] * PG,
					st.pages_cap[TIER_DRAM] * PG,
					out + n, len - (size_t)n);
	}
	return (size_t)n < len ? n : (ssize_t)len - 1;
}
