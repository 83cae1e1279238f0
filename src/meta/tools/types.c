/* `types`: one entry per deduplicated type (class), in order of first
 * appearance in the DWARF. Formats: docs/meta-formats.md. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "meta/tools/obuf.h"
#include "meta/tools/tool.h"

static int is_aggregate(uint8_t k)
{
	return k == META_STRUCT || k == META_UNION || k == META_CLASS;
}

/* Virtual bases of aggregate T with their offsets in a complete T (see
 * vbases.c): how many, 0 when none or when the layout cannot be derived. */
static int complete_vbases(const struct meta_model *m, const struct meta_type *t, struct meta_vbase *out)
{
	if (!is_aggregate(t->kind))
		return 0;
	uint32_t k = 0;
	while (k < t->nmembers && !m->members[t->first + k].is_base)
		k++;
	if (k == t->nmembers)
		return 0; /* no bases (all of C): nothing to do */
	int n = meta_complete_vbases(m, (uint32_t)(t - m->types), out);
	return n > 0 ? n : 0;
}

static void put_id(struct meta_obuf *o, const struct meta_model *m, uint32_t t)
{
	meta_obuf_hex(o, meta_type_id(m, t), 16);
	meta_obuf_str(o, " (");
	meta_obuf_type_label(o, m, t);
	meta_obuf_chr(o, ')');
}

static void text_type(struct meta_obuf *o, const struct meta_model *m, const struct meta_class *c)
{
	const struct meta_type *t = &m->types[c->rep];
	meta_obuf_hex(o, c->id, 16);
	meta_obuf_chr(o, ' ');
	meta_obuf_str(o, meta_kind_name(t->kind));
	meta_obuf_chr(o, ' ');
	meta_obuf_str(o, t->name ? t->name : "<anon>");
	if (t->flags & META_T_HAS_SIZE) {
		meta_obuf_str(o, " size=");
		meta_obuf_u64(o, t->size);
	}
	if (t->flags & META_T_DECLARATION)
		meta_obuf_str(o, " declaration");
	if (t->flags & META_T_UNSIGNED)
		meta_obuf_str(o, " unsigned");
	if (t->ref != META_NONE || t->kind == META_POINTER || t->kind == META_FUNCTION ||
	    t->kind == META_TYPEDEF) {
		meta_obuf_str(o, " ref=");
		put_id(o, m, t->ref);
	}
	meta_obuf_str(o, " dies=");
	meta_obuf_u64(o, c->count);
	meta_obuf_chr(o, '\n');
	for (uint32_t k = 0; k < t->nmembers; k++) {
		const struct meta_member *mm = &m->members[t->first + k];
		const char *name = mm->name ? mm->name : "<anon>";
		if (is_aggregate(t->kind)) {
			if (mm->is_virtual) {
				meta_obuf_str(o, "  base virtual vtable_offset=");
				meta_obuf_i64(o, (int64_t)mm->value, 0);
			} else if (mm->is_base) {
				meta_obuf_str(o, "  base offset=");
				meta_obuf_u64(o, mm->value / 8);
			} else {
				meta_obuf_str(o, "  member ");
				meta_obuf_str(o, name);
				meta_obuf_str(o, " offset=");
				meta_obuf_u64(o, mm->value / 8);
			}
			if (mm->bit_size) {
				meta_obuf_str(o, " bit_offset=");
				meta_obuf_u64(o, mm->value);
				meta_obuf_str(o, " bit_size=");
				meta_obuf_u64(o, mm->bit_size);
			}
		} else if (t->kind == META_ENUM) {
			meta_obuf_str(o, "  enumerator ");
			meta_obuf_str(o, name);
			meta_obuf_str(o, " value=");
			if (t->flags & META_T_UNSIGNED)
				meta_obuf_u64(o, mm->value);
			else
				meta_obuf_i64(o, (int64_t)mm->value, 0);
			meta_obuf_chr(o, '\n');
			continue;
		} else if (t->kind == META_ARRAY) {
			meta_obuf_str(o, "  dimension ");
			meta_obuf_u64(o, mm->value);
			meta_obuf_chr(o, '\n');
			continue;
		} else {
			meta_obuf_str(o, "  param");
		}
		meta_obuf_str(o, " type=");
		put_id(o, m, mm->type);
		meta_obuf_chr(o, '\n');
	}
	if (t->flags & META_T_VARARGS)
		meta_obuf_str(o, "  param ...\n");
	struct meta_vbase vb[META_MAX_VBASES];
	int nvb = complete_vbases(m, t, vb);
	for (int i = 0; i < nvb; i++) {
		meta_obuf_str(o, "  virtual_base offset=");
		meta_obuf_u64(o, vb[i].offset);
		meta_obuf_str(o, " type=");
		put_id(o, m, vb[i].type);
		meta_obuf_chr(o, '\n');
	}
}

