/* The single walk over every DIE of every unit: types (with members,
 * enumerators, parameters, array dimensions), functions with their PC ranges,
 * their locals and formals, and variables with a fixed address.
 *
 * References between DIEs are recorded as DIE offsets and resolved to model
 * indices once the walk is over (meta_resolve_types), because DWARF refers
 * forward as often as backward. */
#include <dwarf.h>
#include <stdlib.h>
#include <string.h>

#include "meta/build.h"
#include "meta/expr.h"

#define MAX_DEPTH 512

/* The attributes of one DIE we care about, read in one dwarf_getattrs pass. */
struct attrs {
	const char *name;
	Dwarf_Attribute type, location, frame_base, origin, spec;
	Dwarf_Word byte_size, bit_size, data_bit_offset, member_loc;
	Dwarf_Sword bit_offset; /* negative when a packed bitfield spills over */
	Dwarf_Word upper_bound, count, encoding, const_value;
	Dwarf_Sword lower_bound;
	Dwarf_Addr low_pc, high_pc;
	unsigned has_type : 1, has_location : 1, has_frame_base : 1, has_origin : 1,
		has_spec : 1, has_byte_size : 1, has_bit_size : 1, has_bit_offset : 1,
		has_data_bit_offset : 1, has_member_loc : 1, has_upper : 1, has_count : 1,
		has_lower : 1, has_const : 1, has_low : 1, has_high : 1, high_is_size : 1,
		has_ranges : 1, declaration : 1, external : 1, bad : 1;
};

static int udata(Dwarf_Attribute *a, Dwarf_Word *out)
{
	return dwarf_formudata(a, out) == 0;
}

static int collect(Dwarf_Attribute *a, void *arg)
{
	struct attrs *t = arg;
	bool flag;
	switch (dwarf_whatattr(a)) {
	case DW_AT_name:
		t->name = dwarf_formstring(a);
		break;
	case DW_AT_type:
		t->type = *a;
		t->has_type = 1;
		break;
	case DW_AT_byte_size:
		t->has_byte_size = udata(a, &t->byte_size);
		break;
	case DW_AT_bit_size:
		t->has_bit_size = udata(a, &t->bit_size);
		break;
	case DW_AT_bit_offset:
		t->has_bit_offset = dwarf_formsdata(a, &t->bit_offset) == 0;
		break;
	case DW_AT_data_bit_offset:
		t->has_data_bit_offset = udata(a, &t->data_bit_offset);
		break;
	case DW_AT_data_member_location:
		if (dwarf_whatform(a) == DW_FORM_exprloc || dwarf_whatform(a) == DW_FORM_block1) {
			Dwarf_Op *ops;
			size_t n;
			if (dwarf_getlocation(a, &ops, &n) == 0 && n == 1 &&
			    ops[0].atom == DW_OP_plus_uconst) {
				t->member_loc = ops[0].number;
				t->has_member_loc = 1;
			} else {
				t->bad = 1;
			}
		} else {
			t->has_member_loc = udata(a, &t->member_loc);
		}
		break;
	case DW_AT_upper_bound:
		t->has_upper = udata(a, &t->upper_bound);
		break;
	case DW_AT_count:
		t->has_count = udata(a, &t->count);
		break;
	case DW_AT_lower_bound:
		t->has_lower = dwarf_formsdata(a, &t->lower_bound) == 0;
		break;
	case DW_AT_encoding:
		udata(a, &t->encoding);
		break;
	case DW_AT_const_value:
		if (dwarf_whatform(a) == DW_FORM_sdata) {
			Dwarf_Sword v;
			t->has_const = dwarf_formsdata(a, &v) == 0;
			t->const_value = (Dwarf_Word)v;
		} else {
			t->has_const = udata(a, &t->const_value);
		}
		break;
	case DW_AT_location:
		t->location = *a;
		t->has_location = 1;
		break;
	case DW_AT_frame_base:
		t->frame_base = *a;
		t->has_frame_base = 1;
		break;
	case DW_AT_abstract_origin:
		t->origin = *a;
		t->has_origin = 1;
		break;
	case DW_AT_specification:
		t->spec = *a;
		t->has_spec = 1;
		break;
	case DW_AT_declaration:
		if (dwarf_formflag(a, &flag) == 0)
			t->declaration = flag;
		break;
	case DW_AT_external:
		if (dwarf_formflag(a, &flag) == 0)
			t->external = flag;
		break;
	case DW_AT_low_pc:
		t->has_low = dwarf_formaddr(a, &t->low_pc) == 0;
		break;
	case DW_AT_high_pc:
		if (dwarf_formaddr(a, &t->high_pc) == 0) {
			t->has_high = 1;
		} else if (udata(a, &t->high_pc)) {
			t->has_high = 1;
			t->high_is_size = 1;
		}
		break;
	case DW_AT_ranges:
		t->has_ranges = 1;
		break;
	default:
		break;
	}
	return DWARF_CB_OK;
}

