/* Concurrency across processes: 4 processes x 4 threads racing on overlapping
 * keys while the file grows from 64 KiB to well over 64 MiB; and a chaos run
 * in which a supervisor SIGKILLs and SIGSTOP/SIGCONTs inserting workers
 * hundreds of times, after which the map must validate and hold every key a
 * worker reported as inserted, with the reported value. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>

#include "shm/layout.h"
#include "shm_test.h"

/* Anonymous shared memory for the processes' reports. */
static void *shared_alloc(size_t n)
{
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	return p;
}

#define MAX_GENERATIONS 1024

struct board {
	atomic_int bad;
	atomic_long reported;
	atomic_int ready; /* start line for the stress writers */
	/* chaos: worker generation g inserted its fresh keys 0 .. progress[g]-1 */
	_Atomic uint64_t progress[MAX_GENERATIONS];
	_Atomic uint64_t winner[]; /* per key: the first writer's value, once known */
};

/* Records that key k holds value w; counts a disagreement as bad. */
static void report(struct board *b, uint64_t k, uint64_t w)
{
	uint64_t expect = 0;
	if ((w & 0xffffffffu) != k) {
		atomic_fetch_add(&b->bad, 1);
		return;
	}
	if (atomic_compare_exchange_strong(&b->winner[k], &expect, w))
		atomic_fetch_add(&b->reported, 1);
	else if (expect != w)
		atomic_fetch_add(&b->bad, 1);
}

static void check_all_reported(struct shmmap *m, struct board *b, int nkeys, size_t spread)
{
	char key[SHMMAP_MAX_KEY];
	for (int k = 0; k < nkeys; k++) {
		uint64_t w = atomic_load(&b->winner[k]), v;
		if (!w)
			continue;
		if (shmmap_lookup(m, key, shm_test_key(key, k, spread), &v) != 1)
			fail_msg("key %d reported as inserted is missing", k);
		if (v != w)
			fail_msg("key %d holds %#llx, reported %#llx", k, (unsigned long long)v,
				 (unsigned long long)w);
	}
}

static void reset_child_signals(void)
{
	int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		signal(sigs[i], SIG_DFL);
}

/* ---- 4 processes x 4 threads ------------------------------------------- */

#define PROCS 4
#define THREADS 4

struct stress {
	const char *path;
	int nkeys;
	size_t spread;
	struct board *b;
	int proc;
};

struct thread_arg {
	struct stress *s;
	struct shmmap *m;
	int id; /* 0 .. PROCS*THREADS-1 */
};

static void *stress_thread(void *arg)
{
	struct thread_arg *t = arg;
	struct stress *s = t->s;
	char key[SHMMAP_MAX_KEY];
	atomic_fetch_add(&s->b->ready, 1);
	while (atomic_load(&s->b->ready) < PROCS * THREADS)
		sched_yield();
	/* Every writer walks the keys in the same order, skipping a third of
	 * them (its own third), so most keys are raced for by several writers at
	 * the same moment, in the same and in different processes. */
	for (int j = 0; j < s->nkeys; j++) {
		int k = (int)((uint64_t)j * 7919 % (uint64_t)s->nkeys);
		if (shm_test_mix((uint64_t)k * 31 + (uint64_t)t->id) % 3 == 0)
			continue;
		size_t len = shm_test_key(key, (uint64_t)k, s->spread);
		uint64_t mine = ((uint64_t)(t->id + 1) << 32) | (uint64_t)k, got;
		enum shmmap_status st = shmmap_insert(t->m, key, len, mine, &got);
		if (st != SHMMAP_INSERTED && st != SHMMAP_EXISTS) {
			atomic_fetch_add(&s->b->bad, 1);
			continue;
		}
		report(s->b, (uint64_t)k, got);
		/* A key this writer handled earlier must be there, unchanged. */
		int back = (int)((uint64_t)(j / 2) * 7919 % (uint64_t)s->nkeys);
		if (shm_test_mix((uint64_t)back * 31 + (uint64_t)t->id) % 3 == 0)
			continue;
		uint64_t v;
		if (shmmap_lookup(t->m, key, shm_test_key(key, (uint64_t)back, s->spread), &v) != 1)
			atomic_fetch_add(&s->b->bad, 1);
		else
			report(s->b, (uint64_t)back, v);
	}
	return NULL;
}

