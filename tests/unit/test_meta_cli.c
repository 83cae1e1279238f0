/* Unit tests of meta_cli_main, the `kiln meta` command as a library call: the
 * streams, directory fd and model hook a server will pass it. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "meta/cli.h"

struct run {
	char *out, *err;
	size_t outlen, errlen;
	int rc;
};

static struct run run_cli(int dirfd, const struct meta_cli_env *hooks, char **argv)
{
	struct run r = { 0 };
	int argc = 0;
	while (argv[argc])
		argc++;
	struct meta_cli_env env = { .dirfd = dirfd };
	if (hooks)
		env = *hooks;
	env.dirfd = dirfd;
	env.out = open_memstream(&r.out, &r.outlen);
	env.err = open_memstream(&r.err, &r.errlen);
	r.rc = meta_cli_main(argc, argv, &env);
	fclose(env.out);
	fclose(env.err);
	return r;
}

static void free_run(struct run *r)
{
	free(r->out);
	free(r->err);
}

static void relative_binary_resolves_against_dirfd(void **state)
{
	(void)state;
	int dirfd = open("/proc/self", O_PATH | O_DIRECTORY);
	assert_true(dirfd >= 0);
	char *argv[] = { "meta", "types", "exe", "--format=json", NULL };
	struct run r = run_cli(dirfd, NULL, argv);
	assert_int_equal(r.rc, 0);
	assert_non_null(strstr(r.out, "\"tool\":\"types\""));
	free_run(&r);
	close(dirfd);
}

static void usage_errors_go_to_the_err_stream(void **state)
{
	(void)state;
	char *a1[] = { "meta", "types", "/proc/self/exe", "--bogus", NULL };
	struct run r = run_cli(AT_FDCWD, NULL, a1);
	assert_int_equal(r.rc, 2);
	assert_non_null(strstr(r.err, "unknown option '--bogus'"));
	assert_int_equal(r.outlen, 0);
	free_run(&r);
	char *a2[] = { "meta", "types", "/proc/self/exe", "-f", NULL };
	r = run_cli(AT_FDCWD, NULL, a2);
	assert_int_equal(r.rc, 2);
	assert_non_null(strstr(r.err, "needs a value"));
	free_run(&r);
	char *a3[] = { "meta", "types,nosuch", "/proc/self/exe", NULL };
	r = run_cli(AT_FDCWD, NULL, a3);
	assert_int_equal(r.rc, 2);
	assert_non_null(strstr(r.err, "unknown tool 'nosuch'"));
	free_run(&r);
	char *a4[] = { "meta", "--help", NULL };
	r = run_cli(AT_FDCWD, NULL, a4);
	assert_int_equal(r.rc, 0);
	assert_non_null(strstr(r.out, "extrasyms"));
	free_run(&r);
}

static void out_dir_is_relative_to_dirfd(void **state)
{
	(void)state;
	char dir[] = "/tmp/kiln-meta-cli-XXXXXX";
	assert_non_null(mkdtemp(dir));
	int dirfd = open(dir, O_PATH | O_DIRECTORY);
	char *argv[] = { "meta", "all", "/proc/self/exe", "--out-dir", ".", "-f", "c", NULL };
	struct run r = run_cli(dirfd, NULL, argv);
	assert_int_equal(r.rc, 0);
	const char *names[] = { "types.c", "frames.c", "extrasyms.c", "syscalls.c" };
	for (size_t i = 0; i < 4; i++) {
		struct stat st;
		assert_int_equal(fstatat(dirfd, names[i], &st, 0), 0);
		assert_true(st.st_size > 0);
		unlinkat(dirfd, names[i], 0);
	}
	free_run(&r);
	close(dirfd);
	assert_int_equal(rmdir(dir), 0); /* nothing else (no temp files) left */
}

struct cache {
	struct meta_model *m;
	int gets, puts;
};

static int cache_get(void *ctx, const char *path, const struct meta_options *opts, struct meta_model **out,
		     struct meta_err *err)
{
	struct cache *c = ctx;
	c->gets++;
	if (!c->m && meta_model_open_with(path, opts, &c->m, err))
		return -1;
	*out = c->m;
	return 0;
}

static void cache_put(void *ctx, struct meta_model *m)
{
	struct cache *c = ctx;
	assert_ptr_equal(m, c->m);
	c->puts++;
}

static void model_hook_serves_several_commands(void **state)
{
	(void)state;
	struct cache c = { 0 };
	struct meta_cli_env hooks = { .get_model = cache_get, .put_model = cache_put, .ctx = &c };
	char *a1[] = { "meta", "types", "/proc/self/exe", NULL };
	char *a2[] = { "meta", "frames,extrasyms", "/proc/self/exe", "--format", "json", NULL };
	struct run r1 = run_cli(AT_FDCWD, &hooks, a1);
	struct run r2 = run_cli(AT_FDCWD, &hooks, a2);
	assert_int_equal(r1.rc, 0);
	assert_int_equal(r2.rc, 0);
	assert_int_equal(c.gets, 2);
	assert_int_equal(c.puts, 2);
	assert_non_null(strstr(r2.out, "\"tool\":\"frames\""));
	assert_non_null(strstr(r2.out, "\"tool\":\"extrasyms\""));
	free_run(&r1);
	free_run(&r2);
	meta_model_free(c.m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(relative_binary_resolves_against_dirfd),
		cmocka_unit_test(usage_errors_go_to_the_err_stream),
		cmocka_unit_test(out_dir_is_relative_to_dirfd),
		cmocka_unit_test(model_hook_serves_several_commands),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
