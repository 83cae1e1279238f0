#include "registry/deb822.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

const char *deb822_get(const struct deb822_stanza *st, const char *name)
{
	for (int i = 0; i < st->nfields; i++)
		if (!strcasecmp(st->fields[i].name, name))
			return st->fields[i].value;
	return NULL;
}

int deb822_line(const struct deb822_stanza *st, const char *name)
{
	for (int i = 0; i < st->nfields; i++)
		if (!strcasecmp(st->fields[i].name, name))
			return st->fields[i].line;
	return st->line;
}

static void trim_end(char *s, char *end)
{
	while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' || end[-1] == '\r'))
		end--;
	*end = '\0';
}

int deb822_parse(char *buf, const char *filename, int allow_comments,
		 int (*cb)(const struct deb822_stanza *st, void *ctx), void *ctx,
		 char *err, size_t errlen)
{
	struct deb822_stanza st = { .nfields = 0 };
	char *p = buf;
	int line = 0;
	char *value_end = NULL; /* end of the current field's value, trimmed later */
	char *value_start = NULL;
	for (;;) {
		char *eol = p;
		if (*p)
			line++;
		while (*eol && *eol != '\n')
			eol++;
		int at_end = !*p;
		int blank = 1;
		for (char *q = p; q < eol; q++)
			if (*q != ' ' && *q != '\t' && *q != '\r')
				blank = 0;
		if (at_end || blank || (p[0] != ' ' && p[0] != '\t' && !(allow_comments && p[0] == '#'))) {
			/* The current field, if any, ends before this line. */
			if (value_start) {
				trim_end(value_start, value_end);
				value_start = NULL;
			}
		}
		if (at_end || blank) {
			if (st.nfields) {
				int rc = cb(&st, ctx);
				if (rc)
					return rc;
				st.nfields = 0;
			}
			if (at_end)
				return 0;
		} else if (allow_comments && p[0] == '#') {
			/* comment */
		} else if (p[0] == ' ' || p[0] == '\t') {
			if (!value_start) {
				snprintf(err, errlen, "%s:%d: continuation line outside a field", filename, line);
				return -1;
			}
			value_end = eol;
		} else {
			char *colon = memchr(p, ':', (size_t)(eol - p));
			if (!colon || colon == p) {
				snprintf(err, errlen, "%s:%d: malformed line (expected 'Field: value'): %.60s",
					 filename, line, p);
				return -1;
			}
			for (char *q = p; q < colon; q++)
				if (*q == ' ' || *q == '\t') {
					snprintf(err, errlen, "%s:%d: malformed field name '%.*s'", filename,
						 line, (int)(colon - p), p);
					return -1;
				}
			if (st.nfields == DEB822_MAX_FIELDS) {
				snprintf(err, errlen, "%s:%d: too many fields in one stanza (max %d)",
					 filename, line, DEB822_MAX_FIELDS);
				return -1;
			}
			if (!st.nfields)
				st.line = line;
			*colon = '\0';
			char *v = colon + 1;
			while (v < eol && (*v == ' ' || *v == '\t'))
				v++;
			st.fields[st.nfields++] = (struct deb822_field){ p, v, line };
			value_start = v;
			value_end = eol;
		}
		if (!*eol) {
			if (value_start) {
				trim_end(value_start, value_end);
				value_start = NULL;
			}
			p = eol;
		} else {
			/* Continuation lines stay inside the value, so only the
			 * newline that ends a field's last line gets replaced, by
			 * trim_end above. */
			p = eol + 1;
		}
	}
}

char *deb822_slurp(const char *path, size_t *len, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(e));
		errno = e;
		return NULL;
	}
	struct stat st;
	if (fstat(fd, &st)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return NULL;
	}
	size_t cap = (size_t)st.st_size + 1, n = 0;
	char *buf = malloc(cap + 1);
	if (!buf) {
		snprintf(err, errlen, "%s: out of memory", path);
		close(fd);
		return NULL;
	}
	for (;;) {
		if (n == cap) {
			char *nb = realloc(buf, cap * 2 + 1);
			if (!nb) {
				free(buf);
				close(fd);
				snprintf(err, errlen, "%s: out of memory", path);
				return NULL;
			}
			buf = nb;
			cap *= 2;
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			snprintf(err, errlen, "%s: %s", path, strerror(e));
			free(buf);
			close(fd);
			errno = e;
			return NULL;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	errno = 0;
	if (memchr(buf, '\0', n)) {
		snprintf(err, errlen, "%s: binary data (NUL byte) in a text file", path);
		free(buf);
		errno = EINVAL;
		return NULL;
	}
	if (len)
		*len = n;
	return buf;
}

