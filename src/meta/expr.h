/* A decoder for the one-operation DWARF expressions that make up nearly all
 * variable locations (DW_OP_fbreg N, DW_OP_bregR N, DW_OP_regR, DW_OP_addr A,
 * DW_OP_call_frame_cfa). It reads the attribute's bytes directly, which
 * avoids libdw's per-expression cache (a search tree that grows with every
 * location and costs as much to tear down); anything else goes to libdw. */
#ifndef KILN_META_EXPR_H
#define KILN_META_EXPR_H

#include <elfutils/libdw.h>
#include <stdint.h>

struct meta_op {
	uint8_t atom;    /* DW_OP_*: fbreg, breg0 (reg holds R), reg0 (reg holds R), addr, call_frame_cfa */
	int reg;
	int64_t offset;  /* fbreg/breg offset */
	uint64_t addr;   /* DW_OP_addr */
};

/* 1 when ATTR (an exprloc/block form) is one simple operation, decoded into
 * OP; 0 when it is something else (caller falls back to libdw). */
int meta_expr_simple(Dwarf_Attribute *attr, int addr_size, struct meta_op *op);
/* The same over raw expression bytes. */
int meta_expr_decode(const unsigned char *p, size_t len, int addr_size, struct meta_op *op);

/* One entry of a location list: expression bytes valid over [lo, hi). */
struct meta_loc_entry {
	uint64_t lo, hi;
	const unsigned char *expr;
	size_t len;
};

/* Section offset of the location list ATTR refers to, for the reader below:
 * 0 and *OFF set, or -1 when ATTR is not a plain section offset (e.g.
 * DW_FORM_loclistx, an exprloc). */
int meta_loclist_offset(Dwarf_Attribute *attr, int version, uint64_t *off);

/* Reads the location list at OFF (DWARF 4 .debug_loc, VERSION < 5, or DWARF 5
 * .debug_loclists) straight from the section bytes SEC/SIZE. Returns the
 * number of entries (stored through *OUT, grown with *CAP), -2 when the list
 * uses forms this reader leaves to libdw (addrx), -1 when it is corrupt. */
long meta_loclist_read(const unsigned char *sec, size_t size, uint64_t off, int addr_size,
		       uint64_t cu_base, int version, struct meta_loc_entry **out, size_t *cap);

/* Reads an unsigned LEB128 number at *P (before END) and moves *P past it:
 * 1, or 0 when it runs past END. */
int meta_uleb(const unsigned char **p, const unsigned char *end, uint64_t *out);

#endif
