/* wrap.c - the PMPI wrappers of libnvckpt: windows whose memory lives in
 * NVRAM (MPI_Win_allocate) or is copied there (MPI_Win_create,
 * MPI_Win_allocate_shared, the regions of MPI_Win_create_dynamic windows),
 * checkpointed at MPI_Win_fence (and after other synchronizations at the
 * next MPI_Barrier or MPI_Allreduce of the window's group), restored when
 * a job runs again with NVCACHE_CKPT=restart. See ckobj.h for the versions
 * and the consensus, docs/checkpoints.md for the user's view.
 *
 * A window is named by its info key "nvcache_name", else by its creation
 * order among the windows of communicators of the same group ("win0",
 * "win1"; on a communicator other than MPI_COMM_WORLD's group the name
 * also says which ranks: "win0.g4n2" = 2 ranks from world rank 4), so the
 * restarted job, creating its windows in the same order, finds them. The
 * info key "nvcache_checkpoint" = "false" leaves a window alone. */
#include "pmem/mpi/ckobj.h"
#include "pmem/mpi/nvckpt.h"

#include "common/clock.h"
#include "common/log.h"
#include "pmem/mpi/span.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nvwin {
	struct ckobj o;
	MPI_Win win;
	struct span mem;     /* the window's memory: our NVRAM or the user's
			      * (not a dynamic window's) */
	uint64_t fences;     /* fences since creation (for NVCACHE_CKPT_EVERY) */
	uint64_t pending;    /* other synchronizations since the last version */
	uint32_t epochs;     /* this rank's open lock, lock_all and start
			      * epochs: RMA of them may be in flight */
	/* incremental mode: a version is copied as the pages written since
	 * the one its slot holds only if the layout of the window's memory
	 * (its dynamic regions) is the one that slot was written with */
	bool incremental, tracked, track_said; /* tracked: some span was */
	uint64_t layout, slot_layout[CKPT_SLOTS];
	uint64_t versions;   /* committed by this process */
	uint64_t syncs;      /* non-collective synchronizations, over its life */
	/* a dynamic window: its attached regions in attach order; on a
	 * restart, the restored version's regions (restore_n, in slot
	 * restore_slot) given back one by one as they are attached again */
	bool dynamic, restoring;
	struct span *regs;
	uint32_t nregs, restore_next, restore_n;
	int restore_slot;
	struct nvwin *next;
};

/* A dynamic window's version: this header, then the regions' bytes in
 * attach order. The area grows (ckobj_grow) when they outgrow it. */
#define DYN_HDR 4096u
#define DYN_MAX ((DYN_HDR - 16) / 8)
#define DYN_MAX_S "510"
#define DYN_MAGIC "NVDYNWIN"
struct dyn_hdr {
	char magic[8];
	uint64_t n;
	uint64_t size[DYN_MAX];
};
_Static_assert(sizeof(struct dyn_hdr) == DYN_HDR, "one page of header");

static struct nvwin *wins;

static struct nvwin *win_find(MPI_Win win)
{
	for (struct nvwin *w = wins; w; w = w->next)
		if (w->win == win)
			return w;
	return NULL;
}

/* The creation counter of windows on communicators of one group. */
struct group_count { char sig[32]; unsigned n; struct group_count *next; };
static struct group_count *counts;

static void group_sig(MPI_Comm comm, char *sig, size_t len)
{
	MPI_Group g, world;
	int size, wsize, zero = 0, leader;

	PMPI_Comm_size(comm, &size);
	PMPI_Comm_size(MPI_COMM_WORLD, &wsize);
	PMPI_Comm_group(comm, &g);
	PMPI_Comm_group(MPI_COMM_WORLD, &world);
	PMPI_Group_translate_ranks(g, 1, &zero, world, &leader);
	PMPI_Group_free(&g);
	PMPI_Group_free(&world);
	if (size == wsize)
		sig[0] = 0;
	else
		snprintf(sig, len, ".g%dn%d", leader, size);
}

