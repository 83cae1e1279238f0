/* The sandbox decision on this source tree (the unit tests run from the
 * repository root) with a fake ownership oracle: intermediate directories,
 * magic /proc links, "..", unknown files, memoisation, writes, failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "ipc/proto.h"
#include "trace/service/sandbox.h"

static char root[PATH_MAX], err[1024];
static int calls, fail_oracle;

static int fake_owner(void *ctx, const char *path, char *pkg, size_t len)
{
	(void)ctx;
	calls++;
	if (fail_oracle)
		return -1;
	const char *rel = path + strlen(root);
	if (!strcmp(rel, "/src/trace") || !strcmp(rel, "/src/ipc/handshake.c")) {
		snprintf(pkg, len, "tracepkg");
		return SBX_OWNER_FOREIGN;
	}
	if (!strcmp(rel, "/src/trace/service/probes.c")) {
		snprintf(pkg, len, "probespkg");
		return SBX_OWNER_FOREIGN;
	}
	if (!strcmp(rel, "/src/ipc/msg.c"))
		return SBX_OWNER_NONE;
	if (!strcmp(rel, "/src/ipc/peer.c"))
		return SBX_OWNER_UNMANAGED;
	return SBX_OWNER_DEP;
}

struct fixture {
	struct policy pol;
	struct sandbox sbx;
	struct sbx_decision d;
};

static struct fixture *setup_with(enum policy_unknown unknown, const char *deny)
{
	struct fixture *f = calloc(1, sizeof *f);
	assert_non_null(f);
	policy_init(&f->pol);
	char p[PATH_MAX + 32];
	assert_int_equal(policy_add(&f->pol, POLICY_READ, "/", err, sizeof err), 0);
	assert_int_equal(policy_add(&f->pol, POLICY_ALLOW, "/proc", err, sizeof err), 0);
	snprintf(p, sizeof p, "%s/src", root);
	assert_int_equal(policy_add(&f->pol, POLICY_ASK, p, err, sizeof err), 0);
	snprintf(p, sizeof p, "%s/build", root);
	assert_int_equal(policy_add(&f->pol, POLICY_ALLOW, p, err, sizeof err), 0);
	if (deny) {
		snprintf(p, sizeof p, "%s%s", root, deny);
		assert_int_equal(policy_add(&f->pol, POLICY_DENY, p, err, sizeof err), 0);
	}
	f->pol.unknown = unknown;
	policy_compile(&f->pol);
	sandbox_init(&f->sbx, &f->pol, (struct sbx_oracle){ .owner = fake_owner });
	calls = fail_oracle = 0;
	return f;
}

static int setup(void **state)
{
	*state = setup_with(UNKNOWN_REPORT, NULL);
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	sandbox_free(&f->sbx);
	policy_free(&f->pol);
	free(f);
	return 0;
}

static struct sbx_decision *decide(struct fixture *f, const char *rel, unsigned access, unsigned qflags)
{
	char path[PATH_MAX * 2];
	snprintf(path, sizeof path, "%s%s", rel[0] == '/' && strncmp(rel, "/proc", 5) ? root : "", rel);
	sandbox_decide(&f->sbx, getpid(), path, access, qflags, &f->d);
	return &f->d;
}

static const char *rel(const char *node)
{
	return !strncmp(node, root, strlen(root)) ? node + strlen(root) : node;
}

static void dependency_file_is_visible(void **state)
{
	struct sbx_decision *d = decide(*state, "/src/ipc/proto.h", KILN_A_READ, 0);
	assert_int_equal(d->verdict, KILN_V_ALLOW);
	assert_int_equal(d->reason, SBX_OK);
	assert_true(d->exists);
	assert_false(d->unknown);
	assert_string_equal(rel(d->node), "/src/ipc/proto.h");
}

static void foreign_directory_hides_what_is_below(void **state)
{
	struct sbx_decision *d = decide(*state, "/src/trace/service/sandbox.c", KILN_A_READ, 0);
	assert_int_equal(d->verdict, KILN_V_HIDE);
	assert_int_equal(d->reason, SBX_HIDDEN_PKG);
	assert_string_equal(rel(d->node), "/src/trace");
	assert_string_equal(d->pkg, "tracepkg");
	d = decide(*state, "/src/trace/new.c", KILN_A_CREATE | KILN_A_WRITE, 0);
	assert_int_equal(d->verdict, KILN_V_DENY); /* O_CREAT on a hidden path */
	assert_int_equal(d->reason, SBX_HIDDEN_PKG);
	d = decide(*state, "/src/ipc/handshake.c", KILN_A_STAT, KILN_Q_NOFOLLOW);
	assert_int_equal(d->verdict, KILN_V_HIDE);
}

