/* Unit tests: canonical paths inside a root (symlinked directories resolved,
 * absolute link targets taken inside the root, last component not followed). */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "registry/canon.h"

static char root[PATH_MAX];

static void mk(const char *rel)
{
	char p[PATH_MAX * 2];
	snprintf(p, sizeof p, "%s/%s", root, rel);
	assert_int_equal(mkdir(p, 0755), 0);
}

static void ln(const char *target, const char *rel)
{
	char p[PATH_MAX * 2];
	snprintf(p, sizeof p, "%s/%s", root, rel);
	assert_int_equal(symlink(target, p), 0);
}

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof root, "/tmp/kiln-canon-XXXXXX");
	if (!mkdtemp(root))
		return -1;
	mk("usr");
	mk("usr/bin");
	mk("usr/lib");
	mk("usr/lib/x");
	mk("opt");
	ln("usr/bin", "bin");
	ln("usr/lib", "lib");
	ln("dash", "usr/bin/sh");
	ln("/usr/lib", "opt/abs");    /* absolute: inside the root */
	ln("../usr/./lib", "rel");    /* ".." at the root stays at the root */
	ln("../../usr/lib", "opt/up");
	ln("loop2", "loop1");
	ln("loop1", "loop2");
	ln("lib", "chain");           /* chain -> lib -> usr/lib */
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
	return system(cmd);
}

static void expect(struct canon *c, const char *in, const char *want)
{
	char out[PATH_MAX];
	assert_int_equal(canon_path(c, in, out, sizeof out), 0);
	if (strcmp(out, want))
		fail_msg("canon(%s) = %s, want %s", in, out, want);
}

static void merged_usr_and_links(void **state)
{
	(void)state;
	struct canon c;
	assert_int_equal(canon_init(&c, root), 0);
	expect(&c, "/bin/bash", "/usr/bin/bash");
	expect(&c, "/bin/sh", "/usr/bin/sh");       /* last component not followed */
	expect(&c, "/bin", "/bin");                 /* a symlink is looked up as itself */
	expect(&c, "/lib/x/libc.so.6", "/usr/lib/x/libc.so.6");
	expect(&c, "/opt/abs/x/f", "/usr/lib/x/f"); /* not the host's /usr/lib */
	expect(&c, "/rel/x/f", "/usr/lib/x/f");
	expect(&c, "/opt/up/x/f", "/usr/lib/x/f");
	expect(&c, "/chain/x/f", "/usr/lib/x/f");
	expect(&c, "/missing/dir/f", "/missing/dir/f");
	expect(&c, "//usr///bin/./f/", "/usr/bin/f");
	expect(&c, "/.", "/");
	expect(&c, "/", "/");
	/* ".." after a symlinked directory goes up from where the link led. */
	expect(&c, "/lib/x/../../bin/f", "/usr/bin/f");
	expect(&c, "/bin/..", "/usr");
	canon_free(&c);
}

static void loops_terminate(void **state)
{
	(void)state;
	struct canon c;
	char out[PATH_MAX];
	assert_int_equal(canon_init(&c, root), 0);
	assert_int_equal(canon_path(&c, "/loop1/f", out, sizeof out), 0);
	assert_non_null(strstr(out, "/f"));
	canon_free(&c);
}

static void relative_paths(void **state)
{
	(void)state;
	struct canon c;
	char out[PATH_MAX], cwd[PATH_MAX], want[PATH_MAX * 2];
	assert_int_equal(canon_init(&c, root), 0);
	assert_int_equal(canon_path(&c, "rel/x", out, sizeof out), -1);
	assert_int_equal(errno, EINVAL);
	canon_free(&c);

	assert_int_equal(canon_init(&c, "/"), 0);
	assert_non_null(getcwd(cwd, sizeof cwd));
	char real[PATH_MAX];
	snprintf(want, sizeof want, "%s/usr/lib/x/f", realpath(root, real));
	char dir[PATH_MAX * 2];
	snprintf(dir, sizeof dir, "%s/lib", root);
	assert_int_equal(chdir(dir), 0);
	assert_int_equal(canon_path(&c, "x/f", out, sizeof out), 0);
	assert_int_equal(chdir(cwd), 0);
	assert_string_equal(out, want);
	canon_free(&c);
}

static void lexical(void **state)
{
	(void)state;
	char out[PATH_MAX];
	assert_int_equal(canon_lexical("/a/./b/../c//", out, sizeof out), 0);
	assert_string_equal(out, "/a/c");
	assert_int_equal(canon_lexical("/../..", out, sizeof out), 0);
	assert_string_equal(out, "/");
	assert_int_equal(canon_lexical("a/b", out, sizeof out), -1);
	char small[4];
	assert_int_equal(canon_lexical("/abcdef", small, sizeof small), -1);
	assert_int_equal(errno, ENAMETOOLONG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(merged_usr_and_links),
		cmocka_unit_test(loops_terminate),
		cmocka_unit_test(relative_paths),
		cmocka_unit_test(lexical),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