static bool info_get(MPI_Info info, const char *key, char *val, int len)
{
	int flag = 0, n = len;

	if (info == MPI_INFO_NULL)
		return false;
	return PMPI_Info_get_string(info, key, &n, val, &flag) == MPI_SUCCESS && flag;
}

/* The window's name, or "" when it is not to be checkpointed. */
static int win_name(MPI_Info info, MPI_Comm comm, char name[CKPT_NAME_MAX], size_t len)
{
	char val[CKPT_NAME_MAX + 8], sig[32];

	if (ckobj_conf()->mode == CKOBJ_OFF ||
	    (info_get(info, "nvcache_checkpoint", val, sizeof(val)) &&
	     (!strcmp(val, "false") || !strcmp(val, "off") || !strcmp(val, "0")))) {
		name[0] = 0;
		return 0;
	}
	if (info_get(info, "nvcache_name", val, sizeof(val))) {
		if (!ckobj_name_ok(val)) {
			log_err("window info nvcache_name=%s: a name is 1 to %d letters, "
				"digits, '.', '_' or '-', not starting with '.'", val,
				CKPT_NAME_MAX - 12);
			return -EINVAL;
		}
		memcpy(name, val, strlen(val) + 1); /* name_ok: it fits */
		return 0;
	}
	group_sig(comm, sig, sizeof(sig));
	struct group_count *c;
	for (c = counts; c && strcmp(c->sig, sig); c = c->next)
		;
	if (!c) {
		if (!(c = calloc(1, sizeof(*c))))
			return -ENOMEM;
		snprintf(c->sig, sizeof(c->sig), "%s", sig);
		c->next = counts;
		counts = c;
	}
	snprintf(name, len, "win%u%s", c->n++, sig);
	return 0;
}

/* NVCACHE_CKPT_MODE=incremental: track a span's written pages. Where the
 * kernel cannot (or, in a dynamic window, the span shares a page with a
 * tracked region) it is copied whole; said once per window. */
static void win_track(struct nvwin *w, struct span *sp)
{
	int rc = -EBUSY;

	if (!w->incremental || !sp->size)
		return;
	for (uint32_t i = 0; w->dynamic && i < w->nregs; i++)
		if (&w->regs[i] != sp && w->regs[i].wt && span_shares_page(&w->regs[i], sp))
			goto whole;
	if (!(rc = span_track(sp))) {
		w->tracked = true;
		return;
	}
whole:
	if (w->o.rank == 0 && !w->track_said)
		fprintf(stderr, "nvckpt: window '%s': incremental checkpoints not possible "
			"here (%s), full ones instead\n", w->o.name, rc == -EBUSY ?
			"a region shares a page with another" : strerror(-rc));
	w->track_said = true;
}

/* Open the window's checkpoint object (collective), restore its memory
 * when the job restarts. user: the window's memory when it is not ours
 * (NULL: use the area's live NVRAM). On error: MPI error code, nothing
 * left behind, the communicator's error handler called. */
static struct nvwin *win_new(void)
{
	struct nvwin *w = calloc(1, sizeof(*w));

	if (w) {
		w->incremental = ckobj_conf()->incremental;
		w->layout = 1; /* no slot written with it yet */
	}
	return w;
}

