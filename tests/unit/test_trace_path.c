/* Lexical path cleaning of the preload library (src/trace/path.c): absolute,
 * no "//", no "/./", no trailing slash, ".." kept for the server. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "trace/kt.h"

static void join_is(const char *base, const char *rel, const char *want)
{
	char out[KT_PATH_BUF];
	int n = kt_path_join(base, rel, out);
	assert_int_equal(n, (int)strlen(want));
	assert_string_equal(out, want);
}

static void test_join(void **state)
{
	(void)state;
	join_is("/a/b", "c", "/a/b/c");
	join_is("/a/b/", "./c/", "/a/b/c");
	join_is("/", "c", "/c");
	join_is("/a", "/x//y/./z/", "/x/y/z");
	join_is("/a", "../b", "/a/../b");     /* ".." is the server's to resolve */
	join_is("/a", ".", "/a");
	join_is("/", "/", "/");
	join_is("//a//", "b/..//c", "/a/b/../c");
}

static void test_too_long(void **state)
{
	(void)state;
	char rel[KILN_PATH_MAX + 10], out[KT_PATH_BUF];
	memset(rel, 'x', sizeof rel - 1);
	rel[sizeof rel - 1] = '\0';
	assert_int_equal(kt_path_join("/", rel, out), -ENAMETOOLONG);
	/* exactly at the limit: "/" + 4095 bytes */
	rel[KILN_PATH_MAX - 1] = '\0';
	assert_int_equal(kt_path_join("/", rel, out), (int)KILN_PATH_MAX);
}

static void test_at_cwd_and_fd(void **state)
{
	(void)state;
	char out[KT_PATH_BUF], cwd[KT_PATH_BUF];
	assert_non_null(getcwd(cwd, sizeof cwd));
	assert_true(kt_path_at(AT_FDCWD, "x/./y", out) > 0);
	char want[KT_PATH_BUF + 8];
	strcpy(want, strcmp(cwd, "/") ? cwd : "");
	strcat(want, "/x/y");
	assert_string_equal(out, want);

	int fd = open("/usr", O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	assert_true(kt_path_at(fd, "lib/../bin", out) > 0);
	assert_string_equal(out, "/usr/lib/../bin");
	assert_true(kt_path_at(fd, "/abs", out) > 0);
	assert_string_equal(out, "/abs");
	close(fd);
	assert_int_equal(kt_path_at(fd, "y", out), -EBADF);
	assert_int_equal(kt_fd_path(-1, out), -EBADF);
}

/* The base is read into the output buffer itself, then the relative path is
 * appended: the root as cwd, "." alone, and a result over the limit. */
static void test_at_base_in_place(void **state)
{
	(void)state;
	char out[KT_PATH_BUF], cwd[KT_PATH_BUF];
	assert_non_null(getcwd(cwd, sizeof cwd));
	assert_int_equal(chdir("/"), 0);
	assert_int_equal(kt_path_at(AT_FDCWD, "a//b/.", out), 4);
	assert_string_equal(out, "/a/b");
	assert_int_equal(kt_path_at(AT_FDCWD, ".", out), 1);
	assert_string_equal(out, "/");
	assert_int_equal(kt_path_at(AT_FDCWD, "..", out), 3);
	assert_string_equal(out, "/..");
	assert_int_equal(chdir("/usr"), 0);
	assert_int_equal(kt_path_at(AT_FDCWD, "./", out), 4);
	assert_string_equal(out, "/usr");
	char rel[KT_PATH_BUF];
	memset(rel, 'x', KILN_PATH_MAX - 4); /* "/usr/" + this is one byte too long */
	rel[KILN_PATH_MAX - 4] = '\0';
	assert_int_equal(kt_path_at(AT_FDCWD, rel, out), -ENAMETOOLONG);
	rel[KILN_PATH_MAX - 5] = '\0'; /* exactly at the limit */
	assert_int_equal(kt_path_at(AT_FDCWD, rel, out), (int)KILN_PATH_MAX);
	assert_int_equal(strlen(out), KILN_PATH_MAX);
	assert_int_equal(chdir(cwd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_join),
		cmocka_unit_test(test_too_long),
		cmocka_unit_test(test_at_cwd_and_fd),
		cmocka_unit_test(test_at_base_in_place),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