/* A hidden directory's files may be other hidden packages': the report
 * names the package of the path asked when the registry knows it. */
static void hidden_directory_names_the_owner_of_the_path_asked(void **state)
{
	struct sbx_decision *d = decide(*state, "/src/trace/service/probes.c", KILN_A_STAT, 0);
	assert_int_equal(d->verdict, KILN_V_HIDE);
	assert_int_equal(d->reason, SBX_HIDDEN_PKG);
	assert_string_equal(rel(d->node), "/src/trace");
	assert_string_equal(d->pkg, "probespkg");
	assert_string_equal(rel(d->below), "/src/trace/service/probes.c");
	/* the same file by another spelling, and what another package owns */
	d = decide(*state, "/src/trace/./service//probes.c", KILN_A_READ, 0);
	assert_string_equal(d->pkg, "probespkg");
	assert_string_equal(rel(d->below), "/src/trace/service/probes.c");
	d = decide(*state, "/src/trace/service/sandbox.c", KILN_A_READ, 0);
	assert_string_equal(d->pkg, "tracepkg");
	assert_string_equal(d->below, "");
	/* the directory itself, and a path that leaves it by '..' */
	d = decide(*state, "/src/trace", KILN_A_LIST, 0);
	assert_string_equal(d->pkg, "tracepkg");
	assert_string_equal(d->below, "");
	d = decide(*state, "/src/trace/../trace/service/probes.c", KILN_A_READ, 0);
	assert_string_equal(d->pkg, "probespkg");
	d = decide(*state, "/src/trace/../ipc/handshake.c", KILN_A_READ, 0);
	assert_int_equal(d->verdict, KILN_V_HIDE);
	assert_string_equal(rel(d->node), "/src/trace");
	assert_string_equal(d->pkg, "tracepkg");
	assert_string_equal(d->below, "");
	d = decide(*state, "/src/ipc/proto.h", KILN_A_READ, 0);
	assert_string_equal(d->below, "");
}

static void dotdot_is_physical_and_proc_self_is_the_client(void **state)
{
	struct sbx_decision *d = decide(*state, "/src/ipc/../trace/verdict.h", KILN_A_READ, 0);
	assert_int_equal(d->verdict, KILN_V_HIDE);
	/* /proc/self/cwd is this process's cwd (the repository root). */
	d = decide(*state, "/proc/self/cwd/src/trace/verdict.h", KILN_A_READ, 0);
	assert_int_equal(d->verdict, KILN_V_HIDE);
	assert_string_equal(rel(d->node), "/src/trace");
	d = decide(*state, "/proc/self/cwd/src/ipc/proto.h", KILN_A_READ, 0);
	assert_int_equal(d->verdict, KILN_V_ALLOW);
	assert_string_equal(rel(d->node), "/src/ipc/proto.h");
	/* An fd magic link as the last component is not followed. */
	d = decide(*state, "/proc/self/fd/0", KILN_A_READ, 0);
	assert_int_equal(d->verdict, KILN_V_ALLOW);
	assert_true(d->exists);
}

static void unknown_files(void **state)
{
	struct sbx_decision *d = decide(*state, "/src/ipc/msg.c", KILN_A_READ, 0);
	assert_int_equal(d->verdict, KILN_V_ALLOW);
	assert_true(d->unknown);
	d = decide(*state, "/src/ipc/peer.c", KILN_A_READ, 0); /* tree the registry ignores */
	assert_int_equal(d->verdict, KILN_V_ALLOW);
	assert_false(d->unknown);
	d = decide(*state, "/src/ipc/nonexistent.c", KILN_A_READ, 0);
	assert_int_equal(d->verdict, KILN_V_ALLOW);
	assert_false(d->exists);
	assert_false(d->unknown);

	struct fixture *h = setup_with(UNKNOWN_HIDE, NULL);
	d = decide(h, "/src/ipc/msg.c", KILN_A_READ, 0);
	assert_int_equal(d->verdict, KILN_V_HIDE);
	assert_int_equal(d->reason, SBX_HIDDEN_UNKNOWN);
	assert_true(sandbox_entry_hidden(&h->sbx, strcat(strcpy(h->d.node, root), "/src/ipc"), "msg.c"));
	void *s = h;
	teardown(&s);

	struct fixture *a = setup_with(UNKNOWN_ALLOW, NULL);
	d = decide(a, "/src/ipc/msg.c", KILN_A_READ, 0);
	assert_int_equal(d->verdict, KILN_V_ALLOW);
	assert_false(d->unknown);
	s = a;
	teardown(&s);
}

