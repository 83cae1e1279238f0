/* kiln trace [options] -- COMMAND...: runs COMMAND with the preload library
 * in a sandbox decided by a trace server process that kiln forks, then prints
 * the report and exits with the command's status. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/config.h"
#include "cli/preload_path.h"
#include "cli/read_all.h"
#include "common/cliopt.h"
#include "common/outfile.h"
#include "ipc/proto.h"
#include "registry/fresh.h"
#include "registry/registry.h"
#include "trace/service/artifacts.h"
#include "trace/service/build_type.h"
#include "trace/service/buildenv.h"
#include "trace/service/policy.h"
#include "trace/service/rundir.h"
#include "trace/service/trace_server.h"

/* Exit status when kiln itself fails (as env(1) and nice(1) do). */
#define EXIT_KILN 125

enum {
	OPT_DB = 1, OPT_DEPS, OPT_CONTROL, OPT_PROFILE, OPT_KEEP_ENV, OPT_ALLOW, OPT_READ, OPT_ASK,
	OPT_OWNED, OPT_DENY, OPT_UNKNOWN, OPT_POLICY, OPT_REPORT_ONLY, OPT_STRICT, OPT_JSON, OPT_OUTPUT,
	OPT_LOG, OPT_REPORT, OPT_NO_REFRESH, OPT_NO_CACHE, OPT_NO_RECALL, OPT_STATS, OPT_QUIET,
	OPT_BUILD_TYPE,
};

static const struct cliopt options[] = {
	{ "db", 0, "FILE", OPT_DB, "registry database (default: as 'kiln registry':\n"
				   "$KILN_DB, the configuration's 'registry', else\n"
				   "$XDG_CACHE_HOME/kiln/registry.db)" },
	{ "deps", 0, "PKG[,PKG...]", OPT_DEPS, "declared dependencies (repeatable)" },
	{ "deps-from-control", 0, "FILE", OPT_CONTROL,
	  "declared dependencies = Build-Depends(-Arch,-Indep)\nof a debian/control file" },
	{ "build-type", 0, "TYPE", OPT_BUILD_TYPE,
	  "with --deps-from-control: what the build builds,\n"
	  "as dpkg-buildpackage --build=TYPE (source, any,\n"
	  "all, binary, full, or a list: any,all); without\n"
	  "an architecture-independent part Build-Depends-\n"
	  "Indep is left out (hidden), without an\n"
	  "architecture-dependent one Build-Depends-Arch, as\n"
	  "dpkg-checkbuilddeps and sbuild do (default: read\n"
	  "from a dpkg-buildpackage or debuild command's -b,\n"
	  "-B, -A, -S, --build=...; otherwise full)" },
	{ "profile", 0, "chroot|host", OPT_PROFILE,
	  "how the closure is computed (docs/profiles.md):\n"
	  "chroot = what a clean buildd chroot would hold\n"
	  "(Essential + Priority: required + apt +\n"
	  "build-essential, one alternative per dependency, as\n"
	  "apt installs), the default with --deps-from-control;\n"
	  "host = every installed alternative and provider,\n"
	  "base set Essential, the default otherwise; chroot\n"
	  "also gives the build sbuild's environment (only\n"
	  "dpkg's build variables kept; PATH, HOME, SHELL,\n"
	  "LC_ALL as sbuild sets them) and hides what a clean\n"
	  "chroot does not have: files no package of the\n"
	  "closure owns in /usr/local, /opt, /usr/lib/locale,\n"
	  "/etc/ld.so.conf.d, and your home directory (except\n"
	  "the build tree)" },
	{ "keep-env", 0, "VAR", OPT_KEEP_ENV,
	  "with --profile chroot, pass VAR through as it is\nhere (repeatable; HOME also keeps your home visible)" },
	{ "allow", 0, "PREFIX", OPT_ALLOW, "visible and writable" },
	{ "read", 0, "PREFIX", OPT_READ, "visible, writes refused" },
	{ "ask", 0, "PREFIX", OPT_ASK, "the registry decides visibility, writes refused" },
	{ "owned", 0, "PREFIX", OPT_OWNED,
	  "visible only what a package of the closure owns,\nwrites refused" },
	{ "deny", 0, "PREFIX", OPT_DENY, "hidden" },
	{ "unknown", 0, "report|allow|hide", OPT_UNKNOWN,
	  "files in ask-trees the registry does not know\n(default: report = allow and name them)" },
	{ "policy", 0, "FILE", OPT_POLICY,
	  "policy file (docs/policy.md), applied after the\ndefaults and before the options above" },
	{ "report-only", 0, NULL, OPT_REPORT_ONLY, "hide and refuse nothing, report what would be" },
	{ "strict", 0, NULL, OPT_STRICT,
	  "exit 1 if the build reached for hidden files that\n"
	  "count (ranked; not the known harmless probes) or\n"
	  "had writes refused" },
	{ "quiet", 0, NULL, OPT_QUIET, "the text report is the verdict line only" },
	{ "json", 0, NULL, OPT_JSON,
	  "write the report as JSON (docs/trace-report.md) to\n"
	  "-o FILE, or standard output; the text report\n"
	  "stays on standard error" },
	{ "output", 'o', "FILE", OPT_OUTPUT,
	  "write the report to FILE ('-': standard output)\n"
	  "instead of standard error (with --json: the JSON)" },
	{ "log", 0, "FILE", OPT_LOG, "write every path touched with its access classes" },
	{ "report", 0, "FILE", OPT_REPORT, NULL }, /* deprecated: -o FILE */
	{ "no-refresh", 0, NULL, OPT_NO_REFRESH,
	  "do not re-import a registry older than the dpkg\n"
	  "database (it is re-imported by default; this\n"
	  "only warns)" },
	{ "no-cache", 0, NULL, OPT_NO_CACHE,
	  "ask the server for every check: no shared verdict\n"
	  "cache (for comparison; docs/verdict-cache.md);\n"
	  "KILN_TRACE_NO_CACHE=1 in the environment does the same" },
	{ "no-recall", 0, NULL, OPT_NO_RECALL,
	  "do not answer ahead what the last build of the same\n"
	  "sandbox asked, nor keep what this one asks\n"
	  "(docs/verdict-cache.md, Recalled keys);\n"
	  "KILN_TRACE_NO_RECALL=1 does the same" },
	{ "stats", 0, NULL, OPT_STATS,
	  "print the verdict cache's figures (hits, misses,\n"
	  "round trips, listings, map size, entries) on stderr" },
	{ 0 },
};

