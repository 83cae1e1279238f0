/* bench-shm: the shared-memory map against the two obvious alternatives, in
 * one run: (a) an ordinary chained hash table in shared memory behind a
 * process-shared pthread mutex, (b) a Unix-socket round trip to a server
 * process holding the table. Prints a table of medians and ratios and writes
 * a flat JSON object to the path given as argv[1].
 *
 * Latencies are medians over batches: each batch times BATCH lookups of keys
 * in random order with one pair of clock reads, so the clock's own cost is
 * spread thin; the figure is the median batch's ns per lookup. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shm/shmmap.h"

#define BATCH 1000
#define BATCHES 300 /* a multiple of ROUNDS */
#define RTT_BATCH 100
#define RTT_BATCHES 101
#define INSERT_KEYS 400000
#define INSERT_RUNS 3

static const char *tmpdir;
static volatile uint64_t sink; /* keeps measured loops from being optimized away */

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "bench-shm: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
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

/* Keys as trace mode makes them: an absolute path, a NUL, an access class.
 * Key i of set `set` (0 = inserted, 1 = never inserted). */
struct keys {
	char *buf;
	uint32_t *off;
	uint16_t *len;
	size_t n;
};

static void make_keys(struct keys *k, size_t n, int set)
{
	k->n = n;
	k->buf = malloc(n * 96);
	k->off = malloc(n * sizeof *k->off);
	k->len = malloc(n * sizeof *k->len);
	if (!k->buf || !k->off || !k->len)
		die("malloc");
	size_t at = 0;
	static const char *dirs[] = { "/usr/include", "/usr/lib/x86_64-linux-gnu",
				      "/usr/share/perl5", "/home/build/pkg/src" };
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

static void free_keys(struct keys *k)
{
	free(k->buf);
	free(k->off);
	free(k->len);
}

/* A random lookup order of length BATCH * BATCHES over n keys. */
static uint32_t *make_order(size_t n, size_t count, uint64_t seed)
{
	uint32_t *o = malloc(count * sizeof *o);
	if (!o)
		die("malloc");
	for (size_t i = 0; i < count; i++)
		o[i] = (uint32_t)(mix(seed + i) % n);
	return o;
}

/* A lookup order drawn from a Zipf(1) distribution over the n keys (rank r
 * has weight 1/r, ranks scattered over the keys): a few keys very often,
 * most rarely, as a build looks up the same headers again and again. */
static uint32_t *make_zipf_order(size_t n, size_t count, uint64_t seed)
{
	double *cdf = malloc(n * sizeof *cdf);
	uint32_t *o = malloc(count * sizeof *o);
	if (!cdf || !o)
		die("malloc");
	double sum = 0;
	for (size_t r = 0; r < n; r++)
		cdf[r] = sum += 1.0 / (double)(r + 1);
	for (size_t i = 0; i < count; i++) {
		double u = (double)(mix(seed + i) >> 11) / 9007199254740992.0 * sum;
		size_t lo = 0, hi = n - 1;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (cdf[mid] < u)
				lo = mid + 1;
			else
				hi = mid;
		}
		o[i] = (uint32_t)(mix(lo ^ 0xfeed) % n);
	}
	free(cdf);
	return o;
}

/* Calibration: ns per dependent load at random in `bytes` of memory (a
 * pointer chase), the floor for any lookup that must touch that much. */
static double dependent_load_ns(size_t bytes)
{
	size_t n = bytes / 64;
	uint64_t *a = aligned_alloc(64, n * 64);
	uint32_t *perm = malloc(n * sizeof *perm);
	if (!a || !perm)
		die("malloc");
	for (size_t i = 0; i < n; i++)
		perm[i] = (uint32_t)i;
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = mix(i) % (i + 1);
		uint32_t t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	for (size_t i = 0; i < n; i++)
		a[(size_t)perm[i] * 8] = (uint64_t)perm[(i + 1) % n] * 8;
	double per[BATCHES];
	uint64_t p = 0;
	for (size_t i = 0; i < n; i++)
		p = a[p];
	for (int b = 0; b < BATCHES; b++) {
		double t0 = now_ns();
		for (int i = 0; i < BATCH; i++)
			p = a[p];
		per[b] = (now_ns() - t0) / BATCH;
	}
	sink = p;
	free(a);
	free(perm);
	return median(per, BATCHES);
}