static int win_open(struct nvwin **out, const char *name, void *user,
		    MPI_Aint size, MPI_Comm comm)
{
	uint64_t sz = size > 0 ? (uint64_t)size : 1;
	struct nvwin *w = win_new();
	int rc;

	if (!w)
		return MPI_ERR_NO_MEM;
	rc = ckobj_open(&w->o, name, sz, user ? 0 : sz, comm,
			user ? 0 : CKOBJ_RESTORE_LIVE);
	if (rc != MPI_SUCCESS) {
		free(w);
		return rc;
	}
	w->mem.base = user ? user : ckpt_live(w->o.ck);
	w->mem.size = size > 0 ? (uint64_t)size : 0;
	if (w->o.restored) {
		int s = ckpt_find(w->o.ck, w->o.restored);
		uint64_t t0 = clock_now_ns();
		if (w->o.restored != w->o.in_live)
			region_read(ckpt_region(w->o.ck), w->mem.base, ckpt_data(w->o.ck, s),
				    w->mem.size);
		ckobj_restore_stats(&w->o, clock_now_ns() - t0);
		ckobj_restore_protected(&w->o);
	}
	win_track(w, &w->mem);
	*out = w;
	return MPI_SUCCESS;
}

static void win_add(struct nvwin *w, MPI_Win win)
{
	w->win = win;
	w->next = wins;
	wins = w;
}

static void win_drop(struct nvwin *w)
{
	for (uint32_t i = 0; i < w->nregs; i++)
		span_untrack(&w->regs[i]);
	ckobj_stats(&w->o, w->versions, w->tracked ? "incremental" : "full");
	span_untrack(&w->mem);
	free(w->regs);
	ckobj_close(&w->o);
	free(w);
}

/* The start of every window creation: the name, or a bad nvcache_name
 * reported through comm's error handler (-1). 0: checkpointed, 1: not. */
static int win_named(MPI_Info info, MPI_Comm comm, char name[CKPT_NAME_MAX])
{
	if (win_name(info, comm, name, CKPT_NAME_MAX)) {
		PMPI_Comm_call_errhandler(comm, MPI_ERR_INFO_VALUE);
		return -1;
	}
	return name[0] ? 0 : 1;
}

/* The start of a window we checkpoint: its object opened (collective),
 * for memory of its own (copy NULL) or copied from copy. MPI_SUCCESS with
 * *w; WIN_PLAIN when the window is not ours to checkpoint (info
 * nvcache_checkpoint=false: the caller makes it as MPI would); an MPI
 * error, already handed to comm's error handler, otherwise. */
#define WIN_PLAIN (-1)
static int win_begin(MPI_Info info, MPI_Comm comm, void *copy, MPI_Aint size,
		     struct nvwin **w)
{
	char name[CKPT_NAME_MAX];
	int rc = win_named(info, comm, name);

	if (rc)
		return rc < 0 ? MPI_ERR_INFO_VALUE : WIN_PLAIN;
	if ((rc = win_open(w, name, copy, size, comm)) != MPI_SUCCESS)
		PMPI_Comm_call_errhandler(comm, rc);
	return rc;
}

/* MPI's window over base, w's from then on; w is dropped if MPI refuses. */
static int win_create_over(struct nvwin *w, void *base, MPI_Aint size, int disp_unit,
			   MPI_Info info, MPI_Comm comm, MPI_Win *win)
{
	int rc = PMPI_Win_create(base, size, disp_unit, info, comm, win);

	if (rc != MPI_SUCCESS) {
		win_drop(w);
		return rc;
	}
	win_add(w, *win);
	return MPI_SUCCESS;
}

int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
		     void *baseptr, MPI_Win *win)
{
	struct nvwin *w;
	int rc = win_begin(info, comm, NULL, size, &w);

	if (rc == WIN_PLAIN)
		return PMPI_Win_allocate(size, disp_unit, info, comm, baseptr, win);
	if (rc != MPI_SUCCESS)
		return rc;
	void *base = w->mem.base;
	rc = win_create_over(w, base, size, disp_unit, info, comm, win);
	if (rc == MPI_SUCCESS)
		*(void **)baseptr = base;
	return rc;
}

int MPI_Win_create(void *base, MPI_Aint size, int disp_unit, MPI_Info info,
		   MPI_Comm comm, MPI_Win *win)
{
	struct nvwin *w;
	int rc = win_begin(info, comm, size > 0 ? base : NULL, size, &w);

	if (rc == WIN_PLAIN)
		return PMPI_Win_create(base, size, disp_unit, info, comm, win);
	if (rc != MPI_SUCCESS)
		return rc;
	return win_create_over(w, base, size, disp_unit, info, comm, win);
}

