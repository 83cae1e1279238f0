/* Internal to src/meta: the pieces of the DWARF walk (dwarf_walk.c drives,
 * dwarf_attrs.c reads a DIE's attributes, dwarf_types.c builds types,
 * dwarf_funcs.c functions and variables). */
#ifndef KILN_META_DWARF_WALK_H
#define KILN_META_DWARF_WALK_H

#include <dwarf.h>

#include "meta/build.h"

/* Deeper DIE nesting than this is corrupt input: skipped with a warning
 * rather than recursed into (the walk recurses on the C stack). */
#define META_MAX_DEPTH 512

/* The attributes of one DIE we care about, read in one dwarf_getattrs pass. */
struct attrs {
	/* Zeroed before each read (meta_read_attrs): the flags, and the
	 * fields read without a flag. */
	const char *name;
	Dwarf_Word encoding, const_value;
	unsigned has_type : 1, has_location : 1, has_frame_base : 1, has_origin : 1,
		has_spec : 1, has_signature : 1, has_byte_size : 1, has_bit_size : 1, has_bit_offset : 1,
		has_data_bit_offset : 1, has_member_loc : 1, has_upper : 1, has_count : 1,
		has_lower : 1, has_const : 1, has_low : 1, has_high : 1, high_is_size : 1,
		has_ranges : 1, declaration : 1, external : 1, bad : 1, is_virtual : 1,
		has_vtable_offset : 1, const_signed : 1; /* const_value read as DW_FORM_sdata */
	/* Meaningful only when their flag is set. */
	Dwarf_Attribute type, location, frame_base, origin, spec, signature;
	Dwarf_Word byte_size, bit_size, data_bit_offset, member_loc;
	Dwarf_Sword bit_offset; /* negative when a packed bitfield spills over */
	Dwarf_Word upper_bound, count;
	Dwarf_Sword lower_bound;
	Dwarf_Sword vtable_offset; /* virtual base: where its offset is in the vtable */
	Dwarf_Addr low_pc, high_pc;
};

void meta_read_attrs(Dwarf_Die *die, struct attrs *t);
/* A DIE's key: its offset + 1, with META_KEY_DEBUG_TYPES set for DWARF 4
 * .debug_types units, whose offsets overlap those of .debug_info. */
#define META_KEY_DEBUG_TYPES ((uint64_t)1 << 62)
/* ... and the number of their split DWARF file (.dwo) from this bit up. */
#define META_KEY_SPLIT_SHIFT 40
uint64_t meta_die_key(const struct meta_builder *b, Dwarf_Die *d);
/* Key of the DIE attribute A refers to; 0 when it cannot be read. */
uint64_t meta_ref_key(const struct meta_builder *b, Dwarf_Attribute *a);
/* Name, type and external flag inherited through abstract_origin and
 * specification (two levels: a concrete out-of-line instance of an inline
 * function points at its abstract instance, which may point at a declaration). */
void meta_inherit(struct attrs *t);

/* Functions nested in functions are walked after their parent, so that each
 * function's variables stay contiguous. */
struct deferred { Dwarf_Die *v; size_t n, cap; };

/* DIE offsets of the abstract-origin DIEs that the children of a concrete
 * scope (an out-of-line instance, an inlined call, a block of either) stand
 * for: the origin's other children exist only in the abstract tree. */
struct seen_origins { uint64_t *v; size_t n, cap; };

struct walk_ctx {
	uint32_t function;          /* META_NONE outside a function */
	uint32_t scope_first, scope_count;
	int depth;
	struct deferred *later;     /* nested functions of the current function */
	struct seen_origins *seen;  /* of the enclosing concrete scope, or NULL */
	uint32_t origin;            /* cached abstract origin of the enclosing
	                               concrete scope (META_NONE: none) */
};

/* Records that a child of the current concrete scope stands for the DIE
 * ORIGIN refers to, whose offset goes to *OFF (0 when unreadable). */
int meta_note_origin(struct meta_builder *b, struct walk_ctx ctx, Dwarf_Attribute *origin, uint64_t *off);
/* The attributes (name, type, location, flags) of the formal or local at
 * offset OFF among the cached children of abstract origin ORIGIN, into *T:
 * 1, or 0 when it is not there. */
int meta_origin_child_attrs(const struct meta_builder *b, uint32_t origin, uint64_t off, struct attrs *t);
/* Walks the children of concrete scope DIE (with attributes T) in CTX, then
 * adds the formals and locals of its abstract origin that no child stands
 * for (gdb does the same): they have no location, or the origin's. */
int meta_walk_concrete(struct meta_builder *b, Dwarf_Die *die, struct attrs *t, uint32_t origin,
		       struct walk_ctx ctx);
/* The cached children of the abstract origin ORIGIN refers to, read on first
 * use: *IDX indexes b->origin_first/origin_count (META_NONE if unreadable). */
int meta_origin_index(struct meta_builder *b, Dwarf_Attribute *origin, int depth, uint32_t *idx);

int meta_walk_oom(struct meta_builder *b);
/* dwarf_siblingof that refuses to go backwards (a corrupt DW_AT_sibling
 * would otherwise loop forever): 0 next, 1 no more, -1 error or backwards. */
int meta_next_sibling(Dwarf_Die *die);
int meta_walk_die(struct meta_builder *b, Dwarf_Die *die, struct walk_ctx ctx);
int meta_walk_children(struct meta_builder *b, Dwarf_Die *parent, struct walk_ctx ctx);

/* enum meta_kind of a type tag; META_KIND_COUNT for types of other languages
 * kept opaque; -1 when TAG is not a type. */
int meta_kind_of_tag(int tag);
int meta_add_type(struct meta_builder *b, Dwarf_Die *die, int tag, const struct attrs *t,
		  struct walk_ctx ctx);

/* Pushes the PC ranges of DIE; returns how many (0 when it has none), -1 on ENOMEM. */
int meta_push_ranges(struct meta_builder *b, Dwarf_Die *die, const struct attrs *t,
		     uint32_t *first, uint32_t *count, uint64_t *low, uint64_t *high);
int meta_add_var(struct meta_builder *b, Dwarf_Die *die, int tag, struct attrs *t, struct walk_ctx ctx);
int meta_add_function(struct meta_builder *b, Dwarf_Die *die, struct attrs *t, struct walk_ctx ctx);

#endif
