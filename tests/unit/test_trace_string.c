/* The preload library's own string and memory functions
 * (src/trace/hooks/string.c), built here under other names and compared with
 * libc's on every length and alignment up to a few words, both sides of the
 * terminator, overlapping moves and the sign of every comparison. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define memcpy k_memcpy
#define memmove k_memmove
#define memset k_memset
#define memcmp k_memcmp
#define memchr k_memchr
#define strlen k_strlen
#define strchr k_strchr
#define strrchr k_strrchr
#define strcmp k_strcmp
#define strncmp k_strncmp
#define strcspn k_strcspn
#define strstr k_strstr
#include "trace/hooks/string.c"
#undef memcpy
#undef memmove
#undef memset
#undef memcmp
#undef memchr
#undef strlen
#undef strchr
#undef strrchr
#undef strcmp
#undef strncmp
#undef strcspn
#undef strstr

#define SPAN 80

static int sign(int v)
{
	return (v > 0) - (v < 0);
}

/* A string of n bytes from an alphabet of three letters (so that matches and
 * near-matches are common) at offset `at` of a buffer whose other bytes are
 * nonzero, so a function that reads past the terminator finds no other. */
static char *fill(char *buf, size_t at, size_t n, unsigned seed)
{
	memset(buf, 'z', 2 * SPAN + 16);
	for (size_t i = 0; i < n; i++)
		buf[at + i] = (char)('a' + (seed = seed * 1103515245u + 12345u) % 3);
	buf[at + n] = 0;
	return buf + at;
}

static void test_lengths_and_searches(void **state)
{
	(void)state;
	char buf[2 * SPAN + 16];
	for (size_t at = 0; at < 16; at++)
		for (size_t n = 0; n < SPAN; n++) {
			char *s = fill(buf, at, n, (unsigned)(at * SPAN + n));
			assert_int_equal(k_strlen(s), strlen(s));
			for (int c = 0; c < 256; c += (c < 'a' - 1 || c > 'd') ? 37 : 1) {
				assert_ptr_equal(k_strchr(s, c), strchr(s, c));
				assert_ptr_equal(k_strrchr(s, c), strrchr(s, c));
				assert_ptr_equal(k_memchr(s, c, n), memchr(s, c, n));
			}
			assert_int_equal(k_strcspn(s, "c"), strcspn(s, "c"));
			assert_int_equal(k_strcspn(s, "xyzb"), strcspn(s, "xyzb"));
			assert_int_equal(k_strcspn(s, ""), strcspn(s, ""));
			static const char *needles[] = { "", "a", "ab", "abc", "cab", "bbb", "aaaa",
							 "cacb", "q" };
			for (size_t i = 0; i < sizeof needles / sizeof *needles; i++)
				assert_ptr_equal(k_strstr(s, needles[i]), strstr(s, needles[i]));
			if (n > 3) /* a needle that is the string's own tail */
				assert_ptr_equal(k_strstr(s, s + n - 3), strstr(s, s + n - 3));
		}
}

static void test_comparisons(void **state)
{
	(void)state;
	char a[2 * SPAN + 16], b[2 * SPAN + 16];
	for (size_t n = 0; n < SPAN; n++)
		for (unsigned seed = 0; seed < 40; seed++) {
			char *s = fill(a, seed % 8, n, seed);
			char *t = fill(b, (seed / 8) % 8, n, seed);
			if (n && seed % 3)
				t[(seed * 7) % n] = (char)(seed % 2 ? 0x80 : 'b'); /* sign of unsigned bytes */
			assert_int_equal(sign(k_strcmp(s, t)), sign(strcmp(s, t)));
			assert_int_equal(sign(k_memcmp(s, t, n)), sign(memcmp(s, t, n)));
			for (size_t m = 0; m <= n + 1; m++)
				assert_int_equal(sign(k_strncmp(s, t, m)), sign(strncmp(s, t, m)));
			t[n / 2] = 0; /* t a prefix of s, or shorter */
			assert_int_equal(sign(k_strcmp(s, t)), sign(strcmp(s, t)));
			assert_int_equal(sign(k_strncmp(s, t, n)), sign(strncmp(s, t, n)));
		}
}

static void test_copies_and_moves(void **state)
{
	(void)state;
	unsigned char src[3 * SPAN], want[3 * SPAN], got[3 * SPAN];
	for (size_t i = 0; i < sizeof src; i++)
		src[i] = (unsigned char)(i * 131 + 7);
	for (size_t n = 0; n < SPAN; n++)
		for (size_t from = 0; from < 2 * SPAN - n; from += 5)
			for (size_t to = 0; to < 2 * SPAN - n; to += 3) {
				memcpy(want, src, sizeof src);
				memcpy(got, src, sizeof src);
				memmove(want + to, want + from, n);
				assert_ptr_equal(k_memmove(got + to, got + from, n), got + to);
				assert_memory_equal(got, want, sizeof got);
			}
	for (size_t n = 0; n < 2 * SPAN; n++) {
		memset(got, 1, sizeof got);
		memset(want, 1, sizeof want);
		memcpy(want + 3, src, n);
		assert_ptr_equal(k_memcpy(got + 3, src, n), got + 3);
		assert_memory_equal(got, want, sizeof got);
		memset(want + 5, 0xab, n);
		assert_ptr_equal(k_memset(got + 5, 0x1ab, n), got + 5); /* converted to unsigned char */
		assert_memory_equal(got, want, sizeof got);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lengths_and_searches),
		cmocka_unit_test(test_comparisons),
		cmocka_unit_test(test_copies_and_moves),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
