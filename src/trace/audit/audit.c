/* kiln's audit library (LD_AUDIT; rtld-audit(7)): makes the dynamic loader
 * skip hidden libraries exactly as if they were absent.
 *
 * Loaded only into a process that the preload library found holding a
 * hidden library and ran again (hooks/loader.c): ld.so asks la_objsearch
 * about every name it is about to open, the original name of a DT_NEEDED,
 * LD_PRELOAD or dlopen entry first (LA_SER_ORIG), then each candidate of a
 * search (RPATH, LD_LIBRARY_PATH, RUNPATH, ld.so.cache, default
 * directories). A hidden (or refused) file is answered so that ld.so treats
 * it as missing: a name it would open directly (a path) gets NULL, which
 * ends that load as "cannot open shared object file" (for LD_PRELOAD:
 * ignored, with ld.so's own message); a search candidate gets the name of a
 * file that does not exist in kiln's own run directory, so the open fails
 * with ENOENT and the search goes on, as past a missing file. Paths are
 * asked as given: the server resolves them (/lib -> usr/lib under merged
 * /usr), so every form of a hidden library is hidden.
 *
 * It links kiln's client (the shared verdict cache and the protocol) and
 * its own copy of libc, in the audit namespace: the cost is paid only by
 * the processes that need it. kiln's preload library is never hidden. */
#include <fcntl.h>
#include <link.h>
#include <string.h>

#include "trace/kt.h"

static char absent[KT_PATH_BUF + 32];

unsigned int la_version(unsigned int version)
{
	kt_init();
	const char *run = kt_env(KILN_ENV_RUNDIR);
	size_t rl = run ? strlen(run) : 0;
	/* the run directory is kiln's: nothing of the build is ever in it */
	if (run && rl + sizeof "/absent-library" <= sizeof absent) {
		memcpy(absent, run, rl);
		memcpy(absent + rl, "/absent-library", sizeof "/absent-library");
	} else {
		memcpy(absent, "/proc/self/fdinfo/absent-library", sizeof "/proc/self/fdinfo/absent-library");
	}
	return version < LAV_CURRENT ? version : LAV_CURRENT;
}

char *la_objsearch(const char *name, uintptr_t *cookie, unsigned int flag)
{
	(void)cookie;
	if (!strchr(name, '/'))
		return (char *)name; /* a bare name: its candidates come next */
	char abs[KT_PATH_BUF];
	if (kt_path_at(AT_FDCWD, name, abs) < 0)
		return (char *)name;
	const char *pre = kt_env(KILN_ENV_PRELOAD);
	if (pre && !strcmp(abs, pre))
		return (char *)name;
	if (kiln_ask(abs, KILN_A_READ, 0) == KILN_V_ALLOW)
		return (char *)name;
	return flag == LA_SER_ORIG ? NULL : absent;
}
