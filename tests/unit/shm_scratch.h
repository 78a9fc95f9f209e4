/* shm_scratch.h - the scratch file of a unit test program of the NVRAM
 * layer: /dev/shm/nvtest-SHM_SCRATCH-PID in path, removed before and after
 * each test (the cmocka fixtures setup and teardown). Define SHM_SCRATCH
 * (a word) before including, after cmocka.h. */
#pragma once
#include <stdio.h>
#include <unistd.h>

static char path[96];

static int setup(void **state)
{
	(void)state;
	snprintf(path, sizeof(path), "/dev/shm/nvtest-%s-%d", SHM_SCRATCH, (int)getpid());
	unlink(path);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(path);
	return 0;
}
