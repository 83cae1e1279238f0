/* Concurrency inside one process: threads inserting and looking up overlapping
 * keys while the map grows (the variant `make SAN=thread check` vets), and
 * lookups and inserts from a SIGALRM handler interrupting inserts. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/time.h>

#include "shm_test.h"

#define THREADS 4

struct shared {
	struct shmmap *m;
	int nkeys;
	size_t spread;
	_Atomic uint64_t *winner; /* per key: the value every thread must agree on */
	atomic_int bad;
	pthread_barrier_t go;
};

struct worker {
	struct shared *s;
	int id;
};

static void agree(struct shared *s, int k, uint64_t w)
{
	uint64_t expect = 0;
	if ((w & 0xffffffffu) != (uint64_t)k)
		atomic_fetch_add(&s->bad, 1);
	else if (!atomic_compare_exchange_strong(&s->winner[k], &expect, w) && expect != w)
		atomic_fetch_add(&s->bad, 1);
}

static void *work(void *arg)
{
	struct worker *w = arg;
	struct shared *s = w->s;
	char key[SHMMAP_MAX_KEY];
	pthread_barrier_wait(&s->go);
	/* Every thread walks the keys in the same order, skipping its own third
	 * of them, so most keys are raced for by several threads at once. */
	for (int j = 0; j < s->nkeys; j++) {
		int k = (int)((uint64_t)j * 7919 % (uint64_t)s->nkeys);
		if (shm_test_mix((uint64_t)k * 31 + (uint64_t)w->id) % 3 == 0)
			continue;
		size_t len = shm_test_key(key, (uint64_t)k, s->spread);
		uint64_t mine = ((uint64_t)(w->id + 1) << 32) | (uint64_t)k, got = 0;
		enum shmmap_status st = shmmap_insert(s->m, key, len, mine, &got);
		if (st != SHMMAP_INSERTED && st != SHMMAP_EXISTS) {
			atomic_fetch_add(&s->bad, 1);
			continue;
		}
		agree(s, k, got);
		/* A key this thread saw earlier must still be there, unchanged. */
		int back = (int)((uint64_t)(j / 2) * 7919 % (uint64_t)s->nkeys);
		uint64_t v;
		if (shm_test_mix((uint64_t)back * 31 + (uint64_t)w->id) % 3 == 0)
			continue;
		len = shm_test_key(key, (uint64_t)back, s->spread);
		if (!shmmap_lookup(s->m, key, len, &v))
			atomic_fetch_add(&s->bad, 1);
		else
			agree(s, back, v);
		/* And a key nobody inserts must miss. */
		len = shm_test_key(key, (uint64_t)(s->nkeys + k), s->spread);
		if (shmmap_lookup(s->m, key, len, &v))
			atomic_fetch_add(&s->bad, 1);
	}
	return NULL;
}

static void threads_race_while_growing(void **state)
{
	(void)state;
	char *dir = shm_test_dir();
	char path[600], err[256];
	struct shmmap m;
	shm_test_create(&m, dir, path, 64 << 10, 256 << 20);

	struct shared s = { .m = &m, .nkeys = SHM_TEST_SANITIZED ? 6000 : 40000, .spread = 400 };
	s.winner = calloc(s.nkeys, sizeof *s.winner);
	pthread_barrier_init(&s.go, NULL, THREADS);
	pthread_t t[THREADS];
	struct worker w[THREADS];
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ &s, i };
		assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&s.go);
	assert_int_equal(atomic_load(&s.bad), 0);

	char key[SHMMAP_MAX_KEY];
	int expected = 0;
	for (int k = 0; k < s.nkeys; k++) {
		int handled = 0;
		for (int id = 0; id < THREADS; id++)
			handled |= shm_test_mix((uint64_t)k * 31 + (uint64_t)id) % 3 != 0;
		uint64_t v;
		int hit = shmmap_lookup(&m, key, shm_test_key(key, k, s.spread), &v);
		assert_int_equal(hit, handled);
		if (hit)
			assert_int_equal(v, atomic_load(&s.winner[k]));
		expected += handled;
	}
	long long n = shmmap_validate(&m, err, sizeof err);
	if (n < 0)
		fail_msg("validate: %s", err);
	assert_int_equal(n, expected);
	struct shmmap_stats st;
	shmmap_stats(&m, &st);
	assert_int_equal(st.entries, expected);
	assert_true(st.bytes_committed >= 16 * (64 << 10)); /* grew many times over */
	free(s.winner);
	shmmap_detach(&m);
	shm_test_rmdir(dir);
}

