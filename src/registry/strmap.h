/* A string -> string hash map (open addressing) owning copies of its keys
 * and values. Used by the importers for caches and lookups. */
#ifndef KILN_REGISTRY_STRMAP_H
#define KILN_REGISTRY_STRMAP_H

#include <stddef.h>

struct strmap {
	char **keys;
	char **vals;
	size_t cap, n;
};

void strmap_init(struct strmap *m);
void strmap_free(struct strmap *m);
/* Value for key, or NULL. */
const char *strmap_get(const struct strmap *m, const char *key);
/* Inserts or replaces. Returns the stored value, or NULL on allocation failure. */
const char *strmap_put(struct strmap *m, const char *key, const char *val);

#endif
