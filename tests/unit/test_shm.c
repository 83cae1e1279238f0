/* Semantics of the shared-memory map: hits, misses, insert-if-absent, odd
 * keys, forced collisions, iteration, validation, header refusal, garbage,
 * read-only handles, FULL at the maximum and on a refused growth, fork. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "shm/layout.h"
#include "shm_test.h"

struct fx {
	char *dir;
	char path[600];
	struct shmmap m;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	f->dir = shm_test_dir();
	snprintf(f->path, sizeof f->path, "%s/map", f->dir);
	char err[256];
	struct shmmap_params p = { .initial_size = 64 << 10, .max_size = 64 << 20 };
	if (shmmap_create(&f->m, f->path, &p, err, sizeof err) != 0) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	shmmap_detach(&f->m);
	shm_test_rmdir(f->dir);
	free(f);
	return 0;
}

static uint64_t get(struct shmmap *m, const void *k, size_t n)
{
	uint64_t v = 0;
	assert_int_equal(shmmap_lookup(m, k, n, &v), 1);
	return v;
}

static void hit_and_miss(void **state)
{
	struct fx *f = *state;
	uint64_t v = 99, w = 0;
	assert_int_equal(shmmap_lookup(&f->m, "a", 1, &v), 0);
	assert_int_equal(v, 99);
	assert_int_equal(shmmap_insert(&f->m, "a", 1, 7, &w), SHMMAP_INSERTED);
	assert_int_equal(w, 7);
	assert_int_equal(get(&f->m, "a", 1), 7);
	assert_int_equal(shmmap_lookup(&f->m, "b", 1, &v), 0);
	assert_int_equal(shmmap_lookup(&f->m, "aa", 2, &v), 0);
	char err[256];
	assert_int_equal(shmmap_validate(&f->m, err, sizeof err), 1);
}

static void first_writer_wins(void **state)
{
	struct fx *f = *state;
	uint64_t w = 0;
	assert_int_equal(shmmap_insert(&f->m, "k", 1, 1, &w), SHMMAP_INSERTED);
	assert_int_equal(shmmap_insert(&f->m, "k", 1, 2, &w), SHMMAP_EXISTS);
	assert_int_equal(w, 1);
	assert_int_equal(shmmap_insert(&f->m, "k", 1, 1, NULL), SHMMAP_EXISTS);
	assert_int_equal(get(&f->m, "k", 1), 1);
	struct shmmap_stats st;
	shmmap_stats(&f->m, &st);
	assert_int_equal(st.entries, 1);
}

static void keys_differing_in_one_byte(void **state)
{
	struct fx *f = *state;
	char base[300];
	for (size_t i = 0; i < sizeof base; i++)
		base[i] = (char)('A' + i % 50);
	assert_int_equal(shmmap_insert(&f->m, base, sizeof base, 1000, NULL), SHMMAP_INSERTED);
	char k[300];
	for (size_t i = 0; i < sizeof base; i++) {
		memcpy(k, base, sizeof k);
		k[i] ^= 1;
		assert_int_equal(shmmap_insert(&f->m, k, sizeof k, i, NULL), SHMMAP_INSERTED);
	}
	/* Prefixes: same bytes, one shorter each. */
	for (size_t n = 0; n < sizeof base; n++)
		assert_int_equal(shmmap_insert(&f->m, base, n, 5000 + n, NULL), SHMMAP_INSERTED);
	for (size_t i = 0; i < sizeof base; i++) {
		memcpy(k, base, sizeof k);
		k[i] ^= 1;
		assert_int_equal(get(&f->m, k, sizeof k), i);
		assert_int_equal(get(&f->m, base, i), 5000 + i);
	}
	assert_int_equal(get(&f->m, base, sizeof base), 1000);
	char err[256];
	assert_int_equal(shmmap_validate(&f->m, err, sizeof err), 1 + 2 * (long long)sizeof base);
}

static void empty_key(void **state)
{
	struct fx *f = *state;
	uint64_t v;
	assert_int_equal(shmmap_lookup(&f->m, "", 0, &v), 0);
	assert_int_equal(shmmap_insert(&f->m, "", 0, 42, NULL), SHMMAP_INSERTED);
	assert_int_equal(get(&f->m, "", 0), 42);
	assert_int_equal(get(&f->m, NULL, 0), 42);
	assert_int_equal(shmmap_lookup(&f->m, "\0", 1, &v), 0);
}

