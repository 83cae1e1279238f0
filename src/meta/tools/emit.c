/* Output helpers: string quoting for JSON and C, readable type labels. */
#include "meta/tools/obuf.h"
#include "meta/tools/tool.h"

static void put_escaped(FILE *out, const char *s, int json)
{
	putc('"', out);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		unsigned char c = *p;
		if (c == '"' || c == '\\') {
			putc('\\', out);
			putc(c, out);
		} else if (c < 0x20 || c == 0x7f || (!json && c >= 0x80)) {
			/* C: octal keeps the next character from joining the escape. */
			if (json)
				fprintf(out, "\\u%04x", c);
			else
				fprintf(out, "\\%03o", c);
		} else if (!json && c == '?') {
			fputs("\\?", out); /* no trigraphs */
		} else {
			putc(c, out);
		}
	}
	putc('"', out);
}

void meta_put_json_str(FILE *out, const char *s)
{
	if (s)
		put_escaped(out, s, 1);
	else
		fputs("null", out);
}

void meta_put_c_str(FILE *out, const char *s)
{
	if (s)
		put_escaped(out, s, 0);
	else
		fputs("0", out);
}

static void label(FILE *out, const struct meta_model *m, uint32_t t, int depth)
{
	for (; depth < 8; depth++) {
		if (t == META_NONE) {
			fputs("void", out);
			return;
		}
		const struct meta_type *ty = &m->types[t];
		switch (ty->kind) {
		case META_STRUCT: case META_UNION: case META_CLASS: case META_ENUM:
			fputs_unlocked(meta_kind_name(ty->kind), out);
			putc_unlocked(' ', out);
			fputs_unlocked(ty->name ? ty->name : "<anon>", out);
			return;
		case META_POINTER:
			label(out, m, ty->ref, depth + 1);
			fputs(" *", out);
			return;
		case META_CONST: case META_VOLATILE: case META_RESTRICT: case META_ATOMIC:
			fprintf(out, "%s ", meta_kind_name(ty->kind));
			t = ty->ref;
			continue;
		case META_ARRAY:
			label(out, m, ty->ref, depth + 1);
			for (uint32_t k = 0; k < ty->nmembers; k++)
				fprintf(out, "[%llu]", (unsigned long long)m->members[ty->first + k].value);
			return;
		case META_FUNCTION:
			fputs("function", out);
			return;
		default:
			fputs(ty->name ? ty->name : meta_kind_name(ty->kind), out);
			return;
		}
	}
	fputs("...", out);
}

void meta_put_type_label(FILE *out, const struct meta_model *m, uint32_t t)
{
	label(out, m, t, 0);
}

/* Number formatting without printf: the tools print millions of numbers. */
void meta_put_u64(FILE *out, uint64_t v)
{
	char buf[24], *p = buf + sizeof buf;
	do
		*--p = (char)('0' + v % 10);
	while (v /= 10);
	fwrite_unlocked(p, 1, (size_t)(buf + sizeof buf - p), out);
}

void meta_put_i64(FILE *out, int64_t v, int plus)
{
	if (v < 0) {
		putc_unlocked('-', out);
		meta_put_u64(out, (uint64_t)0 - (uint64_t)v);
		return;
	}
	if (plus)
		putc_unlocked('+', out);
	meta_put_u64(out, (uint64_t)v);
}

void meta_put_hex(FILE *out, uint64_t v, int width)
{
	static const char digits[] = "0123456789abcdef";
	char buf[16], *p = buf + sizeof buf;
	do
		*--p = digits[v & 15];
	while ((v >>= 4) && p > buf);
	while (buf + sizeof buf - p < width && p > buf)
		*--p = '0';
	fwrite_unlocked(p, 1, (size_t)(buf + sizeof buf - p), out);
}

void meta_obuf_json_str(struct meta_obuf *o, const char *s)
{
	if (!s) {
		meta_obuf_mem(o, "null", 4);
		return;
	}
	meta_obuf_chr(o, '"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\') {
			meta_obuf_chr(o, '\\');
			meta_obuf_chr(o, (char)*p);
		} else if (*p < 0x20 || *p == 0x7f) {
			meta_obuf_mem(o, "\\u00", 4);
			meta_obuf_hex(o, *p, 2);
		} else {
			meta_obuf_chr(o, (char)*p);
		}
	}
	meta_obuf_chr(o, '"');
}

static void obuf_label(struct meta_obuf *o, const struct meta_model *m, uint32_t t, int depth)
{
	for (; depth < 8; depth++) {
		if (t == META_NONE) {
			meta_obuf_mem(o, "void", 4);
			return;
		}
		const struct meta_type *ty = &m->types[t];
		switch (ty->kind) {
		case META_STRUCT: case META_UNION: case META_CLASS: case META_ENUM:
			meta_obuf_str(o, meta_kind_name(ty->kind));
			meta_obuf_chr(o, ' ');
			meta_obuf_str(o, ty->name ? ty->name : "<anon>");
			return;
		case META_POINTER:
			obuf_label(o, m, ty->ref, depth + 1);
			meta_obuf_mem(o, " *", 2);
			return;
		case META_CONST: case META_VOLATILE: case META_RESTRICT: case META_ATOMIC:
			meta_obuf_str(o, meta_kind_name(ty->kind));
			meta_obuf_chr(o, ' ');
			t = ty->ref;
			continue;
		case META_ARRAY:
			obuf_label(o, m, ty->ref, depth + 1);
			for (uint32_t k = 0; k < ty->nmembers; k++) {
				meta_obuf_chr(o, '[');
				meta_obuf_u64(o, m->members[ty->first + k].value);
				meta_obuf_chr(o, ']');
			}
			return;
		case META_FUNCTION:
			meta_obuf_str(o, "function");
			return;
		default:
			meta_obuf_str(o, ty->name ? ty->name : meta_kind_name(ty->kind));
			return;
		}
	}
	meta_obuf_mem(o, "...", 3);
}

void meta_obuf_type_label(struct meta_obuf *o, const struct meta_model *m, uint32_t t)
{
	obuf_label(o, m, t, 0);
}
