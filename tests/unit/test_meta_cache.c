/* The meta server's model cache: one parse shared by concurrent requests,
 * stale models dropped (also while in use), LRU eviction under a bound. The
 * binary is this test program itself (built with -g). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "meta/cache.h"

static char self[4096];

static void copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	assert_true(in >= 0 && out >= 0);
	char b[65536];
	ssize_t n;
	while ((n = read(in, b, sizeof b)) > 0)
		assert_int_equal(write(out, b, (size_t)n), n);
	close(in);
	close(out);
}

struct worker {
	struct meta_cache *c;
	int parsed;
};

static void *hammer(void *arg)
{
	struct worker *w = arg;
	for (int i = 0; i < 20; i++) {
		struct meta_model *m;
		struct meta_err err;
		int parsed;
		if (meta_cache_get(w->c, self, NULL, &m, &err, &parsed) != 0)
			return "get failed";
		w->parsed += parsed;
		if (!m->nfunctions)
			return "empty model";
		meta_cache_put(w->c, m);
	}
	return NULL;
}

static void concurrent_requests_share_one_parse(void **state)
{
	(void)state;
	struct meta_cache *c = meta_cache_new(0);
	pthread_t t[8];
	struct worker w[8];
	for (int i = 0; i < 8; i++) {
		w[i] = (struct worker){ .c = c };
		assert_int_equal(pthread_create(&t[i], NULL, hammer, &w[i]), 0);
	}
	int parsed = 0;
	for (int i = 0; i < 8; i++) {
		void *r;
		pthread_join(t[i], &r);
		assert_null(r);
		parsed += w[i].parsed;
	}
	struct meta_cache_stats st;
	meta_cache_get_stats(c, &st);
	assert_int_equal(parsed, 1);
	assert_int_equal(st.parses, 1);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.hits, 159);
	assert_int_equal(st.models, 1);
	meta_cache_free(c);
}

static void rewritten_file_is_parsed_again_even_in_use(void **state)
{
	(void)state;
	char path[] = "/tmp/kiln-test-cache-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	copy_file(self, path);
	struct meta_cache *c = meta_cache_new(0);
	struct meta_model *a, *b, *d;
	struct meta_err err;
	int parsed;
	assert_int_equal(meta_cache_get(c, path, NULL, &a, &err, &parsed), 0);
	assert_int_equal(parsed, 1);
	/* a new mtime while A is in use */
	struct timespec ts[2] = { { .tv_sec = 1000000000 }, { .tv_sec = 1000000000 } };
	assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
	assert_int_equal(meta_cache_get(c, path, NULL, &b, &err, &parsed), 0);
	assert_int_equal(parsed, 1);
	assert_ptr_not_equal(a, b);
	assert_int_equal(b->mtime_ns, 1000000000LL * 1000000000LL);
	meta_cache_put(c, a); /* the stale model's last user frees it */
	assert_int_equal(meta_cache_get(c, path, NULL, &d, &err, &parsed), 0);
	assert_int_equal(parsed, 0);
	assert_ptr_equal(b, d);
	meta_cache_put(c, b);
	meta_cache_put(c, d);
	struct meta_cache_stats st;
	meta_cache_get_stats(c, &st);
	assert_int_equal(st.stale, 1);
	assert_int_equal(st.models, 1);
	/* gone: the parser's own error, nothing cached */
	unlink(path);
	assert_int_equal(meta_cache_get(c, path, NULL, &a, &err, &parsed), -1);
	assert_non_null(strstr(err.msg, path));
	meta_cache_free(c);
}

static void idle_models_are_evicted_lru_first(void **state)
{
	(void)state;
	char p1[] = "/tmp/kiln-test-cache-XXXXXX", p2[] = "/tmp/kiln-test-cache-XXXXXX";
	close(mkstemp(p1));
	close(mkstemp(p2));
	copy_file(self, p1);
	copy_file(self, p2);
	struct meta_cache *c = meta_cache_new(1); /* smaller than any model */
	struct meta_model *a, *b;
	struct meta_err err;
	int parsed;
	assert_int_equal(meta_cache_get(c, p1, NULL, &a, &err, &parsed), 0);
	assert_int_equal(meta_cache_get(c, p2, NULL, &b, &err, &parsed), 0);
	struct meta_cache_stats st;
	meta_cache_get_stats(c, &st);
	assert_int_equal(st.evictions, 0); /* both in use */
	assert_int_equal(st.models, 2);
	meta_cache_put(c, a);
	meta_cache_get_stats(c, &st);
	assert_int_equal(st.evictions, 1);
	assert_int_equal(st.models, 1);
	assert_int_equal(st.bytes, meta_cache_model_bytes(b));
	meta_cache_put(c, b);
	meta_cache_get_stats(c, &st);
	assert_int_equal(st.evictions, 2);
	assert_int_equal(st.bytes, 0);
	meta_cache_free(c);
	unlink(p1);
	unlink(p2);
}

int main(void)
{
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		return 1;
	self[n] = '\0';
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(concurrent_requests_share_one_parse),
		cmocka_unit_test(rewritten_file_is_parsed_again_even_in_use),
		cmocka_unit_test(idle_models_are_evicted_lru_first),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
