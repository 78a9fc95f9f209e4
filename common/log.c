/* log.c - timestamped, tagged log lines; see log.h. */
#include "common/log.h"

#include <inttypes.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

static const char *log_tag = "nvcache";
static enum log_level log_max = LOG_LVL_INFO;
static bool log_syslog;

void log_init(const char *tag, enum log_level level)
{
	const char *env = getenv("NVCACHE_LOG");

	log_tag = tag;
	log_max = level;
	if (env) {
		if (!strcasecmp(env, "debug"))
			log_max = LOG_LVL_DEBUG;
		else if (!strcasecmp(env, "info"))
			log_max = LOG_LVL_INFO;
		else if (!strcasecmp(env, "warn"))
			log_max = LOG_LVL_WARN;
		else if (!strcasecmp(env, "err"))
			log_max = LOG_LVL_ERR;
	}
}

void log_use_syslog(bool on)
{
	if (on && !log_syslog)
		openlog(log_tag, LOG_PID, LOG_DAEMON);
	log_syslog = on;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	static const char *names[] = { "error", "warning", "info", "debug" };
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	char line[1024];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n;

	if (level > log_max)
		return;
	va_start(ap, fmt);
	if (log_syslog) {
		vsyslog(prio[level], fmt, ap);
		va_end(ap);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03ld %s[%d] %s: ",
		     tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
		     log_tag, (int)getpid(), names[level]);
	if (n < 0)
		n = 0;
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* nowhere left to report it */
	}
}

bool log_limit_at(struct log_limit *l, unsigned interval_s, uint64_t now_ns,
		  char *note, size_t len)
{
	uint64_t next = atomic_load(&l->next_ns);
	/* Whoever moves next_ns on logs; a racing caller counts as held. */
	if (now_ns < next ||
	    !atomic_compare_exchange_strong(&l->next_ns, &next,
					    now_ns + interval_s * 1000000000ull)) {
		atomic_fetch_add(&l->held, 1);
		return false;
	}
	uint64_t held = atomic_exchange(&l->held, 0);
	if (len) {
		if (held)
			snprintf(note, len, " (and %" PRIu64 " more like it since "
				 "the last such line)", held);
		else
			note[0] = 0;
	}
	return true;
}

bool log_limit(struct log_limit *l, unsigned interval_s, char *note,
	       size_t len)
{
	return log_limit_at(l, interval_s, clock_now_ns(), note, len);
}
