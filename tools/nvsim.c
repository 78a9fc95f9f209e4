/* nvsim.c - trace-driven simulator of the MRAM/DRAM/flash memory: replays a
 * valgrind lackey trace (or an nvt trace) through the L2 filter once (a
 * memory-level nvt, such as nvswapd's --trace-out log, goes past it), feeds
 * the memory accesses to every (policy, MRAM size, DRAM size) combination in
 * lockstep, and prints the paper's time/energy model estimate for each as
 * CSV. The policies are the live store's own code (pmem/policy.h).
 *
 *   nvsim --trace FILE --policy P[,P..] --mram SIZES --dram SIZES [...]
 *   nvsim convert IN OUT [--format lackey|nvt] [--pages]
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/opts.h"
#include "common/paths.h"
#include "pmem/model.h"
#include "pmem/policy.h"
#include "tools/nvsim_cache.h"
#include "pmem/trace.h"

#define CSV_HEADER "policy,mram_bytes,dram_bytes,accesses,time_s,energy_j," \
		   "mram_hit_rate,flash_reads,flash_writes"
#define RECS 16384
/* Events a batch is simulated in (and up to a record's worth more): the
 * first EVS_FIRST, as it is read before anything else can run (struct
 * feeder), then twice as many each batch up to EVS: each instance in a
 * sweep runs a whole batch at a time, and at 16384 events reloading its
 * tables each batch makes a sweep (-j2, every policy, 35 sizes) of the
 * shipped traces 20% slower. */
#define EVS_FIRST 16384
#define EVS (RECS * 8)
#define EV_PER_REC_MAX (2 * (TRACE_MAX_SIZE / 64 + 2))

struct inst {
	struct policy *p;
	const char *policy;
	uint64_t mram_bytes, dram_bytes;
	struct model_counts mc;
	int failed;
};

/* Page -> a count (open addressing): accesses, for the oracle profile;
 * or the page's number (struct sim's ids). */
struct pmap {
	uint64_t *key, *cnt;
	uint64_t mask, n;
};

struct sim {
	struct inst *in;
	size_t n;
	struct mem_event *ev;
	size_t nev;
	struct pmap ids;          /* page numbers (page_idx) + 1 */
	uint32_t nids;
};

/* Files a signal must not leave behind: a convert's half-written output,
 * the CSV's temporary file (Ctrl-C left both). */
static const char *volatile sig_rm[2];

static void on_signal(int sig)
{
	for (int i = 0; i < 2; i++)
		if (sig_rm[i])
			unlink(sig_rm[i]);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void remove_on_signal(int slot, const char *path)
{
	static bool set;
	if (!set) {
		struct sigaction sa = { .sa_handler = on_signal };
		sigemptyset(&sa.sa_mask);
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
		sigaction(SIGHUP, &sa, NULL);
		set = true;
	}
	sig_rm[slot] = path;
}

/* The process's umask (read by setting it back). */
static mode_t cur_umask(void)
{
	mode_t m = umask(0);
	umask(m);
	return m;
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: nvsim --trace FILE [--format auto|lackey|nvt] --policy P[,P...]\n"
"             --mram SIZES --dram SIZES [--alpha A] [--epoch N]\n"
"             [--profile online|oracle] [--params FILE] [--csv OUT]\n"
"             [--plot DIR] [-j THREADS] [-q]\n"
"       nvsim convert IN OUT [--format auto|lackey|nvt] [--pages]\n"
"             [--l2 [--params FILE]]   (--l2: write the L2's misses only)\n"
"       nvsim --print-params\n"
"\n"
"SIZES: comma-separated, e.g. 0,64M,128M. Policies: %s (or 'all').\n"
"Traces: valgrind --tool=lackey --trace-mem=yes --log-file=F PROG output,\n"
"or nvt (nvsim convert, or nvswapd --trace-out: the live store's page\n"
"accesses, replayed past the L2); either may be gzip-compressed.\n"
"CSV columns: " CSV_HEADER "\n"
"  accesses = memory accesses (L2 misses and write-backs, or the records\n"
"  of a memory-level trace) the policy saw.\n"
"--profile oracle: mram-fixed, lowpower and adaptive's pin set rank pages\n"
"  by whole-run counts from a first pass (the paper's profiling run);\n"
"  online (default): by counts aged every --epoch accesses, as the live\n"
"  store does without --profile.\n",
		policy_names());
}

static int parse_sizes(const char *arg, uint64_t **out, size_t *n)
{
	char *dup = strdup(arg), *save = NULL;
	size_t cap = 0;
	*out = NULL;
	*n = 0;
	if (!dup)
		return -ENOMEM;
	for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		uint64_t v;
		if (opts_parse_size(t, &v) < 0) {
			log_err("bad size '%s' in '%s' (use e.g. 64M, 1G, 0)", t, arg);
			free(dup);
			free(*out);
			*out = NULL;
			return -EINVAL;
		}
		if (*n == cap) {
			cap = cap ? cap * 2 : 8;
			uint64_t *nn = realloc(*out, cap * sizeof(uint64_t));
			if (!nn) {
				free(dup);
				free(*out);
				*out = NULL;
				return -ENOMEM;
			}
			*out = nn;
		}
		(*out)[(*n)++] = v;
	}
	free(dup);
	if (*n == 0) {
		log_err("no sizes in '%s'", arg);
		return -EINVAL;
	}
	return 0;
}

static enum trace_format parse_format(const char *s)
{
	if (!strcmp(s, "auto"))
		return TRACE_AUTO;
	if (!strcmp(s, "lackey"))
		return TRACE_LACKEY;
	if (!strcmp(s, "nvt"))
		return TRACE_NVT;
	return (enum trace_format)-1;
}

