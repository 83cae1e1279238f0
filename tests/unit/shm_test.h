/* Helpers shared by the shm unit tests (header-only, so nothing is linked into
 * other components' tests). */
#ifndef KILN_TESTS_SHM_TEST_H
#define KILN_TESTS_SHM_TEST_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shm/shmmap.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SHM_TEST_SANITIZED 1
#else
#define SHM_TEST_SANITIZED 0
#endif

/* A fresh private directory for one test's map files. */
static inline char *shm_test_dir(void)
{
	const char *base = getenv("TMPDIR");
	char tmpl[512];
	snprintf(tmpl, sizeof tmpl, "%s/kiln-shm-test.XXXXXX", base && *base ? base : "/tmp");
	char *d = mkdtemp(tmpl);
	if (!d) {
		perror("mkdtemp");
		abort();
	}
	return strdup(d);
}

/* Creates DIR/map (its path into `path`) growing from `initial` up to at
 * most `max` bytes; aborts the test run if it cannot. */
static inline void shm_test_create(struct shmmap *m, const char *dir, char path[600],
				   uint64_t initial, uint64_t max)
{
	char err[256];
	snprintf(path, 600, "%s/map", dir);
	struct shmmap_params p = { .initial_size = initial, .max_size = max };
	if (shmmap_create(m, path, &p, err, sizeof err)) {
		fprintf(stderr, "shmmap_create %s: %s\n", path, err);
		abort();
	}
}

static inline void shm_test_rmdir(char *dir)
{
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			char p[1024];
			snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
			unlink(p);
		}
		closedir(d);
	}
	rmdir(dir);
	free(dir);
}

static inline uint64_t shm_test_mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ull;
	x ^= x >> 27;
	x *= 0x81dadef4bc2dd44dull;
	x ^= x >> 33;
	return x;
}

/* Writes key number i (async-signal-safe: no stdio) into buf and returns its
 * length: a path-like prefix naming i, then a filler of 0..spread-1 bytes
 * derived from i, so keys are unique and of varied length. */
static inline size_t shm_test_key(char *buf, uint64_t i, size_t spread)
{
	static const char pre[] = "/usr/lib/x86_64-linux-gnu/k";
	size_t n = sizeof pre - 1;
	memcpy(buf, pre, n);
	char digits[24];
	int nd = 0;
	uint64_t v = i;
	do {
		digits[nd++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (nd)
		buf[n++] = digits[--nd];
	buf[n++] = '/';
	size_t fill = spread ? shm_test_mix(i) % spread : 0;
	for (size_t j = 0; j < fill; j++)
		buf[n++] = (char)('a' + (i + j) % 26);
	buf[n++] = '\0'; /* access class byte */
	buf[n++] = (char)(1 + i % 7);
	return n;
}

#endif
