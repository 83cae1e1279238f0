/* UTF-8 well-formedness, shared by every writer of text or JSON output. */
#ifndef KILN_UTIL_UTF8_H
#define KILN_UTIL_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length (1-4) of the well-formed UTF-8 sequence at p, of at most `avail`
 * bytes, or 0 (overlong forms, surrogates and values past U+10FFFF are not
 * well-formed). The code point goes to *cp when cp is not NULL. */
static inline size_t utf8_len(const unsigned char *p, size_t avail, uint32_t *cp)
{
	if (!avail)
		return 0;
	if (p[0] < 0x80) {
		if (cp)
			*cp = p[0];
		return 1;
	}
	size_t n = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 && p[0] < 0xf0 ? 3 : p[0] >= 0xc2 && p[0] < 0xe0 ? 2 : 0;
	if (!n || n > avail)
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	uint32_t c = n == 2 ? (uint32_t)(p[0] & 0x1f) << 6 | (p[1] & 0x3f)
		   : n == 3 ? (uint32_t)(p[0] & 0x0f) << 12 | (uint32_t)(p[1] & 0x3f) << 6 | (p[2] & 0x3f)
			    : (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3f) << 12 |
				      (uint32_t)(p[2] & 0x3f) << 6 | (p[3] & 0x3f);
	if ((n == 3 && (c < 0x800 || (c >= 0xd800 && c <= 0xdfff))) || (n == 4 && (c < 0x10000 || c > 0x10ffff)))
		return 0;
	if (cp)
		*cp = c;
	return n;
}

#endif