static int do_convert(int argc, char **argv)
{
	enum trace_format fmt = TRACE_AUTO;
	bool pages = false, filter = false;
	const char *in = NULL, *outp = NULL, *params = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--format") && i + 1 < argc) {
			fmt = parse_format(argv[++i]);
			if ((int)fmt < 0) {
				log_err("unknown format '%s'", argv[i]);
				return 2;
			}
		} else if (!strcmp(argv[i], "--pages")) {
			pages = true;
		} else if (!strcmp(argv[i], "--l2")) {
			filter = true;
		} else if (!strcmp(argv[i], "--params") && i + 1 < argc) {
			params = argv[++i];
		} else if (!in) {
			in = argv[i];
		} else if (!outp) {
			outp = argv[i];
		} else {
			log_err("convert: unexpected argument '%s'", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	if (!in || !outp) {
		log_err("convert needs IN and OUT (- for stdin, stdout)");
		usage(stderr);
		return 2;
	}
	if (pages && filter) {
		log_err("convert: --pages says the input is already memory-level, "
			"--l2 filters a CPU-level one: give one of them");
		return 2;
	}
	/* The writer truncates its file while the reader has read one
	 * buffer of it: the trace would be lost, and "converted" a part. */
	if (path_same_file(in, outp)) {
		log_err("convert: %s is both the input and the output; give "
			"another output file", in);
		return 2;
	}
	struct model_params mp;
	model_params_default(&mp);
	if (params && model_params_load(&mp, params) < 0)
		return 2;
	struct trace_reader *r;
	struct trace_writer *w;
	struct l2 *l2 = NULL;
	if (trace_open(&r, in, fmt) < 0)
		return 1;
	uint32_t flags = trace_flags(r) | (pages ? NVT_F_PAGES : 0);
	if (filter && (flags & NVT_F_PAGES)) {
		log_err("%s is already a memory-level trace; --l2 does not apply", in);
		trace_close(r);
		return 2;
	}
	if (filter && l2_create(&l2, mp.l2_bytes, mp.line_bytes, mp.l2_ways,
				mp.page_bytes) < 0) {
		log_err("bad cache geometry in the parameters");
		trace_close(r);
		return 2;
	}
	if (filter)
		flags |= NVT_F_PAGES;
	if (trace_writer_open(&w, outp, flags) < 0) {
		trace_close(r);
		return 1;
	}
	bool to_stdout = !strcmp(outp, "-");
	if (!to_stdout)
		remove_on_signal(0, outp);
	static struct trace_rec recs[RECS];
	static struct mem_event ev[EV_PER_REC_MAX];
	uint64_t total = 0, instr_total = 0, nfree = 0, written = 0;
	ssize_t n;
	int rc = 0;
	for (;;) {
		uint64_t instr = 0;
		n = trace_read(r, recs, RECS, &instr);
		if (n < 0) {
			rc = 1;
			break;
		}
		if (instr)
			trace_write_instr(w, instr);
		instr_total += instr;
		for (ssize_t k = 0; k < n && !rc; k++) {
			if (recs[k].op == TRACE_FREE)
				nfree++;
			if (!l2 || recs[k].op == TRACE_FREE) {
				rc = trace_write(w, &recs[k]) < 0;
				written++;
				continue;
			}
			/* Memory-level records: one per event, whole lines at
			 * the page's start (nvsim only looks at the page). */
			unsigned ne = l2_access(l2, &recs[k], ev);
			for (unsigned e = 0; e < ne && !rc; e++) {
				struct trace_rec m = {
					.addr = ev[e].page * mp.page_bytes,
					.size = (uint32_t)(ev[e].lines * mp.line_bytes),
					.op = ev[e].write ? TRACE_S : TRACE_L,
				};
				rc = trace_write(w, &m) < 0;
				written++;
			}
		}
		total += (uint64_t)n;
		if (n == 0 || rc)
			break;
	}
	trace_close(r);
	l2_destroy(l2);
	if (trace_writer_close(w) < 0) {
		log_err("writing %s failed", outp);
		rc = 1;
	}
	if (!rc && !total && !instr_total) {
		log_err("trace %s: empty (no accesses, no instructions)", in);
		rc = 1;
	}
	if (rc) {
		if (!to_stdout)
			unlink(outp);   /* never leave a half trace behind */
		return 1;
	}
	sig_rm[0] = NULL;
	char freed[48] = "", recs_out[64] = "";
	if (nfree)
		snprintf(freed, sizeof(freed), ", %llu pages freed",
			 (unsigned long long)nfree);
	if (l2)
		snprintf(recs_out, sizeof(recs_out), " (%llu memory-level records)",
			 (unsigned long long)(written - nfree));
	fprintf(stderr, "nvsim: converted %llu accesses%s, %llu instructions to %s%s\n",
		(unsigned long long)(total - nfree), freed,
		(unsigned long long)instr_total, to_stdout ? "stdout" : outp,
		recs_out);
	return 0;
}

/* The page's slot, added with count 0 if new; -ENOMEM. */
static int64_t pmap_slot(struct pmap *m, uint64_t page)
{
	if ((m->n + 1) * 2 > m->mask + 1 || !m->key) {
		uint64_t nmask = m->key ? m->mask * 2 + 1 : 4095;
		uint64_t *nk = malloc((nmask + 1) * sizeof(uint64_t));
		uint64_t *nc = calloc(nmask + 1, sizeof(uint64_t));
		if (!nk || !nc) {
			free(nk);
			free(nc);
			return -ENOMEM;
		}
		memset(nk, 0xff, (nmask + 1) * sizeof(uint64_t));
		for (uint64_t i = 0; m->key && i <= m->mask; i++) {
			if (m->key[i] == UINT64_MAX)
				continue;
			uint64_t h = (m->key[i] * 0x9E3779B97F4A7C15ull) & nmask;
			while (nk[h] != UINT64_MAX)
				h = (h + 1) & nmask;
			nk[h] = m->key[i];
			nc[h] = m->cnt[i];
		}
		free(m->key);
		free(m->cnt);
		m->key = nk;
		m->cnt = nc;
		m->mask = nmask;
	}
	/* UINT64_MAX marks an empty slot; that page number cannot occur
	 * (page = address >> page_shift). */
	uint64_t h = (page * 0x9E3779B97F4A7C15ull) & m->mask;
	while (m->key[h] != UINT64_MAX && m->key[h] != page)
		h = (h + 1) & m->mask;
	if (m->key[h] == UINT64_MAX) {
		m->key[h] = page;
		m->n++;
	}
	return (int64_t)h;
}

static int pmap_add(struct pmap *m, uint64_t page, uint64_t c)
{
	int64_t h = pmap_slot(m, page);
	if (h < 0)
		return (int)h;
	m->cnt[h] += c;
	return 0;
}

static void pmap_free(struct pmap *m)
{
	free(m->key);
	free(m->cnt);
	memset(m, 0, sizeof(*m));
}

/* The page's number: the order in which nvsim first saw it, profile pages
 * first, which is its place in every policy's table (policy_access_idx).
 * UINT32_MAX when memory ran out: the policies look it up themselves. */
static uint32_t page_idx(struct sim *s, uint64_t page)
{
	if (s->nids == UINT32_MAX)
		return UINT32_MAX;
	int64_t h = pmap_slot(&s->ids, page);
	if (h < 0)
		return UINT32_MAX;
	if (s->ids.cnt[h] == 0)
		s->ids.cnt[h] = ++s->nids;   /* stored + 1: 0 is "new" */
	return (uint32_t)(s->ids.cnt[h] - 1);
}

/* The paper's profile: a whole first pass counting each page's memory
 * accesses (after the L2), handed to the ranking policies. */
static int oracle_profile(struct sim *s, const char *trace,
			  enum trace_format fmt, const struct model_params *mp)
{
	struct stat st;
	if (!strcmp(trace, "-") || (stat(trace, &st) == 0 && !S_ISREG(st.st_mode))) {
		log_err("--profile oracle reads the trace twice: not from %s",
			!strcmp(trace, "-") ? "stdin" : "a pipe (give a file)");
		return -EINVAL;
	}
	struct trace_reader *r;
	struct l2 *l2;
	struct pmap m = { 0 };
	int rc = trace_open(&r, trace, fmt);
	if (rc < 0)
		return rc;
	rc = l2_create(&l2, mp->l2_bytes, mp->line_bytes, mp->l2_ways,
		       mp->page_bytes);
	if (rc < 0) {
		trace_close(r);
		return rc;
	}
	bool pages = trace_flags(r) & NVT_F_PAGES;
	struct trace_rec *recs = malloc(RECS * sizeof(*recs));
	static struct mem_event ev[EV_PER_REC_MAX];
	uint64_t instr = 0;
	ssize_t n = 0;
	while (recs && (n = trace_read(r, recs, RECS, &instr)) > 0) {
		for (ssize_t k = 0; k < n && rc == 0; k++) {
			unsigned ne = pages ? l2_bypass(l2, &recs[k], ev)
					    : l2_access(l2, &recs[k], ev);
			for (unsigned e = 0; e < ne && rc == 0; e++)
				if (!ev[e].freed)
					rc = pmap_add(&m, ev[e].page, 1);
		}
		if (rc)
			break;
	}
	bool logged = n < 0;   /* the reader said what was wrong */
	if (!recs || n < 0)
		rc = rc ? rc : n < 0 ? (int)n : -ENOMEM;
	trace_close(r);
	l2_destroy(l2);
	free(recs);
	/* In one order for every policy, and numbered in it: each
	 * policy's table then holds the pages at their numbers. */
	for (uint64_t i = 0; i <= m.mask && rc == 0 && m.key; i++)
		if (m.key[i] != UINT64_MAX)
			page_idx(s, m.key[i]);
	/* No memory access at all: no table was made. */
	for (size_t k = 0; k < s->n && rc == 0 && m.key; k++)
		for (uint64_t i = 0; i <= m.mask && rc == 0; i++)
			if (m.key[i] != UINT64_MAX)
				rc = policy_set_profile(s->in[k].p, m.key[i], m.cnt[i]);
	pmap_free(&m);
	if (rc < 0 && !logged)
		log_err("oracle profile: %s", strerror(-rc));
	return rc;
}

/* Run one slice of the instances over the current event batch. */
struct slice {
	struct sim *s;
	size_t from, to;
};

static void *run_slice(void *arg)
{
	struct slice *sl = arg;
	struct sim *s = sl->s;
	struct tier_move mv[POLICY_MAX_MOVES];
	for (size_t k = sl->from; k < sl->to; k++) {
		struct inst *in = &s->in[k];
		if (in->failed)
			continue;
		for (size_t e = 0; e < s->nev; e++) {
			const struct mem_event *ev = &s->ev[e];
			enum tier t;
			if (ev->freed) {
				policy_forget(in->p, ev->page);
				continue;
			}
			uint32_t idx = ev->idx;
			unsigned nm = policy_access_idx(in->p, ev->page, &idx,
							ev->write, mv, &t);
			if (t == TIER_NONE) {
				in->failed = 1;
				break;
			}
			/* A whole page written (a store log's 4 KiB
			 * write) needs no flash read, as in the store. */
			bool whole = ev->write && ev->whole;
			for (unsigned m = 0; m < nm; m++)
				if (!model_load_skipped(&mv[m], ev->page, whole))
					model_count_move(&in->mc, &mv[m]);
			model_count_access(&in->mc, t, ev->write, ev->lines);
		}
	}
	return NULL;
}

static int sim_flush(struct sim *s, int threads)
{
	if (!s->nev)
		return 0;
	if (threads > (int)s->n)
		threads = (int)s->n;
	if (threads < 1)
		threads = 1;
	struct slice sl[64];
	pthread_t th[64];
	for (int t = 0; t < threads; t++) {
		sl[t].s = s;
		sl[t].from = s->n * (size_t)t / (size_t)threads;
		sl[t].to = s->n * (size_t)(t + 1) / (size_t)threads;
	}
	int started = 0;
	for (int t = 1; t < threads; t++) {
		if (pthread_create(&th[t], NULL, run_slice, &sl[t]) != 0)
			break;
		started = t;
	}
	/* Slices whose thread did not start run here. */
	run_slice(&sl[0]);
	for (int t = started + 1; t < threads; t++)
		run_slice(&sl[t]);
	for (int t = 1; t <= started; t++)
		pthread_join(th[t], NULL);
	s->nev = 0;
	for (size_t k = 0; k < s->n; k++)
		if (s->in[k].failed) {
			log_err("%s mram=%llu dram=%llu: out of memory for the page table",
				s->in[k].policy,
				(unsigned long long)s->in[k].mram_bytes,
				(unsigned long long)s->in[k].dram_bytes);
			return -ENOMEM;
		}
	return 0;
}

/* Reading runs a batch ahead of the simulation, in a thread of its own:
 * inflating, decoding, the L2 and numbering the pages (everything before
 * the policies) was a third of a run of one policy (cg-small, lru: 19 of
 * 26 ns an access, adaptive: 19 of 57), and it depends on nothing the
 * policies do. A batch is whole records, up to EVS events or a few
 * more; where batches end changes nothing the policies see. */
struct batch {
	struct mem_event *ev;
	size_t nev;
	uint64_t nrec, nfree, instr;  /* records, frees, instructions in it */
	double progress;              /* trace_progress after it */
	bool failed;                  /* reading failed (logged): last batch */
	bool last;                    /* the trace ends with this batch */
};

struct feeder {
	struct sim *s;                /* its ids, nids: the feeder's alone */
	struct trace_reader *r;
	struct l2 *l2;
	bool pages;
	struct trace_rec *recs;
	size_t nrecs, pos;            /* records read, records used */
	struct batch b[2];
	bool full[2];                 /* b[k] is the simulation's */
	bool stop;                    /* the simulation gave up */
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

/* Fill b with the next events: at least `want` of them unless the trace
 * ends (or fails) first. */
static void feed_batch(struct feeder *f, struct batch *b, size_t want)
{
	b->nev = 0;
	b->nrec = b->nfree = b->instr = 0;
	b->failed = b->last = false;
	while (b->nev < want) {
		if (f->pos == f->nrecs) {
			ssize_t n = trace_read(f->r, f->recs, RECS, &b->instr);
			b->progress = trace_progress(f->r);
			if (n <= 0) {
				b->failed = n < 0;
				b->last = true;
				return;
			}
			f->nrecs = (size_t)n;
			f->pos = 0;
			b->nrec += (uint64_t)n;
		}
		const struct trace_rec *rec = &f->recs[f->pos++];
		size_t e0 = b->nev;
		b->nfree += rec->op == TRACE_FREE;
		b->nev += f->pages ? l2_bypass(f->l2, rec, b->ev + b->nev)
				   : l2_access(f->l2, rec, b->ev + b->nev);
		for (size_t e = e0; e < b->nev; e++)
			if (!b->ev[e].freed)
				b->ev[e].idx = page_idx(f->s, b->ev[e].page);
	}
}

static void *feeder_run(void *arg)
{
	struct feeder *f = arg;
	size_t want = EVS_FIRST;
	for (int k = 0;; k ^= 1) {
		pthread_mutex_lock(&f->mu);
		while (f->full[k] && !f->stop)
			pthread_cond_wait(&f->cv, &f->mu);
		bool stop = f->stop;
		pthread_mutex_unlock(&f->mu);
		if (stop)
			break;
		feed_batch(f, &f->b[k], want);
		want = want * 2 < EVS ? want * 2 : EVS;
		pthread_mutex_lock(&f->mu);
		f->full[k] = true;
		pthread_cond_broadcast(&f->cv);
		pthread_mutex_unlock(&f->mu);
		if (f->b[k].last)
			break;
	}
	return NULL;
}

/* The batch k, once the feeder has filled it. */
static struct batch *feeder_take(struct feeder *f, int k)
{
	pthread_mutex_lock(&f->mu);
	while (!f->full[k])
		pthread_cond_wait(&f->cv, &f->mu);
	pthread_mutex_unlock(&f->mu);
	return &f->b[k];
}

/* Batch k is simulated: the feeder may fill it again. */
static void feeder_give(struct feeder *f, int k)
{
	pthread_mutex_lock(&f->mu);
	f->full[k] = false;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
}

/* 0, or -ENOMEM / -errno (not started; nothing to undo). */
static int feeder_start(struct feeder *f, struct sim *s,
			struct trace_reader *r, struct l2 *l2)
{
	memset(f, 0, sizeof(*f));
	f->s = s;
	f->r = r;
	f->l2 = l2;
	f->pages = trace_flags(r) & NVT_F_PAGES;
	f->recs = malloc(RECS * sizeof(*f->recs));
	for (int k = 0; k < 2; k++)
		f->b[k].ev = malloc((EVS + EV_PER_REC_MAX) *
				    sizeof(struct mem_event));
	int rc = -ENOMEM;
	if (f->recs && f->b[0].ev && f->b[1].ev) {
		pthread_mutex_init(&f->mu, NULL);
		pthread_cond_init(&f->cv, NULL);
		rc = -pthread_create(&f->th, NULL, feeder_run, f);
		if (rc == 0)
			return 0;
		pthread_cond_destroy(&f->cv);
		pthread_mutex_destroy(&f->mu);
	}
	free(f->recs);
	free(f->b[0].ev);
	free(f->b[1].ev);
	return rc;
}

/* Stop the feeder (wherever it is) and free it. */
static void feeder_stop(struct feeder *f)
{
	pthread_mutex_lock(&f->mu);
	f->stop = true;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
	pthread_join(f->th, NULL);
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->mu);
	free(f->recs);
	free(f->b[0].ev);
	free(f->b[1].ev);
}

static const char *plot_script(const char *argv0)
{
	static char buf[4096];
	const char *env = getenv("NVSIM_PLOT_SCRIPT");
	if (env)
		return env;
#ifdef NVSIM_PLOT_SCRIPT
	if (access(NVSIM_PLOT_SCRIPT, R_OK) == 0)
		return NVSIM_PLOT_SCRIPT;
#endif
	const char *slash = strrchr(argv0, '/');
	if (slash) {
		snprintf(buf, sizeof(buf), "%.*s/nvsim-plot.py",
			 (int)(slash - argv0), argv0);
		if (access(buf, R_OK) == 0)
			return buf;
	}
	return "nvsim-plot.py";
}

static int run_plot(const char *argv0, const char *csv, const char *dir)
{
	const char *script = plot_script(argv0);
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		/* The distribution's python3 is the one python3-matplotlib
		 * (tools/install-deps.sh) installs into; a pyenv or venv
		 * python3 first in PATH may lack it. NVSIM_PYTHON overrides. */
		const char *py = getenv("NVSIM_PYTHON");
		if (!py)
			py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3"
								 : "python3";
		execlp(py, py, script, csv, dir, (char *)NULL);
		_exit(127);
	}
	int st;
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
		log_err("plotting with %s failed (python3 with matplotlib needed)",
			script);
		return -EIO;
	}
	return 0;
}

