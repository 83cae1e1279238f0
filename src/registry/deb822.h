/* A parser for Debian control-file syntax (deb822): stanzas of "Field: value"
 * lines separated by blank lines, values continued on lines that start with a
 * space or tab. Used for /var/lib/dpkg/status and for kiln manifests. */
#ifndef KILN_REGISTRY_DEB822_H
#define KILN_REGISTRY_DEB822_H

#include <stddef.h>

#define DEB822_MAX_FIELDS 64

struct deb822_field {
	const char *name;  /* NUL-terminated, points into the parsed buffer */
	const char *value; /* leading/trailing blanks trimmed; may span lines */
	int line;
};

struct deb822_stanza {
	struct deb822_field fields[DEB822_MAX_FIELDS];
	int nfields;
	int line; /* line of the stanza's first field */
};

/* Value of field `name` (case-insensitive), or NULL. */
const char *deb822_get(const struct deb822_stanza *st, const char *name);
int deb822_line(const struct deb822_stanza *st, const char *name);

/* Parses buf (modified in place, must be NUL-terminated) and calls cb for each
 * stanza; a non-zero return from cb stops parsing and is returned. Syntax
 * errors return -1 with "FILE:LINE: cause" in err. With allow_comments, lines
 * starting with '#' are ignored. */
int deb822_parse(char *buf, const char *filename, int allow_comments,
		 int (*cb)(const struct deb822_stanza *st, void *ctx), void *ctx,
		 char *err, size_t errlen);

/* Reads a whole file into a NUL-terminated malloc'd buffer. Returns NULL with
 * "FILE: cause" in err. */
char *deb822_slurp(const char *path, size_t *len, char *err, size_t errlen);

#endif
