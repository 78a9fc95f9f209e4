/* kvtext.h - reading the daemons' stats text: "key: value" lines, as every
 * control socket (common/ctl.h) and NODE_STATS reply writes them. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The value of key in text (the rest of its line after "key: "), copied
 * into buf (cut to len - 1); NULL when text has no such line. */
const char *kvtext_get(const char *text, const char *key, char *buf, size_t len);
/* key's value as a whole unsigned decimal; false when absent or not one. */
bool kvtext_u64(const char *text, const char *key, uint64_t *v);
/* key's value as a number (decimal, fraction allowed); false otherwise. */
bool kvtext_num(const char *text, const char *key, double *v);

/* Calls fn for every line "key: value" of text, in order. */
void kvtext_each(const char *text,
		 void (*fn)(void *arg, const char *key, size_t klen,
			    const char *val, size_t vlen),
		 void *arg);