static void decisions_are_memoised(void **state)
{
	decide(*state, "/src/ipc/proto.h", KILN_A_READ, 0);
	int first = calls;
	assert_true(first >= 3); /* /src, /src/ipc, /src/ipc/proto.h */
	decide(*state, "/src/ipc/proto.h", KILN_A_STAT, 0);
	decide(*state, "/src/ipc/../ipc/proto.h", KILN_A_READ, 0);
	assert_int_equal(calls, first);
}

static void writes(void **state)
{
	struct sbx_decision *d = decide(*state, "/src/ipc/proto.h", KILN_A_WRITE, 0);
	assert_int_equal(d->verdict, KILN_V_DENY);
	assert_int_equal(d->reason, SBX_WRITE_REFUSED);
	d = decide(*state, "/src/ipc/nodir/../new.h", KILN_A_CREATE, 0);
	assert_int_equal(d->verdict, KILN_V_DENY);
	assert_string_equal(rel(d->node), "/src/ipc/new.h");
	d = decide(*state, "/build/out/x.o", KILN_A_CREATE | KILN_A_WRITE, 0);
	assert_int_equal(d->verdict, KILN_V_ALLOW);
	d = decide(*state, "/README.md", KILN_A_DELETE, KILN_Q_NOFOLLOW); /* read-only area */
	assert_int_equal(d->verdict, KILN_V_DENY);
	/* mkdir of an existing directory: EEXIST from the kernel, not a refusal... */
	d = decide(*state, "/src", KILN_A_CREATE, KILN_Q_NOFOLLOW);
	assert_int_equal(d->verdict, KILN_V_ALLOW);
	/* ...but an existing file may not be replaced or written. */
	d = decide(*state, "/README.md", KILN_A_CREATE, KILN_Q_NOFOLLOW);
	assert_int_equal(d->verdict, KILN_V_DENY);
	d = decide(*state, "/src", KILN_A_DELETE, KILN_Q_NOFOLLOW);
	assert_int_equal(d->verdict, KILN_V_DENY);
}

static void deny_rules_hide(void **state)
{
	(void)state;
	struct fixture *f = setup_with(UNKNOWN_REPORT, "/src/ipc");
	struct sbx_decision *d = decide(f, "/src/ipc/proto.h", KILN_A_READ, 0);
	assert_int_equal(d->verdict, KILN_V_HIDE);
	assert_int_equal(d->reason, SBX_HIDDEN_RULE);
	assert_string_equal(rel(d->node), "/src/ipc");
	void *s = f;
	teardown(&s);
}

static void failures_fail_closed(void **state)
{
	struct fixture *f = *state;
	struct sbx_decision *d = decide(f, "relative/path", KILN_A_READ, 0);
	assert_int_equal(d->verdict, KILN_V_DENY);
	assert_int_equal(d->reason, SBX_FAILED);
	char *longp = malloc(SBX_BUF + 10);
	memset(longp, 'a', SBX_BUF + 9);
	longp[0] = '/';
	longp[SBX_BUF + 9] = '\0';
	sandbox_decide(&f->sbx, getpid(), longp, KILN_A_READ, 0, &f->d);
	assert_int_equal(f->d.verdict, KILN_V_DENY);
	free(longp);
	fail_oracle = 1;
	d = decide(f, "/src/ipc/proto.h", KILN_A_READ, 0);
	assert_int_equal(d->verdict, KILN_V_DENY);
	assert_int_equal(d->reason, SBX_FAILED);
	fail_oracle = 0;
	d = decide(f, "/src/ipc/proto.h", KILN_A_READ, 0); /* a failure is not memoised */
	assert_int_equal(d->verdict, KILN_V_ALLOW);
}

static void directory_entries(void **state)
{
	struct fixture *f = *state;
	char dir[PATH_MAX + 8];
	snprintf(dir, sizeof dir, "%s/src", root);
	assert_true(sandbox_entry_hidden(&f->sbx, dir, "trace"));
	assert_false(sandbox_entry_hidden(&f->sbx, dir, "ipc"));
	assert_false(sandbox_entry_hidden(&f->sbx, dir, "no-such-entry"));
	snprintf(dir, sizeof dir, "%s/src/ipc", root);
	assert_false(sandbox_entry_hidden(&f->sbx, dir, "msg.c")); /* unknown: reported, shown */
}