static void longest_key(void **state)
{
	struct fx *f = *state;
	static char k[SHMMAP_MAX_KEY + 1];
	memset(k, '/', sizeof k);
	assert_int_equal(shmmap_insert(&f->m, k, SHMMAP_MAX_KEY, 1, NULL), SHMMAP_INSERTED);
	k[SHMMAP_MAX_KEY - 1] = 'x';
	assert_int_equal(shmmap_insert(&f->m, k, SHMMAP_MAX_KEY, 2, NULL), SHMMAP_INSERTED);
	assert_int_equal(get(&f->m, k, SHMMAP_MAX_KEY), 2);
	k[SHMMAP_MAX_KEY - 1] = '/';
	assert_int_equal(get(&f->m, k, SHMMAP_MAX_KEY), 1);
	uint64_t v;
	assert_int_equal(shmmap_insert(&f->m, k, SHMMAP_MAX_KEY + 1, 3, NULL), SHMMAP_INVALID);
	assert_int_equal(shmmap_lookup(&f->m, k, SHMMAP_MAX_KEY + 1, &v), 0);
}

/* Test hashes: every key the same 128-bit hash (pure collision chains), and
 * hashes equal in their low 100 bits (a tower of subtries before keys part). */
static struct shmmap_hash const_hash(const void *k, size_t n, uint64_t seed)
{
	(void)k, (void)n, (void)seed;
	return (struct shmmap_hash){ 0x1234, 0x5678 };
}

static struct shmmap_hash shared_prefix_hash(const void *k, size_t n, uint64_t seed)
{
	struct shmmap_hash h = shmmap_hash_default(k, n, seed);
	return (struct shmmap_hash){ 0xabcdef0123456789ull, 0x5a5a5ull | (h.hi << 36) };
}

static void fill_and_check(struct shmmap *m, int n, size_t spread)
{
	char k[SHMMAP_MAX_KEY];
	for (int i = 0; i < n; i++) {
		size_t len = shm_test_key(k, i, spread);
		uint64_t w;
		assert_int_equal(shmmap_insert(m, k, len, i * 3 + 1, &w), SHMMAP_INSERTED);
		assert_int_equal(w, i * 3 + 1);
	}
	for (int i = 0; i < n; i++) {
		size_t len = shm_test_key(k, i, spread);
		assert_int_equal(get(m, k, len), i * 3 + 1);
		uint64_t w;
		assert_int_equal(shmmap_insert(m, k, len, 0, &w), SHMMAP_EXISTS);
		assert_int_equal(w, i * 3 + 1);
	}
	for (int i = n; i < n + 50; i++) {
		size_t len = shm_test_key(k, i, spread);
		uint64_t v;
		assert_int_equal(shmmap_lookup(m, k, len, &v), 0);
	}
	char err[256];
	long long c = shmmap_validate(m, err, sizeof err);
	if (c < 0)
		fail_msg("validate: %s", err);
	assert_int_equal(c, n);
}

/* The writer's one change to a value: a CAS from the value it expects,
 * seen by lookups, refused for another value, an absent key or a read-only
 * handle; in a chain of one hash too. */
static void replace_by_the_writer(void **state)
{
	struct fx *f = *state;
	shmmap_test_set_hash(&f->m, const_hash); /* every key in one chain */
	assert_int_equal(shmmap_insert(&f->m, "k", 1, 1, NULL), SHMMAP_INSERTED);
	assert_int_equal(shmmap_replace(&f->m, "k", 1, 2, 3), 0);
	assert_int_equal(get(&f->m, "k", 1), 1);
	assert_int_equal(shmmap_replace(&f->m, "k", 1, 1, 3), 1);
	assert_int_equal(get(&f->m, "k", 1), 3);
	assert_int_equal(shmmap_replace(&f->m, "absent", 6, 0, 3), 0);
	assert_int_equal(shmmap_lookup(&f->m, "absent", 6, &(uint64_t){ 0 }), 0);
	struct shmmap ro;
	char err[256];
	assert_int_equal(shmmap_attach(&ro, f->path, SHMMAP_RDONLY, err, sizeof err), 0);
	shmmap_test_set_hash(&ro, const_hash);
	assert_int_equal(get(&ro, "k", 1), 3);
	assert_int_equal(shmmap_replace(&ro, "k", 1, 3, 4), 0);
	assert_int_equal(get(&f->m, "k", 1), 3);
	shmmap_detach(&ro);
	char k[SHMMAP_MAX_KEY];
	for (int i = 0; i < 50; i++)
		assert_int_equal(shmmap_insert(&f->m, k, shm_test_key(k, i, 40), i, NULL),
				 SHMMAP_INSERTED);
	size_t len = shm_test_key(k, 37, 40);
	assert_int_equal(shmmap_replace(&f->m, k, len, 37, 1000), 1);
	for (int i = 0; i < 50; i++) {
		len = shm_test_key(k, i, 40);
		assert_int_equal(get(&f->m, k, len), i == 37 ? 1000 : i);
	}
	assert_int_equal(shmmap_validate(&f->m, err, sizeof err), 51);
}

