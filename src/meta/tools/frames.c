/* `frames`: for every function, where each local and formal lives by PC
 * range (computed in frames_loc.c), as text, JSON or C tables. */
#include <inttypes.h>
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

/* The C tables: locations stream to the output as they are computed;
 * variables and functions, which come after them, wait in memory. */
struct c_tables {
	struct meta_obuf *vars, *funcs;
	size_t nlocs, nvars;
};

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

/* One function in FMT through the buffer O (C: its locations; its variables
 * and itself into CT). */
static int emit_function(struct frame_state *s, struct meta_obuf *o, enum meta_format fmt, size_t fi,
			 int *first_out, struct c_tables *ct)
{
	struct meta_model *m = s->m;
	const struct meta_function *f = &m->functions[fi];
	meta_frame_reset(s);
	if (fmt == META_FMT_TEXT) {
		meta_obuf_str(o, "function ");
		meta_obuf_str(o, f->name ? f->name : "<anon>");
		meta_obuf_str(o, " 0x");
		meta_obuf_hex(o, f->low, 1);
		meta_obuf_str(o, "-0x");
		meta_obuf_hex(o, f->high, 1);
		meta_obuf_chr(o, '\n');
	} else if (fmt == META_FMT_JSON) {
		meta_obuf_str(o, *first_out ? "{\"name\":" : ",\n{\"name\":");
		*first_out = 0;
		meta_obuf_json_str(o, f->name);
		meta_obuf_str(o, ",\"low\":");
		meta_obuf_u64(o, f->low);
		meta_obuf_str(o, ",\"high\":");
		meta_obuf_u64(o, f->high);
		meta_obuf_str(o, ",\"vars\":[");
	} else {
		struct meta_obuf *fo = ct->funcs;
		meta_obuf_mem(fo, "\t{ ", 3);
		meta_obuf_c_str(fo, f->name);
		meta_obuf_mem(fo, ", 0x", 4);
		meta_obuf_hex(fo, f->low, 1);
		meta_obuf_mem(fo, "u, 0x", 5);
		meta_obuf_hex(fo, f->high, 1);
		meta_obuf_mem(fo, "u, ", 3);
		meta_obuf_u64(fo, ct->nvars);
		meta_obuf_mem(fo, "u, ", 3);
		meta_obuf_u64(fo, f->var_count);
		meta_obuf_mem(fo, "u },\n", 5);
		ct->nvars += f->var_count;
	}
	for (uint32_t k = 0; k < f->var_count; k++) {
		const struct meta_var *v = &m->vars[f->var_first + k];
		if (meta_var_locations(s, f, v))
			return -1;
		if (fmt == META_FMT_TEXT) {
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
		} else if (fmt == META_FMT_JSON) {
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
			struct meta_obuf *vo = ct->vars;
			meta_obuf_mem(vo, "\t{ ", 3);
			meta_obuf_c_str(vo, v->name);
			char *p = meta_obuf_room(vo, 96);
			p = meta_raw_mem(p, ", 0x", 4);
			p = meta_raw_hex(p, meta_type_id(m, v->type), 1);
			p = meta_raw_mem(p, v->kind == META_VAR_FORMAL ? "u, 1, " : "u, 0, ", 6);
			p = meta_raw_u64(p, ct->nlocs);
			p = meta_raw_mem(p, "u, ", 3);
			p = meta_raw_u64(p, s->nlocs);
			meta_obuf_done(vo, meta_raw_mem(p, "u },\n", 5));
			ct->nlocs += s->nlocs;
		}
	}
	if (fmt == META_FMT_JSON)
		meta_obuf_str(o, "]}");
	return 0;
}

int meta_tool_frames(struct meta_model *m, FILE *out, enum meta_format fmt, struct meta_err *err)
{
	if (meta_need_dwarf(m, "frames", err))
		return -1;
	struct frame_state s = { .m = m };
	int rc = 0, first = 1;
	struct meta_obuf *o = meta_obuf_new(out);
	if (!o) {
		meta_set_err(err, "%s: out of memory while computing frames", m->path);
		return -1;
	}
	pthread_mutex_lock(&m->lock);
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
		      "\tuint32_t first_var, nvars;\n};\n\n", out);
	}
	/* The C format has three tables (locations, variables, functions), in
	 * that order: one pass, the last two kept in memory until the first
	 * is out. */
	static const char *const heads[] = {
		"const struct kiln_meta_frame_loc kiln_meta_frame_locs[] = {\n",
		"const struct kiln_meta_frame_var kiln_meta_frame_vars[] = {\n",
		"const struct kiln_meta_frame kiln_meta_frames[] = {\n",
	};
	static const char tail[] = "\t{ 0, 0, 0, 0, 0 }\n};\n\n";
	struct c_tables ct = { 0 };
	char *mem[2] = { NULL, NULL };
	size_t memlen[2] = { 0, 0 };
	FILE *memf[2] = { NULL, NULL };
	if (fmt == META_FMT_C) {
		for (int i = 0; i < 2 && !rc; i++)
			if (!(memf[i] = open_memstream(&mem[i], &memlen[i])))
				rc = -1;
		if (!rc && (!(ct.vars = meta_obuf_new(memf[0])) || !(ct.funcs = meta_obuf_new(memf[1]))))
			rc = -1;
		if (!rc)
			fputs(heads[0], out);
	}
	for (size_t i = 0; i < m->nfunctions && !rc; i++)
		rc = emit_function(&s, o, fmt, i, &first, &ct);
	meta_obuf_flush(o);
	if (fmt == META_FMT_C && !rc) {
		meta_obuf_flush(ct.vars);
		meta_obuf_flush(ct.funcs);
		for (int i = 0; i < 2; i++)
			if (fflush(memf[i]) != 0)
				rc = -1;
	}
	if (fmt == META_FMT_C && !rc) {
		fputs(tail, out);
		for (int i = 0; i < 2; i++) {
			fputs(heads[i + 1], out);
			fwrite_unlocked(mem[i], 1, memlen[i], out);
			fputs(tail, out);
		}
	}
	for (int i = 0; i < 2; i++) {
		if (memf[i])
			fclose(memf[i]);
		free(mem[i]);
	}
	free(ct.vars);
	free(ct.funcs);
	if (fmt == META_FMT_JSON)
		fputs("\n]}\n", out);
	else if (fmt == META_FMT_C)
		fprintf(out, "const uint32_t kiln_meta_nframes = %zuu;\n", m->nfunctions);
	pthread_mutex_unlock(&m->lock);
	meta_frame_state_free(&s);
	free(o);
	if (rc)
		meta_set_err(err, "%s: out of memory while computing frames", m->path);
	return rc;
}

