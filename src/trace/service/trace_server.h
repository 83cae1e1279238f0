/* The trace server process: opens the registry, computes the dependency
 * closure, listens on the run directory's socket, serves the build, and at
 * the end writes the report. `kiln trace` forks it and talks to it through
 * two pipes: `ready` (the server writes "R" and NAME=VALUE lines for the
 * build's environment: KILN_LOCALES and KILN_CLEAN, the plans made ahead
 * (docs/glibc-data.md); or "E" and an error message; then closes it) and the lifeline (kiln writes "pgid N" once the build runs
 * in process group N, and "status N" when the command has ended, then closes
 * it). EOF without a status means kiln is gone: the server then ends the
 * build's processes and removes the run directory itself. */
#ifndef KILN_TRACE_SERVICE_TRACE_SERVER_H
#define KILN_TRACE_SERVICE_TRACE_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "registry/registry.h"
#include "trace/service/policy.h"

struct trace_server_config {
	const char *db;              /* registry database */
	const char *const *deps;     /* --deps names */
	size_t ndeps;
	const char *control;         /* --deps-from-control file, or NULL */
	unsigned build_parts;        /* what the build builds (build_type.h): which of its fields */
	const char *build_type_from; /* "--build-type", "dpkg-buildpackage -B", or NULL (the default) */
	enum registry_profile profile; /* how the closure is computed */
	struct policy *policy;       /* compiled; the server adds the closure's
				      * postinst directories (postinst_dirs.h) */
	bool report_only;
	const char *json;            /* --json file, or NULL */
	const char *log;             /* --log file, or NULL */
	const char *report;          /* --report file for the text report, or NULL: stderr */
	const char *json_name, *log_name; /* --json and --log as the user wrote them (named in the report) */
	bool quiet;                  /* --quiet: the text report is the verdict line only */
	bool strict;                 /* --strict: the report says when it fails the run */
	const char *build_path;      /* the build's PATH (commands looked up in it are evidence) */
	const char *socket;          /* where to listen */
	const char *cache;           /* the verdict cache map to create, or NULL (--no-cache) */
	bool stats;                  /* --stats: the cache's figures on stderr at the end */
	const char *recall_dir;      /* where recalled keys are kept (recall.h), or NULL */
	const char *rundir;          /* the private run directory (holds the socket) */
	const char *const *locales;  /* locale names of the build's environment, planned at start */
	size_t nlocales;             /* (docs/glibc-data.md, KILN_LOCALES) */
};

/* Exit statuses of the server process. */
enum {
	TRACE_SERVER_CLEAN = 0,      /* no violation */
	TRACE_SERVER_FAILED = 1,     /* could not start or write its output */
	TRACE_SERVER_VIOLATIONS = 3, /* ranked hidden files or refused writes (--strict) */
};

/* Runs the server in the current (forked) process. After a run it ends the
 * process with its exit status (_exit, stdio flushed); when it cannot start
 * it returns that status. */
int trace_server_main(const struct trace_server_config *cfg, int ready_fd, int lifeline_fd);

#endif
