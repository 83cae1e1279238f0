/* The sandbox's walk memo: which walks it keeps (only those that visited
 * nothing but registry-managed trees), that a build-directory path is walked
 * afresh every time, and that a write let through into a managed tree
 * forgets it; the node memo (what lstat said of each node of a managed
 * tree) likewise. Works in a temporary directory made an ask-tree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake_oracle.h"
#include "trace/service/sandbox.h"

static char top[PATH_MAX], err[1024];

struct fixture {
	struct policy pol;
	struct sandbox sbx;
	struct sbx_decision d;
};

static char *at(const char *rel)
{
	static char p[4][PATH_MAX + 64];
	static int i;
	i = (i + 1) % 4;
	snprintf(p[i], sizeof p[i], "%s%s", top, rel);
	return p[i];
}

static void touch(const char *rel)
{
	FILE *f = fopen(at(rel), "w");
	assert_non_null(f);
	fclose(f);
}

static int setup(void **state)
{
	strcpy(top, "/tmp/kiln-sbx-memo-XXXXXX");
	assert_non_null(mkdtemp(top));
	assert_int_equal(mkdir(at("/build"), 0700), 0);
	assert_int_equal(mkdir(at("/managed"), 0700), 0);
	assert_int_equal(mkdir(at("/managed/alt"), 0700), 0);
	assert_int_equal(mkdir(at("/managed/local"), 0700), 0);
	touch("/managed/a.h");
	touch("/managed/foreign.h");
	touch("/managed/alt/x");
	touch("/managed/local/x");
	touch("/build/f.c");

	struct fixture *f = calloc(1, sizeof *f);
	assert_non_null(f);
	policy_init(&f->pol);
	/* Everything is a managed tree (ancestors of the temporary directory
	 * included), except the build directory and an allow rule nested in
	 * the tree; /proc is not allowed here, to show it is never memoised. */
	assert_int_equal(policy_add(&f->pol, POLICY_ASK, "/", err, sizeof err), 0);
	assert_int_equal(policy_add(&f->pol, POLICY_ALLOW, at("/build"), err, sizeof err), 0);
	assert_int_equal(policy_add(&f->pol, POLICY_READ, at("/managed/alt"), err, sizeof err), 0);
	assert_int_equal(policy_add(&f->pol, POLICY_ALLOW, at("/managed/local"), err, sizeof err), 0);
	policy_compile(&f->pol);
	unsetenv("KILN_TRACE_NO_MEMO");
	sandbox_init(&f->sbx, &f->pol, (struct sbx_oracle){ .owner = fake_owner_by_name });
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	sandbox_free(&f->sbx);
	policy_free(&f->pol);
	free(f);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
	return system(cmd) == 0 ? 0 : -1;
}

static struct sbx_decision *decide(struct fixture *f, const char *rel, unsigned access,
				   unsigned qflags)
{
	/* /proc paths as they are, the others inside the temporary directory */
	const char *path = strncmp(rel, "/proc/", 6) ? at(rel) : rel;
	sandbox_decide(&f->sbx, getpid(), path, access, qflags, &f->d);
	return &f->d;
}

