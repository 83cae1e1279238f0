/* Unused Build-Depends: declared packages the build did not use
 * (docs/trace-report.md, "Unused Build-Depends"). A declared package D is
 * used when the build reached a file or symlink (not a directory, which
 * many packages share) owned by D, or by a package that only D brings into
 * the closure (a metapackage such as pkg-config -> pkgconf is used through
 * what it depends on). Worked out once the build has ended, from the
 * packages the build touched, which are found as it runs. */
#ifndef KILN_TRACE_SERVICE_UNUSED_H
#define KILN_TRACE_SERVICE_UNUSED_H

#include <stdbool.h>
#include <stddef.h>

#include "registry/registry.h"
#include "trace/service/owners.h"
#include "trace/service/policy.h"
#include "trace/service/sandbox.h"
#include "trace/service/tracelog.h"

/* The packages owning what the build reached: every path of t->paths that
 * was allowed, outside the policy's allow areas, resolved as the kernel
 * would (each symlink on the way counts, directories do not). */
int trace_touched_packages(const struct tracelog *t, const struct policy *policy,
			   struct kiln_registry *reg, struct registry_pkgset *out,
			   char *err, size_t errlen);

/* The same, worked out as the build goes: touched_update() resolves the
 * paths t->allowed gained since the last call (at most `max`; it returns
 * how many are left), touched_finish() the rest and hands the set to *out
 * (0; -1 on a registry error or out of memory, with err written). A path
 * through ".." is resolved by touched_finish() only. Without
 * t->track_allowed, or when t->allowed lost a path, touched_finish() goes
 * through every path of t->paths. */
struct touched;
struct touched *touched_new(const struct policy *policy, struct kiln_registry *reg);
/* What the build's walks already found out, used instead of asking again:
 * the sandbox's node memo (for lstat) and the oracle's owners memo. Both
 * must outlive w. */
void touched_share(struct touched *w, struct sandbox *sbx, struct owners_memo *owners);
/* touched_update() also works out, once no path is left to resolve, the
 * closures trace_unused_deps() will need (struct unused_ahead, below), one
 * a call; the end takes them from touched_rests(). 0, or -1 out of memory
 * (then none are). */
int touched_ahead(struct touched *w, enum registry_profile profile, const char *const *declared,
		  size_t n, const struct registry_pkgset *closure);
const struct unused_ahead *touched_rests(const struct touched *w);
size_t touched_update(struct touched *w, const struct tracelog *t, size_t max);
/* How many paths touched_update() has left: 0 after a registry error. */
size_t touched_left(const struct touched *w, const struct tracelog *t);
int touched_finish(struct touched *w, const struct tracelog *t, struct registry_pkgset *out,
		   char *err, size_t errlen);
void touched_free(struct touched *w);

/* The closures without each declared name that trace_unused_deps needs
 * (those of the names the build did not use directly), worked out while
 * the build runs: unused_ahead_update() works out the next one whose name
 * the packages touched so far do not use (one closure a call; returns
 * whether names are left), as the server waits for messages; the end takes
 * those it finds in `ahead` (trace_unused_deps) and works out the rest. */
struct unused_ahead {
	size_t n, next;
	bool failed;
	bool *known;                  /* by declared index */
	struct registry_pkgset *rest; /* the closure without that name */
};
int unused_ahead_init(struct unused_ahead *a, size_t n);
bool unused_ahead_update(struct unused_ahead *a, struct kiln_registry *reg,
			 enum registry_profile profile, const char *const *declared,
			 const struct registry_pkgset *closure, const struct registry_pkgset *touched);
bool unused_ahead_pending(const struct unused_ahead *a);
void unused_ahead_free(struct unused_ahead *a);

/* Of the `n` declared names (as the closure was computed from them, in that
 * order, under `profile`, giving `closure`), those unused by the build that
 * touched `touched`: indexes into `declared` written to `unused` (room for
 * n), their number returned, -1 on a registry error. `ahead` (or NULL):
 * the closures already worked out. `build-essential` is
 * implied by Debian policy and never listed. */
long trace_unused_deps(struct kiln_registry *reg, enum registry_profile profile,
		       const char *const *declared, size_t n, const struct registry_pkgset *closure,
		       const struct registry_pkgset *touched, const struct unused_ahead *ahead,
		       size_t *unused, char *err, size_t errlen);

#endif
