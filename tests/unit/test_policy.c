/* Policy rules: per-component prefix matching, longest prefix wins, later
 * rules override, policy files and their errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/service/policy.h"
#include "text_file.h"

static char err[1024];

static void add(struct policy *p, enum policy_action a, const char *prefix)
{
	assert_int_equal(policy_add(p, a, prefix, err, sizeof err), 0);
}

static void matches_per_component(void **state)
{
	(void)state;
	struct policy p;
	policy_init(&p);
	add(&p, POLICY_ASK, "/usr/lib");
	add(&p, POLICY_ALLOW, "/");
	policy_compile(&p);
	assert_int_equal(policy_action_for(&p, "/usr/lib"), POLICY_ASK);
	assert_int_equal(policy_action_for(&p, "/usr/lib/x86_64-linux-gnu/libc.so.6"), POLICY_ASK);
	assert_int_equal(policy_action_for(&p, "/usr/libexec/foo"), POLICY_ALLOW);
	assert_int_equal(policy_action_for(&p, "/usr/li"), POLICY_ALLOW);
	assert_int_equal(policy_action_for(&p, "/usr"), POLICY_ALLOW);
	assert_int_equal(policy_action_for(&p, "/"), POLICY_ALLOW);
	policy_free(&p);
}

static void longest_prefix_and_last_rule_win(void **state)
{
	(void)state;
	struct policy p;
	policy_init(&p);
	add(&p, POLICY_ASK, "/usr");
	add(&p, POLICY_DENY, "/usr/share/doc");
	add(&p, POLICY_ALLOW, "/usr/share/doc/kiln");
	add(&p, POLICY_READ, "/usr/share/doc");   /* overrides the deny above */
	policy_compile(&p);
	assert_int_equal(policy_action_for(&p, "/usr/bin/cc"), POLICY_ASK);
	assert_int_equal(policy_action_for(&p, "/usr/share/doc/x/README"), POLICY_READ);
	assert_int_equal(policy_action_for(&p, "/usr/share/doc/kiln/README"), POLICY_ALLOW);
	assert_int_equal(policy_action_for(&p, "/srv"), POLICY_READ); /* no rule: read */
	assert_null(policy_match(&p, "/srv"));
	policy_free(&p);
}

static void prefixes_are_normalised(void **state)
{
	(void)state;
	struct policy p;
	policy_init(&p);
	add(&p, POLICY_DENY, "//opt/./secret///");
	policy_compile(&p);
	assert_string_equal(policy_match(&p, "/opt/secret/key")->prefix, "/opt/secret");
	assert_int_equal(policy_add(&p, POLICY_DENY, "relative/path", err, sizeof err), -1);
	assert_non_null(strstr(err, "not absolute"));
	assert_int_equal(policy_add(&p, POLICY_DENY, "/a/../b", err, sizeof err), -1);
	assert_non_null(strstr(err, ".."));
	setenv("HOME", "/home/tester", 1);
	add(&p, POLICY_ALLOW, "~/.cache/x");
	policy_compile(&p);
	assert_int_equal(policy_action_for(&p, "/home/tester/.cache/x/y"), POLICY_ALLOW);
	policy_free(&p);
}

static void defaults_for_debian_builds(void **state)
{
	(void)state;
	struct policy p;
	policy_init(&p);
	unsetenv("TMPDIR");
	setenv("HOME", "/home/tester", 1);
	unsetenv("XDG_CACHE_HOME");
	assert_int_equal(policy_add_defaults(&p, "/home/tester/src/pkg", true, err, sizeof err), 0);
	policy_compile(&p);
	assert_int_equal(policy_action_for(&p, "/usr/include/stdio.h"), POLICY_ASK);
	assert_int_equal(policy_action_for(&p, "/lib/x86_64-linux-gnu/libc.so.6"), POLICY_ASK);
	assert_int_equal(policy_action_for(&p, "/etc/ld.so.conf"), POLICY_ASK);
	assert_int_equal(policy_action_for(&p, "/etc/passwd"), POLICY_READ);
	assert_int_equal(policy_action_for(&p, "/home/tester/src/pkg/debian/rules"), POLICY_ALLOW);
	assert_int_equal(policy_action_for(&p, "/home/tester/.cache/ccache/x"), POLICY_ALLOW);
	assert_int_equal(policy_action_for(&p, "/home/tester/.ssh/id_rsa"), POLICY_READ);
	assert_int_equal(policy_action_for(&p, "/tmp/cc123.s"), POLICY_ALLOW);
	assert_int_equal(policy_action_for(&p, "/dev/null"), POLICY_ALLOW);
	assert_int_equal(policy_action_for(&p, "/proc/self/fd/1"), POLICY_ALLOW);
	assert_int_equal(policy_action_for(&p, "/var/lib/dpkg/status"), POLICY_READ);
	assert_int_equal(p.unknown, UNKNOWN_REPORT);
	policy_free(&p);
}

