/* Where each variable of a function lives, by PC range, relative to the CFA
 * when it is in the frame.
 *
 * DW_OP_fbreg with a DW_OP_call_frame_cfa frame base is CFA-relative as is.
 * A register-relative location (DW_OP_bregN, or fbreg over a bregN frame
 * base) is translated through the CFI rows covering its range: where the CFA
 * rule is "CFA = regN + k", the variable is at CFA + (off - k). One-operation
 * expressions and location lists are read straight from the bytes
 * (expr.c); anything else goes through libdw. */
#include <dwarf.h>
#include <stdlib.h>
#include <string.h>

#include "meta/tools/frames.h"
#include "meta/vec.h"

const char *const meta_loc_names[] = { "cfa", "reg", "static", "breg", "computed", "complex", "none" };

static int add_loc(struct frame_state *s, struct loc l)
{
	if (l.hi <= l.lo)
		return 0;
	if (s->nlocs) { /* merge with an adjacent identical location */
		struct loc *p = &s->locs[s->nlocs - 1];
		if (p->hi == l.lo && p->kind == l.kind && p->reg == l.reg && p->offset == l.offset) {
			p->hi = l.hi;
			return 0;
		}
	}
	return META_PUSH(s->locs, s->nlocs, s->caplocs, l);
}

/* CFI rows covering [lo, hi) of the current function, computed once. */
static int load_rows(struct frame_state *s, const struct meta_function *f)
{
	if (s->rows_done)
		return 0;
	s->rows_done = 1;
	for (uint64_t pc = f->low; pc < f->high;) {
		struct cfi_row row;
		if (meta_cfa_at(s->cfi, &s->cfi_rows, s->m, pc, &row))
			break; /* no CFI from here on: those PCs stay unresolved */
		if (row.hi <= pc)
			break;
		if (META_PUSH(s->rows, s->nrows, s->caprows, row))
			return -1;
		pc = row.hi;
	}
	return 0;
}

/* Register-relative location REG+OFF over [lo, hi), split by CFI rows. */
static int breg_loc(struct frame_state *s, const struct meta_function *f, uint64_t lo, uint64_t hi,
		    int reg, int64_t off)
{
	if (load_rows(s, f))
		return -1;
	uint64_t pc = lo;
	for (size_t i = 0; i < s->nrows && pc < hi; i++) {
		const struct cfi_row *r = &s->rows[i];
		if (r->hi <= pc || r->lo >= hi)
			continue;
		uint64_t a = r->lo > pc ? r->lo : pc, b = r->hi < hi ? r->hi : hi;
		if (a > pc && add_loc(s, (struct loc){ pc, a, LOC_BREG, reg, off }))
			return -1;
		struct loc l = { a, b, LOC_BREG, reg, off };
		if (r->reg == reg) {
			l.kind = LOC_CFA;
			l.offset = off - r->off;
		}
		if (add_loc(s, l))
			return -1;
		pc = b;
	}
	return pc < hi ? add_loc(s, (struct loc){ pc, hi, LOC_BREG, reg, off }) : 0;
}

/* The raw decoder's result as the libdw operation it stands for. */
static Dwarf_Op as_op(const struct meta_op *o)
{
	Dwarf_Op op = { .atom = o->atom };
	if (o->atom == DW_OP_reg0) {
		op.atom = o->reg < 32 ? (uint8_t)(DW_OP_reg0 + o->reg) : DW_OP_regx;
		op.number = (Dwarf_Word)o->reg;
	} else if (o->atom == DW_OP_breg0) {
		op.atom = o->reg < 32 ? (uint8_t)(DW_OP_breg0 + o->reg) : DW_OP_bregx;
		op.number = o->reg < 32 ? (Dwarf_Word)o->offset : (Dwarf_Word)o->reg;
		op.number2 = (Dwarf_Word)o->offset;
	} else if (o->atom == DW_OP_fbreg) {
		op.number = (Dwarf_Word)o->offset;
	} else if (o->atom == DW_OP_addr) {
		op.number = o->addr;
	}
	return op;
}