static void usage(FILE *out)
{
	fprintf(out,
"usage: kiln trace [OPTIONS] -- COMMAND [ARGS...]\n"
"\n"
"Runs COMMAND (a build) with every file access checked against a sandbox built\n"
"from the package registry: files of packages outside the declared dependencies'\n"
"closure (Essential packages always included) are hidden, writes outside the\n"
"build directory, /tmp and allowed areas are refused. At the end a report ranks\n"
"the packages the build reached for by evidence, shows known harmless probes\n"
"apart and ends with a verdict: what the Build-Depends probably miss, why a\n"
"failed build failed, what they declare unused. Exits with COMMAND's status\n"
"(128+N if killed by signal N).\n"
"\n"
"options:\n");
	cliopt_print_options(out, options);
	fprintf(out,
"\n"
"The text report goes to standard error after the build, from a line\n"
"'=== kiln trace report ===' to the verdict line '=== kiln trace verdict: ...',\n"
"coloured on a terminal unless NO_COLOR is set (docs/trace-report.md).\n"
"The build directory (writable) is the current directory. Output files: '-' is\n"
"stdout; symlinks, FIFOs and devices are written through; checked before the\n"
"command runs (docs/output-files.md). Defaults for --db, --policy and extra\n"
"--allow/--read/--deny areas: ~/.config/kiln/config, /etc/kiln/config (man 5 kiln).\n");
}

struct cli_rule {
	enum policy_action action;
	const char *prefix;
};

struct opts {
	const char *db;
	const char **deps;
	size_t ndeps;
	const char *control;
	unsigned build_parts;        /* --build-type, or 0 */
	const char *build_type_from; /* what decided build_parts */
	bool profile_set;
	enum registry_profile profile;
	const char **keep_env;
	size_t nkeep_env;
	struct cli_rule *rules;
	size_t nrules;
	const char *policy_file;
	bool unknown_set;
	enum policy_unknown unknown;
	bool report_only, strict, quiet, no_refresh, no_cache, no_recall, stats;
	const char *json, *log, *report;
	const char *json_opt, *report_opt; /* how the user named them, for messages */
	char *json_abs, *log_abs, *report_abs; /* owned copies made absolute */
	char **command;
};

