/* opts.c - see opts.h. */
#include "common/opts.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int opts_parse_size(const char *text, uint64_t *out)
{
	unsigned shift = 0;
	unsigned long long v;
	char *end;

	if (!text || !isdigit((unsigned char)*text))
		return -EINVAL;
	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno)
		return -ERANGE;
	switch (toupper((unsigned char)*end)) {
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	case 'T': shift = 40; end++; break;
	default: break;
	}
	if (shift && (*end == 'i' || *end == 'I'))
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

int opts_parse_bool(const char *text, bool *out)
{
	static const char *yes[] = { "1", "yes", "true", "on" };
	static const char *no[] = { "0", "no", "false", "off" };

	for (unsigned i = 0; i < 4; i++) {
		if (!strcasecmp(text, yes[i])) { *out = true; return 0; }
		if (!strcasecmp(text, no[i])) { *out = false; return 0; }
	}
	return -EINVAL;
}

const char *opts_format_size(uint64_t bytes, char *buf, unsigned len)
{
	static const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	unsigned u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.1f %s", v, unit[u]);
	return buf;
}
