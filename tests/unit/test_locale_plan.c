/* The locale plan (src/trace/service/locale_plan.c) on a synthetic locale
 * tree: which names are CLEAN, ABSENT or CHECK when some of the locale data
 * glibc would load is hidden. The integration test
 * (tests/integration/test_trace_glibc_data.py) checks the same answers
 * against what glibc itself does. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace/service/locale_plan.h"

static char dir[PATH_MAX], locdir[PATH_MAX + 16], alias[PATH_MAX + 32], archive[PATH_MAX + 32];
static const char *hidden[16]; /* path prefixes the fake sandbox hides */
static int looks;

static bool is_hidden(const char *path)
{
	for (size_t i = 0; i < 16 && hidden[i]; i++) {
		size_t n = strlen(hidden[i]);
		if (!strncmp(path, hidden[i], n) && (path[n] == '\0' || path[n] == '/'))
			return true;
	}
	return false;
}

static int look(void *ctx, const char *path, struct locale_seen *seen)
{
	(void)ctx;
	looks++;
	struct stat st;
	seen->exists = stat(path, &st) == 0;
	seen->hidden = seen->exists && is_hidden(path);
	seen->is_dir = seen->exists && S_ISDIR(st.st_mode);
	return 0;
}

static struct locale_env env(void)
{
	return (struct locale_env){ .look = look, .locale_dir = locdir, .alias_file = alias,
				    .archive = archive };
}

static void put(const char *rel, const char *text)
{
	char p[PATH_MAX * 2];
	snprintf(p, sizeof p, "%s/%s", dir, rel);
	for (char *s = p + strlen(dir) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		mkdir(p, 0755);
		*s = '/';
	}
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* A locale directory with every category (LC_MESSAGES a directory). */
static void put_locale(const char *name)
{
	static const char *const cats[] = { "LC_CTYPE", "LC_NUMERIC", "LC_TIME", "LC_COLLATE",
					    "LC_MONETARY", "LC_PAPER", "LC_NAME", "LC_ADDRESS",
					    "LC_TELEPHONE", "LC_MEASUREMENT", "LC_IDENTIFICATION",
					    "LC_MESSAGES/SYS_LC_MESSAGES" };
	for (size_t i = 0; i < sizeof cats / sizeof cats[0]; i++) {
		char rel[512];
		snprintf(rel, sizeof rel, "locale/%s/%s", name, cats[i]);
		put(rel, "data");
	}
}

static const char *abs_of(const char *rel)
{
	static char bufs[8][PATH_MAX + 64];
	static int k;
	char *b = bufs[k++ % 8];
	snprintf(b, PATH_MAX + 64, "%s/%s", dir, rel);
	return b;
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof dir, "/tmp/kiln-locale-plan-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(locdir, sizeof locdir, "%s/locale", dir);
	snprintf(alias, sizeof alias, "%s/share/locale.alias", dir);
	snprintf(archive, sizeof archive, "%s/locale/locale-archive", dir);
	put_locale("C.utf8");
	put_locale("fr_FR.utf8");
	put_locale("fr_FR");
	put_locale("de_DE.utf8");
	put_locale("de");
	put_locale("pt_BR.iso88591");
	put("share/locale.alias", "# aliases\n  french\tfr_FR.ISO-8859-1\nportuguese pt_BR.ISO-8859-1\n"
				 "bokmal nb_NO.ISO-8859-1\n");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[PATH_MAX + 32];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd);
}

#define ALL 0x1fbfu
#define CTYPE 1u
#define MESSAGES (1u << 5)

static int plan(const char *locpath, unsigned mask, const char *name)
{
	struct locale_env e = env();
	return locale_plan(&e, NULL, locpath, mask, name);
}

static void reset(void)
{
	memset(hidden, 0, sizeof hidden);
	unlink(archive);
}

static void builtin_names_load_nothing(void **state)
{
	(void)state;
	reset();
	looks = 0;
	assert_int_equal(plan("", ALL, "C"), KILN_D_CLEAN);
	assert_int_equal(plan("", ALL, "POSIX"), KILN_D_CLEAN);
	/* Names glibc refuses (EINVAL) before loading anything. */
	assert_int_equal(plan("", ALL, "../etc"), KILN_D_CLEAN);
	assert_int_equal(plan("", ALL, "a/b"), KILN_D_CLEAN);
	assert_int_equal(looks, 0);
}

