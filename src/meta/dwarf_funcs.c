/* Functions and variables from the walk: PC ranges, locals and formals with
 * their location attributes (kept for the frames tool), and variables at a
 * fixed address (for extrasyms). */
#include <stdlib.h>

#include "meta/dwarf_walk.h"
#include "meta/dwp.h"
#include "meta/expr.h"

struct range_sink {
	struct meta_builder *b;
	uint32_t *count;
	uint64_t *low, *high;
};

static int sink_range(void *arg, uint64_t lo, uint64_t hi)
{
	struct range_sink *k = arg;
	struct meta_model *m = k->b->m;
	if (hi <= lo || !meta_code_is_live(m, lo, hi))
		return 0;
	struct meta_range r = { lo, hi };
	if (META_PUSH(m->ranges, m->nranges, k->b->cap_ranges, r))
		return meta_walk_oom(k->b);
	(*k->count)++;
	if (lo < *k->low)
		*k->low = lo;
	if (hi > *k->high)
		*k->high = hi;
	return 0;
}

/* DW_AT_ranges of a DIE in a split unit from a .dwp package: read here,
 * since libdw does not know the unit's base address (its skeleton's). */
static int package_ranges(struct meta_builder *b, Dwarf_Die *die, uint32_t *first, uint32_t *count,
			  uint64_t *low, uint64_t *high)
{
	Dwarf_Attribute a;
	Dwarf_Word off = 0;
	struct range_sink k = { b, count, low, high };
	int is_index = 0, ok = dwarf_attr(die, DW_AT_ranges, &a) != NULL;
	if (ok && dwarf_whatform(&a) == DW_FORM_rnglistx) { /* its index, not libdw's offset */
		const unsigned char *q = a.valp;
		is_index = 1;
		ok = meta_uleb(&q, q + 10, &off); /* at most 10 bytes for 64 bits */
	} else if (ok) {
		ok = dwarf_formudata(&a, &off) == 0;
	}
	if (!ok || meta_dwp_ranges(b->m->dwp, b->cur_dwp_unit, is_index, off, b->cur_dwp_base, sink_range, &k) != 0) {
		if (b->oom)
			return -1;
		meta_warn(b->m, "%s: DIE 0x%llx: unreadable range list in a .dwp unit", b->m->path,
			  (unsigned long long)dwarf_dieoffset(die));
	}
	(void)first;
	return (int)*count;
}

int meta_push_ranges(struct meta_builder *b, Dwarf_Die *die, const struct attrs *t,
		     uint32_t *first, uint32_t *count, uint64_t *low, uint64_t *high)
{
	struct meta_model *m = b->m;
	*first = (uint32_t)m->nranges;
	*count = 0;
	*low = UINT64_MAX;
	*high = 0;
	if (t->has_low && t->has_high && !t->has_ranges) {
		struct meta_range r = { t->low_pc, t->high_is_size ? t->low_pc + t->high_pc : t->high_pc };
		if (r.hi <= r.lo || !meta_code_is_live(m, r.lo, r.hi))
			return 0;
		if (META_PUSH(m->ranges, m->nranges, b->cap_ranges, r))
			return meta_walk_oom(b);
		*count = 1;
		*low = r.lo;
		*high = r.hi;
		return 1;
	}
	if (!t->has_ranges && !t->has_low)
		return 0;
	if (b->cur_dwp_unit && t->has_ranges)
		return package_ranges(b, die, first, count, low, high);
	Dwarf_Addr base, lo, hi;
	ptrdiff_t off = 0;
	while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
		if (hi <= lo || !meta_code_is_live(m, lo, hi))
			continue;
		struct meta_range r = { lo, hi };
		if (META_PUSH(m->ranges, m->nranges, b->cap_ranges, r))
			return meta_walk_oom(b);
		(*count)++;
		if (lo < *low)
			*low = lo;
		if (hi > *high)
			*high = hi;
	}
	return (int)*count;
}

static int add_global(struct meta_builder *b, const struct attrs *t, uint64_t addr)
{
	struct meta_model *m = b->m;
	struct meta_global g = { .name = t->name, .addr = addr, .type = META_NONE,
				 .external = t->external };
	size_t cap = b->cap_globals;
	if (META_PUSH(m->globals, m->nglobals, b->cap_globals, g))
		return meta_walk_oom(b);
	if (cap != b->cap_globals || !b->global_ref_off) {
		uint64_t *r = realloc(b->global_ref_off, b->cap_globals * sizeof *r);
		if (!r)
			return meta_walk_oom(b);
		b->global_ref_off = r;
	}
	b->global_ref_off[m->nglobals - 1] = t->has_type ? meta_ref_key(b, (Dwarf_Attribute *)&t->type) : 0;
	return 0;
}