static void forced_full_collisions(void **state)
{
	struct fx *f = *state;
	shmmap_test_set_hash(&f->m, const_hash);
	fill_and_check(&f->m, 300, 40);
	struct shmmap_stats st;
	shmmap_stats(&f->m, &st);
	assert_int_equal(st.subtries, 0); /* one chain, nothing to split on */
}

static void forced_deep_subtries(void **state)
{
	struct fx *f = *state;
	shmmap_test_set_hash(&f->m, shared_prefix_hash);
	fill_and_check(&f->m, 2000, 40);
	struct shmmap_stats st;
	shmmap_stats(&f->m, &st);
	/* 100 shared bits: at least (100 - root bits) / 6 nested subtries. */
	assert_true(st.subtries >= (100 - st.root_bits) / st.subtrie_bits);
}

static void grows_past_initial(void **state)
{
	struct fx *f = *state;
	fill_and_check(&f->m, 20000, 200);
	struct shmmap_stats st;
	shmmap_stats(&f->m, &st);
	assert_true(st.bytes_committed > 2 << 20);
	assert_true(st.bytes_used <= st.bytes_committed);
	assert_true(st.entries == 20000);
}

struct seen {
	unsigned char *count;
	int n, bad;
};

static int see(const void *key, size_t len, uint64_t value, void *ctx)
{
	struct seen *s = ctx;
	char k[SHMMAP_MAX_KEY];
	if (value % 3 != 1 || (int)(value / 3) >= s->n) {
		s->bad++;
		return 0;
	}
	int i = (int)(value / 3);
	size_t n = shm_test_key(k, i, 60);
	if (n != len || memcmp(k, key, len))
		s->bad++;
	s->count[i]++;
	return 0;
}

static int stop_at_ten(const void *key, size_t len, uint64_t value, void *ctx)
{
	(void)key, (void)len, (void)value;
	return ++*(int *)ctx == 10 ? 77 : 0;
}

static void iteration_sees_each_key_once(void **state)
{
	struct fx *f = *state;
	int n = 5000;
	fill_and_check(&f->m, n, 60);
	struct seen s = { calloc(n, 1), n, 0 };
	assert_int_equal(shmmap_iterate(&f->m, see, &s), 0);
	assert_int_equal(s.bad, 0);
	for (int i = 0; i < n; i++)
		assert_int_equal(s.count[i], 1);
	free(s.count);
	int calls = 0;
	assert_int_equal(shmmap_iterate(&f->m, stop_at_ten, &calls), 77);
	assert_int_equal(calls, 10);
}

static void iteration_with_collisions(void **state)
{
	struct fx *f = *state;
	shmmap_test_set_hash(&f->m, shared_prefix_hash);
	int n = 500;
	fill_and_check(&f->m, n, 60);
	struct seen s = { calloc(n, 1), n, 0 };
	assert_int_equal(shmmap_iterate(&f->m, see, &s), 0);
	for (int i = 0; i < n; i++)
		assert_int_equal(s.count[i], 1);
	free(s.count);
}

/* The first non-empty root slot. */
static _Atomic uint64_t *some_slot(struct shmmap *m)
{
	_Atomic uint64_t *root = (_Atomic uint64_t *)(m->base + m->root_off);
	for (uint64_t i = 0; i < (1ull << m->root_bits); i++)
		if (root[i] && !(root[i] & 1))
			return &root[i];
	return NULL;
}

static void expect_invalid(struct shmmap *m, const char *what)
{
	char err[256] = "";
	assert_int_equal(shmmap_validate(m, err, sizeof err), -1);
	if (!strstr(err, what))
		fail_msg("validate said '%s', expected '%s'", err, what);
}

static void validate_catches_corruption(void **state)
{
	struct fx *f = *state;
	fill_and_check(&f->m, 3000, 30);
	_Atomic uint64_t *slot = some_slot(&f->m);
	assert_non_null(slot);
	uint64_t good = *slot;
	struct shmmap_record *r = (struct shmmap_record *)(f->m.base + (good & SHMMAP_OFF_MASK));

	*slot = good + 8; /* into the middle of a record */
	expect_invalid(&f->m, "not a record");
	*slot = (good & SHMMAP_OFF_MASK) | 1; /* only a bucket's last slot may lead to a subtrie */
	expect_invalid(&f->m, "probe slot holds a subtrie");
	*slot = good | 1;
	expect_invalid(&f->m, "tag bits set");
	*slot = good ^ (1ull << 50); /* the slot's hash tag disagrees */
	expect_invalid(&f->m, "hash tag does not match");
	*slot = f->m.map_len - 64; /* past everything allocated */
	expect_invalid(&f->m, "out of bounds");
	*slot = 12; /* inside the header, misaligned */
	expect_invalid(&f->m, "out of bounds");
	*slot = good;
	r->key[0] ^= 0x20;
	expect_invalid(&f->m, "hash does not match");
	r->key[0] ^= 0x20;
	r->hash_lo ^= 1;
	expect_invalid(&f->m, "hash does not match");
	r->hash_lo ^= 1;
	char err[256];
	assert_int_equal(shmmap_validate(&f->m, err, sizeof err), 3000);

	/* A record moved to a slot its hash does not select. */
	_Atomic uint64_t *root = (_Atomic uint64_t *)(f->m.base + f->m.root_off);
	size_t other = (size_t)(slot - root) ^ SHMMAP_BUCKET_SLOTS; /* the next bucket */
	uint64_t saved = root[other];
	root[other] = good;
	expect_invalid(&f->m, "does not select");
	root[other] = saved;
	assert_int_equal(shmmap_validate(&f->m, err, sizeof err), 3000);
}