/* ---- SIGALRM: the handler inserts its own keys and reads the main loop's. */

static struct shmmap *alarm_map;
static volatile sig_atomic_t main_done;     /* main-loop keys inserted so far */
static volatile sig_atomic_t handler_count; /* handler keys inserted so far */
static volatile sig_atomic_t handler_bad;

#define HANDLER_KEY_BASE 10000000

struct counted_worker {
	struct worker w;
	atomic_int *done;
};

static void *work_then_count(void *arg)
{
	struct counted_worker *c = arg;
	work(&c->w);
	atomic_fetch_add(c->done, 1);
	return NULL;
}

/* `kiln shm validate` may run on a live map: while threads insert (into a
 * 512-bucket root, so buckets overflow into subtries), validate must never
 * report a sound map as corrupt. */
static void validate_while_threads_insert(void **state)
{
	(void)state;
	char *dir = shm_test_dir();
	char path[600], err[256];
	struct shmmap m;
	shm_test_create(&m, dir, path, 64 << 10, 256 << 20);
	struct shared s = { .m = &m, .nkeys = SHM_TEST_SANITIZED ? 3000 : 20000, .spread = 40 };
	s.winner = calloc(s.nkeys, sizeof *s.winner);
	pthread_barrier_init(&s.go, NULL, THREADS);
	atomic_int done = 0;
	pthread_t t[THREADS];
	struct counted_worker w[THREADS];
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct counted_worker){ { &s, i }, &done };
		assert_int_equal(pthread_create(&t[i], NULL, work_then_count, &w[i]), 0);
	}
	int rounds = 0;
	while (atomic_load(&done) < THREADS) {
		if (shmmap_validate(&m, err, sizeof err) < 0)
			fail_msg("validate during inserts (round %d): %s", rounds, err);
		rounds++;
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&s.go);
	assert_int_equal(atomic_load(&s.bad), 0);
	assert_true(rounds > 0);
	long long n = shmmap_validate(&m, err, sizeof err);
	if (n < 0)
		fail_msg("validate: %s", err);
	struct shmmap_stats st;
	shmmap_stats(&m, &st);
	assert_int_equal(n, (long long)st.entries);
	assert_true(st.subtries > 0); /* buckets did overflow */
	free(s.winner);
	shmmap_detach(&m);
	shm_test_rmdir(dir);
}

static void on_alarm(int sig)
{
	(void)sig;
	char key[SHMMAP_MAX_KEY];
	int n = handler_count;
	size_t len = shm_test_key(key, HANDLER_KEY_BASE + (uint64_t)n, 300);
	uint64_t w;
	if (shmmap_insert(alarm_map, key, len, 7ull << 40 | (uint64_t)n, &w) != SHMMAP_INSERTED ||
	    w != (7ull << 40 | (uint64_t)n))
		handler_bad = handler_bad + 1;
	handler_count = n + 1;
	int done = main_done;
	if (done > 0) {
		uint64_t v;
		int k = (int)((uint64_t)n * 7919 % (uint64_t)done);
		len = shm_test_key(key, (uint64_t)k, 300);
		if (!shmmap_lookup(alarm_map, key, len, &v) || v != (uint64_t)k)
			handler_bad = handler_bad + 1;
	}
}

static void signal_handler_inserts_and_lookups(void **state)
{
	(void)state;
	char *dir = shm_test_dir();
	char path[600], err[256];
	struct shmmap m;
	shm_test_create(&m, dir, path, 64 << 10, 256 << 20);
	alarm_map = &m;
	main_done = 0;
	handler_count = 0;

	struct sigaction sa = { .sa_handler = on_alarm };
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	assert_int_equal(sigaction(SIGALRM, &sa, NULL), 0);
	struct itimerval it = { { 0, 50 }, { 0, 50 } };
	assert_int_equal(setitimer(ITIMER_REAL, &it, NULL), 0);

	char key[SHMMAP_MAX_KEY];
	int n = 0;
	/* Until the handler has run a few hundred times, mostly mid-insert. */
	while (handler_count < 300 || n < 20000) {
		size_t len = shm_test_key(key, (uint64_t)n, 300);
		if (shmmap_insert(&m, key, len, (uint64_t)n, NULL) != SHMMAP_INSERTED)
			fail_msg("main insert %d failed", n);
		main_done = ++n;
		assert_true(n < 2000000);
	}
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &off, NULL);
	signal(SIGALRM, SIG_DFL);

	assert_int_equal(handler_bad, 0);
	for (int i = 0; i < n; i++) {
		uint64_t v;
		assert_int_equal(shmmap_lookup(&m, key, shm_test_key(key, i, 300), &v), 1);
		assert_int_equal(v, i);
	}
	for (int i = 0; i < handler_count; i++) {
		uint64_t v;
		size_t len = shm_test_key(key, HANDLER_KEY_BASE + (uint64_t)i, 300);
		assert_int_equal(shmmap_lookup(&m, key, len, &v), 1);
		assert_int_equal(v, 7ull << 40 | (uint64_t)i);
	}
	long long c = shmmap_validate(&m, err, sizeof err);
	if (c < 0)
		fail_msg("validate: %s", err);
	assert_int_equal(c, n + handler_count);
	shmmap_detach(&m);
	shm_test_rmdir(dir);
}

