/* kiln meta TOOL[,TOOL...]|all BINARY [--format text|json|c] [-o FILE | --out-dir DIR]
 *
 * Parses BINARY once into a model and runs each named tool over it. Output
 * files are written to a temporary name and renamed, so a failed run never
 * leaves a half-written file behind. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "meta/model.h"
#include "meta/tools/tool.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: kiln meta TOOL[,TOOL...] BINARY [--format text|json|c] [-o FILE]\n"
		"       kiln meta all BINARY [--format text|json|c] --out-dir DIR\n\n"
		"Reads BINARY's ELF and DWARF once, then runs each tool over it. A separate\n"
		"debug file is found by build id or .gnu_debuglink under --debug-root DIR\n"
		"(default /usr/lib/debug) or next to BINARY. --stats prints counts and\n"
		"the time of each phase of the parse on stderr.\n"
		"Several tools write to DIR/TOOL.{txt,json,c} with --out-dir, else one\n"
		"after the other to stdout (or FILE).\n\ntools:\n");
	for (size_t i = 0; i < meta_ntools; i++)
		fprintf(out, "  %-10s %s\n", meta_tools[i].name, meta_tools[i].summary);
	fprintf(out, "  %-10s every tool above\n\nformats: docs/meta-formats.md\n", "all");
}

static int parse_tools(const char *spec, const struct meta_tool **sel, size_t *nsel)
{
	*nsel = 0;
	if (!strcmp(spec, "all")) {
		for (size_t i = 0; i < meta_ntools; i++)
			sel[(*nsel)++] = &meta_tools[i];
		return 0;
	}
	char *copy = strdup(spec), *save = NULL;
	if (!copy)
		return -1;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		const struct meta_tool *t = meta_tool_find(tok);
		if (!t) {
			fprintf(stderr, "kiln meta: unknown tool '%s' (run 'kiln meta --help')\n", tok);
			free(copy);
			return -1;
		}
		int dup = 0;
		for (size_t i = 0; i < *nsel; i++)
			dup |= sel[i] == t;
		if (!dup && *nsel < meta_ntools)
			sel[(*nsel)++] = t;
	}
	free(copy);
	return *nsel ? 0 : -1;
}

/* An output: stdout, or PATH written through a temporary file. */
struct output {
	const char *path; /* NULL: stdout */
	char tmp[4200];
	FILE *f;
};

