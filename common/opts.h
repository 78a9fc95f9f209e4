/* opts.h - parsing of option values shared by every tool. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

/* "4096", "64K", "256M", "2G", "1T" (powers of 1024; an optional trailing
 * "B" or "iB" is accepted). Returns 0 or -EINVAL (bad text) / -ERANGE. */
int opts_parse_size(const char *text, uint64_t *out);
/* "yes/no/true/false/on/off/1/0". Returns 0 or -EINVAL. */
int opts_parse_bool(const char *text, bool *out);
/* Format a byte count for humans ("1.5 GiB") into buf; returns buf. */
const char *opts_format_size(uint64_t bytes, char *buf, unsigned len);
