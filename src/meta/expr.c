/* See expr.h. */
#include <dwarf.h>
#include <stdlib.h>
#include <string.h>

#include "meta/vec.h"

#include "meta/expr.h"

int meta_uleb(const unsigned char **p, const unsigned char *end, uint64_t *out)
{
	uint64_t v = 0;
	for (int shift = 0; *p < end && shift < 64; shift += 7) {
		unsigned char b = *(*p)++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*out = v;
			return 1;
		}
	}
	return 0;
}

static int sleb(const unsigned char **p, const unsigned char *end, int64_t *out)
{
	uint64_t v = 0;
	int shift = 0;
	while (*p < end && shift < 64) {
		unsigned char b = *(*p)++;
		v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80)) {
			if (shift < 64 && (b & 0x40))
				v |= ~(uint64_t)0 << shift;
			*out = (int64_t)v;
			return 1;
		}
	}
	return 0;
}

/* The little-endian address of SIZE (4 or 8) bytes at P: raw decoding is on
 * only for little-endian files. */
static uint64_t le_addr(const unsigned char *p, int size)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	if (size == 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		return v;
	}
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
#else
	uint64_t v = 0;
	for (int i = size - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
#endif
}

int meta_expr_simple(Dwarf_Attribute *attr, int addr_size, struct meta_op *op)
{
	unsigned int form = dwarf_whatform(attr);
	if (form != DW_FORM_exprloc && form != DW_FORM_block1 && form != DW_FORM_block2 &&
	    form != DW_FORM_block4 && form != DW_FORM_block)
		return 0;
	Dwarf_Block blk;
	if (dwarf_formblock(attr, &blk) != 0)
		return 0;
	return meta_expr_decode(blk.data, blk.length, addr_size, op);
}

int meta_expr_decode(const unsigned char *p, size_t len, int addr_size, struct meta_op *op)
{
	if (len == 0)
		return 0;
	const unsigned char *end = p + len;
	uint8_t a = *p++;
	uint64_t u;
	op->atom = a;
	op->reg = 0;
	op->offset = 0;
	op->addr = 0;
	if (a >= DW_OP_reg0 && a <= DW_OP_reg31) {
		op->atom = DW_OP_reg0;
		op->reg = a - DW_OP_reg0;
	} else if (a >= DW_OP_breg0 && a <= DW_OP_breg31) {
		op->atom = DW_OP_breg0;
		op->reg = a - DW_OP_breg0;
		if (!sleb(&p, end, &op->offset))
			return 0;
	} else if (a == DW_OP_fbreg) {
		if (!sleb(&p, end, &op->offset))
			return 0;
	} else if (a == DW_OP_regx) {
		if (!meta_uleb(&p, end, &u) || u > 0xffff)
			return 0;
		op->atom = DW_OP_reg0;
		op->reg = (int)u;
	} else if (a == DW_OP_bregx) {
		if (!meta_uleb(&p, end, &u) || u > 0xffff || !sleb(&p, end, &op->offset))
			return 0;
		op->atom = DW_OP_breg0;
		op->reg = (int)u;
	} else if (a == DW_OP_addr) {
		if (end - p < addr_size || (addr_size != 4 && addr_size != 8))
			return 0;
		op->addr = le_addr(p, addr_size);
		p += addr_size;
	} else if (a != DW_OP_call_frame_cfa) {
		return 0;
	}
	return p == end;
}

static int addr(const unsigned char **p, const unsigned char *end, int size, uint64_t *out)
{
	if (end - *p < size)
		return 0;
	*out = le_addr(*p, size);
	*p += size;
	return 1;
}

static int push(struct meta_loc_entry **out, size_t *n, size_t *cap, uint64_t lo, uint64_t hi,
		const unsigned char *e, size_t len)
{
	struct meta_loc_entry x = { lo, hi, e, len };
	return META_PUSH(*out, *n, *cap, x);
}

int meta_loclist_offset(Dwarf_Attribute *attr, int version, uint64_t *off)
{
	unsigned int form = dwarf_whatform(attr);
	if (form != DW_FORM_sec_offset && !(version < 4 && (form == DW_FORM_data4 || form == DW_FORM_data8)))
		return -1;
	Dwarf_Word w;
	if (dwarf_formudata(attr, &w) != 0)
		return -1;
	*off = w;
	return 0;
}

long meta_loclist_read(const unsigned char *sec, size_t size, uint64_t off, int addr_size,
		       uint64_t cu_base, int version, struct meta_loc_entry **out, size_t *cap)
{
	if (!sec || off >= size || (addr_size != 4 && addr_size != 8))
		return -2;
	const unsigned char *p = sec + off, *end = sec + size;
	uint64_t base = cu_base, all_ones = addr_size == 8 ? UINT64_MAX : 0xffffffffu;
	size_t n = 0;
	for (int guard = 0; guard < 1 << 20; guard++) {
		uint64_t a, b, len;
		if (version < 5) {
			if (!addr(&p, end, addr_size, &a) || !addr(&p, end, addr_size, &b))
				return -1;
			if (a == 0 && b == 0)
				return (long)n;
			if (a == all_ones) {
				base = b;
				continue;
			}
			if (end - p < 2)
				return -1;
			len = (uint64_t)p[0] | (uint64_t)p[1] << 8;
			p += 2;
			a += base;
			b += base;
		} else {
			if (p >= end)
				return -1;
			uint8_t kind = *p++;
			switch (kind) {
			case DW_LLE_end_of_list:
				return (long)n;
			case DW_LLE_base_address:
				if (!addr(&p, end, addr_size, &base))
					return -1;
				continue;
			case DW_LLE_offset_pair:
				if (!meta_uleb(&p, end, &a) || !meta_uleb(&p, end, &b))
					return -1;
				a += base;
				b += base;
				break;
			case DW_LLE_default_location:
				a = 0;
				b = UINT64_MAX;
				break;
			case DW_LLE_start_end:
				if (!addr(&p, end, addr_size, &a) || !addr(&p, end, addr_size, &b))
					return -1;
				break;
			case DW_LLE_start_length:
				if (!addr(&p, end, addr_size, &a) || !meta_uleb(&p, end, &b))
					return -1;
				b += a;
				break;
			default:
				return -2; /* addrx forms: libdw knows .debug_addr */
			}
			if (!meta_uleb(&p, end, &len))
				return -1;
		}
		if ((uint64_t)(end - p) < len)
			return -1;
		if (push(out, &n, cap, a, b, p, (size_t)len))
			return -1;
		p += len;
	}
	return -1;
}