/* ---- the shm map ------------------------------------------------------- */

static void map_path(char *buf, size_t cap, const char *name)
{
	snprintf(buf, cap, "%s/%s.%ld", tmpdir, name, (long)getpid());
}

static void fill_map(struct shmmap *m, const char *path, const struct keys *k,
		     const struct shmmap_params *p)
{
	char err[512];
	unlink(path);
	if (shmmap_create(m, path, p, err, sizeof err) != 0) {
		fprintf(stderr, "bench-shm: %s\n", err);
		exit(1);
	}
	for (size_t i = 0; i < k->n; i++)
		if (shmmap_insert(m, k->buf + k->off[i], k->len[i], i, NULL) != SHMMAP_INSERTED) {
			fprintf(stderr, "bench-shm: insert %zu failed\n", i);
			exit(1);
		}
}

/* A batch's keys copied next to each other before it is timed: a hook looks
 * up a path it has just built, which is in its cache, not scattered through
 * a key array several MiB large (that would add a cache miss per lookup that
 * no real caller pays). */
struct staged {
	char buf[BATCH * 96];
	uint16_t len[BATCH];
	uint32_t off[BATCH];
};

static void stage(struct staged *st, const struct keys *k, const uint32_t *o)
{
	uint32_t at = 0;
	for (int i = 0; i < BATCH; i++) {
		memcpy(st->buf + at, k->buf + k->off[o[i]], k->len[o[i]]);
		st->off[i] = at;
		st->len[i] = k->len[o[i]];
		at += k->len[o[i]];
	}
}

/* One timed batch of shm lookups; returns ns per lookup, adds hits to *hits. */
static double shm_batch(struct shmmap *m, const struct keys *k, const uint32_t *o,
			uint64_t *hits)
{
	static struct staged st;
	stage(&st, k, o);
	uint64_t acc = 0, h = 0;
	double t0 = now_ns();
	for (int i = 0; i < BATCH; i++) {
		uint64_t v = 0;
		h += (uint64_t)shmmap_lookup(m, st.buf + st.off[i], st.len[i], &v);
		acc += v;
	}
	double t = (now_ns() - t0) / BATCH;
	sink = acc;
	*hits += h;
	return t;
}

/* The same batch, but each lookup's key address depends on the previous
 * lookup's result, so no two lookups overlap in the CPU: the latency of one
 * lookup, as a hook that does one lookup between system calls sees it. */
static double shm_serial_batch(struct shmmap *m, const struct keys *k, const uint32_t *o,
			       uint64_t *hits)
{
	static struct staged st;
	stage(&st, k, o);
	uint64_t v = 0, h = 0;
	double t0 = now_ns();
	for (int i = 0; i < BATCH; i++) {
		uint64_t got = 0;
		h += (uint64_t)shmmap_lookup(m, st.buf + st.off[i] + (v == UINT64_MAX), st.len[i], &got);
		v = got;
	}
	double t = (now_ns() - t0) / BATCH;
	sink = v;
	*hits += h;
	return t;
}

/* Hashing alone (the first step of every lookup), on the same staged keys. */
static double hash_batch(const struct keys *k, const uint32_t *o, uint64_t seed)
{
	static struct staged st;
	stage(&st, k, o);
	uint64_t acc = 0;
	double t0 = now_ns();
	for (int i = 0; i < BATCH; i++)
		acc += shmmap_hash_default(st.buf + st.off[i], st.len[i], seed).lo;
	double t = (now_ns() - t0) / BATCH;
	sink = acc;
	return t;
}

/* ---- (a) mutex + chained hash table in shared memory ------------------- */

struct mtable {
	pthread_mutex_t lock;
	uint64_t nbuckets;
	uint64_t arena_end; /* bump allocator over the region after the buckets */
	uint64_t size;
	/* then: uint64_t bucket[nbuckets]; then entries */
};

struct mentry {
	uint64_t next, hash, value;
	uint32_t len, pad;
	char key[];
};

