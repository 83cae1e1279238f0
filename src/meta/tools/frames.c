/* `frames`: for every function, where each local and formal lives by PC
 * range (computed in frames_loc.c), as text, JSON or C tables. */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>

#include "meta/tools/frames.h"
#include "meta/tools/obuf.h"
#include "meta/tools/tool.h"

/* A DWARF register by its x86-64 name (rdi, xmm0), else as regN. */
static void put_reg(struct meta_obuf *o, int reg, int x86_64)
{
	static const char *const names[] = {
		"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10",
		"r11", "r12", "r13", "r14", "r15", "rip",
	};
	if (x86_64 && reg >= 0 && reg < 17) {
		meta_obuf_str(o, names[reg]);
	} else if (x86_64 && reg >= 17 && reg <= 32) {
		meta_obuf_str(o, "xmm");
		meta_obuf_u64(o, (uint64_t)(reg - 17));
	} else {
		meta_obuf_str(o, "reg");
		meta_obuf_u64(o, (uint64_t)reg);
	}
}

static void print_loc_text(struct meta_obuf *o, const struct loc *l, int x86_64)
{
	meta_obuf_chr(o, ' ');
	switch (l->kind) {
	case LOC_CFA:
		meta_obuf_mem(o, "cfa", 3);
		meta_obuf_i64(o, l->offset, 1);
		break;
	case LOC_REG:
		put_reg(o, l->reg, x86_64);
		break;
	case LOC_BREG:
		put_reg(o, l->reg, x86_64);
		meta_obuf_i64(o, l->offset, 1);
		break;
	case LOC_STATIC:
		meta_obuf_mem(o, "static@0x", 9);
		meta_obuf_hex(o, (uint64_t)l->offset, 1);
		break;
	default:
		meta_obuf_str(o, meta_loc_names[l->kind]);
	}
	meta_obuf_mem(o, "[0x", 3);
	meta_obuf_hex(o, l->lo, 1);
	meta_obuf_mem(o, ",0x", 3);
	meta_obuf_hex(o, l->hi, 1);
	meta_obuf_chr(o, ')');
}

static void print_loc_json(struct meta_obuf *o, const struct loc *l, int first)
{
	meta_obuf_str(o, first ? "{\"lo\":" : ",{\"lo\":");
	meta_obuf_u64(o, l->lo);
	meta_obuf_str(o, ",\"hi\":");
	meta_obuf_u64(o, l->hi);
	meta_obuf_str(o, ",\"where\":\"");
	meta_obuf_str(o, meta_loc_names[l->kind]);
	meta_obuf_chr(o, '"');
	if (l->kind == LOC_REG || l->kind == LOC_BREG) {
		meta_obuf_str(o, ",\"reg\":");
		meta_obuf_u64(o, (uint64_t)l->reg);
	}
	if (l->kind == LOC_CFA || l->kind == LOC_BREG) {
		meta_obuf_str(o, ",\"offset\":");
		meta_obuf_i64(o, l->offset, 0);
	}
	if (l->kind == LOC_STATIC) {
		meta_obuf_str(o, ",\"addr\":");
		meta_obuf_u64(o, (uint64_t)l->offset);
	}
	meta_obuf_chr(o, '}');
}

static void c_loc(struct meta_obuf *o, const struct loc *l)
{
	char *p = meta_obuf_room(o, 128); /* 5 + 16 + 5 + 16 + 3 + 11 + 2 + 11 + 2 + 20 + 4 */
	p = meta_raw_mem(p, "\t{ 0x", 5);
	p = meta_raw_hex(p, l->lo, 1);
	p = meta_raw_mem(p, "u, 0x", 5);
	p = meta_raw_hex(p, l->hi, 1);
	p = meta_raw_mem(p, "u, ", 3);
	p = meta_raw_i64(p, l->kind);
	p = meta_raw_mem(p, ", ", 2);
	p = meta_raw_i64(p, l->reg);
	p = meta_raw_mem(p, ", ", 2);
	p = meta_raw_i64(p, l->offset);
	meta_obuf_done(o, meta_raw_mem(p, " },\n", 4));
}

/* One frames run: its state, its output buffer, and for the C format the
 * number of locations of every variable (the variable table comes after
 * the location table and gives each one's first location). */
struct run {
	struct meta_model *m;
	enum meta_format fmt;
	struct frame_state s;
	struct meta_obuf *o;
	uint32_t *nlocs;
};