/* A single DW_OP_addr location: a variable at a fixed address. */
static int static_address(const struct meta_model *m, Dwarf_Attribute *loc, uint64_t *addr)
{
	unsigned int form = dwarf_whatform(loc);
	if (form != DW_FORM_exprloc && form != DW_FORM_block1 && form != DW_FORM_block2 &&
	    form != DW_FORM_block4 && form != DW_FORM_block)
		return 0; /* a location list: not at one fixed address */
	struct meta_op op;
	if (m->addr_size && meta_expr_simple(loc, m->addr_size, &op)) {
		if (op.atom != DW_OP_addr)
			return 0;
		*addr = op.addr;
		return 1;
	}
	/* DW_OP_addrx (clang's DWARF 5): an index into .debug_addr, which libdw
	 * resolves; other expressions are not a fixed address. */
	Dwarf_Block blk;
	if (m->addr_size && (dwarf_formblock(loc, &blk) != 0 || blk.length == 0 ||
			     (blk.data[0] != DW_OP_addrx && blk.data[0] != DW_OP_GNU_addr_index)))
		return 0;
	Dwarf_Op *ops;
	size_t n;
	if (dwarf_getlocation(loc, &ops, &n) != 0 || n != 1)
		return 0;
	if (ops[0].atom == DW_OP_addr) {
		*addr = ops[0].number;
		return 1;
	}
	Dwarf_Attribute res;
	if ((ops[0].atom == DW_OP_addrx || ops[0].atom == DW_OP_GNU_addr_index) &&
	    dwarf_getlocation_attr(loc, ops, &res) == 0 && dwarf_formaddr(&res, addr) == 0)
		return 1;
	return 0;
}

int meta_add_var(struct meta_builder *b, Dwarf_Die *die, int tag, struct attrs *t,
		   struct walk_ctx ctx)
{
	(void)die;
	struct meta_model *m = b->m;
	uint64_t ooff = 0;
	if (t->has_origin && meta_note_origin(b, ctx, &t->origin, &ooff))
		return -1;
	if (t->declaration && !t->has_location)
		return 0;
	/* name and type from the abstract origin: cached when the enclosing
	 * scope is a concrete copy, else read through libdw */
	struct attrs o;
	if (ooff && ctx.origin != META_NONE && meta_origin_child_attrs(b, ctx.origin, ooff, &o) &&
	    (t->name || o.name) && (t->has_type || o.has_type)) {
		if (!t->name)
			t->name = o.name;
		if (!t->has_type) {
			t->type = o.type;
			t->has_type = 1;
		}
		t->external |= o.external;
	} else {
		meta_inherit(t);
	}
	uint64_t addr = 0;
	int is_static = t->has_location && static_address(m, &t->location, &addr);
	if (is_static && !meta_data_is_live(m, addr))
		return 0; /* a discarded copy's variable, at the linker's tombstone */
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
		return meta_walk_oom(b);
	if (cap != b->cap_vars || !b->var_ref_off) {
		uint64_t *r = realloc(b->var_ref_off, b->cap_vars * sizeof *r);
		if (!r)
			return meta_walk_oom(b);
		b->var_ref_off = r;
	}
	b->var_ref_off[m->nvars - 1] = t->has_type ? meta_ref_key(b, &t->type) : 0;
	m->functions[ctx.function].var_count++;
	return 0;
}

int meta_add_function(struct meta_builder *b, Dwarf_Die *die, struct attrs *t, struct walk_ctx ctx)
{
	struct meta_model *m = b->m;
	meta_inherit(t);
	struct meta_function f = { .name = t->name, .external = t->external,
				   .has_frame_base = t->has_frame_base, .frame_base = t->frame_base };
	if (meta_push_ranges(b, die, t, &f.range_first, &f.range_count, &f.low, &f.high) < 0)
		return -1;
	struct walk_ctx inner = { .function = META_NONE, .depth = ctx.depth + 1, .origin = META_NONE };
	if (f.range_count) {
		f.var_first = (uint32_t)m->nvars;
		inner.function = (uint32_t)m->nfunctions;
		inner.scope_first = f.range_first;
		inner.scope_count = f.range_count;
		if (META_PUSH(m->functions, m->nfunctions, b->cap_functions, f))
			return meta_walk_oom(b);
	}
	uint32_t origin = META_NONE;
	if (f.range_count && t->has_origin && meta_origin_index(b, &t->origin, ctx.depth + 1, &origin))
		return -1;
	if (!dwarf_haschildren(die) && origin == META_NONE)
		return 0;
	struct deferred later = { 0 };
	inner.later = &later;
	/* an out-of-line instance of an inline function, or a part split off
	 * one (foo.part.0), has the variables of its abstract origin */
	int rc = f.range_count ? meta_walk_concrete(b, die, t, origin, inner) : meta_walk_children(b, die, inner);
	struct walk_ctx outer = { .function = META_NONE, .depth = ctx.depth, .origin = META_NONE };
	for (size_t i = 0; !rc && i < later.n; i++)
		rc = meta_walk_die(b, &later.v[i], outer);
	free(later.v);
	return rc;
}
