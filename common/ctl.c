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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

struct ctl_server {
	int fd;
	int stop_pipe[2];
	pthread_t thread;
	ctl_handler handler;
	void *arg;
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

static void ctl_serve_one(struct ctl_server *s, int c)
{
	char cmd[CTL_MAX_CMD + 1];
	size_t have = 0;
	ssize_t n;

	/* One line, bounded: a client that sends more is cut off. */
	while (have < CTL_MAX_CMD) {
		struct pollfd p = { .fd = c, .events = POLLIN };
		if (poll(&p, 1, 2000) <= 0)
			return;
		n = read(c, cmd + have, CTL_MAX_CMD - have);
		if (n <= 0)
			break;
		have += (size_t)n;
		if (memchr(cmd, '\n', have))
			break;
	}
	cmd[have] = 0;
	cmd[strcspn(cmd, "\r\n")] = 0;
	if (!strcmp(cmd, "ping"))
		n = snprintf(s->reply, sizeof(s->reply), "pong\n");
	else
		n = s->handler(s->arg, cmd, s->reply, sizeof(s->reply));
	if (n < 0)
		n = snprintf(s->reply, sizeof(s->reply), "error: %s: %s\n", cmd,
			     n == -ENOENT ? "unknown command" : strerror((int)-n));
	if ((size_t)n > sizeof(s->reply))
		n = sizeof(s->reply);
	for (ssize_t off = 0; off < n;) {
		ssize_t w = send(c, s->reply + off, (size_t)(n - off), MSG_NOSIGNAL);
		if (w <= 0)
			break;
		off += w;
	}
}

static void *ctl_thread(void *arg)
{
	struct ctl_server *s = arg;

	for (;;) {
		struct pollfd p[2] = {
			{ .fd = s->fd, .events = POLLIN },
			{ .fd = s->stop_pipe[0], .events = POLLIN },
		};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		int c = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		ctl_serve_one(s, c);
		close(c);
	}
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
	if ((ret = ctl_socket_path(kind, name, s->path, sizeof(s->path))))
		goto fail;
	if (mkdir(ctl_run_dir(), 0700) < 0 && errno != EEXIST) {
		ret = -errno;
		goto fail;
	}
	/* A live daemon answers; a stale socket from a crash does not. */
	if (ctl_request(s->path, "ping", probe, sizeof(probe), 500) >= 0) {
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