/* One function in the run's format (C: its locations only). */
static int emit_function(struct run *r, size_t fi, uint32_t *nlocs)
{
	struct frame_state *s = &r->s;
	struct meta_obuf *o = r->o;
	struct meta_model *m = r->m;
	const struct meta_function *f = &m->functions[fi];
	meta_frame_reset(s);
	if (r->fmt == META_FMT_TEXT) {
		meta_obuf_str(o, "function ");
		meta_obuf_str(o, f->name ? f->name : "<anon>");
		meta_obuf_str(o, " 0x");
		meta_obuf_hex(o, f->low, 1);
		meta_obuf_str(o, "-0x");
		meta_obuf_hex(o, f->high, 1);
		meta_obuf_chr(o, '\n');
	} else if (r->fmt == META_FMT_JSON) {
		meta_obuf_str(o, fi == 0 ? "{\"name\":" : ",\n{\"name\":");
		meta_obuf_json_str(o, f->name);
		meta_obuf_str(o, ",\"low\":");
		meta_obuf_u64(o, f->low);
		meta_obuf_str(o, ",\"high\":");
		meta_obuf_u64(o, f->high);
		meta_obuf_str(o, ",\"vars\":[");
	}
	for (uint32_t k = 0; k < f->var_count; k++) {
		const struct meta_var *v = &m->vars[f->var_first + k];
		if (meta_var_locations(s, f, v))
			return -1;
		if (r->fmt == META_FMT_TEXT) {
			meta_obuf_str(o, v->kind == META_VAR_FORMAL ? "  formal " : "  local ");
			meta_obuf_str(o, v->name ? v->name : "<anon>");
			meta_obuf_str(o, " type=");
			meta_obuf_hex(o, meta_type_id(m, v->type), 16);
			meta_obuf_str(o, " (");
			meta_obuf_type_label(o, m, v->type);
			meta_obuf_chr(o, ')');
			for (size_t i = 0; i < s->nlocs; i++)
				print_loc_text(o, &s->locs[i], m->machine == EM_X86_64);
			meta_obuf_chr(o, '\n');
		} else if (r->fmt == META_FMT_JSON) {
			meta_obuf_str(o, k ? ",{\"name\":" : "{\"name\":");
			meta_obuf_json_str(o, v->name);
			meta_obuf_str(o, v->kind == META_VAR_FORMAL ? ",\"kind\":\"formal\",\"type\":"
							    : ",\"kind\":\"local\",\"type\":");
			if (v->type == META_NONE) {
				meta_obuf_str(o, "null");
			} else {
				meta_obuf_chr(o, '"');
				meta_obuf_hex(o, meta_type_id(m, v->type), 16);
				meta_obuf_chr(o, '"');
			}
			meta_obuf_str(o, ",\"locations\":[");
			for (size_t i = 0; i < s->nlocs; i++)
				print_loc_json(o, &s->locs[i], i == 0);
			meta_obuf_str(o, "]}");
		} else {
			for (size_t i = 0; i < s->nlocs; i++)
				c_loc(o, &s->locs[i]);
			nlocs[k] = (uint32_t)s->nlocs;
		}
	}
	if (r->fmt == META_FMT_JSON)
		meta_obuf_str(o, "]}");
	return 0;
}

/* The variable table, then the function table (C format), once the
 * locations of every variable are known. */
