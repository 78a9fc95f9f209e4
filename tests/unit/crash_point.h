/* crash_point.h - the crash test of the NVRAM layer's unit tests: a script
 * of steps runs in a child process that region_crash_at(n) kills with
 * SIGKILL at its nth persist point; each step that returned is reported
 * by one byte on a pipe, so the parent knows what was acknowledged before
 * the kill, and checks that the file holds at least that. Include after
 * cmocka.h. */
#pragma once
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pmem/region.h"

/* Runs script(arg, fd) in a child killed at persist point n; the script
 * writes one byte to fd after each step that returned, and returns 0
 * (the child then exits 0) or an exit status of its own for an error.
 * Returns the bytes the child wrote; *ran_through is true when it ended
 * before reaching point n (then it must have reported want steps),
 * false when SIGKILL took it. Anything else fails the test. */
static inline int crash_point_run(uint64_t n, int (*script)(void *arg, int fd),
				  void *arg, int want, bool *ran_through)
{
	int pfd[2];
	char c;
	int got = 0, st;

	assert_int_equal(pipe(pfd), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(pfd[0]);
		region_crash_at(n);
		_exit(script(arg, pfd[1]));
	}
	close(pfd[1]);
	while (read(pfd[0], &c, 1) == 1)
		got++;
	close(pfd[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	*ran_through = WIFEXITED(st);
	if (*ran_through) {
		assert_int_equal(WEXITSTATUS(st), 0);
		assert_int_equal(got, want);
	} else {
		assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	}
	return got;
}
