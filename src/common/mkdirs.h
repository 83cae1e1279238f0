/* mkdir -p. */
#ifndef KILN_COMMON_MKDIRS_H
#define KILN_COMMON_MKDIRS_H

#include <sys/types.h>

/* Makes directory `dir` and any missing parent with `mode` (less the umask).
 * dir is changed while it runs and restored. 0, or -1 with errno (ENOTDIR:
 * a part of it is not a directory). */
int mkdirs(char *dir, mode_t mode);

#endif