static void managed_walks_are_memoised(void **state)
{
	struct fixture *f = *state;
	assert_true(f->sbx.memo_walks);
	assert_int_equal(decide(f, "/managed/a.h", KILN_A_READ, 0)->verdict, KILN_V_ALLOW);
	assert_int_equal(f->sbx.walk_hits, 0);
	struct sbx_decision *d = decide(f, "/managed/a.h", KILN_A_STAT, 0);
	assert_int_equal(f->sbx.walk_hits, 1);
	assert_int_equal(d->verdict, KILN_V_ALLOW);
	assert_true(d->exists);
	assert_string_equal(d->node, at("/managed/a.h"));
	/* A write is refused from the memo as well: the access part is decided
	 * on every query. */
	d = decide(f, "/managed/a.h", KILN_A_WRITE, 0);
	assert_int_equal(f->sbx.walk_hits, 2);
	assert_int_equal(d->verdict, KILN_V_DENY);
	assert_int_equal(d->reason, SBX_WRITE_REFUSED);
	/* Hidden, from the memo too, with its package. */
	decide(f, "/managed/foreign.h", KILN_A_READ, 0);
	d = decide(f, "/managed/foreign.h", KILN_A_READ, 0);
	assert_int_equal(f->sbx.walk_hits, 3);
	assert_int_equal(d->verdict, KILN_V_HIDE);
	assert_string_equal(d->pkg, "pkgx");
	assert_string_equal(d->node, at("/managed/foreign.h"));
	/* The follow flag is part of the key. */
	decide(f, "/managed/a.h", KILN_A_STAT, KILN_Q_NOFOLLOW);
	assert_int_equal(f->sbx.walk_hits, 3);
	/* A read rule nested in the managed tree is managed too. */
	decide(f, "/managed/alt/x", KILN_A_READ, 0);
	decide(f, "/managed/alt/x", KILN_A_READ, 0);
	assert_int_equal(f->sbx.walk_hits, 4);
}

/* A hidden directory's walk remembers which package's path below it was
 * asked (sandbox.h, "below"), and a walk that names none has no leftover. */
static void hidden_walks_keep_the_path_below(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(mkdir(at("/managed/foreign_dir"), 0700), 0);
	touch("/managed/foreign_dir/foreign_y.pm");
	for (int i = 0; i < 2; i++) {
		struct sbx_decision *d = decide(f, "/managed/foreign_dir/foreign_y.pm", KILN_A_READ, 0);
		assert_int_equal(f->sbx.walk_hits, i);
		assert_int_equal(d->verdict, KILN_V_HIDE);
		assert_string_equal(d->node, at("/managed/foreign_dir"));
		assert_string_equal(d->pkg, "pkgy");
		assert_string_equal(d->below, at("/managed/foreign_dir/foreign_y.pm"));
		d = decide(f, "/managed/a.h", KILN_A_READ, 0);
		assert_string_equal(d->below, "");
		d = decide(f, "/managed/foreign_dir", KILN_A_LIST, 0);
		assert_string_equal(d->pkg, "pkgx");
		assert_string_equal(d->below, "");
	}
	assert_int_equal(f->sbx.walk_hits, 3); /* the second round: all three from the memo */
}

static void other_walks_are_redone(void **state)
{
	struct fixture *f = *state;
	decide(f, "/build/f.c", KILN_A_READ, 0);
	decide(f, "/build/f.c", KILN_A_READ, 0);
	decide(f, "/managed/local/x", KILN_A_READ, 0);   /* allow rule inside the tree */
	decide(f, "/managed/local/x", KILN_A_READ, 0);
	decide(f, "/proc/self/cwd", KILN_A_STAT, 0);      /* the asking process's own */
	assert_true(f->d.exists);
	decide(f, "/proc/self/cwd", KILN_A_STAT, 0);
	assert_int_equal(f->sbx.walk_hits, 0);
	assert_int_equal(f->sbx.walks.n, 0);

	/* The build file becomes a symlink to a hidden file between queries. */
	assert_int_equal(unlink(at("/build/f.c")), 0);
	assert_int_equal(symlink(at("/managed/foreign.h"), at("/build/f.c")), 0);
	struct sbx_decision *d = decide(f, "/build/f.c", KILN_A_READ, 0);
	assert_int_equal(d->verdict, KILN_V_HIDE);
	assert_string_equal(d->pkg, "pkgx");
	/* A managed-tree link into the build directory is not memoised either. */
	assert_int_equal(symlink(at("/build/f.c"), at("/managed/to-build")), 0);
	assert_int_equal(unlink(at("/build/f.c")), 0);
	touch("/build/f.c");
	assert_int_equal(decide(f, "/managed/to-build", KILN_A_READ, 0)->verdict, KILN_V_ALLOW);
	assert_int_equal(unlink(at("/build/f.c")), 0);
	assert_int_equal(symlink(at("/managed/foreign.h"), at("/build/f.c")), 0);
	assert_int_equal(decide(f, "/managed/to-build", KILN_A_READ, 0)->verdict, KILN_V_HIDE);
	assert_int_equal(f->sbx.walk_hits, 0);
}

