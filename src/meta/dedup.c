/* Deduplication of types by structure, across compile units.
 *
 * Two types are the same when they have the same shallow content (kind, name,
 * size, member names/offsets/bitfields, enumerator values, ...) and their
 * referenced types are the same, recursively; type graphs have cycles
 * (struct list { struct list *next; }), so "recursively" means the coarsest
 * stable partition (bisimulation), computed by refinement: each round hashes
 * a type together with the classes of the types it refers to, until the
 * number of classes stops growing.
 *
 * References to named structs, unions and classes count by kind and name only
 * (C's rule: one tag names one type in a program), so the copy of `struct
 * foo` in a CU where a member's `struct bar` is only declared is the same
 * type as the copy in a CU where `struct bar` is defined. The layout of every
 * struct itself (members, offsets, sizes, bitfields) is always compared: two
 * different `struct foo`s stay two. A declaration then points at the one
 * definition of its name, when there is exactly one (meta_class.target).
 *
 * Each class then gets a structural id that depends on the type alone, not on
 * the binary: a hash of the type unfolded to a fixed depth over the classes
 * (deeper only for the rare classes that depth does not tell apart). */
#include <stdlib.h>
#include <string.h>

#include "meta/build.h"

#define ID_DEPTH 8

static uint64_t shallow(const struct meta_model *m, const struct meta_type *t)
{
	uint64_t h = meta_mix(t->kind, t->flags & (META_T_DECLARATION | META_T_VARARGS));
	h = meta_mix(h, meta_strhash(t->name));
	/* A typedef's or qualifier's size is its target's, which is unknown when
	 * the target is only declared in this CU: not part of its identity. */
	int derived = t->kind == META_TYPEDEF || t->kind == META_CONST || t->kind == META_VOLATILE ||
		      t->kind == META_RESTRICT || t->kind == META_ATOMIC;
	h = meta_mix(h, (t->flags & META_T_HAS_SIZE) && !derived ? t->size + 1 : 0);
	h = meta_mix(h, t->encoding);
	h = meta_mix(h, t->nmembers);
	for (uint32_t k = 0; k < t->nmembers; k++) {
		const struct meta_member *mm = &m->members[t->first + k];
		h = meta_mix(h, meta_strhash(mm->name));
		h = meta_mix(h, mm->value);
		h = meta_mix(h, mm->bit_size | (uint64_t)mm->is_base << 32 | (uint64_t)mm->is_virtual << 33);
	}
	return h;
}

static int is_tagged(const struct meta_type *t)
{
	return t->name && (t->kind == META_STRUCT || t->kind == META_UNION || t->kind == META_CLASS);
}

/* What a reference to T contributes when T is a named aggregate (0 otherwise):
 * its kind and name, whatever its members. */
static uint64_t tag_hash(const struct meta_type *t)
{
	return is_tagged(t) ? meta_mix(meta_strhash(t->name), 0x7a9ull + t->kind) | 1 : 0;
}

/* Value of the edge to type C in a round over values V. */
static inline uint64_t edge(const uint64_t *tags, const uint64_t *v, uint32_t c)
{
	return c == META_NONE ? 1 : tags[c] ? tags[c] : v[c];
}

/* One refinement round over types: out[i] = H(in[i], in[children of i]). */
static void round_types(const struct meta_model *m, const uint64_t *tags, const uint64_t *in, uint64_t *out)
{
	for (size_t i = 0; i < m->ntypes; i++) {
		const struct meta_type *t = &m->types[i];
		uint64_t h = meta_mix(in[i], edge(tags, in, t->ref));
		for (uint32_t k = 0; k < t->nmembers; k++)
			h = meta_mix(h, edge(tags, in, m->members[t->first + k].type));
		out[i] = h;
	}
}

/* A set of 64-bit values sized once for N insertions, reused every round. */
struct vset {
	uint64_t *slots; /* value + 1 after mixing is never 0: 0 = empty */
	size_t mask;
};

static int vset_init(struct vset *s, size_t n)
{
	size_t cap = 1024;
	while (cap < 2 * n)
		cap *= 2;
	s->slots = malloc(cap * sizeof *s->slots);
	s->mask = cap - 1;
	return s->slots ? 0 : -1;
}

/* Number of distinct values in V[0..N). */
static size_t count_distinct(struct vset *s, const uint64_t *v, size_t n)
{
	memset(s->slots, 0, (s->mask + 1) * sizeof *s->slots);
	size_t distinct = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t k = v[i] | 1; /* never 0; halves the space, fine for counting */
		size_t j = (size_t)(k >> 7) & s->mask;
		while (s->slots[j] && s->slots[j] != k)
			j = (j + 1) & s->mask;
		if (!s->slots[j]) {
			s->slots[j] = k;
			distinct++;
		}
	}
	return distinct;
}

/* Number of distinct values; counts each value's occurrences into MAP. */
static int count_occurrences(const uint64_t *v, size_t n, struct meta_u64map *map, size_t *out)
{
	meta_u64map_free(map);
	for (size_t i = 0; i < n; i++) {
		uint32_t c = meta_u64map_get(map, v[i]);
		if (meta_u64map_put(map, v[i], c == META_NONE ? 1 : c + 1))
			return -1;
	}
	*out = map->len;
	return 0;
}