int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info,
			    MPI_Comm comm, void *baseptr, MPI_Win *win)
{
	char name[CKPT_NAME_MAX];
	struct nvwin *w;
	int rc;

	int named = win_named(info, comm, name);
	if (named < 0)
		return MPI_ERR_INFO_VALUE;
	rc = PMPI_Win_allocate_shared(size, disp_unit, info, comm, baseptr, win);
	if (rc != MPI_SUCCESS || named)
		return rc;
	/* The memory is MPI's shared segment: checkpointed by copy. */
	if ((rc = win_open(&w, name, size > 0 ? *(void **)baseptr : NULL, size,
			   comm)) != MPI_SUCCESS) {
		PMPI_Win_free(win);
		PMPI_Comm_call_errhandler(comm, rc);
		return rc;
	}
	win_add(w, *win);
	return MPI_SUCCESS;
}

/* A dynamic window's object (collective). On a restart the restored
 * version's header is checked; its regions come back at MPI_Win_attach. */
static int dyn_open(struct nvwin **out, const char *name, MPI_Comm comm)
{
	struct nvwin *w = win_new();
	long long ok = 1;
	int rc;

	if (!w)
		return MPI_ERR_NO_MEM;
	if ((rc = ckobj_open(&w->o, name, DYN_HDR, 0, comm, CKOBJ_ANY_SIZE)) != MPI_SUCCESS) {
		free(w);
		return rc;
	}
	w->dynamic = true;
	if (w->o.restored) {
		int s = ckpt_find(w->o.ck, w->o.restored);
		const struct dyn_hdr *h = ckpt_data(w->o.ck, s);
		uint64_t total = DYN_HDR;
		for (uint64_t i = 0; i < h->n && i < DYN_MAX; i++)
			total += h->size[i];
		if (memcmp(h->magic, DYN_MAGIC, 8) || h->n > DYN_MAX ||
		    total > ckpt_geom(w->o.ck)->data_size) {
			log_err("restart: window '%s' of rank %d was not checkpointed as a "
				"dynamic window (MPI_Win_create_dynamic); this run makes one",
				name, w->o.rank);
			ok = 0;
		} else {
			w->restoring = true;
			w->restore_slot = s;
			w->restore_n = (uint32_t)h->n;
			ckobj_restore_protected(&w->o);
		}
	}
	PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_LONG_LONG, MPI_MIN, w->o.comm);
	if (!ok) {
		win_drop(w);
		return MPI_ERR_OTHER;
	}
	*out = w;
	return MPI_SUCCESS;
}

int MPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win *win)
{
	char name[CKPT_NAME_MAX];
	struct nvwin *w;
	int rc;

	if ((rc = win_named(info, comm, name)))
		return rc < 0 ? MPI_ERR_INFO_VALUE : PMPI_Win_create_dynamic(info, comm, win);
	if ((rc = dyn_open(&w, name, comm)) != MPI_SUCCESS) {
		PMPI_Comm_call_errhandler(comm, rc);
		return rc;
	}
	rc = PMPI_Win_create_dynamic(info, comm, win);
	if (rc != MPI_SUCCESS) {
		win_drop(w);
		return rc;
	}
	win_add(w, *win);
	return MPI_SUCCESS;
}

/* A region attached to a checkpointed dynamic window joins its versions.
 * On a restart the first regions attached get back, in attach order, the
 * contents of the restored version's regions, whose sizes they must have
 * (any more are new memory); at the first checkpoint the window must hold
 * as many regions as the restored version did. */
