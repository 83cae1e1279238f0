#include "registry/strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ull;
	}
	return h;
}

void strmap_init(struct strmap *m)
{
	memset(m, 0, sizeof *m);
}

void strmap_free(struct strmap *m)
{
	for (size_t i = 0; i < m->cap; i++) {
		free(m->keys[i]);
		free(m->vals[i]);
	}
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof *m);
}

static size_t find_slot(char **keys, size_t cap, const char *key)
{
	size_t i = hash_str(key) & (cap - 1);
	while (keys[i] && strcmp(keys[i], key))
		i = (i + 1) & (cap - 1);
	return i;
}

const char *strmap_get(const struct strmap *m, const char *key)
{
	if (!m->cap)
		return NULL;
	size_t i = find_slot(m->keys, m->cap, key);
	return m->keys[i] ? m->vals[i] : NULL;
}

static int grow(struct strmap *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 1024;
	char **nk = calloc(ncap, sizeof *nk), **nv = calloc(ncap, sizeof *nv);
	if (!nk || !nv) {
		free(nk);
		free(nv);
		return -1;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->keys[i])
			continue;
		size_t j = find_slot(nk, ncap, m->keys[i]);
		nk[j] = m->keys[i];
		nv[j] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = nk;
	m->vals = nv;
	m->cap = ncap;
	return 0;
}

const char *strmap_put(struct strmap *m, const char *key, const char *val)
{
	if ((m->n + 1) * 2 > m->cap && grow(m))
		return NULL;
	size_t i = find_slot(m->keys, m->cap, key);
	char *v = strdup(val);
	if (!v)
		return NULL;
	if (m->keys[i]) {
		free(m->vals[i]);
	} else {
		if (!(m->keys[i] = strdup(key))) {
			free(v);
			return NULL;
		}
		m->n++;
	}
	m->vals[i] = v;
	return v;
}
