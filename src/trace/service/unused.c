#include "trace/service/unused.h"

#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry/query.h"
#include "trace/verdict.h"

#define MAX_LINKS 40

/* Virtual packages Debian asks builds to declare for files that, in a
 * native build, another package of the closure ships: counted used when
 * the build reached those files. perl-xs-dev: "XS module packages should
 * build-depend on" it (libperl-dev's README.cross); it brings the host's
 * Config.pm for cross builds, while a native build compiles against the
 * CORE headers of libperl5.x. */
static const struct {
	const char *name, *files;
} stand_ins[] = {
	{ "perl-xs-dev", "*/perl/*/CORE/*" },
};
#define NSTAND_INS (sizeof stand_ins / sizeof *stand_ins)

/* Resolution as the kernel does it, with every symlink met and every final
 * node that is not a directory counted as touched (a symlink to a directory
 * only for the packages that ship it as a symlink). Directories are
 * resolved once each (memo). */
struct resolver {
	struct pathtab dirs;   /* lexical directory -> canonical directory, or &not_dir */
	struct pathtab nodes;  /* canonical nodes already counted */
	struct kiln_registry *reg;
	struct sandbox *sbx;         /* NULL, or the walks' node memo */
	struct owners_memo *owners;  /* NULL, or the walks' owners memo */
	struct registry_pkgset *out;
	bool stood_in[NSTAND_INS];
	int failed;
};

static char not_dir;

static void free_dir(void *p)
{
	if (p != &not_dir)
		free(p);
}

