/* The CFA rule at a PC, for the frames tool: what dwarf_cfi_addrframe() and
 * dwarf_frame_cfa() on the model's .eh_frame (then its .debug_frame) say,
 * without asking libdw for every row.
 *
 * libdw finds the FDE and plays its program from the start on every call (a
 * search, a copy of the register state and a free, each time): a function
 * with N rows costs N of those. Here the FDEs of .eh_frame are read once
 * into a sorted index and an FDE's program is played once, into all of its
 * rows. Only the CFA rule is followed. Anything this reader does not take
 * apart exactly as libdw would (an expression, a DW_CFA_set_loc, an opcode
 * it does not know, a malformed operand, a PC going backwards, an FDE that
 * overlaps another) is not guessed: those rows are asked of libdw, as is
 * every PC no indexed FDE covers. Which FDE covers a PC is what libdw finds
 * too: the index is used only when no two FDEs overlap and, when libdw
 * searches .eh_frame_hdr's table, when that table lists exactly these FDEs. */
#include <dwarf.h>
#include <stdlib.h>
#include <string.h>

#include "meta/expr.h"
#include "meta/tools/frames.h"
#include "meta/vec.h"

enum { ROW_OK, ROW_LIBDW };

struct meta_cfi_row {
	uint64_t lo, hi;
	int status;
	int reg; /* -1: the CFA is undefined (libdw: no operation) */
	int64_t off;
};

enum cfa_kind { CFA_UNDEF, CFA_OFFSET, CFA_EXPR, CFA_INVALID };

struct cfa {
	uint8_t kind;
	int reg;
	int64_t off;
};

struct cie {
	uint64_t offset;
	uint64_t code_align;
	int64_t data_align;
	uint8_t fde_encoding;
	uint8_t sized; /* 'z': FDEs carry their augmentation's length */
	uint8_t usable; /* its initial instructions were played out */
	struct cfa initial;
};

struct fde {
	uint64_t lo, hi;
	const unsigned char *ins, *end;
	uint64_t offset; /* in .eh_frame */
	uint32_t cie;
};

/* Read-only once built: threads share it, each with rows of its own. */
struct meta_cfi {
	struct cie *cies;
	size_t ncies, capcies;
	struct fde *fdes;
	size_t nfdes, capfdes;
};

/* The libdw path: the row covering PC in CFI (libdw's CFI cache is not
 * thread-safe: under the model's lock). */
static int libdw_rule(struct meta_model *m, Dwarf_CFI *cfi, uint64_t pc, struct cfi_row *row)
{
	Dwarf_Frame *fr;
	if (!cfi)
		return -1;
	pthread_mutex_lock(&m->lock);
	int ok = dwarf_cfi_addrframe(cfi, pc, &fr) == 0;
	if (ok) {
		Dwarf_Addr start, end;
		Dwarf_Op *ops;
		size_t nops;
		ok = dwarf_frame_info(fr, &start, &end, NULL) >= 0 && dwarf_frame_cfa(fr, &ops, &nops) == 0;
		if (ok) {
			row->lo = start;
			row->hi = end;
			row->reg = -1;
			row->off = 0;
			if (nops == 1 && ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31) {
				row->reg = ops[0].atom - DW_OP_breg0;
				row->off = (int64_t)ops[0].number;
			} else if (nops == 1 && ops[0].atom == DW_OP_bregx) {
				row->reg = (int)ops[0].number;
				row->off = (int64_t)ops[0].number2;
			}
		}
		free(fr);
	}
	pthread_mutex_unlock(&m->lock);
	return ok ? 0 : -1;
}

static int libdw_both(struct meta_model *m, uint64_t pc, struct cfi_row *row)
{
	return libdw_rule(m, m->eh_cfi, pc, row) && libdw_rule(m, m->debug_cfi, pc, row) ? -1 : 0;
}

/* LEB128 numbers of at most 9 bytes (longer ones: not decoded here). */
static int uleb(const unsigned char **p, const unsigned char *end, uint64_t *v)
{
	const unsigned char *q = *p;
	if (end - q > 9)
		end = q + 9;
	return meta_uleb(p, end, v);
}