static void opts_free(struct opts *o)
{
	free(o->deps);
	free(o->keep_env);
	free(o->rules);
	free(o->json_abs);
	free(o->log_abs);
	free(o->report_abs);
}

static volatile sig_atomic_t build_pgid;

static void forward_signal(int sig)
{
	if (build_pgid > 0)
		kill(-(pid_t)build_pgid, sig);
}

static int add_deps(struct opts *o, char *list)
{
	for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		while (*tok == ' ')
			tok++;
		if (!*tok)
			continue;
		const char **d = realloc(o->deps, (o->ndeps + 1) * sizeof *d);
		if (!d)
			return -1;
		o->deps = d;
		o->deps[o->ndeps++] = tok;
	}
	return 0;
}

static int add_rule(struct opts *o, enum policy_action act, const char *prefix)
{
	struct cli_rule *r = realloc(o->rules, (o->nrules + 1) * sizeof *r);
	if (!r)
		return -1;
	o->rules = r;
	o->rules[o->nrules++] = (struct cli_rule){ act, prefix };
	return 0;
}

#define CMD "kiln trace"

/* --json FILE ... -- COMMAND, the spelling before the options were unified:
 * the word after --json is no option, and a "--" comes later. Returns FILE
 * (consumed) or NULL. */
static const char *old_json_file(struct cliparse *p)
{
	const char *next = cliopt_peek(p);
	if (!next || next[0] == '-')
		return NULL;
	for (int k = p->next + 1; k < p->argc; k++)
		if (!strcmp(p->argv[k], "--")) {
			cliopt_skip(p);
			return next;
		}
	return NULL;
}

#define RUN (-1) /* parse_args: go on and run the command */