static void read_attrs(Dwarf_Die *die, struct attrs *t)
{
	memset(t, 0, sizeof *t);
	if (dwarf_getattrs(die, collect, t, 0) < 0)
		t->bad = 1;
}

static uint64_t ref_offset(Dwarf_Attribute *a)
{
	Dwarf_Die d;
	if (!dwarf_formref_die(a, &d))
		return 0;
	return dwarf_dieoffset(&d) + 1; /* 0 stays "none" */
}

/* Name, type and external flag inherited through abstract_origin and
 * specification (two levels: a concrete out-of-line instance of an inline
 * function points at its abstract instance, which may point at a declaration). */
static void inherit(struct attrs *t)
{
	Dwarf_Attribute link;
	int have = t->has_origin ? (link = t->origin, 1) : t->has_spec ? (link = t->spec, 1) : 0;
	for (int level = 0; have && level < 2 && (!t->name || !t->has_type || !t->external); level++) {
		Dwarf_Die d;
		if (!dwarf_formref_die(&link, &d))
			return;
		struct attrs o;
		read_attrs(&d, &o);
		if (!t->name)
			t->name = o.name;
		if (!t->has_type && o.has_type) {
			t->type = o.type;
			t->has_type = 1;
		}
		if (o.external)
			t->external = 1;
		have = o.has_origin ? (link = o.origin, 1) : o.has_spec ? (link = o.spec, 1) : 0;
	}
}

static int oom(struct meta_builder *b)
{
	if (!b->oom)
		meta_set_err(b->err, "%s: out of memory while reading DWARF", b->m->path);
	b->oom = 1;
	return -1;
}

/* Pushes the PC ranges of DIE; returns how many (0 when it has none). */
static int push_ranges(struct meta_builder *b, Dwarf_Die *die, const struct attrs *t,
		       uint32_t *first, uint32_t *count, uint64_t *low, uint64_t *high)
{
	struct meta_model *m = b->m;
	*first = (uint32_t)m->nranges;
	*count = 0;
	*low = UINT64_MAX;
	*high = 0;
	if (t->has_low && t->has_high && !t->has_ranges) {
		struct meta_range r = { t->low_pc, t->high_is_size ? t->low_pc + t->high_pc : t->high_pc };
		if (r.hi <= r.lo)
			return 0;
		if (META_PUSH(m->ranges, m->nranges, b->cap_ranges, r))
			return oom(b);
		*count = 1;
		*low = r.lo;
		*high = r.hi;
		return 1;
	}
	if (!t->has_ranges && !t->has_low)
		return 0;
	Dwarf_Addr base, lo, hi;
	ptrdiff_t off = 0;
	while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
		if (hi <= lo)
			continue;
		struct meta_range r = { lo, hi };
		if (META_PUSH(m->ranges, m->nranges, b->cap_ranges, r))
			return oom(b);
		(*count)++;
		if (lo < *low)
			*low = lo;
		if (hi > *high)
			*high = hi;
	}
	return (int)*count;
}

static int kind_of_tag(int tag)
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

/* Functions nested in functions are walked after their parent, so that each
 * function's variables stay contiguous. */
struct deferred { Dwarf_Die *v; size_t n, cap; };

struct walk_ctx {
	uint32_t function;          /* META_NONE outside a function */
	uint32_t scope_first, scope_count;
	int depth;
	struct deferred *later;     /* nested functions of the current function */
};

static int walk_children(struct meta_builder *b, Dwarf_Die *parent, struct walk_ctx ctx);