static int sleb(const unsigned char **p, const unsigned char *end, int64_t *v)
{
	uint64_t u = 0;
	int shift = 0;
	for (const unsigned char *q = *p; q < end && shift < 63; shift += 7) {
		unsigned char b = *q++;
		u |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			if (b & 0x40)
				u |= ~(uint64_t)0 << (shift + 7);
			*v = (int64_t)u;
			*p = q;
			return 1;
		}
	}
	return 0;
}

/* A value of ENCODING (pcrel or absolute, 2, 4 or 8 bytes; anything else is
 * refused) at *P in the section at VADDR/BASE; in .eh_frame_hdr also
 * datarel, from the section's address as libdw takes it. */
static int encoded_in(const unsigned char **p, const unsigned char *end, uint8_t encoding, uint64_t vaddr,
		   const unsigned char *base, int base_is_hdr, uint64_t *out)
{
	uint64_t v = 0;
	if (encoding & 0x80)
		return 0; /* indirect */
	if ((encoding & 0x70) == DW_EH_PE_pcrel)
		v = vaddr + (uint64_t)(*p - base);
	else if ((encoding & 0x70) == DW_EH_PE_datarel && base_is_hdr)
		v = vaddr;
	else if ((encoding & 0x70) != DW_EH_PE_absptr)
		return 0;
	int size = 0, sign = 0;
	switch (encoding & 0x0f) {
	case DW_EH_PE_udata2: size = 2; break;
	case DW_EH_PE_sdata2: size = 2; sign = 1; break;
	case DW_EH_PE_udata4: size = 4; break;
	case DW_EH_PE_sdata4: size = 4; sign = 1; break;
	case DW_EH_PE_udata8: case DW_EH_PE_sdata8: size = 8; break;
	default: return 0;
	}
	if (end - *p < size)
		return 0;
	uint64_t x = 0;
	for (int i = size - 1; i >= 0; i--)
		x = x << 8 | (*p)[i];
	if (sign && size < 8 && (x >> (size * 8 - 1)))
		x |= ~(uint64_t)0 << (size * 8);
	*p += size;
	*out = v + x;
	return 1;
}

static int encoded(const unsigned char **p, const unsigned char *end, uint8_t encoding, uint64_t vaddr,
		   const unsigned char *base, uint64_t *out)
{
	return encoded_in(p, end, encoding, vaddr, base, 0, out);
}

/* Plays CFA-changing instructions of [P, END) from state *S. In a CIE
 * (ROWS NULL) an advance is an error, as in libdw; in an FDE each advance
 * ends a row [*LOC, new loc) with the state before it, up to HI. Returns 1
 * when the program ran to its end, 0 when from *LOC on it must be left to
 * libdw (its rows then are not added). */
