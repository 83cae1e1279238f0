/* Directories the maintainer scripts of Debian 12 packages make in the trees
 * the chroot profile shows only package files of (/usr/local): a clean
 * chroot with such a package installed has them, empty, though no package
 * lists them (docs/profiles.md, "Directories maintainer scripts make"). */
#ifndef KILN_TRACE_SERVICE_POSTINST_DIRS_H
#define KILN_TRACE_SERVICE_POSTINST_DIRS_H

#include <stddef.h>

#include "registry/registry.h"
#include "trace/service/policy.h"

#define POSTINST_DIRS_MAX 8 /* directories one package makes, at most */

/* The directories package `name`'s postinst makes: written to out[0..n) as
 * absolute normalised paths (into `buf`, `cap` bytes), their number
 * returned; 0 for a package that makes none (or too little room). */
size_t postinst_dirs_of(const char *name, const char *out[POSTINST_DIRS_MAX], char *buf,
			size_t cap);

/* Adds those of every package of `closure` to p->skeleton. Returns 0, -1
 * with `err` out of memory. */
int postinst_dirs_add(struct policy *p, struct kiln_registry *reg,
		      const struct registry_pkgset *closure, char *err, size_t errlen);

#endif
