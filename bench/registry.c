/* Owner-lookup timing for bench/run-registry.
 *
 *   build/bench/registry DB PATHS_FILE [REPS]
 *
 * PATHS_FILE holds canonical paths, one per line. Prints one JSON object:
 *   warm_us   median time of registry_owners() on an open handle whose pages
 *             are cached (each path looked up REPS times, after one warm-up)
 *   cold_us   median time of the first registry_owners() on a freshly opened
 *             handle after the database file was dropped from the page cache
 *             (posix_fadvise DONTNEED), i.e. what a new process pays
 *   open_us   median registry_open() time in the cold case
 *   found     how many paths had an owner */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "registry/registry.h"

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
	qsort(v, n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void drop_cache(const char *db)
{
	int fd = open(db, O_RDONLY);
	if (fd >= 0) {
		fdatasync(fd);
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
	}
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s DB PATHS_FILE [REPS]\n", argv[0]);
		return 2;
	}
	const char *db = argv[1];
	int reps = argc > 3 ? atoi(argv[3]) : 20;
	FILE *f = fopen(argv[2], "r");
	if (!f) {
		perror(argv[2]);
		return 1;
	}
	size_t n = 0, cap = 1024;
	char **paths = malloc(cap * sizeof *paths);
	char line[4096];
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		if (!*line)
			continue;
		if (n == cap)
			paths = realloc(paths, (cap *= 2) * sizeof *paths);
		paths[n++] = strdup(line);
	}
	fclose(f);
	if (!n) {
		fprintf(stderr, "%s: no paths\n", argv[2]);
		return 1;
	}
	char err[8192];
	int64_t ids[256];

	/* Cold: new handle, file evicted from the page cache. */
	size_t ncold = n < 50 ? n : 50;
	double *cold = malloc(ncold * sizeof *cold), *open_t = malloc(ncold * sizeof *open_t);
	for (size_t i = 0; i < ncold; i++) {
		drop_cache(db);
		double t0 = now_us();
		struct kiln_registry *reg = registry_open(db, REGISTRY_RDONLY, err, sizeof err);
		double t1 = now_us();
		if (!reg) {
			fprintf(stderr, "%s\n", err);
			return 1;
		}
		if (registry_owners(reg, paths[i], ids, 256) < 0)
			return 1;
		double t2 = now_us();
		open_t[i] = t1 - t0;
		cold[i] = t2 - t1;
		registry_close(reg);
	}

	/* Warm: one handle, every path once to warm up, then timed. */
	struct kiln_registry *reg = registry_open(db, REGISTRY_RDONLY, err, sizeof err);
	if (!reg) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	int found = 0;
	for (size_t i = 0; i < n; i++)
		found += registry_owners(reg, paths[i], ids, 256) > 0;
	double *warm = malloc(n * (size_t)reps * sizeof *warm);
	size_t k = 0;
	for (int r = 0; r < reps; r++)
		for (size_t i = 0; i < n; i++) {
			double t0 = now_us();
			registry_owners(reg, paths[i], ids, 256);
			warm[k++] = now_us() - t0;
		}
	registry_close(reg);
	printf("{\"warm_us\": %.3f, \"cold_us\": %.1f, \"open_us\": %.1f, \"found\": %d, "
	       "\"paths\": %zu}\n",
	       median(warm, k), median(cold, ncold), median(open_t, ncold), found, n);
	return 0;
}
