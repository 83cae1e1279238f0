/* dpkg-buildpackage's build type, from --build= lists and command lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "trace/service/build_type.h"

static void test_parse_lists(void **state)
{
	(void)state;
	assert_int_equal(build_type_parse("full"), BUILD_FULL);
	assert_int_equal(build_type_parse("binary"), BUILD_ANY | BUILD_ALL);
	assert_int_equal(build_type_parse("any"), BUILD_ANY);
	assert_int_equal(build_type_parse("all"), BUILD_ALL);
	assert_int_equal(build_type_parse("source"), BUILD_SOURCE);
	assert_int_equal(build_type_parse("source,any"), BUILD_SOURCE | BUILD_ANY);
	assert_int_equal(build_type_parse("any,all"), BUILD_ANY | BUILD_ALL);
	/* not dpkg-buildpackage's: refused */
	assert_int_equal(build_type_parse(""), 0);
	assert_int_equal(build_type_parse("arch"), 0);
	assert_int_equal(build_type_parse("any,"), 0);
	assert_int_equal(build_type_parse("anyall"), 0);
	assert_int_equal(build_type_parse("ANY"), 0);
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(build_type_name(BUILD_FULL), "full");
	assert_string_equal(build_type_name(BUILD_ANY | BUILD_ALL), "binary");
	assert_string_equal(build_type_name(BUILD_ANY), "any");
	assert_string_equal(build_type_name(BUILD_SOURCE | BUILD_ALL), "source,all");
}

static unsigned of(const char *a0, const char *a1, const char *a2, const char *a3)
{
	const char *argv[] = { a0, a1, a2, a3, NULL };
	return build_type_of_command(argv);
}

static void test_command_lines(void **state)
{
	(void)state;
	assert_int_equal(of("dpkg-buildpackage", "-uc", "-us", NULL), BUILD_FULL);
	assert_int_equal(of("dpkg-buildpackage", "-b", "-uc", "-us"), BUILD_ANY | BUILD_ALL);
	assert_int_equal(of("/usr/bin/dpkg-buildpackage", "-B", NULL, NULL), BUILD_ANY);
	assert_int_equal(of("dpkg-buildpackage", "-A", "-j2", NULL), BUILD_ALL);
	assert_int_equal(of("dpkg-buildpackage", "-S", NULL, NULL), BUILD_SOURCE);
	assert_int_equal(of("dpkg-buildpackage", "-g", NULL, NULL), BUILD_SOURCE | BUILD_ALL);
	assert_int_equal(of("dpkg-buildpackage", "-G", NULL, NULL), BUILD_SOURCE | BUILD_ANY);
	assert_int_equal(of("dpkg-buildpackage", "-F", NULL, NULL), BUILD_FULL);
	assert_int_equal(of("dpkg-buildpackage", "--build=any,all", NULL, NULL), BUILD_ANY | BUILD_ALL);
	assert_int_equal(of("dpkg-buildpackage", "--build=source", NULL, NULL), BUILD_SOURCE);
	/* the last one given counts; an invalid list changes nothing */
	assert_int_equal(of("dpkg-buildpackage", "-b", "-B", NULL), BUILD_ANY);
	assert_int_equal(of("dpkg-buildpackage", "-B", "--build=bogus", NULL), BUILD_ANY);
	/* options that only look alike */
	assert_int_equal(of("dpkg-buildpackage", "-bX", "-Bfoo", "--buildinfo-option=-b"), BUILD_FULL);
	assert_int_equal(of("debuild", "-B", NULL, NULL), BUILD_ANY);
	/* any other command: not known */
	assert_int_equal(of("make", "-B", NULL, NULL), 0);
	assert_int_equal(of("sh", "-c", "dpkg-buildpackage -B", NULL), 0);
	assert_int_equal(of("dpkg-buildpackage.sh", "-B", NULL, NULL), 0);
	const char *none[] = { NULL };
	assert_int_equal(build_type_of_command(none), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_lists),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_command_lines),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