static void stress_process(struct stress *s)
{
	struct shmmap m;
	char err[256];
	if (shmmap_attach(&m, s->path, SHMMAP_RDWR, err, sizeof err) != 0) {
		fprintf(stderr, "%s\n", err);
		_exit(3);
	}
	pthread_t t[THREADS];
	struct thread_arg a[THREADS];
	for (int i = 0; i < THREADS; i++) {
		a[i] = (struct thread_arg){ s, &m, s->proc * THREADS + i };
		if (pthread_create(&t[i], NULL, stress_thread, &a[i]) != 0)
			_exit(4);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	shmmap_detach(&m);
}

static void processes_race_while_growing(void **state)
{
	(void)state;
	char *dir = shm_test_dir();
	char path[600], err[256];
	struct shmmap m;
	shm_test_create(&m, dir, path, 64 << 10, 512ull << 20);

	/* Keys average ~2 KiB (up to PATH_MAX): 40k of them need > 64 MiB. */
	struct stress s = { .path = path, .nkeys = SHM_TEST_SANITIZED ? 4000 : 40000,
			    .spread = PATH_MAX - 64 };
	s.b = shared_alloc(sizeof *s.b + s.nkeys * sizeof(uint64_t));
	pid_t pids[PROCS];
	fflush(NULL);
	for (int i = 0; i < PROCS; i++) {
		s.proc = i;
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0) {
			reset_child_signals();
			stress_process(&s);
			_exit(0);
		}
	}
	for (int i = 0; i < PROCS; i++) {
		int st;
		assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			fail_msg("stress process %d: status %#x", i, st);
	}
	assert_int_equal(atomic_load(&s.b->bad), 0);
	int expected = 0;
	for (int k = 0; k < s.nkeys; k++) {
		int handled = 0;
		for (int id = 0; id < PROCS * THREADS; id++)
			handled |= shm_test_mix((uint64_t)k * 31 + (uint64_t)id) % 3 != 0;
		expected += handled;
	}
	assert_int_equal(atomic_load(&s.b->reported), expected);
	check_all_reported(&m, s.b, s.nkeys, s.spread);
	long long n = shmmap_validate(&m, err, sizeof err);
	if (n < 0)
		fail_msg("validate: %s", err);
	assert_int_equal(n, expected);
	struct shmmap_stats st;
	shmmap_stats(&m, &st);
	print_message("stress: %d keys, file grew from 64 KiB to %llu bytes\n", s.nkeys,
		      (unsigned long long)st.bytes_committed);
	if (!SHM_TEST_SANITIZED)
		assert_true(st.bytes_committed > 64ull << 20);
	munmap(s.b, sizeof *s.b + s.nkeys * sizeof(uint64_t));
	shmmap_detach(&m);
	shm_test_rmdir(dir);
}

/* ---- chaos ------------------------------------------------------------- */

#define WORKERS 4
#define CHAOS_KEYS 20000     /* raced for by every worker */
#define CHAOS_SPREAD 200
#define FRESH_BASE 100000000ull /* each worker's own keys: never raced for */
#define FRESH_STRIDE 10000000ull
#define FRESH_SPREAD 40

static uint64_t fresh_key(uint64_t gen, uint64_t j)
{
	return FRESH_BASE + gen * FRESH_STRIDE + j;
}

static void chaos_worker(const char *path, struct board *b, uint64_t gen)
{
	struct shmmap m;
	char err[256], key[SHMMAP_MAX_KEY];
	if (shmmap_attach(&m, path, SHMMAP_RDWR, err, sizeof err) != 0)
		_exit(3);
	uint64_t x = shm_test_mix(gen + 1);
	/* Mostly keys of its own, so that most blows land mid-insert on an
	 * insert that really adds; every fourth one a key everybody races for. */
	for (uint64_t j = 0;; j++) {
		uint64_t id = fresh_key(gen, j);
		if (shmmap_insert(&m, key, shm_test_key(key, id, FRESH_SPREAD), id, NULL) !=
		    SHMMAP_INSERTED)
			atomic_fetch_add(&b->bad, 1);
		atomic_store(&b->progress[gen], j + 1);
		if (j % 4)
			continue;
		x = shm_test_mix(x);
		uint64_t k = x % CHAOS_KEYS, got;
		size_t len = shm_test_key(key, k, CHAOS_SPREAD);
		enum shmmap_status st = shmmap_insert(&m, key, len, gen << 32 | k, &got);
		if (st == SHMMAP_INSERTED || st == SHMMAP_EXISTS)
			report(b, k, got);
		else
			atomic_fetch_add(&b->bad, 1);
		uint64_t other = (x >> 20) % CHAOS_KEYS, want = atomic_load(&b->winner[other]), v;
		if (want &&
		    (shmmap_lookup(&m, key, shm_test_key(key, other, CHAOS_SPREAD), &v) != 1 ||
		     v != want))
			atomic_fetch_add(&b->bad, 1);
	}
}

