/* Unit tests: the seal on the registry's in-memory copy (snapshot.c) holds
 * against every way to change it, and taking it does not depend on who else
 * holds a reference to the copy's pages. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "registry/internal.h"

static int filled_memfd(size_t size)
{
	int m = memfd_create("test-registry-copy", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	assert_true(m >= 0);
	char buf[4096];
	memset(buf, 'r', sizeof buf);
	for (size_t done = 0; done < size; done += sizeof buf)
		assert_int_equal(write(m, buf, sizeof buf), (ssize_t)sizeof buf);
	return m;
}

static void seal_refuses_every_change(void **state)
{
	(void)state;
	int m = filled_memfd(8192);
	assert_int_equal(registry_seal_copy(m), 0);

	assert_int_equal(pwrite(m, "x", 1, 0), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(write(m, "x", 1), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(ftruncate(m, 4096), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(ftruncate(m, 16384), -1);
	assert_int_equal(errno, EPERM);
	assert_true(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, m, 0) == MAP_FAILED);
	assert_int_equal(errno, EPERM);

	/* Nor through a second open file of the same memory. */
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", m);
	int again = open(proc, O_RDWR);
	assert_true(again >= 0);
	assert_int_equal(write(again, "x", 1), -1);
	assert_int_equal(errno, EPERM);
	assert_true(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, again, 0) == MAP_FAILED);
	assert_int_equal(errno, EPERM);
	close(again);

	char *p = mmap(NULL, 8192, PROT_READ, MAP_SHARED, m, 0);
	assert_true(p != MAP_FAILED);
	assert_int_equal(p[8191], 'r');
	assert_int_equal(mprotect(p, 8192, PROT_READ | PROT_WRITE), -1);
	assert_int_equal(errno, EACCES);
	munmap(p, 8192);

	/* F_SEAL_SEAL: nobody can take a seal off by adding another, nor add one. */
	assert_int_equal(fcntl(m, F_ADD_SEALS, F_SEAL_WRITE), -1);
	assert_int_equal(errno, EPERM);
	close(m);
}

/* A pipe holding a page of the copy stands for a reference the kernel itself
 * may hold for a moment: F_SEAL_WRITE waited for it, then failed with EBUSY. */
static void seal_is_taken_while_a_page_is_referenced(void **state)
{
	(void)state;
	int m = filled_memfd(8192);
	int pipefd[2];
	assert_int_equal(pipe(pipefd), 0);
	off64_t off = 0;
	assert_int_equal(splice(m, &off, pipefd[1], NULL, 4096, 0), 4096);

	assert_int_equal(registry_seal_copy(m), 0);
	assert_int_equal(pwrite(m, "x", 1, 0), -1);
	assert_int_equal(errno, EPERM);

	char page[4096];
	assert_int_equal(read(pipefd[0], page, sizeof page), (ssize_t)sizeof page);
	assert_int_equal(page[0], 'r');
	close(pipefd[0]);
	close(pipefd[1]);
	close(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(seal_refuses_every_change),
		cmocka_unit_test(seal_is_taken_while_a_page_is_referenced),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
