/* Canonical paths, as the registry stores them and trace mode looks them up:
 * absolute, normalised, every directory component resolved through symlinks,
 * the last component not followed.
 *
 * Resolution happens inside a root directory: with root "/" (or NULL) this is
 * the running system; with another root (an unpacked system tree) symlinks are
 * read inside that tree and absolute link targets are taken relative to it,
 * as if chroot'ed. Components that do not exist are kept as written. Results
 * for directories are cached, so a canonicaliser is meant to live for one
 * import (or one command) during which the tree does not change. */
#ifndef KILN_REGISTRY_CANON_H
#define KILN_REGISTRY_CANON_H

#include <stddef.h>

#include "registry/strmap.h"

struct canon {
	char root[4096];   /* "" for the real root, else the root without trailing '/' */
	struct strmap dirs; /* canonical parent + "/" + name -> canonical directory */
};

int canon_init(struct canon *c, const char *root);
void canon_free(struct canon *c);

/* Canonical form of `path` into out. A relative path is taken relative to the
 * current directory (root "/" only). Returns 0, or -1 with errno set
 * (ENAMETOOLONG, ENOMEM, EINVAL for a relative path under another root). */
int canon_path(struct canon *c, const char *path, char *out, size_t len);

/* Lexical normalisation only: collapses "//", "/./", a trailing "/" and
 * resolves ".." textually. `path` must be absolute. Returns 0 or -1. */
int canon_lexical(const char *path, char *out, size_t len);

#endif