static void same_file(const struct sbx_decision *d, const char *path, int dir)
{
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_true(d->id_flags & (dir ? KILN_ID_DIR : KILN_ID_FILE));
	assert_int_equal(dir ? d->dir_dev : d->dev, (uint64_t)st.st_dev);
	assert_int_equal(dir ? d->dir_ino : d->ino, (uint64_t)st.st_ino);
}

/* What binds an answer to the file the client's call reaches: the
 * identities the walk's own lstat calls saw (docs/protocol.md). */
static void identities_are_what_the_walk_saw(void **state)
{
	char p[PATH_MAX + 64], link[PATH_MAX + 64];
	snprintf(p, sizeof p, "%s/src/ipc/proto.h", root);
	struct sbx_decision *d = decide(*state, "/src/ipc/proto.h", KILN_A_READ, 0);
	same_file(d, p, 0);
	assert_false(d->links);
	snprintf(p, sizeof p, "%s/src/ipc", root);
	same_file(d, p, 1);
	d = decide(*state, "/src/ipc/../ipc/proto.h", KILN_A_READ, 0);
	snprintf(p, sizeof p, "%s/src/ipc/proto.h", root);
	same_file(d, p, 0);
	/* absent: no file, and the directory a creation would land in */
	d = decide(*state, "/src/ipc/no-such-file.h", KILN_A_READ, 0);
	assert_false(d->id_flags & KILN_ID_FILE);
	snprintf(p, sizeof p, "%s/src/ipc", root);
	same_file(d, p, 1);
	d = decide(*state, "/src/no-such-dir/x.h", KILN_A_READ, 0);
	assert_int_equal(d->id_flags, 0);
	/* through a symlink: the target, and the walk says it followed one */
	snprintf(link, sizeof link, "%s/build/kiln-test-idlink", root);
	unlink(link);
	snprintf(p, sizeof p, "%s/src/ipc/proto.h", root);
	assert_int_equal(symlink(p, link), 0);
	d = decide(*state, "/build/kiln-test-idlink", KILN_A_READ, 0);
	assert_true(d->links);
	same_file(d, p, 0);
	d = decide(*state, "/build/kiln-test-idlink", KILN_A_STAT, KILN_Q_NOFOLLOW);
	assert_false(d->links);
	struct stat lst;
	assert_int_equal(lstat(link, &lst), 0);
	assert_int_equal(d->ino, (uint64_t)lst.st_ino);
	unlink(link);
	/* /proc: a held fd is the file it holds; a namespace link the
	 * namespace; the rest of /proc by device only */
	d = decide(*state, "/proc/self/fd/0", KILN_A_READ, 0);
	struct stat held;
	assert_int_equal(fstat(0, &held), 0);
	assert_true(d->id_flags & KILN_ID_FILE);
	assert_int_equal(d->ino, (uint64_t)held.st_ino);
	d = decide(*state, "/proc/self/ns/mnt", KILN_A_READ, 0);
	assert_true(d->exists);
	same_file(d, "/proc/self/ns/mnt", 0);
	d = decide(*state, "/proc/self/status", KILN_A_READ, 0);
	assert_true(d->id_flags & KILN_ID_DEV_ONLY);
}

int main(void)
{
	if (!getcwd(root, sizeof root))
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(dependency_file_is_visible, setup, teardown),
		cmocka_unit_test_setup_teardown(foreign_directory_hides_what_is_below, setup, teardown),
		cmocka_unit_test_setup_teardown(hidden_directory_names_the_owner_of_the_path_asked, setup,
						teardown),
		cmocka_unit_test_setup_teardown(dotdot_is_physical_and_proc_self_is_the_client, setup, teardown),
		cmocka_unit_test_setup_teardown(unknown_files, setup, teardown),
		cmocka_unit_test_setup_teardown(decisions_are_memoised, setup, teardown),
		cmocka_unit_test_setup_teardown(writes, setup, teardown),
		cmocka_unit_test_setup_teardown(deny_rules_hide, setup, teardown),
		cmocka_unit_test_setup_teardown(failures_fail_closed, setup, teardown),
		cmocka_unit_test_setup_teardown(directory_entries, setup, teardown),
		cmocka_unit_test_setup_teardown(identities_are_what_the_walk_saw, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
