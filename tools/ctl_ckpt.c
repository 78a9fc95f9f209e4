/* ctl_ckpt.c - 'nvcachectl ckpt list|show|delete'; see ctl_ckpt.h. */
#include "tools/ctl_ckpt.h"

#include "common/log.h"
#include "pmem/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

/* One window of a job, summed over its ranks' files. */
struct ck_win {
	char name[CKPT_NAME_MAX];
	uint32_t nranks, files, busy, bad;
	uint64_t bytes;           /* data bytes per rank (rank 0's) */
	uint64_t file_bytes;      /* all its files */
	uint64_t consistent;      /* min over ranks of their newest version */
	uint64_t newest;          /* max over ranks */
	uint64_t time_ns;         /* when the consistent version was committed */
	bool any;
};

static uint64_t now_real_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void fmt_age(uint64_t t, char *out, size_t len)
{
	uint64_t now = now_real_ns();
	double s = t && now > t ? (now - t) / 1e9 : 0;

	if (!t)
		snprintf(out, len, "-");
	else if (s < 120)
		snprintf(out, len, "%.0fs", s);
	else if (s < 7200)
		snprintf(out, len, "%.0fm", s / 60);
	else
		snprintf(out, len, "%.1fh", s / 3600);
}

/* name.rN.nvckpt -> name, N; false for other files. */
static bool parse_file(const char *f, char *name, unsigned *rank)
{
	size_t l = strlen(f);
	const char *suf = ".nvckpt";

	if (l < 10 || strcmp(f + l - strlen(suf), suf))
		return false;
	const char *r = f + l - strlen(suf);
	while (r > f && r[-1] != '.')
		r--;
	if (r == f || r[0] != 'r' || (size_t)(r - 1 - f) >= CKPT_NAME_MAX)
		return false;
	char *end;
	unsigned long n = strtoul(r + 1, &end, 10);
	if (end != f + l - strlen(suf) || end == r + 1)
		return false;
	memcpy(name, f, (size_t)(r - 1 - f));
	name[r - 1 - f] = 0;
	*rank = (unsigned)n;
	return true;
}

/* Gather a job's windows. Returns how many (at most max). */
static int job_scan(const char *jobdir, struct ck_win *w, int max, bool verify,
		    bool show)
{
	DIR *d = opendir(jobdir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char name[CKPT_NAME_MAX], path[PATH_MAX];
		unsigned rank;
		if (!parse_file(de->d_name, name, &rank))
			continue;
		int i;
		for (i = 0; i < n && strcmp(w[i].name, name); i++)
			;
		if (i == n) {
			if (n == max)
				continue;
			memset(&w[n], 0, sizeof(w[n]));
			snprintf(w[n].name, sizeof(w[n].name), "%s", name);
			n++;
		}
		struct ck_win *x = &w[i];
		struct ckpt *c;
		snprintf(path, sizeof(path), "%s/%s", jobdir, de->d_name);
		x->files++;
		int rc = ckpt_open(&c, path, verify, NULL);
		if (rc == -EBUSY) {
			x->busy++;
			if (show)
				printf("  %-16s rank %-4u in use (the job is running)\n", name, rank);
			continue;
		}
		if (rc) {
			x->bad++;
			if (show)
				printf("  %-16s rank %-4u unreadable: %s\n", name, rank, strerror(-rc));
			continue;
		}
		const struct ckpt_geom *g = ckpt_geom(c);
		struct ckpt_version v[CKPT_SLOTS];
		int nv = ckpt_versions(c, v);
		uint64_t newest = nv ? v[0].version : 0;
		x->nranks = g->nranks;
		x->file_bytes += ckpt_file_size(g);
		if (g->rank == 0 || !x->bytes)
			x->bytes = g->data_size;
		if (!x->any || newest < x->consistent) {
			x->consistent = newest;
			x->time_ns = nv ? v[0].time_ns : 0;
		}
		if (newest > x->newest)
			x->newest = newest;
		x->any = true;
		if (show) {
			printf("  %-16s rank %-4u %llu bytes%s", name, g->rank,
			       (unsigned long long)g->data_size, nv ? "" : ", no version\n");
			for (int k = 0; k < nv; k++) {
				char age[32];
				fmt_age(v[k].time_ns, age, sizeof(age));
				printf(", version %llu (slot %d, %s ago, checksum ok)%s",
				       (unsigned long long)v[k].version, v[k].slot, age,
				       k == nv - 1 ? "\n" : "");
			}
		}
		ckpt_close(c);
	}
	closedir(d);
	/* a version all ranks hold only when every rank's file was read */
	for (int i = 0; i < n; i++)
		if (w[i].busy || w[i].bad || w[i].files != w[i].nranks)
			w[i].consistent = 0;
	return n;
}

#define MAX_WINS 64