/* ---- lazy attach shared by threads ------------------------------------- */

struct lazy_ctx {
	const char *path;
	atomic_int opens;
	int fail;
};

static int open_counted(void *arg)
{
	struct lazy_ctx *c = arg;
	atomic_fetch_add(&c->opens, 1);
	return c->fail ? -1 : open(c->path, O_RDONLY | O_CLOEXEC);
}

static struct shmmap_lazy lazy;
static struct lazy_ctx lazy_ctx;

struct lazy_thread {
	struct shmmap *got;
	int hits;
};

static void *lazy_user(void *arg)
{
	struct lazy_thread *t = arg;
	char key[SHMMAP_MAX_KEY];
	/* Until this thread has done 2000 lookups through the map; while another
	 * thread is attaching it gets NULL (uncached) and tries again. */
	for (int i = 0; i < 2000;) {
		struct shmmap *m = shmmap_lazy_get(&lazy, open_counted, &lazy_ctx, SHMMAP_RDONLY);
		if (!m) {
			sched_yield();
			continue;
		}
		if (t->got && t->got != m)
			return NULL;
		t->got = m;
		uint64_t v;
		if (shmmap_lookup(m, key, shm_test_key(key, (uint64_t)i % 500, 20), &v) &&
		    v == (uint64_t)i % 500)
			t->hits++;
		i++;
	}
	return NULL;
}

static void lazy_attach_once_for_all_threads(void **state)
{
	(void)state;
	char *dir = shm_test_dir();
	char path[600], err[256], key[SHMMAP_MAX_KEY];
	snprintf(path, sizeof path, "%s/map", dir);
	struct shmmap w;
	assert_int_equal(shmmap_create(&w, path, NULL, err, sizeof err), 0);
	for (uint64_t i = 0; i < 500; i++)
		assert_int_equal(shmmap_insert(&w, key, shm_test_key(key, i, 20), i, NULL),
				 SHMMAP_INSERTED);

	memset(&lazy, 0, sizeof lazy);
	lazy_ctx = (struct lazy_ctx){ .path = path };
	pthread_t t[THREADS];
	struct lazy_thread lt[THREADS] = { { 0 } };
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, lazy_user, &lt[i]), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(atomic_load(&lazy_ctx.opens), 1);
	for (int i = 0; i < THREADS; i++) {
		assert_ptr_equal(lt[i].got, &lazy.map);
		assert_int_equal(lt[i].hits, 2000);
	}
	assert_int_equal(shmmap_insert(&lazy.map, "x", 1, 1, NULL), SHMMAP_INVALID);
	shmmap_detach(&lazy.map);

	/* A failed open is tried once; after that every caller goes uncached. */
	memset(&lazy, 0, sizeof lazy);
	lazy_ctx = (struct lazy_ctx){ .path = path, .fail = 1 };
	for (int i = 0; i < 10; i++)
		assert_null(shmmap_lazy_get(&lazy, open_counted, &lazy_ctx, SHMMAP_RDONLY));
	assert_int_equal(atomic_load(&lazy_ctx.opens), 1);

	shmmap_detach(&w);
	shm_test_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(threads_race_while_growing),
		cmocka_unit_test(validate_while_threads_insert),
		cmocka_unit_test(signal_handler_inserts_and_lookups),
		cmocka_unit_test(lazy_attach_once_for_all_threads),
	};
	return cmocka_run_group_tests_name("shm-threads", tests, NULL, NULL);
}
