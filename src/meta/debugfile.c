/* Separate debug files: build id first (exact match), then .gnu_debuglink. */
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include <elfutils/libdwelf.h>

#include "meta/debugfile.h"

int meta_find_debugfile(Elf *elf, int dirfd, const char *path, const char *root, char *out,
			size_t outlen)
{
	if (!root)
		root = META_DEBUG_ROOT;
	const void *id;
	ssize_t idlen = dwelf_elf_gnu_build_id(elf, &id);
	if (idlen > 1 && idlen <= 64) {
		const unsigned char *b = id;
		char hex[130];
		for (ssize_t i = 0; i < idlen; i++)
			snprintf(hex + 2 * i, 3, "%02x", b[i]);
		if ((size_t)snprintf(out, outlen, "%s/.build-id/%.2s/%s.debug", root, hex, hex + 2) < outlen &&
		    faccessat(dirfd, out, R_OK, 0) == 0)
			return 0;
	}
	GElf_Word crc;
	const char *link = dwelf_elf_gnu_debuglink(elf, &crc);
	if (!link || !*link || strchr(link, '/'))
		return -1;
	char dir[4096];
	const char *slash = strrchr(path, '/');
	if (slash)
		snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
	else
		snprintf(dir, sizeof dir, ".");
	for (int i = 0; i < 3; i++) {
		size_t n = i == 0 ? (size_t)snprintf(out, outlen, "%s/%s", dir, link)
			 : i == 1 ? (size_t)snprintf(out, outlen, "%s/.debug/%s", dir, link)
				  : (size_t)snprintf(out, outlen, "%s/%s/%s", root, dir, link);
		if (n < outlen && faccessat(dirfd, out, R_OK, 0) == 0 && strcmp(out, path) != 0)
			return 0;
	}
	return -1;
}
