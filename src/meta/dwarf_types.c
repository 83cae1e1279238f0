/* Types from the walk: one meta_type per type DIE, its members (or
 * enumerators, parameters, array dimensions) contiguous in model->members,
 * references kept as DIE offsets until meta_resolve_types. */
#include <stdlib.h>

#include "meta/dwarf_walk.h"

int meta_kind_of_tag(int tag)
{
	switch (tag) {
	case DW_TAG_base_type: return META_BASE;
	case DW_TAG_pointer_type: return META_POINTER;
	case DW_TAG_structure_type: return META_STRUCT;
	case DW_TAG_union_type: return META_UNION;
	case DW_TAG_class_type: return META_CLASS;
	case DW_TAG_enumeration_type: return META_ENUM;
	case DW_TAG_array_type: return META_ARRAY;
	case DW_TAG_typedef: return META_TYPEDEF;
	case DW_TAG_subroutine_type: return META_FUNCTION;
	case DW_TAG_const_type: return META_CONST;
	case DW_TAG_volatile_type: return META_VOLATILE;
	case DW_TAG_restrict_type: return META_RESTRICT;
	case DW_TAG_atomic_type: return META_ATOMIC;
	case DW_TAG_reference_type: return META_REFERENCE;
	case DW_TAG_rvalue_reference_type: return META_RVALUE_REFERENCE;
	case DW_TAG_ptr_to_member_type: return META_PTR_TO_MEMBER;
	case DW_TAG_unspecified_type: return META_UNSPECIFIED;
	/* Types of other languages we do not model: kept as opaque entries so
	 * that references to them still resolve. */
	case DW_TAG_string_type: case DW_TAG_set_type: case DW_TAG_subrange_type:
	case DW_TAG_file_type: case DW_TAG_interface_type: case DW_TAG_packed_type:
	case DW_TAG_shared_type: case DW_TAG_immutable_type: case DW_TAG_coarray_type:
	case DW_TAG_dynamic_type: case DW_TAG_generic_subrange:
		return META_KIND_COUNT;
	default: return -1;
	}
}

/* Pending members of the type being built, made contiguous when it ends. */
struct pending {
	struct meta_member *v;
	uint64_t *refs;
	struct meta_bitfix *fix;   /* bit_offset fixups, member = local index */
	size_t n, cap, capr, nfix, capf;
	/* enumerators: one was DW_FORM_sdata; one (not sdata) has bit 63 set */
	unsigned enum_sdata : 1, enum_high : 1;
};

static int pend(struct pending *p, struct meta_member mm, uint64_t ref)
{
	if (meta_grow((void **)&p->v, &p->cap, p->n + 1, sizeof *p->v) ||
	    meta_grow((void **)&p->refs, &p->capr, p->n + 1, sizeof *p->refs))
		return -1;
	p->v[p->n] = mm;
	p->refs[p->n++] = ref;
	return 0;
}


