/* The single walk over every DIE of every unit: types (with members,
 * enumerators, parameters, array dimensions), functions with their PC ranges,
 * their locals and formals, and variables with a fixed address.
 *
 * References between DIEs are recorded as DIE offsets and resolved to model
 * indices once the walk is over (meta_resolve_types), because DWARF refers
 * forward as often as backward. */
#include <dwarf.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "meta/dwarf_walk.h"
#include "meta/dwp.h"

int meta_walk_oom(struct meta_builder *b)
{
	if (!b->oom)
		meta_set_err(b->err, "%s: out of memory while reading DWARF", b->m->path);
	b->oom = 1;
	return -1;
}

int meta_next_sibling(Dwarf_Die *die)
{
	/* siblings lie in one unit's buffer: their addresses compare as their
	 * offsets do, without two calls into libdw per DIE */
	const unsigned char *here = die->addr;
	int rc = dwarf_siblingof(die, die);
	if (rc == 0 && (const unsigned char *)die->addr <= here)
		return -1;
	return rc;
}

int meta_walk_die(struct meta_builder *b, Dwarf_Die *die, struct walk_ctx ctx)
{
	struct meta_model *m = b->m;
	int tag = dwarf_tag(die);
	struct attrs t;
	if (ctx.depth > META_MAX_DEPTH) {
		meta_warn(m, "%s: DIE 0x%llx: nesting deeper than %d; subtree skipped", m->path,
			  (unsigned long long)dwarf_dieoffset(die), META_MAX_DEPTH);
		return 0;
	}
	switch (tag) {
	case DW_TAG_variable:
	case DW_TAG_formal_parameter:
		meta_read_attrs(die, &t);
		return meta_add_var(b, die, tag, &t, ctx);
	case DW_TAG_subprogram:
		if (ctx.function != META_NONE && ctx.later) {
			if (META_PUSH(ctx.later->v, ctx.later->n, ctx.later->cap, *die))
				return meta_walk_oom(b);
			return 0;
		}
		meta_read_attrs(die, &t);
		return meta_add_function(b, die, &t, ctx);
	case DW_TAG_lexical_block:
	case DW_TAG_inlined_subroutine: {
		struct walk_ctx inner = ctx;
		inner.depth++;
		inner.seen = NULL;
		if (ctx.function == META_NONE)
			return dwarf_haschildren(die) ? meta_walk_children(b, die, inner) : 0;
		int kids = dwarf_haschildren(die);
		Dwarf_Attribute oa;
		int has_origin = dwarf_attr(die, DW_AT_abstract_origin, &oa) != NULL;
		if (!kids && !has_origin)
			return 0;
		uint32_t origin = META_NONE;
		uint64_t ooff;
		/* a block stands for a block of the enclosing scope's origin; an
		 * inlined call's origin is a function */
		if (has_origin && ((tag == DW_TAG_lexical_block && meta_note_origin(b, ctx, &oa, &ooff)) ||
				   meta_origin_index(b, &oa, ctx.depth + 1, &origin)))
			return -1;
		if (!kids && (origin == META_NONE || !b->origin_count[origin]))
			return 0; /* nothing of its own, nothing to inherit */
		meta_read_attrs(die, &t);
		uint64_t lo, hi;
		uint32_t first, count;
		if (meta_push_ranges(b, die, &t, &first, &count, &lo, &hi) < 0)
			return -1;
		if (count) {
			inner.scope_first = first;
			inner.scope_count = count;
		}
		return meta_walk_concrete(b, die, &t, origin, inner);
	}
	case DW_TAG_namespace:
	case DW_TAG_module: {
		struct walk_ctx inner = ctx;
		inner.depth++;
		return dwarf_haschildren(die) ? meta_walk_children(b, die, inner) : 0;
	}
	case DW_TAG_call_site: case DW_TAG_GNU_call_site: case DW_TAG_label:
	case DW_TAG_imported_declaration: case DW_TAG_imported_module:
	case DW_TAG_imported_unit: case DW_TAG_unspecified_parameters:
	case DW_TAG_template_type_parameter: case DW_TAG_template_value_parameter:
	case DW_TAG_GNU_template_parameter_pack: case DW_TAG_GNU_formal_parameter_pack:
	case DW_TAG_dwarf_procedure: case DW_TAG_member: case DW_TAG_enumerator:
		return 0;
	default:
		if (meta_kind_of_tag(tag) >= 0) {
			meta_read_attrs(die, &t);
			return meta_add_type(b, die, tag, &t, ctx);
		}
		meta_warn(m, "%s: DIE 0x%llx: tag 0x%x not understood; skipped", m->path,
			  (unsigned long long)dwarf_dieoffset(die), tag);
		return 0;
	}
}