static void chroot_profile_hides_what_a_chroot_lacks(void **state)
{
	(void)state;
	struct policy p;
	policy_init(&p);
	unsetenv("TMPDIR");
	setenv("HOME", "/home/tester", 1);
	setenv("XDG_CACHE_HOME", "/home/tester/.xdg", 1);
	assert_int_equal(policy_add_defaults(&p, "/home/tester/src/pkg", false, err, sizeof err), 0);
	const char *names[] = { "pkg" };
	assert_int_equal(policy_set_artifacts(&p, "/home/tester/src", names, 1, err, sizeof err), 0);
	assert_int_equal(policy_add_chroot(&p, "/home/tester", "/home/tester/kiln/build/libkiln-trace.so",
					   err, sizeof err),
			 0);
	policy_compile(&p);
	assert_int_equal(policy_action_for(&p, "/usr/local/lib/libcuda.so"), POLICY_OWNED);
	assert_int_equal(policy_action_for(&p, "/opt/toolkit/bin/cc"), POLICY_OWNED);
	assert_int_equal(policy_action_for(&p, "/usr/lib/locale/locale-archive"), POLICY_OWNED);
	assert_int_equal(policy_action_for(&p, "/etc/ld.so.conf.d/cuda.conf"), POLICY_OWNED);
	assert_int_equal(policy_action_for(&p, "/usr/include/stdio.h"), POLICY_ASK);
	assert_true(policy_is_skeleton(&p, "/usr/local/bin"));
	assert_true(policy_is_skeleton(&p, "/opt"));
	assert_false(policy_is_skeleton(&p, "/usr/local/cuda"));
	assert_false(policy_is_skeleton(&p, "/usr/local/bin/x"));
	/* The home directory: hidden, but for the build tree, the artifacts'
	 * directory and kiln's library, and with no cache directory of it. */
	assert_int_equal(policy_action_for(&p, "/home/tester/.pyenv/shims/python3"), POLICY_DENY);
	assert_int_equal(policy_action_for(&p, "/home/tester/.cache/ccache/x"), POLICY_DENY);
	assert_int_equal(policy_action_for(&p, "/home/tester/.xdg/x"), POLICY_DENY);
	assert_int_equal(policy_action_for(&p, "/home/tester/src/pkg/debian/rules"), POLICY_ALLOW);
	assert_int_equal(policy_action_for(&p, "/home/tester/src/pkg_1.0.orig.tar.gz"), POLICY_READ);
	assert_int_equal(policy_action_for(&p, "/home/tester/kiln/build/libkiln-trace.so"), POLICY_READ);
	/* The way to those stays open; nothing else of home does. */
	assert_true(policy_leads_to_visible(&p, "/home/tester", 12));
	assert_true(policy_leads_to_visible(&p, "/home/tester/kiln", 17));
	assert_true(policy_leads_to_visible(&p, "/", 1));
	assert_false(policy_leads_to_visible(&p, "/home/tester/.pyenv", 19));
	assert_false(policy_leads_to_visible(&p, "/home/tester/sr", 15));
	policy_free(&p);

	/* No home, or "/": nothing of it to hide. */
	policy_init(&p);
	assert_int_equal(policy_add_chroot(&p, NULL, NULL, err, sizeof err), 0);
	assert_int_equal(policy_add_chroot(&p, "/", NULL, err, sizeof err), 0);
	policy_compile(&p);
	assert_int_equal(policy_action_for(&p, "/home/x"), POLICY_READ);
	assert_int_equal(policy_action_for(&p, "/usr/local/bin/x"), POLICY_OWNED);
	policy_free(&p);
	unsetenv("XDG_CACHE_HOME");
}

static void policy_file(void **state)
{
	(void)state;
	struct policy p;
	policy_init(&p);
	add(&p, POLICY_ALLOW, "/");
	const char *f = text_file("# comment\n\nask /opt  # trailing comment\n"
				   "deny   /opt/with space\nowned /opt/tk\nunknown hide\n");
	assert_int_equal(policy_load_file(&p, f, err, sizeof err), 0);
	policy_compile(&p);
	assert_int_equal(policy_action_for(&p, "/opt/x"), POLICY_ASK);
	assert_int_equal(policy_action_for(&p, "/opt/with space/y"), POLICY_DENY);
	assert_int_equal(policy_action_for(&p, "/opt/tk/bin"), POLICY_OWNED);
	assert_int_equal(policy_action_for(&p, "/srv"), POLICY_ALLOW);
	assert_int_equal(p.unknown, UNKNOWN_HIDE);

	f = text_file("ask /opt\nclear\nread /opt/x\n");
	assert_int_equal(policy_load_file(&p, f, err, sizeof err), 0);
	policy_compile(&p);
	assert_int_equal(policy_action_for(&p, "/srv"), POLICY_READ); /* "/" rule cleared */
	assert_int_equal(policy_action_for(&p, "/opt/y"), POLICY_READ);
	policy_free(&p);
}

