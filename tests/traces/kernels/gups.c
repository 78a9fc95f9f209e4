/* gups.c - GUPS (HPCC RandomAccess): read-modify-write of random words of a
 * large table. No locality at all: the worst case for any cache or tier.
 * usage: gups LOG2_WORDS UPDATES */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int lg = argc > 1 ? atoi(argv[1]) : 21;
	long updates = argc > 2 ? atol(argv[2]) : 1000000;
	uint64_t n = 1ull << lg, ran = 1;
	uint64_t *t = malloc(n * sizeof(uint64_t));
	if (!t)
		return 1;
	for (uint64_t i = 0; i < n; i++)
		t[i] = i;
	for (long u = 0; u < updates; u++) {
		ran = (ran << 1) ^ ((int64_t)ran < 0 ? 7 : 0);
		t[ran & (n - 1)] ^= ran;
	}
	printf("gups: t[1] %llu\n", (unsigned long long)t[1]);
	return 0;
}
