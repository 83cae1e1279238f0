/* The packages the registry says own a path (registry_owners), asked once a
 * run: the sandbox's oracle asks them of every managed node a walk visits,
 * and the packages the build touched are worked out later from the same
 * nodes (unused.c). The registry does not change while a build runs. */
#ifndef KILN_TRACE_SERVICE_OWNERS_H
#define KILN_TRACE_SERVICE_OWNERS_H

#include <stddef.h>
#include <stdint.h>

#include "registry/registry.h"
#include "trace/service/pathtab.h"

#define OWNERS_MEMO_MAX 262144 /* entries: the sandbox's node memo's bound */

struct owners_memo {
	struct pathtab tab;
	size_t max; /* entries kept at most; beyond, the registry is asked */
};

/* registry_owners(reg, path, ids, cap), answered from the memo when it was
 * asked before: how many packages own path (ids holds the first cap), or -1
 * on a registry error (not kept). m may be NULL: then the registry. */
int owners_memo_get(struct owners_memo *m, struct kiln_registry *reg, const char *path,
		    int64_t *ids, size_t cap);
void owners_memo_free(struct owners_memo *m);

#endif