static int cmd_list(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct ck_win w[MAX_WINS];
	int jobs = 0;

	if (!d) {
		fprintf(stderr, "nvcachectl ckpt: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	printf("%-20s %-16s %5s %12s %10s %7s %6s  %s\n", "JOB", "WINDOW", "RANKS",
	       "BYTES/RANK", "CONSISTENT", "NEWEST", "AGE", "STATE");
	while ((de = readdir(d))) {
		char jobdir[PATH_MAX];
		if (de->d_name[0] == '.')
			continue;
		snprintf(jobdir, sizeof(jobdir), "%s/%s", dir, de->d_name);
		int n = job_scan(jobdir, w, MAX_WINS, false, false);
		if (n <= 0)
			continue;
		jobs++;
		for (int i = 0; i < n; i++) {
			char age[32], state[64];
			fmt_age(w[i].consistent ? w[i].time_ns : 0, age, sizeof(age));
			if (w[i].busy)
				snprintf(state, sizeof(state), "running");
			else if (w[i].bad)
				snprintf(state, sizeof(state), "%u unreadable file(s)", w[i].bad);
			else if (w[i].files != w[i].nranks)
				snprintf(state, sizeof(state), "%u of %u ranks' files", w[i].files,
					 w[i].nranks);
			else if (!w[i].consistent)
				snprintf(state, sizeof(state), "no common version");
			else
				snprintf(state, sizeof(state), "restartable");
			printf("%-20s %-16s %5u %12llu %10llu %7llu %6s  %s\n", de->d_name,
			       w[i].name, w[i].nranks ? w[i].nranks : w[i].files,
			       (unsigned long long)w[i].bytes,
			       (unsigned long long)w[i].consistent,
			       (unsigned long long)w[i].newest, age, state);
		}
	}
	closedir(d);
	if (!jobs)
		printf("no checkpoints in %s\n", dir);
	return 0;
}

static int cmd_show(const char *dir, const char *job)
{
	char jobdir[PATH_MAX];
	struct ck_win w[MAX_WINS];

	snprintf(jobdir, sizeof(jobdir), "%s/%s", dir, job);
	printf("job %s (%s), checksums verified:\n", job, jobdir);
	int n = job_scan(jobdir, w, MAX_WINS, true, true);
	if (n < 0) {
		fprintf(stderr, "nvcachectl ckpt: %s: %s\n", jobdir, strerror(-n));
		return 1;
	}
	for (int i = 0; i < n; i++)
		printf("window %s: %u ranks, %llu bytes of files; %s %llu\n", w[i].name,
		       w[i].nranks, (unsigned long long)w[i].file_bytes,
		       w[i].consistent ? "a restart takes version" : "no version all ranks hold; newest",
		       (unsigned long long)(w[i].consistent ? w[i].consistent : w[i].newest));
	return 0;
}

static int cmd_delete(const char *dir, const char *job)
{
	char jobdir[PATH_MAX], path[PATH_MAX + 256];
	char name[CKPT_NAME_MAX];
	unsigned rank;
	struct dirent *de;
	int fds[4096], nfd = 0, ret = 0;

	snprintf(jobdir, sizeof(jobdir), "%s/%s", dir, job);
	DIR *d = opendir(jobdir);
	if (!d) {
		fprintf(stderr, "nvcachectl ckpt: %s: %s\n", jobdir, strerror(errno));
		return 1;
	}
	/* Lock every file first: a running job keeps its files locked. */
	while ((de = readdir(d)) && nfd < 4096) {
		if (!parse_file(de->d_name, name, &rank))
			continue;
		snprintf(path, sizeof(path), "%s/%s", jobdir, de->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			fprintf(stderr, "nvcachectl ckpt: job %s is running (%s is in use): "
				"not deleted\n", job, path);
			close(fd);
			ret = 1;
			break;
		}
		fds[nfd++] = fd;
	}
	if (!ret) {
		rewinddir(d);
		int gone = 0;
		while ((de = readdir(d))) {
			if (!parse_file(de->d_name, name, &rank))
				continue;
			snprintf(path, sizeof(path), "%s/%s", jobdir, de->d_name);
			if (unlink(path) == 0)
				gone++;
		}
		if (rmdir(jobdir) < 0 && errno != ENOTEMPTY)
			fprintf(stderr, "nvcachectl ckpt: %s: %s\n", jobdir, strerror(errno));
		printf("deleted job %s: %d checkpoint files\n", job, gone);
	}
	for (int i = 0; i < nfd; i++)
		close(fds[i]);
	closedir(d);
	return ret;
}

int ctl_ckpt_run(int argc, char **argv, int i)
{
	log_init("nvcachectl", LOG_LVL_ERR);
	if (i + 1 < argc && !strcmp(argv[i], "list") && i + 2 == argc)
		return cmd_list(argv[i + 1]);
	if (i + 2 < argc && i + 3 == argc && !strcmp(argv[i], "show"))
		return cmd_show(argv[i + 1], argv[i + 2]);
	if (i + 2 < argc && i + 3 == argc && !strcmp(argv[i], "delete")) {
		if (strchr(argv[i + 2], '/') || argv[i + 2][0] == '.') {
			fprintf(stderr, "nvcachectl ckpt delete: JOB is a job's name, not a path\n");
			return 2;
		}
		return cmd_delete(argv[i + 1], argv[i + 2]);
	}
	fprintf(stderr, "usage: nvcachectl ckpt list DIR | show DIR JOB | delete DIR JOB\n"
		"  (DIR: the jobs' NVCACHE_CKPT_DIR)\n");
	return 2;
}
