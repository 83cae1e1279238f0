/* kiln meta TOOL[,TOOL...]|all BINARY [--format text|json|c] [-o FILE | --out-dir DIR]
 *
 * Parses BINARY once into a model (or takes it from the caller's cache) and
 * runs each named tool over it. Output files follow common/outfile.h ("-" is
 * stdout, symlinks and FIFOs are written through, a regular file is replaced
 * atomically) and are checked before the binary is read. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/outfile.h"
#include "meta/cli.h"
#include "meta/tools/tool.h"

#define MAX_TOOLS 16

static void usage(FILE *out)
{
	fprintf(out,
		"usage: kiln meta TOOL[,TOOL...] BINARY [--format text|json|c] [-o FILE]\n"
		"       kiln meta all BINARY [--format text|json|c] --out-dir DIR\n"
		"       (and --debug-root DIR, --stats)\n"
		"       kiln meta run|serve|stats|stop ...   the meta server (docs/meta-server.md)\n\n"
		"Reads BINARY's ELF and DWARF once, then runs each tool over it. A separate\n"
		"debug file is found by build id or .gnu_debuglink under --debug-root DIR\n"
		"(default /usr/lib/debug) or next to BINARY. --stats prints counts and\n"
		"the time of each phase of the parse on stderr.\n"
		"Several tools write to DIR/TOOL.{txt,json,c} with --out-dir (concurrently),\n"
		"else one after the other to stdout (or FILE).\n\ntools:\n");
	for (size_t i = 0; i < meta_ntools; i++)
		fprintf(out, "  %-10s %s\n", meta_tools[i].name, meta_tools[i].summary);
	fprintf(out, "  %-10s every tool above\n\nformats: docs/meta-formats.md\n", "all");
}

struct args {
	enum meta_format fmt;
	const char *outfile, *outdir;
	const char *pos[2];
	int npos;
	int stats, help;
	struct meta_options mopts;
};

/* The value of option NAME at argv[*i]: "--name=V", "--name V", "-xV", "-x V".
 * Returns NULL when argv[*i] is not that option; sets *missing when it is but
 * has no value. */
static const char *option_value(int argc, char **argv, int *i, const char *lng, char shrt, int *missing)
{
	const char *a = argv[*i];
	size_t n = strlen(lng);
	if (a[0] == '-' && a[1] == '-' && !strncmp(a + 2, lng, n) && (a[2 + n] == '=' || !a[2 + n])) {
		if (a[2 + n] == '=')
			return a + 3 + n;
	} else if (shrt && a[0] == '-' && a[1] == shrt) {
		if (a[2])
			return a + 2;
	} else {
		return NULL;
	}
	if (*i + 1 >= argc) {
		*missing = 1;
		return NULL;
	}
	return argv[++*i];
}

/* 0 parsed, 2 usage error (reported on ERR). */
static int parse_args(int argc, char **argv, struct args *a, FILE *err)
{
	int only_positional = 0;
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i], *v;
		int missing = 0;
		if (only_positional || s[0] != '-' || !s[1]) {
			if (a->npos == 2) {
				fprintf(err, "kiln meta: unexpected argument '%s'\n", s);
				return 2;
			}
			a->pos[a->npos++] = s;
		} else if (!strcmp(s, "--")) {
			only_positional = 1;
		} else if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
			a->help = 1;
		} else if (!strcmp(s, "-s") || !strcmp(s, "--stats")) {
			a->stats = 1;
		} else if ((v = option_value(argc, argv, &i, "format", 'f', &missing))) {
			if (meta_format_parse(v, &a->fmt)) {
				fprintf(err, "kiln meta: unknown format '%s' (text, json or c)\n", v);
				return 2;
			}
		} else if (!missing && (v = option_value(argc, argv, &i, "output", 'o', &missing))) {
			a->outfile = v;
		} else if (!missing && (v = option_value(argc, argv, &i, "out-dir", 'd', &missing))) {
			a->outdir = v;
		} else if (!missing && (v = option_value(argc, argv, &i, "debug-root", 'r', &missing))) {
			a->mopts.debug_root = v;
		} else {
			if (missing)
				fprintf(err, "kiln meta: option '%s' needs a value\n", s);
			else
				fprintf(err, "kiln meta: unknown option '%s'\n", s);
			return 2;
		}
	}
	return 0;
}

