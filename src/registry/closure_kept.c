/* The registry answers a closure asks for, kept by question, and the
 * driver both profiles run on (closure_kept.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/closure_kept.h"

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
static int store(struct kept_table *m, struct kept *e, const char *key, int klen, void *val,
		 size_t n)
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
	*m = (struct kept_table){ 0 };
}

/* Takes the handle's statements (prepared at the first closure) and picks
 * the table, with the handle's lock held. 0, or -1 with the message in
 * reg->err. */
static int run_open(struct closure_run *a, struct kiln_registry *reg, const struct closure_profile *p)
{
	*a = (struct closure_run){ .reg = reg };
	if (registry_frozen(reg) && !reg->closure_memo)
		reg->closure_memo = calloc(1, sizeof *reg->closure_memo);
	a->keep = registry_frozen(reg) ? reg->closure_memo : NULL;
	a->memo = a->keep ? &a->keep->answers : &a->own;
	struct {
		sqlite3_stmt **st, **slot;
		const char *sql;
	} stmts[] = {
		{ &a->real, &reg->st_cl_real, real_sql },
		{ &a->providers, &reg->st_cl_providers, providers_sql },
		{ &a->deps, &reg->st_cl_deps, deps_sql },
		{ &a->base, &reg->st_cl_base[p->profile == REGISTRY_PROFILE_CHROOT], p->base_sql },
	};
	for (size_t i = 0; i < sizeof stmts / sizeof stmts[0]; i++)
		if (!(*stmts[i].st = registry_stmt(reg, stmts[i].slot, stmts[i].sql)))
			return -1;
	return 0;
}

/* On CLOSURE_OK hands the closure to *out (0); else -1 with err written.
 * Frees the run either way. */
static int run_end(struct closure_run *a, enum closure_state st, struct registry_pkgset *out,
		   char *err, size_t errlen)
{
	struct kiln_registry *reg = a->reg;
	if (st == CLOSURE_OK) {
		*out = a->seen;
		a->seen = (struct registry_pkgset){ 0 };
	} else if (st == CLOSURE_FAILED && !reg->err[0]) {
		snprintf(err, errlen, "%s: out of memory computing a dependency closure", reg->path);
	} else if (st != CLOSURE_UNKNOWN) {
		snprintf(err, errlen, "%s", reg->err);
	}
	/* The handle's: left reset, holding no read of the file. */
	sqlite3_stmt *used[] = { a->real, a->providers, a->deps, a->base };
	for (size_t i = 0; i < sizeof used / sizeof used[0]; i++)
		if (used[i])
			sqlite3_reset(used[i]);
	free(a->q.v);
	registry_pkgset_free(&a->seen);
	forget(&a->own);
	return st == CLOSURE_OK ? 0 : -1;
}

const char *closure_split_name(const char *spec, char name[256])
{
	snprintf(name, 256, "%s", spec);
	char *colon = strchr(name, ':');
	if (!colon)
		return "";
	*colon = '\0';
	return colon + 1;
}

int closure_lookup(struct closure_run *a, sqlite3_stmt *st, const char *name, const char *archq,
		   struct closure_ids *out)
{
	char key[512];
	int kl = snprintf(key, sizeof key, "%c%s%c%s", st == a->real ? 'r' : 'p', name, '\0',
			  st == a->real ? archq : "");
	struct kept *e = kl < (int)sizeof key ? kept_slot(a->memo, key, kl) : NULL;
	if (e && e->key) {
		out->n = (int)e->n;
		memcpy(out->v, e->val, e->n * sizeof out->v[0]);
		return 0;
	}
	sqlite3_bind_text(st, 1, name, -1, SQLITE_TRANSIENT);
	if (st == a->real)
		sqlite3_bind_text(st, 2, archq, -1, SQLITE_TRANSIENT);
	int n = registry_collect_ids(a->reg, st, out->v, CLOSURE_IDS_MAX);
	if (n < 0)
		return -1;
	out->n = n > CLOSURE_IDS_MAX ? CLOSURE_IDS_MAX : n;
	int64_t *copy = e ? malloc((out->n ? (size_t)out->n : 1) * sizeof *copy) : NULL;
	if (copy) {
		memcpy(copy, out->v, (size_t)out->n * sizeof *copy);
		if (store(a->memo, e, key, kl, copy, (size_t)out->n))
			free(copy);
	}
	return 0;
}