static int play(struct meta_cfi_rows *out, const struct cie *cie, const unsigned char *p, const unsigned char *end,
		struct cfa *s, uint64_t *loc, uint64_t hi, int in_fde)
{
	struct cfa stack[16];
	int depth = 0;
	while (p < end) {
		uint8_t op = *p++;
		uint64_t a, b;
		int64_t sa;
		uint64_t delta;
		switch (op & 0xc0) {
		case DW_CFA_advance_loc:
			delta = op & 0x3f;
			goto advance;
		case DW_CFA_offset:
			if (!uleb(&p, end, &a))
				return 0;
			continue;
		case DW_CFA_restore:
			if (!in_fde)
				return 0;
			continue;
		}
		switch (op) {
		case DW_CFA_advance_loc1:
			if (end - p < 1)
				return 0;
			delta = p[0];
			p += 1;
			goto advance;
		case DW_CFA_advance_loc2:
			if (end - p < 2)
				return 0;
			delta = (uint64_t)p[0] | (uint64_t)p[1] << 8;
			p += 2;
			goto advance;
		case DW_CFA_advance_loc4:
			if (end - p < 4)
				return 0;
			delta = (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
			p += 4;
			goto advance;
		case DW_CFA_def_cfa:
			if (!uleb(&p, end, &a) || !uleb(&p, end, &b) || a > 0xffff)
				return 0;
			*s = (struct cfa){ CFA_OFFSET, (int)a, (int64_t)b };
			continue;
		case DW_CFA_def_cfa_sf:
			if (!uleb(&p, end, &a) || !sleb(&p, end, &sa) || a > 0xffff)
				return 0;
			*s = (struct cfa){ CFA_OFFSET, (int)a, (int64_t)((uint64_t)sa * (uint64_t)cie->data_align) };
			continue;
		case DW_CFA_def_cfa_register:
			if (!uleb(&p, end, &a) || a > 0xffff)
				return 0;
			if (s->kind != CFA_OFFSET)
				s->kind = CFA_INVALID;
			s->reg = (int)a;
			continue;
		case DW_CFA_def_cfa_offset:
			if (!uleb(&p, end, &a))
				return 0;
			if (s->kind != CFA_OFFSET)
				s->kind = CFA_INVALID;
			s->off = (int64_t)a;
			continue;
		case DW_CFA_def_cfa_offset_sf:
			if (!sleb(&p, end, &sa))
				return 0;
			if (s->kind != CFA_OFFSET)
				s->kind = CFA_INVALID;
			s->off = (int64_t)((uint64_t)sa * (uint64_t)cie->data_align);
			continue;
		case DW_CFA_def_cfa_expression:
			if (!uleb(&p, end, &a) || a > (uint64_t)(end - p))
				return 0;
			p += a;
			s->kind = CFA_EXPR;
			continue;
		case DW_CFA_undefined:
		case DW_CFA_same_value:
		case DW_CFA_restore_extended:
			if (!uleb(&p, end, &a) || a > 0xffff || (op == DW_CFA_restore_extended && !in_fde))
				return 0;
			continue;
		case DW_CFA_offset_extended:
		case DW_CFA_val_offset:
		case DW_CFA_register:
		case DW_CFA_GNU_negative_offset_extended:
			if (!uleb(&p, end, &a) || !uleb(&p, end, &b) || a > 0xffff)
				return 0;
			continue;
		case DW_CFA_offset_extended_sf:
		case DW_CFA_val_offset_sf:
			if (!uleb(&p, end, &a) || !sleb(&p, end, &sa) || a > 0xffff)
				return 0;
			continue;
		case DW_CFA_expression:
		case DW_CFA_val_expression:
			if (!uleb(&p, end, &a) || !uleb(&p, end, &b) || a > 0xffff || b > (uint64_t)(end - p))
				return 0;
			p += b;
			continue;
		case DW_CFA_remember_state:
			if (depth == (int)(sizeof stack / sizeof stack[0]))
				return 0;
			stack[depth++] = *s;
			continue;
		case DW_CFA_restore_state:
			if (!depth)
				return 0;
			*s = stack[--depth];
			continue;
		case DW_CFA_nop:
			continue;
		case DW_CFA_GNU_args_size:
			if (!uleb(&p, end, &a))
				return 0;
			continue;
		default: /* set_loc, window_save, vendor opcodes: libdw's business */
			return 0;
		}
	advance:
		if (!in_fde)
			return 0;
		{
			uint64_t next = *loc + delta * cie->code_align;
			if (delta && (next < *loc || (cie->code_align && (next - *loc) / cie->code_align != delta)))
				return 0; /* wrapped around */
			if (next == *loc)
				continue;
			if (*loc < hi) {
				struct meta_cfi_row r = { *loc, next, s->kind == CFA_UNDEF || s->kind == CFA_OFFSET ? ROW_OK : ROW_LIBDW,
						 s->kind == CFA_OFFSET ? s->reg : -1, s->kind == CFA_OFFSET ? s->off : 0 };
				if (META_PUSH(out->v, out->n, out->cap, r))
					return 0;
			}
			*loc = next;
		}
	}
	return 1;
}

static int cmp_fde(const void *a, const void *b)
{
	const struct fde *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static struct cie *find_cie(struct meta_cfi *c, uint64_t offset)
{
	for (size_t i = c->ncies; i-- > 0;) /* an FDE's CIE is nearly always the last one read */
		if (c->cies[i].offset == offset)
			return &c->cies[i];
	return NULL;
}

/* Reads CIE ENTRY (at OFFSET): 0, or -1 when the index cannot be used. */
static int add_cie(struct meta_cfi *c, uint64_t offset, const Dwarf_CIE *e)
{
	struct cie k = { .offset = offset, .code_align = e->code_alignment_factor,
			 .data_align = e->data_alignment_factor, .fde_encoding = DW_EH_PE_absptr };
	const char *aug = e->augmentation;
	const unsigned char *d = e->augmentation_data, *dend = d + e->augmentation_data_size;
	if (*aug) {
		if (*aug++ != 'z')
			return -1; /* unsized augmentations ("eh"): libdw's business */
		k.sized = 1;
		for (; *aug; aug++) {
			if (*aug == 'S')
				continue;
			if (*aug != 'R' && *aug != 'L' && *aug != 'P')
				return -1;
			if (d >= dend)
				return -1;
			uint8_t enc = *d++;
			if (*aug == 'R') {
				k.fde_encoding = enc;
			} else if (*aug == 'P') {
				static const uint8_t sizes[8] = { 8, 0, 2, 4, 8, 0, 0, 0 };
				if (enc == DW_EH_PE_omit || !sizes[enc & 7])
					return -1;
				d += sizes[enc & 7];
			}
		}
	}
	if ((k.fde_encoding & 0x0f) == DW_EH_PE_absptr)
		k.fde_encoding |= DW_EH_PE_udata8;
	k.initial = (struct cfa){ CFA_UNDEF, -1, 0 }; /* x86-64's ABI leaves the CFA undefined */
	uint64_t loc = 0;
	k.usable = play(NULL, &k, e->initial_instructions, e->initial_instructions_end, &k.initial, &loc, 0, 0);
	return META_PUSH(c->cies, c->ncies, c->capcies, k);
}

/* Whether libdw's search of the .eh_frame_hdr in HD (at VADDR) finds, for
 * every PC, the FDE the index finds: when it has no table to search (it then
 * reads .eh_frame itself), or a table that lists exactly the indexed FDEs,
 * in order. An invalid header makes libdw give no CFI at all (no index is
 * built then). */
static int table_agrees(const struct meta_cfi *c, const Elf_Data *hd, uint64_t vaddr, uint64_t eh_vaddr)
{
	const unsigned char *h = hd->d_buf, *end = h + hd->d_size, *p = h + 4;
	if (hd->d_size < 4 || h[0] != 1 || h[1] == DW_EH_PE_omit)
		return 0;
	uint64_t eh_ptr, count;
	if (!encoded_in(&p, end, h[1], vaddr, h, 1, &eh_ptr))
		return 0;
	if (h[2] == DW_EH_PE_omit)
		return 1; /* no count, no table */
	if (!encoded_in(&p, end, h[2], vaddr, h, 1, &count))
		return 0;
	if (!count || h[3] == DW_EH_PE_omit || (h[3] & ~DW_EH_PE_signed) == DW_EH_PE_uleb128 ||
	    eh_ptr != eh_vaddr)
		return 1; /* no table libdw would search */
	if (count != c->nfdes)
		return 0;
	for (size_t i = 0; i < c->nfdes; i++) {
		uint64_t loc, fde;
		if (!encoded_in(&p, end, h[3], vaddr, h, 1, &loc) || !encoded_in(&p, end, h[3], vaddr, h, 1, &fde) ||
		    loc != c->fdes[i].lo || fde - eh_vaddr != c->fdes[i].offset)
			return 0;
	}
	return 1;
}

struct meta_cfi *meta_cfi_new(const struct meta_model *m)
{
	if (m->machine != EM_X86_64 || !m->eh_cfi || m->elf_class != ELFCLASS64 || m->addr_size != 8)
		return NULL;
	size_t shstrndx;
	if (elf_getshdrstrndx(m->elf, &shstrndx) != 0)
		return NULL;
	Elf_Scn *scn = NULL, *hdr = NULL;
	GElf_Shdr sh, hdrsh = { 0 };
	/* the first .eh_frame, and a .eh_frame_hdr before it, as libdw takes them */
	while ((scn = elf_nextscn(m->elf, scn))) {
		const char *name;
		if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(m->elf, shstrndx, sh.sh_name)))
			continue;
		if (!strcmp(name, ".eh_frame"))
			break;
		if (!strcmp(name, ".eh_frame_hdr")) {
			hdr = scn;
			hdrsh = sh;
		}
	}
	Elf_Data *data = scn && sh.sh_type != SHT_NOBITS ? elf_rawdata(scn, NULL) : NULL;
	if (!data || !data->d_buf)
		return NULL;
	struct meta_cfi *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	const unsigned char *ident = (const unsigned char *)elf_getident(m->elf, NULL);
	const unsigned char *base = data->d_buf;
	Dwarf_Off off = 0, next;
	Dwarf_CFI_Entry e;
	int rc;
	while ((rc = dwarf_next_cfi(ident, data, true, off, &next, &e)) == 0) {
		if (dwarf_cfi_cie_p(&e)) {
			if (add_cie(c, off, &e.cie))
				goto unusable;
		} else {
			const struct cie *k = find_cie(c, e.fde.CIE_pointer);
			const unsigned char *p = e.fde.start;
			uint64_t lo, range, auglen = 0;
			if (!k || !encoded(&p, e.fde.end, k->fde_encoding, sh.sh_addr, base, &lo) ||
			    !encoded(&p, e.fde.end, k->fde_encoding & 0x0f, sh.sh_addr, base, &range) ||
			    (k->sized && (!uleb(&p, e.fde.end, &auglen) || auglen > (uint64_t)(e.fde.end - p))))
				goto unusable;
			struct fde f = { lo, lo + range, p + auglen, e.fde.end, off, (uint32_t)(k - c->cies) };
			if (f.lo < f.hi && META_PUSH(c->fdes, c->nfdes, c->capfdes, f))
				goto unusable;
		}
		off = next;
	}
	if (rc < 0 || !c->nfdes)
		goto unusable;
	qsort(c->fdes, c->nfdes, sizeof *c->fdes, cmp_fde);
	for (size_t i = 1; i < c->nfdes; i++)
		if (c->fdes[i].lo < c->fdes[i - 1].hi)
			goto unusable; /* overlapping FDEs: which one libdw finds is its business */
	Elf_Data *hd = hdr ? elf_rawdata(hdr, NULL) : NULL;
	if (hd && hd->d_buf && !table_agrees(c, hd, hdrsh.sh_addr, sh.sh_addr))
		goto unusable;
	return c;
unusable:
	meta_cfi_free(c);
	return NULL;
}

