/* What a hidden path tells about the build's need for its package: the
 * evidence of one access, ranked (docs/trace-report.md, "Ranking"). Worked
 * out by the trace server when the access is decided, from the access
 * classes and the file as it is then (the server sees the real file system). */
#ifndef KILN_TRACE_SERVICE_EVIDENCE_H
#define KILN_TRACE_SERVICE_EVIDENCE_H

#include <stddef.h>

/* Strongest first: a lower value outranks a higher one. */
enum trace_evidence {
	EV_EXEC = 0,    /* executed (execve target or #! interpreter) */
	EV_READ,        /* opened for reading (or writing) */
	EV_COMMAND,     /* looked up as a command: a stat of an executable in a PATH directory */
	EV_DIR,         /* a directory of the package opened, listed or looked at */
	EV_STAT,        /* a stat of an existing file (not a directory), nothing more */
	EV_ABSENT,      /* only a name that does not exist, below a hidden directory:
			 * hidden or not, the build got ENOENT */
	EV_NONE,        /* no evidence recorded */
};

/* "exec", "read", "command", "directory", "stat", "absent", "none". */
const char *trace_evidence_name(enum trace_evidence e);

/* The directories a command is looked up in: the build's PATH, each entry
 * as written and, when different, resolved (realpath). */
struct trace_pathdirs {
	char **dirs;
	size_t n;
};

/* From a PATH value (NULL or "": none). Returns 0, -1 out of memory. */
int trace_pathdirs_init(struct trace_pathdirs *pd, const char *path);
void trace_pathdirs_free(struct trace_pathdirs *pd);

/* The evidence of an access with classes `access` (KILN_A_*) to `path` (the
 * path as the build asked for it, absolute), which the sandbox hid. */
enum trace_evidence trace_evidence_of(const char *path, unsigned access,
				      const struct trace_pathdirs *pd);

/* The strongest evidence `access` could give (no system call): a path
 * whose bound does not outrank what a finding has needs no look. */
enum trace_evidence trace_evidence_bound(unsigned access);

#endif
