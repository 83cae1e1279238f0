/* The report of a trace run (docs/trace-report.md): the text report for
 * people, the JSON report for programs, the access log (every path with its
 * access classes) and the verdict cache's figures. Files are written by the
 * output rules of common/outfile.h ("-" is stdout). */
#ifndef KILN_TRACE_SERVICE_REPORT_H
#define KILN_TRACE_SERVICE_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "trace/service/diagnosis.h"
#include "trace/service/tracelog.h"

/* The JSON report's format; docs/trace-report.md says what changed when. */
#define TRACE_REPORT_SCHEMA 2

struct report_style {
	bool colour;            /* ANSI colours: the report goes to a terminal, NO_COLOR unset */
	bool quiet;             /* the verdict line only */
	bool strict;            /* say, before the verdict, when --strict fails the run */
	const char *json, *log; /* named where a shortened section says the rest is */
	const char *build_dir;  /* scripts are named relative to it */
};

/* The whole text report, ending with the verdict line (or, quiet, only it). */
void tracelog_write_text(const struct tracelog *t, const struct trace_diagnosis *d,
			 const struct report_style *st, FILE *out);
/* "=== kiln trace verdict: ..." */
void tracelog_write_verdict(const struct trace_diagnosis *d, const struct report_style *st, FILE *out);

int tracelog_write_json(const struct tracelog *t, const struct trace_diagnosis *d, const char *file,
			char *err, size_t errlen);
int tracelog_write_log(const struct tracelog *t, const char *file, char *err, size_t errlen);

/* `kiln trace --stats`: the verdict cache's figures as one block. */
void tracelog_write_stats(const struct tracelog *t, FILE *out);

/* Questions the server answered (NOTEs are decided but not answered). */
unsigned long tracelog_round_trips(const struct tracelog *t);

#endif
