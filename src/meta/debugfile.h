/* Finding a binary's separate debug file: by build id under
 * /usr/lib/debug/.build-id, then by .gnu_debuglink next to the binary, in its
 * .debug/ subdirectory, and under the debug root (default /usr/lib/debug). */
#ifndef KILN_META_DEBUGFILE_H
#define KILN_META_DEBUGFILE_H

#include <gelf.h>
#include <stddef.h>

#define META_DEBUG_ROOT "/usr/lib/debug"

/* Writes the path of an existing debug file for ELF (read from PATH, relative
 * paths against DIRFD) into OUT, looking under ROOT (NULL: META_DEBUG_ROOT).
 * Returns 0 when found, -1 otherwise. */
int meta_find_debugfile(Elf *elf, int dirfd, const char *path, const char *root, char *out,
			size_t outlen);

#endif
