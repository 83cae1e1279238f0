/* `extrasyms`: functions and static variables that DWARF describes at a fixed
 * address but the symbol table does not name (e.g. locals dropped by
 * `objcopy --discard-all` or `strip --discard-all`), one per address. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "meta/tools/tool.h"

enum { OBJECT, FUNCTION, FUNCTION_PART };
static const char *const kind_names[] = { "object", "function", "function_part" };

struct extra {
	const char *name;
	uint64_t addr, size;
	int kind;
};

static int cmp_extra(const void *a, const void *b)
{
	const struct extra *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->kind != y->kind)
		return y->kind - x->kind;
	return strcmp(x->name, y->name);
}

static uint64_t type_size(const struct meta_model *m, uint32_t t)
{
	return t != META_NONE && (m->types[t].flags & META_T_HAS_SIZE) ? m->types[t].size : 0;
}

int meta_tool_extrasyms(struct meta_model *m, FILE *out, enum meta_format fmt, struct meta_err *err)
{
	if (meta_need_dwarf(m, "extrasyms", err))
		return -1;
	struct extra *v = NULL;
	size_t n = 0, cap = 0;
	for (size_t i = 0; i < m->nfunctions; i++) {
		const struct meta_function *f = &m->functions[i];
		if (!f->name || !f->range_count)
			continue;
		/* The entry is the first range; later ones are parts split off
		 * by the compiler (GCC's foo.cold), with local symbols of their own. */
		for (uint32_t k = 0; k < f->range_count; k++) {
			const struct meta_range *r = &m->ranges[f->range_first + k];
			const struct meta_range *entry = &m->ranges[f->range_first];
			if (meta_symbol_has_addr(m, r->lo) || (k && r->lo >= entry->lo && r->lo < entry->hi))
				continue;
			struct extra e = { f->name, r->lo, r->hi - r->lo, k ? FUNCTION_PART : FUNCTION };
			if (META_PUSH(v, n, cap, e))
				goto oom;
		}
	}
	for (size_t i = 0; i < m->nglobals; i++) {
		const struct meta_global *g = &m->globals[i];
		if (!g->name || meta_symbol_has_addr(m, g->addr))
			continue;
		struct extra e = { g->name, g->addr, type_size(m, g->type), OBJECT };
		if (META_PUSH(v, n, cap, e))
			goto oom;
	}
	if (n)
		qsort(v, n, sizeof *v, cmp_extra);
	size_t k = 0;
	for (size_t i = 0; i < n; i++) /* one entry per address (CUs repeat) */
		if (!k || v[k - 1].addr != v[i].addr)
			v[k++] = v[i];
	n = k;
	switch (fmt) {
	case META_FMT_TEXT:
		fprintf(out, "# kiln meta extrasyms %s: %zu symbols in DWARF but not in the symbol table\n",
			m->path, n);
		for (size_t i = 0; i < n; i++)
			fprintf(out, "0x%016" PRIx64 " %8" PRIu64 " %s %s\n", v[i].addr, v[i].size,
				kind_names[v[i].kind], v[i].name);
		break;
	case META_FMT_JSON:
		fputs("{\"tool\":\"extrasyms\",\"binary\":", out);
		meta_put_json_str(out, m->path);
		fputs(",\"extrasyms\":[\n", out);
		for (size_t i = 0; i < n; i++) {
			fputs("{\"name\":", out);
			meta_put_json_str(out, v[i].name);
			fprintf(out, ",\"addr\":%" PRIu64 ",\"size\":%" PRIu64 ",\"kind\":\"%s\"}%s\n", v[i].addr,
				v[i].size, kind_names[v[i].kind], i + 1 < n ? "," : "");
		}
		fputs("]}\n", out);
		break;
	case META_FMT_C:
		fputs("/* kiln meta extrasyms: generated; layout in docs/meta-formats.md */\n"
		      "#include <stdint.h>\n\n"
		      "struct kiln_meta_extrasym {\n\tconst char *name;\n\tuint64_t addr, size;\n"
		      "\tint32_t kind; /* 0 object, 1 function, 2 function part (e.g. foo.cold) */\n};\n\n"
		      "const struct kiln_meta_extrasym kiln_meta_extrasyms[] = {\n", out);
		for (size_t i = 0; i < n; i++) {
			fputs("\t{ ", out);
			meta_put_c_str(out, v[i].name);
			fprintf(out, ", 0x%" PRIx64 "u, %" PRIu64 "u, %d },\n", v[i].addr, v[i].size, v[i].kind);
		}
		fprintf(out, "\t{ 0, 0, 0, 0 }\n};\n\nconst uint32_t kiln_meta_nextrasyms = %zuu;\n", n);
		break;
	}
	free(v);
	return 0;
oom:
	free(v);
	meta_set_err(err, "%s: out of memory", m->path);
	return -1;
}
