/* test_wtrack.c - written-page tracking: the first look sees every page,
 * later looks exactly the pages written since, by this process or by
 * another one through process_vm_writev (how an MPI rank's Put may land). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "pmem/wtrack.h"

#define NPAGES 200

static void pages_written_since_last_look(void **state)
{
	char path[64];
	uint64_t map[(NPAGES + 63) / 64];
	struct wtrack *t;
	(void)state;

	snprintf(path, sizeof(path), "/dev/shm/nvtest-wtrack-%d", (int)getpid());
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(ftruncate(fd, NPAGES * 4096), 0);
	uint8_t *p = mmap(NULL, NPAGES * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(p != MAP_FAILED);
	memset(p, 1, NPAGES * 4096);
	int rc = wtrack_open(&t, p, NPAGES * 4096);
	if (rc == -ENOSYS || rc == -EPERM || rc == -EINVAL) {
		skip(); /* the kernel cannot; logged by wtrack_open */
	}
	assert_int_equal(rc, 0);
	assert_int_equal(wtrack_open(&t, p + 1, 4096), -EINVAL);

	memset(map, 0, sizeof(map));
	assert_int_equal(wtrack_collect(t, map), NPAGES);
	memset(map, 0, sizeof(map));
	assert_int_equal(wtrack_collect(t, map), 0);

	p[3 * 4096] = 2;
	p[150 * 4096 + 100] = 2;
	p[199 * 4096 + 4095] = 2;
	(void)p[50 * 4096]; /* a read is not a write */
	pid_t me = getpid(), c = fork();
	if (c == 0) {
		char b[8] = "remote!";
		struct iovec l = { b, 8 }, r = { p + 77 * 4096, 8 };
		_exit(process_vm_writev(me, &l, 1, &r, 1, 0) == 8 ? 0 : 1);
	}
	int st;
	assert_int_equal(waitpid(c, &st, 0), c);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	memset(map, 0, sizeof(map));
	assert_int_equal(wtrack_collect(t, map), 4);
	for (int i = 0; i < NPAGES; i++)
		assert_int_equal((map[i / 64] >> (i % 64)) & 1,
				 i == 3 || i == 77 || i == 150 || i == 199);
	wtrack_close(t);
	munmap(p, NPAGES * 4096);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(pages_written_since_last_look),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
