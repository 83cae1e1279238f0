/* gettext, dgettext, dcgettext, ngettext, dngettext, dcngettext: glibc
 * opens the message catalogs itself (docs/glibc-data.md). Outside the C
 * locale, a call asks the server for the catalogs' plan (kiln_ask_data,
 * KILN_D_CATALOG) unless they were planned clean for the run (KILN_CLEAN's
 * mo:LOCALE: the default directory, LANGUAGE unset) or this process already
 * dealt with that domain, directory, category and language list (glibc
 * loads a catalog once and keeps it, or its absence); if hidden catalogs
 * are involved, the call runs in the checked window. */
#include <errno.h>
#include <langinfo.h>
#include <libintl.h>
#include <locale.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "trace/kt.h"

/* libintl.h makes these macros over dcgettext when optimizing. */
#undef gettext
#undef dgettext
#undef ngettext
#undef dngettext

#define REAL(name, type) ((type)kt_real(&real_##name, #name))
static KT_HOT void *_Atomic real_gettext, *_Atomic real_dgettext, *_Atomic real_dcgettext,
	*_Atomic real_ngettext, *_Atomic real_dngettext, *_Atomic real_dcngettext;

#define MEMO 16
static KT_HOT _Atomic uint64_t memo[MEMO];
static KT_HOT _Atomic unsigned memo_next;

static uint64_t hash(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return (h ^ 0xff) * 0x100000001b3ull;
}

static int remembered(uint64_t h)
{
	for (int i = 0; i < MEMO; i++)
		if (atomic_load_explicit(&memo[i], memory_order_relaxed) == h)
			return 1;
	return 0;
}

static void remember(uint64_t h)
{
	unsigned i = atomic_fetch_add_explicit(&memo_next, 1, memory_order_relaxed) % MEMO;
	atomic_store_explicit(&memo[i], h, memory_order_relaxed);
}

/* Whether this call must run in the window (then it has been opened). */
static int open_window(const char *domain, int cat, struct kt_window *w)
{
	if (kt_guard || cat < 0 || cat >= 13 || cat == LC_ALL)
		return 0;
	const char *loc = nl_langinfo(_NL_LOCALE_NAME(cat));
	if (!loc || !loc[0] || !strcmp(loc, "C") || !strcmp(loc, "POSIX"))
		return 0; /* glibc loads nothing, LANGUAGE or not */
	const char *lang = getenv("LANGUAGE");
	if (lang && !lang[0])
		lang = NULL;
	if (!domain)
		domain = textdomain(NULL);
	const char *dir = domain ? bindtextdomain(domain, NULL) : NULL;
	if (!domain || !dir)
		return 0;
	if (!lang && cat == LC_MESSAGES && !strcmp(dir, "/usr/share/locale") &&
	    kt_planned_token("mo:", loc))
		return 0;
	const char *languages = lang ? lang : loc;
	uint64_t h = hash(hash(hash(hash(0xcbf29ce484222325ull, domain), dir), kt_lc_names[cat]),
			  languages);
	if (remembered(h))
		return 0;
	char b[KT_PATH_BUF];
	size_t dl = strlen(domain), cl = strlen(kt_lc_names[cat]), ll = strlen(languages);
	if (dl + cl + ll + 3 > sizeof b || strlen(dir) >= KT_PATH_BUF)
		return 0;
	memcpy(b, domain, dl);
	b[dl] = '\n';
	memcpy(b + dl + 1, kt_lc_names[cat], cl);
	b[dl + 1 + cl] = '\n';
	memcpy(b + dl + cl + 2, languages, ll + 1);
	kt_enter();
	int a = kiln_ask_data(KILN_D_CATALOG, 1, dir, b);
	/* After this call glibc has decided on that catalog, either way. */
	remember(h);
	if (a == KILN_D_CLEAN || kt_window_open(w) < 0) {
		kt_leave();
		return 0;
	}
	return 1;
}

static void close_window(struct kt_window *w)
{
	kt_window_close(w);
	kt_leave();
}

#define WRAP(call, domain, cat)                                                \
	do {                                                                   \
		struct kt_window w;                                            \
		if (!open_window((domain), (cat), &w))                         \
			return call;                                           \
		char *r = call;                                                \
		close_window(&w);                                              \
		return r;                                                      \
	} while (0)

typedef char *(*g_fn)(const char *);
typedef char *(*dg_fn)(const char *, const char *);
typedef char *(*dcg_fn)(const char *, const char *, int);
typedef char *(*ng_fn)(const char *, const char *, unsigned long);
typedef char *(*dng_fn)(const char *, const char *, const char *, unsigned long);
typedef char *(*dcng_fn)(const char *, const char *, const char *, unsigned long, int);

KT_EXPORT char *gettext(const char *msgid)
{
	g_fn real = REAL(gettext, g_fn);
	if (!real)
		return (char *)msgid;
	WRAP(real(msgid), NULL, LC_MESSAGES);
}

KT_EXPORT char *dgettext(const char *domain, const char *msgid)
{
	dg_fn real = REAL(dgettext, dg_fn);
	if (!real)
		return (char *)msgid;
	WRAP(real(domain, msgid), domain, LC_MESSAGES);
}

KT_EXPORT char *dcgettext(const char *domain, const char *msgid, int cat)
{
	dcg_fn real = REAL(dcgettext, dcg_fn);
	if (!real)
		return (char *)msgid;
	WRAP(real(domain, msgid, cat), domain, cat);
}

KT_EXPORT char *ngettext(const char *m1, const char *m2, unsigned long n)
{
	ng_fn real = REAL(ngettext, ng_fn);
	if (!real)
		return (char *)(n == 1 ? m1 : m2);
	WRAP(real(m1, m2, n), NULL, LC_MESSAGES);
}

KT_EXPORT char *dngettext(const char *domain, const char *m1, const char *m2, unsigned long n)
{
	dng_fn real = REAL(dngettext, dng_fn);
	if (!real)
		return (char *)(n == 1 ? m1 : m2);
	WRAP(real(domain, m1, m2, n), domain, LC_MESSAGES);
}

KT_EXPORT char *dcngettext(const char *domain, const char *m1, const char *m2, unsigned long n,
			   int cat)
{
	dcng_fn real = REAL(dcngettext, dcng_fn);
	if (!real)
		return (char *)(n == 1 ? m1 : m2);
	WRAP(real(domain, m1, m2, n, cat), domain, cat);
}