/* The function's frame base: 0 the CFA itself, 1 register REG + OFF, -1 other. */
static int frame_base(const struct meta_model *m, const struct meta_function *f, int *reg, int64_t *off)
{
	Dwarf_Op *ops, one;
	size_t n;
	struct meta_op raw;
	if (!f->has_frame_base)
		return -1;
	if (m->addr_size && meta_expr_simple((Dwarf_Attribute *)&f->frame_base, m->addr_size, &raw)) {
		one = as_op(&raw);
		ops = &one;
		n = 1;
	} else {
		/* libdw caches the expression (not thread-safe); the result stays valid */
		pthread_mutex_lock((pthread_mutex_t *)&m->lock);
		int bad = dwarf_getlocation((Dwarf_Attribute *)&f->frame_base, &ops, &n) != 0 || n != 1;
		pthread_mutex_unlock((pthread_mutex_t *)&m->lock);
		if (bad)
			return -1;
	}
	if (ops[0].atom == DW_OP_call_frame_cfa)
		return 0;
	if (ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31) {
		*reg = ops[0].atom - DW_OP_breg0;
		*off = (int64_t)ops[0].number;
		return 1;
	}
	if (ops[0].atom >= DW_OP_reg0 && ops[0].atom <= DW_OP_reg31) {
		/* The register's value is the frame base (clang: DW_OP_reg6 rbp). */
		*reg = ops[0].atom - DW_OP_reg0;
		*off = 0;
		return 1;
	}
	if (ops[0].atom == DW_OP_bregx || ops[0].atom == DW_OP_regx) {
		*reg = (int)ops[0].number;
		*off = ops[0].atom == DW_OP_bregx ? (int64_t)ops[0].number2 : 0;
		return 1;
	}
	return -1;
}

/* One location expression valid over [lo, hi). */
static int describe(struct frame_state *s, const struct meta_function *f, uint64_t lo, uint64_t hi,
		    const Dwarf_Op *ops, size_t n)
{
	struct loc l = { lo, hi, LOC_COMPLEX, 0, 0 };
	if (n == 0)
		return add_loc(s, (struct loc){ lo, hi, LOC_NONE, 0, 0 });
	uint8_t last = ops[n - 1].atom;
	if (last == DW_OP_stack_value || last == DW_OP_implicit_value ||
	    ops[0].atom == DW_OP_implicit_pointer || ops[0].atom == DW_OP_GNU_implicit_pointer ||
	    ops[0].atom == DW_OP_entry_value || ops[0].atom == DW_OP_GNU_entry_value) {
		l.kind = LOC_COMPUTED;
		return add_loc(s, l);
	}
	if (n != 1)
		return add_loc(s, l);
	uint8_t a = ops[0].atom;
	if (a >= DW_OP_reg0 && a <= DW_OP_reg31) {
		l.kind = LOC_REG;
		l.reg = a - DW_OP_reg0;
	} else if (a == DW_OP_regx) {
		l.kind = LOC_REG;
		l.reg = (int)ops[0].number;
	} else if (a == DW_OP_addr) {
		l.kind = LOC_STATIC;
		l.offset = (int64_t)ops[0].number;
	} else if (a >= DW_OP_breg0 && a <= DW_OP_breg31) {
		return breg_loc(s, f, lo, hi, a - DW_OP_breg0, (int64_t)ops[0].number);
	} else if (a == DW_OP_fbreg) {
		if (!s->fb_known) { /* once per function */
			s->fb_reg = 0;
			s->fb_off = 0;
			s->fb_kind = frame_base(s->m, f, &s->fb_reg, &s->fb_off);
			s->fb_known = 1;
		}
		if (s->fb_kind == 0) {
			l.kind = LOC_CFA;
			l.offset = (int64_t)ops[0].number;
		} else if (s->fb_kind == 1) {
			return breg_loc(s, f, lo, hi, s->fb_reg, s->fb_off + (int64_t)ops[0].number);
		}
	}
	return add_loc(s, l);
}

