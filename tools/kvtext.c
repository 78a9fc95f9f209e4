/* kvtext.c - see kvtext.h. */
#include "tools/kvtext.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void kvtext_each(const char *text,
		 void (*fn)(void *arg, const char *key, size_t klen,
			    const char *val, size_t vlen),
		 void *arg)
{
	for (const char *l = text; l && *l; ) {
		const char *e = strchr(l, '\n');
		size_t ll = e ? (size_t)(e - l) : strlen(l);
		const char *sep = memchr(l, ':', ll);
		if (sep && (size_t)(sep - l) + 1 < ll && sep[1] == ' ')
			fn(arg, l, (size_t)(sep - l), sep + 2, ll - (size_t)(sep - l) - 2);
		l = e ? e + 1 : l + ll;
	}
}

struct find {
	const char *key;
	size_t klen;
	const char *val;
	size_t vlen;
};

static void find_one(void *arg, const char *key, size_t klen, const char *val,
		     size_t vlen)
{
	struct find *f = arg;

	if (!f->val && klen == f->klen && !memcmp(key, f->key, klen)) {
		f->val = val;
		f->vlen = vlen;
	}
}

const char *kvtext_get(const char *text, const char *key, char *buf, size_t len)
{
	struct find f = { key, strlen(key), NULL, 0 };

	if (!len)
		return NULL;
	kvtext_each(text, find_one, &f);
	if (!f.val)
		return NULL;
	size_t n = f.vlen < len - 1 ? f.vlen : len - 1;
	memcpy(buf, f.val, n);
	buf[n] = 0;
	return buf;
}

bool kvtext_u64(const char *text, const char *key, uint64_t *v)
{
	char buf[32], *end;
	const char *s = kvtext_get(text, key, buf, sizeof(buf));

	if (!s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return !errno && !*end;
}

bool kvtext_num(const char *text, const char *key, double *v)
{
	char buf[48], *end;
	const char *s = kvtext_get(text, key, buf, sizeof(buf));

	if (!s || !*s)
		return false;
	errno = 0;
	*v = strtod(s, &end);
	return !errno && !*end && end != s;
}
