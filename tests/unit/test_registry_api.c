/* Unit tests: the registry C API the trace service uses (open, owners,
 * names, managed trees, closures), on a database built from a manifest. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "manifest_db.h"
#include "registry/import.h"
#include "registry/query.h"
#include "registry/registry.h"

static char dir[PATH_MAX], db[PATH_MAX + 32];

static const char manifest_text[] =
	"# test packages\n"
	"Package: base\n"
	"Version: 1\n"
	"Architecture: all\n"
	"Essential: yes\n"
	"Depends: libc\n"
	"Files:\n"
	" /usr/\n"
	" /usr/bin/\n"
	" /usr/bin/base\n"
	"\n"
	"Package: libc\n"
	"Architecture: amd64\n"
	"Depends: libgcc\n"
	"Files:\n"
	" /usr/\n"
	" /usr/lib/\n"
	" /usr/lib/libc.so.6\n"
	"\n"
	"Package: libgcc\n"
	"Architecture: amd64\n"
	"Depends: libc\n" /* a cycle, as libc6 and libgcc-s1 have */
	"Files:\n"
	" /usr/lib/libgcc_s.so.1\n"
	"\n"
	"Package: mawk\n"
	"Architecture: amd64\n"
	"Provides: awk\n"
	"Files:\n"
	" /usr/bin/mawk\n"
	" /usr/bin/awk -> mawk\n"
	"\n"
	"Package: app\n"
	"Architecture: amd64\n"
	"Depends: awk, nothere | libgcc:amd64, python3:any\n"
	"Files:\n"
	" /usr/bin/app\n"
	"\n"
	"Package: python3\n"
	"Architecture: amd64\n"
	"Multi-Arch: allowed\n"
	"\n"
	"Package: lonely\n"
	"Files:\n"
	" /opt/lonely/\n"
	" /opt/lonely/bin\n";

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof dir, "/tmp/kiln-regapi-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(db, sizeof db, "%s/sub/registry.db", dir);
	char manifest[PATH_MAX + 32];
	snprintf(manifest, sizeof manifest, "%s/test.manifest", dir);
	struct registry_import_result r;
	if (manifest_db(manifest, manifest_text, db, &r) < 0)
		return -1;
	return r.packages == 7 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd);
}

static struct kiln_registry *open_db(void)
{
	char err[1024];
	struct kiln_registry *reg = registry_open(db, REGISTRY_RDONLY, err, sizeof err);
	if (!reg)
		fail_msg("open: %s", err);
	return reg;
}

static const char *owner_name(struct kiln_registry *reg, const char *path, int *n)
{
	static char name[128];
	int64_t ids[8];
	*n = registry_owners(reg, path, ids, 8);
	name[0] = '\0';
	if (*n > 0)
		registry_package_name(reg, ids[0], name, sizeof name);
	return name;
}

static void owners(void **state)
{
	(void)state;
	struct kiln_registry *reg = open_db();
	int n;
	assert_string_equal(owner_name(reg, "/usr/lib/libc.so.6", &n), "libc");
	assert_int_equal(n, 1);
	assert_string_equal(owner_name(reg, "/usr/bin/awk", &n), "mawk");
	owner_name(reg, "/usr/bin/nothing", &n);
	assert_int_equal(n, 0);
	/* A directory has every package that lists it; cap bounds what is written. */
	int64_t ids[1] = { -7 };
	assert_int_equal(registry_owners(reg, "/usr", ids, 0), 2);
	assert_int_equal(ids[0], -7);
	assert_int_equal(registry_owners(reg, "/usr", ids, 1), 2);
	char name[64];
	assert_string_equal(registry_package_name(reg, 999999, name, sizeof name), "");
	registry_close(reg);
}

/* Owners that list nothing below the path: a symlink's, not a directory's. */
static void link_owners(void **state)
{
	(void)state;
	struct kiln_registry *reg = open_db();
	int64_t ids[4];
	char name[64];
	assert_int_equal(registry_link_owners(reg, "/usr/bin/awk", ids, 4), 1);
	assert_string_equal(registry_package_name(reg, ids[0], name, sizeof name), "mawk");
	assert_int_equal(registry_link_owners(reg, "/usr", ids, 4), 0);     /* base's, libc's */
	assert_int_equal(registry_link_owners(reg, "/usr/lib", ids, 4), 0); /* libc lists below it */
	assert_int_equal(registry_link_owners(reg, "/opt/lonely", ids, 4), 0);
	assert_int_equal(registry_link_owners(reg, "/usr/bin/nothing", ids, 4), 0);
	registry_close(reg);
}

