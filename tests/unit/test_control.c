/* Build-Depends parsing: alternatives, version constraints, arch qualifiers
 * and restrictions, build profiles, continuation lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/service/build_type.h"
#include "trace/service/control.h"
#include "text_file.h"

static char err[1024];

/* "a|b,c" rendering of a parsed list. */
static const char *render(const struct dep_list *l)
{
	static char buf[1024];
	size_t o = 0;
	buf[0] = '\0';
	for (size_t g = 0; g < l->n; g++)
		for (size_t a = 0; a < l->groups[g].n; a++)
			o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s",
					      a ? "|" : g ? "," : "", l->groups[g].alts[a]);
	return buf;
}

static const char *parse(const char *value, const char *arch, const char *profiles)
{
	struct dep_list l = { 0 };
	assert_int_equal(deps_parse_field(value, arch, profiles, &l, err, sizeof err), 0);
	const char *r = render(&l);
	dep_list_free(&l);
	return r;
}

static void versions_and_qualifiers_stripped(void **state)
{
	(void)state;
	assert_string_equal(parse("debhelper-compat (= 13), dpkg-dev (>= 1.16.1),  python3:any,"
				  " libfoo-dev:native (<< 2~)", "amd64", NULL),
			    "debhelper-compat,dpkg-dev,python3,libfoo-dev");
}

static void alternatives_kept_in_order(void **state)
{
	(void)state;
	assert_string_equal(parse("libssl-dev | libressl-dev (>= 2), zlib1g-dev", "amd64", NULL),
			    "libssl-dev|libressl-dev,zlib1g-dev");
}

static void arch_restrictions(void **state)
{
	(void)state;
	assert_string_equal(parse("gcc-multilib [amd64 i386], libseccomp-dev [linux-any],"
				  " libkvm-dev [kfreebsd-any], valgrind [!armel !mips64el],"
				  " foo [!amd64], bar [any-amd64]", "amd64", NULL),
			    "gcc-multilib,libseccomp-dev,valgrind,bar");
	assert_string_equal(parse("gcc-multilib [amd64 i386], valgrind [!armel]", "armel", NULL), "");
	/* An alternative that does not apply leaves the others of its group. */
	assert_string_equal(parse("a [armel] | b", "amd64", NULL), "b");
}

static void build_profiles(void **state)
{
	(void)state;
	/* <!nocheck>: wanted unless the nocheck profile is active. */
	assert_string_equal(parse("check <!nocheck>, cross-tool <cross>, doc <!nodoc> <stage1>",
				  "amd64", NULL), "check,doc");
	assert_string_equal(parse("check <!nocheck>, cross-tool <cross>, doc <!nodoc !nocheck>",
				  "amd64", "nocheck cross"), "cross-tool");
	assert_string_equal(parse("gcc-multilib [amd64] <!nobiarch>", "amd64", "nobiarch"), "");
}

static void malformed_relations(void **state)
{
	(void)state;
	struct dep_list l = { 0 };
	assert_int_equal(deps_parse_field("foo (>= 1", "amd64", NULL, &l, err, sizeof err), -1);
	assert_non_null(strstr(err, "foo (>= 1"));
	assert_int_equal(deps_parse_field("(>= 1)", "amd64", NULL, &l, err, sizeof err), -1);
	assert_non_null(strstr(err, "no package name"));
	dep_list_free(&l);
	assert_string_equal(parse(" , ,a,, ", "amd64", NULL), "a");
}

static void control_file(void **state)
{
	(void)state;
	const char *text =
		"# a comment\n"
		"Source: zlib\n"
		"Section: libs\n"
		"Build-Depends: debhelper-compat (= 13),\n"
		" gcc-multilib [amd64 i386] <!nobiarch>,\n"
		"\tdpkg-dev (>= 1.16.1)\n"
		"Build-Depends-Indep: doc-tool\n"
		"build-depends-arch: arch-tool\n"
		"Standards-Version: 4.6.2\n"
		"\n"
		"Package: zlib1g\n"
		"Depends: not-a-build-dep\n";
	const char *path = text_file(text);
	struct dep_list l = { 0 };
	assert_int_equal(control_build_depends(path, "amd64", NULL, BUILD_FULL, &l, err, sizeof err), 0);
	assert_string_equal(render(&l), "debhelper-compat,gcc-multilib,dpkg-dev,doc-tool,arch-tool");
	dep_list_free(&l);
	/* what dpkg-checkbuilddeps asks of each build type */
	static const struct {
		unsigned parts;
		const char *want;
		unsigned left_out;
	} types[] = {
		{ BUILD_ANY, "debhelper-compat,gcc-multilib,dpkg-dev,arch-tool", BUILD_ALL },
		{ BUILD_ALL, "debhelper-compat,gcc-multilib,dpkg-dev,doc-tool", BUILD_ANY },
		{ BUILD_SOURCE, "debhelper-compat,gcc-multilib,dpkg-dev", BUILD_ANY | BUILD_ALL },
		{ BUILD_ANY | BUILD_ALL, "debhelper-compat,gcc-multilib,dpkg-dev,doc-tool,arch-tool", 0 },
	};
	for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
		assert_int_equal(control_build_depends(path, "amd64", NULL, types[i].parts, &l, err,
						       sizeof err), 0);
		assert_string_equal(render(&l), types[i].want);
		assert_int_equal(l.left_out, types[i].left_out);
		dep_list_free(&l);
	}
	assert_int_equal(control_build_depends("/nonexistent/control", "amd64", NULL, BUILD_FULL, &l,
					       err, sizeof err), -1);
	assert_non_null(strstr(err, "/nonexistent/control"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(versions_and_qualifiers_stripped),
		cmocka_unit_test(alternatives_kept_in_order),
		cmocka_unit_test(arch_restrictions),
		cmocka_unit_test(build_profiles),
		cmocka_unit_test(malformed_relations),
		cmocka_unit_test(control_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