int meta_note_origin(struct meta_builder *b, struct walk_ctx ctx, Dwarf_Attribute *origin, uint64_t *off)
{
	*off = 0;
	if (!ctx.seen && ctx.origin == META_NONE)
		return 0;
	Dwarf_Die d;
	if (!dwarf_formref_die(origin, &d))
		return 0;
	*off = dwarf_dieoffset(&d);
	if (ctx.seen && META_PUSH(ctx.seen->v, ctx.seen->n, ctx.seen->cap, *off))
		return meta_walk_oom(b);
	return 0;
}

static int was_seen(const struct seen_origins *s, uint64_t off)
{
	for (size_t i = 0; s && i < s->n; i++)
		if (s->v[i] == off)
			return 1;
	return 0;
}

/* A child of an abstract origin, flattened in DIE order: a formal or local
 * with its attributes, or a block followed by its `inner` descendants. */
struct meta_origin_child {
	uint64_t off;
	const char *name;
	Dwarf_Attribute type, location;
	uint32_t inner;
	uint16_t tag;
	uint8_t has_type, has_location, external, declaration;
};

/* The attributes of a cached child, as meta_read_attrs would give them. */
static void child_attrs(const struct meta_origin_child *oc, struct attrs *t)
{
	memset(t, 0, offsetof(struct attrs, type));
	t->name = oc->name;
	t->type = oc->type;
	t->has_type = oc->has_type;
	t->location = oc->location;
	t->has_location = oc->has_location;
	t->external = oc->external;
	t->declaration = oc->declaration;
}

void meta_walk_free(struct meta_builder *b)
{
	free(b->splits);
	meta_u64map_free(&b->origins);
	free(b->origin_first);
	free(b->origin_count);
	free(b->origin_children);
}

/* Appends the formals, locals and blocks under abstract DIE PARENT. */
static int read_origin(struct meta_builder *b, Dwarf_Die *parent, int depth)
{
	if (depth > META_MAX_DEPTH)
		return 0;
	Dwarf_Die c;
	int rc = dwarf_child(parent, &c);
	while (rc == 0) {
		int tag = dwarf_tag(&c);
		if (tag == DW_TAG_variable || tag == DW_TAG_formal_parameter || tag == DW_TAG_lexical_block) {
			struct meta_origin_child oc = { .off = dwarf_dieoffset(&c), .tag = (uint16_t)tag };
			if (tag != DW_TAG_lexical_block) {
				struct attrs t;
				meta_read_attrs(&c, &t);
				meta_inherit(&t); /* an abstract DIE may itself point further */
				oc.name = t.name;
				oc.type = t.type;
				oc.has_type = t.has_type;
				oc.location = t.location;
				oc.has_location = t.has_location;
				oc.external = t.external;
				oc.declaration = t.declaration;
			}
			size_t at = b->norigin_children;
			if (META_PUSH(b->origin_children, b->norigin_children, b->cap_origin_children, oc))
				return meta_walk_oom(b);
			if (tag == DW_TAG_lexical_block && dwarf_haschildren(&c)) {
				if (read_origin(b, &c, depth + 1))
					return -1;
				b->origin_children[at].inner = (uint32_t)(b->norigin_children - at - 1);
			}
		}
		rc = meta_next_sibling(&c);
	}
	return 0;
}

/* The children of abstract DIE ORIGIN that SEEN does not name: formals and
 * locals are added, and blocks with no concrete counterpart (they have no
 * PC range of their own) are looked through, as gdb does. */
static int inherit_abstract(struct meta_builder *b, uint32_t idx, const struct seen_origins *seen,
			    struct walk_ctx ctx)
{
	uint32_t end = b->origin_first[idx] + b->origin_count[idx];
	for (uint32_t i = b->origin_first[idx]; i < end; i++) {
		const struct meta_origin_child *oc = &b->origin_children[i];
		if (was_seen(seen, oc->off)) {
			if (oc->tag == DW_TAG_lexical_block)
				i += oc->inner; /* its concrete block inherits for itself */
			continue;
		}
		if (oc->tag == DW_TAG_lexical_block)
			continue; /* no concrete block: its variables belong to this scope */
		struct attrs t;
		child_attrs(oc, &t);
		if (meta_add_var(b, NULL, oc->tag, &t, ctx))
			return -1;
	}
	return 0;
}

