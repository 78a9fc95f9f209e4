/* ctl.c - control sockets; see ctl.h. */
#include "common/ctl.h"

#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

struct ctl_server {
	int fd;
	int stop_pipe[2];
	pthread_t thread;
	ctl_handler handler;
	void *arg;
	char kind[16];
	char name[128];
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char reply[CTL_MAX_REPLY];
};

const char *ctl_run_dir(void)
{
	const char *d = getenv("NVCACHE_RUN_DIR");
	return d && *d ? d : "/run/nvcache";
}

void ctl_name_from_path(const char *path, char *out, size_t outlen)
{
	size_t n = 0;

	if (!outlen)
		return;
	for (const char *p = path; *p && n + 1 < outlen; p++) {
		char c = *p == '/' ? '-' : *p;
		if (c == '-' && (n == 0 || out[n - 1] == '-'))
			continue;
		out[n++] = c;
	}
	while (n && out[n - 1] == '-')
		n--;
	if (!n)
		snprintf(out, outlen, "root");
	else
		out[n] = 0;
}

int ctl_socket_path(const char *kind, const char *name, char *out,
		    size_t outlen)
{
	int n = snprintf(out, outlen, "%s/%s-%s.sock", ctl_run_dir(), kind, name);
	size_t max = sizeof(((struct sockaddr_un *)0)->sun_path);

	if (n < 0 || (size_t)n >= outlen || (size_t)n >= max)
		return -ENAMETOOLONG;
	return 0;
}

static int ctl_addr(const char *path, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	strcpy(sa->sun_path, path);
	return 0;
}

/* Clients being read at once: one that connects and sends nothing must
 * not hold up the others (each may take up to CTL_CLIENT_MS). */
#define CTL_CLIENTS 16
#define CTL_CLIENT_MS 2000

struct ctl_client {
	int fd;                  /* -1: free slot */
	size_t have;
	int64_t deadline;        /* ms, CLOCK_MONOTONIC */
	char cmd[CTL_MAX_CMD + 1];
};

static int64_t ctl_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The process's age in seconds: /proc/uptime minus its start time in
 * /proc/self/stat (field 22, clock ticks after boot). -1 if unreadable. */
static double ctl_process_age(void)
{
	char buf[1024];
	double up = -1;
	FILE *f = fopen("/proc/uptime", "r");

	if (!f)
		return -1;
	if (fscanf(f, "%lf", &up) != 1)
		up = -1;
	fclose(f);
	f = fopen("/proc/self/stat", "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	/* comm (field 2) may hold spaces and parentheses: count fields
	 * from the last ')'. */
	char *p = strrchr(buf, ')');
	unsigned long long start = 0;
	if (!p || up < 0 ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u "
		   "%*d %*d %*d %*d %*d %*d %llu", &start) != 1)
		return -1;
	double age = up - (double)start / (double)sysconf(_SC_CLK_TCK);
	return age < 0 ? 0 : age;
}

/* "info": who answers, answered by this layer for every daemon (the
 * handlers know nothing of it): kind, name, pid, age. */
static ssize_t ctl_info(struct ctl_server *s)
{
	return snprintf(s->reply, sizeof(s->reply),
			"kind: %s\nname: %s\npid: %ld\nuptime_s: %.0f\n",
			s->kind, s->name, (long)getpid(), ctl_process_age());
}

/* Answer one whole command line and close. The reply is sent blocking,
 * bounded by a send timeout: a client that does not read is dropped. */
