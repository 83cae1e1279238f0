/* The directories maintainer scripts make in /usr/local, by package name:
 * the table's entries, python3.N-minimal by pattern, and nothing for names
 * that only look alike. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "trace/service/postinst_dirs.h"

static size_t dirs(const char *name, const char *out[POSTINST_DIRS_MAX])
{
	static char buf[128];
	memset(buf, 'x', sizeof buf);
	return postinst_dirs_of(name, out, buf, sizeof buf);
}

static void python_minimal_by_version(void **state)
{
	(void)state;
	const char *d[POSTINST_DIRS_MAX];
	assert_int_equal(dirs("python3.11-minimal", d), 2);
	assert_string_equal(d[0], "/usr/local/lib/python3.11");
	assert_string_equal(d[1], "/usr/local/lib/python3.11/dist-packages");
	assert_int_equal(dirs("python3.13-minimal", d), 2);
	assert_string_equal(d[1], "/usr/local/lib/python3.13/dist-packages");
	assert_int_equal(dirs("python3-minimal", d), 0);
	assert_int_equal(dirs("python3.11", d), 0);
	assert_int_equal(dirs("python3.11-minimal-dbg", d), 0);
	assert_int_equal(dirs("python3.-minimal", d), 0);
	assert_int_equal(dirs("libpython3.11-minimal", d), 0);
}

static void table_entries(void **state)
{
	(void)state;
	const char *d[POSTINST_DIRS_MAX];
	assert_int_equal(dirs("xml-core", d), 5);
	assert_string_equal(d[0], "/usr/local/share/xml");
	assert_string_equal(d[4], "/usr/local/share/xml/schema");
	assert_int_equal(dirs("sgml-base", d), 6);
	assert_int_equal(dirs("r-base-core", d), 2);
	assert_string_equal(d[1], "/usr/local/lib/R/site-library");
	assert_int_equal(dirs("fontconfig-config", d), 1);
	assert_string_equal(d[0], "/usr/local/share/fonts");
	assert_int_equal(dirs("fontconfig", d), 0);
	assert_int_equal(dirs("", d), 0);
}

static void too_little_room(void **state)
{
	(void)state;
	const char *d[POSTINST_DIRS_MAX];
	char small[40];
	assert_int_equal(postinst_dirs_of("python3.11-minimal", d, small, sizeof small), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(python_minimal_by_version),
		cmocka_unit_test(table_entries),
		cmocka_unit_test(too_little_room),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
