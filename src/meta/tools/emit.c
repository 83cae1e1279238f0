/* Output helpers: string quoting for JSON and C, readable type labels. */
#include <string.h>

#include "meta/tools/obuf.h"
#include "meta/tools/tool.h"
#include "util/utf8.h"

/* S as a JSON string into PUT: control characters escaped, and bytes that are
 * not well-formed UTF-8 (a corrupt string table) as the Latin-1 character of
 * that value, so the document always parses. */
static void json_escape(const char *s, void (*put)(void *, const char *, size_t), void *ctx)
{
	char esc[8];
	put(ctx, "\"", 1);
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		size_t n = utf8_len(p, 4, NULL);
		if (*p == '"' || *p == '\\') {
			esc[0] = '\\';
			esc[1] = (char)*p;
			put(ctx, esc, 2);
			p++;
		} else if (*p < 0x20 || *p == 0x7f || !n) {
			snprintf(esc, sizeof esc, "\\u%04x", *p);
			put(ctx, esc, 6);
			p++;
		} else {
			put(ctx, (const char *)p, n);
			p += n;
		}
	}
	put(ctx, "\"", 1);
}

static void put_file(void *ctx, const char *s, size_t n)
{
	fwrite_unlocked(s, 1, n, ctx);
}

static void put_obuf(void *ctx, const char *s, size_t n)
{
	meta_obuf_mem(ctx, s, n);
}

void meta_put_json_str(FILE *out, const char *s)
{
	if (s)
		json_escape(s, put_file, out);
	else
		fputs("null", out);
}

/* S as a C string literal into PUT ("0" for NULL). */
static void c_escape(const char *s, void (*put)(void *, const char *, size_t), void *ctx)
{
	if (!s) {
		put(ctx, "0", 1);
		return;
	}
	/* 1: printed as is (the common case, copied in runs) */
	static const unsigned char plain[256] = {
		[0x20] = 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* not '"' */
		[0x30] = 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, /* not '?' */
		[0x40] = 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
		[0x50] = 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, /* not '\\' */
		[0x60] = 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
		[0x70] = 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, /* not DEL */
	};
	put(ctx, "\"", 1);
	const unsigned char *p = (const unsigned char *)s, *run = p;
	for (; *p; p++) {
		unsigned char c = *p;
		if (plain[c])
			continue;
		if (p > run)
			put(ctx, (const char *)run, (size_t)(p - run));
		run = p + 1;
		char esc[5] = { '\\', (char)c };
		if (c == '?')
			put(ctx, "\\?", 2); /* no trigraphs */
		else if (c == '"' || c == '\\')
			put(ctx, esc, 2);
		else /* octal: the next character cannot join it */
			put(ctx, esc, (size_t)snprintf(esc + 1, sizeof esc - 1, "%03o", c) + 1);
	}
	if (p > run)
		put(ctx, (const char *)run, (size_t)(p - run));
	put(ctx, "\"", 1);
}

void meta_put_c_str(FILE *out, const char *s)
{
	c_escape(s, put_file, out);
}

void meta_obuf_c_str(struct meta_obuf *o, const char *s)
{
	c_escape(s, put_obuf, o);
}

void meta_obuf_json_str(struct meta_obuf *o, const char *s)
{
	if (s)
		json_escape(s, put_obuf, o);
	else
		meta_obuf_mem(o, "null", 4);
}

typedef void (*put_fn)(void *, const char *, size_t);

static void put_str(put_fn put, void *ctx, const char *s)
{
	put(ctx, s, strlen(s));
}

/* A short readable name for type T, through PUT. */
static void label(put_fn put, void *ctx, const struct meta_model *m, uint32_t t, int depth)
{
	for (; depth < 8; depth++) {
		if (t == META_NONE) {
			put_str(put, ctx, "void");
			return;
		}
		const struct meta_type *ty = &m->types[t];
		switch (ty->kind) {
		case META_STRUCT: case META_UNION: case META_CLASS: case META_ENUM:
			put_str(put, ctx, meta_kind_name(ty->kind));
			put(ctx, " ", 1);
			put_str(put, ctx, ty->name ? ty->name : "<anon>");
			return;
		case META_POINTER:
			label(put, ctx, m, ty->ref, depth + 1);
			put(ctx, " *", 2);
			return;
		case META_CONST: case META_VOLATILE: case META_RESTRICT: case META_ATOMIC:
			put_str(put, ctx, meta_kind_name(ty->kind));
			put(ctx, " ", 1);
			t = ty->ref;
			continue;
		case META_ARRAY:
			label(put, ctx, m, ty->ref, depth + 1);
			for (uint32_t k = 0; k < ty->nmembers; k++) {
				char dim[32];
				int n = snprintf(dim, sizeof dim, "[%llu]",
						 (unsigned long long)m->members[ty->first + k].value);
				put(ctx, dim, (size_t)n);
			}
			return;
		case META_FUNCTION:
			put_str(put, ctx, "function");
			return;
		default:
			put_str(put, ctx, ty->name ? ty->name : meta_kind_name(ty->kind));
			return;
		}
	}
	put(ctx, "...", 3);
}

void meta_put_type_label(FILE *out, const struct meta_model *m, uint32_t t)
{
	label(put_file, out, m, t, 0);
}

void meta_obuf_type_label(struct meta_obuf *o, const struct meta_model *m, uint32_t t)
{
	label(put_obuf, o, m, t, 0);
}
