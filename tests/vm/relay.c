/* relay.c - the guest half of the guest's only link to the host: listens on
 * a Unix socket for nbd-client and copies bytes both ways between that
 * connection and a virtio-serial port whose host side is the NBD server
 * (nvswapd's Unix socket, which qemu's chardev connected to).
 *
 *   nvt-relay SOCKET PORT        e.g. nvt-relay /run/nbd.sock /dev/vport0p1
 *
 * The kernel's nbd driver sends swap-out traffic through this process, so
 * it must run when the guest has no free memory left:
 * - mlockall: none of its pages can be swapped out (to itself);
 * - PR_SET_IO_FLUSHER: its allocations (the kernel's, in the virtio port's
 *   write path) never recurse into reclaim that waits for swap I/O;
 * - SCHED_FIFO: a real-time task may dip into the page reserve that
 *   vm.min_free_kbytes keeps (the guest's /init raises it);
 * - its two copy buffers are static (locked with the rest); the data path
 *   only polls, reads and writes.
 * Any of the first three failing ends it before it serves: a relay that
 * can be starved of memory deadlocks the swap for good.
 *
 * One client at a time. A session ends when either side closes or fails
 * (the host side closes when the server drops the connection or dies):
 * both are closed, so the nbd driver sees its socket die at once (its
 * requests fail with EIO) rather than waiting on a silent link. Then the
 * relay accepts the next client. Session events go to stderr (the serial
 * console), prefixed "relay:". */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57
#endif

#define BUF (64 * 1024)

/* One direction of the copy: bytes [off, len) of buf wait to be written. */
struct relay_dir {
	int from, to;
	size_t off, len;
	unsigned long long bytes;
	char buf[BUF];
};

static struct relay_dir up, down;   /* client -> port, port -> client */

static int relay_swap_safe(void)
{
	struct sched_param sp = { .sched_priority = 50 };
	int fd;

	if (prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0) < 0) {
		perror("relay: PR_SET_IO_FLUSHER");
		return -1;
	}
	if (mlockall(MCL_CURRENT | MCL_FUTURE) < 0) {
		perror("relay: mlockall");
		return -1;
	}
	if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0) {
		perror("relay: SCHED_FIFO");
		return -1;
	}
	fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "-1000", 5) != 5)
		perror("relay: oom_score_adj (going on)");
	if (fd >= 0)
		close(fd);
	return 0;
}

static int relay_listen(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "relay: socket path too long: %s\n", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(fd, 4) < 0) {
		fprintf(stderr, "relay: listen on %s: %s\n", path, strerror(errno));
		return -1;
	}
	return fd;
}

/* Open the port once its host side is connected (poll says POLLHUP while
 * it is not: the server is restarting, or qemu has not reconnected yet).
 * Gives up after about 30 s. */
static int relay_port_open(const char *port)
{
	for (int i = 0; i < 300; i++) {
		int fd = open(port, O_RDWR | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0) {
			fprintf(stderr, "relay: open %s: %s\n", port, strerror(errno));
			return -1;
		}
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		if (poll(&p, 1, 0) >= 0 && !(p.revents & POLLHUP))
			return fd;
		close(fd);
		nanosleep(&(struct timespec){ .tv_nsec = 100000000 }, NULL);
	}
	fprintf(stderr, "relay: %s: the host side stayed disconnected\n", port);
	return -1;
}

/* Move what can move without blocking. 0, or -1 when the session is over
 * (end of file or an error on either side; *why says which). */
static int relay_dir_step(struct relay_dir *d, short rev_from, const char **why)
{
	ssize_t n;

	if (d->len == 0 && (rev_from & (POLLIN | POLLHUP | POLLERR))) {
		n = read(d->from, d->buf, BUF);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			*why = n == 0 ? "end of stream" : strerror(errno);
			return -1;
		}
		if (n > 0) {
			d->off = 0;
			d->len = (size_t)n;
		}
	} else if (d->len && (rev_from & (POLLHUP | POLLERR))) {
		/* Its source hung up while the far side is not taking what
		 * came before: the stream is broken either way, and waiting
		 * would spin (poll reports the hang-up at once), which a
		 * real-time task on one CPU must never do. */
		*why = "hang-up with bytes undelivered";
		return -1;
	}
	if (d->len > d->off) {
		n = write(d->to, d->buf + d->off, d->len - d->off);
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			*why = strerror(errno);
			return -1;
		}
		if (n > 0) {
			d->off += (size_t)n;
			d->bytes += (unsigned long long)n;
			if (d->off == d->len)
				d->off = d->len = 0;
		}
	}
	return 0;
}

static void relay_session(int cfd, int pfd)
{
	const char *why = NULL;

	up = (struct relay_dir){ .from = cfd, .to = pfd };
	down = (struct relay_dir){ .from = pfd, .to = cfd };
	fcntl(cfd, F_SETFL, O_NONBLOCK);
	for (;;) {
		struct pollfd p[2] = {
			{ .fd = cfd, .events = (short)((up.len ? 0 : POLLIN) |
						       (down.len ? POLLOUT : 0)) },
			{ .fd = pfd, .events = (short)((down.len ? 0 : POLLIN) |
						       (up.len ? POLLOUT : 0)) },
		};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			why = strerror(errno);
			break;
		}
		/* POLLHUP on the port: its host side went away (a read there
		 * returns what is left, then 0). */
		if (relay_dir_step(&up, p[0].revents, &why) < 0 ||
		    relay_dir_step(&down, p[1].revents, &why) < 0)
			break;
	}
	fprintf(stderr, "relay: session over (%s): %llu bytes to the host, "
		"%llu from it\n", why, up.bytes, down.bytes);
}

int main(int argc, char **argv)
{
	int lfd;

	if (argc != 3) {
		fprintf(stderr, "usage: nvt-relay SOCKET PORT\n");
		return 2;
	}
	if (relay_swap_safe() < 0 || (lfd = relay_listen(argv[1])) < 0)
		return 1;
	fprintf(stderr, "relay: %s <-> %s, locked, SCHED_FIFO, IO_FLUSHER\n",
		argv[1], argv[2]);
	for (;;) {
		int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			perror("relay: accept");
			return 1;
		}
		int pfd = relay_port_open(argv[2]);
		if (pfd >= 0) {
			relay_session(cfd, pfd);
			close(pfd);
		}
		close(cfd);
	}
}