static void json_type(FILE *out, const struct meta_model *m, const struct meta_class *c)
{
	const struct meta_type *t = &m->types[c->rep];
	fprintf(out, "{\"id\":\"%016" PRIx64 "\",\"kind\":\"%s\",\"name\":", c->id, meta_kind_name(t->kind));
	meta_put_json_str(out, t->name);
	if (t->flags & META_T_HAS_SIZE)
		fprintf(out, ",\"size\":%" PRIu64, t->size);
	if (t->flags & META_T_DECLARATION)
		fputs(",\"declaration\":true", out);
	if (t->flags & META_T_UNSIGNED)
		fputs(",\"unsigned\":true", out);
	if (t->kind == META_BASE)
		fprintf(out, ",\"encoding\":%u", t->encoding);
	if (t->ref != META_NONE)
		fprintf(out, ",\"type\":\"%016" PRIx64 "\"", meta_type_id(m, t->ref));
	else if (t->kind != META_BASE && !is_aggregate(t->kind) && t->kind != META_ENUM)
		fputs(",\"type\":null", out);
	const char *list = is_aggregate(t->kind) ? "members" : t->kind == META_ENUM ? "enumerators" :
			   t->kind == META_ARRAY ? "dims" : "params";
	if (t->nmembers || is_aggregate(t->kind) || t->kind == META_FUNCTION)
		fprintf(out, ",\"%s\":[", list);
	for (uint32_t k = 0; k < t->nmembers; k++) {
		const struct meta_member *mm = &m->members[t->first + k];
		if (k)
			putc(',', out);
		if (t->kind == META_ARRAY) {
			fprintf(out, "%" PRIu64, mm->value);
			continue;
		}
		if (t->kind == META_FUNCTION) {
			if (mm->type == META_NONE)
				fputs("null", out);
			else
				fprintf(out, "\"%016" PRIx64 "\"", meta_type_id(m, mm->type));
			continue;
		}
		fputs("{\"name\":", out);
		meta_put_json_str(out, mm->name);
		if (mm->is_base)
			fputs(",\"base\":true", out);
		if (mm->is_virtual)
			fputs(",\"virtual\":true", out);
		if (t->kind == META_ENUM) {
			if (t->flags & META_T_UNSIGNED)
				fprintf(out, ",\"value\":%" PRIu64 "}", mm->value);
			else
				fprintf(out, ",\"value\":%" PRId64 "}", (int64_t)mm->value);
			continue;
		}
		if (mm->type == META_NONE)
			fputs(",\"type\":null", out);
		else
			fprintf(out, ",\"type\":\"%016" PRIx64 "\"", meta_type_id(m, mm->type));
		if (mm->is_virtual) {
			fprintf(out, ",\"vtable_offset\":%" PRId64 "}", (int64_t)mm->value);
			continue;
		}
		fprintf(out, ",\"offset\":%" PRIu64, mm->value / 8);
		if (mm->bit_size)
			fprintf(out, ",\"bit_offset\":%" PRIu64 ",\"bit_size\":%u", mm->value, (unsigned)mm->bit_size);
		putc('}', out);
	}
	if (t->nmembers || is_aggregate(t->kind) || t->kind == META_FUNCTION)
		putc(']', out);
	if (t->flags & META_T_VARARGS)
		fputs(",\"varargs\":true", out);
	struct meta_vbase vb[META_MAX_VBASES];
	int nvb = complete_vbases(m, t, vb);
	if (nvb)
		fputs(",\"virtual_bases\":[", out);
	for (int i = 0; i < nvb; i++)
		fprintf(out, "%s{\"type\":\"%016" PRIx64 "\",\"offset\":%" PRIu64 "}", i ? "," : "",
			meta_type_id(m, vb[i].type), vb[i].offset);
	if (nvb)
		putc(']', out);
	putc('}', out);
}