int meta_origin_child_attrs(const struct meta_builder *b, uint32_t origin, uint64_t off, struct attrs *t)
{
	uint32_t end = b->origin_first[origin] + b->origin_count[origin];
	for (uint32_t i = b->origin_first[origin]; i < end; i++) {
		const struct meta_origin_child *oc = &b->origin_children[i];
		if (oc->off == off && oc->tag != DW_TAG_lexical_block) {
			child_attrs(oc, t);
			return 1;
		}
	}
	return 0;
}

int meta_origin_index(struct meta_builder *b, Dwarf_Attribute *origin, int depth, uint32_t *idx)
{
	Dwarf_Die o;
	*idx = META_NONE;
	if (!dwarf_formref_die(origin, &o))
		return 0;
	uint64_t key = dwarf_dieoffset(&o);
	*idx = meta_u64map_get(&b->origins, key);
	if (*idx != META_NONE)
		return 0;
	uint32_t first = (uint32_t)b->norigin_children;
	*idx = (uint32_t)b->norigins;
	if (read_origin(b, &o, depth) ||
	    META_PUSH(b->origin_first, b->norigins, b->cap_origin_first, first) ||
	    meta_grow((void **)&b->origin_count, &b->cap_origin_count, b->norigins, sizeof *b->origin_count) ||
	    meta_u64map_put(&b->origins, key, *idx))
		return meta_walk_oom(b);
	b->origin_count[*idx] = (uint32_t)b->norigin_children - first;
	return 0;
}

int meta_walk_concrete(struct meta_builder *b, Dwarf_Die *die, struct attrs *t, uint32_t origin,
		       struct walk_ctx ctx)
{
	struct seen_origins seen = { 0 };
	ctx.seen = origin != META_NONE ? &seen : NULL;
	if (origin != META_NONE)
		ctx.origin = origin;
	int rc = dwarf_haschildren(die) ? meta_walk_children(b, die, ctx) : 0;
	ctx.seen = NULL;
	ctx.origin = META_NONE;
	(void)t;
	if (!rc && origin != META_NONE && b->origin_count[origin])
		rc = inherit_abstract(b, origin, &seen, ctx);
	free(seen.v);
	return rc;
}

int meta_walk_children(struct meta_builder *b, Dwarf_Die *parent, struct walk_ctx ctx)
{
	Dwarf_Die c;
	int rc = dwarf_child(parent, &c);
	while (rc == 0) {
		if (meta_walk_die(b, &c, ctx))
			return -1;
		rc = meta_next_sibling(&c);
	}
	if (rc < 0)
		meta_warn(b->m, "%s: DIE 0x%llx: corrupt children list: %s", b->m->path,
			  (unsigned long long)dwarf_dieoffset(parent), dwarf_errmsg(-1));
	return 0;
}

/* Offset attribute NAME (or GNU_NAME) of DIE, 0 when absent. */
static uint64_t base_attr(Dwarf_Die *die, int name, int gnu_name)
{
	Dwarf_Attribute a;
	Dwarf_Word v;
	if ((dwarf_attr(die, name, &a) || dwarf_attr(die, gnu_name, &a)) && dwarf_formudata(&a, &v) == 0)
		return v;
	return 0;
}

/* The split unit of SKELETON from the package BINARY.dwp (libdw only looks
 * for .dwo files): 1 found, in *SPLIT. */
static int from_package(struct meta_builder *b, Dwarf_Die *skeleton, Dwarf_Die *split)
{
	struct meta_model *m = b->m;
	if (!m->dwp_tried) {
		m->dwp_tried = 1;
		char path[4096];
		if ((size_t)snprintf(path, sizeof path, "%s.dwp", m->path) < sizeof path)
			meta_dwp_open(m->dirfd, path, &m->dwp);
	}
	uint64_t dwo_id;
	if (!m->dwp || dwarf_cu_info(skeleton->cu, NULL, NULL, NULL, NULL, &dwo_id, NULL, NULL) != 0)
		return 0;
	uint64_t addr_base = base_attr(skeleton, DW_AT_addr_base, DW_AT_GNU_addr_base);
	uint64_t ranges_base = base_attr(skeleton, DW_AT_rnglists_base, DW_AT_GNU_ranges_base);
	if (addr_base > m->raw_addr_size || ranges_base > m->raw_ranges_size)
		return 0;
	Dwarf *d = meta_dwp_unit(m->dwp, dwo_id, m->raw_addr ? m->raw_addr + addr_base : NULL,
				 m->raw_addr_size - addr_base, m->raw_ranges ? m->raw_ranges + ranges_base : NULL,
				 m->raw_ranges_size - ranges_base);
	Dwarf_CU *cu = NULL;
	Dwarf_Half version;
	uint8_t unit_type;
	Dwarf_Addr base;
	if (!d || dwarf_get_units(d, NULL, &cu, &version, &unit_type, split, NULL) != 0 ||
	    dwarf_tag(split) != DW_TAG_compile_unit)
		return 0;
	b->cur_dwp_unit = d;
	b->cur_dwp_base = dwarf_lowpc(skeleton, &base) == 0 ? base : 0;
	return 1;
}

