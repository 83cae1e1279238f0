/* The preload library's own string and memory functions. Every object linked
 * into libkiln-trace.so (src/shm and src/ipc too) calls these, bound locally
 * (the version script keeps them out of the dynamic symbol table), not libc's.
 *
 * Why not libc's: each is an IFUNC reached through a lazily bound PLT slot,
 * so the first call of each in every process of a build runs ld.so's lookup
 * (its code, libc's hash and symbol tables) and the chosen variant's code
 * page; in a short process most of those pages are touched by nobody else.
 * On GNU hello's configure that was about 6 page faults per process (strstr,
 * memmove, memcmp, strchr and the binding path: docs/benchmarks.md), each
 * 12-22 us on the development VMs, where a check needs a handful of short
 * strings. These are small, plain and fast enough for paths and messages.
 *
 * They live with the hooks because, like the hooks, they define libc's
 * names: the unit tests' static archive and the audit library leave them
 * out. Built with -fno-tree-loop-distribute-patterns (Makefile) so that the
 * compiler cannot turn a loop here back into a call to memcpy or memset.
 * Hidden: defined here, bound here, exported nowhere (and not the hooks the
 * symbol tests expect every default-visibility function here to be). No
 * <string.h>, so that tests/unit/test_trace_string.c can build this file
 * under other names and compare it with libc's. */
#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(hidden)

static inline uint64_t load64(const void *p)
{
	uint64_t v;
	__builtin_memcpy(&v, p, sizeof v);
	return v;
}

void *memcpy(void *restrict dst, const void *restrict src, size_t n)
{
	void *ret = dst;
	__asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
	return ret;
}

void *memmove(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;

	if (d == s || n == 0)
		return dst;
	if (d < s || d >= s + n)
		return memcpy(dst, src, n);
	while (n--) /* overlapping, destination above: copy from the end */
		d[n] = s[n];
	return dst;
}

void *memset(void *dst, int c, size_t n)
{
	void *ret = dst;
	__asm__ volatile("rep stosb" : "+D"(dst), "+c"(n) : "a"(c) : "memory");
	return ret;
}

int memcmp(const void *a, const void *b, size_t n)
{
	const unsigned char *p = a, *q = b;

	while (n >= 8 && load64(p) == load64(q)) {
		p += 8;
		q += 8;
		n -= 8;
	}
	for (; n; n--, p++, q++)
		if (*p != *q)
			return *p < *q ? -1 : 1;
	return 0;
}

void *memchr(const void *s, int c, size_t n)
{
	const unsigned char *p = s;

	for (; n; n--, p++)
		if (*p == (unsigned char)c)
			return (void *)p;
	return NULL;
}

/* A byte at a time: paths are short, and a word-at-a-time loop reads past
 * the terminator, which sanitizers and valgrind rightly report. */
size_t strlen(const char *s)
{
	const char *p = s;

	while (*p)
		p++;
	return (size_t)(p - s);
}

char *strchr(const char *s, int c)
{
	for (;; s++) {
		if (*s == (char)c)
			return (char *)s;
		if (!*s)
			return NULL;
	}
}

char *strrchr(const char *s, int c)
{
	const char *last = NULL;

	for (;; s++) {
		if (*s == (char)c)
			last = s;
		if (!*s)
			return (char *)last;
	}
}

int strcmp(const char *a, const char *b)
{
	const unsigned char *p = (const unsigned char *)a, *q = (const unsigned char *)b;

	while (*p && *p == *q) {
		p++;
		q++;
	}
	return (*p > *q) - (*p < *q);
}

int strncmp(const char *a, const char *b, size_t n)
{
	const unsigned char *p = (const unsigned char *)a, *q = (const unsigned char *)b;

	for (; n; n--, p++, q++) {
		if (*p != *q)
			return *p < *q ? -1 : 1;
		if (!*p)
			return 0;
	}
	return 0;
}

size_t strcspn(const char *s, const char *reject)
{
	size_t i;

	for (i = 0; s[i]; i++)
		for (const char *r = reject; *r; r++)
			if (s[i] == *r)
				return i;
	return i;
}

char *strstr(const char *hay, const char *needle)
{
	size_t n = strlen(needle);

	if (n == 0)
		return (char *)hay;
	for (; (hay = strchr(hay, needle[0])) != NULL; hay++)
		if (strncmp(hay, needle, n) == 0)
			return (char *)hay;
	return NULL;
}

#pragma GCC visibility pop
