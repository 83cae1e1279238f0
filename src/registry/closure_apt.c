/* The clean-chroot closure: the packages a buildd chroot would hold, as
 * debootstrap --variant=buildd and apt would install them from what is
 * installed here (rules in docs/profiles.md). One package per dependency
 * clause, where the host profile (registry_closure) takes every installed
 * alternative and every provider. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/internal.h"
#include "registry/query.h"

#define LOCK(reg) pthread_mutex_lock(&(reg)->lock)
#define UNLOCK(reg) pthread_mutex_unlock(&(reg)->lock)

/* Installed packages of a name; arch as in registry_satisfiers(). */
static const char real_sql[] =
	"SELECT id FROM packages WHERE name=?1 AND "
	"(?2 IN ('', 'any', 'native') OR arch=?2 OR arch='all') ORDER BY id";

/* Providers in the order apt prefers them when nothing decides otherwise:
 * higher Priority first, then Essential, then by name (a stable tie-break
 * of our own). */
static const char providers_sql[] =
	"SELECT p.id FROM provides v JOIN packages p ON p.id=v.pkg WHERE v.name=?1 "
	"ORDER BY CASE p.priority WHEN 'required' THEN 0 WHEN 'important' THEN 1 "
	"WHEN 'standard' THEN 2 WHEN 'optional' THEN 3 WHEN 'extra' THEN 4 ELSE 5 END, "
	"p.essential DESC, p.name, p.id";

/* Pre-Depends before Depends, clauses and alternatives in their order. */
static const char deps_sql[] =
	"SELECT clause, alt, name, archq, type FROM deps WHERE pkg=?1 "
	"ORDER BY type DESC, clause, alt";

static const char base_sql[] =
	"SELECT id FROM packages WHERE essential=1 OR priority='required' ORDER BY id";

/* debootstrap's buildd variant adds these by name to the required set. */
static const char *const buildd_extra[] = { "apt", "build-essential" };

struct ids {
	int64_t v[64];
	int n;
};

struct atom {
	int clause, alt, type;
	char name[128], archq[32];
};

/* What the registry answered, kept by question: 'r' or 'p' (real,
 * providers), the name, '\0', archq -> struct ids; 'd' and a package id ->
 * its dependency rows (n atoms). Within one closure a clause is looked up
 * again for every package that has it (libc6 for most of them: 1,772
 * lookups of 336 names for GNU hello's report); a snapshot handle, which
 * cannot change, keeps the table for all its closures (the report's unused
 * Build-Depends ask one per declared name). */
struct kept {
	char *key; /* NULL: a free slot */
	size_t klen;
	void *val;
	size_t n;
};

struct kept_table {
	struct kept *v;
	size_t cap, n; /* cap: a power of two, at most half full */
};

/* All a snapshot handle keeps for its closures: the table, and the base
 * set with everything it pulls in (below, base()). */
struct registry_closure_memo {
	struct kept_table answers;
	struct registry_pkgset base;
	bool base_known;
};

struct apt {
	struct kiln_registry *reg;
	sqlite3_stmt *real, *providers, *deps, *base;
	struct registry_pkgset seen;
	struct registry_queue q;
	struct registry_closure_memo *keep; /* the handle's (a snapshot), or NULL */
	struct kept_table *memo;            /* keep's table, or `own` */
	struct kept_table own;
};

static struct kept *slot_of(struct kept_table *m, const char *key, size_t klen)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (size_t i = 0; i < klen; i++)
		h = (h ^ (unsigned char)key[i]) * 1099511628211ull;
	for (size_t i = (size_t)h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		struct kept *e = &m->v[i];
		if (!e->key || (e->klen == klen && !memcmp(e->key, key, klen)))
			return e;
	}
}

/* The slot for `key` with room for it: NULL when out of memory or the key
 * does not fit (then nothing is kept and the question is asked). */
