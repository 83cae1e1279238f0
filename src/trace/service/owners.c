#include "trace/service/owners.h"

#include <stdlib.h>
#include <string.h>

struct owners {
	size_t n;
	int64_t ids[];
};

int owners_memo_get(struct owners_memo *m, struct kiln_registry *reg, const char *path,
		    int64_t *ids, size_t cap)
{
	if (!m)
		return registry_owners(reg, path, ids, cap);
	size_t len = strlen(path);
	const struct owners *known = pathtab_get(&m->tab, path, len);
	if (known) {
		memcpy(ids, known->ids, (known->n < cap ? known->n : cap) * sizeof *ids);
		return (int)known->n;
	}
	int n = registry_owners(reg, path, ids, cap);
	if (n < 0 || m->tab.n >= m->max)
		return n;
	struct owners *o = malloc(sizeof *o + (size_t)n * sizeof o->ids[0]);
	if (!o)
		return n;
	o->n = (size_t)n;
	if ((size_t)n <= cap)
		memcpy(o->ids, ids, (size_t)n * sizeof *ids);
	else if (registry_owners(reg, path, o->ids, o->n) != n) {
		free(o); /* kept only whole */
		return n;
	}
	bool added;
	void **slot = pathtab_put(&m->tab, path, len, &added);
	if (!slot) {
		free(o);
		return n;
	}
	*slot = o;
	return n;
}

void owners_memo_free(struct owners_memo *m)
{
	if (m)
		pathtab_free(&m->tab, free);
}