/* Pending members of the type being built, made contiguous when it ends. */
struct pending {
	struct meta_member *v;
	uint64_t *refs;
	struct meta_bitfix *fix;   /* bit_offset fixups, member = local index */
	size_t n, cap, capr, nfix, capf;
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

static int add_type(struct meta_builder *b, Dwarf_Die *die, int tag, const struct attrs *t,
		    struct walk_ctx ctx);

/* One DW_TAG_member / enumerator / formal_parameter / subrange child. */
static int member_of(struct meta_builder *b, Dwarf_Die *c, int ptag, struct pending *p)
{
	int tag = dwarf_tag(c);
	struct attrs t;
	struct meta_member mm = { 0 };
	switch (ptag) {
	case DW_TAG_structure_type: case DW_TAG_union_type: case DW_TAG_class_type:
		if (tag == DW_TAG_inheritance) {
			read_attrs(c, &t);
			mm.is_base = 1;
			mm.value = (t.has_member_loc ? t.member_loc : 0) * 8;
			if (t.bad)
				meta_warn(b->m, "%s: DIE 0x%llx: base class at a computed (virtual) offset; 0 assumed",
					  b->m->path, (unsigned long long)dwarf_dieoffset(c));
			return pend(p, mm, t.has_type ? ref_offset(&t.type) : 0) ? -1 : 0;
		}
		if (tag != DW_TAG_member)
			return 1;
		read_attrs(c, &t);
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
		return pend(p, mm, t.has_type ? ref_offset(&t.type) : 0) ? -1 : 0;
	case DW_TAG_enumeration_type:
		if (tag != DW_TAG_enumerator)
			return 1;
		read_attrs(c, &t);
		mm.name = t.name;
		mm.type = META_NONE;
		mm.value = t.const_value;
		return pend(p, mm, 0) ? -1 : 0;
	case DW_TAG_subroutine_type:
		if (tag != DW_TAG_formal_parameter)
			return 1;
		read_attrs(c, &t);
		return pend(p, mm, t.has_type ? ref_offset(&t.type) : 0) ? -1 : 0;
	case DW_TAG_array_type:
		if (tag != DW_TAG_subrange_type && tag != DW_TAG_enumeration_type)
			return 1;
		read_attrs(c, &t);
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

static int add_type(struct meta_builder *b, Dwarf_Die *die, int tag, const struct attrs *t,
		    struct walk_ctx ctx)
{
	struct meta_model *m = b->m;
	int kind = kind_of_tag(tag);
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
		return oom(b);
	if (cap != b->cap_types || !b->type_ref_off) {
		/* type_ref_off grows with types: same capacity. */
		uint64_t *r = realloc(b->type_ref_off, b->cap_types * sizeof *r);
		if (!r)
			return oom(b);
		b->type_ref_off = r;
		r = realloc(b->type_die, b->cap_types * sizeof *r);
		if (!r)
			return oom(b);
		b->type_die = r;
	}
	b->type_die[idx] = dwarf_dieoffset(die) + 1;
	uint64_t tref = t->has_type ? ref_offset((Dwarf_Attribute *)&t->type) : 0;
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
			} else if (kind_of_tag(ctag) >= 0 || ctag == DW_TAG_subprogram ||
				   ctag == DW_TAG_variable) {
				/* Nested types (C++ scopes, anonymous members). Member
				 * functions and static data members are not layout. */
				if (kind_of_tag(ctag) >= 0) {
					struct attrs ct;
					read_attrs(&c, &ct);
					if (add_type(b, &c, ctag, &ct, inner))
						goto fail;
				}
			}
		}
		rc = dwarf_siblingof(&c, &c);
	}
	if (rc < 0)
		meta_warn(m, "%s: DIE 0x%llx: corrupt children list: %s", m->path,
			  (unsigned long long)dwarf_dieoffset(die), dwarf_errmsg(-1));
	struct meta_type *tp = &m->types[idx];
	if (has_varargs)
		tp->flags |= META_T_VARARGS;
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
	return oom(b);
}

static int add_global(struct meta_builder *b, const struct attrs *t, uint64_t addr)
{
	struct meta_model *m = b->m;
	struct meta_global g = { .name = t->name, .addr = addr, .type = META_NONE,
				 .external = t->external };
	size_t cap = b->cap_globals;
	if (META_PUSH(m->globals, m->nglobals, b->cap_globals, g))
		return oom(b);
	if (cap != b->cap_globals || !b->global_ref_off) {
		uint64_t *r = realloc(b->global_ref_off, b->cap_globals * sizeof *r);
		if (!r)
			return oom(b);
		b->global_ref_off = r;
	}
	b->global_ref_off[m->nglobals - 1] = t->has_type ? ref_offset((Dwarf_Attribute *)&t->type) : 0;
	return 0;
}