static void policy_file_errors_name_file_and_line(void **state)
{
	(void)state;
	struct policy p;
	policy_init(&p);
	const char *f = text_file("ask /usr\nfrobnicate /x\n");
	assert_int_equal(policy_load_file(&p, f, err, sizeof err), -1);
	char want[128];
	snprintf(want, sizeof want, "%s:2: unknown directive 'frobnicate'", f);
	assert_non_null(strstr(err, want));
	f = text_file("allow\n");
	assert_int_equal(policy_load_file(&p, f, err, sizeof err), -1);
	assert_non_null(strstr(err, ":1: 'allow' needs a path"));
	f = text_file("unknown maybe\n");
	assert_int_equal(policy_load_file(&p, f, err, sizeof err), -1);
	assert_non_null(strstr(err, "report, allow or hide"));
	assert_int_equal(policy_load_file(&p, "/nonexistent/kiln.policy", err, sizeof err), -1);
	assert_non_null(strstr(err, "/nonexistent/kiln.policy"));
	policy_free(&p);
}

static void package_artifacts_only(void **state)
{
	(void)state;
	struct policy p;
	policy_init(&p);
	const char *names[] = { "hello", "hello-doc" };
	assert_int_equal(policy_set_artifacts(&p, "/home/u/src/", names, 2, err, sizeof err), 0);
	static const char *const yes[] = {
		"/home/u/src/hello_2.10-3_amd64.deb", "/home/u/src/hello-doc_2.10-3_all.deb",
		"/home/u/src/hello-dbgsym_2.10-3_amd64.deb", "/home/u/src/hello_2.10-3_amd64.buildinfo",
		"/home/u/src/hello_2.10-3_amd64.changes", "/home/u/src/hello_2.10-3_amd64.changes.new",
		"/home/u/src/hello_2.10-3.dsc", "/home/u/src/hello_2.10.orig.tar.gz",
		"/home/u/src/hello_2.10-3.debian.tar.xz", "/home/u/src/hello_2.10-3_amd64.build",
		"/home/u/src/hello_1_amd64.udeb",
	};
	static const char *const no[] = {
		"/home/u/src/notes.txt", "/home/u/src/hello", "/home/u/src/hello.deb",
		"/home/u/src/hellox_1_all.deb", "/home/u/src/other_1_all.deb",
		"/home/u/src/sub/hello_1_all.deb", "/home/u/hello_1_all.deb",
		"/home/u/src/hello_1_all.deb.bak", "/home/u/src/hello_1_all.txt",
		"/home/u/srcx/hello_1_all.deb", "/home/u/src",
	};
	for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
		assert_true(policy_is_artifact(&p, yes[i]));
	for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
		if (policy_is_artifact(&p, no[i]))
			fail_msg("%s taken for an artifact", no[i]);
	policy_free(&p);
	policy_init(&p);
	assert_false(policy_is_artifact(&p, "/home/u/src/hello_1_all.deb")); /* no rule: nothing */
	policy_free(&p);
}

static void skeleton_directories_once_and_exact(void **state)
{
	(void)state;
	struct policy p;
	policy_init(&p);
	assert_int_equal(policy_add_chroot(&p, NULL, NULL, err, sizeof err), 0);
	size_t n = p.nskeleton;
	assert_true(policy_is_skeleton(&p, "/usr/local/lib"));
	assert_false(policy_is_skeleton(&p, "/usr/local/lib/python3.11"));
	assert_int_equal(policy_add_skeleton(&p, "/usr/local/lib/python3.11", err, sizeof err), 0);
	assert_int_equal(policy_add_skeleton(&p, "/usr/local/lib/python3.11", err, sizeof err), 0);
	assert_int_equal(policy_add_skeleton(&p, "/usr/local/lib", err, sizeof err), 0);
	assert_int_equal(p.nskeleton, n + 1);
	assert_true(policy_is_skeleton(&p, "/usr/local/lib/python3.11"));
	assert_false(policy_is_skeleton(&p, "/usr/local/lib/python3.1"));
	assert_false(policy_is_skeleton(&p, "/usr/local/lib/python3.11/dist-packages"));
	policy_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(matches_per_component),
		cmocka_unit_test(longest_prefix_and_last_rule_win),
		cmocka_unit_test(prefixes_are_normalised),
		cmocka_unit_test(defaults_for_debian_builds),
		cmocka_unit_test(chroot_profile_hides_what_a_chroot_lacks),
		cmocka_unit_test(policy_file),
		cmocka_unit_test(policy_file_errors_name_file_and_line),
		cmocka_unit_test(package_artifacts_only),
		cmocka_unit_test(skeleton_directories_once_and_exact),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