static void c_vars_and_functions(struct meta_obuf *o, const struct meta_model *m, const uint32_t *nlocs)
{
	static const char tail[] = "\t{ 0, 0, 0, 0, 0 }\n};\n\n";
	meta_obuf_str(o, tail);
	meta_obuf_str(o, "const struct kiln_meta_frame_var kiln_meta_frame_vars[] = {\n");
	size_t first_loc = 0;
	for (size_t i = 0; i < m->nfunctions; i++) {
		const struct meta_function *f = &m->functions[i];
		for (uint32_t k = 0; k < f->var_count; k++, nlocs++) {
			const struct meta_var *v = &m->vars[f->var_first + k];
			meta_obuf_mem(o, "\t{ ", 3);
			meta_obuf_c_str(o, v->name);
			char *p = meta_obuf_room(o, 96);
			p = meta_raw_mem(p, ", 0x", 4);
			p = meta_raw_hex(p, meta_type_id(m, v->type), 1);
			p = meta_raw_mem(p, v->kind == META_VAR_FORMAL ? "u, 1, " : "u, 0, ", 6);
			p = meta_raw_u64(p, first_loc);
			p = meta_raw_mem(p, "u, ", 3);
			p = meta_raw_u64(p, *nlocs);
			meta_obuf_done(o, meta_raw_mem(p, "u },\n", 5));
			first_loc += *nlocs;
		}
	}
	meta_obuf_str(o, tail);
	meta_obuf_str(o, "const struct kiln_meta_frame kiln_meta_frames[] = {\n");
	size_t first_var = 0;
	for (size_t i = 0; i < m->nfunctions; i++) {
		const struct meta_function *f = &m->functions[i];
		meta_obuf_mem(o, "\t{ ", 3);
		meta_obuf_c_str(o, f->name);
		char *p = meta_obuf_room(o, 96);
		p = meta_raw_mem(p, ", 0x", 4);
		p = meta_raw_hex(p, f->low, 1);
		p = meta_raw_mem(p, "u, 0x", 5);
		p = meta_raw_hex(p, f->high, 1);
		p = meta_raw_mem(p, "u, ", 3);
		p = meta_raw_u64(p, first_var);
		p = meta_raw_mem(p, "u, ", 3);
		p = meta_raw_u64(p, f->var_count);
		meta_obuf_done(o, meta_raw_mem(p, "u },\n", 5));
		first_var += f->var_count;
	}
	meta_obuf_str(o, tail);
}

int meta_tool_frames(struct meta_model *m, FILE *out, enum meta_format fmt, struct meta_err *err)
{
	if (meta_need_dwarf(m, "frames", err))
		return -1;
	if (fmt == META_FMT_TEXT) {
		fprintf(out, "# kiln meta frames %s: %zu functions; locations relative to the CFA\n",
			m->path, m->nfunctions);
	} else if (fmt == META_FMT_JSON) {
		fputs("{\"tool\":\"frames\",\"binary\":", out);
		meta_put_json_str(out, m->path);
		fputs(",\"functions\":[\n", out);
	} else {
		fputs("/* kiln meta frames: generated; layout in docs/meta-formats.md */\n"
		      "#include <stdint.h>\n\n"
		      "/* kind: 0 cfa (offset from the CFA), 1 reg, 2 static (offset = address),\n"
		      " * 3 breg (reg + offset, not CFA-relative), 4 computed, 5 complex, 6 none */\n"
		      "struct kiln_meta_frame_loc {\n\tuint64_t lo, hi;\n\tint32_t kind, reg;\n\tint64_t offset;\n};\n\n"
		      "struct kiln_meta_frame_var {\n\tconst char *name;\n\tuint64_t type;\n"
		      "\tint32_t is_formal;\n\tuint32_t first_loc, nlocs;\n};\n\n"
		      "struct kiln_meta_frame {\n\tconst char *name;\n\tuint64_t low, high;\n"
		      "\tuint32_t first_var, nvars;\n};\n\n"
		      "const struct kiln_meta_frame_loc kiln_meta_frame_locs[] = {\n", out);
	}
	pthread_mutex_lock(&m->lock); /* (libelf reads the section) */
	struct meta_cfi *cfi = meta_cfi_new(m);
	pthread_mutex_unlock(&m->lock);
	struct run r = { .m = m, .fmt = fmt, .s = { .m = m, .cfi = cfi, .warn = err }, .o = meta_obuf_new(out) };
	int rc = r.o ? 0 : -1;
	if (!rc && fmt == META_FMT_C && !(r.nlocs = malloc((m->nvars ? m->nvars : 1) * sizeof *r.nlocs)))
		rc = -1;
	uint32_t *nlocs = r.nlocs;
	for (size_t i = 0; i < m->nfunctions && !rc; i++) {
		rc = emit_function(&r, i, nlocs);
		nlocs += fmt == META_FMT_C ? m->functions[i].var_count : 0;
	}
	if (fmt == META_FMT_C && !rc)
		c_vars_and_functions(r.o, m, r.nlocs);
	if (r.o)
		meta_obuf_flush(r.o);
	if (fmt == META_FMT_JSON)
		fputs("\n]}\n", out);
	else if (fmt == META_FMT_C)
		fprintf(out, "const uint32_t kiln_meta_nframes = %zuu;\n", m->nfunctions);
	meta_frame_state_free(&r.s);
	free(r.o);
	free(r.nlocs);
	meta_cfi_free(cfi);
	if (rc)
		meta_set_err(err, "%s: out of memory while computing frames", m->path);
	return rc;
}