/* Returns RUN, or the exit status when there is nothing to run: --help or
 * --version answered, a usage error reported. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	struct cliparse p;
	cliopt_init(&p, CMD, options, argc, argv, CLIOPT_IN_ORDER, stderr);
	bool json = false;
	const char *output = NULL, *report = NULL, *old_json = NULL;
	for (int id; (id = cliopt_next(&p)) != CLIOPT_END;) {
		char *val = (char *)p.value;
		switch (id) {
		case CLIOPT_ERROR:
		case CLIOPT_HELP:
		case CLIOPT_VERSION:
			return cliopt_answer(id, usage, stdout);
		case OPT_REPORT_ONLY: o->report_only = true; break;
		case OPT_STRICT: o->strict = true; break;
		case OPT_QUIET: o->quiet = true; break;
		case OPT_NO_CACHE: o->no_cache = true; break;
		case OPT_NO_RECALL: o->no_recall = true; break;
		case OPT_NO_REFRESH: o->no_refresh = true; break;
		case OPT_STATS: o->stats = true; break;
		case OPT_JSON:
			json = true;
			if ((old_json = old_json_file(&p)))
				fprintf(stderr, CMD ": warning: '--json FILE' is deprecated; use '--json -o FILE'\n");
			break;
		case OPT_OUTPUT: output = val; break;
		case OPT_REPORT:
			fprintf(stderr, CMD ": warning: --report FILE is deprecated; use -o FILE\n");
			report = val;
			break;
		case OPT_DB: o->db = val; break;
		case OPT_CONTROL: o->control = val; break;
		case OPT_BUILD_TYPE:
			if (!(o->build_parts = build_type_parse(val)))
				return cliopt_usage(&p, "--build-type takes source, any, all, binary, full "
							"or a list of them (any,all), not '%s'", val);
			o->build_type_from = "--build-type";
			break;
		case OPT_POLICY: o->policy_file = val; break;
		case OPT_LOG: o->log = val; break;
		case OPT_DEPS:
			if (add_deps(o, val) < 0)
				return EXIT_KILN;
			break;
		case OPT_PROFILE:
			if (!strcmp(val, "chroot"))
				o->profile = REGISTRY_PROFILE_CHROOT;
			else if (!strcmp(val, "host"))
				o->profile = REGISTRY_PROFILE_HOST;
			else
				return cliopt_usage(&p, "--profile takes chroot or host, not '%s'", val);
			o->profile_set = true;
			break;
		case OPT_KEEP_ENV: {
			if (!*val || strchr(val, '='))
				return cliopt_usage(&p, "--keep-env takes a variable name, not '%s'", val);
			const char **k = realloc(o->keep_env, (o->nkeep_env + 1) * sizeof *k);
			if (!k)
				return EXIT_KILN;
			o->keep_env = k;
			o->keep_env[o->nkeep_env++] = val;
			break;
		}
		case OPT_UNKNOWN:
			if (policy_parse_unknown(val, &o->unknown) < 0)
				return cliopt_usage(&p, "--unknown takes report, allow or hide, not '%s'", val);
			o->unknown_set = true;
			break;
		case OPT_ALLOW:
		case OPT_READ:
		case OPT_ASK:
		case OPT_OWNED:
		case OPT_DENY: {
			enum policy_action act;
			if (policy_parse_action(p.opt + 2, &act) < 0 || add_rule(o, act, val) < 0)
				return EXIT_KILN;
			break;
		}
		}
	}
	char **rest = cliopt_rest(&p);
	if (!rest[0])
		return cliopt_usage(&p, "no command given");
	o->command = rest;
	if (o->build_parts && !o->control)
		return cliopt_usage(&p, "--build-type applies to --deps-from-control only");
	if (!o->build_parts && (o->build_parts = build_type_of_command((const char *const *)rest)))
		o->build_type_from = rest[0];
	if (!o->build_parts)
		o->build_parts = BUILD_FULL;
	if (old_json && output)
		return cliopt_usage(&p, "--json FILE (deprecated) and -o both name the JSON report's file");
	if (old_json)
		output = old_json;
	if (json) {
		o->json = output ? output : "-";
		o->json_opt = old_json ? "--json" : output ? "-o" : "--json";
		o->report = report;
		o->report_opt = "--report";
	} else {
		if (output && report)
			return cliopt_usage(&p, "-o and --report both name the text report's file");
		o->report = output ? output : report;
		o->report_opt = output ? "-o" : "--report";
	}
	/* The test suite runs every trace test in both modes this way. */
	const char *nc = getenv("KILN_TRACE_NO_CACHE");
	if (nc && *nc && strcmp(nc, "0"))
		o->no_cache = true;
	const char *nr = getenv("KILN_TRACE_NO_RECALL");
	if (nr && *nr && strcmp(nr, "0"))
		o->no_recall = true;
	if (!o->profile_set)
		o->profile = o->control ? REGISTRY_PROFILE_CHROOT : REGISTRY_PROFILE_HOST;
	if (o->nkeep_env && o->profile != REGISTRY_PROFILE_CHROOT)
		return cliopt_usage(&p, "--keep-env applies to --profile chroot only (the host "
					"profile keeps the whole environment)");
	return RUN;
}

/* Makes a path absolute against the current directory (output files are
 * written by the server after the build, whatever its cwd is); *owned gets
 * the copy to free. */
static const char *absolute(const char *p, const char *cwd, char **owned)
{
	if (!p || p[0] == '/' || !strcmp(p, "-"))
		return p;
	if (asprintf(owned, "%s/%s", cwd, p) < 0) {
		*owned = NULL;
		return NULL;
	}
	return *owned;
}

static void remove_run_dir(const char *dir)
{
	char err[PATH_MAX + 128];
	if (trace_rundir_remove(dir, err, sizeof err) < 0)
		fprintf(stderr, "kiln trace: %s\n", err);
}

static void describe_status(char *buf, size_t len, int st)
{
	if (WIFSIGNALED(st))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		snprintf(buf, len, "exit status %d", WEXITSTATUS(st));
}

/* The configuration's rules (allow, read, ask, deny), in file order: after
 * its policy file, before the command line's. */
static int add_config_rules(const struct cli_config *cfg, struct policy *p, char *err, size_t errlen)
{
	for (size_t i = 0; i < cfg->n; i++) {
		const struct cli_config_entry *e = &cfg->entries[i];
		enum policy_action act;
		if (policy_parse_action(e->key, &act) < 0)
			continue; /* not a rule: registry, policy */
		char msg[1024];
		if (policy_add(p, act, e->value, msg, sizeof msg) < 0) {
			snprintf(err, errlen, "%s: %s", e->where, msg);
			return -1;
		}
	}
	return 0;
}