/* The split unit of SKELETON in *SPLIT: 1 found, 0 not (with a warning). */
static int split_unit(struct meta_builder *b, Dwarf_Die *skeleton, Dwarf_Die *split)
{
	struct meta_model *m = b->m;
	if ((!split->addr || dwarf_tag(split) != DW_TAG_compile_unit) && !from_package(b, skeleton, split)) {
		Dwarf_Attribute a;
		const char *dwo = dwarf_formstring(dwarf_attr(skeleton, DW_AT_dwo_name, &a));
		if (!dwo)
			dwo = dwarf_formstring(dwarf_attr(skeleton, DW_AT_GNU_dwo_name, &a));
		meta_warn(m, "%s: split DWARF file %s not found; its unit is skipped", m->path, dwo ? dwo : "?");
		return 0;
	}
	Dwarf *file = dwarf_cu_getdwarf(split->cu);
	size_t i = 0;
	while (i < b->nsplits && b->splits[i] != file)
		i++;
	if (i == b->nsplits && META_PUSH(b->splits, b->nsplits, b->cap_splits, file))
		return meta_walk_oom(b);
	b->cur_split = (uint64_t)(i + 1) << META_KEY_SPLIT_SHIFT;
	return 1;
}

/* Reserves room in proportion to .debug_info (ratios seen in GCC output), so
 * that the arrays are not copied over and over while they grow. */
static int reserve(struct meta_builder *b)
{
	struct meta_model *m = b->m;
	uint64_t size = m->debug_info_size;
	uint64_t file = m->debug_path ? m->debug_file_size : m->size;
	if (size > file)
		size = file; /* a corrupt section header: the file bounds what it holds */
	return meta_grow((void **)&m->types, &b->cap_types, size / 64, sizeof *m->types) ||
	       meta_grow((void **)&m->members, &b->cap_members, size / 16, sizeof *m->members) ||
	       meta_grow((void **)&m->vars, &b->cap_vars, size / 96, sizeof *m->vars) ||
	       meta_grow((void **)&m->functions, &b->cap_functions, size / 512, sizeof *m->functions) ||
	       meta_grow((void **)&m->ranges, &b->cap_ranges, size / 128, sizeof *m->ranges);
}

int meta_walk_dwarf(struct meta_builder *b)
{
	struct meta_model *m = b->m;
	if (reserve(b))
		return meta_walk_oom(b);
	Dwarf_CU *cu = NULL;
	Dwarf_Die cudie, subdie;
	uint8_t unit_type;
	Dwarf_Half version;
	int rc;
	while ((rc = dwarf_get_units(m->dwarf, cu, &cu, &version, &unit_type, &cudie, &subdie)) == 0) {
		b->cur_split = 0;
		b->cur_dwp_unit = NULL;
		if (unit_type == DW_UT_skeleton) {
			/* -gsplit-dwarf: the unit's DIEs are in its .dwo file,
			 * which libdw finds by DW_AT_dwo_name (or DW_AT_GNU_dwo_name
			 * in DWARF 4) under DW_AT_comp_dir or the binary's directory */
			int split = split_unit(b, &cudie, &subdie);
			if (split < 0)
				return -1;
			if (!split)
				continue;
			cudie = subdie;
		}
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
			return meta_walk_oom(b);
		b->cur_cu = cudie.cu;
		b->cur_in_types = version < 5 && unit_type == DW_UT_type;
		int tag = dwarf_tag(&cudie);
		if (tag != DW_TAG_compile_unit && tag != DW_TAG_partial_unit && tag != DW_TAG_type_unit) {
			meta_warn(m, "%s: unit at 0x%llx has tag 0x%x; skipped", m->path,
				  (unsigned long long)dwarf_dieoffset(&cudie), tag);
			continue;
		}
		struct walk_ctx ctx = { .function = META_NONE, .origin = META_NONE };
		if (dwarf_haschildren(&cudie) && meta_walk_children(b, &cudie, ctx))
			return -1;
	}
	if (rc < 0) {
		meta_set_err(b->err, "%s: corrupt DWARF unit headers: %s", m->path, dwarf_errmsg(-1));
		return -1;
	}
	return 0;
}
