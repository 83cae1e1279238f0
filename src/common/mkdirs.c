#include "common/mkdirs.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

int mkdirs(char *dir, mode_t mode)
{
	struct stat st;
	if (!stat(dir, &st))
		return S_ISDIR(st.st_mode) ? 0 : (errno = ENOTDIR, -1);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		int rc = mkdirs(dir, mode);
		*slash = '/';
		if (rc)
			return rc;
	}
	return mkdir(dir, mode) && errno != EEXIST ? -1 : 0;
}