static void a_write_into_a_managed_tree_forgets(void **state)
{
	struct fixture *f = *state;
	decide(f, "/managed/new.h", KILN_A_READ, 0);
	assert_false(decide(f, "/managed/new.h", KILN_A_READ, 0)->exists);
	assert_int_equal(f->sbx.walk_hits, 1);
	/* A write in the build directory leaves the memo alone... */
	struct sbx_decision *d = decide(f, "/build/out.o", KILN_A_CREATE | KILN_A_WRITE, 0);
	assert_int_equal(d->verdict, KILN_V_ALLOW);
	sandbox_write_passed(&f->sbx, at("/build/out.o"), KILN_A_CREATE | KILN_A_WRITE, d);
	assert_int_equal(f->sbx.walk_flushes, 0);
	/* ...one into the managed tree (as --report-only lets through) does not. */
	d = decide(f, "/managed/new.h", KILN_A_CREATE | KILN_A_WRITE, 0);
	sandbox_write_passed(&f->sbx, at("/managed/new.h"), KILN_A_CREATE | KILN_A_WRITE, d);
	assert_int_equal(f->sbx.walk_flushes, 1);
	assert_int_equal(f->sbx.walks.n, 0);
	assert_int_equal(f->sbx.nodes.n, 0);
	touch("/managed/new.h");
	assert_true(decide(f, "/managed/new.h", KILN_A_READ, 0)->exists);
}

static bool node_kept(struct fixture *f, const char *path)
{
	return pathtab_get(&f->sbx.nodes, path, strlen(path)) != NULL;
}

/* A new path below a directory already walked costs one lstat: its own. */
static void managed_nodes_are_looked_at_once(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(decide(f, "/managed/a.h", KILN_A_READ, 0)->verdict, KILN_V_ALLOW);
	assert_int_equal(f->sbx.node_hits, 0);
	assert_true(node_kept(f, at("/managed")) && node_kept(f, at("/managed/a.h")));
	/* top's components, then /managed: from the memo; the absent name is
	 * kept too (a managed tree gains no name while the build runs) */
	size_t above = 0;
	for (const char *c = top; *c; c++)
		above += *c == '/';
	struct sbx_decision *d = decide(f, "/managed/absent.h", KILN_A_STAT, 0);
	assert_false(d->exists);
	assert_int_equal(f->sbx.node_hits, above + 1);
	assert_true(node_kept(f, at("/managed/absent.h")));
	assert_false(decide(f, "/managed/absent.h/x", KILN_A_STAT, 0)->exists);
	/* a symlink's target with it: asked without following first, then
	 * followed from the memo */
	assert_int_equal(symlink("a.h", at("/managed/link.h")), 0);
	d = decide(f, "/managed/link.h", KILN_A_STAT, KILN_Q_NOFOLLOW);
	assert_string_equal(d->node, at("/managed/link.h"));
	unsigned long hits = f->sbx.node_hits;
	d = decide(f, "/managed/link.h", KILN_A_READ, 0);
	assert_int_equal(d->verdict, KILN_V_ALLOW);
	assert_true(d->exists && d->links);
	assert_string_equal(d->node, at("/managed/a.h"));
	assert_true(f->sbx.node_hits >= hits + above + 3); /* ..., /managed, link.h, a.h */
	/* Hidden through the memo as through lstat. */
	decide(f, "/managed/foreign.h", KILN_A_READ, 0);
	d = decide(f, "/managed/foreign.h", KILN_A_STAT, 0);
	assert_int_equal(d->verdict, KILN_V_HIDE);
	assert_string_equal(d->pkg, "pkgx");
	/* Nothing of the build directory, an allow rule in the tree or /proc. */
	decide(f, "/build/f.c", KILN_A_READ, 0);
	decide(f, "/managed/local/x", KILN_A_READ, 0);
	decide(f, "/proc/self/cwd", KILN_A_STAT, 0);
	assert_false(node_kept(f, at("/build")) || node_kept(f, at("/build/f.c")));
	assert_false(node_kept(f, at("/managed/local")) || node_kept(f, at("/managed/local/x")));
	assert_false(node_kept(f, "/proc") || node_kept(f, "/proc/self"));
}