static char *join(const char *dir, const char *name)
{
	char *s;
	if (asprintf(&s, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", name) < 0)
		return NULL;
	return s;
}

/* Lexically clean in place: no "//", no "/." components, no trailing '/'
 * (".." kept: resolve() follows it from the resolved parent). */
static void clean(char *s)
{
	char *w = s;
	for (const char *r = s; *r;) {
		if (*r == '/') {
			while (*r == '/')
				r++;
			if (r[0] == '.' && (r[1] == '/' || r[1] == '\0')) {
				r++;
				continue;
			}
			*w++ = '/';
			continue;
		}
		*w++ = *r++;
	}
	if (w > s + 1 && w[-1] == '/')
		w--;
	if (w == s)
		*w++ = '/';
	*w = '\0';
}

/* `node` touched; a symlink to a directory (`dir_link`) only for the
 * packages that ship it as a symlink. */
static void count(struct resolver *r, const char *node, bool dir_link)
{
	bool added;
	void **slot = pathtab_put(&r->nodes, node, strlen(node), &added);
	if (!slot || !added)
		return;
	*slot = &not_dir; /* any non-NULL value */
	int64_t ids[32];
	int n = dir_link ? registry_link_owners(r->reg, node, ids, 32)
			 : owners_memo_get(r->owners, r->reg, node, ids, 32);
	if (n < 0) {
		r->failed = 1;
		return;
	}
	for (int i = 0; i < n && i < 32; i++)
		if (registry_pkgset_add(r->out, ids[i]) < 0)
			r->failed = 1;
	for (size_t k = 0; k < NSTAND_INS; k++) {
		if (r->stood_in[k] || fnmatch(stand_ins[k].files, node, 0) != 0)
			continue;
		r->stood_in[k] = true;
		n = registry_satisfiers(r->reg, stand_ins[k].name, "", ids, 32);
		if (n < 0)
			r->failed = 1;
		for (int i = 0; i < n && i < 32; i++)
			if (registry_pkgset_add(r->out, ids[i]) < 0)
				r->failed = 1;
	}
}

static char *resolve(struct resolver *r, const char *p, int links);

/* lstat of a canonical node (of a resolved path: not a symlink, so also its
 * stat), from the walks' node memo when there is one. */
static int node_lstat(struct resolver *r, const char *node, struct stat *st)
{
	return r->sbx ? sandbox_lstat(r->sbx, node, st) : lstat(node, st);
}

static const char *canon_dir(struct resolver *r, const char *dir, int links)
{
	void **slot;
	bool added;
	const char *known = pathtab_get(&r->dirs, dir, strlen(dir));
	if (known)
		return known == &not_dir ? NULL : known;
	char *c = resolve(r, dir, links);
	struct stat st;
	if (c && (node_lstat(r, c, &st) < 0 || !S_ISDIR(st.st_mode))) {
		free(c);
		c = NULL;
	}
	if (!(slot = pathtab_put(&r->dirs, dir, strlen(dir), &added))) {
		free(c);
		r->failed = 1;
		return NULL;
	}
	*slot = c ? c : &not_dir;
	return c;
}

/* The canonical path of existing `p` (absolute, clean; ".." allowed), a
 * final symlink followed; NULL if it does not resolve. */
static char *resolve(struct resolver *r, const char *p, int links)
{
	if (!strcmp(p, "/"))
		return strdup("/");
	const char *slash = strrchr(p, '/');
	char *parent = slash == p ? strdup("/") : strndup(p, (size_t)(slash - p));
	if (!parent)
		return NULL;
	const char *pc = canon_dir(r, parent, links);
	free(parent);
	if (!pc)
		return NULL;
	const char *name = slash + 1;
	if (!strcmp(name, "..")) {
		char *up = strdup(pc);
		char *s = up ? strrchr(up, '/') : NULL;
		if (s)
			s == up ? (void)(s[1] = '\0') : (void)(*s = '\0');
		return up;
	}
	char *node = join(pc, name);
	struct stat st;
	if (!node || node_lstat(r, node, &st) < 0) {
		free(node);
		return NULL;
	}
	if (!S_ISLNK(st.st_mode)) {
		if (!S_ISDIR(st.st_mode))
			count(r, node, false);
		return node;
	}
	char target[PATH_MAX];
	ssize_t n = links < MAX_LINKS ? readlink(node, target, sizeof target - 1) : -1;
	char *full = NULL, *res = NULL;
	if (n > 0) {
		target[n] = '\0';
		full = target[0] == '/' ? strdup(target) : join(pc, target);
	}
	if (full) {
		clean(full);
		res = resolve(r, full, links + 1);
		free(full);
	}
	/* A symlink to a directory is a directory of those who list entries
	 * below it (merged /usr's /lib, listed so by some fifty packages): for
	 * them it counts as a directory does, not at all. */
	count(r, node, res && node_lstat(r, res, &st) == 0 && S_ISDIR(st.st_mode));
	free(node);
	return res;
}

struct touched {
	struct resolver r;
	const struct policy *policy;
	size_t next; /* of t->allowed, the first not yet looked at */
	/* the closures without each declared name, when told them */
	struct unused_ahead ahead;
	enum registry_profile profile;
	const char *const *declared;
	const struct registry_pkgset *closure;
};

struct touched *touched_new(const struct policy *policy, struct kiln_registry *reg)
{
	struct touched *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	w->policy = policy;
	w->r.reg = reg;
	w->r.out = calloc(1, sizeof *w->r.out);
	if (!w->r.out) {
		free(w);
		return NULL;
	}
	return w;
}

void touched_share(struct touched *w, struct sandbox *sbx, struct owners_memo *owners)
{
	w->r.sbx = sbx;
	w->r.owners = owners;
}

int touched_ahead(struct touched *w, enum registry_profile profile, const char *const *declared,
		  size_t n, const struct registry_pkgset *closure)
{
	if (unused_ahead_init(&w->ahead, n) < 0)
		return -1;
	w->profile = profile;
	w->declared = declared;
	w->closure = closure;
	return 0;
}

const struct unused_ahead *touched_rests(const struct touched *w)
{
	return w->declared ? &w->ahead : NULL;
}

void touched_free(struct touched *w)
{
	if (!w)
		return;
	pathtab_free(&w->r.dirs, free_dir);
	pathtab_free(&w->r.nodes, NULL);
	registry_pkgset_free(w->r.out);
	free(w->r.out);
	unused_ahead_free(&w->ahead);
	free(w);
}

/* A ".." component: where it leads depends on a directory that may be a
 * symlink the build makes or changes later (a managed tree's path may
 * climb into the build directory), so it is resolved at the end only. */
static bool climbs(const char *p)
{
	for (const char *c = strstr(p, "/.."); c; c = strstr(c + 1, "/.."))
		if (c[3] == '/' || c[3] == '\0')
			return true;
	return false;
}

static void touch(struct touched *w, const char *path)
{
	if (path[0] != '/' || policy_action_for(w->policy, path) == POLICY_ALLOW)
		return;
	free(resolve(&w->r, path, 0));
}

/* Up to max of the queued paths not through "..": how many were. */
static size_t resolve_queued(struct touched *w, const struct tracelog *t, size_t max)
{
	size_t done = 0;
	for (; w->next < t->nallowed && done < max && !w->r.failed; w->next++) {
		const char *p = t->allowed[w->next];
		if (!climbs(p)) {
			touch(w, p);
			done++;
		}
	}
	return done;
}

size_t touched_update(struct touched *w, const struct tracelog *t, size_t max)
{
	/* Paths first: the more the build is known to have used, the fewer
	 * closures are worked out for nothing. */
	if (!resolve_queued(w, t, max) && w->next == t->nallowed && !w->r.failed && w->declared)
		unused_ahead_update(&w->ahead, w->r.reg, w->profile, w->declared, w->closure, w->r.out);
	return touched_left(w, t);
}

size_t touched_left(const struct touched *w, const struct tracelog *t)
{
	if (w->r.failed)
		return 0; /* the end says so */
	return t->nallowed - w->next + (w->declared && unused_ahead_pending(&w->ahead));
}

int touched_finish(struct touched *w, const struct tracelog *t, struct registry_pkgset *out,
		   char *err, size_t errlen)
{
	if (t->allowed_lost || !t->track_allowed) {
		/* Every path the build was allowed (those already resolved
		 * are found in the memo and not counted twice). */
		for (size_t i = 0; i < t->paths.cap && !w->r.failed; i++) {
			const char *key = t->paths.slots[i].key;
			const struct trace_path *p = t->paths.slots[i].val;
			if (key && p && (p->verdicts & (1u << KILN_V_ALLOW)))
				touch(w, key);
		}
	} else {
		resolve_queued(w, t, SIZE_MAX);
		for (size_t i = 0; i < t->nallowed && !w->r.failed; i++)
			if (climbs(t->allowed[i]))
				touch(w, t->allowed[i]);
	}
	if (w->r.failed) {
		snprintf(err, errlen, "finding the packages the build used: %s",
			 registry_errmsg(w->r.reg)[0] ? registry_errmsg(w->r.reg) : "out of memory");
		return -1;
	}
	*out = *w->r.out;
	*w->r.out = (struct registry_pkgset){ 0 };
	return 0;
}

int trace_touched_packages(const struct tracelog *t, const struct policy *policy,
			   struct kiln_registry *reg, struct registry_pkgset *out,
			   char *err, size_t errlen)
{
	struct touched *w = touched_new(policy, reg);
	if (!w) {
		snprintf(err, errlen, "finding the packages the build used: out of memory");
		return -1;
	}
	int rc = touched_finish(w, t, out, err, errlen);
	touched_free(w);
	return rc;
}

/* 1 when the build used a package that is the declared name itself (a
 * package of that name, or what provides it, in the closure); 0 not; -1 on
 * a registry error. */
static int used_directly(struct kiln_registry *reg, const char *name,
			 const struct registry_pkgset *closure, const struct registry_pkgset *touched)
{
	int64_t ids[64];
	int m = registry_satisfiers(reg, name, "", ids, 64);
	if (m < 0)
		return -1;
	for (int j = 0; j < m && j < 64; j++)
		if (registry_pkgset_has(closure, ids[j]) && registry_pkgset_has(touched, ids[j]))
			return 1;
	return 0;
}

/* The closure of the declared names but the i-th, into *rest. */
static int closure_without(struct kiln_registry *reg, enum registry_profile profile,
			   const char *const *declared, size_t n, size_t i,
			   struct registry_pkgset *rest, char *err, size_t errlen)
{
	const char **others = calloc(n + 1, sizeof *others);
	if (!others) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	size_t no = 0;
	for (size_t j = 0; j < n; j++)
		if (j != i)
			others[no++] = declared[j];
	int rc = registry_closure_profile(reg, profile, others, no, true, rest, err, errlen);
	free(others);
	return rc;
}

int unused_ahead_init(struct unused_ahead *a, size_t n)
{
	*a = (struct unused_ahead){ .n = n };
	a->rest = calloc(n ? n : 1, sizeof *a->rest);
	a->known = calloc(n ? n : 1, sizeof *a->known);
	if (!a->rest || !a->known) {
		unused_ahead_free(a);
		return -1;
	}
	return 0;
}

void unused_ahead_free(struct unused_ahead *a)
{
	for (size_t i = 0; a->rest && i < a->n; i++)
		registry_pkgset_free(&a->rest[i]);
	free(a->rest);
	free(a->known);
	*a = (struct unused_ahead){ 0 };
}

bool unused_ahead_update(struct unused_ahead *a, struct kiln_registry *reg,
			 enum registry_profile profile, const char *const *declared,
			 const struct registry_pkgset *closure, const struct registry_pkgset *touched)
{
	while (a->next < a->n && !a->failed) {
		size_t i = a->next++;
		int used = 1; /* build-essential: never listed */
		if (strcmp(declared[i], "build-essential"))
			used = used_directly(reg, declared[i], closure, touched);
		if (used < 0) {
			a->failed = true;
			break;
		}
		if (used)
			continue; /* touched only grows: used it stays */
		char err[256];
		if (closure_without(reg, profile, declared, a->n, i, &a->rest[i], err, sizeof err) < 0) {
			registry_pkgset_free(&a->rest[i]);
			a->failed = true; /* the end works them out, and says why not */
			break;
		}
		a->known[i] = true;
		break; /* one closure per call */
	}
	return unused_ahead_pending(a);
}

bool unused_ahead_pending(const struct unused_ahead *a)
{
	return a->next < a->n && !a->failed;
}

long trace_unused_deps(struct kiln_registry *reg, enum registry_profile profile,
		       const char *const *declared, size_t n, const struct registry_pkgset *closure,
		       const struct registry_pkgset *touched, const struct unused_ahead *ahead,
		       size_t *unused, char *err, size_t errlen)
{
	long k = 0;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(declared[i], "build-essential"))
			continue;
		int used = used_directly(reg, declared[i], closure, touched);
		if (used < 0) {
			snprintf(err, errlen, "%s", registry_errmsg(reg));
			return -1;
		}
		if (used)
			continue;
		/* What only it brings (the closure without it, compared): used
		 * when the build touched any of that. */
		struct registry_pkgset own_rest = { 0 };
		const struct registry_pkgset *rest = &own_rest;
		if (ahead && ahead->n == n && ahead->known[i])
			rest = &ahead->rest[i];
		else if (closure_without(reg, profile, declared, n, i, &own_rest, err, errlen) < 0) {
			registry_pkgset_free(&own_rest);
			return -1;
		}
		for (size_t j = 0; j < closure->n && !used; j++)
			used = !registry_pkgset_has(rest, closure->ids[j]) &&
			       registry_pkgset_has(touched, closure->ids[j]);
		registry_pkgset_free(&own_rest);
		if (!used)
			unused[k++] = i;
	}
	return k;
}