static struct kept *kept_slot(struct kept_table *m, const char *key, int klen)
{
	if (klen <= 0)
		return NULL;
	if (!m->cap || (m->n + 1) * 2 > m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 1024;
		struct kept *v = calloc(cap, sizeof *v);
		if (!v)
			return NULL;
		struct kept_table bigger = { v, cap, m->n };
		for (size_t i = 0; i < m->cap; i++)
			if (m->v[i].key)
				*slot_of(&bigger, m->v[i].key, m->v[i].klen) = m->v[i];
		free(m->v);
		*m = bigger;
	}
	return slot_of(m, key, (size_t)klen);
}

/* Keeps val (malloc'd, now the table's) under the free slot e. */
static int store(struct kept_table *m, struct kept *e, const char *key, int klen,
		void *val, size_t n)
{
	if (!(e->key = malloc((size_t)klen)))
		return -1;
	memcpy(e->key, key, (size_t)klen);
	e->klen = (size_t)klen;
	e->val = val;
	e->n = n;
	m->n++;
	return 0;
}

static void forget(struct kept_table *m)
{
	for (size_t i = 0; i < m->cap; i++) {
		free(m->v[i].key);
		free(m->v[i].val);
	}
	free(m->v);
}

static int lookup(struct apt *a, sqlite3_stmt *st, const char *name, const char *archq,
		  struct ids *out)
{
	char key[512];
	int kl = snprintf(key, sizeof key, "%c%s%c%s", st == a->real ? 'r' : 'p', name, '\0',
			  st == a->real ? archq : "");
	struct kept *e = kl < (int)sizeof key ? kept_slot(a->memo, key, kl) : NULL;
	if (e && e->key) {
		*out = *(struct ids *)e->val;
		return 0;
	}
	sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
	if (st == a->real)
		sqlite3_bind_text(st, 2, archq, -1, SQLITE_TRANSIENT);
	int n = registry_collect_ids(a->reg, st, out->v, 64);
	out->n = n > 64 ? 64 : n;
	if (n < 0)
		return -1;
	struct ids *copy = e ? malloc(sizeof *copy) : NULL;
	if (copy) {
		*copy = *out;
		if (store(a->memo, e, key, kl, copy, 0))
			free(copy);
	}
	return 0;
}

static int push(struct apt *a, int64_t id)
{
	return registry_queue_push(&a->q, &a->seen, id);
}

/* 1 if something in the closure already satisfies (name, archq), 0 if not. */
static int satisfied(struct apt *a, const char *name, const char *archq)
{
	struct ids r, p;
	if (lookup(a, a->real, name, archq, &r) || lookup(a, a->providers, name, archq, &p))
		return -1;
	for (int i = 0; i < r.n; i++)
		if (registry_pkgset_has(&a->seen, r.v[i]))
			return 1;
	for (int i = 0; i < p.n; i++)
		if (registry_pkgset_has(&a->seen, p.v[i]))
			return 1;
	return 0;
}

/* What apt installs for (name, archq): the package of that name (every
 * installed architecture of it), else the first provider. Returns how many
 * were pushed (0: nothing installed satisfies it), -1 on error. */
static int install(struct apt *a, const char *name, const char *archq)
{
	struct ids r;
	if (lookup(a, a->real, name, archq, &r))
		return -1;
	if (r.n == 0) {
		if (lookup(a, a->providers, name, archq, &r))
			return -1;
		if (r.n > 1)
			r.n = 1;
	}
	for (int i = 0; i < r.n; i++)
		if (push(a, r.v[i]))
			return -1;
	return r.n;
}

/* The rows of `deps` for package id: *atoms is malloc'd (the caller's). */
static int ask_rows(struct apt *a, int64_t id, struct atom **atoms_out, size_t *n_out)
{
	struct atom *atoms = NULL;
	size_t na = 0, cap = 0;
	int rc;
	sqlite3_bind_int64(a->deps, 1, id);
	while ((rc = sqlite3_step(a->deps)) == SQLITE_ROW) {
		if (na == cap) {
			cap = cap ? cap * 2 : 16;
			struct atom *n = realloc(atoms, cap * sizeof *n);
			if (!n) {
				free(atoms);
				sqlite3_reset(a->deps);
				return -1;
			}
			atoms = n;
		}
		struct atom *t = &atoms[na++];
		t->clause = sqlite3_column_int(a->deps, 0);
		t->alt = sqlite3_column_int(a->deps, 1);
		snprintf(t->name, sizeof t->name, "%s", (const char *)sqlite3_column_text(a->deps, 2));
		snprintf(t->archq, sizeof t->archq, "%s", (const char *)sqlite3_column_text(a->deps, 3));
		t->type = sqlite3_column_int(a->deps, 4);
	}
	sqlite3_reset(a->deps);
	if (rc != SQLITE_DONE) {
		free(atoms);
		registry_sql_message(a->reg->db, rc, a->reg->path, a->reg->err, sizeof a->reg->err);
		return -1;
	}
	*atoms_out = atoms;
	*n_out = na;
	return 0;
}