int MPI_Win_attach(MPI_Win win, void *base, MPI_Aint size)
{
	struct nvwin *w = win_find(win);
	uint64_t sz = size > 0 ? (uint64_t)size : 0;
	int rc = PMPI_Win_attach(win, base, size);

	if (rc != MPI_SUCCESS || !w || !w->dynamic)
		return rc;
	if (w->restoring && w->restore_next < w->restore_n) {
		const struct dyn_hdr *h = ckpt_data(w->o.ck, w->restore_slot);
		uint32_t i = w->restore_next;
		if (h->size[i] != sz) {
			log_err("restart of window '%s' rank %d: attached region %u was "
				"checkpointed with %llu bytes, this run attaches %llu bytes",
				w->o.name, w->o.rank, i, (unsigned long long)h->size[i],
				(unsigned long long)sz);
			PMPI_Win_detach(win, base);
			PMPI_Win_call_errhandler(win, MPI_ERR_SIZE);
			return MPI_ERR_SIZE;
		}
		uint64_t off = DYN_HDR;
		for (uint32_t j = 0; j < i; j++)
			off += h->size[j];
		region_read(ckpt_region(w->o.ck), base, (const uint8_t *)h + off, sz);
		w->restore_next++;
	}
	struct span *r = w->nregs < DYN_MAX ?
		realloc(w->regs, sizeof(*r) * (w->nregs + 1)) : NULL;
	if (!r) {
		log_err("window '%s' rank %d: %s", w->o.name, w->o.rank, w->nregs < DYN_MAX ?
			"out of memory" : "at most " DYN_MAX_S " attached regions are checkpointed");
		PMPI_Win_detach(win, base);
		PMPI_Win_call_errhandler(win, MPI_ERR_NO_MEM);
		return MPI_ERR_NO_MEM;
	}
	w->regs = r;
	w->regs[w->nregs] = (struct span){ .base = base, .size = sz };
	win_track(w, &w->regs[w->nregs++]);
	w->layout++;
	return MPI_SUCCESS;
}

int MPI_Win_detach(MPI_Win win, const void *base)
{
	struct nvwin *w = win_find(win);
	int rc = PMPI_Win_detach(win, base);

	if (rc != MPI_SUCCESS || !w || !w->dynamic)
		return rc;
	for (uint32_t i = 0; i < w->nregs; i++) {
		if (w->regs[i].base != base)
			continue;
		span_untrack(&w->regs[i]);
		w->layout++;
		memmove(&w->regs[i], &w->regs[i + 1], sizeof(*w->regs) * (w->nregs - i - 1));
		w->nregs--;
		break;
	}
	return rc;
}

/* Before a dynamic window's checkpoint: a restarted window must have got
 * all of its regions back by its first checkpoint; the area grows when
 * the header and the regions' bytes no longer fit. */
static int dyn_prepare(struct nvwin *w)
{
	uint64_t total = DYN_HDR;

	if (w->restoring && (w->restore_next < w->restore_n || w->nregs != w->restore_n)) {
		log_err("restart of window '%s' rank %d: it was checkpointed with %u attached "
			"regions, this run has %u attached at its first synchronization",
			w->o.name, w->o.rank, w->restore_n, w->nregs);
		PMPI_Win_call_errhandler(w->win, MPI_ERR_SIZE);
		return MPI_ERR_SIZE;
	}
	w->restoring = false;
	for (uint32_t i = 0; i < w->nregs; i++)
		total += w->regs[i].size;
	uint64_t have = ckpt_geom(w->o.ck)->data_size;
	if (total > have) {
		uint64_t want = total > have + have / 4 ? total : have + have / 4;
		if (ckobj_grow(&w->o, (want + 4095) & ~4095ull)) {
			PMPI_Win_call_errhandler(w->win, MPI_ERR_NO_MEM);
			return MPI_ERR_NO_MEM;
		}
		/* the new area's slots hold no version of this layout */
		memset(w->slot_layout, 0, sizeof(w->slot_layout));
	}
	return MPI_SUCCESS;
}

