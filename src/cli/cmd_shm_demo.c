/* `kiln shm demo`: P processes x T threads race to insert the same set of
 * path-like keys into one map (first writer wins), then every thread looks
 * every key up again; the parent prints what happened and validates the map. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cmd_shm_demo.h"
#include "common/cliopt.h"
#include "shm/shmmap.h"

struct tally {
	atomic_ullong inserted, exists, full, failed, lookups, hits, wrong;
};

struct demo {
	const char *path;
	unsigned procs, threads;
	uint64_t keys;
	struct tally *t; /* shared between processes */
};

struct worker {
	struct demo *d;
	struct shmmap *m;
	unsigned id;
};

static size_t demo_key(char *buf, size_t cap, uint64_t i)
{
	int n = snprintf(buf, cap, "/usr/share/pkg%05llu/dir%03llu/file%07llu.dat",
			 (unsigned long long)(i % 4099), (unsigned long long)(i % 211),
			 (unsigned long long)i);
	buf[n] = '\0'; /* then one byte of access class, as trace mode keys are */
	buf[n + 1] = (char)(1 + i % 3);
	return (size_t)n + 2;
}

static void *demo_thread(void *arg)
{
	struct worker *w = arg;
	struct demo *d = w->d;
	unsigned char *mine = calloc(d->keys, 1);
	char key[256];
	uint64_t ins = 0, ex = 0, full = 0, failed = 0, look = 0, hits = 0, wrong = 0;
	if (!mine)
		return NULL;
	/* Same keys for everyone, each writer starting somewhere else. */
	uint64_t start = d->keys * w->id / (d->procs * d->threads);
	for (uint64_t j = 0; j < d->keys; j++) {
		uint64_t i = (start + j) % d->keys, got;
		size_t n = demo_key(key, sizeof key, i);
		switch (shmmap_insert(w->m, key, n, (uint64_t)w->id << 40 | i, &got)) {
		case SHMMAP_INSERTED: ins++; mine[i] = 1; break;
		case SHMMAP_EXISTS: ex++; mine[i] = 1; break;
		case SHMMAP_FULL: full++; break;
		default: failed++; break;
		}
		if (mine[i] && (got & ((1ull << 40) - 1)) != i)
			wrong++;
	}
	for (uint64_t j = 0; j < d->keys; j++) {
		uint64_t i = (start + d->keys - j) % d->keys, v;
		size_t n = demo_key(key, sizeof key, i);
		look++;
		if (shmmap_lookup(w->m, key, n, &v)) {
			hits++;
			if ((v & ((1ull << 40) - 1)) != i)
				wrong++;
		} else if (mine[i]) {
			wrong++; /* we saw it in the map: it cannot have gone */
		}
	}
	free(mine);
	struct tally *t = d->t;
	atomic_fetch_add(&t->inserted, ins);
	atomic_fetch_add(&t->exists, ex);
	atomic_fetch_add(&t->full, full);
	atomic_fetch_add(&t->failed, failed);
	atomic_fetch_add(&t->lookups, look);
	atomic_fetch_add(&t->hits, hits);
	atomic_fetch_add(&t->wrong, wrong);
	return NULL;
}