/* One bucket filled past its 7 probe slots (every key's hash selects it), so
 * its last slot leads to subtries: what validate checks about buckets. */
static void validate_catches_bad_buckets(void **state)
{
	struct fx *f = *state;
	shmmap_test_set_hash(&f->m, shared_prefix_hash);
	fill_and_check(&f->m, 40, 30);
	_Atomic uint64_t *root = (_Atomic uint64_t *)(f->m.base + f->m.root_off);
	_Atomic uint64_t *b = NULL;
	for (uint64_t i = 0; i < (1ull << f->m.root_bits); i += SHMMAP_BUCKET_SLOTS)
		if (root[i])
			b = &root[i];
	assert_non_null(b);
	for (unsigned i = 0; i < SHMMAP_PROBE_SLOTS; i++)
		assert_true(b[i] && !(b[i] & 1));
	assert_true(b[SHMMAP_PROBE_SLOTS] & 1); /* the overflow slot holds a subtrie */
	uint64_t saved[SHMMAP_BUCKET_SLOTS];
	for (unsigned i = 0; i < SHMMAP_BUCKET_SLOTS; i++)
		saved[i] = b[i];
	char err[256];

	b[SHMMAP_PROBE_SLOTS] = (saved[0] & SHMMAP_OFF_MASK) | 1; /* a record as a subtrie */
	expect_invalid(&f->m, "not a subtrie");
	b[SHMMAP_PROBE_SLOTS] = saved[SHMMAP_PROBE_SLOTS];
	b[3] = 0; /* probe slots fill in order, the overflow slot last */
	expect_invalid(&f->m, "filled slot after an empty one");
	b[3] = saved[3];
	b[2] = saved[1]; /* a second chain of one hash in the bucket */
	expect_invalid(&f->m, "same hash");
	b[2] = saved[2];
	assert_int_equal(shmmap_validate(&f->m, err, sizeof err), 40);

	/* Every key is still found, in the probe slots and below the overflow. */
	char k[SHMMAP_MAX_KEY];
	for (int i = 0; i < 40; i++) {
		size_t len = shm_test_key(k, i, 30);
		uint64_t v = 0;
		assert_int_equal(shmmap_lookup(&f->m, k, len, &v), 1);
	}
}

/* Rewrites part of the file's header through a plain fd. */
static void poke(const char *path, off_t off, const void *bytes, size_t n)
{
	int fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, bytes, n, off), (ssize_t)n);
	close(fd);
}

static void expect_refused(const char *path, const char *what)
{
	struct shmmap m;
	char err[256] = "";
	assert_int_equal(shmmap_attach(&m, path, SHMMAP_RDONLY, err, sizeof err), -1);
	if (!strstr(err, what) || !strstr(err, path))
		fail_msg("attach said '%s', expected '%s' and the path", err, what);
	assert_ptr_equal(m.base, NULL);
}

