/* Unit tests: a registry handle holding its file under a read lease
 * (REGISTRY_SNAPSHOT_LEASE, snapshot.c). Each way a build could rewrite the
 * file waits until the holder, told by SIGIO, has taken its copy, and no
 * answer changes; where no lease can be had the copy is taken at the
 * start; a lease the kernel broke before the copy was taken is an error,
 * never an answer from the rewritten file. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "manifest_db.h"
#include "registry/internal.h"
#include "registry/registry.h"

static char dir[PATH_MAX], db[PATH_MAX + 32], other[PATH_MAX + 32], work[PATH_MAX + 32];
static char err[2048];

#define FOO_H "/usr/include/foo.h"

static sigset_t sigio_set(void)
{
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGIO);
	return s;
}

static void drain_sigio(void)
{
	sigset_t s = sigio_set();
	struct timespec zero = { 0, 0 };
	while (sigtimedwait(&s, NULL, &zero) == SIGIO)
		;
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof dir, "/tmp/kiln-lease-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(db, sizeof db, "%s/registry.db", dir);
	snprintf(other, sizeof other, "%s/other.db", dir);
	snprintf(work, sizeof work, "%s/work.db", dir);
	char manifest[PATH_MAX + 32];
	snprintf(manifest, sizeof manifest, "%s/m.manifest", dir);
	if (manifest_db(manifest, "Package: libfoo-dev\nVersion: 1\nFiles:\n /usr/\n /usr/include/\n " FOO_H "\n",
			db, NULL) ||
	    manifest_db(manifest, "Package: base\nVersion: 1\nEssential: yes\nFiles:\n /usr/\n /usr/bin/\n", other,
			NULL))
		return -1;
	sigset_t s = sigio_set();
	return sigprocmask(SIG_BLOCK, &s, NULL);
}

static int teardown(void **state)
{
	(void)state;
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd);
}

static void copy_file(const char *from, const char *to)
{
	char cmd[3 * PATH_MAX];
	snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
	assert_int_equal(system(cmd), 0);
}

static bool same_file_content(const char *a, const char *b)
{
	char cmd[3 * PATH_MAX];
	snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", a, b);
	return system(cmd) == 0;
}

/* A fresh copy of the registry to work on, no SIGIO pending. */
static void fresh_work(void)
{
	drain_sigio();
	char side[PATH_MAX + 40];
	for (const char *const *x = (const char *const[]){ "-wal", "-shm", NULL }; *x; x++) {
		snprintf(side, sizeof side, "%s%s", work, *x);
		unlink(side); /* a WAL test's */
	}
	unlink(work);
	copy_file(db, work);
}

/* A fresh copy of the registry, opened as the trace server opens it. */
static struct kiln_registry *leased(void)
{
	fresh_work();
	struct kiln_registry *reg =
		registry_open(work, REGISTRY_SNAPSHOT_LATER | REGISTRY_SNAPSHOT_LEASE, err, sizeof err);
	if (!reg)
		fail_msg("open: %s", err);
	assert_int_equal(registry_snapshot_finish(reg, err, sizeof err), 0);
	return reg;
}

static int owners_of_foo(struct kiln_registry *reg)
{
	int64_t ids[4];
	return registry_owners(reg, FOO_H, ids, 4);
}

/* Writes other.db's bytes through fd from offset 0. */
static int write_other(int fd)
{
	int in = open(other, O_RDONLY);
	char buf[65536];
	ssize_t n;
	if (in < 0)
		return -1;
	while ((n = read(in, buf, sizeof buf)) > 0)
		if (write(fd, buf, (size_t)n) != n)
			return -1;
	close(in);
	return 0;
}

enum technique { IN_PLACE, TRUNCATE, HARD_LINK, PROC_FD, NONBLOCK };

