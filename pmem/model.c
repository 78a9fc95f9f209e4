/* model.c - the paper's time/energy model and its parameter file. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "pmem/model.h"

void model_params_default(struct model_params *mp)
{
	/* Table 2: DRAM, MRAM per 64 B access; FLASH per 4 KiB page. */
	*mp = (struct model_params){
		.dram_read_ns = 22.5, .dram_write_ns = 22.5,
		.mram_read_ns = 15, .mram_write_ns = 15,
		.dram_read_nj = 6.24, .dram_write_nj = 6.24,
		.mram_read_nj = 1.36, .mram_write_nj = 2.60,
		.flash_read_ns = 35000, .flash_write_ns = 64000,
		.flash_read_nj = 7000, .flash_write_nj = 12800,
		.dram_standby_uw_mb = 867, .mram_standby_uw_mb = 469,
		.cpu_ns_per_instruction = 0.5,
		/* Table 1 */
		.l2_bytes = 1 << 20, .line_bytes = 64, .l2_ways = 1,
		.page_bytes = 4096,
	};
}

enum mp_kind { MP_DOUBLE, MP_POW2 };
struct mp_key {
	const char *name;
	size_t off;
	enum mp_kind kind;
	const char *help;
};

#define D(f, h) { #f, offsetof(struct model_params, f), MP_DOUBLE, h }
#define P(f, h) { #f, offsetof(struct model_params, f), MP_POW2, h }
static const struct mp_key mp_keys[] = {
	D(dram_read_ns, "DRAM read delay per line, ns"),
	D(dram_write_ns, "DRAM write delay per line, ns"),
	D(mram_read_ns, "MRAM read delay per line, ns"),
	D(mram_write_ns, "MRAM write delay per line, ns"),
	D(dram_read_nj, "DRAM read energy per line, nJ"),
	D(dram_write_nj, "DRAM write energy per line, nJ"),
	D(mram_read_nj, "MRAM read energy per line, nJ"),
	D(mram_write_nj, "MRAM write energy per line, nJ"),
	D(flash_read_ns, "flash read delay per page, ns"),
	D(flash_write_ns, "flash write delay per page, ns"),
	D(flash_read_nj, "flash read energy per page, nJ"),
	D(flash_write_nj, "flash write energy per page, nJ"),
	D(dram_standby_uw_mb, "DRAM standby power, uW per MiB"),
	D(mram_standby_uw_mb, "MRAM standby power, uW per MiB"),
	D(cpu_ns_per_instruction, "compute time per instruction, ns"),
	P(l2_bytes, "L2 cache size, bytes"),
	P(line_bytes, "L2 line = memory access size, bytes"),
	P(l2_ways, "L2 associativity (1 = direct mapped)"),
	P(page_bytes, "page size, bytes"),
};
#undef D
#undef P
#define MP_NKEYS (sizeof(mp_keys) / sizeof(mp_keys[0]))

int model_params_set(struct model_params *mp, const char *key,
		     const char *value)
{
	for (size_t k = 0; k < MP_NKEYS; k++) {
		if (strcmp(key, mp_keys[k].name) != 0)
			continue;
		char *end;
		errno = 0;
		double v = strtod(value, &end);
		while (*end == ' ' || *end == '\t')
			end++;
		if (end == value || *end || errno || !isfinite(v) || v < 0)
			return -EINVAL;
		char *at = (char *)mp + mp_keys[k].off;
		if (mp_keys[k].kind == MP_DOUBLE) {
			*(double *)at = v;
			return 0;
		}
		if (v < 1 || v > (double)(1ull << 40) || v != floor(v))
			return -EINVAL;
		uint64_t u = (uint64_t)v;
		if (u & (u - 1))
			return -EINVAL;
		*(uint64_t *)at = u;
		return 0;
	}
	return -ENOENT;
}

static int mp_check(const struct model_params *mp)
{
	if (mp->line_bytes > mp->page_bytes || mp->line_bytes * mp->l2_ways >
						       mp->l2_bytes)
		return -EINVAL;
	return 0;
}

static char *mp_trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	char *e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' ||
			 e[-1] == '\r'))
		*--e = 0;
	return s;
}

int model_params_load(struct model_params *mp, const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		int e = errno;
		log_err("parameter file %s: %s", path, strerror(e));
		return -e;
	}
	char line[512];
	unsigned no = 0;
	int rc = 0;
	while (fgets(line, sizeof(line), f)) {
		no++;
		/* A line longer than the buffer would go on as a line of its
		 * own: refused instead of read in pieces. */
		if (!strchr(line, '\n') && !feof(f)) {
			log_err("%s:%u: line too long (at most %zu bytes)",
				path, no, sizeof(line) - 2);
			rc = -EINVAL;
			break;
		}
		char *hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		char *s = mp_trim(line);
		if (!*s)
			continue;
		char *eq = strchr(s, '=');
		if (!eq) {
			log_err("%s:%u: expected 'key = value'", path, no);
			rc = -EINVAL;
			break;
		}
		*eq = 0;
		char *key = mp_trim(s), *val = mp_trim(eq + 1);
		int r = model_params_set(mp, key, val);
		if (r == -ENOENT) {
			log_err("%s:%u: unknown parameter '%s'", path, no, key);
			rc = r;
			break;
		}
		if (r < 0) {
			log_err("%s:%u: bad value '%s' for %s", path, no, val, key);
			rc = r;
			break;
		}
	}
	/* fopen opens a directory, and fgets then fails at once: that is
	 * no empty file of defaults. */
	if (rc == 0 && ferror(f)) {
		rc = errno ? -errno : -EIO;
		log_err("parameter file %s: %s", path, strerror(-rc));
	}
	fclose(f);
	if (rc == 0 && mp_check(mp) < 0) {
		log_err("%s: line size must not exceed the page or the cache",
			path);
		rc = -EINVAL;
	}
	return rc;
}