static int demo_process(struct demo *d, unsigned proc)
{
	struct shmmap m;
	char err[512];
	if (shmmap_attach(&m, d->path, SHMMAP_RDWR, err, sizeof err) != 0) {
		fprintf(stderr, "kiln shm demo: %s\n", err);
		return 1;
	}
	pthread_t tid[64];
	struct worker w[64];
	for (unsigned i = 0; i < d->threads; i++) {
		w[i] = (struct worker){ d, &m, proc * d->threads + i };
		if (pthread_create(&tid[i], NULL, demo_thread, &w[i]) != 0) {
			fprintf(stderr, "kiln shm demo: cannot start a thread\n");
			return 1;
		}
	}
	for (unsigned i = 0; i < d->threads; i++)
		pthread_join(tid[i], NULL);
	shmmap_detach(&m);
	return 0;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static const char *human(uint64_t n, char *buf, size_t cap)
{
	if (n >= 10ull << 20)
		snprintf(buf, cap, "%.1f MiB", n / 1048576.0);
	else
		snprintf(buf, cap, "%.0f KiB", n / 1024.0);
	return buf;
}

#define CMD "kiln shm"

enum { OPT_PROCS = 1, OPT_THREADS, OPT_KEYS, OPT_MAP, OPT_MAX };
static const struct cliopt opts[] = {
	{ "procs", 0, "N", OPT_PROCS, "processes (1..64, default 4)" },
	{ "threads", 0, "N", OPT_THREADS, "threads per process (1..64, default 2)" },
	{ "keys", 0, "N", OPT_KEYS, "keys (1..1e8, default 100000)" },
	{ "map", 0, "PATH", OPT_MAP, "an existing map to fill (default: a new one)" },
	{ "max", 0, "SIZE", OPT_MAX, "the new map's maximum size (default 1G)" },
	{ 0 },
};

static void usage(FILE *out)
{
	fprintf(out, "usage: kiln shm demo [OPTIONS]\n\n"
		     "Processes and threads race to insert the same keys into one map, read\n"
		     "them all back, and the map is validated (a stress test of src/shm).\n\n"
		     "options:\n");
	cliopt_print_options(out, opts);
}

int shm_demo(int argc, char **argv)
{
	struct demo d = { .procs = 4, .threads = 2, .keys = 100000 };
	uint64_t max = 1ull << 30;
	const char *map = NULL;
	struct cliparse p;
	cliopt_init(&p, CMD, opts, argc, argv, CLIOPT_PERMUTE, stderr);
	for (int id; (id = cliopt_next(&p)) != CLIOPT_END;) {
		uint64_t v = 0;
		switch (id) {
		case CLIOPT_ERROR:
		case CLIOPT_HELP:
		case CLIOPT_VERSION:
			return cliopt_answer(id, usage, stdout);
		case CLIOPT_ARG:
			return cliopt_usage(&p, "demo: unexpected argument '%s'", p.value);
		case OPT_MAP:
			map = p.value;
			break;
		default:
			if (shm_parse_size(p.value, &v) != 0)
				return cliopt_usage(&p, "demo: %s: bad number '%s'", p.opt, p.value);
			if (id == OPT_PROCS)
				d.procs = (unsigned)v;
			else if (id == OPT_THREADS)
				d.threads = (unsigned)v;
			else if (id == OPT_KEYS)
				d.keys = v;
			else
				max = v;
		}
	}
	if (d.procs < 1 || d.procs > 64 || d.threads < 1 || d.threads > 64 || d.keys < 1 ||
	    d.keys > 100000000)
		return cliopt_usage(&p, "demo: --procs and --threads take 1..64, --keys 1..1e8");

	char dir[4096] = "", path[4200];
	if (map) {
		snprintf(path, sizeof path, "%s", map);
	} else {
		const char *tmp = getenv("TMPDIR");
		snprintf(dir, sizeof dir, "%s/kiln-shm-demo.XXXXXX", tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(dir)) {
			fprintf(stderr, "kiln shm demo: %s: %s\n", dir, strerror(errno));
			return 1;
		}
		snprintf(path, sizeof path, "%s/map", dir);
		struct shmmap m;
		char err[512];
		struct shmmap_params p = { .initial_size = 64 << 10, .max_size = max };
		if (shmmap_create(&m, path, &p, err, sizeof err) != 0) {
			fprintf(stderr, "kiln shm demo: %s\n", err);
			rmdir(dir);
			return 1;
		}
		shmmap_detach(&m);
	}
	d.path = path;

	struct shmmap m;
	char err[512];
	if (shmmap_attach(&m, path, SHMMAP_RDONLY, err, sizeof err) != 0) {
		fprintf(stderr, "kiln shm demo: %s\n", err);
		return 1;
	}
	struct shmmap_stats before, after;
	shmmap_stats(&m, &before);

	d.t = mmap(NULL, sizeof *d.t, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (d.t == MAP_FAILED) {
		fprintf(stderr, "kiln shm demo: mmap: %s\n", strerror(errno));
		return 1;
	}
	printf("kiln shm demo: %u processes x %u threads race to insert the same %llu keys into %s\n",
	       d.procs, d.threads, (unsigned long long)d.keys, path);
	fflush(stdout);

	double t0 = now();
	pid_t pids[64];
	for (unsigned i = 0; i < d.procs; i++) {
		pids[i] = fork();
		if (pids[i] < 0) {
			fprintf(stderr, "kiln shm demo: fork: %s\n", strerror(errno));
			return 1;
		}
		if (pids[i] == 0)
			_exit(demo_process(&d, i));
	}
	int bad_exit = 0;
	for (unsigned i = 0; i < d.procs; i++) {
		int st;
		if (waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st) || WEXITSTATUS(st))
			bad_exit++;
	}
	double secs = now() - t0;

	shmmap_stats(&m, &after);
	long long n = shmmap_validate(&m, err, sizeof err);
	struct tally *t = d.t;
	unsigned long long calls = t->inserted + t->exists + t->full + t->failed;
	char b1[32], b2[32], b3[32], b4[32];
	printf("  inserts   %llu calls: %llu inserted (first writer wins), %llu already there, %llu full\n",
	       calls, (unsigned long long)t->inserted, (unsigned long long)t->exists,
	       (unsigned long long)t->full);
	printf("  lookups   %llu: %llu hits, %llu wrong values or lost keys\n",
	       (unsigned long long)t->lookups, (unsigned long long)t->hits,
	       (unsigned long long)t->wrong);
	printf("  file      %s -> %s committed, %s used, maximum %s\n",
	       human(before.bytes_committed, b1, sizeof b1),
	       human(after.bytes_committed, b2, sizeof b2), human(after.bytes_used, b3, sizeof b3),
	       human(after.max_size, b4, sizeof b4));
	printf("  time      %.3f s for %llu inserts and lookups in %u processes\n", secs,
	       calls + (unsigned long long)t->lookups, d.procs);
	if (t->full)
		printf("  full      the map reached its maximum size or the disk refused to grow it:"
		       " inserts said FULL, lookups kept working\n");
	int rc = 0;
	if (n < 0) {
		printf("  validate  FAILED: %s\n", err);
		rc = 1;
	} else {
		printf("  validate  ok: %lld entries\n", n);
	}
	if (t->wrong || t->failed || bad_exit) {
		printf("  FAILED: %llu wrong answers, %llu failed inserts, %d workers died\n",
		       (unsigned long long)t->wrong, (unsigned long long)t->failed, bad_exit);
		rc = 1;
	}
	if (!map && !t->full && n >= 0 && (uint64_t)n != t->inserted) {
		printf("  FAILED: %lld entries but %llu inserts succeeded\n", n,
		       (unsigned long long)t->inserted);
		rc = 1;
	}
	shmmap_detach(&m);
	munmap(d.t, sizeof *d.t);
	if (!map) {
		unlink(path);
		rmdir(dir);
	}
	return rc;
}
