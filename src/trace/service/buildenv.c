#include "trace/service/buildenv.h"

#include <stdlib.h>
#include <string.h>

/* sbuild 0.85 (Debian 12) keeps the names Dpkg::BuildInfo's
 * get_build_env_allowed() lists (dpkg 1.21), matched exactly. */
static const char *const allowed[] = {
	"CC", "CPP", "CXX", "OBJC", "OBJCXX", "PC", "FC", "M2C", "AS", "LD", "AR", "RANLIB",
	"MAKE", "AWK", "LEX", "YACC",
	"ASFLAGS", "CFLAGS", "CPPFLAGS", "CXXFLAGS", "OBJCFLAGS", "OBJCXXFLAGS", "GCJFLAGS",
	"DFLAGS", "FFLAGS", "LDFLAGS", "ARFLAGS", "MAKEFLAGS",
	"LD_LIBRARY_PATH",
	"LANG", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "LC_TIME", "LC_COLLATE", "LC_MONETARY",
	"LC_MESSAGES", "LC_PAPER", "LC_NAME", "LC_ADDRESS", "LC_TELEPHONE", "LC_MEASUREMENT",
	"LC_IDENTIFICATION",
	"DEB_BUILD_OPTIONS", "DEB_BUILD_PROFILES", "DEB_VENDOR",
	"DPKG_ROOT", "DPKG_ADMINDIR", "DPKG_DATADIR", "DPKG_ORIGINS_DIR",
	"DPKG_GENSYMBOLS_CHECK_LEVEL", "SOURCE_DATE_EPOCH",
};

/* What sbuild then sets for the build (Sbuild::Build, Sbuild::Conf). */
static char *const forced[] = {
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/games",
	"HOME=/sbuild-nonexistent",
	"SHELL=/bin/sh",
	"LC_ALL=C.UTF-8",
};

#define COUNT(a) (sizeof a / sizeof a[0])

static size_t name_len(const char *entry)
{
	const char *eq = strchr(entry, '=');
	return eq ? (size_t)(eq - entry) : strlen(entry);
}

static int in(const char *const *names, size_t n, const char *name, size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (strlen(names[i]) == len && !memcmp(names[i], name, len))
			return 1;
	return 0;
}

static int is_forced(const char *name, size_t len)
{
	for (size_t f = 0; f < COUNT(forced); f++)
		if (name_len(forced[f]) == len && !memcmp(forced[f], name, len))
			return 1;
	return 0;
}

int buildenv_allowed(const char *name, size_t len)
{
	return in(allowed, COUNT(allowed), name, len);
}

char **buildenv_sbuild(char *const *env, const char *const *keep, size_t nkeep)
{
	size_t n = 0;
	while (env[n])
		n++;
	char **out = malloc((n + COUNT(forced) + 1) * sizeof *out);
	if (!out)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		size_t len = name_len(env[i]);
		if (!strchr(env[i], '='))
			continue;
		if (in(keep, nkeep, env[i], len) ||
		    (!is_forced(env[i], len) && buildenv_allowed(env[i], len)))
			out[k++] = env[i];
	}
	for (size_t f = 0; f < COUNT(forced); f++)
		if (!in(keep, nkeep, forced[f], name_len(forced[f])))
			out[k++] = forced[f];
	out[k] = NULL;
	return out;
}
