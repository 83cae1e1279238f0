/* Format 1 against format 2 of the shm map, side by side in one process:
 * the same keys inserted into two maps (same seed), one filled and read by
 * format 1's lookup/insert (map.c of the last format-1 commit, compiled with
 * v1_ names by bench/ab/shm-format-ab), one by the current code. As in
 * bench-shm, each takes turns: an untimed pass over all keys, then a block
 * of timed batches of lookups in random order (keys staged side by side);
 * medians of the batches. Usage: shm_format_ab N [miss] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shm/shmmap.h"

int v1_shmmap_lookup(struct shmmap *m, const void *key, size_t len, uint64_t *value);
enum shmmap_status v1_shmmap_insert(struct shmmap *m, const void *key, size_t len,
				    uint64_t value, uint64_t *winner);
typedef int lookup_fn(struct shmmap *m, const void *key, size_t len, uint64_t *value);

#define BATCH 1000
#define ROUNDS 10
#define PER_ROUND 30

static volatile uint64_t sink;

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ull;
	x ^= x >> 27;
	x *= 0x81dadef4bc2dd44dull;
	x ^= x >> 33;
	return x;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof *v, cmp_double);
	return v[n / 2];
}

/* Same key shapes as bench-shm: set 0 inserted, set 1 never. */
struct keys {
	char *buf;
	uint32_t *off;
	uint16_t *len;
};

static void make_keys(struct keys *k, size_t n, int set)
{
	static const char *dirs[] = { "/usr/include", "/usr/lib/x86_64-linux-gnu",
				      "/usr/share/perl5", "/home/build/pkg/src" };
	k->buf = malloc(n * 96);
	k->off = malloc(n * sizeof *k->off);
	k->len = malloc(n * sizeof *k->len);
	if (!k->buf || !k->off || !k->len)
		exit(1);
	size_t at = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t h = mix(i * 2 + (uint64_t)set);
		int len = sprintf(k->buf + at, "%s/%s%llu/f%07zu.%s", dirs[h % 4],
				  set ? "nope" : "pkg", (unsigned long long)(h >> 8) % 997, i,
				  (h >> 20) & 1 ? "h" : "so.1");
		k->buf[at + len] = '\0';
		k->buf[at + len + 1] = (char)(1 + (h >> 30) % 4);
		k->off[i] = (uint32_t)at;
		k->len[i] = (uint16_t)(len + 2);
		at += (size_t)len + 2;
	}
}

static char staged[BATCH * 96];
static uint32_t soff[BATCH];
static uint16_t slen[BATCH];
static uint64_t draws;

static double batch(lookup_fn *f, struct shmmap *m, const struct keys *k, size_t n,
		    uint64_t *hits)
{
	uint32_t at = 0;
	for (int i = 0; i < BATCH; i++) {
		size_t j = mix(++draws) % n;
		memcpy(staged + at, k->buf + k->off[j], k->len[j]);
		soff[i] = at;
		slen[i] = k->len[j];
		at += k->len[j];
	}
	uint64_t acc = 0, h = 0;
	double t0 = now_ns();
	for (int i = 0; i < BATCH; i++) {
		uint64_t v = 0;
		h += (uint64_t)f(m, staged + soff[i], slen[i], &v);
		acc += v;
	}
	double t = (now_ns() - t0) / BATCH;
	sink = acc;
	*hits += h;
	return t;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s N [miss]\n", argv[0]);
		return 2;
	}
	size_t n = strtoul(argv[1], NULL, 10);
	int miss = argc > 2;
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char p1[512], p2[512], err[512];
	snprintf(p1, sizeof p1, "%s/shm-ab-1.%d", tmp, (int)getpid());
	snprintf(p2, sizeof p2, "%s/shm-ab-2.%d", tmp, (int)getpid());
	struct keys in, probe;
	make_keys(&in, n, 0);
	if (miss)
		make_keys(&probe, n, 1);
	else
		probe = in;
	struct shmmap w1, w2, m1, m2;
	struct shmmap_params p = { .seed = 0x5eed };
	if (shmmap_create(&w1, p1, &p, err, sizeof err) || shmmap_create(&w2, p2, &p, err, sizeof err) ||
	    shmmap_attach(&m1, p1, SHMMAP_RDONLY, err, sizeof err) ||
	    shmmap_attach(&m2, p2, SHMMAP_RDONLY, err, sizeof err)) {
		fprintf(stderr, "shm_format_ab: %s\n", err);
		return 1;
	}
	unlink(p1);
	unlink(p2);
	for (size_t i = 0; i < n; i++)
		if (v1_shmmap_insert(&w1, in.buf + in.off[i], in.len[i], i, NULL) != SHMMAP_INSERTED ||
		    shmmap_insert(&w2, in.buf + in.off[i], in.len[i], i, NULL) != SHMMAP_INSERTED) {
			fprintf(stderr, "shm_format_ab: insert %zu failed\n", i);
			return 1;
		}
	struct shmmap_stats s1, s2;
	shmmap_stats(&w1, &s1);
	shmmap_stats(&w2, &s2);
	double t1[ROUNDS * PER_ROUND], t2[ROUNDS * PER_ROUND];
	uint64_t h1 = 0, h2 = 0;
	for (int r = 0; r < ROUNDS; r++)
		for (int side = 0; side < 2; side++) {
			int one = (r + side) & 1; /* alternate which goes first */
			lookup_fn *f = one ? v1_shmmap_lookup : shmmap_lookup;
			struct shmmap *m = one ? &m1 : &m2;
			uint64_t v, warm = 0;
			for (size_t i = 0; i < n; i++)
				warm += (uint64_t)f(m, in.buf + in.off[i], in.len[i], &v);
			sink = warm;
			for (int b = r * PER_ROUND; b < (r + 1) * PER_ROUND; b++)
				(one ? t1 : t2)[b] = batch(f, m, &probe, n, one ? &h1 : &h2);
		}
	uint64_t want = miss ? 0 : (uint64_t)ROUNDS * PER_ROUND * BATCH;
	if (h1 != want || h2 != want) {
		fprintf(stderr, "shm_format_ab: wrong lookup results\n");
		return 1;
	}
	double a = median(t1, ROUNDS * PER_ROUND), b = median(t2, ROUNDS * PER_ROUND);
	printf("%8zu keys, %s: format 1 %6.1f ns, format 2 %6.1f ns, ratio 2/1 %.2f; "
	       "bytes per key %.0f / %.0f\n", n, miss ? "miss" : "hit ", a, b, b / a,
	       (double)s1.bytes_used / n, (double)s2.bytes_used / n);
	return 0;
}