/* One DW_TAG_member / enumerator / formal_parameter / subrange child. */
static int member_of(struct meta_builder *b, Dwarf_Die *c, int ptag, struct pending *p)
{
	int tag = dwarf_tag(c);
	struct attrs t;
	struct meta_member mm = { 0 };
	switch (ptag) {
	case DW_TAG_structure_type: case DW_TAG_union_type: case DW_TAG_class_type:
		if (tag == DW_TAG_inheritance) {
			meta_read_attrs(c, &t);
			mm.is_base = 1;
			if (t.is_virtual || t.has_vtable_offset) {
				/* no fixed offset: it is read from the vtable */
				mm.is_virtual = 1;
				mm.value = (uint64_t)(t.has_vtable_offset ? t.vtable_offset : 0);
				if (!t.has_vtable_offset)
					meta_warn(b->m, "%s: DIE 0x%llx: virtual base class whose vtable entry we do not understand",
						  b->m->path, (unsigned long long)dwarf_dieoffset(c));
				return pend(p, mm, t.has_type ? meta_ref_key(b, &t.type) : 0) ? -1 : 0;
			}
			mm.value = (t.has_member_loc ? t.member_loc : 0) * 8;
			if (t.bad)
				meta_warn(b->m, "%s: DIE 0x%llx: base class at a computed offset we do not understand; 0 assumed",
					  b->m->path, (unsigned long long)dwarf_dieoffset(c));
			return pend(p, mm, t.has_type ? meta_ref_key(b, &t.type) : 0) ? -1 : 0;
		}
		if (tag != DW_TAG_member)
			return 1;
		meta_read_attrs(c, &t);
		if (t.has_spec || t.declaration)
			return 0; /* C++ static data member: not part of the layout */
		mm.name = t.name;
		mm.bit_size = t.has_bit_size ? (uint32_t)t.bit_size & 0xffffff : 0;
		if (t.has_data_bit_offset) {
			mm.value = t.data_bit_offset;
		} else {
			mm.value = (t.has_member_loc ? t.member_loc : 0) * 8;
			if (t.has_bit_offset && t.has_bit_size) {
				struct meta_bitfix f = { (uint32_t)p->n, (int32_t)t.bit_offset,
							 t.has_byte_size ? (uint32_t)t.byte_size : 0 };
				if (meta_grow((void **)&p->fix, &p->capf, p->nfix + 1, sizeof *p->fix))
					return -1;
				p->fix[p->nfix++] = f;
			}
		}
		if (t.bad)
			meta_warn(b->m, "%s: DIE 0x%llx: member '%s' has a location we do not understand; offset 0 assumed",
				  b->m->path, (unsigned long long)dwarf_dieoffset(c), t.name ? t.name : "");
		return pend(p, mm, t.has_type ? meta_ref_key(b, &t.type) : 0) ? -1 : 0;
	case DW_TAG_enumeration_type:
		if (tag != DW_TAG_enumerator)
			return 1;
		meta_read_attrs(c, &t);
		mm.name = t.name;
		mm.type = META_NONE;
		mm.value = t.const_value;
		p->enum_sdata |= t.const_signed;
		p->enum_high |= !t.const_signed && (t.const_value >> 63);
		return pend(p, mm, 0) ? -1 : 0;
	case DW_TAG_subroutine_type:
		if (tag != DW_TAG_formal_parameter)
			return 1;
		meta_read_attrs(c, &t);
		return pend(p, mm, t.has_type ? meta_ref_key(b, &t.type) : 0) ? -1 : 0;
	case DW_TAG_array_type:
		if (tag != DW_TAG_subrange_type && tag != DW_TAG_enumeration_type)
			return 1;
		meta_read_attrs(c, &t);
		if (t.has_count)
			mm.value = t.count;
		else if (t.has_upper)
			mm.value = t.upper_bound - (Dwarf_Word)(t.has_lower ? t.lower_bound : 0) + 1;
		else
			mm.value = 0; /* flexible or variable-length */
		return pend(p, mm, 0) ? -1 : 0;
	default:
		return 1;
	}
}

int meta_add_type(struct meta_builder *b, Dwarf_Die *die, int tag, const struct attrs *t,
		  struct walk_ctx ctx)
{
	struct meta_model *m = b->m;
	if (ctx.depth > META_MAX_DEPTH) {
		meta_warn(m, "%s: DIE 0x%llx: types nested deeper than %d; subtree skipped", m->path,
			  (unsigned long long)dwarf_dieoffset(die), META_MAX_DEPTH);
		return 0;
	}
	if (t->has_signature) {
		/* A skeleton of a type described in a type unit: it is that type. */
		uint64_t target = meta_ref_key(b, (Dwarf_Attribute *)&t->signature);
		if (target && (meta_u64map_put(&b->aliases, meta_die_key(b, die), (uint32_t)b->nalias) ||
			       META_PUSH(b->alias_target, b->nalias, b->cap_alias, target)))
			return meta_walk_oom(b);
		if (target)
			return 0;
	}
	int kind = meta_kind_of_tag(tag);
	struct meta_type ty = { .name = t->name, .ref = META_NONE, .kind = (uint8_t)kind };
	if (kind == META_KIND_COUNT) {
		meta_warn(m, "%s: DIE 0x%llx: type tag 0x%x is not modelled; kept as an opaque type",
			  m->path, (unsigned long long)dwarf_dieoffset(die), tag);
		ty.kind = META_UNSPECIFIED;
	}
	if (t->has_byte_size) {
		ty.size = t->byte_size;
		ty.flags |= META_T_HAS_SIZE;
	}
	if (t->declaration)
		ty.flags |= META_T_DECLARATION;
	if (tag == DW_TAG_base_type)
		ty.encoding = (uint16_t)t->encoding;
	uint32_t idx = (uint32_t)m->ntypes;
	size_t cap = b->cap_types;
	if (META_PUSH(m->types, m->ntypes, b->cap_types, ty))
		return meta_walk_oom(b);
	if (cap != b->cap_types || !b->type_ref_off) {
		/* type_ref_off grows with types: same capacity. */
		uint64_t *r = realloc(b->type_ref_off, b->cap_types * sizeof *r);
		if (!r)
			return meta_walk_oom(b);
		b->type_ref_off = r;
		r = realloc(b->type_die, b->cap_types * sizeof *r);
		if (!r)
			return meta_walk_oom(b);
		b->type_die = r;
	}
	b->type_die[idx] = meta_die_key(b, die);
	uint64_t tref = t->has_type ? meta_ref_key(b, (Dwarf_Attribute *)&t->type) : 0;
	b->type_ref_off[idx] = tref;