static void ctl_answer(struct ctl_server *s, struct ctl_client *c)
{
	ssize_t n;
	char *cmd = c->cmd;

	cmd[c->have] = 0;
	cmd[strcspn(cmd, "\r\n")] = 0;
	if (!strcmp(cmd, "ping"))
		n = snprintf(s->reply, sizeof(s->reply), "pong\n");
	else if (!strcmp(cmd, "info"))
		n = ctl_info(s);
	else
		n = s->handler(s->arg, cmd, s->reply, sizeof(s->reply));
	if (n < 0)
		n = snprintf(s->reply, sizeof(s->reply), "error: %s: %s\n", cmd,
			     n == -ENOENT ? "unknown command" : strerror((int)-n));
	if ((size_t)n > sizeof(s->reply))
		n = sizeof(s->reply);
	int fl = fcntl(c->fd, F_GETFL);
	struct timeval tv = { .tv_sec = CTL_CLIENT_MS / 1000 };
	if (fl >= 0)
		fcntl(c->fd, F_SETFL, fl & ~O_NONBLOCK);
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	for (ssize_t off = 0; off < n;) {
		ssize_t w = send(c->fd, s->reply + off, (size_t)(n - off),
				 MSG_NOSIGNAL);
		if (w <= 0)
			break;
		off += w;
	}
}

static void ctl_drop(struct ctl_client *c)
{
	close(c->fd);
	c->fd = -1;
}

/* Read what a client sent; answer once a line is whole (or the command
 * buffer full: a longer line is cut off there), drop it at EOF. */
static void ctl_read(struct ctl_server *s, struct ctl_client *c)
{
	ssize_t n = read(c->fd, c->cmd + c->have, CTL_MAX_CMD - c->have);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0) {
		c->have += (size_t)n;
		c->deadline = ctl_now_ms() + CTL_CLIENT_MS;   /* 2 s of silence */
	}
	if (n > 0 && !memchr(c->cmd, '\n', c->have) && c->have < CTL_MAX_CMD)
		return;
	if (n > 0 || c->have)
		ctl_answer(s, c);
	ctl_drop(c);
}