/* An expression the raw decoder does not take apart: classified by its first
 * operation and last byte (a value computed on the DWARF stack, or else an
 * address computation too complex to be a frame slot). */
static int describe_raw(struct frame_state *s, const struct meta_function *f, uint64_t lo, uint64_t hi,
			const unsigned char *e, size_t len)
{
	struct meta_op raw;
	if (meta_expr_decode(e, len, s->m->addr_size, &raw)) {
		Dwarf_Op one = as_op(&raw);
		return describe(s, f, lo, hi, &one, 1);
	}
	struct loc l = { lo, hi, LOC_COMPLEX, 0, 0 };
	if (len == 0)
		l.kind = LOC_NONE;
	else if (e[0] == DW_OP_implicit_pointer || e[0] == DW_OP_GNU_implicit_pointer ||
		 e[0] == DW_OP_entry_value || e[0] == DW_OP_GNU_entry_value ||
		 e[0] == DW_OP_implicit_value || e[len - 1] == DW_OP_stack_value)
		l.kind = LOC_COMPUTED;
	return add_loc(s, l);
}

/* The section offset of the location list ATTR refers to, as
 * meta_loclist_offset() gives it: a plain offset of the unit's offset size
 * is read straight from the attribute (libdw checked that it fits in the
 * unit when it read the DIE). */
static int list_offset(const struct frame_state *s, const Dwarf_Attribute *attr, uint64_t *off)
{
	int size = attr->form == DW_FORM_sec_offset ? s->cu_offset_size :
		   s->cu_version < 4 && attr->form == DW_FORM_data4 ? 4 :
		   s->cu_version < 4 && attr->form == DW_FORM_data8 ? 8 : 0;
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
	size = 0; /* (raw reading is for little-endian files only) */
#endif
	if (size == 4) {
		uint32_t v;
		memcpy(&v, attr->valp, 4);
		*off = v;
	} else if (size == 8) {
		memcpy(off, attr->valp, 8);
	} else {
		return meta_loclist_offset((Dwarf_Attribute *)attr, s->cu_version, off);
	}
	return 0;
}

/* Location list of V through the raw reader: 1 done, 0 leave it to libdw. */
static int raw_list(struct frame_state *s, const struct meta_function *f, const struct meta_var *v,
		    Dwarf_Attribute *attr)
{
	struct meta_model *m = s->m;
	if (!m->addr_size || (!m->raw_loc && !m->raw_loclists))
		return 0;
	if (attr->cu != s->cu) {
		Dwarf_Die cudie;
		Dwarf_Half version;
		Dwarf_Addr base = 0;
		/* (dwarf_lowpc may cache the unit's .debug_addr base) */
		uint8_t offset_size = 0;
		pthread_mutex_lock(&m->lock);
		int ok = dwarf_cu_die(attr->cu, &cudie, &version, NULL, NULL, NULL, NULL, NULL) != NULL &&
			 dwarf_cu_info(attr->cu, NULL, NULL, NULL, NULL, NULL, NULL, &offset_size) == 0;
		if (ok && dwarf_lowpc(&cudie, &base) != 0)
			base = 0;
		pthread_mutex_unlock(&m->lock);
		if (!ok)
			return 0;
		s->cu = attr->cu;
		s->cu_base = base;
		s->cu_version = version;
		s->cu_offset_size = offset_size;
		/* a split unit's lists are in its .dwo: libdw reads those */
		s->cu_split = dwarf_cu_getdwarf(attr->cu) != m->dwarf;
	}
	if (s->cu_split)
		return 0;
	uint64_t off;
	if (list_offset(s, attr, &off))
		return 0;
	int v5 = s->cu_version >= 5;
	long n = meta_loclist_read(v5 ? m->raw_loclists : m->raw_loc, v5 ? m->raw_loclists_size : m->raw_loc_size,
				   off, m->addr_size, s->cu_base, s->cu_version, &s->entries, &s->capentries);
	if (n == -2)
		return 0;
	if (n < 0) {
		meta_err_warn(s->warn, "%s: variable '%s' in %s: corrupt location list", m->path,
			  v->name ? v->name : "", f->name ? f->name : "?");
		return 1;
	}
	const struct meta_range *scope = &m->ranges[v->scope_first];
	for (long i = 0; i < n; i++) {
		const struct meta_loc_entry *e = &s->entries[i];
		for (uint32_t r = 0; r < v->scope_count; r++) {
			uint64_t lo = scope[r].lo > e->lo ? scope[r].lo : e->lo;
			uint64_t hi = scope[r].hi < e->hi ? scope[r].hi : e->hi;
			if (lo < hi && describe_raw(s, f, lo, hi, e->expr, e->len))
				return -1;
		}
	}
	return 1;
}