	if (!dwarf_haschildren(die))
		return 0;
	struct pending p = { 0 };
	Dwarf_Die c;
	int rc = dwarf_child(die, &c);
	int has_varargs = 0;
	struct walk_ctx inner = ctx;
	inner.depth++;
	while (rc == 0) {
		int r = member_of(b, &c, tag, &p);
		if (r < 0)
			goto fail;
		if (r > 0) {
			int ctag = dwarf_tag(&c);
			if (ctag == DW_TAG_unspecified_parameters) {
				has_varargs = 1;
			} else if (meta_kind_of_tag(ctag) >= 0 || ctag == DW_TAG_subprogram ||
				   ctag == DW_TAG_variable) {
				/* Nested types (C++ scopes, anonymous members). Member
				 * functions and static data members are not layout. */
				if (meta_kind_of_tag(ctag) >= 0) {
					struct attrs ct;
					meta_read_attrs(&c, &ct);
					if (meta_add_type(b, &c, ctag, &ct, inner))
						goto fail;
				}
			}
		}
		rc = meta_next_sibling(&c);
	}
	if (rc < 0)
		meta_warn(m, "%s: DIE 0x%llx: corrupt children list: %s", m->path,
			  (unsigned long long)dwarf_dieoffset(die), dwarf_errmsg(-1));
	struct meta_type *tp = &m->types[idx];
	if (has_varargs)
		tp->flags |= META_T_VARARGS;
	/* An enum without DW_AT_type (DWARF 2, -gstrict-dwarf) says its
	 * signedness only through its enumerators' forms: a value with bit 63
	 * set that is not DW_FORM_sdata (clang: udata, GCC: data8 for an
	 * unsigned type, sdata for a signed one) is unsigned. */
	if (tag == DW_TAG_enumeration_type && !t->has_type && p.enum_high && !p.enum_sdata)
		tp->flags |= META_T_UNSIGNED;
	tp->first = (uint32_t)m->nmembers;
	tp->nmembers = (uint32_t)p.n;
	size_t need = m->nmembers + p.n;
	size_t capr = b->cap_members;
	if (meta_grow((void **)&m->members, &b->cap_members, need, sizeof *m->members))
		goto fail;
	if (capr != b->cap_members || !b->member_ref_off) {
		uint64_t *r = realloc(b->member_ref_off, b->cap_members * sizeof *r);
		if (!r)
			goto fail;
		b->member_ref_off = r;
	}
	for (size_t i = 0; i < p.nfix; i++) {
		struct meta_bitfix f = p.fix[i];
		f.member += (uint32_t)m->nmembers;
		if (META_PUSH(b->bitfix, b->nbitfix, b->cap_bitfix, f))
			goto fail;
	}
	for (size_t i = 0; i < p.n; i++) {
		p.v[i].type = META_NONE;
		m->members[m->nmembers] = p.v[i];
		b->member_ref_off[m->nmembers++] = p.refs[i];
	}
	free(p.v);
	free(p.refs);
	free(p.fix);
	return 0;
fail:
	free(p.v);
	free(p.refs);
	free(p.fix);
	return meta_walk_oom(b);
}
