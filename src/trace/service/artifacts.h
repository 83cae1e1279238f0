/* Where a Debian package build puts its results: dpkg-buildpackage (and
 * debuild, dpkg-genchanges...) write the .deb, .buildinfo and .changes files
 * to the parent of the source tree. kiln trace makes exactly those names
 * writable there (docs/policy.md, "Package artifacts"). */
#ifndef KILN_TRACE_SERVICE_ARTIFACTS_H
#define KILN_TRACE_SERVICE_ARTIFACTS_H

#include <stddef.h>

#include "trace/service/policy.h"

/* The source tree is DIR when CONTROL (--deps-from-control, may be NULL)
 * is DIR/debian/control, else the current directory CWD when COMMAND is
 * dpkg-buildpackage or debuild and CWD/debian/control exists. Then the
 * parent of DIR gets the artifact rule for the Source and every Package
 * named in that control file. Nothing happens otherwise. Returns 0, or -1
 * with err set (an unreadable control file). */
int artifacts_add_to_policy(struct policy *p, const char *control, const char *command,
			    const char *cwd, char *err, size_t errlen);

#endif