/* What nvsim was asked to do: the command line, checked. */
struct nvsim_opts {
	const char *trace, *policies, *mram_arg, *dram_arg, *params, *csv, *plot;
	enum trace_format fmt;
	double alpha;
	uint64_t epoch;
	int threads, quiet, print_params, oracle;
	struct model_params mp;
};

/* Parse and check the command line into o. Returns -1 to go on, or the
 * exit code (0 after --help or --print-params, 2 for a bad command line). */
static int nvsim_opts_parse(int argc, char **argv, struct nvsim_opts *o)
{
	static const struct option lo[] = {
		{ "trace", required_argument, NULL, 't' },
		{ "format", required_argument, NULL, 'f' },
		{ "policy", required_argument, NULL, 'p' },
		{ "mram", required_argument, NULL, 'm' },
		{ "dram", required_argument, NULL, 'd' },
		{ "alpha", required_argument, NULL, 'a' },
		{ "epoch", required_argument, NULL, 'e' },
		{ "params", required_argument, NULL, 'P' },
		{ "csv", required_argument, NULL, 'c' },
		{ "plot", required_argument, NULL, 'g' },
		{ "profile", required_argument, NULL, 'r' },
		{ "print-params", no_argument, NULL, 'x' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ 0, 0, 0, 0 },
	};
	int c;
	char *end;

	*o = (struct nvsim_opts){ .policies = "lru,mram-fixed,lowpower",
				  .mram_arg = "128M", .fmt = TRACE_AUTO,
				  .alpha = 0.9, .threads = 1 };
	while ((c = getopt_long(argc, argv, "t:p:m:d:j:qh", lo, NULL)) != -1) {
		switch (c) {
		case 't': o->trace = optarg; break;
		case 'f':
			o->fmt = parse_format(optarg);
			if ((int)o->fmt < 0) {
				log_err("unknown format '%s' (auto, lackey, nvt)", optarg);
				return 2;
			}
			break;
		case 'p': o->policies = optarg; break;
		case 'm': o->mram_arg = optarg; break;
		case 'd': o->dram_arg = optarg; break;
		case 'a':
			o->alpha = strtod(optarg, &end);
			if (*end || end == optarg || !(o->alpha >= 0 && o->alpha <= 100)) {
				log_err("bad --alpha '%s'", optarg);
				return 2;
			}
			break;
		case 'e':
			errno = 0;
			o->epoch = strtoull(optarg, &end, 10);
			if (*end || end == optarg || !o->epoch || errno ||
			    optarg[0] == '-') {
				log_err("bad --epoch '%s' (accesses, > 0)", optarg);
				return 2;
			}
			break;
		case 'P': o->params = optarg; break;
		case 'r':
			if (!strcmp(optarg, "oracle"))
				o->oracle = 1;
			else if (!strcmp(optarg, "online"))
				o->oracle = 0;
			else {
				log_err("bad --profile '%s' (online, oracle)", optarg);
				return 2;
			}
			break;
		case 'c': o->csv = optarg; break;
		case 'g': o->plot = optarg; break;
		case 'j':
			o->threads = (int)strtol(optarg, &end, 10);
			if (*end || end == optarg || o->threads < 1 || o->threads > 64) {
				log_err("bad -j '%s' (1..64)", optarg);
				return 2;
			}
			break;
		case 'x': o->print_params = 1; break;
		case 'q': o->quiet = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	model_params_default(&o->mp);
	if (o->params && model_params_load(&o->mp, o->params) < 0)
		return 2;
	if (o->print_params) {
		char buf[8192];
		model_params_format(&o->mp, buf, sizeof(buf));
		fputs(buf, stdout);
		return 0;
	}
	if (!o->trace || !o->dram_arg || optind != argc) {
		if (optind != argc)
			log_err("unexpected argument '%s'", argv[optind]);
		else
			log_err("%s is required", !o->trace ? "--trace FILE"
							    : "--dram SIZES");
		usage(stderr);
		return 2;
	}
	/* "all" anywhere in the list is every policy. */
	for (const char *t = o->policies; *t; t += strcspn(t, ","), t += *t == ',')
		if (!strncmp(t, "all", 3) && (t[3] == ',' || !t[3]))
			o->policies = policy_names();
	if (o->csv && !strcmp(o->csv, "-")) {
		if (o->plot) {
			log_err("--csv - with --plot: the plots are drawn from "
				"DIR/nvsim.csv; leave out --csv");
			return 2;
		}
		o->csv = NULL;   /* stdout, as --trace - is stdin */
	}
	if (path_same_file(o->csv, o->trace)) {
		log_err("--csv %s is the trace itself; give another file", o->csv);
		return 2;
	}
	return -1;
}

/* What a run holds. run_free releases it on every path (one exit), so that
 * error exits stay clean under LeakSanitizer too. Functions taking a run
 * return 0 or the exit code (1: the run failed, 2: a bad request). */
struct run {
	uint64_t *mram, *dram;
	size_t nm, nd;
	struct sim s;
	size_t cap;
	struct trace_reader *r;
	struct l2 *l2;
	uint32_t access_lines;
	const char *csv;        /* the CSV written, NULL: stdout */
	FILE *out;
	bool made_csv;          /* csvtmp is ours, renamed over csv at the end */
	char csvpath[4096], csvtmp[4200], csvreal[PATH_MAX];
	uint64_t instr, nrec, nfree;
	double secs;
};

/* The MRAM and DRAM sizes of the sweep, in whole pages. */
static int run_sizes(struct run *u, const struct nvsim_opts *o)
{
	if (parse_sizes(o->mram_arg, &u->mram, &u->nm) < 0 ||
	    parse_sizes(o->dram_arg, &u->dram, &u->nd) < 0)
		return 2;
	/* Memory is whole pages: a size below one page is refused, never
	 * run as 0. */
	for (size_t i = 0; i < u->nm + u->nd; i++) {
		uint64_t v = i < u->nm ? u->mram[i] : u->dram[i - u->nm];
		if (v % o->mp.page_bytes) {
			log_err("--%s size %llu bytes is not a whole number of "
				"%llu-byte pages", i < u->nm ? "mram" : "dram",
				(unsigned long long)v,
				(unsigned long long)o->mp.page_bytes);
			return 2;
		}
	}
	return 0;
}

/* Opened before the policies are made: its flags say how they weigh an
 * access. */
static int run_open_trace(struct run *u, const struct nvsim_opts *o)
{
	const struct model_params *mp = &o->mp;

	if (trace_open(&u->r, o->trace, o->fmt) < 0)
		return 1;
	/* A page store's own log (nvswapd --trace-out): each access moves a
	 * page, and the policies weigh it so, as in the live store. */
	u->access_lines = (trace_flags(u->r) & NVT_F_STORE)
		? (uint32_t)(mp->page_bytes / mp->line_bytes) : 0;
	/* A memory-level trace is the L2's output already: its keys change
	 * nothing but the line count of an access, and a user's l2_bytes is
	 * not ignored without a word. */
	struct model_params dflt;
	model_params_default(&dflt);
	if ((trace_flags(u->r) & NVT_F_PAGES) &&
	    (mp->l2_bytes != dflt.l2_bytes || mp->l2_ways != dflt.l2_ways ||
	     mp->line_bytes != dflt.line_bytes))
		log_warn("trace %s is memory-level (already filtered by an L2): "
			 "l2_bytes and l2_ways do not apply to it, and line_bytes "
			 "only counts the lines of each access; convert the "
			 "CPU-level trace again with --l2 --params to change the "
			 "cache", o->trace);
	return 0;
}

/* One instance: policy name with MRAM mram and DRAM dram bytes, appended
 * to the sweep unless it is the empty machine of a sweep (*skipped). */
static int run_add(struct run *u, const struct nvsim_opts *o, const char *name,
		   uint64_t mram, uint64_t dram, bool *skipped)
{
	const struct model_params *mp = &o->mp;
	struct policy_config cfg = {
		.mram_pages = mram / mp->page_bytes,
		.dram_pages = dram / mp->page_bytes,
		.alpha = o->alpha, .epoch = o->epoch,
		.access_lines = u->access_lines,
	};
	/* A sweep over 0,... on both axes meets (0, 0): no memory at all is
	 * not a machine; skip it. */
	if (!cfg.mram_pages && !cfg.dram_pages && (u->nm > 1 || u->nd > 1)) {
		*skipped = true;
		return 0;
	}
	if (u->s.n == u->cap) {
		size_t ncap = u->cap ? u->cap * 2 : 16;
		struct inst *nin = realloc(u->s.in, ncap * sizeof(*nin));
		if (!nin)
			return 1;
		u->s.in = nin;
		u->cap = ncap;
	}
	struct inst *in = &u->s.in[u->s.n];
	memset(in, 0, sizeof(*in));
	int e = policy_create(&in->p, name, &cfg);
	if (e == -ENOENT) {
		log_err("unknown policy '%s' (known: %s)", name, policy_names());
		return 2;
	}
	if (e < 0) {
		log_err("policy %s with MRAM %llu + DRAM %llu bytes: %s", name,
			(unsigned long long)mram, (unsigned long long)dram,
			e != -EINVAL ? strerror(-e)
			: cfg.mram_pages || cfg.dram_pages
			? "more pages than a policy can number (2^32)"
			: "no memory pages at all");
		return 2;
	}
	in->policy = policy_name(in->p);
	in->mram_bytes = cfg.mram_pages * mp->page_bytes;
	in->dram_bytes = cfg.dram_pages * mp->page_bytes;
	u->s.n++;
	return 0;
}

/* Instances: policy-major, then MRAM, then DRAM (the CSV order). */
static int run_instances(struct run *u, const struct nvsim_opts *o)
{
	char *pl = strdup(o->policies), *save = NULL;
	bool skipped_empty = false;
	int rc = 0;

	if (!pl)
		return 1;
	for (char *name = strtok_r(pl, ",", &save); name && !rc;
	     name = strtok_r(NULL, ",", &save))
		for (size_t i = 0; i < u->nm && !rc; i++)
			for (size_t j = 0; j < u->nd && !rc; j++)
				rc = run_add(u, o, name, u->mram[i], u->dram[j],
					     &skipped_empty);
	free(pl);
	if (rc)
		return rc;
	if (skipped_empty && u->s.n)
		log_info("MRAM 0 + DRAM 0 left out of the sweep: no memory at all");
	if (u->s.n == 0) {
		log_err(o->policies[strspn(o->policies, ",")] ? "nothing to simulate: every MRAM + DRAM size "
			"given is 0" : "no policy given");
		return 2;
	}
	return 0;
}

/* The output, opened before the run: a bad path must not cost a long run. */
static int run_open_csv(struct run *u, const struct nvsim_opts *o)
{
	struct stat st;

	u->csv = o->csv;
	if (o->plot && !u->csv) {
		if ((mkdir(o->plot, 0755) < 0 && errno != EEXIST) ||
		    stat(o->plot, &st) < 0 || !S_ISDIR(st.st_mode)) {
			log_err("--plot %s: %s", o->plot,
				errno == EEXIST || errno == 0 ? "not a directory"
							      : strerror(errno));
			return 1;
		}
		snprintf(u->csvpath, sizeof(u->csvpath), "%s/nvsim.csv", o->plot);
		u->csv = u->csvpath;
	}
	/* A regular file (or a new one) is written beside it and renamed
	 * over it only when the run succeeds: a failed run leaves the old
	 * results as they were, and nothing it did not make is removed
	 * (--csv /dev/null, a FIFO: written as they are). Through a
	 * symlink, its target is the file to replace (renaming over the
	 * link would replace the link and leave the target as it was). */
	if (u->csv && lstat(u->csv, &st) == 0 && S_ISLNK(st.st_mode) &&
	    realpath(u->csv, u->csvreal))
		u->csv = u->csvreal;
	if (u->csv && (stat(u->csv, &st) < 0 || S_ISREG(st.st_mode))) {
		int n = snprintf(u->csvtmp, sizeof(u->csvtmp), "%s.nvsim-XXXXXX", u->csv);
		int fd = -1, e = ENAMETOOLONG;
		if (n > 0 && (size_t)n < sizeof(u->csvtmp)) {
			fd = mkstemp(u->csvtmp);
			e = errno;
		}
		if (fd >= 0 && !(u->out = fdopen(fd, "w"))) {
			e = errno;
			close(fd);
			unlink(u->csvtmp);
			fd = -1;
		}
		if (fd < 0) {
			log_err("--csv %s: %s", u->csv, strerror(e));
			return 1;
		}
		fchmod(fd, 0644 & ~cur_umask());
		u->made_csv = true;
		remove_on_signal(1, u->csvtmp);
	} else {
		u->out = u->csv ? fopen(u->csv, "w") : stdout;
		if (!u->out) {
			log_err("--csv %s: %s", u->csv, strerror(errno));
			return 1;
		}
	}
	return 0;
}

/* The run: the trace through the L2 into every instance, with progress
 * on stderr. */
static int run_simulate(struct run *u, const struct nvsim_opts *o)
{
	int rc = 0;

	if (o->oracle && oracle_profile(&u->s, o->trace, o->fmt, &o->mp) < 0)
		return 1;
	if (l2_create(&u->l2, o->mp.l2_bytes, o->mp.line_bytes, o->mp.l2_ways,
		      o->mp.page_bytes) < 0) {
		log_err("bad cache geometry in the parameters");
		return 2;
	}
	struct feeder f;
	int fe = feeder_start(&f, &u->s, u->r, u->l2);
	if (fe < 0) {
		log_err("cannot start the trace reader: %s", strerror(-fe));
		return 1;
	}
	uint64_t t0 = clock_now_ns(), last_prog = t0;
	bool tty = isatty(2);
	for (int k = 0;; k ^= 1) {
		struct batch *b = feeder_take(&f, k);
		u->nrec += b->nrec;
		u->nfree += b->nfree;
		u->instr += b->instr;
		if (b->failed) {
			rc = 1;
			break;
		}
		u->s.ev = b->ev;
		u->s.nev = b->nev;
		if (sim_flush(&u->s, o->threads) < 0) {
			rc = 1;
			break;
		}
		uint64_t now = clock_now_ns();
		if (!o->quiet && now - last_prog > (tty ? 500000000ull : 30000000000ull)) {
			last_prog = now;
			double secs = (double)(now - t0) / 1e9;
			char pct[16] = "";
			if (b->progress >= 0)   /* unknown from a pipe */
				snprintf(pct, sizeof(pct), "%5.1f%%  ",
					 100 * b->progress);
			fprintf(stderr, "%snvsim: %s%llu accesses  %.2f M/s%s",
				tty ? "\r" : "", pct,
				(unsigned long long)(u->nrec - u->nfree),
				(double)(u->nrec - u->nfree) / secs / 1e6,
				tty ? "" : "\n");
		}
		bool last = b->last;
		feeder_give(&f, k);
		if (last)
			break;
	}
	feeder_stop(&f);
	u->s.ev = NULL;
	u->secs = (double)(clock_now_ns() - t0) / 1e9;
	if (rc)
		return rc;
	/* Nothing at all (an empty file, a lackey log of a program that
	 * did not run) is a mistake; instructions without a memory access
	 * give rows of 0 accesses, with a word. */
	if (!u->nrec && !u->instr) {
		log_err("trace %s: empty (no accesses, no instructions)", o->trace);
		return 1;
	}
	if (!u->nrec)
		log_warn("trace %s: no memory accesses in it", o->trace);
	return 0;
}

/* The closing line on stderr. */
static void run_summary(const struct run *u, const struct nvsim_opts *o)
{
	uint64_t hits, misses, wbs, n = u->nrec - u->nfree;
	struct policy_counters pc0;
	char fb[32], freed[48] = "";

	l2_stats(u->l2, &hits, &misses, &wbs);
	policy_get_counters(u->s.in[0].p, &pc0);
	if (u->nfree)
		snprintf(freed, sizeof(freed), "; %llu pages freed",
			 (unsigned long long)u->nfree);
	fprintf(stderr, "%snvsim: %llu accesses, %llu instructions, "
		"L2 %llu misses + %llu write-backs; footprint %s%s; "
		"%.2f s (%.2f M accesses/s, %zu combination%s)\n",
		isatty(2) ? "\r" : "", (unsigned long long)n,
		(unsigned long long)u->instr, (unsigned long long)misses,
		(unsigned long long)wbs,
		/* distinct pages: a page freed and used again (a store log's
		 * TRIMs) is placed twice, but is one */
		opts_format_size((u->s.nids && u->s.nids != UINT32_MAX ? u->s.nids
				  : pc0.places) * o->mp.page_bytes, fb, sizeof(fb)),
		freed, u->secs, (double)n / (u->secs > 0 ? u->secs : 1e-9) / 1e6,
		u->s.n, u->s.n == 1 ? "" : "s");
}

/* The model's estimate of each instance as a CSV row; the file is kept
 * (renamed into place) only when it is whole. */
static int run_write_csv(struct run *u, const struct nvsim_opts *o)
{
	int rc = 0;

	fprintf(u->out, "%s\n", CSV_HEADER);
	for (size_t k = 0; k < u->s.n; k++) {
		struct inst *in = &u->s.in[k];
		struct policy_counters pc;
		struct model_result mr;
		policy_get_counters(in->p, &pc);
		in->mc.instructions = u->instr;
		model_estimate(&o->mp, &in->mc, in->mram_bytes, in->dram_bytes, &mr);
		fprintf(u->out, "%s,%llu,%llu,%llu,%.9g,%.9g,%.6f,%llu,%llu\n",
			in->policy, (unsigned long long)in->mram_bytes,
			(unsigned long long)in->dram_bytes,
			(unsigned long long)pc.accesses, mr.time_s, mr.energy_j,
			pc.accesses ? (double)pc.served[TIER_MRAM] / (double)pc.accesses : 0.0,
			(unsigned long long)in->mc.flash_reads,
			(unsigned long long)in->mc.flash_writes);
	}
	if (u->csv ? fclose(u->out) != 0 : fflush(u->out) != 0) {
		log_err("--csv %s: write failed", u->csv ? u->csv : "(stdout)");
		rc = 1;
	} else if (u->made_csv && rename(u->csvtmp, u->csv) < 0) {
		log_err("--csv %s: %s", u->csv, strerror(errno));
		rc = 1;
	} else {
		u->made_csv = false;   /* whole: kept even if the plot fails */
		sig_rm[1] = NULL;
	}
	u->out = NULL;
	return rc;
}

static void run_free(struct run *u)
{
	if (u->out && u->out != stdout)
		fclose(u->out);
	if (u->made_csv) {   /* the run failed: its partial results go */
		sig_rm[1] = NULL;
		unlink(u->csvtmp);
	}
	for (size_t k = 0; k < u->s.n; k++)
		policy_destroy(u->s.in[k].p);
	trace_close(u->r);
	l2_destroy(u->l2);
	free(u->s.in);
	pmap_free(&u->s.ids);
	free(u->mram);
	free(u->dram);
}

int main(int argc, char **argv)
{
	struct nvsim_opts o;
	static struct run u;   /* csvtmp is the signal handler's to remove */
	int rc;

	log_init("nvsim", LOG_LVL_INFO);
	if (argc >= 2 && !strcmp(argv[1], "convert"))
		return do_convert(argc - 1, argv + 1);
	rc = nvsim_opts_parse(argc, argv, &o);
	if (rc >= 0)
		return rc;
	rc = run_sizes(&u, &o);
	if (!rc)
		rc = run_open_trace(&u, &o);
	if (!rc)
		rc = run_instances(&u, &o);
	if (!rc)
		rc = run_open_csv(&u, &o);
	if (!rc)
		rc = run_simulate(&u, &o);
	if (!rc && !o.quiet)
		run_summary(&u, &o);
	if (!rc)
		rc = run_write_csv(&u, &o);
	if (!rc && o.plot && run_plot(argv[0], u.csv, o.plot) < 0)
		rc = 1;
	run_free(&u);
	return rc;
}
