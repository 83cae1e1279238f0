/* Unit tests: the deb822 stanza parser and the relationship-field parser. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "registry/deb822.h"
#include "registry/depends.h"

struct collected {
	int n;
	char names[8][64];
	char deps[8][256];
	int lines[8];
};

static int collect(const struct deb822_stanza *st, void *ctx)
{
	struct collected *c = ctx;
	const char *p = deb822_get(st, "Package");
	const char *d = deb822_get(st, "depends");
	snprintf(c->names[c->n], sizeof c->names[0], "%s", p ? p : "?");
	snprintf(c->deps[c->n], sizeof c->deps[0], "%s", d ? d : "");
	c->lines[c->n] = st->line;
	c->n++;
	return 0;
}

static void stanzas_and_continuations(void **state)
{
	(void)state;
	char buf[] = "Package: a\nDepends: x,\n y | z\nDescription: one\n more\n\n\n"
		     "Package: b\r\nVersion: 1\n";
	struct collected c = { 0 };
	char err[256] = "";
	assert_int_equal(deb822_parse(buf, "status", 0, collect, &c, err, sizeof err), 0);
	assert_int_equal(c.n, 2);
	assert_string_equal(c.names[0], "a");
	assert_string_equal(c.deps[0], "x,\n y | z");
	assert_int_equal(c.lines[0], 1);
	assert_string_equal(c.names[1], "b");
	assert_int_equal(c.lines[1], 8);
}

static void malformed_line_names_file_and_line(void **state)
{
	(void)state;
	char buf[] = "Package: a\nStatus: install ok installed\n\nPackage: b\nthis is garbage\n";
	struct collected c = { 0 };
	char err[256] = "";
	assert_int_equal(deb822_parse(buf, "/x/status", 0, collect, &c, err, sizeof err), -1);
	assert_non_null(strstr(err, "/x/status:5: malformed line"));
}

static void continuation_outside_field(void **state)
{
	(void)state;
	char buf[] = " orphan\nPackage: a\n";
	struct collected c = { 0 };
	char err[256] = "";
	assert_int_equal(deb822_parse(buf, "m", 0, collect, &c, err, sizeof err), -1);
	assert_non_null(strstr(err, "m:1: continuation line outside a field"));
}

static void comments_only_when_allowed(void **state)
{
	(void)state;
	char buf[] = "# a comment\nPackage: a\n# inside\nDepends: b\n";
	char copy[sizeof buf];
	memcpy(copy, buf, sizeof buf);
	struct collected c = { 0 };
	char err[256] = "";
	assert_int_equal(deb822_parse(buf, "m", 1, collect, &c, err, sizeof err), 0);
	assert_int_equal(c.n, 1);
	assert_string_equal(c.deps[0], "b");
	assert_int_equal(deb822_parse(copy, "m", 0, collect, &c, err, sizeof err), -1);
	assert_non_null(strstr(err, "m:1:"));
}

struct atoms {
	int n;
	struct dep_atom a[16];
};

static int add_atom(const struct dep_atom *a, void *ctx)
{
	struct atoms *s = ctx;
	s->a[s->n++] = *a;
	return 0;
}

static void relations(void **state)
{
	(void)state;
	struct atoms s = { 0 };
	char err[256] = "";
	assert_int_equal(deps_parse("libc6 (>= 2.36), awk | mawk:amd64 (<< 2\n ), python3:any,\n"
				    " foo [amd64] <!nocheck>",
				    add_atom, &s, err, sizeof err),
			 0);
	assert_int_equal(s.n, 5);
	assert_string_equal(s.a[0].name, "libc6");
	assert_string_equal(s.a[0].version, ">= 2.36");
	assert_int_equal(s.a[0].clause, 0);
	assert_string_equal(s.a[1].name, "awk");
	assert_int_equal(s.a[1].clause, 1);
	assert_int_equal(s.a[1].alt, 0);
	assert_string_equal(s.a[2].name, "mawk");
	assert_string_equal(s.a[2].archq, "amd64");
	assert_string_equal(s.a[2].version, "<< 2");
	assert_int_equal(s.a[2].clause, 1);
	assert_int_equal(s.a[2].alt, 1);
	assert_string_equal(s.a[3].name, "python3");
	assert_string_equal(s.a[3].archq, "any");
	assert_int_equal(s.a[3].clause, 2);
	assert_string_equal(s.a[4].name, "foo");
	assert_int_equal(s.a[4].clause, 3);
}

static void bad_relations(void **state)
{
	(void)state;
	const char *bad[] = { "a, , b", "a (>= 1", "a b", "| a", "a:" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct atoms s = { 0 };
		char err[256] = "";
		assert_int_equal(deps_parse(bad[i], add_atom, &s, err, sizeof err), -1);
		assert_true(strlen(err) > 0);
	}
	struct atoms s = { 0 };
	char err[256];
	assert_int_equal(deps_parse("  ", add_atom, &s, err, sizeof err), 0);
	assert_int_equal(s.n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(stanzas_and_continuations),
		cmocka_unit_test(malformed_line_names_file_and_line),
		cmocka_unit_test(continuation_outside_field),
		cmocka_unit_test(comments_only_when_allowed),
		cmocka_unit_test(relations),
		cmocka_unit_test(bad_relations),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
