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

/* Writes the clean ones as space-separated tokens ("nss:passwd ... gconv
 * tz") into out (cap bytes, NUL-terminated); look() says what the build
 * would see at a path. Returns the length. */
size_t data_plans_clean(const struct data_where *w, int (*look)(void *, const char *, struct locale_seen *),
			void *ctx, char *out, size_t cap);

#endif
