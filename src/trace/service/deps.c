#include "trace/service/deps.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "registry/query.h"

/* Installed, or provided by something installed. */
static bool known(struct kiln_registry *reg, const char *name)
{
	int64_t id[1];
	return registry_satisfiers(reg, name, "", id, 1) > 0;
}

int trace_deps_closure(struct kiln_registry *reg, enum registry_profile profile,
		       const char *const *names, size_t n, const struct dep_list *control,
		       FILE *warn, struct registry_pkgset *out, char *err, size_t errlen)
{
	const char **declared;
	size_t nd;
	int rc = trace_deps_closure_named(reg, profile, names, n, control, warn, out, &declared,
					  &nd, err, errlen);
	free(declared);
	return rc;
}

int trace_deps_closure_named(struct kiln_registry *reg, enum registry_profile profile,
			     const char *const *names, size_t n, const struct dep_list *control,
			     FILE *warn, struct registry_pkgset *out, const char ***declared,
			     size_t *ndeclared, char *err, size_t errlen)
{
	*declared = NULL;
	*ndeclared = 0;
	size_t total = n + (control ? control->n + 1 : 0);
	const char **all = calloc(total + 1, sizeof *all);
	if (!all) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		all[k++] = names[i];
	for (size_t g = 0; control && g < control->n; g++) {
		const struct dep_group *grp = &control->groups[g];
		size_t a = 0;
		while (a < grp->n && !known(reg, grp->alts[a]))
			a++;
		if (a < grp->n) {
			all[k++] = grp->alts[a];
			continue;
		}
		if (warn) {
			fprintf(warn, "kiln trace: Build-Depends: ");
			for (size_t j = 0; j < grp->n; j++)
				fprintf(warn, "%s%s", j ? " | " : "", grp->alts[j]);
			fprintf(warn, " is not installed (not in the registry); ignored\n");
		}
	}
	if (control) {
		if (known(reg, "build-essential"))
			all[k++] = "build-essential";
		else if (warn)
			fprintf(warn, "kiln trace: build-essential (implied by Debian policy for "
				      "Build-Depends) is not installed; ignored\n");
	}
	if (profile == REGISTRY_PROFILE_CHROOT && warn && registry_count_required(reg) == 0)
		fprintf(warn, "kiln trace: the registry %s records no Priority: required package "
			      "(imported by an older kiln, or manifests without Priority): the chroot "
			      "base set is Essential + apt + build-essential only; run 'kiln registry "
			      "import dpkg' again\n",
			registry_path(reg));
	int rc = registry_closure_profile(reg, profile, all, k, true, out, err, errlen);
	*declared = all;
	*ndeclared = k;
	return rc;
}

int trace_deps_left_out(struct kiln_registry *reg, enum registry_profile profile,
			const char *const *names, size_t n, const struct dep_list *all,
			const struct registry_pkgset *closure, struct pathtab *out, char *err,
			size_t errlen)
{
	struct registry_pkgset wide = { 0 };
	int rc = trace_deps_closure(reg, profile, names, n, all, NULL, &wide, err, errlen);
	for (size_t i = 0; rc == 0 && i < wide.n; i++) {
		char name[SBX_PKG_MAX];
		if (registry_pkgset_has(closure, wide.ids[i]) ||
		    !registry_package_name(reg, wide.ids[i], name, sizeof name))
			continue;
		bool added;
		void **slot = pathtab_put(out, name, strlen(name), &added);
		if (!slot) {
			snprintf(err, errlen, "out of memory");
			rc = -1;
		} else {
			*slot = out; /* any non-NULL value */
		}
	}
	registry_pkgset_free(&wide);
	return rc;
}

static int owner(void *ctx, const char *path, char *pkg, size_t pkglen)
{
	struct registry_oracle *ro = ctx;
	int64_t ids[32], *v = ids;
	int n = owners_memo_get(ro->owners, ro->reg, path, ids, 32);
	if (n < 0)
		return -1;
	if (n == 0)
		return registry_in_managed_tree(ro->reg, path) ? SBX_OWNER_NONE : SBX_OWNER_UNMANAGED;
	if (n > 32) {
		v = malloc((size_t)n * sizeof *v);
		if (!v)
			return -1;
		int m = owners_memo_get(ro->owners, ro->reg, path, v, (size_t)n);
		if (m < 0 || m > n) {
			free(v);
			return -1;
		}
		n = m;
	}
	int rc = SBX_OWNER_FOREIGN;
	for (int i = 0; i < n; i++)
		if (registry_pkgset_has(ro->closure, v[i])) {
			rc = SBX_OWNER_DEP;
			break;
		}
	if (rc == SBX_OWNER_FOREIGN)
		registry_package_name(ro->reg, v[0], pkg, pkglen);
	if (v != ids)
		free(v);
	return rc;
}

struct sbx_oracle registry_oracle(struct registry_oracle *ro)
{
	return (struct sbx_oracle){ .ctx = ro, .owner = owner };
}