static void bad_headers_are_refused(void **state)
{
	struct fx *f = *state;
	fill_and_check(&f->m, 2000, 100); /* the file grows past 64 KiB */
	struct shmmap_header h;
	memcpy(&h, f->m.base, sizeof h);

	poke(f->path, 0, "NOTKILN!", 8);
	expect_refused(f->path, "bad magic");
	poke(f->path, 0, h.magic, 8);

	uint32_t v = 99;
	poke(f->path, offsetof(struct shmmap_header, version), &v, 4);
	expect_refused(f->path, "unsupported shm map version 99");
	poke(f->path, offsetof(struct shmmap_header, version), &h.version, 4);

	uint64_t big = 1ull << 50;
	poke(f->path, offsetof(struct shmmap_header, max_size), &big, 8);
	expect_refused(f->path, "inconsistent header: maximum size");
	uint64_t tiny = 64 << 10; /* smaller than the file */
	poke(f->path, offsetof(struct shmmap_header, max_size), &tiny, 8);
	expect_refused(f->path, "inconsistent header");
	poke(f->path, offsetof(struct shmmap_header, max_size), &h.max_size, 8);

	uint32_t bits = 40;
	poke(f->path, offsetof(struct shmmap_header, root_bits), &bits, 4);
	expect_refused(f->path, "table bits out of range");
	poke(f->path, offsetof(struct shmmap_header, root_bits), &h.root_bits, 4);

	uint64_t odd = 4097;
	poke(f->path, offsetof(struct shmmap_header, alloc_end), &odd, 8);
	expect_refused(f->path, "outside the file's bounds");
	poke(f->path, offsetof(struct shmmap_header, alloc_end), &h.alloc_end, 8);

	struct shmmap m;
	char err[256];
	assert_int_equal(shmmap_attach(&m, f->path, SHMMAP_RDONLY, err, sizeof err), 0);
	shmmap_detach(&m);

	char small[600];
	snprintf(small, sizeof small, "%s/small", f->dir);
	int fd = open(small, O_CREAT | O_WRONLY, 0600);
	assert_int_equal(write(fd, "KILNSHM", 7), 7);
	close(fd);
	expect_refused(small, "too small");
	snprintf(small, sizeof small, "%s/absent", f->dir);
	expect_refused(small, "No such file");
	expect_refused(f->dir, "not a regular file");
}

static void detached_handle_is_harmless(void **state)
{
	(void)state;
	struct shmmap m;
	char err[256];
	assert_int_equal(shmmap_attach(&m, "/nonexistent/kiln/map", SHMMAP_RDONLY, err, sizeof err), -1);
	uint64_t v;
	assert_int_equal(shmmap_lookup(&m, "k", 1, &v), 0);
	assert_int_equal(shmmap_insert(&m, "k", 1, 1, &v), SHMMAP_INVALID);
	assert_int_equal(shmmap_validate(&m, err, sizeof err), -1);
	assert_string_equal(err, "map not attached");
	assert_int_equal(shmmap_iterate(&m, stop_at_ten, &(int){ 0 }), -1);
	struct shmmap_stats st;
	shmmap_stats(&m, &st);
	assert_int_equal(st.entries, 0);
	assert_int_equal(shmmap_prefault(&m), -1);
	shmmap_detach(&m);
	shmmap_detach(&m); /* twice is fine */
}

static void create_refuses_existing(void **state)
{
	struct fx *f = *state;
	struct shmmap m;
	char err[256];
	assert_int_equal(shmmap_create(&m, f->path, NULL, err, sizeof err), -1);
	assert_non_null(strstr(err, "already exists"));
	char bad[600];
	snprintf(bad, sizeof bad, "%s/x", f->dir);
	struct shmmap_params p = { .initial_size = 1 << 20, .max_size = 64 << 10 };
	assert_int_equal(shmmap_create(&m, bad, &p, err, sizeof err), -1);
	assert_non_null(strstr(err, "exceeds the maximum"));
	assert_int_equal(access(bad, F_OK), -1); /* nothing half-made left behind */
}

/* Runs fn in a child; fails if the child dies of a signal or exits non-zero. */
static void in_child(void (*fn)(void *), void *arg, int expect_sig)
{
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* cmocka catches these to report a failed test; the child must die. */
		int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };
		for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
			signal(sigs[i], SIG_DFL);
		fn(arg);
		_exit(0);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (expect_sig) {
		assert_true(WIFSIGNALED(st));
		assert_int_equal(WTERMSIG(st), expect_sig);
	} else {
		if (WIFSIGNALED(st))
			fail_msg("child died of signal %d", WTERMSIG(st));
		assert_int_equal(WEXITSTATUS(st), 0);
	}
}

static void lookups_everywhere(struct shmmap *m, int n)
{
	char k[SHMMAP_MAX_KEY];
	for (int i = 0; i < n; i++) {
		size_t len = shm_test_key(k, i, 30);
		uint64_t v;
		(void)shmmap_lookup(m, k, len, &v);
		(void)shmmap_insert(m, k, len, 5, &v);
	}
}

