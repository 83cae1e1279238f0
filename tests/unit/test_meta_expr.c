/* Unit tests of the raw DWARF expression and location-list readers
 * (src/meta/expr.c): hand-made bytes for every entry kind, and libdw's own
 * dwarf_getlocations as the oracle over every location list of this test
 * binary. */
#include <dwarf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "meta/expr.h"
#include "meta/model.h"

static void decodes_single_operations(void **state)
{
	(void)state;
	struct meta_op op;
	const unsigned char fbreg[] = { DW_OP_fbreg, 0x6c };           /* -20 */
	assert_int_equal(meta_expr_decode(fbreg, sizeof fbreg, 8, &op), 1);
	assert_int_equal(op.atom, DW_OP_fbreg);
	assert_int_equal(op.offset, -20);
	const unsigned char breg[] = { DW_OP_breg7, 0x80, 0x01 };      /* rsp + 128 */
	assert_int_equal(meta_expr_decode(breg, sizeof breg, 8, &op), 1);
	assert_int_equal(op.atom, DW_OP_breg0);
	assert_int_equal(op.reg, 7);
	assert_int_equal(op.offset, 128);
	const unsigned char bregx[] = { DW_OP_bregx, 0x11, 0x7f };     /* r17 - 1 */
	assert_int_equal(meta_expr_decode(bregx, sizeof bregx, 8, &op), 1);
	assert_int_equal(op.reg, 17);
	assert_int_equal(op.offset, -1);
	const unsigned char reg[] = { DW_OP_reg3 };
	assert_int_equal(meta_expr_decode(reg, sizeof reg, 8, &op), 1);
	assert_int_equal(op.atom, DW_OP_reg0);
	assert_int_equal(op.reg, 3);
	const unsigned char regx[] = { DW_OP_regx, 0x21 };
	assert_int_equal(meta_expr_decode(regx, sizeof regx, 8, &op), 1);
	assert_int_equal(op.reg, 33);
	const unsigned char addr[] = { DW_OP_addr, 0x10, 0x32, 0x54, 0x76, 0, 0, 0, 0 };
	assert_int_equal(meta_expr_decode(addr, sizeof addr, 8, &op), 1);
	assert_int_equal(op.atom, DW_OP_addr);
	assert_int_equal(op.addr, 0x76543210);
	const unsigned char cfa[] = { DW_OP_call_frame_cfa };
	assert_int_equal(meta_expr_decode(cfa, sizeof cfa, 8, &op), 1);
	assert_int_equal(op.atom, DW_OP_call_frame_cfa);
}