static void visible_hidden_and_mixed(void **state)
{
	(void)state;
	reset();
	assert_int_equal(plan("", ALL, "C.UTF-8"), KILN_D_CLEAN);
	assert_int_equal(plan("", ALL, "fr_FR.UTF-8"), KILN_D_CLEAN);
	/* Nothing anywhere: glibc fails by itself, nothing to hide. */
	assert_int_equal(plan("", ALL, "xx_YY.UTF-8"), KILN_D_CLEAN);

	/* locales-all outside the closure: every variant of the name hidden. */
	hidden[0] = abs_of("locale/fr_FR.utf8");
	hidden[1] = abs_of("locale/fr_FR");
	assert_int_equal(plan("", ALL, "fr_FR.UTF-8"), KILN_D_ABSENT);
	assert_int_equal(plan("", ALL, "fr_FR"), KILN_D_ABSENT);
	assert_int_equal(plan("", CTYPE, "fr_FR.ISO-8859-1"), KILN_D_ABSENT);
	/* Another name is untouched. */
	assert_int_equal(plan("", ALL, "C.UTF-8"), KILN_D_CLEAN);

	/* de_DE.utf8 hidden, but glibc falls back to "de", which is visible:
	 * the outcome depends on the order glibc tries them in. */
	reset();
	hidden[0] = abs_of("locale/de_DE.utf8");
	assert_int_equal(plan("", ALL, "de_DE.UTF-8"), KILN_D_CHECK);
	/* Only the messages category hidden: a messages-only call fails, a
	 * CTYPE-only one does not care. */
	reset();
	hidden[0] = abs_of("locale/fr_FR.utf8/LC_MESSAGES");
	hidden[1] = abs_of("locale/fr_FR/LC_MESSAGES");
	assert_int_equal(plan("", MESSAGES, "fr_FR.UTF-8"), KILN_D_ABSENT);
	assert_int_equal(plan("", CTYPE, "fr_FR.UTF-8"), KILN_D_CLEAN);
	assert_int_equal(plan("", ALL, "fr_FR.UTF-8"), KILN_D_ABSENT);
	reset();
}

static void aliases(void **state)
{
	(void)state;
	reset();
	/* "portuguese" expands to pt_BR.ISO-8859-1 (normalized: iso88591). */
	assert_int_equal(plan("", ALL, "portuguese"), KILN_D_CLEAN);
	assert_int_equal(plan("", ALL, "Portuguese"), KILN_D_CLEAN);
	hidden[0] = abs_of("locale/pt_BR.iso88591");
	assert_int_equal(plan("", ALL, "portuguese"), KILN_D_ABSENT);
	/* The alias file itself hidden (the locales package outside the
	 * closure): the chroot does not expand the name, and nothing is
	 * called "portuguese". */
	reset();
	hidden[0] = alias;
	assert_int_equal(plan("", ALL, "portuguese"), KILN_D_ABSENT);
	/* A name that is no alias does not care about the file. */
	assert_int_equal(plan("", ALL, "fr_FR.UTF-8"), KILN_D_CLEAN);
	reset();
}

/* A locale-archive holding `names` (only what the plan reads of it). */
static void put_archive(const char *const *names, size_t n)
{
	uint32_t head[14] = { 0xde020109u };
	uint32_t slots = 7;
	head[2] = sizeof head;                   /* namehash_offset */
	head[3] = (uint32_t)n;                   /* namehash_used */
	head[4] = slots;                         /* namehash_size */
	uint32_t strings = sizeof head + slots * 12;
	FILE *f = fopen(archive, "w");
	assert_non_null(f);
	fwrite(head, sizeof head, 1, f);
	uint32_t at = strings;
	for (uint32_t i = 0; i < slots; i++) {
		uint32_t e[3] = { 0, 0, 0 };
		if (i < n) {
			e[0] = i + 1;
			e[1] = at;
			e[2] = 8; /* a record offset: non-zero */
			at += (uint32_t)strlen(names[i]) + 1;
		}
		fwrite(e, sizeof e, 1, f);
	}
	for (size_t i = 0; i < n; i++)
		fwrite(names[i], strlen(names[i]) + 1, 1, f);
	fclose(f);
}