static void garbage_child(void *arg)
{
	struct fx *f = arg;
	struct shmmap ro;
	char err[256];
	if (shmmap_attach(&ro, f->path, SHMMAP_RDONLY, err, sizeof err) != 0)
		_exit(3);
	struct shmmap_header *h = (struct shmmap_header *)f->m.base;
	uint64_t *root = (uint64_t *)(f->m.base + f->m.root_off);
	uint64_t nroot = 1ull << f->m.root_bits;
	uint64_t file_end = h->committed;
	/* Lies about the size, then slots pointing past the end of the file
	 * (inside the reserved range: touching them would SIGBUS), then noise. */
	h->committed = f->m.map_len;
	h->alloc_end = f->m.map_len;
	for (int round = 0; round < 4; round++) {
		for (uint64_t i = 0; i < nroot; i++) {
			uint64_t x = shm_test_mix(i * 4 + round);
			switch (round) {
			case 0: root[i] = file_end + (x % (f->m.map_len - file_end)) / 8 * 8; break;
			case 1: root[i] = (file_end + (x % (f->m.map_len - file_end)) / 8 * 8) | 1; break;
			case 2: root[i] = x; break;
			case 3: root[i] = f->m.root_off + x % (file_end - f->m.root_off); break;
			}
		}
		if (round >= 2) /* a plausible allocation end: inserts write into garbage */
			h->alloc_end = file_end - 4096;
		/* And noise over everything allocated after the root table. */
		if (round == 3)
			for (uint64_t o = f->m.root_off + 8 * nroot; o + 8 <= file_end; o += 8)
				*(uint64_t *)(f->m.base + o) = shm_test_mix(o) % 3 ? shm_test_mix(o + 1) : o + 64;
		lookups_everywhere(&ro, 2000);
		lookups_everywhere(&f->m, 2000);
		(void)shmmap_validate(&ro, err, sizeof err);
		(void)shmmap_iterate(&ro, stop_at_ten, &(int){ 0 });
	}
	shmmap_detach(&ro);
}

static void garbage_never_crashes(void **state)
{
	struct fx *f = *state;
	fill_and_check(&f->m, 3000, 30);
	in_child(garbage_child, f, 0);
}

/* Random values in every header field, many times over: attach refuses or
 * accepts, and whatever it accepts, lookups, inserts, validate and iterate
 * must neither crash nor hang. */
static void header_fuzz_child(void *arg)
{
	struct fx *f = arg;
	struct shmmap_header good;
	memcpy(&good, f->m.base, sizeof good);
	int fd = open(f->path, O_RDWR);
	if (fd < 0)
		_exit(3);
	static const struct { size_t off, size; } fields[] = {
		{ offsetof(struct shmmap_header, version), 4 },
		{ offsetof(struct shmmap_header, header_size), 4 },
		{ offsetof(struct shmmap_header, max_size), 8 },
		{ offsetof(struct shmmap_header, root_off), 8 },
		{ offsetof(struct shmmap_header, root_bits), 4 },
		{ offsetof(struct shmmap_header, subtrie_bits), 4 },
		{ offsetof(struct shmmap_header, max_key), 8 },
		{ offsetof(struct shmmap_header, committed), 8 },
		{ offsetof(struct shmmap_header, alloc_end), 8 },
	};
	int accepted = 0;
	for (uint64_t round = 0; round < 400; round++) {
		if (pwrite(fd, &good, sizeof good, 0) != (ssize_t)sizeof good)
			_exit(4);
		uint64_t x = shm_test_mix(round + 99);
		size_t i = x % (sizeof fields / sizeof fields[0]);
		/* Small numbers near the real ones, wild ones, and (half the time)
		 * plausible-but-wrong allocation bounds, which attach accepts. */
		uint64_t v = (x >> 8) & 1 ? shm_test_mix(x) : (x >> 16) % 70000;
		if ((x >> 10) & 1) {
			uint64_t root_end = good.root_off + (8ull << good.root_bits);
			i = 7 + ((x >> 11) & 1); /* committed or alloc_end */
			v = (root_end + shm_test_mix(x + 1) % (good.max_size - root_end)) & ~7ull;
		}
		if (pwrite(fd, &v, fields[i].size, (off_t)fields[i].off) != (ssize_t)fields[i].size)
			_exit(5);
		struct shmmap m;
		char err[256];
		int mode = (x >> 9) & 1 ? SHMMAP_RDWR : SHMMAP_RDONLY;
		if (shmmap_attach(&m, f->path, mode, err, sizeof err) != 0)
			continue;
		accepted++;
		lookups_everywhere(&m, 300);
		(void)shmmap_validate(&m, err, sizeof err);
		(void)shmmap_iterate(&m, stop_at_ten, &(int){ 0 });
		shmmap_detach(&m);
	}
	if (pwrite(fd, &good, sizeof good, 0) != (ssize_t)sizeof good)
		_exit(6);
	close(fd);
	if (accepted == 0)
		_exit(7); /* the fuzz must also exercise accepted-but-odd headers */
}

static void random_headers_never_crash(void **state)
{
	struct fx *f = *state;
	fill_and_check(&f->m, 3000, 30);
	in_child(header_fuzz_child, f, 0);
}

static void ro_write_child(void *arg)
{
	struct shmmap *ro = arg;
	ro->base[SHMMAP_HEADER_SIZE] = 1;
}

