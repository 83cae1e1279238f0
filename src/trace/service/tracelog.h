/* The trace service's record of a run: the processes that connected, every
 * path queried with its access classes, and the findings (hidden nodes,
 * refused writes, unknown files, exec events) with the first process that
 * reached each. The report (report.c) is built from it. */
#ifndef KILN_TRACE_SERVICE_TRACELOG_H
#define KILN_TRACE_SERVICE_TRACELOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "registry/registry.h"
#include "trace/service/evidence.h"
#include "trace/service/pathtab.h"
#include "trace/service/probes.h"
#include "trace/service/sandbox.h"

struct trace_client {
	pid_t pid;
	char *cmdline; /* arguments separated by NUL bytes */
	size_t len;
};

struct trace_path {
	unsigned access;   /* union of access classes asked */
	unsigned verdicts; /* bit (1 << verdict) for each verdict answered */
	int client;        /* first client that asked */
};

/* The strongest evidence of one kind a hidden node got (evidence.h). */
struct trace_proof {
	int ev;            /* enum trace_evidence; EV_NONE: nothing recorded */
	int client;        /* the process whose access gave it */
	unsigned access;   /* that access's classes */
	unsigned long seq; /* that query's number (order of the run) */
	const struct trace_probe *probe; /* the harmless probe it matched */
	char *path;        /* the path asked */
};

struct trace_finding {
	int client;        /* first client that reached it */
	unsigned access;   /* union of access classes */
	int reason;        /* enum sbx_reason */
	unsigned long seq; /* number of the query that first reached it */
	char *via;         /* the path asked when first reached */
	/* Hidden nodes only: the strongest access that counts (matched no
	 * known harmless probe), and the strongest harmless one. */
	struct trace_proof counts, harmless;
	char pkg[];        /* owning package (hidden by package), else "" */
};

struct trace_event {
	unsigned kind;     /* enum kiln_event_kind */
	int client;
	char *path;
};

/* The shared verdict cache's figures for the report (docs/verdict-cache.md):
 * round trips are the server's own count; hits, misses and listings come
 * from the clients' statistics file (untrusted). */
struct trace_cache_figures {
	bool enabled;
	uint64_t hits, misses, listings, map_bytes, entries;
	uint64_t notes;  /* NOTE messages: questions told, not asked */
	uint64_t ahead;  /* ... of which answered ahead by a round trip (untrusted) */
	uint64_t notes_decided; /* ... of which the map did not hold the answer yet */
	uint64_t logged; /* access-log slots believed ('S' answers) */
	uint64_t recalled;    /* the last build's keys put in before anyone asked (recall.h) */
	uint64_t recall_used; /* ... of which the build used (logged as queries) */
};

struct tracelog {
	bool report_only;
	/* How the server held the registry (docs/registry.md, Snapshot);
	 * REGISTRY_SNAPSHOT_NONE: not told. */
	enum registry_snapshot_kind registry_snapshot;
	struct trace_client *clients;
	size_t nclients, capclients;
	struct pathtab paths;    /* path asked -> struct trace_path */
	struct pathtab hidden;   /* hidden node -> struct trace_finding */
	struct pathtab refused;  /* refused path -> struct trace_finding */
	struct pathtab probes;   /* write probe answered EACCES -> struct trace_finding */
	struct pathtab unknown;  /* unknown file -> struct trace_finding */
	struct pathtab unhidden; /* a hidden file glibc loads for itself -> struct trace_finding
				  * (via: why) */
	struct trace_event *events;
	size_t nevents, capevents;
	unsigned long queries, dir_queries, entries_hidden, failures;
	double server_cpu;       /* seconds of CPU the server used (set at the end) */
	const char *const *declared; /* the declared dependencies (not owned) */
	size_t ndeclared, closure_size;
	unsigned build_parts;        /* of a --deps-from-control build (build_type.h), else 0 */
	unsigned build_left_out;     /* BUILD_ANY, BUILD_ALL: fields of debian/control left out */
	struct pathtab left_out;     /* names of the packages only those fields bring (value: 1) */
	const char *build_type_from; /* what told it (not owned) */
	struct trace_cache_figures cache; /* set at the end */
	const uint64_t *cache_pids;  /* bitmap of pids that used the verdict cache (not owned) */
	size_t cache_pid_words;
	struct trace_pathdirs pathdirs; /* the build's PATH, for the evidence of hidden paths */
	/* With track_allowed, each path of `paths` in the order its first
	 * ALLOW came (copies), for work done on them while the build runs
	 * (unused.h, touched_update); allowed_lost: one could not be kept. */
	bool track_allowed, allowed_lost;
	char **allowed;
	size_t nallowed, capallowed;
};

void tracelog_init(struct tracelog *t, bool report_only);
/* The build's PATH (for the "command" evidence); 0, or -1 out of memory. */
int tracelog_set_path(struct tracelog *t, const char *path);
void tracelog_free(struct tracelog *t);

/* Registers a connected process; returns its client id (-1 out of memory). */
int tracelog_client(struct tracelog *t, pid_t pid, const char *cmdline, size_t len);

/* Records one query and its decision. */
void tracelog_query(struct tracelog *t, int client, const char *path, unsigned access,
		    const struct sbx_decision *d);
/* Records a decision the server made for a file the build's glibc would
 * open by itself (a locale plan's hidden candidates): as a query, but not
 * counted as one. */
void tracelog_seen(struct tracelog *t, int client, const char *path, unsigned access,
		   const struct sbx_decision *d);
/* A file of package pkg, outside the closure, that glibc loads for itself
 * where no hook can keep it away (docs/glibc-data.md): `why` says what for. */
void tracelog_unhidden(struct tracelog *t, int client, const char *path, const char *pkg,
		       const char *why);
void tracelog_dir(struct tracelog *t, unsigned long entries_hidden);
void tracelog_event(struct tracelog *t, int client, unsigned kind, const char *path);

/* Distinct processes among the connections (a process connects again after
 * an exec, and a threaded one may hold several connections) and the
 * processes that used the verdict cache (cache_pids), many of which never
 * needed to connect. */
size_t tracelog_processes(const struct tracelog *t);


/* "srwxlcd" with '-' for classes not in `access`. */
void tracelog_access_letters(unsigned access, char out[8]);

#endif
