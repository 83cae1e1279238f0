/* The kind (file, directory, symlink) of many paths in few directories,
 * read from the directory listings (getdents' d_type) instead of one
 * lstat() per path: listing a directory reads its blocks, an lstat reads
 * each file's inode, which on a cold cache is one disk read per file
 * (a dpkg import lists ~145k paths in ~15k directories). */
#ifndef KILN_REGISTRY_DIRKINDS_H
#define KILN_REGISTRY_DIRKINDS_H

#include "registry/strmap.h"

struct dirkinds {
	const char *root;      /* prefix of every path ("" for the real root) */
	struct strmap listed;  /* directories read so far */
	struct strmap special; /* path -> "d" or "l"; anything else is a file */
};

void dirkinds_init(struct dirkinds *k, const char *root);
void dirkinds_free(struct dirkinds *k);

/* REGISTRY_KIND_* of canonical path P (inside root), as lstat(root + P)
 * would say: a directory, a symlink, else (also when it does not exist) a
 * file. Returns -1 only when out of memory. */
int dirkinds_kind(struct dirkinds *k, const char *p);

#endif