static pid_t spawn_worker(const char *path, struct board *b, uint64_t gen)
{
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		reset_child_signals();
		chaos_worker(path, b, gen);
		_exit(0);
	}
	return pid;
}

static void pause_us(uint64_t us)
{
	struct timespec ts = { 0, (long)us * 1000 };
	nanosleep(&ts, NULL);
}

static void killed_and_stopped_workers_leave_a_valid_map(void **state)
{
	(void)state;
	char *dir = shm_test_dir();
	char path[600], err[256];
	struct shmmap m;
	shm_test_create(&m, dir, path, 64 << 10, 256ull << 20);
	size_t bsize = sizeof(struct board) + CHAOS_KEYS * sizeof(uint64_t);
	struct board *b = shared_alloc(bsize);

	uint64_t gen = 1;
	pid_t w[WORKERS];
	for (int i = 0; i < WORKERS; i++)
		w[i] = spawn_worker(path, b, gen++);
	int kills = 0, stops = 0;
	uint64_t x = 12345;
	for (int round = 0; round < 400; round++) {
		assert_true(gen < MAX_GENERATIONS);
		x = shm_test_mix(x);
		int i = (int)(x % WORKERS);
		pause_us(x >> 54); /* 0..1023 us */
		if ((x >> 8) & 1) {
			kill(w[i], SIGKILL);
			waitpid(w[i], NULL, 0);
			w[i] = spawn_worker(path, b, gen++);
			kills++;
		} else {
			kill(w[i], SIGSTOP);
			pause_us((x >> 20) % 300);
			kill(w[i], SIGCONT);
			stops++;
		}
	}
	/* Freeze every worker wherever it is: the map must still take inserts
	 * (nobody holds anything), then kill them all. */
	for (int i = 0; i < WORKERS; i++)
		kill(w[i], SIGSTOP);
	char key[SHMMAP_MAX_KEY];
	int fresh = 0;
	for (int k = 0; k < 2000; k++) {
		size_t len = shm_test_key(key, CHAOS_KEYS + (uint64_t)k, CHAOS_SPREAD);
		assert_int_equal(shmmap_insert(&m, key, len, (uint64_t)k, NULL), SHMMAP_INSERTED);
		fresh++;
	}
	for (int i = 0; i < WORKERS; i++) {
		kill(w[i], SIGKILL);
		waitpid(w[i], NULL, 0);
	}
	assert_int_equal(kills + stops, 400);
	assert_true(kills > 100 && stops > 100);

	assert_int_equal(atomic_load(&b->bad), 0);
	long reported = atomic_load(&b->reported);
	assert_true(reported > 100); /* the workers did work between the blows */
	long long n = shmmap_validate(&m, err, sizeof err);
	if (n < 0)
		fail_msg("validate after chaos: %s", err);
	assert_true(n >= reported + fresh);
	check_all_reported(&m, b, CHAOS_KEYS, CHAOS_SPREAD);
	uint64_t fresh_reported = 0;
	for (uint64_t g = 1; g < gen; g++) {
		uint64_t done = atomic_load(&b->progress[g]);
		fresh_reported += done;
		for (uint64_t j = 0; j < done; j++) {
			uint64_t id = fresh_key(g, j), v;
			if (shmmap_lookup(&m, key, shm_test_key(key, id, FRESH_SPREAD), &v) != 1 ||
			    v != id)
				fail_msg("worker %llu's key %llu reported as inserted is missing",
					 (unsigned long long)g, (unsigned long long)j);
		}
	}
	assert_true((long long)(reported + fresh_reported + fresh) <= n);
	struct shmmap_stats st;
	shmmap_stats(&m, &st);
	print_message("chaos: %d SIGKILLs, %d SIGSTOP/SIGCONTs; %llu keys reported, %lld in the "
		      "map, %llu bytes used\n", kills, stops,
		      (unsigned long long)(reported + fresh_reported), n,
		      (unsigned long long)st.bytes_used);
	/* Every key the chaos left out can still be added. */
	for (uint64_t k = 0; k < CHAOS_KEYS; k++) {
		uint64_t got;
		size_t len = shm_test_key(key, k, CHAOS_SPREAD);
		enum shmmap_status st = shmmap_insert(&m, key, len, 1ull << 60 | k, &got);
		assert_true(st == SHMMAP_INSERTED || st == SHMMAP_EXISTS);
		assert_int_equal(got & 0xffffffffu, k);
	}
	long long after = shmmap_validate(&m, err, sizeof err);
	if (after < 0)
		fail_msg("validate: %s", err);
	assert_true(after >= CHAOS_KEYS + fresh + (long long)fresh_reported);
	munmap(b, bsize);
	shmmap_detach(&m);
	shm_test_rmdir(dir);
}

