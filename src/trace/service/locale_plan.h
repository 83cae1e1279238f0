/* Which locale files glibc's setlocale/newlocale would open for a name, and
 * whether the sandbox changes the outcome (docs/glibc-data.md).
 *
 * glibc opens its locale data with internal calls no preload hook sees. The
 * preload library's setlocale/newlocale hooks ask the server for a plan
 * first; the server answers from the files glibc 2.36 would consider:
 * locale-archive (LOCPATH unset), locale.alias, and for each category the
 * directories DIR/NAME/LC_CAT (or DIR/NAME/LC_CAT/SYS_LC_CAT) that
 * _nl_find_locale tries, for every variant of the name glibc derives
 * (codeset, normalized codeset, territory and modifier dropped in turn) in
 * every directory of LOCPATH and /usr/lib/locale. That set is a superset of
 * what glibc opens, in any order, so:
 *   CLEAN  none of them is hidden: glibc does exactly what it would in the
 *          chroot; the real call runs as is;
 *   ABSENT for some requested category nothing the build can see exists:
 *          glibc would fail (setlocale NULL, newlocale 0, errno ENOENT);
 *          the hook answers so without calling it;
 *   CHECK  both: the real call runs with its own opens checked (the
 *          preload library's checked window, trace/sud.c). */
#ifndef KILN_TRACE_SERVICE_LOCALE_PLAN_H
#define KILN_TRACE_SERVICE_LOCALE_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "trace/verdict.h"

/* What the build would see at an absolute path, as the sandbox says. */
struct locale_seen {
	bool exists;   /* for the build (a hidden file counts as existing here) */
	bool hidden;
	bool is_dir;   /* meaningful when exists && !hidden */
};

struct locale_env {
	void *ctx;
	/* Fills *seen for path; returns 0, or -1 when the sandbox cannot
	 * decide (the plan is then CHECK). */
	int (*look)(void *ctx, const char *path, struct locale_seen *seen);
	const char *locale_dir;  /* glibc's COMPLOCALEDIR: "/usr/lib/locale" */
	const char *alias_file;  /* "/usr/share/locale/locale.alias" */
	const char *archive;     /* "/usr/lib/locale/locale-archive" */
};

struct locale_plan_cache; /* the alias file and archive names, read once */

struct locale_plan_cache *locale_plan_cache_new(void);
void locale_plan_cache_free(struct locale_plan_cache *c);

/* The plan for `name` (not "" : the client resolves the environment; "C"
 * and "POSIX" are CLEAN) and the categories of `catmask` (bit c for
 * LC_* category c; LC_ALL's bit is ignored), with LOCPATH `locpath` ("" when
 * unset). The cache may be NULL. Returns an enum kiln_data_answer. */
int locale_plan(const struct locale_env *env, struct locale_plan_cache *cache,
		const char *locpath, unsigned catmask, const char *name);

/* The message catalogs glibc's dcigettext may open for a gettext call
 * (intl/dcigettext.c, intl/finddomain.c): for each entry of `languages` (the
 * LANGUAGE list, or the category's locale name; glibc stops at C or POSIX)
 * and each alias of it, DIRNAME/VARIANT/CATEGORY/DOMAIN.mo for every
 * variant of the name. `domain` NULL: any domain (every file in
 * DIRNAME/VARIANT/CATEGORY). Returns KILN_D_CLEAN or KILN_D_CHECK. */
int catalog_plan(const struct locale_env *env, struct locale_plan_cache *cache, const char *dirname,
		 const char *category, const char *domain, const char *languages);

#endif