/* Each clause of package id: nothing if an alternative is already in the
 * closure, else the first alternative something installed satisfies. */
static int follow(struct apt *a, int64_t id)
{
	char key[1 + sizeof id];
	key[0] = 'd';
	memcpy(key + 1, &id, sizeof id);
	struct kept *e = kept_slot(a->memo, key, (int)sizeof key);
	struct atom *atoms;
	size_t na;
	bool ours = false; /* the table's, else freed below (lookups may move the table) */
	if (e && e->key) {
		atoms = e->val;
		na = e->n;
	} else if (ask_rows(a, id, &atoms, &na)) {
		return -1;
	} else {
		ours = !e || store(a->memo, e, key, (int)sizeof key, atoms, na) != 0;
	}
	int ret = 0;
	for (size_t s = 0, e; s < na && !ret; s = e) {
		for (e = s + 1; e < na && atoms[e].clause == atoms[s].clause &&
				atoms[e].type == atoms[s].type;
		     e++)
			;
		int done = 0;
		for (size_t i = s; i < e && !done; i++)
			if ((done = satisfied(a, atoms[i].name, atoms[i].archq)) < 0)
				ret = -1;
		for (size_t i = s; i < e && !done && !ret; i++)
			if ((done = install(a, atoms[i].name, atoms[i].archq)) < 0)
				ret = -1;
	}
	if (ours)
		free(atoms);
	return ret;
}

/* Breadth-first from queue position `head` to the end. */
static int drain(struct apt *a, size_t head)
{
	for (; head < a->q.n; head++)
		if (follow(a, a->q.v[head]))
			return -1;
	return 0;
}

static int seed_base(struct apt *a)
{
	int rc;
	while ((rc = sqlite3_step(a->base)) == SQLITE_ROW)
		if (push(a, sqlite3_column_int64(a->base, 0))) {
			sqlite3_reset(a->base);
			return -1;
		}
	sqlite3_reset(a->base);
	if (rc != SQLITE_DONE) {
		registry_sql_message(a->reg->db, rc, a->reg->path, a->reg->err, sizeof a->reg->err);
		return -1;
	}
	for (size_t i = 0; i < sizeof buildd_extra / sizeof buildd_extra[0]; i++)
		if (install(a, buildd_extra[i], "") < 0)
			return -1;
	return 0;
}

static int copy_set(struct registry_pkgset *to, const struct registry_pkgset *from)
{
	int64_t *ids = malloc((from->n ? from->n : 1) * sizeof *ids);
	if (!ids)
		return -1;
	memcpy(ids, from->ids, from->n * sizeof *ids);
	registry_pkgset_free(to);
	*to = (struct registry_pkgset){ .ids = ids, .n = from->n, .cap = from->n ? from->n : 1 };
	return 0;
}

/* The base set and everything it pulls in. It depends on the registry
 * alone, so a snapshot's (which cannot change) is worked out once and
 * copied after: the packages already followed are all in `seen`, and the
 * queue starts empty. */
static int base(struct apt *a)
{
	if (a->keep && a->keep->base_known)
		return copy_set(&a->seen, &a->keep->base);
	if (seed_base(a) || drain(a, 0))
		return -1;
	if (a->keep && copy_set(&a->keep->base, &a->seen) == 0)
		a->keep->base_known = true;
	return 0;
}