/* All locations of V, clipped to its scope's ranges. */
int meta_var_locations(struct frame_state *s, const struct meta_function *f, const struct meta_var *v)
{
	const struct meta_range *scope = &s->m->ranges[v->scope_first];
	s->nlocs = 0;
	if (v->is_static) { /* a function-scope static: one address throughout */
		for (uint32_t r = 0; r < v->scope_count; r++)
			if (add_loc(s, (struct loc){ scope[r].lo, scope[r].hi, LOC_STATIC, 0,
						     (int64_t)v->static_addr }))
				return -1;
		return 0;
	}
	if (!v->has_location) {
		for (uint32_t r = 0; r < v->scope_count; r++)
			if (add_loc(s, (struct loc){ scope[r].lo, scope[r].hi, LOC_NONE, 0, 0 }))
				return -1;
		return 0;
	}
	Dwarf_Addr base, start, end;
	Dwarf_Op *ops;
	size_t n;
	ptrdiff_t off = 0;
	Dwarf_Attribute attr = v->location;
	struct meta_op raw;
	if (s->m->addr_size && meta_expr_simple(&attr, s->m->addr_size, &raw)) {
		Dwarf_Op one = as_op(&raw);
		for (uint32_t r = 0; r < v->scope_count; r++)
			if (describe(s, f, scope[r].lo, scope[r].hi, &one, 1))
				return -1;
		return 0;
	}
	int done = raw_list(s, f, v, &attr);
	if (done)
		return done < 0 ? -1 : 0;
	/* libdw's location cache is not thread-safe: the list is read under the
	 * model's lock, then described (which may need the lock for CFI) */
	struct list_entry { Dwarf_Addr start, end; Dwarf_Op *ops; size_t n; } *list = NULL;
	size_t nlist = 0, caplist = 0;
	int oom = 0;
	pthread_mutex_lock(&s->m->lock);
	while ((off = dwarf_getlocations(&attr, off, &base, &start, &end, &ops, &n)) > 0) {
		struct list_entry e = { start, end, ops, n };
		if (META_PUSH(list, nlist, caplist, e)) {
			oom = 1;
			break;
		}
	}
	const char *why = off < 0 ? dwarf_errmsg(-1) : NULL;
	pthread_mutex_unlock(&s->m->lock);
	for (size_t i = 0; i < nlist && !oom; i++) {
		for (uint32_t r = 0; r < v->scope_count && !oom; r++) {
			uint64_t lo = scope[r].lo > list[i].start ? scope[r].lo : list[i].start;
			uint64_t hi = scope[r].hi < list[i].end ? scope[r].hi : list[i].end;
			if (lo < hi && describe(s, f, lo, hi, list[i].ops, list[i].n))
				oom = 1;
		}
	}
	free(list);
	if (oom)
		return -1;
	if (why)
		meta_err_warn(s->warn, "%s: variable '%s' in %s: unreadable location list: %s", s->m->path,
			  v->name ? v->name : "", f->name ? f->name : "?", why);
	return 0;
}

void meta_frame_reset(struct frame_state *s)
{
	s->rows_done = 0;
	s->nrows = 0;
	s->fb_known = 0;
}

void meta_frame_state_free(struct frame_state *s)
{
	meta_cfi_rows_free(&s->cfi_rows);
	free(s->rows);
	free(s->locs);
	free(s->entries);
}