/* VALUE's bits as an int64_t initializer: INT64_MIN has no literal, and the
 * values of unsigned enums at or above 2^63 are kept bit for bit. */
static char *raw_c_int64(char *p, uint64_t value)
{
	if (value == (uint64_t)1 << 63)
		return meta_raw_mem(p, "INT64_MIN", 9);
	return meta_raw_i64(p, (int64_t)value);
}

/* SEL: which classes (NULL: all). */
static void c_tables(FILE *out, struct meta_obuf *o, const struct meta_model *m, const unsigned char *sel)
{
	fputs("#include <stdint.h>\n\n"
	      "struct kiln_meta_type {\n\tuint64_t id;\n\tconst char *kind;\n\tconst char *name;\n"
	      "\tuint64_t size; /* UINT64_MAX when unknown */\n\tuint64_t ref;\n"
	      "\tuint32_t first_member, nmembers;\n"
	      "\tuint32_t flags; /* 1: an enum with an unsigned underlying type (read its\n"
	      "\t                   enumerators' values as (uint64_t)value) */\n};\n\n"
	      "struct kiln_meta_member {\n\tconst char *name;\n\tuint64_t type;\n"
	      "\tuint64_t bit_offset; /* struct/union members */\n\tuint32_t bit_size;\n"
	      "\tuint32_t is_base; /* 1 C++ base class subobject, 2 virtual base (no fixed\n"
	      "\t                    offset: bit_offset UINT64_MAX, value = where its offset is\n"
	      "\t                    in the vtable), 3 a virtual base's offset in a complete object */\n"
	      "\tint64_t value; /* enumerator value, array dimension, vtable entry offset */\n};\n\n"
	      "const struct kiln_meta_member kiln_meta_members[] = {\n", out);
	uint32_t nmem = 0;
	struct meta_vbase vb[META_MAX_VBASES];
	for (size_t i = 0; i < m->nclasses; i++) {
		if (sel && !sel[i])
			continue;
		const struct meta_type *t = &m->types[m->classes[i].rep];
		for (uint32_t k = 0; k < t->nmembers; k++) {
			const struct meta_member *mm = &m->members[t->first + k];
			int agg = is_aggregate(t->kind);
			meta_obuf_mem(o, "\t{ ", 3);
			meta_obuf_c_str(o, mm->name);
			char *p = meta_obuf_room(o, 128);
			p = meta_raw_mem(p, ", 0x", 4);
			p = meta_raw_hex(p, meta_type_id(m, mm->type), 1);
			if (mm->is_virtual) {
				p = meta_raw_mem(p, "u, UINT64_MAX, 0u, 2u, ", 23);
			} else {
				p = meta_raw_mem(p, "u, ", 3);
				p = meta_raw_u64(p, agg ? mm->value : 0);
				p = meta_raw_mem(p, "u, ", 3);
				p = meta_raw_u64(p, mm->bit_size);
				p = meta_raw_mem(p, "u, ", 3);
				p = meta_raw_u64(p, mm->is_base);
				p = meta_raw_mem(p, "u, ", 3);
			}
			p = raw_c_int64(p, agg && !mm->is_virtual ? 0 : mm->value);
			meta_obuf_done(o, meta_raw_mem(p, " },\n", 4));
			nmem++;
		}
		int nvb = complete_vbases(m, t, vb);
		for (int k = 0; k < nvb; k++, nmem++) {
			char *p = meta_obuf_room(o, 96);
			p = meta_raw_mem(p, "\t{ 0, 0x", 8);
			p = meta_raw_hex(p, meta_type_id(m, vb[k].type), 1);
			p = meta_raw_mem(p, "u, ", 3);
			p = meta_raw_u64(p, vb[k].offset * 8);
			meta_obuf_done(o, meta_raw_mem(p, "u, 0u, 3u, 0 },\n", 16));
		}
	}
	meta_obuf_str(o, "\t{ 0, 0, 0, 0, 0, 0 }\n};\n\nconst struct kiln_meta_type kiln_meta_types[] = {\n");
	uint32_t first = 0;
	size_t ntypes = 0;
	for (size_t i = 0; i < m->nclasses; i++) {
		if (sel && !sel[i])
			continue;
		ntypes++;
		const struct meta_class *c = &m->classes[i];
		const struct meta_type *t = &m->types[c->rep];
		char *p = meta_obuf_room(o, 64);
		p = meta_raw_mem(p, "\t{ 0x", 5);
		p = meta_raw_hex(p, c->id, 16);
		p = meta_raw_mem(p, "u, \"", 4);
		meta_obuf_done(o, p);
		meta_obuf_str(o, meta_kind_name(t->kind));
		meta_obuf_mem(o, "\", ", 3);
		meta_obuf_c_str(o, t->name);
		uint32_t n = t->nmembers + (uint32_t)complete_vbases(m, t, vb);
		p = meta_obuf_room(o, 128);
		if (t->flags & META_T_HAS_SIZE) {
			p = meta_raw_mem(p, ", ", 2);
			p = meta_raw_u64(p, t->size);
			p = meta_raw_mem(p, "u", 1);
		} else {
			p = meta_raw_mem(p, ", UINT64_MAX", 12);
		}
		p = meta_raw_mem(p, ", 0x", 4);
		p = meta_raw_hex(p, meta_type_id(m, t->ref), 1);
		p = meta_raw_mem(p, "u, ", 3);
		p = meta_raw_u64(p, first);
		p = meta_raw_mem(p, "u, ", 3);
		p = meta_raw_u64(p, n);
		p = meta_raw_mem(p, (t->flags & META_T_UNSIGNED) ? "u, 1u },\n" : "u, 0u },\n", 9);
		meta_obuf_done(o, p);
		first += n;
	}
	meta_obuf_flush(o);
	fprintf(out, "\t{ 0, 0, 0, 0, 0, 0, 0, 0 }\n};\n\n"
		"const uint32_t kiln_meta_ntypes = %zuu;\nconst uint32_t kiln_meta_nmembers = %uu;\n",
		ntypes, nmem);
}