int registry_closure_chroot(struct kiln_registry *reg, const char *const *names, size_t n,
			    bool with_base, struct registry_pkgset *out, char *err, size_t errlen)
{
	struct apt a = { .reg = reg };
	int ret = -1;
	reg->err[0] = '\0';
	LOCK(reg);
	if (reg->snap && !reg->chroot_memo)
		reg->chroot_memo = calloc(1, sizeof *reg->chroot_memo);
	a.keep = reg->snap ? reg->chroot_memo : NULL;
	a.memo = a.keep ? &a.keep->answers : &a.own;
	struct {
		sqlite3_stmt **st;
		const char *sql;
	} stmts[] = {
		{ &a.real, real_sql }, { &a.providers, providers_sql },
		{ &a.deps, deps_sql }, { &a.base, base_sql },
	};
	for (size_t i = 0; i < sizeof stmts / sizeof stmts[0]; i++) {
		int rc = sqlite3_prepare_v2(reg->db, stmts[i].sql, -1, stmts[i].st, NULL);
		if (rc != SQLITE_OK) {
			registry_sql_message(reg->db, rc, reg->path, reg->err, sizeof reg->err);
			goto db_error;
		}
	}
	/* The chroot is made before the build's dependencies go in: the base
	 * set and everything it pulls in first, so a dependency the base
	 * already satisfies adds nothing. */
	if (with_base && base(&a))
		goto fail;
	size_t head = a.q.n;
	for (size_t i = 0; i < n; i++) {
		char name[256];
		snprintf(name, sizeof name, "%s", names[i]);
		char *colon = strchr(name, ':');
		if (colon)
			*colon = '\0';
		const char *archq = colon ? colon + 1 : "";
		/* A package of that name goes in; a virtual name the closure
		 * already provides adds nothing, else its first provider. */
		struct ids r;
		if (lookup(&a, a.real, name, archq, &r))
			goto fail;
		int k = r.n;
		for (int j = 0; j < r.n; j++)
			if (push(&a, r.v[j]))
				goto fail;
		if (k == 0 && (k = satisfied(&a, name, archq)) == 0)
			k = install(&a, name, archq);
		if (k < 0)
			goto fail;
		if (k == 0) {
			registry_unknown_name(reg, names[i], err, errlen);
			goto out;
		}
	}
	if (drain(&a, head))
		goto fail;
	*out = a.seen;
	a.seen = (struct registry_pkgset){ 0 };
	ret = 0;
	goto out;
fail:
	if (!reg->err[0]) {
		snprintf(err, errlen, "%s: out of memory computing a dependency closure", reg->path);
		goto out;
	}
db_error:
	snprintf(err, errlen, "%s", reg->err);
out:
	for (size_t i = 0; i < sizeof stmts / sizeof stmts[0]; i++)
		sqlite3_finalize(*stmts[i].st);
	UNLOCK(reg);
	free(a.q.v);
	registry_pkgset_free(&a.seen);
	forget(&a.own);
	return ret;
}

void registry_closure_memo_free(struct registry_closure_memo *m)
{
	if (!m)
		return;
	forget(&m->answers);
	registry_pkgset_free(&m->base);
	free(m);
}

int registry_closure_profile(struct kiln_registry *reg, enum registry_profile profile,
			     const char *const *names, size_t n, bool with_base,
			     struct registry_pkgset *out, char *err, size_t errlen)
{
	if (profile == REGISTRY_PROFILE_CHROOT)
		return registry_closure_chroot(reg, names, n, with_base, out, err, errlen);
	return registry_closure(reg, names, n, with_base, out, err, errlen);
}

int64_t registry_count_required(struct kiln_registry *reg)
{
	LOCK(reg);
	sqlite3_stmt *st;
	int64_t n = -1;
	int rc = sqlite3_prepare_v2(reg->db, "SELECT count(*) FROM packages WHERE priority='required'",
				    -1, &st, NULL);
	if (rc == SQLITE_OK) {
		if ((rc = sqlite3_step(st)) == SQLITE_ROW)
			n = sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	if (n < 0)
		registry_sql_message(reg->db, rc, reg->path, reg->err, sizeof reg->err);
	UNLOCK(reg);
	return n;
}
