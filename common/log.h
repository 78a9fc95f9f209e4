/* log.h - one logging call for every process: timestamped lines on stderr
 * (or syslog when a daemon has detached), with a per-process tag. A line
 * starts "HH:MM:SS.mmm" on a terminal and "YYYY-MM-DD HH:MM:SS.mmm"
 * elsewhere (log_to_file's file, or stderr that is not a terminal: a
 * file, a pipe, the journal). errno is as the caller left it.
 * Thread-safe: each line is written with a single write(2). */
#pragma once
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum log_level { LOG_LVL_ERR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

/* Set the tag ("nvcachefs", "nvswapd", ...) and the most verbose level shown.
 * Call once at start, before threads. NVCACHE_LOG=debug overrides the level. */
void log_init(const char *tag, enum log_level level);
/* After daemonising: send lines to syslog instead of stderr. */
void log_use_syslog(bool on);
/* Is a syslog daemon listening on /dev/log? Without one, syslog(3)
 * drops every line: a daemon then logs to a file instead. */
bool log_syslog_listening(void);
/* Send lines to the file at path (appended, created 0640; each line
 * dated) instead of stderr or syslog. 0 or -errno (nothing changed). */
int log_to_file(const char *path);
/* While on, error lines also go to stderr (as "HH:MM:SS... error: ..."),
 * wherever the others go: a daemon that logs to a file or syslog still
 * tells the person who started it why it could not start. */
void log_copy_errors_to_stderr(bool on);

void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_err(...)   log_msg(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

/* A rate limit for one message that can repeat fast (a read of every lost
 * page, a peer retrying a wrong secret): at most one line per interval,
 * and that line says how many were held back since the last. Zero it to
 * start (static or memset). Thread-safe. */
struct log_limit {
	_Atomic uint64_t next_ns;  /* monotonic time the next line may go */
	_Atomic uint64_t held;     /* lines held back since the last one */
};

/* true: log the line now; note (len bytes) then holds "" or " (and N more
 * like it since the last such line)" to append to it. false: held back,
 * counted. note may be NULL when len is 0. */
bool log_limit(struct log_limit *l, unsigned interval_s, char *note,
	       size_t len);
/* log_limit at a given monotonic time (what it uses; for tests). */
bool log_limit_at(struct log_limit *l, unsigned interval_s, uint64_t now_ns,
		  char *note, size_t len);
