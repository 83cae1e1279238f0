/* The environment of a build under the clean-chroot profile: what sbuild
 * gives dpkg-buildpackage (docs/profiles.md, "Environment"). */
#ifndef KILN_TRACE_SERVICE_BUILDENV_H
#define KILN_TRACE_SERVICE_BUILDENV_H

#include <stddef.h>

/* Of `env` (NAME=VALUE strings), the variables sbuild's default filter
 * passes (dpkg's build-environment list, Dpkg::BuildInfo) and those named
 * in `keep`; then PATH, HOME, SHELL and LC_ALL as sbuild sets them, unless
 * named in `keep`. Returns a malloc'd NULL-terminated array (free the array
 * only: its strings are env's or static), or NULL when out of memory. */
char **buildenv_sbuild(char *const *env, const char *const *keep, size_t nkeep);

/* True if `name` is on sbuild's default filter. */
int buildenv_allowed(const char *name, size_t len);

#endif