static void managed_tree(void **state)
{
	(void)state;
	struct kiln_registry *reg = open_db();
	assert_true(registry_in_managed_tree(reg, "/usr/bin/unknown-file"));
	assert_true(registry_in_managed_tree(reg, "/usr/lib/deep/er/file"));
	assert_true(registry_in_managed_tree(reg, "/opt/lonely/x"));
	assert_false(registry_in_managed_tree(reg, "/opt/other"));
	assert_false(registry_in_managed_tree(reg, "/home/user/x.c"));
	/* The listed directory itself is not inside its own tree. */
	assert_false(registry_in_managed_tree(reg, "/usr"));
	registry_close(reg);
}

static void closure_names(struct kiln_registry *reg, const struct registry_pkgset *set, char *out,
			  size_t len)
{
	/* ids are assigned in manifest order, so this string is sorted by id */
	out[0] = '\0';
	for (size_t i = 0; i < set->n; i++) {
		char name[64];
		registry_package_name(reg, set->ids[i], name, sizeof name);
		strncat(out, i ? " " : "", len - strlen(out) - 1);
		strncat(out, name, len - strlen(out) - 1);
	}
}

static void closures(void **state)
{
	(void)state;
	struct kiln_registry *reg = open_db();
	struct registry_pkgset set;
	char err[512], names[512];
	const char *app[] = { "app" };
	assert_int_equal(registry_closure(reg, app, 1, false, &set, err, sizeof err), 0);
	closure_names(reg, &set, names, sizeof names);
	assert_string_equal(names, "libc libgcc mawk app python3");
	int64_t ids[2];
	assert_int_equal(registry_find_packages(reg, "app", ids, 2), 1);
	assert_true(registry_pkgset_has(&set, ids[0]));
	assert_int_equal(registry_find_packages(reg, "base", ids, 2), 1);
	assert_false(registry_pkgset_has(&set, ids[0]));
	registry_pkgset_free(&set);

	assert_int_equal(registry_closure(reg, app, 1, true, &set, err, sizeof err), 0);
	closure_names(reg, &set, names, sizeof names);
	assert_string_equal(names, "base libc libgcc mawk app python3");
	registry_pkgset_free(&set);

	/* A virtual name resolves through Provides; arch-qualified names work. */
	const char *virt[] = { "awk", "libc:amd64" };
	assert_int_equal(registry_closure(reg, virt, 2, false, &set, err, sizeof err), 0);
	closure_names(reg, &set, names, sizeof names);
	assert_string_equal(names, "libc libgcc mawk");
	registry_pkgset_free(&set);

	const char *unknown[] = { "app", "no-such-package" };
	assert_int_equal(registry_closure(reg, unknown, 2, false, &set, err, sizeof err), -1);
	assert_non_null(strstr(err, "unknown package 'no-such-package'"));
	registry_close(reg);
}

static void pkgset(void **state)
{
	(void)state;
	struct registry_pkgset s = { 0 };
	int64_t in[] = { 50, 3, 9000, 3, 7, -1 };
	for (size_t i = 0; i < 6; i++)
		assert_int_equal(registry_pkgset_add(&s, in[i]), 0);
	assert_int_equal(s.n, 5);
	for (size_t i = 1; i < s.n; i++)
		assert_true(s.ids[i - 1] < s.ids[i]);
	assert_true(registry_pkgset_has(&s, 9000));
	assert_false(registry_pkgset_has(&s, 8));
	registry_pkgset_free(&s);
	assert_false(registry_pkgset_has(&s, 3));
}

