/* After the walk: DIE-offset references become type indices, sizes of
 * typedefs, qualifiers and arrays are computed, and old-style bitfield
 * positions (DW_AT_bit_offset, counted from the storage unit's MSB) become bit
 * offsets from the start of the struct. */
#include <dwarf.h>
#include <stdlib.h>

#include "meta/build.h"

static int cmp_order(const void *a, const void *b, void *keys)
{
	const uint64_t *k = keys;
	uint64_t x = k[*(const uint32_t *)a], y = k[*(const uint32_t *)b];
	return x < y ? -1 : x > y;
}

/* Makes type_die searchable: already sorted in the common case, else a
 * sorted permutation. */
static int index_types(struct meta_builder *b)
{
	size_t n = b->m->ntypes;
	for (size_t i = 1; i < n; i++) {
		if (b->type_die[i - 1] < b->type_die[i])
			continue;
		b->type_order = malloc(n * sizeof *b->type_order);
		if (!b->type_order)
			return -1;
		for (size_t k = 0; k < n; k++)
			b->type_order[k] = (uint32_t)k;
		qsort_r(b->type_order, n, sizeof *b->type_order, cmp_order, b->type_die);
		return 0;
	}
	return 0;
}

/* Binary search for OFF among types [lo, hi) (positions in sorted order). */
static uint32_t search(const struct meta_builder *b, uint64_t off, size_t lo, size_t hi)
{
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint32_t idx = b->type_order ? b->type_order[mid] : (uint32_t)mid;
		uint64_t k = b->type_die[idx];
		if (k == off)
			return idx;
		if (k < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return META_NONE;
}

/* Looks in the referring CU's own types [lo, hi) first (most references stay
 * inside their unit, and that slice is small and cache-hot), then everywhere. */
static uint32_t lookup(const struct meta_builder *b, uint64_t off, size_t lo, size_t hi)
{
	if (!b->type_order && lo < hi && b->type_die[lo] <= off && off <= b->type_die[hi - 1])
		return search(b, off, lo, hi);
	return search(b, off, 0, b->m->ntypes);
}

static uint32_t resolve(struct meta_builder *b, uint64_t off, const char *what, size_t lo, size_t hi)
{
	if (!off)
		return META_NONE;
	/* through skeleton DIEs to the type unit's type (a chain is corrupt input) */
	for (int hops = 0; b->nalias && hops < 4; hops++) {
		uint32_t a = meta_u64map_get(&b->aliases, off);
		if (a == META_NONE)
			break;
		off = b->alias_target[a];
		lo = hi = 0;
	}
	uint32_t t = lookup(b, off, lo, hi);
	if (t == META_NONE)
		meta_warn(b->m, "%s: %s refers to DIE 0x%llx, which is not a type; treated as void",
			  b->m->path, what, (unsigned long long)((off - 1) & ~((uint64_t)1 << 62)));
	return t;
}

/* Size of type I, following typedefs/qualifiers and multiplying array dims.
 * DEPTH guards against reference cycles in corrupt input. */
static int size_of(struct meta_model *m, uint32_t i, int depth, uint64_t *out)
{
	if (i == META_NONE || depth > 64)
		return 0;
	struct meta_type *t = &m->types[i];
	if (t->flags & META_T_HAS_SIZE) {
		*out = t->size;
		return 1;
	}
	uint64_t s;
	switch (t->kind) {
	case META_POINTER: case META_REFERENCE: case META_RVALUE_REFERENCE:
		s = m->elf_class == ELFCLASS32 ? 4 : 8;
		break;
	case META_TYPEDEF: case META_CONST: case META_VOLATILE: case META_RESTRICT:
	case META_ATOMIC:
		if (!size_of(m, t->ref, depth + 1, &s))
			return 0;
		break;
	case META_ARRAY:
		if (!size_of(m, t->ref, depth + 1, &s))
			return 0;
		for (uint32_t k = 0; k < t->nmembers; k++)
			s *= m->members[t->first + k].value;
		break;
	default:
		return 0;
	}
	t->size = s;
	t->flags |= META_T_HAS_SIZE;
	*out = s;
	return 1;
}

/* An enum is unsigned when its underlying type (DW_AT_type, through
 * typedefs and qualifiers) is an unsigned base type; without one (DWARF 2)
 * its values are read as signed. */
static int unsigned_enum(const struct meta_model *m, const struct meta_type *t)
{
	uint32_t r = t->ref;
	for (int depth = 0; r != META_NONE && depth < 16; depth++) {
		const struct meta_type *u = &m->types[r];
		if (u->kind == META_BASE)
			return u->encoding == DW_ATE_unsigned || u->encoding == DW_ATE_unsigned_char ||
			       u->encoding == DW_ATE_boolean || u->encoding == DW_ATE_UTF;
		if (u->kind != META_TYPEDEF && u->kind != META_CONST && u->kind != META_VOLATILE)
			return 0;
		r = u->ref;
	}
	return 0;
}

int meta_resolve_types(struct meta_builder *b)
{
	struct meta_model *m = b->m;
	if (index_types(b)) {
		meta_set_err(b->err, "%s: out of memory", m->path);
		return -1;
	}
	for (size_t c = 0; c < m->ncus; c++) {
		const struct meta_cu *cu = &m->cus[c], *next = c + 1 < m->ncus ? cu + 1 : NULL;
		size_t lo = cu->first_type, hi = next ? next->first_type : m->ntypes;
		for (size_t i = lo; i < hi; i++) {
			struct meta_type *t = &m->types[i];
			t->ref = resolve(b, b->type_ref_off[i], "a type", lo, hi);
			if (t->kind == META_ENUM || t->kind == META_ARRAY)
				continue;
			for (uint32_t k = 0; k < t->nmembers; k++)
				m->members[t->first + k].type =
					resolve(b, b->member_ref_off[t->first + k], "a member", lo, hi);
		}
		size_t vend = next ? next->first_var : m->nvars;
		for (size_t i = cu->first_var; i < vend; i++)
			m->vars[i].type = resolve(b, b->var_ref_off[i], "a variable", lo, hi);
		size_t gend = next ? next->first_global : m->nglobals;
		for (size_t i = cu->first_global; i < gend; i++)
			m->globals[i].type = resolve(b, b->global_ref_off[i], "a variable", lo, hi);
	}
	for (size_t i = 0; i < m->ntypes; i++) {
		uint64_t s;
		size_of(m, (uint32_t)i, 0, &s);
		if (m->types[i].kind == META_ENUM && unsigned_enum(m, &m->types[i]))
			m->types[i].flags |= META_T_UNSIGNED;
	}
	for (size_t i = 0; i < b->nbitfix; i++) {
		struct meta_bitfix f = b->bitfix[i];
		struct meta_member *mm = &m->members[f.member];
		uint64_t storage = f.storage;
		if (!storage && !size_of(m, mm->type, 0, &storage))
			continue;
		/* Little-endian: DW_AT_bit_offset counts from the MSB of the unit. */
		int64_t from_lsb = (int64_t)storage * 8 - f.bit_offset - mm->bit_size;
		/* (the field may reach past the storage unit: clang describes an
		 * _Atomic member padded past its type's size that way) */
		if (from_lsb < 0) {
			meta_warn(m, "%s: member '%s' has a bit offset outside its storage unit",
				  m->path, mm->name ? mm->name : "");
			continue;
		}
		mm->value += (uint64_t)from_lsb;
	}
	return 0;
}
