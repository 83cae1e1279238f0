/* kiln meta TOOL[,TOOL...]|all BINARY [--format text|json|c] [-o FILE | --out-dir DIR]
 * kiln meta types BINARY --type NAME
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

#include "common/cliopt.h"
#include "common/outfile.h"
#include "meta/cli.h"
#include "meta/tools/tool.h"

#define MAX_TOOLS 16

enum { OPT_FORMAT = 1, OPT_JSON, OPT_OUTPUT, OPT_OUT_DIR, OPT_DEBUG_ROOT, OPT_STATS, OPT_TYPE };

static const struct cliopt options[] = {
	{ "format", 'f', "text|json|c", OPT_FORMAT, "output format (docs/meta-formats.md; default text)" },
	{ "json", 0, NULL, OPT_JSON, "the same as --format json" },
	{ "output", 'o', "FILE", OPT_OUTPUT, "write to FILE ('-': standard output); one tool only" },
	{ "out-dir", 'd', "DIR", OPT_OUT_DIR, "write each tool's output to DIR/TOOL.{txt,json,c}\n"
					      "(the tools then run concurrently)" },
	{ "debug-root", 'r', "DIR", OPT_DEBUG_ROOT,
	  "where separate debug files are looked up by build id\n"
	  "or .gnu_debuglink (default /usr/lib/debug; also next\n"
	  "to BINARY)" },
	{ "type", 't', "NAME", OPT_TYPE, "types: only the types named NAME ('struct foo',\n"
					 "'foo'; a typedef with the type it names), as\n"
					 "pahole -C NAME does" },
	{ "stats", 's', NULL, OPT_STATS, "print counts and the time of each phase of the parse\n"
					 "on stderr" },
	{ 0 },
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: kiln meta TOOL[,TOOL...] BINARY [OPTIONS]\n"
		"       kiln meta all BINARY --out-dir DIR [OPTIONS]\n"
		"       kiln meta types BINARY --type NAME\n"
		"       kiln meta run|serve|stats|stop ...   the meta server (docs/meta-server.md;\n"
		"                                            kiln meta run --help)\n\n"
		"Reads BINARY's ELF and DWARF once, then runs each tool over it: one after\n"
		"the other to stdout (or -o FILE), or concurrently with --out-dir DIR.\n\n"
		"tools:\n");
	for (size_t i = 0; i < meta_ntools; i++)
		fprintf(out, "  %-10s %s\n", meta_tools[i].name, meta_tools[i].summary);
	fprintf(out, "  %-10s every tool above\n\noptions:\n", "all");
	cliopt_print_options(out, options);
}

struct args {
	enum meta_format fmt;
	const char *outfile, *outdir, *type;
	const char *pos[2];
	int npos;
	int stats, help, version;
	struct meta_options mopts;
};

#define CMD "kiln meta"

/* 0 parsed, 2 usage error (reported on ERR). */
static int parse_args(int argc, char **argv, struct args *a, FILE *err)
{
	struct cliparse p;
	cliopt_init(&p, CMD, options, argc, argv, CLIOPT_PERMUTE, err);
	for (int id; (id = cliopt_next(&p)) != CLIOPT_END;) {
		switch (id) {
		case CLIOPT_ERROR:
			return CLIOPT_EXIT_USAGE;
		case CLIOPT_HELP:
			a->help = 1;
			break;
		case CLIOPT_VERSION:
			a->version = 1;
			break;
		case CLIOPT_ARG:
			if (a->npos == 2)
				return cliopt_usage(&p, "unexpected argument '%s'", p.value);
			a->pos[a->npos++] = p.value;
			break;
		case OPT_FORMAT:
			if (meta_format_parse(p.value, &a->fmt))
				return cliopt_usage(&p, "unknown format '%s' (text, json or c)", p.value);
			break;
		case OPT_JSON: a->fmt = META_FMT_JSON; break;
		case OPT_OUTPUT: a->outfile = p.value; break;
		case OPT_OUT_DIR: a->outdir = p.value; break;
		case OPT_DEBUG_ROOT: a->mopts.debug_root = p.value; break;
		case OPT_TYPE: a->type = p.value; break;
		case OPT_STATS: a->stats = 1; break;
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
			cliopt_usage_for(err, CMD, "unknown tool '%.*s'", (int)n, p);
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
		cliopt_usage_for(err, CMD, "no tool named");
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
		if (a->type) {
			jobs[0].rc = meta_tool_types_named(m, jobs[0].out, a->fmt, a->type, &jobs[0].err);
		} else if (a->outdir) {
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
	if (a.version) {
		cliopt_print_version(env->out);
		return 0;
	}
	if (a.npos != 2)
		return cliopt_usage_for(env->err, CMD, a.npos ? "name the BINARY after the tools"
							       : "name the TOOL(s) and the BINARY");
	const struct meta_tool *sel[MAX_TOOLS];
	size_t nsel;
	if (parse_tools(a.pos[0], sel, &nsel, env->err))
		return CLIOPT_EXIT_USAGE;
	if (a.outfile && a.outdir)
		return cliopt_usage_for(env->err, CMD, "-o and --out-dir exclude each other");
	if (a.outfile && nsel > 1)
		return cliopt_usage_for(env->err, CMD, "-o takes one tool; use --out-dir DIR for several");
	if (a.type && (nsel != 1 || strcmp(sel[0]->name, "types")))
		return cliopt_usage_for(env->err, CMD, "--type applies to the types tool alone");
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