static struct mtable *mtable_create(size_t nkeys, const struct keys *k)
{
	uint64_t nb = 1;
	while (nb < nkeys * 2)
		nb <<= 1;
	uint64_t size = sizeof(struct mtable) + nb * 8 + nkeys * (sizeof(struct mentry) + 104);
	struct mtable *t = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (t == MAP_FAILED)
		die("mmap");
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(&t->lock, &a);
	t->nbuckets = nb;
	t->size = size;
	t->arena_end = sizeof(struct mtable) + nb * 8;
	uint64_t *bucket = (uint64_t *)(t + 1);
	for (size_t i = 0; i < k->n; i++) {
		const char *key = k->buf + k->off[i];
		uint32_t len = k->len[i];
		uint64_t h = shmmap_hash_default(key, len, 0).lo;
		struct mentry *e = (struct mentry *)((char *)t + t->arena_end);
		e->hash = h;
		e->value = i;
		e->len = len;
		memcpy(e->key, key, len);
		e->next = bucket[h & (nb - 1)];
		bucket[h & (nb - 1)] = t->arena_end;
		t->arena_end += (sizeof *e + len + 7) & ~7ull;
	}
	return t;
}

static int mtable_lookup(struct mtable *t, const void *key, size_t len, uint64_t *value)
{
	uint64_t h = shmmap_hash_default(key, len, 0).lo;
	int hit = 0;
	pthread_mutex_lock(&t->lock);
	uint64_t off = ((uint64_t *)(t + 1))[h & (t->nbuckets - 1)];
	while (off) {
		struct mentry *e = (struct mentry *)((char *)t + off);
		if (e->hash == h && e->len == len && !memcmp(e->key, key, len)) {
			*value = e->value;
			hit = 1;
			break;
		}
		off = e->next;
	}
	pthread_mutex_unlock(&t->lock);
	return hit;
}

static double mutex_batch(struct mtable *t, const struct keys *k, const uint32_t *o,
			  uint64_t *hits)
{
	static struct staged st;
	stage(&st, k, o);
	uint64_t acc = 0, h = 0;
	double t0 = now_ns();
	for (int i = 0; i < BATCH; i++) {
		uint64_t v = 0;
		h += (uint64_t)mtable_lookup(t, st.buf + st.off[i], st.len[i], &v);
		acc += v;
	}
	double r = (now_ns() - t0) / BATCH;
	sink = acc;
	*hits += h;
	return r;
}

#define ROUNDS 5

static void warm_shm(struct shmmap *m, const struct keys *k)
{
	uint64_t v, w = 0;
	for (size_t i = 0; i < k->n; i++)
		w += (uint64_t)shmmap_lookup(m, k->buf + k->off[i], k->len[i], &v);
	sink = w;
}

/* Each kind of lookup is measured in the steady state and in turns: ROUNDS
 * times, each kind gets an untimed pass over all its keys (its data in the
 * caches as far as it fits, page faults of fresh mappings done) and then a
 * block of BATCHES / ROUNDS timed batches. Taking turns spreads the machine's
 * changing load over all kinds; the warm pass keeps one kind from being
 * measured with another's data in the caches. `m2` (optional) is a second
 * map holding the same keys. */
