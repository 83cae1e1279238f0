/* How the preload library turns calls into questions and verdicts into
 * errno values (src/trace/check.c): pure functions, no server involved. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "trace/kt.h"

static void test_verdict_errno(void **state)
{
	(void)state;
	assert_int_equal(kt_verdict_errno(KILN_V_ALLOW, KILN_A_READ), 0);
	assert_int_equal(kt_verdict_errno(KILN_V_HIDE, KILN_A_READ), ENOENT);
	assert_int_equal(kt_verdict_errno(KILN_V_HIDE, KILN_A_STAT), ENOENT);
	assert_int_equal(kt_verdict_errno(KILN_V_HIDE, KILN_A_DELETE), ENOENT);
	/* creating a hidden name: it exists, so neither ENOENT nor EEXIST */
	assert_int_equal(kt_verdict_errno(KILN_V_HIDE, KILN_A_WRITE | KILN_A_CREATE), EACCES);
	assert_int_equal(kt_verdict_errno(KILN_V_DENY, KILN_A_WRITE), EACCES);
	assert_int_equal(kt_verdict_errno(KILN_V_ERROR, KILN_A_READ), EIO);
	assert_int_equal(kt_verdict_errno(42, KILN_A_READ), EIO);
}

static void test_open_classes(void **state)
{
	(void)state;
	assert_int_equal(kt_open_access(O_RDONLY), KILN_A_READ);
	assert_int_equal(kt_open_access(O_RDONLY | O_DIRECTORY), KILN_A_LIST);
	assert_int_equal(kt_open_access(O_WRONLY), KILN_A_WRITE);
	assert_int_equal(kt_open_access(O_RDWR), KILN_A_READ | KILN_A_WRITE);
	assert_int_equal(kt_open_access(O_WRONLY | O_CREAT | O_TRUNC), KILN_A_WRITE | KILN_A_CREATE);
	assert_int_equal(kt_open_access(O_RDONLY | O_TRUNC), KILN_A_READ | KILN_A_WRITE);
	assert_int_equal(kt_open_access(O_PATH | O_NOFOLLOW), KILN_A_STAT);
	assert_int_equal(kt_open_access(O_TMPFILE | O_RDWR), KILN_A_WRITE | KILN_A_CREATE);
	assert_int_equal(kt_open_qflags(O_RDONLY), 0);
	assert_int_equal(kt_open_qflags(O_RDONLY | O_NOFOLLOW), KILN_Q_NOFOLLOW);
	assert_int_equal(kt_open_qflags(O_CREAT | O_EXCL), KILN_Q_NOFOLLOW); /* never follows */
	assert_int_equal(kt_open_qflags(O_CREAT), 0);
}

static void test_fopen_classes(void **state)
{
	(void)state;
	assert_int_equal(kt_fopen_access("r"), KILN_A_READ);
	assert_int_equal(kt_fopen_access("rbe"), KILN_A_READ);
	assert_int_equal(kt_fopen_access("r+"), KILN_A_READ | KILN_A_WRITE);
	assert_int_equal(kt_fopen_access("w"), KILN_A_WRITE | KILN_A_CREATE);
	assert_int_equal(kt_fopen_access("a+"), KILN_A_READ | KILN_A_WRITE | KILN_A_CREATE);
	assert_int_equal(kt_fopen_qflags("wx"), KILN_Q_NOFOLLOW);
	assert_int_equal(kt_fopen_qflags("r"), 0);
}

static void test_check_leaves_odd_paths_to_the_kernel(void **state)
{
	(void)state;
	/* NULL and "" are the real call's EFAULT / ENOENT; AT_EMPTY_PATH is
	 * the fd itself. None of them needs the server. */
	assert_int_equal(kt_check(AT_FDCWD, NULL, KILN_A_READ, 0, 0), 0);
	assert_int_equal(kt_check(AT_FDCWD, "", KILN_A_READ, 0, 0), 0);
	assert_int_equal(kt_check(0, "", KILN_A_STAT, 0, AT_EMPTY_PATH), 0);
	/* a bad dirfd with a relative path: EBADF, as the real call would say */
	assert_int_equal(kt_check(12345, "x", KILN_A_STAT, 0, 0), EBADF);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verdict_errno),
		cmocka_unit_test(test_open_classes),
		cmocka_unit_test(test_fopen_classes),
		cmocka_unit_test(test_check_leaves_odd_paths_to_the_kernel),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
