/* log.h - one logging call for every process: timestamped lines on stderr
 * (or syslog when a daemon has detached), with a per-process tag.
 * Thread-safe: each line is written with a single write(2). */
#pragma once
#include <stdarg.h>
#include <stdbool.h>

enum log_level { LOG_LVL_ERR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

/* Set the tag ("nvcachefs", "nvswapd", ...) and the most verbose level shown.
 * Call once at start, before threads. NVCACHE_LOG=debug overrides the level. */
void log_init(const char *tag, enum log_level level);
/* After daemonising: send lines to syslog instead of stderr. */
void log_use_syslog(bool on);

void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_err(...)   log_msg(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)