static void read_only_handle(void **state)
{
	struct fx *f = *state;
	struct shmmap ro;
	char err[256];
	assert_int_equal(shmmap_attach(&ro, f->path, SHMMAP_RDONLY, err, sizeof err), 0);
	assert_int_equal(shmmap_insert(&ro, "x", 1, 1, NULL), SHMMAP_INVALID);
	/* Entries written after attach, including past the size the file had
	 * then, are visible through the read-only handle. */
	int n = 20000;
	char k[SHMMAP_MAX_KEY];
	for (int i = 0; i < n; i++) {
		size_t len = shm_test_key(k, i, 100);
		assert_int_equal(shmmap_insert(&f->m, k, len, i, NULL), SHMMAP_INSERTED);
	}
	assert_true(shmmap_hdr(&f->m)->committed > (64 << 10) * 8);
	assert_int_equal(shmmap_prefault(&ro), 0); /* maps what exists now, no fault */
	for (int i = 0; i < n; i++) {
		size_t len = shm_test_key(k, i, 100);
		assert_int_equal(get(&ro, k, len), i);
	}
	assert_int_equal(shmmap_validate(&ro, err, sizeof err), n);
	in_child(ro_write_child, &ro, SIGSEGV);
	shmmap_detach(&ro);
}

static void full_at_maximum(void **state)
{
	(void)state;
	char *dir = shm_test_dir();
	char path[600], err[256];
	snprintf(path, sizeof path, "%s/small", dir);
	struct shmmap m;
	struct shmmap_params p = { .initial_size = 64 << 10, .max_size = 256 << 10 };
	assert_int_equal(shmmap_create(&m, path, &p, err, sizeof err), 0);
	char k[SHMMAP_MAX_KEY];
	int n = 0;
	enum shmmap_status s;
	while ((s = shmmap_insert(&m, k, shm_test_key(k, n, 100), n, NULL)) == SHMMAP_INSERTED)
		n++;
	assert_int_equal(s, SHMMAP_FULL);
	assert_true(n > 500);
	for (int i = 0; i < n; i++)
		assert_int_equal(get(&m, k, shm_test_key(k, i, 100)), i);
	static char big[SHMMAP_MAX_KEY];
	memset(big, 'b', sizeof big);
	assert_int_equal(shmmap_insert(&m, big, sizeof big, 1, NULL), SHMMAP_FULL);
	/* A key already present still answers EXISTS when the map is full. */
	assert_int_equal(shmmap_insert(&m, k, shm_test_key(k, 0, 100), 1, NULL), SHMMAP_EXISTS);
	assert_int_equal(shmmap_validate(&m, err, sizeof err), n);
	struct shmmap_stats st;
	shmmap_stats(&m, &st);
	assert_true(st.bytes_committed <= 256 << 10);
	struct stat sb;
	assert_int_equal(stat(path, &sb), 0);
	assert_true(sb.st_size <= 256 << 10);
	shmmap_detach(&m);
	shm_test_rmdir(dir);
}

/* The creator's tag is in the header and every attach reads it back; a map
 * created without one has 0. */
static void tag_is_read_back(void **state)
{
	(void)state;
	char *dir = shm_test_dir();
	char path[600], plainp[600], err[256];
	snprintf(path, sizeof path, "%s/tagged", dir);
	snprintf(plainp, sizeof plainp, "%s/untagged", dir);
	struct shmmap m, ro;
	struct shmmap_params p = { .initial_size = 64 << 10, .max_size = 256 << 10,
				   .tag = 0x1122334455667788ull };
	assert_int_equal(shmmap_create(&m, path, &p, err, sizeof err), 0);
	assert_true(m.tag == p.tag);
	assert_int_equal(shmmap_attach(&ro, path, SHMMAP_RDONLY, err, sizeof err), 0);
	assert_true(ro.tag == p.tag);
	shmmap_detach(&ro);
	shmmap_detach(&m);
	p.tag = 0;
	assert_int_equal(shmmap_create(&m, plainp, &p, err, sizeof err), 0);
	shmmap_detach(&m);
	assert_int_equal(shmmap_attach(&ro, plainp, SHMMAP_RDONLY, err, sizeof err), 0);
	assert_true(ro.tag == 0);
	shmmap_detach(&ro);
	shm_test_rmdir(dir);
}

