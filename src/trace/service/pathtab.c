/* Open addressing with linear probing, FNV-1a hashes, grown at 70% load. */
#include "trace/service/pathtab.h"

#include <stdlib.h>
#include <string.h>

static uint64_t hash_bytes(const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 1099511628211ull;
	}
	return h;
}

static struct pathtab_slot *find(const struct pathtab *t, const char *key, size_t len, uint64_t h)
{
	size_t mask = t->cap - 1;
	for (size_t i = h & mask;; i = (i + 1) & mask) {
		struct pathtab_slot *s = &t->slots[i];
		if (!s->key || (s->hash == h && s->len == len && !memcmp(s->key, key, len)))
			return s;
	}
}

static int grow(struct pathtab *t)
{
	size_t ncap = t->cap ? t->cap * 2 : 256;
	struct pathtab_slot *old = t->slots;
	size_t ocap = t->cap;
	t->slots = calloc(ncap, sizeof *t->slots);
	if (!t->slots) {
		t->slots = old;
		return -1;
	}
	t->cap = ncap;
	for (size_t i = 0; i < ocap; i++)
		if (old[i].key)
			*find(t, old[i].key, old[i].len, old[i].hash) = old[i];
	free(old);
	return 0;
}

void **pathtab_put(struct pathtab *t, const char *key, size_t len, bool *added)
{
	if ((t->n + 1) * 10 > t->cap * 7 && grow(t) < 0)
		return NULL;
	uint64_t h = hash_bytes(key, len);
	struct pathtab_slot *s = find(t, key, len, h);
	*added = false;
	if (!s->key) {
		char *k = malloc(len + 1);
		if (!k)
			return NULL;
		memcpy(k, key, len);
		k[len] = '\0';
		*s = (struct pathtab_slot){ .key = k, .len = len, .hash = h, .val = NULL };
		t->n++;
		*added = true;
	}
	return &s->val;
}

void *pathtab_get(const struct pathtab *t, const char *key, size_t len)
{
	if (!t->cap)
		return NULL;
	struct pathtab_slot *s = find(t, key, len, hash_bytes(key, len));
	return s->key ? s->val : NULL;
}

void pathtab_free(struct pathtab *t, void (*freeval)(void *))
{
	for (size_t i = 0; i < t->cap; i++)
		if (t->slots[i].key) {
			if (freeval)
				freeval(t->slots[i].val);
			free(t->slots[i].key);
		}
	free(t->slots);
	*t = (struct pathtab){ 0 };
}
