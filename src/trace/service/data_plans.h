/* Plans of glibc's own data loads that depend on no argument of the call,
 * made once before the build starts (docs/glibc-data.md): for each NSS
 * database, whether a file or module glibc may load for it is hidden; for
 * iconv_open with GCONV_PATH unset, whether a gconv file is; for the local
 * time zone with TZ unset, whether /etc/localtime (and what it leads to) is.
 * The clean ones are passed to the build in KILN_CLEAN, so their hooks call
 * through; the others run in the checked window. */
#ifndef KILN_TRACE_SERVICE_DATA_PLANS_H
#define KILN_TRACE_SERVICE_DATA_PLANS_H

#include <stdbool.h>
#include <stddef.h>

#include "trace/service/locale_plan.h"

struct data_where {
	const char *nsswitch;   /* "/etc/nsswitch.conf" */
	const char *libdir;     /* where libnss_NAME.so.2 is: "/usr/lib/x86_64-linux-gnu" */
	const char *gconv_dir;  /* "/usr/lib/x86_64-linux-gnu/gconv" */
	const char *localtime;  /* "/etc/localtime" */
};

/* The default places on this machine. */
struct data_where data_where_default(void);

/* The NSS databases glibc knows, for the hooks and the plans. */
extern const char *const data_nss_databases[];
extern const size_t data_nss_ndatabases;

/* What the plans ask of the sandbox. */
struct data_sandbox {
	void *ctx;
	/* What the build would see at path (a symlink followed); 0, or -1 when
	 * the sandbox cannot tell. */
	int (*look)(void *ctx, const char *path, struct locale_seen *seen);
	/* Optional: whether name, an entry of the directory dir that is not a
	 * symlink, is hidden from the build, judged as a listing of dir judges
	 * it: 1 hidden, 0 not, -1 cannot tell (then look() is asked). Cheaper
	 * than look() for a directory's every file: dir is decided once. */
	int (*entry_hidden)(void *ctx, const char *dir, const char *name);
};

/* Writes the clean ones as space-separated tokens ("nss:passwd ... gconv
 * tz") into out (cap bytes, NUL-terminated). Returns the length. */
size_t data_plans_clean(const struct data_where *w, const struct data_sandbox *sb, char *out, size_t cap);

#endif
