/* The built-in list of known harmless probes: accesses that real package
 * builds make to files of packages they do not need, whatever their
 * Build-Depends say (docs/trace-report.md, "Known harmless probes"). A
 * hidden path matched here is reported apart and never fails --strict. */
#ifndef KILN_TRACE_SERVICE_PROBES_H
#define KILN_TRACE_SERVICE_PROBES_H

#include <stdbool.h>
#include <stddef.h>

#include "trace/service/evidence.h"

struct trace_probe {
	const char *id;            /* class name, as in the JSON report */
	const char *what;          /* one line for people */
	const char *const *programs; /* fnmatch patterns of the program (NULL: any) */
	const char *const *paths;  /* fnmatch patterns of the path asked or the hidden node */
	enum trace_evidence strongest; /* harmless up to this evidence (stronger is not) */
};

/* The probe class of names that do not exist (EV_ABSENT): always harmless. */
extern const struct trace_probe trace_probe_absent;

/* A package that only a Build-Depends field the build type leaves out
 * declares (Build-Depends-Indep in a -B build), looked for and not used:
 * sbuild does not install it for that build either. */
extern const struct trace_probe trace_probe_build_type;

/* The list, ended by an entry whose id is NULL. */
extern const struct trace_probe trace_probes[];

/* The argument of a command line (arguments separated by NUL bytes, `len`
 * bytes, the last one NUL-terminated) that names the program it runs: the
 * script when argv[0] is an interpreter (sh, bash, perl, python3, env...)
 * given one, else argv[0]. */
const char *trace_program_arg(const char *cmdline, size_t len);

/* The program a process runs, from its command line (arguments separated
 * by NUL bytes, `len` bytes): the script's base name when argv[0] is an
 * interpreter (sh, bash, perl, python3...) given a script, else argv[0]'s
 * base name. Into buf (truncated). */
const char *trace_program_name(const char *cmdline, size_t len, char *buf, size_t buflen);

/* The probe an access matches: `path` as asked, `node` the hidden node,
 * `ev` its evidence, `program` as trace_program_name() gives it. NULL if
 * none (the access is a finding that counts). */
const struct trace_probe *trace_probe_match(const char *path, const char *node,
					    enum trace_evidence ev, const char *program);

#endif