static void memo_off_by_environment(void **state)
{
	struct fixture *f = *state;
	sandbox_free(&f->sbx);
	setenv("KILN_TRACE_NO_MEMO", "1", 1);
	sandbox_init(&f->sbx, &f->pol, (struct sbx_oracle){ .owner = fake_owner_by_name });
	unsetenv("KILN_TRACE_NO_MEMO");
	assert_false(f->sbx.memo_walks);
	decide(f, "/managed/a.h", KILN_A_READ, 0);
	struct sbx_decision *d = decide(f, "/managed/a.h", KILN_A_READ, 0);
	assert_int_equal(d->verdict, KILN_V_ALLOW);
	assert_int_equal(f->sbx.walk_hits, 0);
	assert_int_equal(f->sbx.walks.n, 0);
	assert_int_equal(f->sbx.nodes.n, 0);
	assert_int_equal(f->sbx.node_hits, 0);
}

/* sandbox_lstat, for those who resolve the build's paths after it (the
 * packages it touched): what a walk saw of a managed node, without a
 * system call; anything else asked of the system. */
static void lstat_after_a_walk_comes_from_the_node_memo(void **state)
{
	struct fixture *f = *state;
	touch("/managed/kept.h");
	touch("/build/gone.c");
	assert_int_equal(decide(f, "/managed/kept.h", KILN_A_READ, 0)->verdict, KILN_V_ALLOW);
	assert_int_equal(decide(f, "/build/gone.c", KILN_A_READ, 0)->verdict, KILN_V_ALLOW);
	struct stat before, st;
	assert_int_equal(lstat(at("/managed/kept.h"), &before), 0);
	size_t hits = f->sbx.node_hits;
	/* (A managed tree does not change while a build runs: removed here
	 * only to show where the answer comes from.) */
	assert_int_equal(unlink(at("/managed/kept.h")), 0);
	assert_int_equal(sandbox_lstat(&f->sbx, at("/managed/kept.h"), &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_ino, before.st_ino);
	assert_int_equal(st.st_dev, before.st_dev);
	assert_int_equal(f->sbx.node_hits, hits + 1);
	assert_int_equal(unlink(at("/build/gone.c")), 0);
	errno = 0;
	assert_int_equal(sandbox_lstat(&f->sbx, at("/build/gone.c"), &st), -1);
	assert_int_equal(errno, ENOENT);
	/* a managed node no walk saw: asked, then kept as a walk's would be */
	touch("/managed/later.h");
	assert_int_equal(sandbox_lstat(&f->sbx, at("/managed/later.h"), &st), 0);
	assert_int_equal(unlink(at("/managed/later.h")), 0);
	assert_int_equal(sandbox_lstat(&f->sbx, at("/managed/later.h"), &st), 0);
	assert_int_equal(f->sbx.node_hits, hits + 2);
	assert_int_equal(f->sbx.walk_hits, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(managed_walks_are_memoised, setup, teardown),
		cmocka_unit_test_setup_teardown(hidden_walks_keep_the_path_below, setup, teardown),
		cmocka_unit_test_setup_teardown(other_walks_are_redone, setup, teardown),
		cmocka_unit_test_setup_teardown(a_write_into_a_managed_tree_forgets, setup, teardown),
		cmocka_unit_test_setup_teardown(managed_nodes_are_looked_at_once, setup, teardown),
		cmocka_unit_test_setup_teardown(memo_off_by_environment, setup, teardown),
		cmocka_unit_test_setup_teardown(lstat_after_a_walk_comes_from_the_node_memo, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
