/* The trace service: answers the trace protocol's messages (docs/protocol.md)
 * with the sandbox's decisions and records them in the trace log. Plugged
 * into the server's event loop (src/server/server.h). */
#ifndef KILN_TRACE_SERVICE_SERVICE_H
#define KILN_TRACE_SERVICE_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "ipc/proto.h"
#include "server/server.h"
#include "trace/service/locale_plan.h"
#include "trace/service/sandbox.h"
#include "trace/service/tracelog.h"
#include "trace/service/verdict_cache.h"

struct trace_service {
	struct sandbox sbx;
	struct tracelog log;
	bool report_only;
	struct verdict_cache *vc;  /* the shared verdict cache, or NULL (--no-cache) */
	struct locale_plan_cache *locales; /* locale.alias and locale-archive, read once */
	struct locale_env locale_env;      /* where glibc looks (tests point it elsewhere) */
	struct sbx_decision dec;
	struct sbx_decision ahead; /* another class's decision (answered_ahead) */
	char path[KILN_PATH_MAX + 1];
	/* The registry held under a read lease whose break (SIGIO) makes the
	 * server take its copy (trace_server.c), or NULL. */
	struct kiln_registry *leased;
	/* The packages the build touched, worked out while the server waits
	 * (unused.h), or NULL: no unused Build-Depends to find. Not owned. */
	struct touched *touched;
	/* The last build's keys, answered before they are asked (recall.h), or
	 * NULL. Not owned. */
	struct recall *recall;
};

/* `policy` must be compiled and outlive the service. */
struct trace_service *trace_service_new(const struct policy *policy, struct sbx_oracle oracle,
					bool report_only);
void trace_service_free(struct trace_service *ts);

/* The locale plan for `name` (locale_plan.h); hidden files it finds are
 * findings of `client` (-1: none recorded). *stable: it holds for the run. */
int trace_service_locale_plan(struct trace_service *ts, int client, const char *locpath,
			      unsigned catmask, const char *name, bool *stable);

/* The catalog plan of a gettext call (locale_plan.h, catalog_plan); domain
 * NULL: any domain. */
int trace_service_catalog_plan(struct trace_service *ts, int client, const char *dirname,
			       const char *domain, const char *category, const char *languages,
			       bool *stable);

/* Notes the libc.mo catalogs of packages outside the closure that glibc
 * would load for its own messages in `locale` (client -1: the build's
 * environment): no hook can hide them (docs/glibc-data.md). */
void trace_service_libc_messages(struct trace_service *ts, int client, const char *locale);

/* What the build would see at path (as locale_env.look; ts is the service),
 * recording nothing. */
int trace_service_look(void *ts, const char *path, struct locale_seen *seen);

/* One directory decided for the entries asked of it (trace_service_entry_
 * hidden): for the plans made before the build, while nothing changes. */
struct trace_entry_memo {
	bool valid, visible;
	char dir[4096];
	char node[4096];
};

/* Whether name, an entry of dir that is not a symlink, is hidden from the
 * build, judged as a listing of dir judges it (data_sandbox.entry_hidden):
 * 1 hidden, 0 not, -1 cannot tell (dir hidden, absent, or undecidable). dir
 * is decided once for the entries asked in a row; records nothing. */
int trace_service_entry_hidden(struct trace_service *ts, struct trace_entry_memo *m, const char *dir,
			       const char *name);

/* The server hooks of the service. */
struct kiln_service trace_service_hooks(struct trace_service *ts);

/* The accesses clients answered from 'S' values since the last call
 * (verdict_cache_read_log), logged as a round trip would have been; the
 * server's tick calls it during the build, the end of the run once more. */
void trace_service_read_access_log(struct trace_service *ts);

/* The handlers themselves (exposed for unit tests). */
int trace_service_hello(void *ctx, pid_t pid, const char *cmdline, size_t len);
int trace_service_message(void *ctx, int client, int fd, const struct kiln_msg_hdr *h,
			  const void *payload, size_t len);

#endif
