/* The clean-chroot closure: the packages a buildd chroot would hold, as
 * debootstrap --variant=buildd and apt would install them from what is
 * installed here (rules in docs/profiles.md). One package per dependency
 * clause, where the host profile (registry_closure) takes every installed
 * alternative and every provider. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/closure_kept.h"

#define LOCK(reg) pthread_mutex_lock(&(reg)->lock)
#define UNLOCK(reg) pthread_mutex_unlock(&(reg)->lock)

static const char base_sql[] =
	"SELECT id FROM packages WHERE essential=1 OR priority='required' ORDER BY id";

/* debootstrap's buildd variant adds these by name to the required set. */
static const char *const buildd_extra[] = { "apt", "build-essential" };

/* 1 if something in the closure already satisfies (name, archq), 0 if not. */
static int satisfied(struct closure_run *a, const char *name, const char *archq)
{
	struct closure_ids r, p;
	if (closure_lookup(a, a->real, name, archq, &r) ||
	    closure_lookup(a, a->providers, name, archq, &p))
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
static int install(struct closure_run *a, const char *name, const char *archq)
{
	struct closure_ids r;
	if (closure_lookup(a, a->real, name, archq, &r))
		return -1;
	if (r.n == 0) {
		if (closure_lookup(a, a->providers, name, archq, &r))
			return -1;
		if (r.n > 1)
			r.n = 1;
	}
	for (int i = 0; i < r.n; i++)
		if (closure_push(a, r.v[i]))
			return -1;
	return r.n;
}

/* Each clause of a package: nothing if an alternative is already in the
 * closure, else the first alternative something installed satisfies. */
static int follow(struct closure_run *a, const struct closure_atom *atoms, size_t na)
{
	for (size_t s = 0, e; s < na; s = e) {
		for (e = s + 1; e < na && atoms[e].clause == atoms[s].clause &&
				atoms[e].type == atoms[s].type;
		     e++)
			;
		int done = 0;
		for (size_t i = s; i < e && !done; i++)
			if ((done = satisfied(a, atoms[i].name, atoms[i].archq)) < 0)
				return -1;
		for (size_t i = s; i < e && !done; i++)
			if ((done = install(a, atoms[i].name, atoms[i].archq)) < 0)
				return -1;
	}
	return 0;
}

/* Besides Priority: required (and Essential), what the buildd variant
 * adds by name. */
static int add_base(struct closure_run *a)
{
	for (size_t i = 0; i < sizeof buildd_extra / sizeof buildd_extra[0]; i++)
		if (install(a, buildd_extra[i], "") < 0)
			return -1;
	return 0;
}

/* Puts in a declared name: a package of that name; a virtual name the
 * closure already provides adds nothing, else its first provider. */
static enum closure_state add_name(struct closure_run *a, const char *spec, char *err,
				   size_t errlen)
{
	char name[256];
	const char *archq = closure_split_name(spec, name);
	struct closure_ids r;
	if (closure_lookup(a, a->real, name, archq, &r))
		return CLOSURE_FAILED;
	int k = r.n;
	for (int j = 0; j < r.n; j++)
		if (closure_push(a, r.v[j]))
			return CLOSURE_FAILED;
	if (k == 0 && (k = satisfied(a, name, archq)) == 0)
		k = install(a, name, archq);
	if (k < 0)
		return CLOSURE_FAILED;
	if (k == 0) {
		registry_unknown_name(a->reg, spec, err, errlen);
		return CLOSURE_UNKNOWN;
	}
	return CLOSURE_OK;
}

int registry_closure_chroot(struct kiln_registry *reg, const char *const *names, size_t n,
			    bool with_base, struct registry_pkgset *out, char *err, size_t errlen)
{
	static const struct closure_profile p = {
		REGISTRY_PROFILE_CHROOT, base_sql, add_base, add_name, follow,
	};
	return closure_compute(reg, &p, names, n, with_base, out, err, errlen);
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