/* The rows of `deps` for package id: *atoms_out is malloc'd (the caller's). */
static int ask_rows(struct closure_run *a, int64_t id, struct closure_atom **atoms_out,
		    size_t *n_out)
{
	struct closure_atom *atoms = NULL;
	size_t na = 0, cap = 0;
	int rc;
	sqlite3_bind_int64(a->deps, 1, id);
	while ((rc = sqlite3_step(a->deps)) == SQLITE_ROW) {
		if (na == cap) {
			cap = cap ? cap * 2 : 16;
			struct closure_atom *n = realloc(atoms, cap * sizeof *n);
			if (!n) {
				free(atoms);
				sqlite3_reset(a->deps);
				return -1;
			}
			atoms = n;
		}
		struct closure_atom *t = &atoms[na++];
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

/* Package id's dependency rows: *atoms is the table's, or malloc'd and
 * *owned (the caller frees it then). */
static int rows(struct closure_run *a, int64_t id, struct closure_atom **atoms, size_t *n,
		bool *owned)
{
	char key[1 + sizeof id];
	key[0] = 'd';
	memcpy(key + 1, &id, sizeof id);
	struct kept *e = kept_slot(a->memo, key, (int)sizeof key);
	if (e && e->key) {
		*atoms = e->val;
		*n = e->n;
		*owned = false;
		return 0;
	}
	if (ask_rows(a, id, atoms, n))
		return -1;
	/* The table's from now on, unless it cannot keep them (lookups may
	 * move the table, never its values). */
	*owned = !e || store(a->memo, e, key, (int)sizeof key, *atoms, *n) != 0;
	return 0;
}

int closure_push(struct closure_run *a, int64_t id)
{
	return registry_queue_push(&a->q, &a->seen, id);
}

/* Every id of a->base's rows pushed. */
static int seed(struct closure_run *a)
{
	int rc;
	while ((rc = sqlite3_step(a->base)) == SQLITE_ROW)
		if (closure_push(a, sqlite3_column_int64(a->base, 0))) {
			sqlite3_reset(a->base);
			return -1;
		}
	sqlite3_reset(a->base);
	if (rc != SQLITE_DONE) {
		registry_sql_message(a->reg->db, rc, a->reg->path, a->reg->err, sizeof a->reg->err);
		return -1;
	}
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

/* Follows a->q from position head to its end. */
static int drain(struct closure_run *a, const struct closure_profile *p, size_t head)
{
	for (; head < a->q.n; head++) {
		struct closure_atom *atoms;
		size_t na;
		bool owned;
		if (rows(a, a->q.v[head], &atoms, &na, &owned))
			return -1;
		int r = p->follow(a, atoms, na);
		if (owned)
			free(atoms);
		if (r)
			return -1;
	}
	return 0;
}

/* The profile's base set and everything it pulls in, worked out once per
 * snapshot handle and copied after: the packages already followed are all
 * in `seen`, and the queue starts empty. */
static int base(struct closure_run *a, const struct closure_profile *p)
{
	int k = p->profile == REGISTRY_PROFILE_CHROOT;
	if (a->keep && a->keep->base_known[k])
		return copy_set(&a->seen, &a->keep->base[k]);
	if (seed(a) || (p->add_base && p->add_base(a)) || drain(a, p, 0))
		return -1;
	if (a->keep && copy_set(&a->keep->base[k], &a->seen) == 0)
		a->keep->base_known[k] = true;
	return 0;
}

int closure_compute(struct kiln_registry *reg, const struct closure_profile *p,
		    const char *const *names, size_t n, bool with_base,
		    struct registry_pkgset *out, char *err, size_t errlen)
{
	struct closure_run a;
	reg->err[0] = '\0';
	pthread_mutex_lock(&reg->lock);
	enum closure_state st = run_open(&a, reg, p) ? CLOSURE_FAILED : CLOSURE_OK;
	/* The base set and everything it pulls in first (for the chroot, so
	 * that a dependency the base already satisfies adds nothing). */
	if (!st && with_base && base(&a, p))
		st = CLOSURE_FAILED;
	size_t head = a.q.n;
	for (size_t i = 0; i < n && !st; i++)
		st = p->add_name(&a, names[i], err, errlen);
	if (!st && drain(&a, p, head))
		st = CLOSURE_FAILED;
	int ret = run_end(&a, st, out, err, errlen);
	pthread_mutex_unlock(&reg->lock);
	return ret;
}

void registry_closure_memo_free(struct registry_closure_memo *m)
{
	if (!m)
		return;
	forget(&m->answers);
	registry_pkgset_free(&m->base[0]);
	registry_pkgset_free(&m->base[1]);
	free(m);
}
