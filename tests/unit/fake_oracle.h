/* A registry stand-in for sandbox unit tests: a node whose name starts with
 * "foreign" belongs to package "pkgx" ("foreign_y": "pkgy"), outside the
 * closure; everything else to a dependency. */
#ifndef KILN_TESTS_FAKE_ORACLE_H
#define KILN_TESTS_FAKE_ORACLE_H

#include <stddef.h>

int fake_owner_by_name(void *ctx, const char *path, char *pkg, size_t len);

#endif
