/* Where kiln trace makes its run directory (trace_rundir_base): a private
 * tmpfs $XDG_RUNTIME_DIR, else /dev/shm, else $TMPDIR, else /tmp. The tests
 * with a real tmpfs directory skip where /dev/shm is not a writable tmpfs. */
#include <linux/magic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cmocka.h>

#include "trace/service/rundir.h"

static int on_tmpfs(const char *dir)
{
	struct statfs fs;
	return statfs(dir, &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

static char shm_dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(shm_dir, sizeof shm_dir, "/dev/shm/kiln-rundir-test-XXXXXX");
	if (!on_tmpfs("/dev/shm") || access("/dev/shm", W_OK) != 0 || !mkdtemp(shm_dir))
		shm_dir[0] = '\0'; /* the tests that need it skip */
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (shm_dir[0])
		rmdir(shm_dir);
	unsetenv("XDG_RUNTIME_DIR");
	unsetenv("TMPDIR");
	return 0;
}

static void need_shm(void)
{
	if (!shm_dir[0])
		skip(); /* no writable tmpfs /dev/shm on this machine */
}

static void test_private_tmpfs_runtime_dir_first(void **state)
{
	(void)state;
	need_shm();
	assert_int_equal(chmod(shm_dir, 0700), 0);
	setenv("XDG_RUNTIME_DIR", shm_dir, 1);
	setenv("TMPDIR", "/var/tmp", 1);
	assert_string_equal(trace_rundir_base(), shm_dir);
}

static void test_shared_or_disk_runtime_dir_is_passed_over(void **state)
{
	(void)state;
	need_shm();
	setenv("TMPDIR", "/var/tmp", 1);
	/* writable by others and not sticky: another user could swap entries */
	assert_int_equal(chmod(shm_dir, 0777), 0);
	setenv("XDG_RUNTIME_DIR", shm_dir, 1);
	assert_string_equal(trace_rundir_base(), "/dev/shm");
	/* not absolute, missing, or not a memory file system */
	setenv("XDG_RUNTIME_DIR", "relative/dir", 1);
	assert_string_equal(trace_rundir_base(), "/dev/shm");
	setenv("XDG_RUNTIME_DIR", "/nonexistent/kiln-test", 1);
	assert_string_equal(trace_rundir_base(), "/dev/shm");
	if (!on_tmpfs("/var/tmp")) {
		setenv("XDG_RUNTIME_DIR", "/var/tmp", 1);
		assert_string_equal(trace_rundir_base(), "/dev/shm");
	}
	assert_int_equal(chmod(shm_dir, 0700), 0);
}

static void test_tmpdir_then_tmp_without_tmpfs(void **state)
{
	(void)state;
	assert_string_equal(trace_rundir_base_of(NULL, "/nonexistent/shm", "/var/tmp"), "/var/tmp");
	assert_string_equal(trace_rundir_base_of(NULL, NULL, "not-absolute"), "/tmp");
	assert_string_equal(trace_rundir_base_of("/nonexistent/rt", NULL, NULL), "/tmp");
	if (!on_tmpfs("/var/tmp")) /* a disk directory is no memory file system */
		assert_string_equal(trace_rundir_base_of("/var/tmp", "/var/tmp", NULL), "/tmp");
}

/* DIR/kiln-trace.XXXXXX/socket must fit a sockaddr_un (108 bytes): a base
 * too long for it would make kiln trace fail. */
static void test_a_base_too_long_for_the_socket_is_passed_over(void **state)
{
	(void)state;
	char tmpdir[128];
	memset(tmpdir, 'd', sizeof tmpdir - 1);
	tmpdir[0] = '/';
	tmpdir[sizeof tmpdir - 1] = '\0';
	assert_string_equal(trace_rundir_base_of(NULL, NULL, tmpdir), "/tmp");
	tmpdir[82] = '\0'; /* 82 + 25 + NUL = 108 bytes: fits */
	assert_string_equal(trace_rundir_base_of(NULL, NULL, tmpdir), tmpdir);
	tmpdir[82] = 'd';
	tmpdir[83] = '\0';
	assert_string_equal(trace_rundir_base_of(NULL, NULL, tmpdir), "/tmp");
	need_shm();
	char runtime[192];
	snprintf(runtime, sizeof runtime, "%s/%0100d", shm_dir, 0);
	assert_int_equal(mkdir(runtime, 0700), 0);
	setenv("XDG_RUNTIME_DIR", runtime, 1);
	assert_string_equal(trace_rundir_base(), "/dev/shm");
	assert_int_equal(rmdir(runtime), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_private_tmpfs_runtime_dir_first),
		cmocka_unit_test(test_shared_or_disk_runtime_dir_is_passed_over),
		cmocka_unit_test(test_tmpdir_then_tmp_without_tmpfs),
		cmocka_unit_test(test_a_base_too_long_for_the_socket_is_passed_over),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