/* In a child: the technique; exit status 0 if the file was written. */
static void attack(enum technique t, int lease_fd)
{
	char path[PATH_MAX + 64];
	int fd = -1;
	switch (t) {
	case IN_PLACE:
		fd = open(work, O_WRONLY);
		break;
	case TRUNCATE:
		_exit(truncate(work, 0) == 0 ? 0 : 1);
	case HARD_LINK:
		snprintf(path, sizeof path, "%s/hard", dir);
		unlink(path);
		if (link(work, path) < 0)
			_exit(2);
		fd = open(path, O_WRONLY | O_TRUNC);
		break;
	case PROC_FD:
		snprintf(path, sizeof path, "/proc/%ld/fd/%d", (long)getppid(), lease_fd);
		fd = open(path, O_RDWR);
		break;
	case NONBLOCK:
		fd = open(work, O_WRONLY | O_NONBLOCK);
		_exit(fd < 0 && errno == EWOULDBLOCK ? 3 : 1);
	}
	_exit(fd >= 0 && write_other(fd) == 0 ? 0 : 1);
}

/* by_check: the copy taken by registry_snapshot_intact (the check after
 * the report) rather than by registry_snapshot_take. */
static void writer_waits_for_the_copy(enum technique t, int want_status, bool by_check)
{
	/* Nothing asked before: the answer below is read from the file's
	 * pages, not from SQLite's cache of them. */
	struct kiln_registry *reg = leased();
	assert_int_equal(registry_snapshot_kind(reg), REGISTRY_SNAPSHOT_LEASED);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		attack(t, reg->lease->fd);
	sigset_t s = sigio_set();
	struct timespec ten = { 10, 0 };
	assert_int_equal(sigtimedwait(&s, NULL, &ten), SIGIO);
	if (t != NONBLOCK) { /* still waiting: nothing written yet */
		int st;
		assert_int_equal(waitpid(pid, &st, WNOHANG), 0);
		assert_true(same_file_content(work, db));
	}
	if (by_check)
		assert_true(registry_snapshot_intact(reg));
	else
		assert_int_equal(registry_snapshot_take(reg, err, sizeof err), 0);
	assert_int_equal(registry_snapshot_kind(reg), REGISTRY_SNAPSHOT_COPY_AFTER_LEASE);
	assert_true(registry_snapshot_intact(reg));
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), want_status);
	if (t != NONBLOCK) { /* the file really changed, and with it a plain handle's answer */
		assert_false(same_file_content(work, db));
		struct kiln_registry *plain = registry_open(work, REGISTRY_RDONLY, err, sizeof err);
		assert_true(!plain || owners_of_foo(plain) != 1);
		registry_close(plain);
	}
	assert_int_equal(owners_of_foo(reg), 1);
	assert_int_equal(registry_snapshot_take(reg, err, sizeof err), 0); /* nothing left */
	registry_close(reg);
}

/* The techniques above, each a test of its own: the exit status the
 * writer must end with, and whether the check after the report (rather
 * than registry_snapshot_take) takes the copy. A non-blocking open is
 * refused at once (EWOULDBLOCK: status 3), and still told. */
struct writer_case {
	enum technique t;
	int status;
	bool by_check;
};
static const struct writer_case in_place = { IN_PLACE, 0, false }, truncate_it = { TRUNCATE, 0, false },
				hard_link = { HARD_LINK, 0, false }, proc_fd = { PROC_FD, 0, false },
				by_check = { IN_PLACE, 0, true }, nonblock = { NONBLOCK, 3, false };

static void writer_case(void **state)
{
	const struct writer_case *w = *state;
	writer_waits_for_the_copy(w->t, w->status, w->by_check);
}

#define WRITER_TEST(name, c) { name, writer_case, NULL, NULL, (void *)&(c) }

/* Another file renamed over the path: the handle keeps the file it holds,
 * no copy is needed. */
static void replaced_by_rename(void **state)
{
	(void)state;
	struct kiln_registry *reg = leased();
	char tmp[PATH_MAX + 32];
	snprintf(tmp, sizeof tmp, "%s/tmp.db", dir);
	copy_file(other, tmp);
	assert_int_equal(rename(tmp, work), 0);
	assert_int_equal(owners_of_foo(reg), 1);
	assert_int_equal(registry_snapshot_kind(reg), REGISTRY_SNAPSHOT_LEASED);
	registry_close(reg);
}

/* The kernel broke the lease itself (a writer waited lease-break-time) and
 * the file changed before the copy: an error, not the new file's answers.
 * (Giving the lease up here stands for the kernel's removing it.) */
