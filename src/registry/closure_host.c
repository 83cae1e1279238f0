/* The host closure: everything installed that the build could use, every
 * installed alternative of a clause and every provider of a name, with
 * Essential as the base set (docs/profiles.md). The clean-chroot closure,
 * one package per clause, is closure_apt.c. */
#include <stddef.h>

#include "registry/closure_kept.h"

static const char essential_sql[] = "SELECT id FROM packages WHERE essential=1 ORDER BY id";

/* Pushes the packages of (name, archq) and every provider of name: how many
 * there are, -1 on error. */
static int push_satisfiers(struct closure_run *a, const char *name, const char *archq)
{
	struct closure_ids r, p;
	if (closure_lookup(a, a->real, name, archq, &r) ||
	    closure_lookup(a, a->providers, name, archq, &p))
		return -1;
	for (int i = 0; i < r.n; i++)
		if (closure_push(a, r.v[i]))
			return -1;
	for (int i = 0; i < p.n; i++)
		if (closure_push(a, p.v[i]))
			return -1;
	return r.n + p.n;
}

/* Every satisfier of every row: each installed alternative of a clause. */
static int follow(struct closure_run *a, const struct closure_atom *atoms, size_t na)
{
	for (size_t i = 0; i < na; i++)
		if (push_satisfiers(a, atoms[i].name, atoms[i].archq) < 0)
			return -1;
	return 0;
}

/* Pushes the packages of a declared name: of that name (and architecture,
 * if qualified), else whatever satisfies it. */
static enum closure_state add_name(struct closure_run *a, const char *spec, char *err,
				   size_t errlen)
{
	int64_t ids[CLOSURE_IDS_MAX];
	int k = registry_find_packages(a->reg, spec, ids, CLOSURE_IDS_MAX);
	if (k < 0)
		return CLOSURE_FAILED;
	if (k > CLOSURE_IDS_MAX)
		k = CLOSURE_IDS_MAX;
	for (int j = 0; j < k; j++)
		if (closure_push(a, ids[j]))
			return CLOSURE_FAILED;
	if (k == 0) {
		char name[256];
		const char *archq = closure_split_name(spec, name);
		if ((k = push_satisfiers(a, name, archq)) < 0)
			return CLOSURE_FAILED;
		if (k == 0) {
			registry_unknown_name(a->reg, spec, err, errlen);
			return CLOSURE_UNKNOWN;
		}
	}
	return CLOSURE_OK;
}

int registry_closure(struct kiln_registry *reg, const char *const *names, size_t n,
		     bool with_essential, struct registry_pkgset *out, char *err, size_t errlen)
{
	static const struct closure_profile p = {
		REGISTRY_PROFILE_HOST, essential_sql, NULL, add_name, follow,
	};
	return closure_compute(reg, &p, names, n, with_essential, out, err, errlen);
}