static int parse_tools(const char *spec, const struct meta_tool **sel, size_t *nsel, FILE *err)
{
	*nsel = 0;
	if (!strcmp(spec, "all")) {
		for (size_t i = 0; i < meta_ntools; i++)
			sel[(*nsel)++] = &meta_tools[i];
		return 0;
	}
	for (const char *p = spec; *p;) {
		size_t n = strcspn(p, ",");
		const struct meta_tool *t = NULL;
		for (size_t i = 0; i < meta_ntools; i++)
			if (strlen(meta_tools[i].name) == n && !strncmp(meta_tools[i].name, p, n))
				t = &meta_tools[i];
		if (!t) {
			fprintf(err, "kiln meta: unknown tool '%.*s' (run 'kiln meta --help')\n", (int)n, p);
			return -1;
		}
		int dup = 0;
		for (size_t i = 0; i < *nsel; i++)
			dup |= sel[i] == t;
		if (!dup && *nsel < MAX_TOOLS)
			sel[(*nsel)++] = t;
		p += n;
		if (*p == ',')
			p++;
	}
	if (!*nsel)
		fprintf(err, "kiln meta: no tool named\n");
	return *nsel ? 0 : -1;
}

/* An output: the env's stream ("-" or no path), or PATH written by the
 * output rules of common/outfile.h. */
struct output {
	const char *path; /* NULL: env->out */
	struct outfile file;
	FILE *f;
};

static int open_output(struct output *o, const char *path, const struct meta_cli_env *env)
{
	o->path = path && strcmp(path, "-") ? path : NULL;
	o->f = env->out;
	if (!o->path)
		return 0;
	char err[PATH_MAX + 256];
	if (!(o->f = outfile_fopen(&o->file, env->dirfd, path, -1, 0, err, sizeof err))) {
		fprintf(env->err, "kiln meta: %s\n", err);
		return -1;
	}
	setvbuf(o->f, NULL, _IOFBF, 1 << 20);
	return 0;
}

static int cancelled(const struct meta_cli_env *env)
{
	return env->cancel && atomic_load(env->cancel);
}

/* Flushes/commits the output of JOB; on failure drops it (nothing replaced).
 * A cancelled command never commits. */
static int finish_output(struct output *o, struct meta_job *job, const struct meta_cli_env *env)
{
	int rc = job->rc;
	if (rc)
		fprintf(env->err, "kiln meta %s: %s\n", job->tool->name, job->err.msg);
	if (!o->path) {
		if (fflush(o->f) != 0 || ferror(o->f)) {
			if (!rc)
				fprintf(env->err, "kiln meta %s: writing the output: %s\n", job->tool->name,
					strerror(errno));
			rc = -1;
		}
		return rc;
	}
	char err[PATH_MAX + 256];
	if (rc || cancelled(env)) {
		outfile_abort(&o->file);
		rc = -1;
	} else if (outfile_commit(&o->file, err, sizeof err)) {
		fprintf(env->err, "kiln meta %s: %s\n", job->tool->name, err);
		rc = -1;
	}
	return rc;
}

/* DIR/TOOL.EXT for --out-dir, else -o's FILE (or NULL). */
static const char *output_path(const struct args *a, const struct meta_tool *t, char buf[4096],
			       const struct meta_cli_env *env)
{
	if (!a->outdir)
		return a->outfile;
	if ((size_t)snprintf(buf, 4096, "%s/%s.%s", a->outdir, t->name, meta_format_ext(a->fmt)) >= 4096) {
		fprintf(env->err, "kiln meta: %s: path too long\n", a->outdir);
		return NULL;
	}
	return buf;
}

/* Every output can be written: checked before the binary is read. */
static int check_outputs(const struct args *a, const struct meta_tool **sel, size_t nsel,
			 const struct meta_cli_env *env)
{
	for (size_t i = 0; i < nsel && (a->outfile || a->outdir); i++) {
		char buf[4096], err[PATH_MAX + 256];
		const char *p = output_path(a, sel[i], buf, env);
		if (!p)
			return -1;
		if (strcmp(p, "-") && outfile_check(env->dirfd, p, 0, err, sizeof err)) {
			fprintf(env->err, "kiln meta: %s\n", err);
			return -1;
		}
	}
	return 0;
}

/* Runs the selected tools over M into their outputs, their own warnings
 * into WARN (in tool order). Returns the exit status. */