static void rejects_what_it_does_not_reduce(void **state)
{
	(void)state;
	struct meta_op op;
	const unsigned char two_ops[] = { DW_OP_breg7, 0x08, DW_OP_deref };
	assert_int_equal(meta_expr_decode(two_ops, sizeof two_ops, 8, &op), 0);
	const unsigned char stack_value[] = { DW_OP_lit1, DW_OP_stack_value };
	assert_int_equal(meta_expr_decode(stack_value, sizeof stack_value, 8, &op), 0);
	const unsigned char truncated_sleb[] = { DW_OP_fbreg, 0x80 };
	assert_int_equal(meta_expr_decode(truncated_sleb, sizeof truncated_sleb, 8, &op), 0);
	const unsigned char short_addr[] = { DW_OP_addr, 1, 2, 3 };
	assert_int_equal(meta_expr_decode(short_addr, sizeof short_addr, 8, &op), 0);
	assert_int_equal(meta_expr_decode(short_addr, 0, 8, &op), 0);
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void reads_dwarf4_lists(void **state)
{
	(void)state;
	unsigned char sec[128] = { 0 };
	size_t n = 0;
	put64(sec + n, 0x10), put64(sec + n + 8, 0x20), n += 16;        /* [base+0x10, base+0x20) */
	sec[n++] = 1, sec[n++] = 0, sec[n++] = DW_OP_reg0;
	put64(sec + n, UINT64_MAX), put64(sec + n + 8, 0x1000), n += 16; /* new base 0x1000 */
	put64(sec + n, 0), put64(sec + n + 8, 8), n += 16;
	sec[n++] = 2, sec[n++] = 0, sec[n++] = DW_OP_fbreg, sec[n++] = 0x70;
	n += 16;                                                      /* end of list */
	struct meta_loc_entry *e = NULL;
	size_t cap = 0;
	long got = meta_loclist_read(sec, n, 0, 8, 0x400000, 4, &e, &cap);
	assert_int_equal(got, 2);
	assert_int_equal(e[0].lo, 0x400010);
	assert_int_equal(e[0].hi, 0x400020);
	assert_int_equal(e[0].len, 1);
	assert_int_equal(e[0].expr[0], DW_OP_reg0);
	assert_int_equal(e[1].lo, 0x1000);
	assert_int_equal(e[1].hi, 0x1008);
	assert_int_equal(e[1].len, 2);
	/* cut off before its end: corrupt, never read past the section */
	assert_int_equal(meta_loclist_read(sec, 20, 0, 8, 0, 4, &e, &cap), -1);
	/* offset outside the section: left to libdw */
	assert_int_equal(meta_loclist_read(sec, n, n + 5, 8, 0, 4, &e, &cap), -2);
	free(e);
}

static void reads_dwarf5_lists(void **state)
{
	(void)state;
	unsigned char sec[128];
	size_t n = 0;
	sec[n++] = DW_LLE_base_address, put64(sec + n, 0x2000), n += 8;
	sec[n++] = DW_LLE_offset_pair, sec[n++] = 0x04, sec[n++] = 0x10, sec[n++] = 1, sec[n++] = DW_OP_reg1;
	sec[n++] = DW_LLE_start_length, put64(sec + n, 0x3000), n += 8;
	sec[n++] = 0x20, sec[n++] = 1, sec[n++] = DW_OP_reg2;
	sec[n++] = DW_LLE_start_end, put64(sec + n, 0x5000), put64(sec + n + 8, 0x5004), n += 16;
	sec[n++] = 1, sec[n++] = DW_OP_reg3;
	sec[n++] = DW_LLE_default_location, sec[n++] = 1, sec[n++] = DW_OP_reg4;
	sec[n++] = DW_LLE_end_of_list;
	struct meta_loc_entry *e = NULL;
	size_t cap = 0;
	assert_int_equal(meta_loclist_read(sec, n, 0, 8, 0x400000, 5, &e, &cap), 4);
	assert_int_equal(e[0].lo, 0x2004);
	assert_int_equal(e[0].hi, 0x2010);
	assert_int_equal(e[1].lo, 0x3000);
	assert_int_equal(e[1].hi, 0x3020);
	assert_int_equal(e[2].lo, 0x5000);
	assert_int_equal(e[2].hi, 0x5004);
	assert_int_equal(e[3].lo, 0);
	assert_int_equal(e[3].hi, UINT64_MAX);
	assert_int_equal(e[3].expr[0], DW_OP_reg4);
	const unsigned char addrx[] = { DW_LLE_base_addressx, 0x01, DW_LLE_end_of_list };
	assert_int_equal(meta_loclist_read(addrx, sizeof addrx, 0, 8, 0, 5, &e, &cap), -2);
	const unsigned char long_expr[] = { DW_LLE_offset_pair, 0, 4, 0x7f, DW_OP_reg0 };
	assert_int_equal(meta_loclist_read(long_expr, sizeof long_expr, 0, 8, 0, 5, &e, &cap), -1);
	free(e);
}

/* Every location list of this binary, read both ways. */
static void agrees_with_libdw(void **state)
{
	(void)state;
	struct meta_err err;
	struct meta_model *m;
	assert_int_equal(meta_model_open("/proc/self/exe", &m, &err), 0);
	struct meta_loc_entry *e = NULL;
	size_t cap = 0, lists = 0, entries = 0;
	for (size_t i = 0; i < m->nvars; i++) {
		Dwarf_Attribute attr = m->vars[i].location;
		if (!m->vars[i].has_location)
			continue;
		Dwarf_Die cudie;
		Dwarf_Half version;
		Dwarf_Addr base = 0;
		assert_non_null(dwarf_cu_die(attr.cu, &cudie, &version, NULL, NULL, NULL, NULL, NULL));
		dwarf_lowpc(&cudie, &base);
		uint64_t off;
		if (meta_loclist_offset(&attr, version, &off))
			continue;
		int v5 = version >= 5;
		long n = meta_loclist_read(v5 ? m->raw_loclists : m->raw_loc,
					   v5 ? m->raw_loclists_size : m->raw_loc_size, off, m->addr_size, base,
					   version, &e, &cap);
		if (n == -2)
			continue;
		assert_true(n >= 0);
		Dwarf_Addr b, start, end;
		Dwarf_Op *ops;
		size_t nops;
		ptrdiff_t pos = 0;
		long k = 0;
		while ((pos = dwarf_getlocations(&attr, pos, &b, &start, &end, &ops, &nops)) > 0) {
			assert_true(k < n);
			assert_int_equal(e[k].lo, start);
			assert_int_equal(e[k].hi, end);
			struct meta_op op;
			if (nops == 1 && meta_expr_decode(e[k].expr, e[k].len, m->addr_size, &op)) {
				if (op.atom == DW_OP_fbreg)
					assert_int_equal((int64_t)ops[0].number, op.offset);
				if (op.atom == DW_OP_breg0 && ops[0].atom != DW_OP_bregx)
					assert_int_equal(ops[0].atom, DW_OP_breg0 + op.reg);
				if (op.atom == DW_OP_reg0 && ops[0].atom != DW_OP_regx)
					assert_int_equal(ops[0].atom, DW_OP_reg0 + op.reg);
			}
			k++;
		}
		/* libdw stops at expressions it cannot parse (e.g. DW_OP_GNU_uninit) */
		if (pos == 0)
			assert_int_equal(k, n);
		lists++;
		entries += (size_t)n;
	}
	free(e);
	meta_model_free(m);
	assert_true(lists > 20);
	assert_true(entries > lists);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(decodes_single_operations),
		cmocka_unit_test(rejects_what_it_does_not_reduce),
		cmocka_unit_test(reads_dwarf4_lists),
		cmocka_unit_test(reads_dwarf5_lists),
		cmocka_unit_test(agrees_with_libdw),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
