/* The owners memo (trace/service/owners.c): the registry's answer for a
 * path, whole (more owners than the caller's room included), kept after the
 * first time and given again without asking; not kept beyond its bound. */
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

#include "manifest_db.h"
#include "registry/query.h"
#include "registry/registry.h"
#include "trace/service/owners.h"

#define SHARED_BY 40 /* packages shipping /usr/share/shared/: more than 32 */

static char dir[PATH_MAX];

static int import(const char *name, const char *text)
{
	char manifest[PATH_MAX + 64], db[PATH_MAX + 64];
	snprintf(manifest, sizeof manifest, "%s/%s.manifest", dir, name);
	snprintf(db, sizeof db, "%s/%s.db", dir, name);
	return manifest_db(manifest, text, db, NULL);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof dir, "/tmp/kiln-owners-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	char *text = malloc(SHARED_BY * 128 + 256);
	if (!text)
		return -1;
	size_t n = 0;
	n += (size_t)sprintf(text + n, "Package: one\nFiles:\n /usr/\n /usr/include/\n /usr/include/one.h\n\n");
	for (int i = 0; i < SHARED_BY; i++)
		n += (size_t)sprintf(text + n, "Package: p%02d\nFiles:\n /usr/\n /usr/share/\n /usr/share/shared/\n\n",
				     i);
	int rc = import("full", text) || import("empty", "Package: other\nFiles:\n /opt/other\n");
	free(text);
	return rc;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd);
}

static struct kiln_registry *open_db(const char *name)
{
	char db[PATH_MAX + 64], err[1024];
	snprintf(db, sizeof db, "%s/%s.db", dir, name);
	struct kiln_registry *reg = registry_open(db, REGISTRY_RDONLY, err, sizeof err);
	if (!reg)
		fail_msg("open: %s", err);
	return reg;
}

/* The same answer as the registry's, for every room the caller gives. */
static void same_as_registry(struct owners_memo *m, struct kiln_registry *reg, const char *path)
{
	for (size_t cap = 1; cap <= SHARED_BY + 2; cap += 7) {
		int64_t want[SHARED_BY + 2], got[SHARED_BY + 2];
		int n = registry_owners(reg, path, want, cap);
		assert_int_equal(owners_memo_get(m, reg, path, got, cap), n);
		assert_memory_equal(got, want, (size_t)(n < (int)cap ? n : (int)cap) * sizeof *got);
	}
}

static void answers_as_the_registry_does(void **state)
{
	(void)state;
	struct kiln_registry *reg = open_db("full");
	struct owners_memo m = { .max = OWNERS_MEMO_MAX };
	int64_t ids[4];
	assert_int_equal(registry_owners(reg, "/usr/share/shared", ids, 4), SHARED_BY);
	/* first asked with less room than it has owners, then with more */
	same_as_registry(&m, reg, "/usr/share/shared");
	same_as_registry(&m, reg, "/usr/include/one.h");
	same_as_registry(&m, reg, "/usr/include/none.h");
	same_as_registry(&m, reg, "/usr");
	assert_int_equal(m.tab.n, 4);
	/* without a memo: the registry */
	same_as_registry(NULL, reg, "/usr/share/shared");
	owners_memo_free(&m);
	registry_close(reg);
}

static void kept_answers_are_given_without_asking(void **state)
{
	(void)state;
	struct kiln_registry *full = open_db("full"), *empty = open_db("empty");
	struct owners_memo m = { .max = 2 };
	int64_t ids[SHARED_BY], want[SHARED_BY];
	assert_int_equal(owners_memo_get(&m, full, "/usr/share/shared", ids, 2), SHARED_BY);
	assert_int_equal(owners_memo_get(&m, full, "/usr/include/one.h", ids, 2), 1);
	/* Asked of a registry that knows neither path: the kept answers,
	 * whole. */
	assert_int_equal(owners_memo_get(&m, empty, "/usr/share/shared", ids, SHARED_BY), SHARED_BY);
	assert_int_equal(registry_owners(full, "/usr/share/shared", want, SHARED_BY), SHARED_BY);
	assert_memory_equal(ids, want, sizeof ids);
	assert_int_equal(owners_memo_get(&m, empty, "/usr/include/one.h", ids, 1), 1);
	/* Full: a third path is asked each time, never kept. */
	assert_int_equal(owners_memo_get(&m, full, "/usr", ids, 2), SHARED_BY + 1);
	assert_int_equal(owners_memo_get(&m, empty, "/usr", ids, 2), 0);
	assert_int_equal(m.tab.n, 2);
	owners_memo_free(&m);
	registry_close(full);
	registry_close(empty);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(answers_as_the_registry_does),
		cmocka_unit_test(kept_answers_are_given_without_asking),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