static int open_output(struct output *o, const char *path)
{
	o->path = path;
	o->f = stdout;
	if (!path)
		return 0;
	if ((size_t)snprintf(o->tmp, sizeof o->tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof o->tmp) {
		fprintf(stderr, "kiln meta: %s: path too long\n", path);
		return -1;
	}
	o->f = fopen(o->tmp, "w");
	if (!o->f) {
		fprintf(stderr, "kiln meta: %s: cannot create: %s\n", o->tmp, strerror(errno));
		return -1;
	}
	setvbuf(o->f, NULL, _IOFBF, 1 << 20);
	return 0;
}

/* Flushes/renames the output of JOB; on failure removes the temp file. */
static int finish_output(struct output *o, struct meta_job *job)
{
	int rc = job->rc;
	if (rc)
		fprintf(stderr, "kiln meta %s: %s\n", job->tool->name, job->err.msg);
	if (fflush(o->f) != 0 || ferror(o->f)) {
		if (!rc)
			fprintf(stderr, "kiln meta %s: writing %s: %s\n", job->tool->name,
				o->path ? o->tmp : "stdout", strerror(errno));
		rc = -1;
	}
	if (!o->path)
		return rc;
	if (fclose(o->f) != 0 && !rc) {
		fprintf(stderr, "kiln meta %s: writing %s: %s\n", job->tool->name, o->tmp, strerror(errno));
		rc = -1;
	}
	if (!rc && rename(o->tmp, o->path) != 0) {
		fprintf(stderr, "kiln meta %s: cannot rename %s to %s: %s\n", job->tool->name, o->tmp,
			o->path, strerror(errno));
		rc = -1;
	}
	if (rc)
		unlink(o->tmp);
	return rc;
}

int cmd_meta(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "out-dir", required_argument, NULL, 'd' },
		{ "debug-root", required_argument, NULL, 'r' },
		{ "stats", no_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	enum meta_format fmt = META_FMT_TEXT;
	const char *outfile = NULL, *outdir = NULL;
	struct meta_options mopts = { 0 };
	int stats = 0;
	int c;
	optind = 1;
	/* GNU getopt permutes: options may come before or after TOOL and BINARY. */
	while ((c = getopt_long(argc, argv, "f:o:d:r:sh", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (meta_format_parse(optarg, &fmt)) {
				fprintf(stderr, "kiln meta: unknown format '%s' (text, json or c)\n", optarg);
				return 2;
			}
			break;
		case 'o':
			outfile = optarg;
			break;
		case 'd':
			outdir = optarg;
			break;
		case 'r':
			mopts.debug_root = optarg;
			break;
		case 's':
			stats = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (argc - optind != 2) {
		if (argc - optind > 2)
			fprintf(stderr, "kiln meta: unexpected argument '%s'\n", argv[optind + 2]);
		usage(stderr);
		return 2;
	}
	const char *pos[2] = { argv[optind], argv[optind + 1] };
	const struct meta_tool *sel[16];
	size_t nsel;
	if (parse_tools(pos[0], sel, &nsel))
		return 2;
	if (outfile && outdir) {
		fprintf(stderr, "kiln meta: -o and --out-dir exclude each other\n");
		return 2;
	}
	if (outfile && nsel > 1) {
		fprintf(stderr, "kiln meta: -o takes one tool; use --out-dir DIR for several\n");
		return 2;
	}
	struct meta_err err = { { 0 } };
	struct meta_model *m;
	if (meta_model_open_with(pos[1], &mopts, &m, &err)) {
		fprintf(stderr, "kiln meta: %s\n", err.msg);
		return 1;
	}
	setvbuf(stdout, NULL, _IOFBF, 1 << 20);
	int rc = 0;
	struct meta_job jobs[16];
	struct output outs[16];
	char paths[16][4096];
	size_t njobs = 0;
	for (size_t i = 0; i < nsel && !rc; i++) {
		const char *dest = outfile;
		if (outdir) {
			if ((size_t)snprintf(paths[i], sizeof paths[i], "%s/%s.%s", outdir, sel[i]->name,
					     meta_format_ext(fmt)) >= sizeof paths[i]) {
				fprintf(stderr, "kiln meta: %s: path too long\n", outdir);
				rc = 1;
				break;
			}
			dest = paths[i];
		}
		if (open_output(&outs[i], dest)) {
			rc = 1;
			break;
		}
		jobs[i] = (struct meta_job){ .tool = sel[i], .out = outs[i].f, .fmt = fmt };
		njobs++;
	}
	if (!rc) {
		/* Separate files: the tools run concurrently over the one model.
		 * One stream (stdout or -o): one after the other, in order. */
		if (outdir) {
			meta_run_jobs(m, jobs, njobs, 1);
		} else {
			for (size_t i = 0; i < njobs; i++)
				meta_run_jobs(m, &jobs[i], 1, 0);
		}
	} else {
		for (size_t i = 0; i < njobs; i++)
			jobs[i].rc = -1, snprintf(jobs[i].err.msg, sizeof jobs[i].err.msg, "not run");
	}
	for (size_t i = 0; i < njobs; i++)
		if (finish_output(&outs[i], &jobs[i]))
			rc = 1;
	if (stats)
		fprintf(stderr,
			"kiln meta: %s: %zu units, %zu type DIEs -> %zu types, %zu functions, %zu variables, "
			"%zu symbols; open %.3fs, walk %.3fs, resolve %.3fs, dedup %.3fs\n",
			m->path, m->ncus, m->ntypes, m->nclasses, m->nfunctions, m->nvars, m->nsymbols,
			m->timing.open_s, m->timing.walk_s, m->timing.resolve_s, m->timing.dedup_s);
	if (m->nwarnings)
		fprintf(stderr, "kiln meta: warning: %s%s (%zu warnings; entries skipped or approximated)\n",
			m->first_warning, m->nwarnings > 1 ? ", and more" : "", m->nwarnings);
	meta_model_free(m);
	return rc;
}
