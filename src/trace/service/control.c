#include "trace/service/control.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/service/build_type.h"

const char *deps_host_arch(void)
{
#if defined(__x86_64__) && defined(__ILP32__)
	return "x32";
#elif defined(__x86_64__)
	return "amd64";
#elif defined(__aarch64__)
	return "arm64";
#elif defined(__i386__)
	return "i386";
#elif defined(__arm__)
	return "armhf";
#elif defined(__riscv) && __riscv_xlen == 64
	return "riscv64";
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return "ppc64el";
#elif defined(__s390x__)
	return "s390x";
#else
	return "unknown";
#endif
}

void dep_list_free(struct dep_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		for (size_t j = 0; j < l->groups[i].n; j++)
			free(l->groups[i].alts[j]);
		free(l->groups[i].alts);
	}
	free(l->groups);
	*l = (struct dep_list){ 0 };
}

/* Does architecture wildcard/name `spec` match `arch` (Linux only)? */
static bool arch_matches(const char *spec, size_t n, const char *arch)
{
	char s[64], linux_arch[80];
	if (n >= sizeof s)
		return false;
	memcpy(s, spec, n);
	s[n] = '\0';
	snprintf(linux_arch, sizeof linux_arch, "linux-%s", arch);
	return !strcmp(s, arch) || !strcmp(s, "any") || !strcmp(s, "linux-any") ||
	       !strcmp(s, linux_arch) || (!strncmp(s, "any-", 4) && !strcmp(s + 4, arch));
}

/* The next whitespace-separated word of s[0..n) at or after *pos: sets
 * (*w, *wn) and moves *pos past it. False when none is left. */
static bool next_word(const char *s, size_t n, size_t *pos, const char **w, size_t *wn)
{
	size_t i = *pos;
	while (i < n && isspace((unsigned char)s[i]))
		i++;
	size_t j = i;
	while (j < n && !isspace((unsigned char)s[j]))
		j++;
	*pos = j;
	*w = s + i;
	*wn = j - i;
	return j > i;
}

/* "[amd64 i386]" or "[!hurd-any !kfreebsd-any]" (contents without brackets). */
static bool arch_list_applies(const char *s, size_t n, const char *arch)
{
	bool any_positive = false, matched = false;
	const char *w;
	size_t wn;
	for (size_t i = 0; next_word(s, n, &i, &w, &wn);) {
		bool neg = w[0] == '!';
		bool m = arch_matches(w + neg, wn - neg, arch);
		if (neg && m)
			return false;
		if (!neg) {
			any_positive = true;
			matched |= m;
		}
	}
	return !any_positive || matched;
}

static bool profile_active(const char *profiles, const char *p, size_t n)
{
	if (!profiles)
		return false;
	const char *w;
	size_t wn, len = strlen(profiles);
	for (size_t i = 0; next_word(profiles, len, &i, &w, &wn);)
		if (wn == n && !memcmp(w, p, n))
			return true;
	return false;
}

/* "<!nocheck cross>": every term must hold. */
static bool profile_group_holds(const char *s, size_t n, const char *profiles)
{
	const char *w;
	size_t wn;
	for (size_t i = 0; next_word(s, n, &i, &w, &wn);) {
		bool neg = w[0] == '!';
		if (profile_active(profiles, w + neg, wn - neg) == neg)
			return false;
	}
	return true;
}

static void group_free(struct dep_group *g)
{
	for (size_t j = 0; j < g->n; j++)
		free(g->alts[j]);
	free(g->alts);
	*g = (struct dep_group){ 0 };
}

static int push_alt(struct dep_group *g, const char *name, size_t n)
{
	char **a = realloc(g->alts, (g->n + 1) * sizeof *a);
	if (!a)
		return -1;
	g->alts = a;
	if (!(a[g->n] = strndup(name, n)))
		return -1;
	g->n++;
	return 0;
}

/* One alternative "name:any (>= 1) [amd64] <!nocheck>": appends its name to
 * g if it applies to this build. */
