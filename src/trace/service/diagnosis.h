/* What the report concludes from a run's trace log (docs/trace-report.md):
 * the hidden packages ranked by their evidence, the known harmless probes
 * apart, what to write in debian/control, the unused Build-Depends, the
 * access most likely behind a failed build, and the verdict. Worked out by
 * the trace server once the build has ended. */
#ifndef KILN_TRACE_SERVICE_DIAGNOSIS_H
#define KILN_TRACE_SERVICE_DIAGNOSIS_H

#include <stdbool.h>
#include <stddef.h>

#include "registry/registry.h"
#include "trace/service/control.h"
#include "trace/service/policy.h"
#include "trace/service/tracelog.h"

/* One hidden node of a group, with the proof shown for it. */
struct diag_node {
	const char *node;
	const struct trace_finding *f;
};

/* A package outside the closure (or a policy group) the build reached for. */
struct diag_group {
	char *name;                /* the package, or "(deny rules)" / "(unknown ...)" */
	int reason;                /* SBX_HIDDEN_PKG, _RULE or _UNKNOWN */
	int ev;                    /* strongest evidence that counts; EV_NONE: harmless only */
	const struct diag_node *best; /* the node with it (or the strongest harmless one) */
	const struct trace_proof *proof; /* best's proof shown (counts, else harmless) */
	struct diag_node *nodes;   /* its hidden nodes, strongest first */
	size_t nnodes;
	char *brought_by;          /* another ranked package that depends on it, or NULL */
	char *write;               /* what to write in debian/control (normally the name) */
	char *advice;              /* why, for an alternative or a virtual package; or NULL */
};

struct diag_cause {                /* the access most likely behind a failed build */
	const char *node;          /* NULL: none seen */
	const struct trace_finding *f;
	const struct trace_proof *proof; /* hidden: its proof; refused: NULL */
	const char *group;         /* hidden: the group's name */
};

struct trace_diagnosis {
	struct diag_group *groups; /* ranked groups first (strongest first), then harmless */
	size_t ngroups, nranked;
	size_t nharmless_nodes;    /* hidden nodes that are harmless probes only */
	const char **unused;       /* declared packages none of whose files were used */
	char **unused_by;          /* for each: a virtual one's providers in the closure
				    * ("perl", "a, b"), else NULL */
	size_t nunused;
	bool unused_known;         /* false: not worked out (no registry, a failed build, an error) */
	const char *unused_label;  /* "Build-Depends" (from debian/control) or "declared dependencies" */
	int exit_status;           /* the build's (128+N for signal N), -1 unknown */
	struct diag_cause cause;   /* set when exit_status > 0 */
	unsigned long violations;  /* hidden nodes that count + refused writes: what --strict counts */
	bool complete;             /* no ranked finding */
	char *verdict;             /* the one-line verdict */
};

struct diag_input {
	const struct tracelog *log;
	struct kiln_registry *reg;           /* NULL: no ownership, closure or unused work */
	const struct registry_pkgset *closure;
	enum registry_profile profile;
	const struct dep_list *control;      /* the Build-Depends groups, or NULL */
	const struct policy *policy;
	const char *build_dir;               /* for naming scripts relative to it */
	int exit_status;
	/* The packages the build touched, worked out as it ran (unused.h), or
	 * NULL: all worked out here. */
	struct touched *touched;
};

/* Fills d; 0, or -1 out of memory (d then holds what could be done). A
 * registry error only loses the parts that need it (a note on `warn`). */
int trace_diagnose(const struct diag_input *in, struct trace_diagnosis *d, FILE *warn);
void trace_diagnosis_free(struct trace_diagnosis *d);

/* How the report names a process: the script it runs, relative to the build
 * directory when inside it (build-aux/missing), else the program's base
 * name (cc1, dpkg-buildpackage). Into buf. */
const char *trace_who(const struct tracelog *t, int client, const char *build_dir, char *buf,
		      size_t len);

/* "makeinfo looked up in PATH by build-aux/missing": a proof for people. */
void trace_describe_proof(const struct tracelog *t, const struct trace_proof *p,
			  const char *build_dir, char *buf, size_t len);

#endif
