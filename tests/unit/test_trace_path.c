/* Lexical path cleaning of the preload library (src/trace/path.c): absolute,
 * no "//", no "/./", no trailing slash, ".." kept for the server. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
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

/* The reference: components split on '/', empty and "." dropped, ".." kept. */
static void reference_clean(const char *base, const char *rel, char *out)
{
	char tmp[2 * KT_PATH_BUF];
	snprintf(tmp, sizeof tmp, "%s/%s", rel[0] == '/' ? "" : base, rel);
	size_t o = 0;
	for (char *save, *c = strtok_r(tmp, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (!strcmp(c, "."))
			continue;
		out[o++] = '/';
		size_t n = strlen(c);
		memcpy(out + o, c, n);
		o += n;
	}
	if (!o)
		out[o++] = '/';
	out[o] = '\0';
}

/* Paths made of awkward pieces (empty, ".", "..", ".x", "...", doubled and
 * trailing slashes) give what the reference gives: the clean fast path and
 * the component loop agree. */
static void test_join_against_reference(void **state)
{
	(void)state;
	static const char *const piece[] = { "a", "bc", ".", "..", ".x", "...", "", "x.", "/",
					     "abcdefghi" };
	const unsigned npiece = sizeof piece / sizeof *piece;
	unsigned seed = 12345;
	for (int t = 0; t < 20000; t++) {
		char base[256] = "", rel[256] = "";
		for (int which = 0; which < 2; which++) {
			char *dst = which ? rel : base;
			int n = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 6;
			size_t at = 0;
			if (which == 0 || ((seed >> 8) & 1))
				dst[at++] = '/';
			for (int i = 0; i < n; i++) {
				const char *pc = piece[((seed = seed * 1103515245u + 12345u) >> 16) % npiece];
				at += (size_t)snprintf(dst + at, sizeof base - at, "%s%s", pc,
						       i + 1 < n || ((seed >> 4) & 1) ? "/" : "");
			}
		}
		char got[KT_PATH_BUF], want[2 * KT_PATH_BUF];
		int len = kt_path_join(base, rel, got);
		reference_clean(base, rel, want);
		assert_int_equal(len, (int)strlen(want));
		assert_string_equal(got, want);
		/* The tail found in the cleaning pass is the one a strlen finds. */
		int tail = -1;
		assert_int_equal(kt_path_at_tail(AT_FDCWD, rel, got, &tail), kt_path_at(AT_FDCWD, rel, want));
		assert_string_equal(got, want);
		assert_int_equal(tail, kt_path_tail_n(rel, strlen(rel)));
	}
}

static void tail_is(const char *path, int want)
{
	char out[KT_PATH_BUF];
	int tail = -1;
	assert_true(kt_path_at_tail(AT_FDCWD, path, out, &tail) > 0);
	assert_int_equal(tail, want);
	assert_int_equal(kt_path_tail_n(path, strlen(path)), want);
}

/* "link/", "link/." and "." make the kernel follow the last component. */
static void test_tail(void **state)
{
	(void)state;
	tail_is("x", 0);
	tail_is("x/", 1);
	tail_is("x/.", 1);
	tail_is("x/..", 0);
	tail_is("x.", 0);
	tail_is(".", 1);
	tail_is("./", 1);
	tail_is("/", 1);
	tail_is("/usr/lib/", 1);
	tail_is("/usr/lib/.", 1);
	tail_is("/usr/lib", 0);
	tail_is("/usr//lib", 0);
	tail_is("/usr/./lib", 0);
	tail_is("abcdefgh/", 1);
	tail_is("abcdefgh", 0);
	tail_is("", 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_join),
		cmocka_unit_test(test_too_long),
		cmocka_unit_test(test_at_cwd_and_fd),
		cmocka_unit_test(test_at_base_in_place),
		cmocka_unit_test(test_join_against_reference),
		cmocka_unit_test(test_tail),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