static bool keeps_env(const struct opts *o, const char *name)
{
	for (size_t i = 0; i < o->nkeep_env; i++)
		if (!strcmp(o->keep_env[i], name))
			return true;
	return false;
}

/* The invoking user's home: $HOME, else the password database's. */
static const char *invoking_home(void)
{
	const char *h = getenv("HOME");
	if (h && h[0] == '/')
		return h;
	struct passwd *pw = getpwuid(getuid());
	return pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
}

/* $XDG_CACHE_HOME/kiln/recall, else ~/.cache/kiln/recall; NULL when the
 * home does not exist (sbuild's HOME=/sbuild-nonexistent: nothing is
 * recalled, and nothing made there). */
static const char *recall_dir(char *buf, size_t len)
{
	const char *cache = getenv("XDG_CACHE_HOME"), *home = invoking_home();
	struct stat st;
	int n = cache && cache[0] == '/' ? snprintf(buf, len, "%s/kiln/recall", cache)
	      : home && stat(home, &st) == 0 && S_ISDIR(st.st_mode)
		      ? snprintf(buf, len, "%s/.cache/kiln/recall", home) : -1;
	return n > 0 && (size_t)n < len ? buf : NULL;
}

static int build_policy(const struct opts *o, const struct cli_config *cfg, const char *cwd,
			const char *preload, struct policy *p)
{
	char err[PATH_MAX + 1200];
	bool chroot = o->profile == REGISTRY_PROFILE_CHROOT;
	policy_init(p);
	const struct cli_config_entry *cfg_policy = cli_config_get(cfg, "policy");
	const char *policy_file = o->policy_file ? o->policy_file : cfg_policy ? cfg_policy->value : NULL;
	/* The artifact names first: the chroot rules keep their directory
	 * readable. They add no rule of their own. */
	if (policy_add_defaults(p, cwd, !chroot, err, sizeof err) < 0 ||
	    artifacts_add_to_policy(p, o->control, o->command[0], cwd, err, sizeof err) < 0 ||
	    (chroot && policy_add_chroot(p, keeps_env(o, "HOME") ? NULL : invoking_home(), preload,
					 err, sizeof err) < 0) ||
	    (policy_file && policy_load_file(p, policy_file, err, sizeof err) < 0) ||
	    add_config_rules(cfg, p, err, sizeof err) < 0)
		goto fail;
	for (size_t i = 0; i < o->nrules; i++)
		if (policy_add(p, o->rules[i].action, o->rules[i].prefix, err, sizeof err) < 0)
			goto fail;
	if (o->unknown_set)
		p->unknown = o->unknown;
	policy_compile(p);
	return 0;
fail:
	fprintf(stderr, "kiln trace: %s\n", err);
	policy_free(p);
	return -1;
}

static void exec_command(const struct opts *o, const char *preload, const char *sock,
			 const char *rundir, const char *cache, bool own_tty, pid_t kiln,
			 bool allow_ns, const char *planned)
{
	setpgid(0, 0);
	/* If kiln dies, so does the build's first process at once (the server
	 * then ends the rest, see trace_end_build). */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != kiln)
		_exit(EXIT_KILN);
	if (own_tty) /* before it can read the terminal (kiln does the same: no race) */
		tcsetpgrp(STDIN_FILENO, getpid());
	if (o->profile == REGISTRY_PROFILE_CHROOT) {
		char **env = buildenv_sbuild(environ, o->keep_env, o->nkeep_env);
		if (!env)
			_exit(EXIT_KILN);
		environ = env;
	}
	const char *old = getenv("LD_PRELOAD");
	char *ld;
	if (old && *old ? asprintf(&ld, "%s:%s", preload, old) < 0 : asprintf(&ld, "%s", preload) < 0)
		_exit(EXIT_KILN);
	if (setenv("LD_PRELOAD", ld, 1) < 0 || setenv(KILN_ENV_SOCKET, sock, 1) < 0 ||
	    setenv(KILN_ENV_PRELOAD, preload, 1) < 0 || setenv(KILN_ENV_RUNDIR, rundir, 1) < 0 ||
	    (cache ? setenv(KILN_ENV_CACHE, cache, 1) : unsetenv(KILN_ENV_CACHE)) < 0 ||
	    setenv(KILN_ENV_NAMESPACES, allow_ns ? "allow" : "refuse", 1) < 0 ||
	    unsetenv(KILN_ENV_TRUSTED) < 0 || unsetenv(KILN_ENV_LOCALES) < 0 ||
	    unsetenv(KILN_ENV_CLEAN) < 0)
		_exit(EXIT_KILN);
	/* From the server's ready message: KILN_TRUSTED_LIBS, KILN_LOCALES, KILN_CLEAN. */
	for (const char *p = planned; *p;) {
		const char *nl = strchrnul(p, '\n'), *eq = memchr(p, '=', (size_t)(nl - p));
		if (eq && !strncmp(p, "KILN_", 5)) {
			char name[64], value[4096];
			snprintf(name, sizeof name, "%.*s", (int)(eq - p), p);
			snprintf(value, sizeof value, "%.*s", (int)(nl - eq - 1), eq + 1);
			if (setenv(name, value, 1) < 0)
				_exit(EXIT_KILN);
		}
		p = *nl ? nl + 1 : nl;
	}
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	signal(SIGQUIT, SIG_DFL);
	signal(SIGTTOU, SIG_DFL);
	execvp(o->command[0], o->command);
	int e = errno;
	fprintf(stderr, "kiln trace: cannot run %s: %s\n", o->command[0], strerror(e));
	_exit(e == ENOENT ? 127 : 126);
}