static void exec_sql(const char *path, const char *sql)
{
	sqlite3 *h;
	assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
	assert_int_equal(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
}

static void set_user_version(const char *path, int v)
{
	char sql[64];
	snprintf(sql, sizeof sql, "PRAGMA user_version=%d", v);
	exec_sql(path, sql);
}

/* A copy of the test database at dir/name, its path in path. */
static void copy_db(const char *name, char *path, size_t len)
{
	char cmd[PATH_MAX * 3];
	snprintf(path, len, "%s/%s", dir, name);
	snprintf(cmd, sizeof cmd, "cp '%s' '%s'", db, path);
	assert_int_equal(system(cmd), 0);
}

/* Opens read-write (creating or migrating), closes, reopens read-only. */
static struct kiln_registry *open_rw_then_ro(const char *path)
{
	char err[1024];
	struct kiln_registry *reg = registry_open(path, REGISTRY_RDWR, err, sizeof err);
	assert_non_null(reg);
	registry_close(reg);
	reg = registry_open(path, REGISTRY_RDONLY, err, sizeof err);
	assert_non_null(reg);
	return reg;
}

static void bad_databases(void **state)
{
	(void)state;
	char err[1024], path[PATH_MAX + 64];

	snprintf(path, sizeof path, "%s/absent.db", dir);
	assert_null(registry_open(path, REGISTRY_RDONLY, err, sizeof err));
	assert_non_null(strstr(err, path));
	assert_non_null(strstr(err, "no registry database"));

	snprintf(path, sizeof path, "%s/garbage.db", dir);
	FILE *f = fopen(path, "w");
	for (int i = 0; i < 300; i++)
		fputs("this is not an sqlite database. ", f);
	fclose(f);
	assert_null(registry_open(path, REGISTRY_RDONLY, err, sizeof err));
	assert_non_null(strstr(err, path));
	assert_non_null(strstr(err, "not a kiln registry"));

	snprintf(path, sizeof path, "%s/foreign.db", dir);
	exec_sql(path, "CREATE TABLE t(x)");
	assert_null(registry_open(path, REGISTRY_RDWR, err, sizeof err));
	assert_non_null(strstr(err, "another program"));

	copy_db("newer.db", path, sizeof path);
	set_user_version(path, 99);
	assert_null(registry_open(path, REGISTRY_RDONLY, err, sizeof err));
	assert_non_null(strstr(err, "schema version 99 is newer"));
	assert_null(registry_open(path, REGISTRY_RDWR, err, sizeof err));
	assert_non_null(strstr(err, path));
}

static void create_empty(void **state)
{
	(void)state;
	char err[1024], path[PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/fresh.db", dir);
	assert_null(registry_open(path, REGISTRY_RDONLY, err, sizeof err));
	struct kiln_registry *reg = open_rw_then_ro(path);
	int64_t ids[1];
	assert_int_equal(registry_owners(reg, "/usr", ids, 1), 0);
	registry_close(reg);
}

/* A database written by schema 1 (no priority column) is migrated by a
 * read-write open, refused with a re-import hint by a read-only one. */
static void migrate_schema_1(void **state)
{
	(void)state;
	char err[1024], path[PATH_MAX + 64];
	copy_db("v1.db", path, sizeof path);
	exec_sql(path, "ALTER TABLE packages DROP COLUMN priority; PRAGMA user_version=1");
	assert_null(registry_open(path, REGISTRY_RDONLY, err, sizeof err));
	assert_non_null(strstr(err, "schema version 1 is older"));
	assert_non_null(strstr(err, "kiln registry import"));
	struct kiln_registry *reg = open_rw_then_ro(path);
	int64_t ids[1];
	assert_int_equal(registry_find_packages(reg, "base", ids, 1), 1);
	struct registry_package pkg;
	assert_int_equal(registry_get_package(reg, ids[0], &pkg), 0);
	assert_string_equal(pkg.priority, ""); /* unknown until re-imported */
	struct registry_stats st;
	assert_int_equal(registry_get_stats(reg, &st), 0);
	assert_int_equal(st.schema_version, 2);
	registry_close(reg);
}

struct worker {
	struct kiln_registry *reg;
	int errors;
};

static void *lookup_worker(void *arg)
{
	struct worker *w = arg;
	for (int i = 0; i < 500; i++) {
		int64_t ids[4];
		char name[64];
		int n = registry_owners(w->reg, i % 2 ? "/usr/bin/awk" : "/usr/lib/libc.so.6", ids, 4);
		registry_package_name(w->reg, n == 1 ? ids[0] : 0, name, sizeof name);
		if (n != 1 || strcmp(name, i % 2 ? "mawk" : "libc"))
			w->errors++;
		if (!registry_in_managed_tree(w->reg, "/usr/bin/x"))
			w->errors++;
	}
	return NULL;
}

/* The trace service may share one handle between threads. */
static void shared_handle_threads(void **state)
{
	(void)state;
	struct kiln_registry *reg = open_db();
	pthread_t t[4];
	struct worker w[4];
	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){ reg, 0 };
		assert_int_equal(pthread_create(&t[i], NULL, lookup_worker, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].errors, 0);
	}
	registry_close(reg);
}

static void default_path(void **state)
{
	(void)state;
	char buf[PATH_MAX];
	setenv("KILN_DB", "/x/y.db", 1);
	assert_string_equal(registry_default_path(buf, sizeof buf), "/x/y.db");
	unsetenv("KILN_DB");
	setenv("XDG_CACHE_HOME", "/c", 1);
	assert_string_equal(registry_default_path(buf, sizeof buf), "/c/kiln/registry.db");
	unsetenv("XDG_CACHE_HOME");
	setenv("HOME", "/h", 1);
	assert_string_equal(registry_default_path(buf, sizeof buf), "/h/.cache/kiln/registry.db");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(owners),
		cmocka_unit_test(link_owners),
		cmocka_unit_test(managed_tree),
		cmocka_unit_test(closures),     cmocka_unit_test(pkgset),
		cmocka_unit_test(bad_databases), cmocka_unit_test(create_empty),
		cmocka_unit_test(migrate_schema_1),
		cmocka_unit_test(shared_handle_threads), cmocka_unit_test(default_path),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
