/* The build's declared dependencies, resolved through the registry into the
 * closure whose files the build may see, and the registry as the sandbox's
 * ownership oracle. */
#ifndef KILN_TRACE_SERVICE_DEPS_H
#define KILN_TRACE_SERVICE_DEPS_H

#include <stdio.h>

#include "registry/registry.h"
#include "trace/service/control.h"
#include "trace/service/owners.h"
#include "trace/service/pathtab.h"
#include "trace/service/sandbox.h"

/* The closure under `profile` (docs/profiles.md) of `names` (each must be
 * known to the registry) and of the Build-Depends in `control` (per group,
 * the first alternative installed or provided, as sbuild's apt resolver
 * takes the first; a group none of whose alternatives is installed is
 * named on `warn` and skipped), with the profile's base set (host:
 * Essential; chroot: Essential + Priority: required + apt +
 * build-essential). With a `control`, the build-essential package is
 * implied too, as Debian policy says (named on `warn` if not installed).
 * Returns 0, or -1 with err. */
int trace_deps_closure(struct kiln_registry *reg, enum registry_profile profile,
		       const char *const *names, size_t n, const struct dep_list *control,
		       FILE *warn, struct registry_pkgset *out, char *err, size_t errlen);

/* The packages that the dependencies of `all` (debian/control with every
 * field) bring beyond `closure` (the same without the fields the build type
 * leaves out): their names, into `out`. */
int trace_deps_left_out(struct kiln_registry *reg, enum registry_profile profile,
			const char *const *names, size_t n, const struct dep_list *all,
			const struct registry_pkgset *closure, struct pathtab *out, char *err,
			size_t errlen);

/* The same, also returning the names actually declared (the --deps names,
 * the alternative chosen in each group, build-essential) in *declared (an
 * array to free; its strings belong to `names` and `control`). */
int trace_deps_closure_named(struct kiln_registry *reg, enum registry_profile profile,
			     const char *const *names, size_t n, const struct dep_list *control,
			     FILE *warn, struct registry_pkgset *out, const char ***declared,
			     size_t *ndeclared, char *err, size_t errlen);

struct registry_oracle {
	struct kiln_registry *reg;
	const struct registry_pkgset *closure;
	struct owners_memo *owners; /* NULL: the registry is asked each time */
};

/* An oracle answering from the registry and the closure (both must outlive
 * it). */
struct sbx_oracle registry_oracle(struct registry_oracle *ro);

#endif
