/* Internal to src/meta: the state of one model build, and the small
 * containers it uses. Not part of the model's public interface. */
#ifndef KILN_META_BUILD_H
#define KILN_META_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "meta/model.h"
#include "meta/vec.h"

/* Open-addressing map from a 64-bit key (a DIE offset) to a 32-bit value. */
struct meta_u64map {
	uint64_t *keys;       /* key + 1; 0 = empty */
	uint32_t *vals;
	size_t cap, len;
};

int meta_u64map_put(struct meta_u64map *map, uint64_t key, uint32_t val);
uint32_t meta_u64map_get(const struct meta_u64map *map, uint64_t key); /* META_NONE if absent */
void meta_u64map_free(struct meta_u64map *map);

static inline uint64_t meta_mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	h *= 0xff51afd7ed558ccdull;
	return h ^ (h >> 32);
}

static inline uint64_t meta_strhash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	if (!s)
		return 0x5bd1e995;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}


struct meta_origin_child;

/* State kept while building, freed at the end of meta_model_open(). */
struct meta_builder {
	struct meta_model *m;
	struct meta_err *err;
	size_t cap_types, cap_members, cap_functions, cap_vars, cap_ranges, cap_globals, cap_cus;
	/* DIE offsets of references, resolved to type indices after the walk. */
	uint64_t *type_ref_off;   /* per type; 0 = none */
	uint64_t *member_ref_off; /* per member; 0 = none */
	uint64_t *var_ref_off;    /* per var */
	uint64_t *global_ref_off; /* per global */
	/* per member: DW_AT_bit_offset (old style) and storage size, for fixup */
	struct meta_bitfix { uint32_t member; int32_t bit_offset; uint32_t storage; } *bitfix;
	size_t nbitfix, cap_bitfix;
	/* DIE offset (+1) of each type: the walk appends them in increasing
	 * order (pre-order = file order), so lookups are binary searches. */
	uint64_t *type_die;
	uint32_t *type_order; /* permutation sorted by offset, when not already */
	int oom;
	/* Skeleton type DIEs that stand for a type unit's type (DW_AT_signature):
	 * their key maps to an index into alias_target, the target's key. */
	struct meta_u64map aliases;
	uint64_t *alias_target;
	size_t nalias, cap_alias;
	/* The formals, locals and blocks of each abstract origin met so far,
	 * read once however many copies inherit them (dwarf_walk.c). */
	struct meta_u64map origins;          /* origin DIE offset -> index into origin_first */
	uint32_t *origin_first, *origin_count;
	size_t norigins, cap_origin_first, cap_origin_count;
	struct meta_origin_child *origin_children;
	size_t norigin_children, cap_origin_children;
	Dwarf_CU *cur_cu;     /* the unit being walked, and whether it is a */
	int cur_in_types;     /* DWARF 4 .debug_types unit */
	uint64_t cur_split;   /* key bits of its split DWARF file (0: the main one) */
	Dwarf *cur_dwp_unit;  /* when the unit comes from a .dwp package: its Dwarf */
	uint64_t cur_dwp_base; /* and its skeleton's base address */
	/* Split DWARF files (.dwo) met so far: DIE offsets restart in each, so
	 * keys carry the file's number (meta_die_key). */
	Dwarf **splits;
	size_t nsplits, cap_splits;
};

int meta_walk_dwarf(struct meta_builder *b);
void meta_walk_free(struct meta_builder *b);
int meta_resolve_types(struct meta_builder *b);
int meta_dedup_types(struct meta_model *m, struct meta_err *err);
int meta_read_elf(struct meta_model *m, struct meta_err *err);

#endif