/* Every output file can be written: checked before anything runs. */
static int check_outputs(const struct opts *o)
{
	const char *const outs[] = { o->json, o->log, o->report };
	const char *const names[] = { o->json_opt, "--log", o->report_opt };
	for (size_t i = 0; i < 3; i++) {
		char err[PATH_MAX + 256];
		if (outs[i] && outfile_check(AT_FDCWD, outs[i], 0, err, sizeof err) < 0) {
			fprintf(stderr, "kiln trace: %s: %s; nothing was run\n", names[i], err);
			return -1;
		}
	}
	return 0;
}

/* The locale names the build's environment sets (LC_ALL, LC_*, LANG),
 * distinct, not C or POSIX: the server plans them before the build starts
 * (docs/glibc-data.md). Pointers into env; at most cap. */
static size_t env_locales(char *const *env, const char **out, size_t cap)
{
	size_t n = 0;
	for (char *const *e = env; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		if (!eq || (strncmp(*e, "LC_", 3) && strncmp(*e, "LANG=", 5)))
			continue;
		const char *v = eq + 1;
		if (!*v || !strcmp(v, "C") || !strcmp(v, "POSIX"))
			continue;
		bool dup = false;
		for (size_t i = 0; i < n; i++)
			dup |= !strcmp(out[i], v);
		if (!dup && n < cap)
			out[n++] = v;
	}
	return n;
}

static int run_trace(struct opts *op);

int cmd_trace(int argc, char **argv)
{
	struct opts o = { 0 };
	int rc = parse_args(argc, argv, &o);
	if (rc == RUN)
		rc = run_trace(&o);
	opts_free(&o);
	return rc;
}

