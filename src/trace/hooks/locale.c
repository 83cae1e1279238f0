/* setlocale, newlocale, __newlocale (libstdc++ calls that one): glibc
 * opens the locale data itself, with calls no hook sees (docs/glibc-data.md).
 * The hook resolves the names glibc would load, as _nl_find_locale does
 * (an empty name from LC_ALL, LC_category, LANG), asks the server for the
 * plan (kiln_ask_data; a verdict cache hit after the first asking of a
 * name in the run), and then calls through (CLEAN), or calls through in the
 * checked window (trace/sud.c), where glibc meets the hidden files as
 * absent ones and answers exactly as it does without them, errno included
 * (ABSENT, CHECK). Without the window, ABSENT is answered as glibc answers
 * a name it finds no data for (NULL or 0, ENOENT) and CHECK calls through
 * unchecked. C and POSIX load nothing and are never asked. */
#include <errno.h>
#include <locale.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "trace/kt.h"

#define REAL(name, type) ((type)kt_real(&real_##name, #name))
static KT_HOT void *_Atomic real_setlocale, *_Atomic real_newlocale, *_Atomic real___newlocale;

#define NCATS 13 /* __LC_LAST */
#define ALL_CATS (((1u << NCATS) - 1) & ~(1u << LC_ALL))
#define COMPOSITE_MAX 4096

const char *const kt_lc_names[NCATS] = {
	"LC_CTYPE", "LC_NUMERIC", "LC_TIME", "LC_COLLATE", "LC_MONETARY", "LC_MESSAGES", "LC_ALL",
	"LC_PAPER", "LC_NAME", "LC_ADDRESS", "LC_TELEPHONE", "LC_MEASUREMENT", "LC_IDENTIFICATION",
};

static bool present(const char *s)
{
	return s && s[0];
}

/* What "" stands for, category by category: LC_ALL, else LC_<category>,
 * else LANG, else C. The environment is read in one pass per call (a
 * getenv per category scanned it thirteen times in every program's
 * setlocale(LC_ALL, "")). */
struct env_names {
	const char *cat[NCATS], *lang;
	bool read;
};

extern char **environ;

static void read_environment(struct env_names *en)
{
	for (int c = 0; c < NCATS; c++)
		en->cat[c] = NULL;
	en->lang = NULL;
	for (char **e = environ; e && *e; e++) {
		const char *v = *e;
		if (v[0] == 'L' && v[1] == 'A' && !strncmp(v, "LANG=", 5)) {
			if (!en->lang)
				en->lang = v + 5; /* the first, as getenv finds it */
			continue;
		}
		if (v[0] != 'L' || v[1] != 'C' || v[2] != '_')
			continue;
		const char *eq = strchr(v, '=');
		for (int c = 0; eq && c < NCATS; c++) {
			size_t n = strlen(kt_lc_names[c]);
			if ((size_t)(eq - v) == n && !memcmp(v, kt_lc_names[c], n) && !en->cat[c])
				en->cat[c] = eq + 1; /* the first, as getenv finds it */
		}
	}
	en->read = true;
}

static const char *from_environment(struct env_names *en, int cat)
{
	if (!en->read)
		read_environment(en);
	if (present(en->cat[LC_ALL]))
		return en->cat[LC_ALL];
	const char *v = en->cat[cat];
	return present(v) ? v : present(en->lang) ? en->lang : "C";
}

/* The categories of `mask` and the name each is to be set to: `name`, or
 * its "LC_x=value;..." parts, copied into buf. -1 when glibc would refuse
 * the composite without loading anything (left to it). */
static int split(const char *name, unsigned mask, char *buf, const char *names[NCATS])
{
	for (int c = 0; c < NCATS; c++)
		names[c] = name;
	if (!strchr(name, ';'))
		return 0;
	size_t n = strlen(name);
	if (n >= COMPOSITE_MAX)
		return -1;
	memcpy(buf, name, n + 1);
	unsigned given = 0;
	for (char *np = buf, *cp; (cp = strchr(np, '='));) {
		int c = 0;
		while (c < NCATS && (c == LC_ALL || strlen(kt_lc_names[c]) != (size_t)(cp - np) ||
				     memcmp(np, kt_lc_names[c], (size_t)(cp - np))))
			c++;
		if (c == NCATS)
			return -1;
		given |= 1u << c;
		names[c] = ++cp;
		if (!(cp = strchr(cp, ';')))
			break;
		*cp = '\0';
		np = cp + 1;
	}
	return (mask & ~given) ? -1 : 0;
}

static int plan(unsigned mask, const char *names[NCATS]);

/* A composite name ("LC_CTYPE=x;LC_NUMERIC=y;..."): its own frame, so the
 * common call keeps COMPOSITE_MAX bytes off the stack. -1: glibc refuses
 * it without loading anything. */
static __attribute__((noinline)) int plan_composite(const char *name, unsigned mask)
{
	char buf[COMPOSITE_MAX];
	const char *names[NCATS];
	if (split(name, mask, buf, names) < 0)
		return -1;
	return plan(mask, names);
}

/* The plan for `name` over the categories of `mask` (a composite name only
 * where `composite` allows one), or -1 (left to glibc). */
static int plan_name(const char *name, unsigned mask, bool composite)
{
	if (composite && strchr(name, ';'))
		return plan_composite(name, mask);
	const char *names[NCATS];
	for (int c = 0; c < NCATS; c++)
		names[c] = name;
	return plan(mask, names);
}

static bool builtin(const char *n)
{
	return !strcmp(n, "C") || !strcmp(n, "POSIX");
}