/* A dynamic window's header, at the start of each of its versions. */
static void dyn_header(struct nvwin *w, int s)
{
	static struct dyn_hdr h;

	memcpy(h.magic, DYN_MAGIC, 8);
	h.n = w->nregs;
	for (uint32_t i = 0; i < w->nregs; i++)
		h.size[i] = w->regs[i].size;
	ckpt_write(w->o.ck, s, 0, &h, DYN_HDR);
}

/* Collective over the window's group: a window whose non-collective
 * synchronizations never met a fence, or a barrier or allreduce outside
 * an access epoch, was never checkpointed; said once, by rank 0, so that
 * nobody counts on a restart of it. */
static void win_warn_unsaved(struct nvwin *w)
{
	long long n = (long long)w->syncs;

	if (w->o.comm == MPI_COMM_NULL)
		return;
	PMPI_Allreduce(MPI_IN_PLACE, &n, 1, MPI_LONG_LONG, MPI_SUM, w->o.comm);
	if (n && !w->versions && w->o.rank == 0)
		fprintf(stderr, "nvckpt: window '%s': %lld passive-target synchronizations "
			"(unlock, flush, sync, complete, wait), no fence, and no barrier or "
			"allreduce outside a lock or start epoch: never checkpointed\n",
			w->o.name, n);
	w->syncs = 0;
}

int MPI_Finalize(void)
{
	for (struct nvwin *w = wins; w; w = w->next)
		win_warn_unsaved(w);
	return PMPI_Finalize();
}

int MPI_Win_free(MPI_Win *win)
{
	struct nvwin **pp = &wins, *w;
	int rc;

	while (*pp && (*pp)->win != *win)
		pp = &(*pp)->next;
	w = *pp;
	if (w)
		win_warn_unsaved(w);
	rc = PMPI_Win_free(win);
	if (w) {
		*pp = w->next;
		win_drop(w);
	}
	return rc;
}

int MPI_Win_get_info(MPI_Win win, MPI_Info *info_used)
{
	struct nvwin *w = win_find(win);
	char v[32];
	int rc = PMPI_Win_get_info(win, info_used);

	if (rc != MPI_SUCCESS || !w)
		return rc;
	PMPI_Info_set(*info_used, "nvcache_name", w->o.name);
	snprintf(v, sizeof(v), "%llu", (unsigned long long)w->o.restored);
	PMPI_Info_set(*info_used, "nvcache_version", v);
	snprintf(v, sizeof(v), "%llu", (unsigned long long)w->o.consistent);
	PMPI_Info_set(*info_used, "nvcache_consistent", v);
	return rc;
}

/* Incremental: whether slot s may be brought to now by copying only the
 * pages written since the version it holds: it holds the version before
 * the newest, written with the window's present layout. The written
 * pages are collected here, once per version, either way. */
static bool win_written_only(struct nvwin *w, int s)
{
	struct ckpt_version v[CKPT_SLOTS];
	int nv = ckpt_versions(w->o.ck, v);

	if (!w->incremental)
		return false;
	span_collect(&w->mem);
	for (uint32_t i = 0; i < w->nregs; i++)
		span_collect(&w->regs[i]);
	return nv == 2 && v[1].slot == s && v[1].version + 1 == v[0].version &&
	       w->slot_layout[s] == w->layout;
}

/* A checkpoint of the window: copy its memory (a dynamic window: a
 * header, then its regions in attach order) into the slot not holding the
 * newest version, commit it as the next version, agree. Collective. */
