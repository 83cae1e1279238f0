/* Where the virtual bases of a C++ class sit in a complete object of it.
 *
 * DWARF gives a virtual base no offset, only the vtable entry to read it from
 * at run time (its place depends on the most-derived type). When the class
 * itself is the most-derived type, the Itanium C++ ABI (2.4, "Allocation of
 * Members") fixes it: after the non-virtual part, each virtual base in
 * inheritance graph order (depth-first, left to right, each once) goes at the
 * data size so far rounded up to its alignment, except a nearly empty one
 * chosen as a primary base (it shares the address of the class whose primary
 * base it is) and an empty one (at offset 0). The result is checked against
 * the class's sizeof from DWARF; when they disagree (an alignment the DWARF
 * does not say, an empty-base conflict) no offsets are given. */
#include <dwarf.h>
#include <string.h>

#include "meta/tools/tool.h"

#define MAX_DEPTH 32

/* The definition behind T: through typedefs and qualifiers, and from a
 * declaration to the one definition of its name. */
static uint32_t def(const struct meta_model *m, uint32_t t)
{
	for (int i = 0; t != META_NONE && i < 16; i++) {
		uint8_t k = m->types[t].kind;
		if (k != META_TYPEDEF && k != META_CONST && k != META_VOLATILE)
			break;
		t = m->types[t].ref;
	}
	if (t == META_NONE)
		return t;
	const struct meta_class *c = &m->classes[m->classes[m->types[t].cls].target];
	return c->rep;
}

static int is_aggregate(const struct meta_model *m, uint32_t t)
{
	uint8_t k = m->types[t].kind;
	return k == META_STRUCT || k == META_UNION || k == META_CLASS;
}

static const struct meta_member *member(const struct meta_model *m, uint32_t t, uint32_t k)
{
	return &m->members[m->types[t].first + k];
}

static int is_vptr(const struct meta_member *mm)
{
	return mm->name && !strncmp(mm->name, "_vptr", 5);
}

static uint64_t align_of(const struct meta_model *m, uint32_t t, int depth);

/* Whether T has a vtable pointer: its own, a base's, or virtual bases. */
static int dynamic(const struct meta_model *m, uint32_t t, int depth)
{
	if (t == META_NONE || depth > MAX_DEPTH || !is_aggregate(m, t))
		return 0;
	for (uint32_t k = 0; k < m->types[t].nmembers; k++) {
		const struct meta_member *mm = member(m, t, k);
		if (is_vptr(mm) || mm->is_virtual || (mm->is_base && dynamic(m, def(m, mm->type), depth + 1)))
			return 1;
	}
	return 0;
}

static uint64_t size_of(const struct meta_model *m, uint32_t t)
{
	return t != META_NONE && (m->types[t].flags & META_T_HAS_SIZE) ? m->types[t].size : 0;
}

/* The non-virtual part of T: its data size (without tail padding: dsize in
 * the ABI) and alignment. */
static void nv_part(const struct meta_model *m, uint32_t t, int depth, uint64_t *dsize, uint64_t *align)
{
	*dsize = 0;
	*align = 1;
	if (t == META_NONE || depth > MAX_DEPTH || !is_aggregate(m, t))
		return;
	for (uint32_t k = 0; k < m->types[t].nmembers; k++) {
		const struct meta_member *mm = member(m, t, k);
		if (mm->is_virtual)
			continue;
		uint64_t end, al;
		if (mm->is_base) {
			uint32_t b = def(m, mm->type);
			nv_part(m, b, depth + 1, &end, &al);
			end = end ? mm->value / 8 + end : 0;
		} else {
			uint32_t mt = def(m, mm->type);
			end = mm->bit_size ? (mm->value + mm->bit_size + 7) / 8 : mm->value / 8 + size_of(m, mt);
			al = align_of(m, mt, depth + 1);
		}
		if (end > *dsize)
			*dsize = end;
		if (al > *align)
			*align = al;
	}
	uint64_t ptr = m->elf_class == ELFCLASS32 ? 4 : 8;
	if (dynamic(m, t, depth)) {
		if (*dsize < ptr)
			*dsize = ptr;
		if (*align < ptr)
			*align = ptr;
	}
}

static uint64_t align_of(const struct meta_model *m, uint32_t t, int depth)
{
	t = def(m, t);
	if (t == META_NONE || depth > MAX_DEPTH)
		return 1;
	const struct meta_type *ty = &m->types[t];
	switch (ty->kind) {
	case META_BASE:
		return ty->encoding == DW_ATE_complex_float && ty->size > 1 ? ty->size / 2 : ty->size ? ty->size : 1;
	case META_ARRAY:
		return align_of(m, ty->ref, depth + 1);
	case META_STRUCT: case META_UNION: case META_CLASS: {
		uint64_t ds, al, best = 1;
		nv_part(m, t, depth, &ds, &al);
		best = al;
		/* virtual bases count in the alignment of the whole type */
		for (uint32_t k = 0; k < ty->nmembers; k++) {
			const struct meta_member *mm = member(m, t, k);
			if (mm->is_base) {
				uint64_t a = align_of(m, mm->type, depth + 1);
				if (a > best)
					best = a;
			}
		}
		return best;
	}
	default:
		return ty->size ? ty->size : 1;
	}
}

