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

/* Formatting straight into buffer memory at P, returning the end: a run of
 * fields after one meta_obuf_room() (stores through a char pointer could
 * alias o->len, so the helpers above reload it at every byte). */
static inline char *meta_raw_mem(char *p, const char *s, size_t n)
{
	memcpy(p, s, n);
	return p + n;
}

static inline char *meta_raw_u64(char *p, uint64_t v)
{
	static const char pairs[] =
		"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
		"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
		"8081828384858687888990919293949596979899";
	int n = 1;
	for (uint64_t x = v; x >= 10; x /= 10)
		n++;
	char *end = p + n;
	p = end;
	for (; v >= 100; v /= 100) {
		p -= 2;
		memcpy(p, pairs + 2 * (v % 100), 2);
	}
	if (v >= 10) {
		p -= 2;
		memcpy(p, pairs + 2 * v, 2);
	} else {
		*--p = (char)('0' + v);
	}
	return end;
}

static inline char *meta_raw_i64(char *p, int64_t v)
{
	if (v < 0) {
		*p++ = '-';
		return meta_raw_u64(p, (uint64_t)0 - (uint64_t)v);
	}
	return meta_raw_u64(p, (uint64_t)v);
}

/* V in hex, at least WIDTH digits (at most 16). */
static inline char *meta_raw_hex(char *p, uint64_t v, int width)
{
	static const char pairs[] =
		"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
		"202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
		"404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
		"606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"
		"808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
		"a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
		"c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
		"e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";
	int n = v ? (67 - __builtin_clzll(v)) / 4 : 1;
	if (n < width)
		n = width > 16 ? 16 : width;
	char *end = p + n;
	p = end;
	for (int left = n; left >= 2; left -= 2, v >>= 8) {
		p -= 2;
		memcpy(p, pairs + 2 * (v & 0xff), 2);
	}
	if (p > end - n)
		*--p = pairs[2 * (v & 15) + 1];
	return end;
}

/* Ends a run of raw writes that started at meta_obuf_room(). */
static inline void meta_obuf_done(struct meta_obuf *o, const char *end)
{
	o->len = (size_t)(end - o->buf);
}

static inline void meta_obuf_u64(struct meta_obuf *o, uint64_t v)
{
	meta_obuf_done(o, meta_raw_u64(meta_obuf_room(o, 20), v));
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
	meta_obuf_done(o, meta_raw_hex(meta_obuf_room(o, 16), v, width));
}

#endif