/* Whether the server planned `name` CLEAN for the whole run before the
 * build started (KILN_LOCALES: the names of the build's environment, so
 * that the setlocale(LC_ALL, "") nearly every program starts with costs no
 * question at all). */
static bool planned_clean(const char *name)
{
	const char *list = kt_env(KILN_ENV_LOCALES);
	size_t n = strlen(name);
	for (const char *p = list; p && *p;) {
		size_t k = strcspn(p, ":");
		if (k == n && !memcmp(p, name, n))
			return true;
		p += k + (p[k] == ':');
	}
	return false;
}

/* The worst answer over the distinct names of the categories in `mask`:
 * ABSENT as soon as one is (glibc fails the whole call). */
static int plan(unsigned mask, const char *names[NCATS])
{
	const char *locpath = getenv("LOCPATH");
	if (!present(locpath))
		locpath = "";
	struct env_names en = { .read = false };
	int worst = KILN_D_CLEAN;
	unsigned done = 0;
	const char *known_clean = NULL; /* the last name found clean by the plan made ahead */
	for (int c = 0; c < NCATS; c++) {
		if (!(mask & (1u << c) & ~done))
			continue;
		if (!names[c][0])
			names[c] = from_environment(&en, c);
		if (builtin(names[c]) || (known_clean && !strcmp(known_clean, names[c])) ||
		    (!locpath[0] && planned_clean(names[c]))) {
			if (!builtin(names[c]))
				known_clean = names[c];
			done |= 1u << c;
			continue;
		}
		unsigned group = 0;
		for (int k = c; k < NCATS; k++) {
			if (!(mask & (1u << k) & ~done))
				continue;
			if (!names[k][0])
				names[k] = from_environment(&en, k);
			if (!strcmp(names[k], names[c]))
				group |= 1u << k;
		}
		done |= group;
		int a = kiln_ask_data(KILN_D_LOCALE, group, locpath, names[c]);
		if (a == KILN_D_ABSENT)
			return a;
		if (a > worst)
			worst = a;
	}
	return worst;
}

/* Runs the call as the plan says: as it is when CLEAN, else in the
 * checked window. Without a window (a kernel without syscall user
 * dispatch), ABSENT is answered as glibc answers when it finds no data:
 * the call's result stays NULL/0, errno ENOENT (from its last failed open;
 * a name it failed to find before leaves errno as it was, which only the
 * window reproduces), and CHECK calls through unchecked. */
static void run_planned(int answer, void (*fn)(void *), void *call)
{
	if (answer == KILN_D_CLEAN) {
		fn(call);
	} else if (kt_checked(fn, call) < 0) {
		if (answer == KILN_D_ABSENT)
			errno = ENOENT;
		else
			fn(call);
	}
}

struct set_call {
	char *(*real)(int, const char *);
	int cat;
	const char *name;
	char *ret;
};

/* errno is what glibc leaves (its failed attempts included, as without
 * kiln). */
static void run_set(void *p)
{
	struct set_call *c = p;
	c->ret = c->real(c->cat, c->name);
}

KT_EXPORT char *setlocale(int cat, const char *name)
{
	typedef char *(*fn)(int, const char *);
	fn real = REAL(setlocale, fn);
	if (!real) {
		errno = ENOSYS;
		return NULL;
	}
	if (kt_guard || !name || cat < 0 || cat >= NCATS)
		return real(cat, name);
	/* "Changing to the same thing" loads nothing. */
	const char *cur = real(cat, NULL);
	if (cur && !strcmp(cur, name))
		return real(cat, name);
	unsigned mask = cat == LC_ALL ? ALL_CATS : 1u << cat;
	kt_enter();
	int a = plan_name(name, mask, cat == LC_ALL);
	if (a < 0) {
		kt_leave();
		return real(cat, name);
	}
	struct set_call c = { real, cat, name, NULL };
	run_planned(a, run_set, &c);
	kt_leave();
	return c.ret;
}

struct new_call {
	locale_t (*real)(int, const char *, locale_t);
	int mask;
	const char *name;
	locale_t base, ret;
};

static void run_new(void *p)
{
	struct new_call *c = p;
	c->ret = c->real(c->mask, c->name, c->base);
}

static locale_t new_checked(locale_t (*real)(int, const char *, locale_t), int mask,
			    const char *name, locale_t base)
{
	if (kt_guard || !name)
		return real(mask, name, base);
	unsigned cats = mask == 1 << LC_ALL ? ALL_CATS : (unsigned)mask;
	if (mask < 0 || (cats & ~ALL_CATS))
		return real(mask, name, base); /* EINVAL, from glibc */
	kt_enter();
	int a = plan_name(name, cats, true);
	if (a < 0) {
		kt_leave();
		return real(mask, name, base);
	}
	struct new_call c = { real, mask, name, base, (locale_t)0 };
	run_planned(a, run_new, &c);
	kt_leave();
	return c.ret;
}

typedef locale_t (*newlocale_fn)(int, const char *, locale_t);

KT_EXPORT locale_t newlocale(int mask, const char *name, locale_t base)
{
	newlocale_fn real = REAL(newlocale, newlocale_fn);
	if (!real) {
		errno = ENOSYS;
		return (locale_t)0;
	}
	return new_checked(real, mask, name, base);
}

KT_EXPORT locale_t __newlocale(int mask, const char *name, locale_t base)
{
	newlocale_fn real = REAL(__newlocale, newlocale_fn);
	if (!real) {
		errno = ENOSYS;
		return (locale_t)0;
	}
	return new_checked(real, mask, name, base);
}