static int empty(const struct meta_model *m, uint32_t t)
{
	uint64_t ds, al;
	nv_part(m, t, 0, &ds, &al);
	return ds == 0 && !dynamic(m, t, 0);
}

/* Its primary base when that is a virtual base (nearly empty: nothing but a
 * vtable pointer), else META_NONE. VB lists T's virtual bases in inheritance
 * graph order. */
static uint32_t virtual_primary(const struct meta_model *m, uint32_t t, const uint32_t *vb, size_t n)
{
	for (uint32_t k = 0; k < m->types[t].nmembers; k++) {
		const struct meta_member *mm = member(m, t, k);
		if (mm->is_base && !mm->is_virtual && dynamic(m, def(m, mm->type), 0))
			return META_NONE; /* a non-virtual primary base */
	}
	uint64_t ptr = m->elf_class == ELFCLASS32 ? 4 : 8;
	for (size_t i = 0; i < n; i++) {
		uint64_t ds, al;
		nv_part(m, vb[i], 0, &ds, &al);
		if (dynamic(m, vb[i], 0) && ds == ptr)
			return vb[i];
	}
	return META_NONE;
}

struct walk {
	uint32_t v[META_MAX_VBASES];
	size_t n;
	int overflow;
};

static void push_unique(struct walk *w, uint32_t t)
{
	for (size_t i = 0; i < w->n; i++)
		if (w->v[i] == t)
			return;
	if (w->n == META_MAX_VBASES)
		w->overflow = 1;
	else
		w->v[w->n++] = t;
}

/* Virtual bases of T in inheritance graph order. */
static void collect(const struct meta_model *m, uint32_t t, int depth, struct walk *w)
{
	if (t == META_NONE || depth > MAX_DEPTH || !is_aggregate(m, t)) {
		w->overflow |= depth > MAX_DEPTH;
		return;
	}
	for (uint32_t k = 0; k < m->types[t].nmembers; k++) {
		const struct meta_member *mm = member(m, t, k);
		if (!mm->is_base)
			continue;
		uint32_t b = def(m, mm->type);
		if (mm->is_virtual)
			push_unique(w, b);
		collect(m, b, depth + 1, w);
	}
}

static int placed_at(const struct meta_vbase *out, size_t n, uint32_t t)
{
	for (size_t i = 0; i < n; i++)
		if (out[i].type == t)
			return (int)i;
	return -1;
}

/* The subobject X at OFF (and its non-virtual bases, recursively) brings its
 * primary virtual base, if any, to its own address. */
static void place_primaries(const struct meta_model *m, uint32_t x, uint64_t off, int depth,
			    struct meta_vbase *out, size_t *n)
{
	if (x == META_NONE || depth > MAX_DEPTH || !is_aggregate(m, x))
		return;
	struct walk w = { .n = 0 };
	collect(m, x, 0, &w);
	uint32_t p = virtual_primary(m, x, w.v, w.n);
	if (p != META_NONE && placed_at(out, *n, p) < 0 && *n < META_MAX_VBASES)
		out[(*n)++] = (struct meta_vbase){ p, off };
	for (uint32_t k = 0; k < m->types[x].nmembers; k++) {
		const struct meta_member *mm = member(m, x, k);
		if (mm->is_base && !mm->is_virtual)
			place_primaries(m, def(m, mm->type), off + mm->value / 8, depth + 1, out, n);
	}
}

int meta_complete_vbases(const struct meta_model *m, uint32_t t, struct meta_vbase *out)
{
	t = def(m, t);
	if (t == META_NONE || !is_aggregate(m, t) || !(m->types[t].flags & META_T_HAS_SIZE))
		return 0;
	struct walk w = { .n = 0 };
	collect(m, t, 0, &w);
	if (!w.n)
		return 0;
	if (w.overflow)
		return -1;
	uint64_t dsize, align;
	nv_part(m, t, 0, &dsize, &align);
	size_t n = 0;
	place_primaries(m, t, 0, 0, out, &n);
	for (size_t i = 0; i < w.n; i++) {
		uint32_t v = w.v[i];
		if (placed_at(out, n, v) >= 0)
			continue;
		uint64_t vds, val;
		nv_part(m, v, 0, &vds, &val);
		uint64_t off = 0;
		if (!empty(m, v)) {
			off = (dsize + val - 1) / val * val;
			dsize = off + vds;
		}
		if (val > align)
			align = val;
		out[n++] = (struct meta_vbase){ v, off };
		place_primaries(m, v, off, 0, out, &n);
	}
	/* in inheritance graph order, as collected */
	struct meta_vbase sorted[META_MAX_VBASES];
	for (size_t i = 0; i < w.n; i++) {
		int at = placed_at(out, n, w.v[i]);
		if (at < 0)
			return -1;
		sorted[i] = out[at];
	}
	memcpy(out, sorted, w.n * sizeof *out);
	uint64_t size = dsize ? (dsize + align - 1) / align * align : 1;
	return size == m->types[t].size ? (int)w.n : -1;
}