static void time_lookups(struct shmmap *m, struct shmmap *m2, struct mtable *t,
			 const struct keys *in, const struct keys *out, double *hit,
			 double *miss, double *mutex_hit, double *hit2)
{
	size_t total = (size_t)BATCH * BATCHES;
	uint32_t *oh = make_order(in->n, total, 1), *om = make_order(out->n, total, 2),
		 *ox = make_order(in->n, total, 3), *o2 = make_order(in->n, total, 4);
	double ph[BATCHES], pm[BATCHES], px[BATCHES], p2[BATCHES];
	uint64_t hh = 0, hm = 0, hx = 0, h2 = 0;
	const int per_round = BATCHES / ROUNDS;

	for (int r = 0; r < ROUNDS; r++) {
		int b0 = r * per_round;
		warm_shm(m, in);
		for (int b = b0; b < b0 + per_round; b++)
			ph[b] = shm_batch(m, in, oh + (size_t)b * BATCH, &hh);
		warm_shm(m, out);
		for (int b = b0; b < b0 + per_round; b++)
			pm[b] = shm_batch(m, out, om + (size_t)b * BATCH, &hm);
		uint64_t v, w = 0;
		for (size_t i = 0; i < in->n; i++)
			w += (uint64_t)mtable_lookup(t, in->buf + in->off[i], in->len[i], &v);
		sink = w;
		for (int b = b0; b < b0 + per_round; b++)
			px[b] = mutex_batch(t, in, ox + (size_t)b * BATCH, &hx);
		if (m2) {
			warm_shm(m2, in);
			for (int b = b0; b < b0 + per_round; b++)
				p2[b] = shm_batch(m2, in, o2 + (size_t)b * BATCH, &h2);
		}
	}
	if (hh != total || hm != 0 || hx != total || (m2 && h2 != total)) {
		fprintf(stderr, "bench-shm: wrong lookup results (%llu/%llu/%llu/%llu of %zu)\n",
			(unsigned long long)hh, (unsigned long long)hm, (unsigned long long)hx,
			(unsigned long long)h2, total);
		exit(1);
	}
	*hit = median(ph, BATCHES);
	*miss = median(pm, BATCHES);
	*mutex_hit = median(px, BATCHES);
	if (m2)
		*hit2 = median(p2, BATCHES);
	free(oh);
	free(om);
	free(ox);
	free(o2);
}

/* ---- (b) Unix-socket round trip to a server holding the table ----------- */

static int read_full(int fd, void *buf, size_t n)
{
	char *p = buf;
	while (n) {
		ssize_t r = read(fd, p, n);
		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			return -1;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Server: [u16 len][key] in, [u64 hit][u64 value] out, until EOF. */
static void socket_server(int fd, struct shmmap *m)
{
	char key[SHMMAP_MAX_KEY];
	for (;;) {
		uint16_t len;
		if (read_full(fd, &len, 2) || read_full(fd, key, len))
			_exit(0);
		uint64_t reply[2] = { 0, 0 };
		reply[0] = (uint64_t)shmmap_lookup(m, key, len, &reply[1]);
		if (write(fd, reply, sizeof reply) != sizeof reply)
			_exit(1);
	}
}

static double time_socket_lookups(struct shmmap *m, const struct keys *k)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		die("socketpair");
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		close(sv[0]);
		socket_server(sv[1], m);
	}
	close(sv[1]);
	size_t total = (size_t)RTT_BATCH * RTT_BATCHES;
	uint32_t *order = make_order(k->n, total, 0xabc);
	double per[RTT_BATCHES];
	uint64_t hits = 0;
	char msg[2 + SHMMAP_MAX_KEY];
	for (int b = 0; b < RTT_BATCHES; b++) {
		const uint32_t *o = order + (size_t)b * RTT_BATCH;
		double t0 = now_ns();
		for (int i = 0; i < RTT_BATCH; i++) {
			uint16_t len = k->len[o[i]];
			memcpy(msg, &len, 2);
			memcpy(msg + 2, k->buf + k->off[o[i]], len);
			uint64_t reply[2];
			if (write(sv[0], msg, 2 + (size_t)len) != 2 + (ssize_t)len ||
			    read_full(sv[0], reply, sizeof reply))
				die("socket round trip");
			hits += reply[0];
		}
		per[b] = (now_ns() - t0) / RTT_BATCH;
	}
	close(sv[0]);
	waitpid(pid, NULL, 0);
	if (hits != total) {
		fprintf(stderr, "bench-shm: socket server lost keys\n");
		exit(1);
	}
	free(order);
	return median(per, RTT_BATCHES);
}

/* ---- a fresh process: what trace mode's short-lived processes pay -------- */

#define FRESH_RUNS 21
#define FRESH_LOOKUPS 100

/* In a new process: ns to attach read-only, and ns per lookup for its first
 * FRESH_LOOKUPS lookups of random keys (each may first-touch a page of the
 * mapping: a minor page fault). Medians over FRESH_RUNS processes. */
