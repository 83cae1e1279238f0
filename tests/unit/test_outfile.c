/* The output-file rules (common/outfile.c) at the API level: what exists in
 * the directory before the commit, after an abort, and when the name changes
 * between open and commit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/outfile.h"

static char dir[64], err[PATH_MAX + 256];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof dir, "/tmp/kiln-outfile-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd);
}

static const char *at(const char *name)
{
	static char buf[2][PATH_MAX];
	static int k;
	k ^= 1;
	snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
	return buf[k];
}

static int entries(void)
{
	DIR *d = opendir(dir);
	int n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

static char *slurp(const char *path)
{
	static char buf[256];
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void nothing_visible_until_commit(void **state)
{
	(void)state;
	struct outfile o;
	FILE *f = outfile_fopen(&o, AT_FDCWD, at("new.json"), 1, 0, err, sizeof err);
	assert_non_null(f);
	assert_int_equal(o.d.kind, OUTFILE_REPLACE);
	fputs("data\n", f);
	assert_int_equal(entries(), 0); /* an unnamed O_TMPFILE */
	assert_int_equal(outfile_commit(&o, err, sizeof err), 0);
	assert_int_equal(entries(), 1);
	assert_string_equal(slurp(at("new.json")), "data\n");
}

static void abort_leaves_the_old_file(void **state)
{
	(void)state;
	FILE *old = fopen(at("keep"), "w");
	fputs("old\n", old);
	fclose(old);
	struct outfile o;
	FILE *f = outfile_fopen(&o, AT_FDCWD, at("keep"), 1, 0, err, sizeof err);
	assert_non_null(f);
	fputs("new\n", f);
	outfile_abort(&o);
	assert_int_equal(entries(), 1);
	assert_string_equal(slurp(at("keep")), "old\n");
}

static void name_turned_symlink_is_not_replaced(void **state)
{
	(void)state;
	struct outfile o;
	FILE *f = outfile_fopen(&o, AT_FDCWD, at("race"), 1, 0, err, sizeof err);
	assert_non_null(f);
	fputs("x\n", f);
	assert_int_equal(symlink("/dev/null", at("race")), 0);
	assert_int_equal(outfile_commit(&o, err, sizeof err), -1);
	assert_non_null(strstr(err, "a symlink meanwhile; not replaced"));
	struct stat st;
	assert_int_equal(lstat(at("race"), &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(entries(), 1);
}

static void symlink_chain_resolves_to_the_final_name(void **state)
{
	(void)state;
	assert_int_equal(mkdir(at("sub"), 0755), 0);
	assert_int_equal(symlink("sub/two", at("one")), 0);
	assert_int_equal(symlink("target", at("sub/two")), 0); /* relative to sub/ */
	struct outfile_dest d;
	assert_int_equal(outfile_resolve(AT_FDCWD, at("one"), 0, &d, err, sizeof err), 0);
	assert_int_equal(d.kind, OUTFILE_REPLACE);
	assert_false(d.exists);
	assert_string_equal(d.name, "target");
	assert_string_equal(d.path, at("sub/target"));
}

static void loops_and_flags_are_refused(void **state)
{
	(void)state;
	assert_int_equal(symlink("b", at("a")), 0);
	assert_int_equal(symlink("a", at("b")), 0);
	assert_int_equal(outfile_check(AT_FDCWD, at("a"), 0, err, sizeof err), -1);
	assert_non_null(strstr(err, "too many levels"));
	assert_int_equal(outfile_check(AT_FDCWD, "-", OUTFILE_REGULAR_ONLY, err, sizeof err), -1);
	assert_int_equal(mkfifo(at("fifo"), 0600), 0);
	assert_int_equal(outfile_check(AT_FDCWD, at("fifo"), OUTFILE_REGULAR_ONLY, err, sizeof err), -1);
	assert_non_null(strstr(err, "a FIFO"));
	assert_int_equal(outfile_check(AT_FDCWD, at("fifo"), 0, err, sizeof err), 0);
	assert_int_equal(outfile_check(AT_FDCWD, dir, 0, err, sizeof err), -1);
	assert_non_null(strstr(err, "is a directory"));
}

static void no_replace_refuses_an_existing_name(void **state)
{
	(void)state;
	FILE *f = fopen(at("map"), "w");
	fclose(f);
	assert_int_equal(outfile_check(AT_FDCWD, at("map"), OUTFILE_NO_REPLACE, err, sizeof err), -1);
	assert_non_null(strstr(err, "already exists"));
	struct outfile o;
	assert_int_equal(outfile_open(&o, AT_FDCWD, at("fresh"), 1, OUTFILE_NO_REPLACE, err, sizeof err), 0);
	assert_int_equal(write(o.fd, "m", 1), 1);
	assert_int_equal(outfile_commit(&o, err, sizeof err), 0);
	assert_string_equal(slurp(at("fresh")), "m");
}

static void own_fd_link_writes_that_fd(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe(p), 0);
	char link[64];
	snprintf(link, sizeof link, "/proc/self/fd/%d", p[1]);
	assert_int_equal(symlink(link, at("stand-in")), 0);
	struct outfile o;
	FILE *f = outfile_fopen(&o, AT_FDCWD, at("stand-in"), 1, 0, err, sizeof err);
	assert_non_null(f);
	assert_int_equal(o.d.kind, OUTFILE_STDOUT);
	fputs("through\n", f);
	assert_int_equal(outfile_commit(&o, err, sizeof err), 0);
	close(p[1]);
	char buf[32] = { 0 };
	assert_int_equal(read(p[0], buf, sizeof buf - 1), 8);
	assert_string_equal(buf, "through\n");
	close(p[0]);
	struct stat st;
	assert_int_equal(lstat(at("stand-in"), &st), 0);
	assert_true(S_ISLNK(st.st_mode));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(nothing_visible_until_commit, setup, teardown),
		cmocka_unit_test_setup_teardown(abort_leaves_the_old_file, setup, teardown),
		cmocka_unit_test_setup_teardown(name_turned_symlink_is_not_replaced, setup, teardown),
		cmocka_unit_test_setup_teardown(symlink_chain_resolves_to_the_final_name, setup, teardown),
		cmocka_unit_test_setup_teardown(loops_and_flags_are_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(no_replace_refuses_an_existing_name, setup, teardown),
		cmocka_unit_test_setup_teardown(own_fd_link_writes_that_fd, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
