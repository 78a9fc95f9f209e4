/* nbd_memtouch.c - the swap workload of the nvswapd tests and benchmarks:
 * fill SIZE MiB of anonymous memory page by page with a pattern unique to
 * each page and word, then read every page back and check every word. Run
 * in a memory cgroup smaller than SIZE, the pages must go to swap and come
 * back intact. Order "seq" walks pages in address order, "rand" in a random
 * permutation (both the fill and the check).
 *
 *   nbd-memtouch SIZE_MIB seq|rand [SEED]
 *
 * Prints "fill S s, check S s"; exits 1 at the first corrupted page. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define PAGE 4096
#define WORDS (PAGE / 8)

static uint64_t word(uint64_t page, uint64_t i, uint64_t seed)
{
	uint64_t x = (page + 1) * 0x9E3779B97F4A7C15ULL ^ (i * 0xff51afd7ed558ccdULL) ^ seed;
	x ^= x >> 31;
	return x * 0xc4ceb9fe1a85ec53ULL;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc < 3 || (strcmp(argv[2], "seq") && strcmp(argv[2], "rand"))) {
		fprintf(stderr, "usage: nbd-memtouch SIZE_MIB seq|rand [SEED]\n");
		return 2;
	}
	uint64_t pages = strtoull(argv[1], NULL, 10) * (1 << 20) / PAGE;
	uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
	int rnd = !strcmp(argv[2], "rand");
	uint64_t *mem = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint32_t *order = malloc(pages * sizeof(*order));
	if (mem == MAP_FAILED || !order) {
		perror("nbd-memtouch: allocating");
		return 2;
	}
	/* Transparent huge pages would make every swap-out a 2 MiB split. */
	madvise(mem, pages * PAGE, MADV_NOHUGEPAGE);
	for (uint64_t i = 0; i < pages; i++)
		order[i] = (uint32_t)i;
	if (rnd) {
		uint64_t s = seed * 2654435761ULL + 1;
		for (uint64_t i = pages - 1; i > 0; i--) {
			s ^= s << 13; s ^= s >> 7; s ^= s << 17;
			uint64_t j = s % (i + 1);
			uint32_t t = order[i]; order[i] = order[j]; order[j] = t;
		}
	}
	double t0 = now();
	for (uint64_t k = 0; k < pages; k++) {
		uint64_t p = order[k], *w = mem + p * WORDS;
		for (uint64_t i = 0; i < WORDS; i++)
			w[i] = word(p, i, seed);
	}
	double t1 = now();
	for (uint64_t k = 0; k < pages; k++) {
		uint64_t p = order[pages - 1 - k], *w = mem + p * WORDS;
		for (uint64_t i = 0; i < WORDS; i++)
			if (w[i] != word(p, i, seed)) {
				fprintf(stderr, "nbd-memtouch: page %llu word %llu "
					"corrupted: %#llx, expected %#llx\n",
					(unsigned long long)p,
					(unsigned long long)i,
					(unsigned long long)w[i],
					(unsigned long long)word(p, i, seed));
				return 1;
			}
	}
	double t2 = now();
	printf("fill %.2f s, check %.2f s, %llu pages ok\n", t1 - t0, t2 - t1,
	       (unsigned long long)pages);
	return 0;
}