int model_params_format(const struct model_params *mp, char *buf, size_t len)
{
	size_t n = 0;
	for (size_t k = 0; k < MP_NKEYS; k++) {
		const char *at = (const char *)mp + mp_keys[k].off;
		char tmp[160];
		int w;
		if (mp_keys[k].kind == MP_DOUBLE)
			w = snprintf(tmp, sizeof(tmp), "%s = %g\t# %s\n",
				     mp_keys[k].name, *(const double *)at,
				     mp_keys[k].help);
		else
			w = snprintf(tmp, sizeof(tmp), "%s = %llu\t# %s\n",
				     mp_keys[k].name,
				     (unsigned long long)*(const uint64_t *)at,
				     mp_keys[k].help);
		if (w > 0 && n + (size_t)w < len)
			memcpy(buf + n, tmp, (size_t)w + 1);
		n += (size_t)(w > 0 ? w : 0);
	}
	return (int)n;
}

void model_count_move(struct model_counts *c, const struct tier_move *m)
{
	switch (m->kind) {
	case MOVE_LOAD:
		c->flash_reads++;
		if (m->to <= TIER_DRAM)
			c->loads_in[m->to]++;
		break;
	case MOVE_WRITE:
		c->flash_writes++;
		if (m->from <= TIER_DRAM)
			c->writes_from[m->from]++;
		break;
	case MOVE_MIGRATE:
		if (m->to <= TIER_DRAM)
			c->migrate_in[m->to]++;
		break;
	default:  /* PLACE: first touch; DROP: clean page, no I/O */
		break;
	}
}

void model_estimate(const struct model_params *mp,
		    const struct model_counts *c, uint64_t mram_bytes,
		    uint64_t dram_bytes, struct model_result *out)
{
	const double rd_ns[2] = { mp->mram_read_ns, mp->dram_read_ns };
	const double wr_ns[2] = { mp->mram_write_ns, mp->dram_write_ns };
	const double rd_nj[2] = { mp->mram_read_nj, mp->dram_read_nj };
	const double wr_nj[2] = { mp->mram_write_nj, mp->dram_write_nj };
	double lpp = (double)(mp->page_bytes / mp->line_bytes);
	double mem_ns = 0, mig_ns = 0, dyn_nj = 0;

	for (int t = 0; t < 2; t++) {
		int o = 1 - t;
		mem_ns += (double)c->line_reads[t] * rd_ns[t] +
			  (double)c->line_writes[t] * wr_ns[t];
		dyn_nj += (double)c->line_reads[t] * rd_nj[t] +
			  (double)c->line_writes[t] * wr_nj[t];
		/* A migration into t reads the page from the other tier. */
		mig_ns += (double)c->migrate_in[t] * lpp * (rd_ns[o] + wr_ns[t]);
		dyn_nj += (double)c->migrate_in[t] * lpp * (rd_nj[o] + wr_nj[t]);
		/* Swap copies: energy only, their time hides behind flash. */
		dyn_nj += (double)c->loads_in[t] * lpp * wr_nj[t];
		dyn_nj += (double)c->writes_from[t] * lpp * rd_nj[t];
	}
	double flash_ns = (double)c->flash_reads * mp->flash_read_ns +
			  (double)c->flash_writes * mp->flash_write_ns;
	dyn_nj += (double)c->flash_reads * mp->flash_read_nj +
		  (double)c->flash_writes * mp->flash_write_nj;
	double cpu_ns = (double)c->instructions * mp->cpu_ns_per_instruction;

	out->cpu_s = cpu_ns * 1e-9;
	out->mem_s = mem_ns * 1e-9;
	out->flash_s = flash_ns * 1e-9;
	out->migrate_s = mig_ns * 1e-9;
	out->time_s = out->cpu_s + out->mem_s + out->flash_s + out->migrate_s;
	double mib_m = (double)mram_bytes / 1048576.0;
	double mib_d = (double)dram_bytes / 1048576.0;
	/* Flash standby is negligible (the paper's assumption). */
	double standby_w = (mib_m * mp->mram_standby_uw_mb +
			    mib_d * mp->dram_standby_uw_mb) * 1e-6;
	out->dynamic_j = dyn_nj * 1e-9;
	out->standby_j = standby_w * out->time_s;
	out->energy_j = out->dynamic_j + out->standby_j;
}

int model_stats_format(const struct model_params *mp,
		       const struct model_counts *c, uint64_t mram_bytes,
		       uint64_t dram_bytes, char *out, size_t len)
{
	struct model_result r;
	model_estimate(mp, c, mram_bytes, dram_bytes, &r);
	int n = snprintf(out, len,
		"model_time_s: %.6f\n"
		"model_memory_s: %.6f\n"
		"model_flash_s: %.6f\n"
		"model_migrate_s: %.6f\n"
		"model_energy_j: %.6f\n"
		"model_dynamic_j: %.6f\n"
		"model_standby_j: %.6f\n",
		r.time_s, r.mem_s, r.flash_s, r.migrate_s, r.energy_j,
		r.dynamic_j, r.standby_j);
	if (n < 0)
		return 0;
	return (size_t)n < len ? n : (len ? (int)len - 1 : 0);
}