/* The listing of the classes in SEL (NULL: all), HOW saying which in the
 * text header. */
static int put_types(struct meta_model *m, FILE *out, enum meta_format fmt, const unsigned char *sel,
		     size_t nsel, const char *how, struct meta_err *err)
{
	switch (fmt) {
	case META_FMT_TEXT: {
		struct meta_obuf *o = meta_obuf_new(out);
		if (!o) {
			meta_set_err(err, "%s: out of memory", m->path);
			return -1;
		}
		if (sel)
			fprintf(out, "# kiln meta types %s %s: %zu of %zu types\n", m->path, how, nsel,
				m->nclasses);
		else
			fprintf(out, "# kiln meta types %s: %zu types from %zu DIEs in %zu units\n", m->path,
				m->nclasses, m->ntypes, m->ncus);
		for (size_t i = 0; i < m->nclasses; i++)
			if (!sel || sel[i])
				text_type(o, m, &m->classes[i]);
		meta_obuf_flush(o);
		free(o);
		break;
	}
	case META_FMT_JSON: {
		fputs("{\"tool\":\"types\",\"binary\":", out);
		meta_put_json_str(out, m->path);
		fputs(",\"types\":[\n", out);
		size_t done = 0, total = sel ? nsel : m->nclasses;
		for (size_t i = 0; i < m->nclasses; i++) {
			if (sel && !sel[i])
				continue;
			json_type(out, m, &m->classes[i]);
			fputs(++done < total ? ",\n" : "\n", out);
		}
		fputs("]}\n", out);
		break;
	}
	case META_FMT_C: {
		struct meta_obuf *o = meta_obuf_new(out);
		if (!o) {
			meta_set_err(err, "%s: out of memory", m->path);
			return -1;
		}
		fputs("/* kiln meta types: generated from ", out);
		fputs("the binary's DWARF; layout in docs/meta-formats.md */\n", out);
		c_tables(out, o, m, sel);
		free(o);
		break;
	}
	}
	return 0;
}