static int win_checkpoint(struct nvwin *w)
{
	int rc;

	if (w->dynamic && (rc = dyn_prepare(w)) != MPI_SUCCESS)
		return rc;
	int s = ckpt_next_slot(w->o.ck);
	struct ckobj_clock c;
	ckobj_clock_start(&c);
	bool written = win_written_only(w, s);
	ckobj_clock_add(&w->o, &c);

	ckobj_begin(&w->o, s);
	ckobj_clock_start(&c);
	if (w->dynamic) {
		uint64_t off = DYN_HDR;
		dyn_header(w, s);
		for (uint32_t i = 0; i < w->nregs; i++) {
			w->o.bytes_copied += span_copy(&w->regs[i], w->o.ck, s, off, written);
			off += w->regs[i].size;
		}
	} else {
		w->o.bytes_copied += span_copy(&w->mem, w->o.ck, s, 0, written);
	}
	w->slot_layout[s] = w->layout;
	ckobj_clock_add(&w->o, &c);
	w->pending = 0;
	w->versions++;
	return ckobj_commit(&w->o, s, w->o.version + 1);
}

int MPI_Win_fence(int assert, MPI_Win win)
{
	int rc = PMPI_Win_fence(assert, win);
	struct nvwin *w;

	if (rc != MPI_SUCCESS || !(w = win_find(win)))
		return rc;
	if (++w->fences % ckobj_conf()->every)
		return MPI_SUCCESS;
	return win_checkpoint(w);
}

/* The synchronizations that are not collective: passive target (unlock,
 * flush, sync) and general active target (complete, wait). A rank cannot
 * commit a version there alone (the others may not be at a consistent
 * point, and the version all ranks agree on must stay in its slots), so
 * they are counted, and the version is taken at the window's next
 * collective point: a fence, or an MPI_Barrier (or, for a window that
 * never fences, an MPI_Allreduce) on a communicator of the window's group
 * while no rank has an access epoch open on it, where the ranks agree
 * whether any of them synchronized (NVCACHE_CKPT_EVERY times) since the
 * last version. An agreement that
 * does not block (an MPI_Iallreduce started here, completed at a later
 * synchronization) would not give one state: a rank ahead may already
 * Put its next epoch into a window that another rank has yet to copy. */
static int win_synced(MPI_Win win, int rc)
{
	struct nvwin *w;

	if (rc == MPI_SUCCESS && (w = win_find(win))) {
		w->pending++;
		w->syncs++;
	}
	return rc;
}

/* An access epoch opened (+1) or closed (-1) by this rank. */
static int win_epoch(MPI_Win win, int rc, int delta)
{
	struct nvwin *w;

	if (rc == MPI_SUCCESS && (w = win_find(win)) && (delta > 0 || w->epochs))
		w->epochs += (uint32_t)delta;
	return rc;
}

int MPI_Win_lock(int type, int rank, int assert, MPI_Win win)
{
	return win_epoch(win, PMPI_Win_lock(type, rank, assert, win), 1);
}

int MPI_Win_lock_all(int assert, MPI_Win win)
{
	return win_epoch(win, PMPI_Win_lock_all(assert, win), 1);
}

int MPI_Win_start(MPI_Group group, int assert, MPI_Win win)
{
	return win_epoch(win, PMPI_Win_start(group, assert, win), 1);
}

int MPI_Win_unlock(int rank, MPI_Win win)
{
	return win_epoch(win, win_synced(win, PMPI_Win_unlock(rank, win)), -1);
}

int MPI_Win_unlock_all(MPI_Win win)
{
	return win_epoch(win, win_synced(win, PMPI_Win_unlock_all(win)), -1);
}

int MPI_Win_flush(int rank, MPI_Win win)
{
	return win_synced(win, PMPI_Win_flush(rank, win));
}

int MPI_Win_flush_all(MPI_Win win)
{
	return win_synced(win, PMPI_Win_flush_all(win));
}

int MPI_Win_flush_local(int rank, MPI_Win win)
{
	return win_synced(win, PMPI_Win_flush_local(rank, win));
}

int MPI_Win_flush_local_all(MPI_Win win)
{
	return win_synced(win, PMPI_Win_flush_local_all(win));
}

int MPI_Win_sync(MPI_Win win)
{
	return win_synced(win, PMPI_Win_sync(win));
}