/* A single DW_OP_addr location: a variable at a fixed address. */
static int static_address(const struct meta_model *m, Dwarf_Attribute *loc, uint64_t *addr)
{
	struct meta_op op;
	if (m->addr_size) {
		if (!meta_expr_simple(loc, m->addr_size, &op) || op.atom != DW_OP_addr)
			return 0;
		*addr = op.addr;
		return 1;
	}
	Dwarf_Op *ops;
	size_t n;
	unsigned int form = dwarf_whatform(loc);
	if (form == DW_FORM_sec_offset || form == DW_FORM_loclistx || form == DW_FORM_data4 ||
	    form == DW_FORM_data8)
		return 0;
	if (dwarf_getlocation(loc, &ops, &n) != 0 || n != 1 || ops[0].atom != DW_OP_addr)
		return 0;
	*addr = ops[0].number;
	return 1;
}

static int add_var(struct meta_builder *b, Dwarf_Die *die, int tag, struct attrs *t,
		   struct walk_ctx ctx)
{
	(void)die;
	struct meta_model *m = b->m;
	if (t->declaration && !t->has_location)
		return 0;
	inherit(t);
	uint64_t addr = 0;
	int is_static = t->has_location && static_address(m, &t->location, &addr);
	if (is_static && t->name && add_global(b, t, addr))
		return -1;
	if (ctx.function == META_NONE)
		return 0;
	struct meta_var v = {
		.name = t->name, .type = META_NONE,
		.scope_first = ctx.scope_first, .scope_count = ctx.scope_count,
		.kind = tag == DW_TAG_formal_parameter ? META_VAR_FORMAL : META_VAR_LOCAL,
		.has_location = t->has_location, .is_static = (uint8_t)is_static,
		.static_addr = addr,
	};
	if (t->has_location)
		v.location = t->location;
	size_t cap = b->cap_vars;
	if (META_PUSH(m->vars, m->nvars, b->cap_vars, v))
		return oom(b);
	if (cap != b->cap_vars || !b->var_ref_off) {
		uint64_t *r = realloc(b->var_ref_off, b->cap_vars * sizeof *r);
		if (!r)
			return oom(b);
		b->var_ref_off = r;
	}
	b->var_ref_off[m->nvars - 1] = t->has_type ? ref_offset(&t->type) : 0;
	m->functions[ctx.function].var_count++;
	return 0;
}

static int walk_die(struct meta_builder *b, Dwarf_Die *die, struct walk_ctx ctx);

static int add_function(struct meta_builder *b, Dwarf_Die *die, struct attrs *t, struct walk_ctx ctx)
{
	struct meta_model *m = b->m;
	inherit(t);
	struct meta_function f = { .name = t->name, .external = t->external,
				   .has_frame_base = t->has_frame_base, .frame_base = t->frame_base };
	if (push_ranges(b, die, t, &f.range_first, &f.range_count, &f.low, &f.high) < 0)
		return -1;
	struct walk_ctx inner = { .function = META_NONE, .depth = ctx.depth + 1 };
	if (f.range_count) {
		f.var_first = (uint32_t)m->nvars;
		inner.function = (uint32_t)m->nfunctions;
		inner.scope_first = f.range_first;
		inner.scope_count = f.range_count;
		if (META_PUSH(m->functions, m->nfunctions, b->cap_functions, f))
			return oom(b);
	}
	if (!dwarf_haschildren(die))
		return 0;
	struct deferred later = { 0 };
	inner.later = &later;
	int rc = walk_children(b, die, inner);
	struct walk_ctx outer = { .function = META_NONE, .depth = ctx.depth };
	for (size_t i = 0; !rc && i < later.n; i++)
		rc = walk_die(b, &later.v[i], outer);
	free(later.v);
	return rc;
}