static void time_fresh_process(const char *path, const struct keys *k, int prefault,
			       double *attach_ns, double *first_ns)
{
	double at[FRESH_RUNS], fl[FRESH_RUNS];
	for (int run = 0; run < FRESH_RUNS; run++) {
		int pfd[2];
		if (pipe(pfd) != 0)
			die("pipe");
		fflush(NULL);
		pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			struct shmmap m;
			char err[256];
			double r[2];
			double t0 = now_ns();
			if (shmmap_attach(&m, path, SHMMAP_RDONLY, err, sizeof err) != 0)
				_exit(2);
			if (prefault && shmmap_prefault(&m) != 0)
				_exit(4);
			double t1 = now_ns();
			uint64_t hits = 0, v;
			for (int i = 0; i < FRESH_LOOKUPS; i++) {
				size_t j = mix((uint64_t)run * 1000 + (uint64_t)i) % k->n;
				hits += (uint64_t)shmmap_lookup(&m, k->buf + k->off[j], k->len[j], &v);
			}
			double t2 = now_ns();
			r[0] = t1 - t0;
			r[1] = (t2 - t1) / FRESH_LOOKUPS;
			if (hits != FRESH_LOOKUPS || write(pfd[1], r, sizeof r) != sizeof r)
				_exit(3);
			_exit(0);
		}
		close(pfd[1]);
		double r[2];
		int st;
		if (read_full(pfd[0], r, sizeof r) != 0)
			die("fresh process");
		close(pfd[0]);
		waitpid(pid, &st, 0);
		at[run] = r[0];
		fl[run] = r[1];
	}
	*attach_ns = median(at, FRESH_RUNS);
	*first_ns = median(fl, FRESH_RUNS);
}

/* ---- inserts per second with P processes -------------------------------- */

struct start_line {
	atomic_int ready, go;
	double done_ns[64];
};

