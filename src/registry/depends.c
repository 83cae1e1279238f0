#include "registry/depends.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const char *skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

static int valid_name_char(char c)
{
	return isalnum((unsigned char)c) || c == '+' || c == '-' || c == '.' || c == '_';
}

int deps_parse(const char *value, int (*cb)(const struct dep_atom *a, void *ctx), void *ctx,
	       char *err, size_t errlen)
{
	const char *p = skip_ws(value);
	if (!*p)
		return 0;
	struct dep_atom a;
	int clause = 0, alt = 0;
	for (;;) {
		memset(&a, 0, sizeof a);
		a.clause = clause;
		a.alt = alt;
		p = skip_ws(p);
		const char *s = p;
		while (valid_name_char(*p))
			p++;
		if (p == s) {
			snprintf(err, errlen, "expected a package name at '%.30s'", s);
			return -1;
		}
		if ((size_t)(p - s) >= sizeof a.name) {
			snprintf(err, errlen, "package name too long: '%.40s...'", s);
			return -1;
		}
		memcpy(a.name, s, (size_t)(p - s));
		if (*p == ':') {
			s = ++p;
			while (valid_name_char(*p))
				p++;
			if (p == s || (size_t)(p - s) >= sizeof a.archq) {
				snprintf(err, errlen, "bad architecture qualifier after '%s:'", a.name);
				return -1;
			}
			memcpy(a.archq, s, (size_t)(p - s));
		}
		p = skip_ws(p);
		if (*p == '(') {
			s = ++p;
			while (*p && *p != ')')
				p++;
			if (!*p) {
				snprintf(err, errlen, "unterminated version constraint after '%s'", a.name);
				return -1;
			}
			const char *e = p++;
			s = skip_ws(s);
			while (e > s && isspace((unsigned char)e[-1]))
				e--;
			size_t n = (size_t)(e - s);
			if (n >= sizeof a.version)
				n = sizeof a.version - 1;
			memcpy(a.version, s, n);
			/* Collapse the line breaks a long constraint may contain. */
			for (char *q = a.version; *q; q++)
				if (*q == '\n' || *q == '\t')
					*q = ' ';
			p = skip_ws(p);
		}
		/* Architecture restrictions and build profiles only appear in
		 * source-package fields; accept and ignore them. */
		while (*p == '[' || *p == '<') {
			char close = *p == '[' ? ']' : '>';
			while (*p && *p != close)
				p++;
			if (!*p) {
				snprintf(err, errlen, "unterminated '%c' after '%s'", close == ']' ? '[' : '<',
					 a.name);
				return -1;
			}
			p = skip_ws(p + 1);
		}
		int rc = cb(&a, ctx);
		if (rc)
			return rc;
		if (*p == '|') {
			p++;
			alt++;
		} else if (*p == ',') {
			p = skip_ws(p + 1);
			if (!*p) /* tolerate a trailing comma */
				return 0;
			clause++;
			alt = 0;
		} else if (!*p) {
			return 0;
		} else {
			snprintf(err, errlen, "unexpected '%c' after '%s'", *p, a.name);
			return -1;
		}
	}
}
