/* Reading the attributes of one DIE in a single dwarf_getattrs pass. */
#include <stddef.h>
#include <string.h>

#include "meta/dwarf_walk.h"

static int udata(Dwarf_Attribute *a, Dwarf_Word *out)
{
	return dwarf_formudata(a, out) == 0;
}

/* A virtual base's location: the object's address plus the offset stored
 * in its vtable, N bytes before the address point: DW_OP_dup, DW_OP_deref,
 * <constant N>, DW_OP_minus, DW_OP_deref, DW_OP_plus (GCC and clang). */
static int vbase_expr(const Dwarf_Op *ops, size_t n, Dwarf_Sword *vtable_offset)
{
	if (n != 6 || ops[0].atom != DW_OP_dup || ops[1].atom != DW_OP_deref || ops[3].atom != DW_OP_minus ||
	    ops[4].atom != DW_OP_deref || ops[5].atom != DW_OP_plus)
		return 0;
	uint8_t c = ops[2].atom;
	if (c >= DW_OP_lit0 && c <= DW_OP_lit31)
		*vtable_offset = -(Dwarf_Sword)(c - DW_OP_lit0);
	else if (c == DW_OP_constu || c == DW_OP_const1u || c == DW_OP_const2u || c == DW_OP_const4u ||
		 c == DW_OP_const8u)
		*vtable_offset = -(Dwarf_Sword)ops[2].number;
	else
		return 0;
	return 1;
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
			size_t n = 0;
			if (dwarf_getlocation(a, &ops, &n) == 0 && n == 1 &&
			    ops[0].atom == DW_OP_plus_uconst) {
				t->member_loc = ops[0].number;
				t->has_member_loc = 1;
			} else if (n == 6 && vbase_expr(ops, n, &t->vtable_offset)) {
				t->has_vtable_offset = 1;
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
			t->const_signed = 1;
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
	case DW_AT_signature:
		t->signature = *a;
		t->has_signature = 1;
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
	case DW_AT_virtuality: {
		Dwarf_Word v;
		t->is_virtual = udata(a, &v) && v == DW_VIRTUALITY_virtual;
		break;
	}
	default:
		break;
	}
	return DWARF_CB_OK;
}

void meta_read_attrs(Dwarf_Die *die, struct attrs *t)
{
	memset(t, 0, offsetof(struct attrs, type)); /* the rest is read under a flag */
	if (dwarf_getattrs(die, collect, t, 0) < 0)
		t->bad = 1;
}

uint64_t meta_die_key(const struct meta_builder *b, Dwarf_Die *d)
{
	uint64_t key = dwarf_dieoffset(d) + 1;
	int in_types = b->cur_in_types;
	uint64_t split = b->cur_split;
	if (d->cu != b->cur_cu) { /* a reference to another unit: rare */
		Dwarf_Half version;
		uint8_t unit_type;
		in_types = dwarf_cu_info(d->cu, &version, &unit_type, NULL, NULL, NULL, NULL, NULL) == 0 &&
			   version < 5 && (unit_type == DW_UT_type || unit_type == DW_UT_split_type);
		Dwarf *file = dwarf_cu_getdwarf(d->cu);
		split = 0;
		for (size_t i = 0; i < b->nsplits; i++)
			if (b->splits[i] == file)
				split = (uint64_t)(i + 1) << META_KEY_SPLIT_SHIFT;
	}
	return (in_types ? key | META_KEY_DEBUG_TYPES : key) | split;
}

uint64_t meta_ref_key(const struct meta_builder *b, Dwarf_Attribute *a)
{
	Dwarf_Die d;
	if (!dwarf_formref_die(a, &d))
		return 0;
	return meta_die_key(b, &d);
}

void meta_inherit(struct attrs *t)
{
	Dwarf_Attribute link;
	int have = t->has_origin ? (link = t->origin, 1) : t->has_spec ? (link = t->spec, 1) : 0;
	for (int level = 0; have && level < 2 && (!t->name || !t->has_type || !t->external); level++) {
		Dwarf_Die d;
		if (!dwarf_formref_die(&link, &d))
			return;
		struct attrs o;
		meta_read_attrs(&d, &o);
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
