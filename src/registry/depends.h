/* Parser for Debian relationship fields (Depends, Pre-Depends, Provides):
 * "a (>= 1.0) | b:any, c [amd64] <!nocheck>". */
#ifndef KILN_REGISTRY_DEPENDS_H
#define KILN_REGISTRY_DEPENDS_H

#include <stddef.h>

struct dep_atom {
	char name[128];
	char archq[32];    /* arch qualifier after ':' ("any", "amd64"), or "" */
	char version[96];  /* "(>= 1.0)" contents, e.g. ">= 1.0", or "" */
	int clause;        /* index of the comma-separated clause */
	int alt;           /* index among the clause's '|' alternatives */
};

/* Calls cb for each atom of `value`. Returns 0, cb's non-zero return, or -1
 * with a description of the syntax error in err. */
int deps_parse(const char *value, int (*cb)(const struct dep_atom *a, void *ctx), void *ctx,
	       char *err, size_t errlen);

#endif