static int walk_die(struct meta_builder *b, Dwarf_Die *die, struct walk_ctx ctx)
{
	struct meta_model *m = b->m;
	int tag = dwarf_tag(die);
	struct attrs t;
	if (ctx.depth > MAX_DEPTH) {
		meta_warn(m, "%s: DIE 0x%llx: nesting deeper than %d; subtree skipped", m->path,
			  (unsigned long long)dwarf_dieoffset(die), MAX_DEPTH);
		return 0;
	}
	switch (tag) {
	case DW_TAG_variable:
	case DW_TAG_formal_parameter:
		read_attrs(die, &t);
		return add_var(b, die, tag, &t, ctx);
	case DW_TAG_subprogram:
		if (ctx.function != META_NONE && ctx.later) {
			if (META_PUSH(ctx.later->v, ctx.later->n, ctx.later->cap, *die))
				return oom(b);
			return 0;
		}
		read_attrs(die, &t);
		return add_function(b, die, &t, ctx);
	case DW_TAG_lexical_block:
	case DW_TAG_inlined_subroutine: {
		if (!dwarf_haschildren(die))
			return 0;
		struct walk_ctx inner = ctx;
		inner.depth++;
		if (ctx.function != META_NONE) {
			read_attrs(die, &t);
			uint64_t lo, hi;
			uint32_t first, count;
			if (push_ranges(b, die, &t, &first, &count, &lo, &hi) < 0)
				return -1;
			if (count) {
				inner.scope_first = first;
				inner.scope_count = count;
			}
		}
		return walk_children(b, die, inner);
	}
	case DW_TAG_namespace:
	case DW_TAG_module: {
		struct walk_ctx inner = ctx;
		inner.depth++;
		return dwarf_haschildren(die) ? walk_children(b, die, inner) : 0;
	}
	case DW_TAG_call_site: case DW_TAG_GNU_call_site: case DW_TAG_label:
	case DW_TAG_imported_declaration: case DW_TAG_imported_module:
	case DW_TAG_imported_unit: case DW_TAG_unspecified_parameters:
	case DW_TAG_template_type_parameter: case DW_TAG_template_value_parameter:
	case DW_TAG_GNU_template_parameter_pack: case DW_TAG_GNU_formal_parameter_pack:
	case DW_TAG_dwarf_procedure: case DW_TAG_member: case DW_TAG_enumerator:
		return 0;
	default:
		if (kind_of_tag(tag) >= 0) {
			read_attrs(die, &t);
			return add_type(b, die, tag, &t, ctx);
		}
		meta_warn(m, "%s: DIE 0x%llx: tag 0x%x not understood; skipped", m->path,
			  (unsigned long long)dwarf_dieoffset(die), tag);
		return 0;
	}
}

static int walk_children(struct meta_builder *b, Dwarf_Die *parent, struct walk_ctx ctx)
{
	Dwarf_Die c;
	int rc = dwarf_child(parent, &c);
	while (rc == 0) {
		if (walk_die(b, &c, ctx))
			return -1;
		rc = dwarf_siblingof(&c, &c);
	}
	if (rc < 0)
		meta_warn(b->m, "%s: DIE 0x%llx: corrupt children list: %s", b->m->path,
			  (unsigned long long)dwarf_dieoffset(parent), dwarf_errmsg(-1));
	return 0;
}

int meta_walk_dwarf(struct meta_builder *b)
{
	struct meta_model *m = b->m;
	Dwarf_CU *cu = NULL;
	Dwarf_Die cudie, subdie;
	uint8_t unit_type;
	Dwarf_Half version;
	int rc;
	while ((rc = dwarf_get_units(m->dwarf, cu, &cu, &version, &unit_type, &cudie, &subdie)) == 0) {
		Dwarf_Attribute pa;
		int lang = dwarf_srclang(&cudie);
		struct meta_cu u = {
			.name = dwarf_diename(&cudie),
			.producer = dwarf_formstring(dwarf_attr(&cudie, DW_AT_producer, &pa)),
			.version = version, .language = lang > 0 ? (uint16_t)lang : 0,
			.first_type = (uint32_t)m->ntypes, .first_var = (uint32_t)m->nvars,
			.first_global = (uint32_t)m->nglobals,
		};
		if (META_PUSH(m->cus, m->ncus, b->cap_cus, u))
			return oom(b);
		int tag = dwarf_tag(&cudie);
		if (tag != DW_TAG_compile_unit && tag != DW_TAG_partial_unit && tag != DW_TAG_type_unit) {
			meta_warn(m, "%s: unit at 0x%llx has tag 0x%x; skipped", m->path,
				  (unsigned long long)dwarf_dieoffset(&cudie), tag);
			continue;
		}
		struct walk_ctx ctx = { .function = META_NONE };
		if (dwarf_haschildren(&cudie) && walk_children(b, &cudie, ctx))
			return -1;
	}
	if (rc < 0) {
		meta_set_err(b->err, "%s: corrupt DWARF unit headers: %s", m->path, dwarf_errmsg(-1));
		return -1;
	}
	return 0;
}
