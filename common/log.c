/* log.c - timestamped, tagged log lines; see log.h. */
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

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
static int log_fd = STDERR_FILENO;     /* where lines go, unless syslog */
static bool log_errors_stderr;         /* errors also to stderr */

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

bool log_syslog_listening(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX, .sun_path = "/dev/log" };
	struct stat st;

	if (stat(sa.sun_path, &st) || !S_ISSOCK(st.st_mode))
		return false;
	/* a socket file with nobody behind it swallows every line */
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	bool ok = !connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	return ok;
}

int log_to_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);

	if (fd < 0)
		return -errno;
	if (log_fd != STDERR_FILENO)
		close(log_fd);
	log_fd = fd;
	log_syslog = false;
	return 0;
}

void log_copy_errors_to_stderr(bool on)
{
	log_errors_stderr = on;
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
	/* callers log, then return -errno; a format may say %m */
	int saved_errno = errno;
	va_start(ap, fmt);
	if (log_syslog) {
		va_list cp;
		va_copy(cp, ap);
		vsyslog(prio[level], fmt, cp);
		va_end(cp);
		if (!(log_errors_stderr && level == LOG_LVL_ERR)) {
			va_end(ap);
			errno = saved_errno;
			return;
		}
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	/* a log file outlives the day: its lines carry the date; so does
	 * stderr sent to a file (a daemon run with -f >>FILE, as the
	 * quick start does), but not a terminal's */
	static atomic_int stderr_tty = -1;   /* (every thread finds the same) */
	int tty = atomic_load_explicit(&stderr_tty, memory_order_relaxed);
	if (tty < 0) {
		tty = isatty(STDERR_FILENO);
		atomic_store_explicit(&stderr_tty, tty, memory_order_relaxed);
		errno = saved_errno;
	}
	int d = 0;
	if (log_fd != STDERR_FILENO || !tty)
		d = snprintf(line, sizeof(line), "%04d-%02d-%02d ", tm.tm_year + 1900,
			     tm.tm_mon + 1, tm.tm_mday);
	n = snprintf(line + d, sizeof(line) - (size_t)d, "%02d:%02d:%02d.%03ld %s[%d] %s: ",
		     tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
		     log_tag, (int)getpid(), names[level]);
	n += d;
	if (n < 0)
		n = 0;
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (!log_syslog && write(log_fd, line, (size_t)n) < 0) {
		/* nowhere left to report it */
	}
	if (log_errors_stderr && level == LOG_LVL_ERR &&
	    (log_syslog || log_fd != STDERR_FILENO) &&
	    write(STDERR_FILENO, line + d, (size_t)(n - d)) < 0) {
		/* nor there */
	}
	errno = saved_errno;
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