static void written_before_the_copy_is_an_error(void **state)
{
	(void)state;
	struct kiln_registry *reg = leased();
	assert_true(registry_snapshot_intact(reg));
	assert_int_equal(registry_snapshot_kind(reg), REGISTRY_SNAPSHOT_LEASED); /* no side effect */
	assert_int_equal(fcntl(reg->lease->fd, F_SETLEASE, F_UNLCK), 0);
	int fd = open(work, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(write_other(fd), 0);
	close(fd);
	assert_int_equal(registry_snapshot_take(reg, err, sizeof err), -1);
	assert_non_null(strstr(err, "written before its copy could be taken"));
	assert_false(registry_snapshot_intact(reg)); /* what it reads now is not vouched for */
	registry_close(reg);
}

/* The same found by the check after the report: not intact. */
static void broken_lease_found_by_the_check(void **state)
{
	(void)state;
	struct kiln_registry *reg = leased();
	assert_int_equal(fcntl(reg->lease->fd, F_SETLEASE, F_UNLCK), 0);
	assert_false(registry_snapshot_intact(reg));
	registry_close(reg);
}

static void copied_at_open(const char *why)
{
	struct kiln_registry *reg =
		registry_open(work, REGISTRY_SNAPSHOT_LATER | REGISTRY_SNAPSHOT_LEASE, err, sizeof err);
	if (!reg)
		fail_msg("open: %s", err);
	if (registry_snapshot_finish(reg, err, sizeof err))
		fail_msg("%s: %s", why, err);
	if (registry_snapshot_kind(reg) != REGISTRY_SNAPSHOT_COPY)
		fail_msg("%s: not copied at the start", why);
	assert_int_equal(owners_of_foo(reg), 1);
	int fd = open(work, O_WRONLY | O_NONBLOCK); /* no lease in its way */
	assert_true(fd >= 0);
	close(fd);
	registry_close(reg);
}

/* Where no lease can be had, the copy is taken at the start. */
static void no_lease_no_risk(void **state)
{
	(void)state;
	fresh_work();

	int w = open(work, O_RDWR); /* open for writing: F_SETLEASE says EAGAIN */
	assert_true(w >= 0);
	copied_at_open("open for writing");
	close(w);

	sigset_t s = sigio_set();
	sigprocmask(SIG_UNBLOCK, &s, NULL); /* SIGIO would kill the holder */
	copied_at_open("SIGIO not blocked");
	sigprocmask(SIG_BLOCK, &s, NULL);

	/* A WAL database (kiln's imports never write one): its -wal file is
	 * not under the lease, so no lease (wal_copied_with_its_wal_file). */
	sqlite3 *d;
	assert_int_equal(sqlite3_open(work, &d), SQLITE_OK);
	assert_int_equal(sqlite3_exec(d, "PRAGMA journal_mode=WAL", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(d);
	copied_at_open("a WAL database");
}

static void sql(sqlite3 *d, const char *q)
{
	char *msg = NULL;
	if (sqlite3_exec(d, q, NULL, NULL, &msg) != SQLITE_OK)
		fail_msg("%s: %s", q, msg);
}

/* A WAL database's newest pages are in its -wal file until a checkpoint:
 * a copy of the main file alone would miss them (and sqlite3_deserialize
 * refuses a WAL header). The copy holds what SQLite reads when it is taken,
 * -wal file included, and nothing written after. */
static void wal_copied_with_its_wal_file(void **state)
{
	(void)state;
	fresh_work();
	sqlite3 *w; /* stays open: the last connection to close would checkpoint */
	assert_int_equal(sqlite3_open(work, &w), SQLITE_OK);
	sql(w, "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;");
	sql(w, "DELETE FROM files WHERE canonical='" FOO_H "'");
	char wal[PATH_MAX + 40];
	snprintf(wal, sizeof wal, "%s-wal", work);
	struct stat st;
	assert_int_equal(stat(wal, &st), 0);
	assert_true(st.st_size > 0); /* the deletion is in the -wal file only */

	struct kiln_registry *reg =
		registry_open(work, REGISTRY_SNAPSHOT_LATER | REGISTRY_SNAPSHOT_LEASE, err, sizeof err);
	if (!reg)
		fail_msg("open: %s", err);
	/* Written after the copy was begun: WAL lets a writer past readers. */
	sql(w, "INSERT INTO files(canonical, pkg, kind) SELECT '" FOO_H "', id, 0 FROM packages "
	       "WHERE name='libfoo-dev'");
	if (registry_snapshot_finish(reg, err, sizeof err))
		fail_msg("finish: %s", err);
	assert_int_equal(registry_snapshot_kind(reg), REGISTRY_SNAPSHOT_COPY);
	assert_int_equal(owners_of_foo(reg), 0);
	registry_close(reg);

	reg = registry_open(work, REGISTRY_RDONLY, err, sizeof err); /* the file: foo.h is back */
	assert_non_null(reg);
	assert_int_equal(owners_of_foo(reg), 1);
	registry_close(reg);
	sqlite3_close(w);
}

/* An SQLite write transaction on `path`: 0 if it committed, 1 if busy. */
static int sqlite_write(const char *path)
{
	sqlite3 *w;
	if (sqlite3_open_v2(path, &w, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
		return 2;
	sqlite3_busy_timeout(w, 0);
	int rc = sqlite3_exec(w, "BEGIN IMMEDIATE; CREATE TABLE probe(x); COMMIT;", NULL, NULL, NULL);
	sqlite3_close(w);
	return rc == SQLITE_OK ? 0 : rc == SQLITE_BUSY ? 1 : 3;
}

/* The same in a fresh process (this program run again: a forked child
 * would share SQLite's in-process record of the parent's locks). */
static int write_from_another_process(void)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execl("/proc/self/exe", "test_registry_lease", "--sqlite-write", work, (char *)NULL);
		_exit(4);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* No lease because a writer has the file open: the copy is then taken
 * under SQLite's shared lock, which trying the lease must not have dropped
 * (closing any fd of the file drops the process's POSIX locks on it). */
static void failed_lease_keeps_sqlites_lock(void **state)
{
	(void)state;
	fresh_work();
	int w = open(work, O_RDWR);
	assert_true(w >= 0);
	struct kiln_registry *reg =
		registry_open(work, REGISTRY_SNAPSHOT_LATER | REGISTRY_SNAPSHOT_LEASE, err, sizeof err);
	assert_non_null(reg);
	assert_int_equal(registry_snapshot_kind(reg), REGISTRY_SNAPSHOT_COPY);
	assert_int_equal(write_from_another_process(), 1); /* SQLITE_BUSY */
	assert_int_equal(registry_snapshot_finish(reg, err, sizeof err), 0);
	assert_int_equal(write_from_another_process(), 0);
	close(w);
	registry_close(reg);
}

/* Closing the handle gives the lease up. */
static void close_gives_the_lease_up(void **state)
{
	(void)state;
	struct kiln_registry *reg = leased();
	registry_close(reg);
	int fd = open(work, O_WRONLY | O_NONBLOCK);
	assert_true(fd >= 0);
	close(fd);
	sigset_t s;
	sigpending(&s);
	assert_false(sigismember(&s, SIGIO));
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--sqlite-write"))
		return sqlite_write(argv[2]);
	const struct CMUnitTest tests[] = {
		WRITER_TEST("rewritten_in_place", in_place),
		WRITER_TEST("truncated", truncate_it),
		WRITER_TEST("rewritten_through_a_hard_link", hard_link),
		WRITER_TEST("rewritten_through_the_holders_proc_fd", proc_fd),
		WRITER_TEST("copy_taken_by_the_check_after_the_report", by_check),
		WRITER_TEST("nonblocking_open_refused", nonblock),
		cmocka_unit_test(replaced_by_rename),
		cmocka_unit_test(written_before_the_copy_is_an_error),
		cmocka_unit_test(broken_lease_found_by_the_check),
		cmocka_unit_test(no_lease_no_risk),
		cmocka_unit_test(wal_copied_with_its_wal_file),
		cmocka_unit_test(failed_lease_keeps_sqlites_lock),
		cmocka_unit_test(close_gives_the_lease_up),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