static void *ctl_thread(void *arg)
{
	struct ctl_server *s = arg;
	struct ctl_client cl[CTL_CLIENTS];

	for (int i = 0; i < CTL_CLIENTS; i++)
		cl[i].fd = -1;
	for (;;) {
		struct pollfd p[2 + CTL_CLIENTS];
		int who[CTL_CLIENTS], np = 2, nc = 0;
		int64_t now = ctl_now_ms(), wait = -1;
		for (int i = 0; i < CTL_CLIENTS; i++) {
			if (cl[i].fd < 0)
				continue;
			/* Silent too long, unless its line came while this
			 * thread was busy answering another: read it first. */
			if (cl[i].deadline <= now) {
				struct pollfd q = { .fd = cl[i].fd, .events = POLLIN };
				if (poll(&q, 1, 0) > 0)
					ctl_read(s, &cl[i]);
				if (cl[i].fd >= 0)
					ctl_drop(&cl[i]);
				continue;
			}
			int64_t left = cl[i].deadline - now;
			if (wait < 0 || left < wait)
				wait = left;
			p[np] = (struct pollfd){ .fd = cl[i].fd, .events = POLLIN };
			who[np - 2] = i;
			np++;
			nc++;
		}
		/* Full: new clients wait in the listen backlog. */
		p[0] = (struct pollfd){ .fd = nc < CTL_CLIENTS ? s->fd : -1,
					.events = POLLIN };
		p[1] = (struct pollfd){ .fd = s->stop_pipe[0], .events = POLLIN };
		if (poll(p, (nfds_t)np, (int)wait) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		for (int k = 2; k < np; k++)
			if (p[k].revents)
				ctl_read(s, &cl[who[k - 2]]);
		if (p[0].revents) {
			int c = accept4(s->fd, NULL, NULL,
					SOCK_CLOEXEC | SOCK_NONBLOCK);
			if (c < 0 && (errno == EMFILE || errno == ENFILE)) {
				/* the listener stays readable: not a spin */
				poll(NULL, 0, 100);
				continue;
			}
			for (int i = 0; c >= 0 && i < CTL_CLIENTS; i++)
				if (cl[i].fd < 0) {
					cl[i].fd = c;
					cl[i].have = 0;
					cl[i].deadline = ctl_now_ms() + CTL_CLIENT_MS;
					c = -1;
				}
			if (c >= 0)
				close(c);
		}
	}
	for (int i = 0; i < CTL_CLIENTS; i++)
		if (cl[i].fd >= 0)
			ctl_drop(&cl[i]);
	return NULL;
}

int ctl_server_start(struct ctl_server **out, const char *kind,
		     const char *name, ctl_handler handler, void *arg)
{
	struct sockaddr_un sa;
	struct ctl_server *s;
	char probe[16];
	int ret;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->fd = -1;
	s->stop_pipe[0] = s->stop_pipe[1] = -1;
	s->handler = handler;
	s->arg = arg;
	snprintf(s->kind, sizeof(s->kind), "%s", kind);
	snprintf(s->name, sizeof(s->name), "%s", name);
	if ((ret = ctl_socket_path(kind, name, s->path, sizeof(s->path))))
		goto fail;
	if (mkdir(ctl_run_dir(), 0700) < 0 && errno != EEXIST) {
		ret = -errno;
		goto fail;
	}
	/* A live daemon answers; a stale socket from a crash refuses the
	 * connection. A slow answer (a live daemon, busy) is no proof of
	 * death: only a refused connection or no socket is. */
	ret = ctl_request(s->path, "ping", probe, sizeof(probe), 500);
	if (ret >= 0 || (ret != -ECONNREFUSED && ret != -ENOENT)) {
		ret = -EADDRINUSE;
		goto fail;
	}
	unlink(s->path);
	if ((ret = ctl_addr(s->path, &sa)))
		goto fail;
	s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->fd < 0 || pipe2(s->stop_pipe, O_CLOEXEC) < 0) {
		ret = -errno;
		goto fail;
	}
	mode_t old = umask(0077);
	ret = bind(s->fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (ret < 0 || listen(s->fd, 16) < 0) {
		ret = -errno;
		goto fail;
	}
	if ((ret = -pthread_create(&s->thread, NULL, ctl_thread, s))) {
		unlink(s->path);
		goto fail;
	}
	*out = s;
	return 0;
fail:
	log_err("control socket %s: %s", s->path, strerror(-ret));
	if (s->fd >= 0)
		close(s->fd);
	if (s->stop_pipe[0] >= 0) {
		close(s->stop_pipe[0]);
		close(s->stop_pipe[1]);
	}
	free(s);
	return ret;
}

void ctl_server_stop(struct ctl_server *s)
{
	if (!s)
		return;
	if (write(s->stop_pipe[1], "x", 1) < 0) {
		/* the thread then blocks until exit; nothing better to do */
	}
	pthread_join(s->thread, NULL);
	unlink(s->path);
	close(s->fd);
	close(s->stop_pipe[0]);
	close(s->stop_pipe[1]);
	free(s);
}

ssize_t ctl_request(const char *path, const char *cmd, char *out,
		    size_t outlen, int timeout_ms)
{
	struct sockaddr_un sa;
	size_t have = 0;
	int fd, ret;

	if (!outlen)
		return -EINVAL;
	if ((ret = ctl_addr(path, &sa)))
		return ret;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	char line[CTL_MAX_CMD + 2];
	int n = snprintf(line, sizeof(line), "%s\n", cmd);
	if (n < 0 || (size_t)n >= sizeof(line) ||
	    send(fd, line, (size_t)n, MSG_NOSIGNAL) != n) {
		close(fd);
		return n >= (int)sizeof(line) ? -E2BIG : -EIO;
	}
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ret = poll(&p, 1, timeout_ms);
		if (ret <= 0) {
			close(fd);
			return ret == 0 ? -ETIMEDOUT : -errno;
		}
		ssize_t r = read(fd, out + have, outlen - 1 - have);
		if (r < 0) {
			ret = -errno;
			close(fd);
			return ret;
		}
		if (r == 0 || (have += (size_t)r) == outlen - 1)
			break;
	}
	close(fd);
	out[have] = 0;
	return (ssize_t)have;
}
