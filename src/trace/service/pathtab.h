/* A hash table from path strings to pointers, for the trace service's memo
 * of visibility decisions and its access log (single-threaded use). */
#ifndef KILN_TRACE_SERVICE_PATHTAB_H
#define KILN_TRACE_SERVICE_PATHTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pathtab_slot {
	char *key;   /* NULL: empty slot */
	size_t len;
	uint64_t hash;
	void *val;
};

struct pathtab {
	struct pathtab_slot *slots;
	size_t cap, n;
};

/* The value slot of key (len bytes, need not be NUL-terminated), added with
 * *val == NULL if absent (*added tells). NULL when out of memory. */
void **pathtab_put(struct pathtab *t, const char *key, size_t len, bool *added);
/* The value of key, or NULL. */
void *pathtab_get(const struct pathtab *t, const char *key, size_t len);
/* Frees the table and its keys; calls freeval on each value if not NULL. */
void pathtab_free(struct pathtab *t, void (*freeval)(void *));

#endif