/* Gives every class its stable id (see the comment at the top). */
static int assign_ids(struct meta_model *m, const uint64_t *class_shallow, const uint64_t *tags,
		      struct meta_u64map *map)
{
	size_t n = m->nclasses;
	uint64_t *g = malloc(n * sizeof *g), *g2 = malloc(n * sizeof *g2);
	unsigned char *done = calloc(n, 1);
	if (!g || !g2 || !done) {
		free(g);
		free(g2);
		free(done);
		return -1;
	}
	memcpy(g, class_shallow, n * sizeof *g);
	size_t left = n, prev = 0;
	for (int round = 1; left; round++) {
		for (size_t c = 0; c < n; c++) {
			const struct meta_type *t = &m->types[m->classes[c].rep];
			uint64_t h = meta_mix(g[c], t->ref == META_NONE ? 1 : tags[t->ref] ? tags[t->ref]
										   : g[m->types[t->ref].cls]);
			for (uint32_t k = 0; k < t->nmembers; k++) {
				uint32_t mt = m->members[t->first + k].type;
				h = meta_mix(h, mt == META_NONE ? 1 : tags[mt] ? tags[mt] : g[m->types[mt].cls]);
			}
			g2[c] = h;
		}
		uint64_t *tmp = g;
		g = g2;
		g2 = tmp;
		if (round < ID_DEPTH)
			continue;
		size_t distinct;
		if (count_occurrences(g, n, map, &distinct))
			break;
		for (size_t c = 0; c < n; c++) {
			if (!done[c] && meta_u64map_get(map, g[c]) == 1) {
				m->classes[c].id = g[c];
				done[c] = 1;
				left--;
			}
		}
		if (left && distinct == prev) {
			/* Cannot happen for true classes; be safe on hash collisions. */
			for (size_t c = 0; c < n; c++)
				if (!done[c])
					m->classes[c].id = g[c] ^ (c + 1);
			left = 0;
		}
		prev = distinct;
	}
	free(g);
	free(g2);
	free(done);
	return 0;
}

/* Points each declaration class at the one definition class of its kind and
 * name, when there is exactly one. */
static int link_declarations(struct meta_model *m, const uint64_t *tags, struct meta_u64map *map)
{
	const uint32_t several = META_NONE - 1;
	meta_u64map_free(map);
	for (size_t c = 0; c < m->nclasses; c++) {
		uint32_t r = m->classes[c].rep;
		if (!tags[r] || (m->types[r].flags & META_T_DECLARATION))
			continue;
		uint32_t have = meta_u64map_get(map, tags[r]);
		if (meta_u64map_put(map, tags[r], have == META_NONE ? (uint32_t)c : several))
			return -1;
	}
	for (size_t c = 0; c < m->nclasses; c++) {
		uint32_t r = m->classes[c].rep;
		if (!tags[r] || !(m->types[r].flags & META_T_DECLARATION))
			continue;
		uint32_t def = meta_u64map_get(map, tags[r]);
		if (def != META_NONE && def != several)
			m->classes[c].target = def;
	}
	return 0;
}

int meta_dedup_types(struct meta_model *m, struct meta_err *err)
{
	size_t n = m->ntypes;
	if (!n)
		return 0;
	uint64_t *h = malloc(n * sizeof *h), *h2 = malloc(n * sizeof *h2), *sh = NULL;
	uint64_t *tags = malloc(n * sizeof *tags);
	struct meta_u64map map = { 0 };
	int rc = -1;
	if (!h || !h2 || !tags)
		goto out;
	for (size_t i = 0; i < n; i++)
		tags[i] = tag_hash(&m->types[i]);
	for (size_t i = 0; i < n; i++)
		h[i] = shallow(m, &m->types[i]);
	struct vset set;
	if (vset_init(&set, n))
		goto out;
	size_t distinct, prev = count_distinct(&set, h, n);
	for (;;) {
		round_types(m, tags, h, h2);
		uint64_t *tmp = h;
		h = h2;
		h2 = tmp;
		distinct = count_distinct(&set, h, n);
		if (distinct == prev)
			break;
		prev = distinct;
	}
	free(set.slots);
	/* h2 holds the previous round; same partition. Number classes in order
	 * of first appearance. */
	meta_u64map_free(&map);
	m->classes = malloc(distinct * sizeof *m->classes);
	sh = malloc(distinct * sizeof *sh);
	if (!m->classes || !sh)
		goto out;
	for (size_t i = 0; i < n; i++) {
		uint32_t c = meta_u64map_get(&map, h[i]);
		if (c == META_NONE) {
			c = (uint32_t)m->nclasses++;
			if (meta_u64map_put(&map, h[i], c))
				goto out;
			m->classes[c] = (struct meta_class){ .rep = (uint32_t)i, .target = c };
			sh[c] = shallow(m, &m->types[i]);
		}
		m->types[i].cls = c;
		m->classes[c].count++;
	}
	if (assign_ids(m, sh, tags, &map) || link_declarations(m, tags, &map))
		goto out;
	rc = 0;
out:
	if (rc)
		meta_set_err(err, "%s: out of memory while deduplicating types", m->path);
	meta_u64map_free(&map);
	free(h);
	free(h2);
	free(sh);
	free(tags);
	return rc;
}