static int parse_alt(const char *s, size_t n, const char *arch, const char *profiles,
		     struct dep_group *g, char *err, size_t errlen)
{
	size_t i = 0;
	while (i < n && isspace((unsigned char)s[i]))
		i++;
	size_t start = i;
	while (i < n && (isalnum((unsigned char)s[i]) || strchr("+-.", s[i])))
		i++;
	size_t name_len = i - start;
	if (!name_len) {
		snprintf(err, errlen, "bad relation '%.*s': no package name", (int)n, s);
		return -1;
	}
	if (i < n && s[i] == ':') /* arch qualifier */
		while (i < n && !isspace((unsigned char)s[i]) && !strchr("([<", s[i]))
			i++;
	bool applies = true, saw_profiles = false, profiles_hold = false;
	while (i < n) {
		char c = s[i];
		if (isspace((unsigned char)c)) {
			i++;
			continue;
		}
		char close = c == '(' ? ')' : c == '[' ? ']' : c == '<' ? '>' : 0;
		const char *end = close ? memchr(s + i, close, n - i) : NULL;
		if (!end) {
			snprintf(err, errlen, "bad relation '%.*s'", (int)n, s);
			return -1;
		}
		size_t in = (size_t)(end - (s + i)) - 1;
		if (c == '[')
			applies &= arch_list_applies(s + i + 1, in, arch);
		else if (c == '<') {
			saw_profiles = true;
			profiles_hold |= profile_group_holds(s + i + 1, in, profiles);
		}
		i = (size_t)(end - s) + 1;
	}
	if (saw_profiles && !profiles_hold)
		applies = false;
	if (applies && push_alt(g, s + start, name_len) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

int deps_parse_field(const char *value, const char *arch, const char *profiles,
		     struct dep_list *out, char *err, size_t errlen)
{
	const char *s = value;
	while (*s) {
		size_t n = strcspn(s, ",");
		struct dep_group g = { 0 };
		for (size_t i = 0; i < n;) {
			size_t k = strcspn(s + i, "|");
			if (k > n - i)
				k = n - i;
			bool blank = true;
			for (size_t j = 0; j < k; j++)
				blank &= isspace((unsigned char)s[i + j]) != 0;
			if (!blank && parse_alt(s + i, k, arch, profiles, &g, err, errlen) < 0) {
				group_free(&g);
				return -1;
			}
			i += k + 1;
		}
		if (g.n) {
			struct dep_group *gs = realloc(out->groups, (out->n + 1) * sizeof *gs);
			if (!gs) {
				group_free(&g);
				snprintf(err, errlen, "out of memory");
				return -1;
			}
			out->groups = gs;
			out->groups[out->n++] = g;
		}
		s += n;
		if (*s == ',')
			s++;
	}
	return 0;
}

static bool is_build_depends(const char *field, size_t n, unsigned parts, unsigned *left_out)
{
	static const struct {
		const char *name;
		unsigned needed_by;
	} fields[] = {
		{ "Build-Depends", BUILD_FULL },
		{ "Build-Depends-Arch", BUILD_ANY },
		{ "Build-Depends-Indep", BUILD_ALL },
	};
	for (size_t i = 0; i < 3; i++)
		if (strlen(fields[i].name) == n && !strncasecmp(field, fields[i].name, n)) {
			if (parts & fields[i].needed_by)
				return true;
			*left_out |= fields[i].needed_by;
			return false;
		}
	return false;
}

int control_build_depends(const char *file, const char *arch, const char *profiles, unsigned parts,
			  struct dep_list *out, char *err, size_t errlen)
{
	FILE *f = fopen(file, "re");
	if (!f) {
		snprintf(err, errlen, "cannot open %s: %s", file, strerror(errno));
		return -1;
	}
	char *line = NULL, *value = NULL;
	size_t cap = 0, vlen = 0;
	bool in_field = false, started = false;
	int rc = 0, lineno = 0;
	ssize_t n;
	char sub[512];
	while ((n = getline(&line, &cap, f)) >= 0) {
		lineno++;
		while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = '\0';
		if (line[0] == '#')
			continue;
		bool blank = true;
		for (ssize_t i = 0; i < n; i++)
			blank &= isspace((unsigned char)line[i]) != 0;
		if (blank) {
			if (started)
				break; /* end of the source paragraph */
			continue;
		}
		started = true;
		bool new_field = !(line[0] == ' ' || line[0] == '\t');
		if (!new_field) {
			if (!in_field)
				continue;
		} else {
			char *colon = strchr(line, ':');
			if (!colon) {
				snprintf(err, errlen, "%s:%d: not a field: '%s'", file, lineno, line);
				rc = -1;
				break;
			}
			in_field = is_build_depends(line, (size_t)(colon - line), parts, &out->left_out);
			if (!in_field)
				continue;
			memmove(line, colon + 1, strlen(colon + 1) + 1);
			n = (ssize_t)strlen(line);
		}
		char *v = realloc(value, vlen + (size_t)n + 2);
		if (!v) {
			snprintf(err, errlen, "out of memory");
			rc = -1;
			break;
		}
		value = v;
		/* Continuation lines join with a space; the next field's
		 * relations start after a comma. */
		if (vlen && new_field)
			value[vlen++] = ',';
		else if (vlen)
			value[vlen++] = ' ';
		memcpy(value + vlen, line, (size_t)n);
		vlen += (size_t)n;
		value[vlen] = '\0';
	}
	if (rc == 0 && ferror(f)) {
		snprintf(err, errlen, "cannot read %s: %s", file, strerror(errno));
		rc = -1;
	}
	if (rc == 0 && !started) {
		snprintf(err, errlen, "%s: no source paragraph", file);
		rc = -1;
	}
	if (rc == 0 && value && deps_parse_field(value, arch, profiles, out, sub, sizeof sub) < 0) {
		snprintf(err, errlen, "%s: Build-Depends: %s", file, sub);
		rc = -1;
	}
	free(line);
	free(value);
	fclose(f);
	return rc;
}
