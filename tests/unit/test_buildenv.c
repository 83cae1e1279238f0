/* The clean-chroot build environment: sbuild's filter, its forced values,
 * and --keep-env. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "trace/service/buildenv.h"

static const char *get(char **env, const char *name)
{
	size_t len = strlen(name);
	const char *found = NULL;
	for (; *env; env++)
		if (!strncmp(*env, name, len) && (*env)[len] == '=') {
			assert_null(found); /* never twice */
			found = *env + len + 1;
		}
	return found;
}

static char *host_env[] = {
	"PATH=/home/u/.pyenv/shims:/usr/local/bin:/usr/bin",
	"HOME=/home/u",
	"LIBRARY_PATH=/usr/local/toolkit/lib",
	"CPATH=/usr/local/toolkit/include",
	"PKG_CONFIG_PATH=/usr/local/lib/pkgconfig",
	"LD_PRELOAD=/usr/lib/libfoo.so",
	"PYENV_VERSION=3.11",
	"CFLAGS=-O1",
	"CC=clang",
	"LANG=fr_FR.UTF-8",
	"LC_ALL=fr_FR.UTF-8",
	"DEB_BUILD_OPTIONS=nocheck",
	"DEB_CFLAGS_APPEND=-g3",
	"SOURCE_DATE_EPOCH=1700000000",
	"TERM=xterm",
	"TMPDIR=/home/u/tmp",
	"USER=u",
	"SHELL=/bin/zsh",
	"noequals",
	NULL,
};

static void filters_as_sbuild(void **state)
{
	(void)state;
	char **env = buildenv_sbuild(host_env, NULL, 0);
	assert_non_null(env);
	/* forced, as sbuild sets them */
	assert_string_equal(get(env, "PATH"),
			    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/games");
	assert_string_equal(get(env, "HOME"), "/sbuild-nonexistent");
	assert_string_equal(get(env, "SHELL"), "/bin/sh");
	assert_string_equal(get(env, "LC_ALL"), "C.UTF-8");
	/* on dpkg's build-environment list */
	assert_string_equal(get(env, "CFLAGS"), "-O1");
	assert_string_equal(get(env, "CC"), "clang");
	assert_string_equal(get(env, "LANG"), "fr_FR.UTF-8");
	assert_string_equal(get(env, "DEB_BUILD_OPTIONS"), "nocheck");
	assert_string_equal(get(env, "SOURCE_DATE_EPOCH"), "1700000000");
	/* not on it */
	const char *gone[] = { "LIBRARY_PATH", "CPATH", "PKG_CONFIG_PATH", "LD_PRELOAD",
			       "PYENV_VERSION", "DEB_CFLAGS_APPEND", "TERM", "TMPDIR", "USER",
			       "noequals" };
	for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
		assert_null(get(env, gone[i]));
	size_t n = 0;
	while (env[n])
		n++;
	assert_int_equal(n, 9);
	free(env);
}

static void keep_env_passes_one_through(void **state)
{
	(void)state;
	const char *keep[] = { "LIBRARY_PATH", "HOME", "NOT_SET" };
	char **env = buildenv_sbuild(host_env, keep, 3);
	assert_non_null(env);
	assert_string_equal(get(env, "LIBRARY_PATH"), "/usr/local/toolkit/lib");
	assert_string_equal(get(env, "HOME"), "/home/u"); /* the user's, not sbuild's */
	assert_null(get(env, "NOT_SET"));
	assert_null(get(env, "CPATH"));
	assert_string_equal(get(env, "SHELL"), "/bin/sh");
	free(env);
	char *empty[] = { NULL };
	env = buildenv_sbuild(empty, NULL, 0);
	assert_string_equal(get(env, "HOME"), "/sbuild-nonexistent");
	assert_non_null(get(env, "PATH"));
	free(env);
	assert_true(buildenv_allowed("LD_LIBRARY_PATH", 15));
	assert_false(buildenv_allowed("LD_LIBRARY_PATHX", 16));
	assert_false(buildenv_allowed("LD_LIBRARY", 10));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(filters_as_sbuild),
		cmocka_unit_test(keep_env_passes_one_through),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