static double inserts_per_s(int procs, const struct keys *k)
{
	double rates[INSERT_RUNS];
	char path[512];
	map_path(path, sizeof path, "insert");
	for (int run = 0; run < INSERT_RUNS; run++) {
		struct shmmap m;
		char err[512];
		unlink(path);
		if (shmmap_create(&m, path, NULL, err, sizeof err) != 0) {
			fprintf(stderr, "bench-shm: %s\n", err);
			exit(1);
		}
		struct start_line *sl = mmap(NULL, sizeof *sl, PROT_READ | PROT_WRITE,
					     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (sl == MAP_FAILED)
			die("mmap");
		pid_t pids[64];
		fflush(NULL);
		for (int p = 0; p < procs; p++) {
			pids[p] = fork();
			if (pids[p] < 0)
				die("fork");
			if (pids[p] == 0) {
				struct shmmap mine;
				if (shmmap_attach(&mine, path, SHMMAP_RDWR, err, sizeof err) != 0)
					_exit(2);
				atomic_fetch_add(&sl->ready, 1);
				while (!atomic_load(&sl->go))
					;
				for (size_t i = (size_t)p; i < k->n; i += (size_t)procs)
					if (shmmap_insert(&mine, k->buf + k->off[i], k->len[i], i, NULL) !=
					    SHMMAP_INSERTED)
						_exit(3);
				sl->done_ns[p] = now_ns();
				_exit(0);
			}
		}
		while (atomic_load(&sl->ready) < procs)
			usleep(100);
		double t0 = now_ns();
		atomic_store(&sl->go, 1);
		double last = t0;
		for (int p = 0; p < procs; p++) {
			int st;
			waitpid(pids[p], &st, 0);
			if (!WIFEXITED(st) || WEXITSTATUS(st)) {
				fprintf(stderr, "bench-shm: insert worker failed (%#x)\n", st);
				exit(1);
			}
			if (sl->done_ns[p] > last)
				last = sl->done_ns[p];
		}
		if (shmmap_validate(&m, err, sizeof err) != (long long)k->n) {
			fprintf(stderr, "bench-shm: map invalid after inserts: %s\n", err);
			exit(1);
		}
		rates[run] = k->n / ((last - t0) / 1e9);
		munmap(sl, sizeof *sl);
		shmmap_detach(&m);
		unlink(path);
	}
	return median(rates, INSERT_RUNS);
}

/* ---- main --------------------------------------------------------------- */

struct size_result {
	size_t n;
	double hit, miss, mutex_hit, bytes_per_key, bytes;
};

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s OUT.json\n", argv[0]);
		return 2;
	}
	tmpdir = getenv("TMPDIR");
	if (!tmpdir || !*tmpdir)
		tmpdir = "/tmp";
	static const size_t sizes[] = { 1000, 100000, 1000000 };
	struct size_result r[3];
	double socket_rtt = 0, zipf_hit = 0, load_ns = 0, root16_hit = 0;
	double fresh_attach = 0, fresh_lookup = 0, pf_attach = 0, pf_lookup = 0, warm_attach = 0;
	double root16_fresh = 0, serial_hit = 0, hash_ns = 0;

	for (int s = 0; s < 3; s++) {
		struct keys in, out;
		make_keys(&in, sizes[s], 0);
		make_keys(&out, sizes[s], 1);
		char path[512], err[512];
		map_path(path, sizeof path, "lookup");
		struct shmmap w, m;
		fill_map(&w, path, &in, NULL);
		/* Measure through a read-only handle, as trace clients use it. */
		if (shmmap_attach(&m, path, SHMMAP_RDONLY, err, sizeof err) != 0) {
			fprintf(stderr, "bench-shm: %s\n", err);
			return 1;
		}
		struct shmmap_stats st;
		shmmap_stats(&m, &st);
		r[s].n = sizes[s];
		r[s].bytes_per_key = (double)st.bytes_used / sizes[s];
		r[s].bytes = (double)st.bytes_used;
		/* At 100k keys, the same keys also go into a map created with
		 * 1 MiB, whose root has 2^16 slots instead of the default 2^18:
		 * more keys sit one subtrie further from the root. */
		struct shmmap small_w, small;
		char small_path[512];
		int with_small = sizes[s] == 100000;
		if (with_small) {
			map_path(small_path, sizeof small_path, "lookup-root16");
			struct shmmap_params p16 = { .initial_size = 1 << 20 };
			fill_map(&small_w, small_path, &in, &p16);
			if (shmmap_attach(&small, small_path, SHMMAP_RDONLY, err, sizeof err) != 0) {
				fprintf(stderr, "bench-shm: %s\n", err);
				return 1;
			}
		}
		struct mtable *t = mtable_create(sizes[s], &in);
		time_lookups(&m, with_small ? &small : NULL, t, &in, &out, &r[s].hit, &r[s].miss,
			     &r[s].mutex_hit, &root16_hit);
		munmap(t, t->size);
		if (with_small) {
			socket_rtt = time_socket_lookups(&m, &in);
			time_fresh_process(path, &in, 0, &fresh_attach, &fresh_lookup);
			double unused;
			time_fresh_process(small_path, &in, 0, &unused, &root16_fresh);
			double att[201];
			for (int i = 0; i < 201; i++) {
				struct shmmap a;
				double t0 = now_ns();
				if (shmmap_attach(&a, path, SHMMAP_RDONLY, err, sizeof err) != 0) {
					fprintf(stderr, "bench-shm: %s\n", err);
					return 1;
				}
				att[i] = now_ns() - t0;
				shmmap_detach(&a);
			}
			warm_attach = median(att, 201);
			time_fresh_process(path, &in, 1, &pf_attach, &pf_lookup);
			size_t total = (size_t)BATCH * BATCHES;
			uint32_t *z = make_zipf_order(in.n, total, 7);
			double per[BATCHES];
			uint64_t hits = 0;
			for (int b = 0; b < BATCHES; b++)
				per[b] = shm_batch(&m, &in, z + (size_t)b * BATCH, &hits);
			if (hits != total) {
				fprintf(stderr, "bench-shm: skewed lookups missed\n");
				return 1;
			}
			zipf_hit = median(per, BATCHES);
			free(z);
			uint32_t *u = make_order(in.n, total, 8);
			hits = 0;
			warm_shm(&m, &in);
			for (int b = 0; b < BATCHES; b++)
				per[b] = shm_serial_batch(&m, &in, u + (size_t)b * BATCH, &hits);
			if (hits != total) {
				fprintf(stderr, "bench-shm: serialized lookups missed\n");
				return 1;
			}
			serial_hit = median(per, BATCHES);
			for (int b = 0; b < BATCHES; b++)
				per[b] = hash_batch(&in, u + (size_t)b * BATCH, m.seed);
			hash_ns = median(per, BATCHES);
			free(u);
			load_ns = dependent_load_ns(st.bytes_used);
			shmmap_detach(&small);
			shmmap_detach(&small_w);
			unlink(small_path);
		}
		shmmap_detach(&m);
		shmmap_detach(&w);
		unlink(path);
		free_keys(&in);
		free_keys(&out);
	}

	struct keys ik;
	make_keys(&ik, INSERT_KEYS, 0);
	double ips[3];
	static const int procs[] = { 1, 2, 4 };
	for (int i = 0; i < 3; i++)
		ips[i] = inserts_per_s(procs[i], &ik);
	free_keys(&ik);

	printf("bench-shm: medians of %d batches of %d lookups (socket: %d of %d), keys are\n"
	       "~50-byte paths + access class, looked up in random order (each batch's keys\n"
	       "copied side by side before it is timed, as a hook has its path at hand),\n"
	       "map created with default parameters, lookups through a read-only handle,\n"
	       "each kind measured after one untimed pass over all its keys\n\n",
	       BATCHES, BATCH, RTT_BATCHES, RTT_BATCH);
	printf("%-44s %10s %10s %10s\n", "ns per lookup", "1k keys", "100k keys", "1M keys");
	printf("%-44s %10.1f %10.1f %10.1f\n", "shm map, hit", r[0].hit, r[1].hit, r[2].hit);
	printf("%-44s %10.1f %10.1f %10.1f\n", "shm map, miss", r[0].miss, r[1].miss, r[2].miss);
	printf("%-44s %10.1f %10.1f %10.1f\n", "(a) pshared mutex + hash table, hit",
	       r[0].mutex_hit, r[1].mutex_hit, r[2].mutex_hit);
	printf("%-44s %10s %10.1f %10s\n", "(b) unix socket round trip, hit", "-", socket_rtt, "-");
	printf("%-44s %10s %10.1f %10s\n", "shm map, hit, Zipf(1)-skewed keys", "-", zipf_hit, "-");
	printf("%-44s %10s %10.1f %10s\n", "shm map, hit, each waiting for the previous", "-", serial_hit, "-");
	printf("%-44s %10s %10.1f %10s\n", "hashing the key alone (part of every lookup)", "-", hash_ns, "-");
	printf("%-44s %10s %10.1f %10s\n", "shm map, hit, root of 2^16 slots (1 MiB)", "-", root16_hit, "-");
	printf("%-44s %10s %10.1f %10s\n", "one random dependent load (calibration)", "-", load_ns, "-");
	printf("%-44s %10s %10.1f %10s\n", "attach read-only (+ detach not timed)", "-", warm_attach, "-");
	printf("%-44s %10s %10.1f %10s\n", "new process: attach read-only", "-", fresh_attach, "-");
	printf("%-44s %10s %10.1f %10s\n", "new process: each of its first 100 hits", "-", fresh_lookup, "-");
	printf("%-44s %10s %10.1f %10s\n", "new process: attach + shmmap_prefault", "-", pf_attach, "-");
	printf("%-44s %10s %10.1f %10s\n", "  then each of its first 100 hits", "-", pf_lookup, "-");
	printf("%-44s %10s %10.1f %10s\n", "new process, root of 2^16: first 100 hits", "-", root16_fresh, "-");
	printf("%-44s %10.2f %10.2f %10.2f\n", "ratio (a) / shm hit", r[0].mutex_hit / r[0].hit,
	       r[1].mutex_hit / r[1].hit, r[2].mutex_hit / r[2].hit);
	printf("%-44s %10s %10.1f %10s\n", "ratio (b) / shm hit", "-", socket_rtt / r[1].hit, "-");
	printf("%-44s %10s %10.2f %10s\n", "ratio shm hit / dependent load", "-", r[1].hit / load_ns, "-");
	printf("%-44s %10.0f %10.0f %10.0f\n", "shm map bytes used per key", r[0].bytes_per_key,
	       r[1].bytes_per_key, r[2].bytes_per_key);
	printf("\n%-44s %10s %10s %10s\n", "shm inserts per second (400k keys)", "1 proc",
	       "2 procs", "4 procs");
	printf("%-44s %10.0f %10.0f %10.0f\n", "median of 3 runs, file grows from 4 MiB", ips[0],
	       ips[1], ips[2]);
	printf("%-44s %10.2f %10.2f %10.2f\n", "ratio to 1 process", 1.0, ips[1] / ips[0],
	       ips[2] / ips[0]);
	printf("\nThe calibration row chases pointers at random through as many bytes as the\n"
	       "100k-key map uses (%.1f MiB): no lookup that must touch that memory at random\n"
	       "can beat it. \"New process\" rows: medians over %d forked children, each\n"
	       "attaching to the 100k-key map and looking up %d random keys.\n",
	       r[1].bytes / 1048576.0, FRESH_RUNS, FRESH_LOOKUPS);
	printf("\ntargets: hit at 100k keys < 100 ns: %s (%.1f ns); socket / shm >= 30x: %s (%.0fx)\n",
	       r[1].hit < 100 ? "met" : "MISSED", r[1].hit, socket_rtt / r[1].hit >= 30 ? "met" : "MISSED",
	       socket_rtt / r[1].hit);

	FILE *f = fopen(argv[1], "w");
	if (!f)
		die(argv[1]);
	fprintf(f, "{\n");
	const char *names[] = { "1k", "100k", "1m" };
	for (int s = 0; s < 3; s++) {
		fprintf(f, "  \"hit_ns_%s\": %.1f,\n", names[s], r[s].hit);
		fprintf(f, "  \"miss_ns_%s\": %.1f,\n", names[s], r[s].miss);
		fprintf(f, "  \"mutex_hit_ns_%s\": %.1f,\n", names[s], r[s].mutex_hit);
		fprintf(f, "  \"bytes_per_key_%s\": %.1f,\n", names[s], r[s].bytes_per_key);
	}
	fprintf(f, "  \"socket_roundtrip_ns\": %.1f,\n", socket_rtt);
	fprintf(f, "  \"zipf_hit_ns_100k\": %.1f,\n", zipf_hit);
	fprintf(f, "  \"serial_hit_ns_100k\": %.1f,\n", serial_hit);
	fprintf(f, "  \"hash_ns_100k\": %.1f,\n", hash_ns);
	fprintf(f, "  \"attach_ns\": %.1f,\n", warm_attach);
	fprintf(f, "  \"fresh_process_attach_ns\": %.1f,\n", fresh_attach);
	fprintf(f, "  \"fresh_process_first_hits_ns_100k\": %.1f,\n", fresh_lookup);
	fprintf(f, "  \"fresh_process_attach_prefault_ns_100k\": %.1f,\n", pf_attach);
	fprintf(f, "  \"fresh_process_prefaulted_first_hits_ns_100k\": %.1f,\n", pf_lookup);
	fprintf(f, "  \"hit_ns_100k_root16\": %.1f,\n", root16_hit);
	fprintf(f, "  \"fresh_process_first_hits_ns_100k_root16\": %.1f,\n", root16_fresh);
	fprintf(f, "  \"dependent_load_ns_100k_bytes\": %.1f,\n", load_ns);
	fprintf(f, "  \"map_bytes_100k\": %.0f,\n", r[1].bytes);
	fprintf(f, "  \"ratio_socket_over_shm_hit_100k\": %.2f,\n", socket_rtt / r[1].hit);
	fprintf(f, "  \"ratio_mutex_over_shm_hit_100k\": %.2f,\n", r[1].mutex_hit / r[1].hit);
	fprintf(f, "  \"inserts_per_s_1proc\": %.0f,\n", ips[0]);
	fprintf(f, "  \"inserts_per_s_2proc\": %.0f,\n", ips[1]);
	fprintf(f, "  \"inserts_per_s_4proc\": %.0f,\n", ips[2]);
	fprintf(f, "  \"cpus_online\": %ld\n", sysconf(_SC_NPROCESSORS_ONLN));
	fprintf(f, "}\n");
	if (fclose(f) != 0)
		die(argv[1]);
	return 0;
}