/* ---- fork while other threads insert ------------------------------------ */

struct busy {
	struct shmmap *m;
	int id;
	atomic_int *stop;
};

static void *busy_inserter(void *arg)
{
	struct busy *b = arg;
	char key[SHMMAP_MAX_KEY];
	/* The first pass adds keys, later passes find them: always inserting. */
	for (uint64_t j = 0; !atomic_load(b->stop); j++) {
		uint64_t id = 50000000ull * (uint64_t)(b->id + 1) + j % 20000;
		enum shmmap_status st = shmmap_insert(b->m, key, shm_test_key(key, id, 100), id, NULL);
		if (st != SHMMAP_INSERTED && st != SHMMAP_EXISTS)
			break;
	}
	return NULL;
}

/* A child forked while other threads are in the middle of inserts must find
 * nothing held: it looks up what was there before, inserts its own keys and
 * exits; had anything taken a lock, the child would hang here. */
static void fork_while_threads_insert(void **state)
{
	(void)state;
#ifdef __SANITIZE_THREAD__
	skip(); /* TSan does not support fork in a multithreaded process */
#endif
	char *dir = shm_test_dir();
	char path[600], err[256], key[SHMMAP_MAX_KEY];
	struct shmmap m;
	shm_test_create(&m, dir, path, 64 << 10, 256ull << 20);
	for (uint64_t i = 0; i < 2000; i++)
		assert_int_equal(shmmap_insert(&m, key, shm_test_key(key, i, 60), i, NULL),
				 SHMMAP_INSERTED);
	atomic_int stop = 0;
	pthread_t t[3];
	struct busy b[3];
	for (int i = 0; i < 3; i++) {
		b[i] = (struct busy){ &m, i, &stop };
		assert_int_equal(pthread_create(&t[i], NULL, busy_inserter, &b[i]), 0);
	}
	for (int c = 0; c < 30; c++) {
		fflush(NULL);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			alarm(20); /* a hang fails the test instead of stalling it */
			for (uint64_t i = 0; i < 2000; i++) {
				uint64_t v;
				if (shmmap_lookup(&m, key, shm_test_key(key, i, 60), &v) != 1 || v != i)
					_exit(10);
			}
			for (uint64_t i = 0; i < 200; i++) {
				uint64_t id = 90000000ull + (uint64_t)c * 1000 + i;
				if (shmmap_insert(&m, key, shm_test_key(key, id, 60), id, NULL) !=
				    SHMMAP_INSERTED)
					_exit(11);
			}
			_exit(0);
		}
		int st;
		assert_int_equal(waitpid(pid, &st, 0), pid);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			fail_msg("child %d after fork: status %#x", c, st);
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	for (uint64_t c = 0; c < 30; c++)
		for (uint64_t i = 0; i < 200; i++) {
			uint64_t id = 90000000ull + c * 1000 + i, v;
			assert_int_equal(shmmap_lookup(&m, key, shm_test_key(key, id, 60), &v), 1);
			assert_int_equal(v, id);
		}
	long long n = shmmap_validate(&m, err, sizeof err);
	if (n < 0)
		fail_msg("validate: %s", err);
	assert_true(n >= 2000 + 30 * 200);
	shmmap_detach(&m);
	shm_test_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(processes_race_while_growing),
		cmocka_unit_test(killed_and_stopped_workers_leave_a_valid_map),
		cmocka_unit_test(fork_while_threads_insert),
	};
	return cmocka_run_group_tests_name("shm-processes", tests, NULL, NULL);
}