static int run_tools(struct meta_model *m, const struct args *a, const struct meta_tool **sel, size_t nsel,
		     const struct meta_cli_env *env, struct meta_err *warn)
{
	struct meta_job jobs[MAX_TOOLS];
	struct output outs[MAX_TOOLS];
	char paths[MAX_TOOLS][4096];
	size_t njobs = 0;
	int rc = 0;
	for (size_t i = 0; i < nsel; i++) {
		const char *dest = output_path(a, sel[i], paths[i], env);
		if ((a->outdir && !dest) || open_output(&outs[i], dest, env)) {
			rc = 1;
			break;
		}
		jobs[i] = (struct meta_job){ .tool = sel[i], .out = outs[i].f, .fmt = a->fmt };
		njobs++;
	}
	if (!rc) {
		/* Separate files: the tools run concurrently over the one model.
		 * One stream: one after the other, in order. */
		if (a->outdir) {
			meta_run_jobs(m, jobs, njobs, 1);
		} else {
			for (size_t i = 0; i < njobs; i++)
				meta_run_jobs(m, &jobs[i], 1, 0);
		}
	} else {
		for (size_t i = 0; i < njobs; i++) {
			jobs[i].rc = -1;
			snprintf(jobs[i].err.msg, sizeof jobs[i].err.msg, "not run: another output failed");
		}
	}
	for (size_t i = 0; i < njobs; i++) {
		if (finish_output(&outs[i], &jobs[i], env))
			rc = 1;
		if (jobs[i].err.nwarnings && !warn->nwarnings)
			memcpy(warn->first_warning, jobs[i].err.first_warning, sizeof warn->first_warning);
		warn->nwarnings += jobs[i].err.nwarnings;
	}
	return rc;
}

static int is_local(const char *path)
{
	struct outfile_dest d;
	char err[PATH_MAX + 256];
	if (outfile_resolve(AT_FDCWD, path, 0, &d, err, sizeof err))
		return 0; /* the server gives the same error */
	return d.kind == OUTFILE_STDOUT || d.magic || !strncmp(d.path, "/dev/tty", 8) ||
	       !strncmp(d.path, "/proc/", 6);
}

int meta_cli_forwardable(int argc, char **argv)
{
	struct args a = { .fmt = META_FMT_TEXT };
	char *msgs = NULL; /* parse_args' complaints: the server repeats them */
	size_t len = 0;
	FILE *quiet = open_memstream(&msgs, &len);
	int rc = quiet ? parse_args(argc, argv, &a, quiet) : 1;
	if (quiet)
		fclose(quiet);
	free(msgs);
	if (rc)
		return 1;
	if (a.outfile && strcmp(a.outfile, "-") && is_local(a.outfile))
		return 0;
	if (a.outdir) {
		char probe[4096];
		snprintf(probe, sizeof probe, "%s/types.txt", a.outdir);
		if (is_local(probe))
			return 0;
	}
	return 1;
}

int meta_cli_main(int argc, char **argv, const struct meta_cli_env *env)
{
	struct args a = { .fmt = META_FMT_TEXT };
	int rc = parse_args(argc, argv, &a, env->err);
	if (rc)
		return rc;
	if (a.help) {
		usage(env->out);
		return 0;
	}
	if (a.npos != 2) {
		usage(env->err);
		return 2;
	}
	const struct meta_tool *sel[MAX_TOOLS];
	size_t nsel;
	if (parse_tools(a.pos[0], sel, &nsel, env->err))
		return 2;
	if (a.outfile && a.outdir) {
		fprintf(env->err, "kiln meta: -o and --out-dir exclude each other\n");
		return 2;
	}
	if (a.outfile && nsel > 1) {
		fprintf(env->err, "kiln meta: -o takes one tool; use --out-dir DIR for several\n");
		return 2;
	}
	if (check_outputs(&a, sel, nsel, env))
		return 2;
	a.mopts.has_dirfd = 1;
	a.mopts.dirfd = env->dirfd;
	struct meta_err err = { .msg = "" };
	struct meta_model *m;
	if (env->get_model ? env->get_model(env->ctx, a.pos[1], &a.mopts, &m, &err)
			   : meta_model_open_with(a.pos[1], &a.mopts, &m, &err)) {
		fprintf(env->err, "kiln meta: %s\n", err.msg);
		return 1;
	}
	struct meta_err warn = { .nwarnings = 0 };
	rc = cancelled(env) ? 1 : run_tools(m, &a, sel, nsel, env, &warn);
	if (a.stats)
		fprintf(env->err,
			"kiln meta: %s: %zu units, %zu type DIEs -> %zu types, %zu functions, %zu variables, "
			"%zu symbols; open %.3fs, walk %.3fs, resolve %.3fs, dedup %.3fs\n",
			m->path, m->ncus, m->ntypes, m->nclasses, m->nfunctions, m->nvars, m->nsymbols,
			m->timing.open_s, m->timing.walk_s, m->timing.resolve_s, m->timing.dedup_s);
	/* those of the model's build (a cached model reports them to every
	 * command that uses it), then those the tools met in this run */
	size_t nwarn = m->nwarnings + warn.nwarnings;
	if (nwarn)
		fprintf(env->err, "kiln meta: warning: %s%s (%zu warnings; entries skipped or approximated)\n",
			m->nwarnings ? m->first_warning : warn.first_warning, nwarn > 1 ? ", and more" : "", nwarn);
	if (env->put_model)
		env->put_model(env->ctx, m);
	else
		meta_model_free(m);
	return rc;
}