int meta_tool_types(struct meta_model *m, FILE *out, enum meta_format fmt, struct meta_err *err)
{
	if (meta_need_dwarf(m, "types", err))
		return -1;
	return put_types(m, out, fmt, NULL, 0, NULL, err);
}

/* "struct foo" -> kind META_STRUCT and "foo"; "foo" -> any kind. */
static const char *split_kind(const char *spec, int *kind)
{
	static const struct {
		const char *word;
		int kind;
	} kinds[] = { { "struct ", META_STRUCT }, { "union ", META_UNION }, { "class ", META_CLASS },
		      { "enum ", META_ENUM } };
	*kind = -1;
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
		size_t n = strlen(kinds[i].word);
		if (!strncmp(spec, kinds[i].word, n)) {
			*kind = kinds[i].kind;
			for (spec += n; *spec == ' ';)
				spec++;
			return spec;
		}
	}
	return spec;
}

static size_t select_class(unsigned char *sel, uint32_t c)
{
	if (sel[c])
		return 0;
	sel[c] = 1;
	return 1;
}

int meta_tool_types_named(struct meta_model *m, FILE *out, enum meta_format fmt, const char *spec,
			  struct meta_err *err)
{
	if (meta_need_dwarf(m, "types", err))
		return -1;
	int kind;
	const char *name = split_kind(spec, &kind);
	unsigned char *sel = calloc(m->nclasses ? m->nclasses : 1, 1);
	if (!sel) {
		meta_set_err(err, "%s: out of memory", m->path);
		return -1;
	}
	/* Definitions first; a name only declared (`struct foo;`) shows its
	 * declaration. A typedef brings the types it names along. */
	size_t nsel = 0;
	for (int pass = 0; pass < 2 && !nsel; pass++) {
		for (size_t i = 0; i < m->nclasses; i++) {
			const struct meta_type *t = &m->types[m->classes[i].rep];
			if (!t->name || strcmp(t->name, name) || (kind >= 0 && t->kind != kind) ||
			    (pass == 0 && (t->flags & META_T_DECLARATION)))
				continue;
			nsel += select_class(sel, (uint32_t)i);
			for (int depth = 0; t->kind == META_TYPEDEF && t->ref != META_NONE && depth < 16; depth++) {
				uint32_t c = m->classes[m->types[t->ref].cls].target;
				nsel += select_class(sel, c);
				t = &m->types[m->classes[c].rep];
			}
		}
	}
	int rc;
	if (!nsel) {
		meta_set_err(err, "%s: no type named '%s'", m->path, spec);
		rc = -1;
	} else {
		char how[300];
		snprintf(how, sizeof how, "--type '%s'", spec);
		rc = put_types(m, out, fmt, sel, nsel, how, err);
	}
	free(sel);
	return rc;
}