void meta_cfi_free(struct meta_cfi *c)
{
	if (!c)
		return;
	free(c->cies);
	free(c->fdes);
	free(c);
}

/* The rows of FDE I into OUT, decoded once. */
static void decode(const struct meta_cfi *c, struct meta_cfi_rows *out, size_t i)
{
	if (out->fde == i + 1)
		return;
	out->fde = i + 1;
	out->n = 0;
	const struct fde *f = &c->fdes[i];
	const struct cie *k = &c->cies[f->cie];
	uint64_t loc = f->lo;
	struct cfa s = k->initial;
	int done = k->usable && play(out, k, f->ins, f->end, &s, &loc, f->hi, 1);
	if (loc < f->hi) {
		struct meta_cfi_row r = { loc, f->hi, ROW_LIBDW, -1, 0 };
		if (done && (s.kind == CFA_UNDEF || s.kind == CFA_OFFSET))
			r = (struct meta_cfi_row){ loc, f->hi, ROW_OK, s.kind == CFA_OFFSET ? s.reg : -1,
						   s.kind == CFA_OFFSET ? s.off : 0 };
		if (META_PUSH(out->v, out->n, out->cap, r))
			out->n = 0; /* nothing decoded: all to libdw */
	}
}

void meta_cfi_rows_free(struct meta_cfi_rows *r)
{
	free(r->v);
}

int meta_cfa_at(const struct meta_cfi *c, struct meta_cfi_rows *rows, struct meta_model *m, uint64_t pc,
		struct cfi_row *row)
{
	if (!c)
		return libdw_both(m, pc, row);
	size_t lo = 0, hi = c->nfdes;
	while (lo < hi) { /* the last FDE starting at or below PC */
		size_t mid = lo + (hi - lo) / 2;
		if (c->fdes[mid].lo <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || pc >= c->fdes[lo - 1].hi)
		return libdw_both(m, pc, row);
	decode(c, rows, lo - 1);
	const struct meta_cfi_row *r = NULL;
	for (size_t k = 0; k < rows->n && !r; k++)
		if (rows->v[k].lo <= pc && pc < rows->v[k].hi)
			r = &rows->v[k];
	if (!r || r->status != ROW_OK)
		return libdw_both(m, pc, row);
	*row = (struct cfi_row){ pc, r->hi, r->reg, r->off };
	return 0;
}
