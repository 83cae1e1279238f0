#include "fake_oracle.h"

#include <stdio.h>
#include <string.h>

#include "trace/service/sandbox.h"

int fake_owner_by_name(void *ctx, const char *path, char *pkg, size_t len)
{
	(void)ctx;
	const char *base = strrchr(path, '/');
	if (base && !strncmp(base + 1, "foreign", 7)) {
		snprintf(pkg, len, strncmp(base + 1, "foreign_y", 9) ? "pkgx" : "pkgy");
		return SBX_OWNER_FOREIGN;
	}
	return SBX_OWNER_DEP;
}