int MPI_Win_complete(MPI_Win win)
{
	return win_epoch(win, win_synced(win, PMPI_Win_complete(win)), -1);
}

int MPI_Win_wait(MPI_Win win)
{
	return win_synced(win, PMPI_Win_wait(win));
}

#define GROUP_WINS 16

/* The checkpointed windows on comm's group, newest first (every rank
 * has the same ones, created in the same order); with passive_only, only
 * those that never had a fence (a count every rank shares: fences are
 * collective). Their pending counts in pend[0..n), their open access
 * epochs in pend[n..2n) (filled by the caller: n is known at the end). */
static int group_wins(MPI_Comm comm, bool passive_only, struct nvwin **ws, long long *pend)
{
	int n = 0;

	for (struct nvwin *w = wins; w && n < GROUP_WINS; w = w->next) {
		int res;
		if (passive_only && w->fences)
			continue;
		if (PMPI_Comm_compare(comm, w->o.comm, &res) == MPI_SUCCESS &&
		    (res == MPI_IDENT || res == MPI_CONGRUENT)) {
			pend[n] = (long long)w->pending;
			ws[n++] = w;
		}
	}
	for (int i = 0; i < n; i++)
		pend[n + i] = ws[i]->epochs;
	return n;
}

/* After the ranks agreed on the windows' pending counts and open epochs
 * (max of each): each window some rank synchronized often enough, and
 * on which no rank has an access epoch open (whose RMA may still be on
 * its way to some window: not a consistent state), is checkpointed by
 * all, in creation order; the others stay pending. */
static int group_checkpoint(struct nvwin **ws, const long long *max, int n)
{
	int rc = MPI_SUCCESS;

	for (int i = n - 1; i >= 0; i--)
		if (max[i] >= (long long)ckobj_conf()->every && max[n + i] == 0 &&
		    win_checkpoint(ws[i]) != MPI_SUCCESS)
			rc = MPI_ERR_OTHER;
	return rc;
}

/* A barrier on a communicator of a checkpointed window's group: one
 * MPI_Allreduce(MAX) of the windows' pending counts and open epochs takes
 * the barrier's place (it synchronizes as much), then the windows are
 * checkpointed. */
int MPI_Barrier(MPI_Comm comm)
{
	struct nvwin *ws[GROUP_WINS];
	long long pend[2 * GROUP_WINS], max[2 * GROUP_WINS];
	int n = group_wins(comm, false, ws, pend);

	if (!n)
		return PMPI_Barrier(comm);
	PMPI_Allreduce(pend, max, 2 * n, MPI_LONG_LONG, MPI_MAX, comm);
	return group_checkpoint(ws, max, n);
}

/* MPI_Allreduce synchronizes as a barrier does: no rank leaves it before
 * every rank entered it, after its unlock or flush. So for the windows of
 * comm's group that never had a fence (passive target alone) it is a
 * collective point too: the pending counts are agreed on by an
 * MPI_Iallreduce beside the program's own, then the windows checkpointed
 * as at a barrier (whose commit's allreduce keeps every rank from its next
 * epoch until all have copied). Windows that fence are left to their
 * fences: the program's reductions then cost nothing more. */
int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
		  MPI_Op op, MPI_Comm comm)
{
	struct nvwin *ws[GROUP_WINS];
	long long pend[2 * GROUP_WINS], max[2 * GROUP_WINS];
	MPI_Request req;
	int n = wins ? group_wins(comm, true, ws, pend) : 0;

	if (!n)
		return PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
	PMPI_Iallreduce(pend, max, 2 * n, MPI_LONG_LONG, MPI_MAX, comm, &req);
	int rc = PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
	PMPI_Wait(&req, MPI_STATUS_IGNORE);
	if (rc != MPI_SUCCESS)
		return rc;
	return group_checkpoint(ws, max, n);
}
