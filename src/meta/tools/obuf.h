/* A growable output buffer in front of a FILE: tools append text with
 * inline helpers and it goes out in large writes (the frames of a big binary
 * are millions of short fields; stdio per field costs more than the work). */
#ifndef KILN_META_OBUF_H
#define KILN_META_OBUF_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define META_OBUF_SIZE (256 * 1024)

struct meta_obuf {
	FILE *out;
	size_t len;
	char buf[META_OBUF_SIZE];
};

/* A buffer in front of OUT (it is large: on the heap), or NULL. */
static inline struct meta_obuf *meta_obuf_new(FILE *out)
{
	struct meta_obuf *o = malloc(sizeof *o);
	if (o) {
		o->out = out;
		o->len = 0;
	}
	return o;
}

static inline void meta_obuf_flush(struct meta_obuf *o)
{
	if (o->len)
		fwrite_unlocked(o->buf, 1, o->len, o->out);
	o->len = 0;
}

/* Room for N more bytes (N <= META_OBUF_SIZE). */
static inline char *meta_obuf_room(struct meta_obuf *o, size_t n)
{
	if (o->len + n > META_OBUF_SIZE)
		meta_obuf_flush(o);
	return o->buf + o->len;
}

static inline void meta_obuf_mem(struct meta_obuf *o, const char *s, size_t n)
{
	if (n > META_OBUF_SIZE / 2) {
		meta_obuf_flush(o);
		fwrite_unlocked(s, 1, n, o->out);
		return;
	}
	memcpy(meta_obuf_room(o, n), s, n);
	o->len += n;
}

static inline void meta_obuf_str(struct meta_obuf *o, const char *s)
{
	meta_obuf_mem(o, s, strlen(s));
}

static inline void meta_obuf_chr(struct meta_obuf *o, char c)
{
	*meta_obuf_room(o, 1) = c;
	o->len++;
}

static inline void meta_obuf_u64(struct meta_obuf *o, uint64_t v)
{
	char tmp[20], *p = tmp + sizeof tmp;
	do
		*--p = (char)('0' + v % 10);
	while (v /= 10);
	meta_obuf_mem(o, p, (size_t)(tmp + sizeof tmp - p));
}

static inline void meta_obuf_i64(struct meta_obuf *o, int64_t v, int plus)
{
	if (v < 0) {
		meta_obuf_chr(o, '-');
		meta_obuf_u64(o, (uint64_t)0 - (uint64_t)v);
		return;
	}
	if (plus)
		meta_obuf_chr(o, '+');
	meta_obuf_u64(o, (uint64_t)v);
}

static inline void meta_obuf_hex(struct meta_obuf *o, uint64_t v, int width)
{
	static const char digits[] = "0123456789abcdef";
	char tmp[16], *p = tmp + sizeof tmp;
	do
		*--p = digits[v & 15];
	while ((v >>= 4) && p > tmp);
	while (tmp + sizeof tmp - p < width && p > tmp)
		*--p = '0';
	meta_obuf_mem(o, p, (size_t)(tmp + sizeof tmp - p));
}

#endif
