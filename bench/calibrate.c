/* The machine's calibration row for benchmarks on a shared VM: two fixed
 * workloads whose time says how fast this machine was when a figure was taken.
 *
 *   calibrate [SCALE]
 *
 * Prints "key value" lines:
 *   cpu_loop_ms      a fixed chain of 200M dependent integer operations
 *                    (times SCALE/100), best of 3: core speed and steal
 *   mem_latency_ns   one dependent load through a random cycle over 64 MiB
 *                    (far beyond the caches), best of 3: memory latency
 * SCALE (default 100) shrinks both for tests.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double cpu_loop_ms(uint64_t iters)
{
	volatile uint64_t sink;
	uint64_t x = 88172645463325252ull;
	double t0 = now_ns();
	for (uint64_t i = 0; i < iters; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	sink = x;
	(void)sink;
	return (now_ns() - t0) / 1e6;
}

/* A single random cycle through all slots (Sattolo's shuffle), so every load
 * depends on the one before and the prefetcher cannot guess the next. */
static double mem_latency_ns(size_t slots, size_t loads)
{
	size_t *next = malloc(slots * sizeof *next);
	if (!next) {
		fprintf(stderr, "calibrate: out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < slots; i++)
		next[i] = i;
	uint64_t r = 2463534242u;
	for (size_t i = slots - 1; i > 0; i--) {
		r ^= r << 13, r ^= r >> 7, r ^= r << 17;
		size_t j = r % i, t = next[i];
		next[i] = next[j], next[j] = t;
	}
	volatile size_t sink;
	size_t p = 0;
	double t0 = now_ns();
	for (size_t i = 0; i < loads; i++)
		p = next[p];
	double ns = (now_ns() - t0) / loads;
	sink = p;
	(void)sink;
	free(next);
	return ns;
}

int main(int argc, char **argv)
{
	long scale = argc > 1 ? atol(argv[1]) : 100;
	if (argc > 2 || scale < 1 || scale > 100) {
		fprintf(stderr, "usage: calibrate [SCALE 1..100]\n");
		return 2;
	}
	double cpu = 0, mem = 0;
	for (int i = 0; i < 3; i++) {
		double c = cpu_loop_ms(2000000ull * scale);
		double m = mem_latency_ns((64u << 20) / sizeof(size_t) / 100 * scale, 200000ull * scale / 10);
		if (i == 0 || c < cpu)
			cpu = c;
		if (i == 0 || m < mem)
			mem = m;
	}
	printf("cpu_loop_ms %.2f\nmem_latency_ns %.2f\n", cpu, mem);
	return 0;
}