static int run_trace(struct opts *op)
{
	struct opts o = *op;
	char dbbuf[PATH_MAX], cwd[PATH_MAX], preload[PATH_MAX], rundir[PATH_MAX], sock[PATH_MAX],
		cache[PATH_MAX];
	struct policy policy;

	if (!getcwd(cwd, sizeof cwd)) {
		fprintf(stderr, "kiln trace: cannot get the current directory: %s\n", strerror(errno));
		return EXIT_KILN;
	}
	struct cli_config cfg;
	if (cli_config_load(&cfg, CMD, stderr) < 0)
		return CLIOPT_EXIT_USAGE;
	if (!o.db) {
		int rc = cli_default_db(dbbuf, sizeof dbbuf, CMD, stderr);
		o.db = dbbuf;
		if (rc < 0) {
			cli_config_free(&cfg);
			return CLIOPT_EXIT_USAGE;
		}
	}
	if (check_outputs(&o) < 0) {
		cli_config_free(&cfg);
		return CLIOPT_EXIT_USAGE;
	}
	const char *json_name = o.json, *log_name = o.log;
	o.json = absolute(o.json, cwd, &op->json_abs);
	o.log = absolute(o.log, cwd, &op->log_abs);
	o.report = absolute(o.report, cwd, &op->report_abs);
	if (registry_refresh_if_stale(o.db, !o.no_refresh, "kiln trace", stderr) < 0) {
		cli_config_free(&cfg);
		return EXIT_KILN;
	}
	if (cli_find_preload(preload, sizeof preload, CMD, stderr) < 0 || build_policy(&o, &cfg, cwd, preload, &policy) < 0) {
		cli_config_free(&cfg);
		return EXIT_KILN;
	}
	cli_config_free(&cfg);

	snprintf(rundir, sizeof rundir, "%s/" TRACE_RUNDIR_TEMPLATE, trace_rundir_base());
	if (!mkdtemp(rundir)) {
		fprintf(stderr, "kiln trace: cannot create a run directory %s: %s\n", rundir, strerror(errno));
		goto fail;
	}
	if (snprintf(sock, sizeof sock, "%s/" TRACE_RUNDIR_SOCKET, rundir) >= (int)sizeof sock ||
	    snprintf(cache, sizeof cache, "%s/verdicts", rundir) >= (int)sizeof cache) {
		fprintf(stderr, "kiln trace: run directory path %s is too long\n", rundir);
		remove_run_dir(rundir);
		goto fail;
	}
	/* kiln's own state is out of the build's reach: the run directory (the
	 * socket, the cache) is hidden from it and cannot be renamed, replaced
	 * or written; kiln's library reaches it with raw system calls. */
	char perr[PATH_MAX + 128];
	if (policy_add(&policy, POLICY_DENY, rundir, perr, sizeof perr) < 0) {
		fprintf(stderr, "kiln trace: %s\n", perr);
		remove_run_dir(rundir);
		goto fail;
	}
	policy_compile(&policy);

	int ready[2], life[2];
	if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(life, O_CLOEXEC) < 0) {
		fprintf(stderr, "kiln trace: pipe: %s\n", strerror(errno));
		remove_run_dir(rundir);
		goto fail;
	}
	fflush(NULL);
	pid_t server = fork();
	if (server < 0) {
		fprintf(stderr, "kiln trace: cannot start the server: %s\n", strerror(errno));
		remove_run_dir(rundir);
		goto fail;
	}
	if (server == 0) {
		/* The server ignores the terminal's signals: kiln forwards them to
		 * the build and ends the server through the lifeline. Its own
		 * process group: a kill of kiln's group leaves it alive to end
		 * the build and clean up. */
		setpgid(0, 0);
		signal(SIGTTOU, SIG_IGN);
		signal(SIGINT, SIG_IGN);
		signal(SIGQUIT, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		signal(SIGPIPE, SIG_IGN); /* a closed stderr must not lose --json/--log */
		close(ready[0]);
		close(life[1]);
		/* stdout stays: --json - and /dev/stdout write to it */
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (null >= 0) {
			dup2(null, 0);
			close(null);
		}
		char recall_buf[PATH_MAX];
		char **benv = o.profile == REGISTRY_PROFILE_CHROOT
				      ? buildenv_sbuild(environ, o.keep_env, o.nkeep_env) : NULL;
		const char *build_path = getenv("PATH");
		for (size_t k = 0; benv && benv[k]; k++)
			if (!strncmp(benv[k], "PATH=", 5))
				build_path = benv[k] + 5;
		const char *locales[16];
		size_t nlocales = env_locales(benv ? benv : environ, locales, 16);
		struct trace_server_config cfg = {
			.db = o.db, .deps = o.deps, .ndeps = o.ndeps, .control = o.control,
			.build_parts = o.build_parts, .build_type_from = o.build_type_from,
			.profile = o.profile, .locales = locales, .nlocales = nlocales,
			.policy = &policy, .report_only = o.report_only, .json = o.json,
			.log = o.log, .report = o.report, .socket = sock, .rundir = rundir,
			.json_name = json_name, .log_name = log_name, .quiet = o.quiet, .strict = o.strict,
			.build_path = build_path,
			.stats = o.stats, .cache = o.no_cache || o.report_only ? NULL : cache,
			.recall_dir = o.no_recall ? NULL : recall_dir(recall_buf, sizeof recall_buf),
		};
		int rc = trace_server_main(&cfg, ready[1], life[0]);
		free(benv);
		fflush(NULL);
		_exit(rc);
	}
	close(ready[1]);
	close(life[0]);

	/* Wait until the server listens (or says why it cannot). */
	char msg[4200];
	size_t got = cli_read_all(ready[0], msg, sizeof msg - 1);
	close(ready[0]);
	msg[got] = '\0';
	/* After "R": KILN_*=VALUE lines for the build's environment. */
	const char *planned = got && msg[0] == 'R' ? msg + 1 : "";
	if (got == 0 || msg[0] != 'R') {
		int st = 0;
		close(life[1]);
		waitpid(server, &st, 0);
		if (got > 1)
			fprintf(stderr, "kiln trace: %s\n", msg + 1);
		else {
			char why[128];
			describe_status(why, sizeof why, st);
			fprintf(stderr, "kiln trace: the trace server failed to start (%s)\n", why);
		}
		remove_run_dir(rundir);
		goto fail;
	}

	/* The build runs in its own process group, in the terminal's
	 * foreground if kiln was; kiln forwards termination signals to it. */
	bool own_tty = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
	signal(SIGTTOU, SIG_IGN);
	struct sigaction sa = { .sa_handler = forward_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGQUIT, &sa, NULL);
	pid_t kiln = getpid();
	pid_t cmd = fork();
	if (cmd < 0) {
		fprintf(stderr, "kiln trace: cannot run %s: %s\n", o.command[0], strerror(errno));
		close(life[1]);
		waitpid(server, NULL, 0);
		remove_run_dir(rundir);
		goto fail;
	}
	if (cmd == 0)
		exec_command(&o, preload, sock, rundir, o.no_cache || o.report_only ? NULL : cache,
			     own_tty, kiln, policy.allow_namespaces, planned);
	setpgid(cmd, cmd);
	build_pgid = cmd;
	char pgnote[32];
	int pgn = snprintf(pgnote, sizeof pgnote, "pgid %ld\n", (long)cmd);
	if (write(life[1], pgnote, (size_t)pgn) < 0) {
		/* the server died just now: waitpid tells */
	}
	if (own_tty)
		tcsetpgrp(STDIN_FILENO, cmd);

	int cmd_status = 0, server_status = 0;
	bool server_died = false;
	for (;;) {
		int st;
		pid_t p = waitpid(-1, &st, 0);
		if (p < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p == cmd) {
			cmd_status = st;
			break;
		}
		if (p == server) {
			/* The server is gone mid-build: its clients fail closed; end
			 * the build rather than let it run unchecked. */
			server_died = true;
			server_status = st;
			char why[128];
			describe_status(why, sizeof why, st);
			fprintf(stderr, "kiln trace: the trace server (pid %ld) died during the build (%s); "
					"stopping the build\n", (long)server, why);
			kill(-cmd, SIGKILL);
		}
	}
	if (own_tty)
		tcsetpgrp(STDIN_FILENO, getpgrp());
	build_pgid = 0;

	int status = WIFSIGNALED(cmd_status) ? 128 + WTERMSIG(cmd_status) : WEXITSTATUS(cmd_status);
	if (!server_died) {
		char note[64];
		int n = snprintf(note, sizeof note, "status %d\n", status);
		if (write(life[1], note, (size_t)n) < 0) {
			/* the server died just now: waitpid tells */
		}
		close(life[1]);
		while (waitpid(server, &server_status, 0) < 0 && errno == EINTR)
			;
	} else {
		close(life[1]);
	}
	remove_run_dir(rundir);
	policy_free(&policy);

	if (server_died)
		return EXIT_KILN;
	if (!WIFEXITED(server_status) || WEXITSTATUS(server_status) == TRACE_SERVER_FAILED) {
		char why[128];
		describe_status(why, sizeof why, server_status);
		fprintf(stderr, "kiln trace: the trace server failed at the end (%s); the report is incomplete\n", why);
		return status ? status : EXIT_KILN;
	}
	if (o.strict && WEXITSTATUS(server_status) == TRACE_SERVER_VIOLATIONS && status == 0) {
		/* The text report on stderr says so before its verdict. */
		if (o.report)
			fprintf(stderr, "kiln trace: --strict: the build reached for hidden files that "
					"count (ranked in the report) or had writes refused\n");
		return 1;
	}
	return status;
fail:
	policy_free(&policy);
	return EXIT_KILN;
}