static void locale_archive(void **state)
{
	(void)state;
	reset();
	const char *const names[] = { "en_US.utf8", "fr_FR.utf8" };
	put_archive(names, 2);
	/* Visible archive (no rule hides it): glibc uses it. */
	assert_int_equal(plan("", ALL, "en_US.UTF-8"), KILN_D_CLEAN);
	/* Hidden archive (a generated file: the chroot profile's owned
	 * rule): a name only the archive has is absent. */
	hidden[0] = archive;
	struct locale_plan_cache *c = locale_plan_cache_new();
	struct locale_env e = env();
	assert_int_equal(locale_plan(&e, c, "", ALL, "en_US.UTF-8"), KILN_D_ABSENT);
	/* ... a name it holds that a visible directory also has: glibc would
	 * take the archive's, the chroot the directory's. */
	assert_int_equal(locale_plan(&e, c, "", ALL, "fr_FR.UTF-8"), KILN_D_CHECK);
	/* ... a name it does not hold: the archive does not matter. */
	assert_int_equal(locale_plan(&e, c, "", ALL, "C.UTF-8"), KILN_D_CLEAN);
	/* With LOCPATH glibc skips the archive. */
	assert_int_equal(locale_plan(&e, c, locdir, ALL, "en_US.UTF-8"), KILN_D_CLEAN);
	locale_plan_cache_free(c);
	reset();
}

static void locpath(void **state)
{
	(void)state;
	reset();
	char lp[PATH_MAX * 2 + 32];
	snprintf(lp, sizeof lp, "%s/own::%s/none", dir, dir);
	put_locale("../own/xx_YY.utf8");
	assert_int_equal(plan(lp, ALL, "xx_YY.UTF-8"), KILN_D_CLEAN);
	hidden[0] = abs_of("own/xx_YY.utf8");
	assert_int_equal(plan(lp, ALL, "xx_YY.UTF-8"), KILN_D_ABSENT);
	/* LOCPATH's directories come before the default one, which still
	 * counts. */
	reset();
	hidden[0] = abs_of("locale/fr_FR.utf8");
	hidden[1] = abs_of("locale/fr_FR");
	assert_int_equal(plan(lp, ALL, "fr_FR.UTF-8"), KILN_D_ABSENT);
	/* A relative entry: the server does not know the caller's cwd. */
	assert_int_equal(plan("rel/dir", ALL, "fr_FR.UTF-8"), KILN_D_CHECK);
	reset();
}

static void catalogs(void **state)
{
	(void)state;
	reset();
	put("share/locale/fr/LC_MESSAGES/app.mo", "x");
	put("share/locale/fr/LC_MESSAGES/other.mo", "x");
	put("share/locale/pt_BR/LC_MESSAGES/app.mo", "x");
	const char *share = abs_of("share/locale");
	struct locale_env e = env();
	assert_int_equal(catalog_plan(&e, NULL, share, "LC_MESSAGES", "app", "fr_FR.UTF-8"), KILN_D_CLEAN);
	/* The catalog of a package outside the closure: fr (from fr_FR.UTF-8). */
	hidden[0] = abs_of("share/locale/fr/LC_MESSAGES/app.mo");
	assert_int_equal(catalog_plan(&e, NULL, share, "LC_MESSAGES", "app", "fr_FR.UTF-8"), KILN_D_CHECK);
	assert_int_equal(catalog_plan(&e, NULL, share, "LC_MESSAGES", "other", "fr_FR.UTF-8"), KILN_D_CLEAN);
	/* Any domain: the hidden one counts. */
	assert_int_equal(catalog_plan(&e, NULL, share, "LC_MESSAGES", NULL, "fr_FR.UTF-8"), KILN_D_CHECK);
	assert_int_equal(catalog_plan(&e, NULL, share, "LC_MESSAGES", NULL, "de_DE.UTF-8"), KILN_D_CLEAN);
	/* A LANGUAGE list: every entry up to C. */
	assert_int_equal(catalog_plan(&e, NULL, share, "LC_MESSAGES", "app", "de:fr"), KILN_D_CHECK);
	assert_int_equal(catalog_plan(&e, NULL, share, "LC_MESSAGES", "app", "de:C:fr"), KILN_D_CLEAN);
	/* Through an alias: "portuguese" is pt_BR.ISO-8859-1, whose pt_BR has one. */
	hidden[0] = abs_of("share/locale/pt_BR/LC_MESSAGES/app.mo");
	assert_int_equal(catalog_plan(&e, NULL, share, "LC_MESSAGES", "app", "portuguese"), KILN_D_CHECK);
	/* Other categories are other directories. */
	assert_int_equal(catalog_plan(&e, NULL, share, "LC_TIME", "app", "pt_BR"), KILN_D_CLEAN);
	/* A relative directory cannot be planned. */
	assert_int_equal(catalog_plan(&e, NULL, "rel", "LC_MESSAGES", "app", "fr"), KILN_D_CHECK);
	reset();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(builtin_names_load_nothing),
		cmocka_unit_test(visible_hidden_and_mixed),
		cmocka_unit_test(aliases),
		cmocka_unit_test(locale_archive),
		cmocka_unit_test(locpath),
		cmocka_unit_test(catalogs),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