static void fsize_child(void *arg)
{
	const char *dir = arg;
	char path[600], err[256];
	snprintf(path, sizeof path, "%s/limited", dir);
	signal(SIGXFSZ, SIG_IGN);
	struct rlimit rl = { 1 << 20, 1 << 20 };
	if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
		_exit(4);
	struct shmmap m;
	struct shmmap_params p = { .initial_size = 64 << 10, .max_size = 256 << 20 };
	if (shmmap_create(&m, path, &p, err, sizeof err) != 0)
		_exit(5);
	char k[SHMMAP_MAX_KEY];
	int n = 0;
	enum shmmap_status s;
	while ((s = shmmap_insert(&m, k, shm_test_key(k, n, 300), n, NULL)) == SHMMAP_INSERTED)
		n++;
	if (s != SHMMAP_FULL || n < 1000)
		_exit(6);
	for (int i = 0; i < n; i++) {
		uint64_t v;
		if (shmmap_lookup(&m, k, shm_test_key(k, i, 300), &v) != 1 || v != (uint64_t)i)
			_exit(7);
	}
	if (shmmap_validate(&m, err, sizeof err) != n)
		_exit(8);
	struct stat sb;
	if (stat(path, &sb) != 0 || sb.st_size > 1 << 20)
		_exit(9);
	shmmap_detach(&m);
}

static void refused_growth_is_full_not_sigbus(void **state)
{
	(void)state;
	char *dir = shm_test_dir();
	in_child(fsize_child, dir, 0);
	shm_test_rmdir(dir);
}

static void fork_child_inserts(void *arg)
{
	struct shmmap *m = arg;
	char k[SHMMAP_MAX_KEY];
	for (int i = 0; i < 1000; i++) {
		uint64_t v;
		if (shmmap_lookup(m, k, shm_test_key(k, i, 20), &v) != 1 || v != (uint64_t)i)
			_exit(10);
	}
	for (int i = 1000; i < 3000; i++)
		if (shmmap_insert(m, k, shm_test_key(k, i, 20), i, NULL) != SHMMAP_INSERTED)
			_exit(11);
}

static void works_across_fork(void **state)
{
	struct fx *f = *state;
	char k[SHMMAP_MAX_KEY];
	for (int i = 0; i < 1000; i++)
		assert_int_equal(shmmap_insert(&f->m, k, shm_test_key(k, i, 20), i, NULL), SHMMAP_INSERTED);
	in_child(fork_child_inserts, &f->m, 0);
	for (int i = 0; i < 3000; i++)
		assert_int_equal(get(&f->m, k, shm_test_key(k, i, 20)), i);
}

static void memfd_sealed_and_attach_fd(void **state)
{
	(void)state;
	int fd = memfd_create("kiln-shm-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	assert_true(fd >= 0);
	struct shmmap m, ro;
	char err[256];
	struct shmmap_params p = { .initial_size = 64 << 10, .max_size = 16 << 20 };
	assert_int_equal(shmmap_create_fd(&m, fd, &p, err, sizeof err), 0);
	assert_int_equal(ftruncate(fd, 0), -1); /* sealed against shrinking */
	assert_int_equal(errno, EPERM);
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
	int rofd = open(proc, O_RDONLY | O_CLOEXEC);
	assert_true(rofd >= 0);
	assert_int_equal(shmmap_attach_fd(&ro, rofd, SHMMAP_RDONLY, err, sizeof err), 0);
	char k[SHMMAP_MAX_KEY];
	for (int i = 0; i < 5000; i++)
		assert_int_equal(shmmap_insert(&m, k, shm_test_key(k, i, 100), i, NULL), SHMMAP_INSERTED);
	for (int i = 0; i < 5000; i++)
		assert_int_equal(get(&ro, k, shm_test_key(k, i, 100)), i);
	/* A read-write attach needs a writable fd. */
	struct shmmap bad;
	assert_int_equal(shmmap_attach_fd(&bad, rofd, SHMMAP_RDWR, err, sizeof err), -1);
	assert_non_null(strstr(err, "cannot map"));
	shmmap_detach(&ro);
	shmmap_detach(&m);
	/* attach_fd leaves the fds open for their owner. */
	assert_int_equal(fcntl(rofd, F_GETFD) >= 0, 1);
	close(rofd);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
		T(hit_and_miss),
		T(first_writer_wins),
		T(replace_by_the_writer),
		T(keys_differing_in_one_byte),
		T(empty_key),
		T(longest_key),
		T(forced_full_collisions),
		T(forced_deep_subtries),
		T(grows_past_initial),
		T(iteration_sees_each_key_once),
		T(iteration_with_collisions),
		T(validate_catches_corruption),
		T(validate_catches_bad_buckets),
		T(bad_headers_are_refused),
		T(create_refuses_existing),
		T(garbage_never_crashes),
		T(random_headers_never_crash),
		T(read_only_handle),
		T(works_across_fork),
		cmocka_unit_test(detached_handle_is_harmless),
		cmocka_unit_test(full_at_maximum),
		cmocka_unit_test(tag_is_read_back),
		cmocka_unit_test(refused_growth_is_full_not_sigbus),
		cmocka_unit_test(memfd_sealed_and_attach_fd),
#undef T
	};
	return cmocka_run_group_tests_name("shm", tests, NULL, NULL);
}
