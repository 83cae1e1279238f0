/* kiln registry: import and query the package registry. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/commands.h"
#include "cli/config.h"
#include "common/cliopt.h"
#include "common/outfile.h"
#include "registry/canon.h"
#include "registry/import.h"
#include "registry/query.h"
#include "registry/registry.h"

#define MAX_OWNERS 4096
#define CMD "kiln registry"

/* Where the results go: stdout, or -o FILE (common/outfile.h). */
static FILE *out;

struct opts {
	const char *db;
	bool json;
	const char *root;
	bool closure, essential;
	const char *profile; /* --profile NAME, or NULL */
	char **args; /* positional arguments after the subcommand */
	int nargs;
	char dbbuf[PATH_MAX];
};

enum { OPT_DB = 1, OPT_JSON, OPT_OUTPUT, OPT_ROOT, OPT_CLOSURE, OPT_ESSENTIAL, OPT_PROFILE };

static const struct cliopt options[] = {
	{ "db", 0, "FILE", OPT_DB, "the registry database (default: $KILN_DB, the\n"
				   "configuration's 'registry' (man 5 kiln), else\n"
				   "$XDG_CACHE_HOME/kiln/registry.db or\n"
				   "~/.cache/kiln/registry.db)" },
	{ "json", 0, NULL, OPT_JSON, "machine-readable output" },
	{ "output", 'o', "FILE", OPT_OUTPUT, "write the output to FILE ('-': standard output)" },
	{ "root", 0, "DIR", OPT_ROOT, "import: the tree whose dpkg database is read" },
	{ "closure", 0, NULL, OPT_CLOSURE, "deps: the transitive closure" },
	{ "essential", 0, NULL, OPT_ESSENTIAL, "deps --closure: add the profile's base set" },
	{ "profile", 0, "host|chroot", OPT_PROFILE, "deps --closure: how alternatives are chosen" },
	{ 0 },
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: kiln registry [OPTIONS] COMMAND [ARGS...]\n"
		"\n"
		"commands:\n"
		"  import dpkg [--root DIR]        import the dpkg database of DIR (default /)\n"
		"  import manifest [--root DIR] FILE...\n"
		"                                  import kiln manifests (docs/registry.md)\n"
		"  owner PATH...                   packages owning each path (canonicalised)\n"
		"  files PKG                       files a package lists\n"
		"  deps PKG [--closure [--essential] [--profile host|chroot]]\n"
		"                                  dependencies, or their transitive closure\n"
		"                                  (host: every installed alternative, the\n"
		"                                  default; chroot: as apt installs them into a\n"
		"                                  clean buildd chroot; --essential adds the\n"
		"                                  profile's base set, docs/profiles.md)\n"
		"  rdeps PKG                       packages that depend on PKG\n"
		"  packages [PREFIX]               names of the installed packages (that start\n"
		"                                  with PREFIX)\n"
		"  stats                           what the registry holds\n"
		"\n"
		"Options go anywhere on the line:\n");
	cliopt_print_options(f, options);
}

static void json_str(const char *s)
{
	putc('"', out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", out);
		else if (c == '\t')
			fputs("\\t", out);
		else if (c < 0x20)
			fprintf(out, "\\u%04x", c);
		else
			putc(c, out);
	}
	putc('"', out);
}

static const char *kind_name(int kind)
{
	return kind == REGISTRY_KIND_DIR ? "dir" : kind == REGISTRY_KIND_SYMLINK ? "symlink" : "file";
}

static struct kiln_registry *open_ro(const struct opts *o)
{
	char err[PATH_MAX + 512];
	struct kiln_registry *reg = registry_open(o->db, REGISTRY_RDONLY, err, sizeof err);
	if (!reg)
		fprintf(stderr, "kiln registry: %s\n", err);
	return reg;
}

static int db_fail(struct kiln_registry *reg)
{
	fprintf(stderr, "kiln registry: %s\n", registry_errmsg(reg));
	registry_close(reg);
	return 1;
}

/* ---- import ------------------------------------------------------------ */

static void warn_cb(void *ctx, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "kiln registry: warning: %s\n", msg);
}

static int cmd_import(struct opts *o)
{
	if (o->nargs < 1) {
		return cliopt_usage_for(stderr, CMD, "import: say what to import: 'dpkg' or 'manifest FILE...'");
	}
	char root[PATH_MAX];
	struct registry_import_opts io = { .warn = warn_cb };
	if (o->root) {
		if (!realpath(o->root, root)) {
			fprintf(stderr, "kiln registry: --root %s: %s\n", o->root, strerror(errno));
			return 1;
		}
		io.root = root;
	}
	struct registry_import_result res;
	char err[PATH_MAX * 2 + 512];
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc;
	const char *what = o->args[0];
	if (!strcmp(what, "dpkg")) {
		if (o->nargs != 1) {
			return cliopt_usage_for(stderr, CMD, "import dpkg: unexpected argument '%s'", o->args[1]);
		}
		rc = registry_import_dpkg(o->db, &io, &res, err, sizeof err);
	} else if (!strcmp(what, "manifest")) {
		if (o->nargs < 2) {
			return cliopt_usage_for(stderr, CMD, "import manifest: name at least one FILE");
		}
		rc = registry_import_manifests(o->db, (const char *const *)o->args + 1,
					       (size_t)o->nargs - 1, &io, &res, err, sizeof err);
	} else {
		return cliopt_usage_for(stderr, CMD, "import: unknown source '%s' (dpkg or manifest)", what);
	}
	if (rc) {
		fprintf(stderr, "kiln registry: import failed, %s left unchanged: %s\n", o->db, err);
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (o->json) {
		fprintf(out, "{\"db\": ");
		json_str(o->db);
		fprintf(out, ", \"packages\": %ld, \"files\": %ld, \"diverted\": %ld, \"skipped\": %ld, "
		       "\"missing_lists\": %ld, \"kept\": %ld, \"seconds\": %.3f}\n",
		       res.packages, res.files, res.diverted, res.skipped, res.missing_lists, res.kept,
		       secs);
	} else {
		fprintf(out, "imported %ld packages, %ld files (%ld diverted) into %s in %.2f s\n",
		       res.packages, res.files, res.diverted, o->db, secs);
		if (res.skipped)
			fprintf(out, "skipped %ld packages that are not installed\n", res.skipped);
		if (res.kept)
			fprintf(out, "kept %ld packages of other origins\n", res.kept);
		if (res.missing_lists)
			fprintf(out, "%ld installed packages had no file list\n", res.missing_lists);
	}
	return 0;
}

/* ---- owner ------------------------------------------------------------- */

static int cmd_owner(struct opts *o)
{
	if (o->nargs < 1) {
		return cliopt_usage_for(stderr, CMD, "owner: name at least one PATH");
	}
	struct kiln_registry *reg = open_ro(o);
	if (!reg)
		return 1;
	struct canon canon;
	canon_init(&canon, "/");
	static int64_t ids[MAX_OWNERS];
	int status = 0;
	if (o->json)
		fprintf(out, "[");
	for (int i = 0; i < o->nargs; i++) {
		char path[PATH_MAX];
		if (canon_path(&canon, o->args[i], path, sizeof path)) {
			fprintf(stderr, "kiln registry: %s: %s\n", o->args[i], strerror(errno));
			status = 1;
			continue;
		}
		int n = registry_owners(reg, path, ids, MAX_OWNERS);
		if (n < 0) {
			canon_free(&canon);
			return db_fail(reg);
		}
		if (n > MAX_OWNERS)
			n = MAX_OWNERS;
		if (o->json) {
			fprintf(out, "%s\n {\"path\": ", i ? "," : "");
			json_str(o->args[i]);
			fprintf(out, ", \"canonical\": ");
			json_str(path);
			fprintf(out, ", \"owners\": [");
			for (int j = 0; j < n; j++) {
				char name[256];
				fprintf(out, "%s", j ? ", " : "");
				json_str(registry_package_name(reg, ids[j], name, sizeof name));
			}
			fprintf(out, "]}");
		} else if (n) {
			for (int j = 0; j < n; j++) {
				char name[256];
				fprintf(out, "%s%s", j ? ", " : "",
				       registry_package_name(reg, ids[j], name, sizeof name));
			}
			if (strcmp(path, o->args[i]))
				fprintf(out, ": %s -> %s\n", o->args[i], path);
			else
				fprintf(out, ": %s\n", path);
		}
		if (!n) {
			if (!o->json)
				fprintf(stderr, "kiln registry: no package owns %s%s%s\n", o->args[i],
					strcmp(path, o->args[i]) ? " -> " : "",
					strcmp(path, o->args[i]) ? path : "");
			status = 1;
		}
	}
	if (o->json)
		fprintf(out, "\n]\n");
	canon_free(&canon);
	registry_close(reg);
	return status;
}

/* ---- package arguments --------------------------------------------------- */

/* Ids of the installed packages named spec; prints a clear message if none. */
static int lookup_package(struct kiln_registry *reg, const char *spec, int64_t *ids, size_t cap)
{
	int n = registry_find_packages(reg, spec, ids, cap);
	if (n < 0) {
		fprintf(stderr, "kiln registry: %s\n", registry_errmsg(reg));
		return -1;
	}
	if (n > (int)cap)
		n = (int)cap;
	if (n == 0) {
		int64_t prov[64];
		int k = registry_satisfiers(reg, spec, "", prov, 64);
		fprintf(stderr, "kiln registry: unknown package '%s' in %s", spec, registry_path(reg));
		if (k > 0) {
			fprintf(stderr, " (a virtual package, provided by");
			for (int i = 0; i < k && i < 64; i++) {
				char name[256];
				fprintf(stderr, "%s %s", i ? "," : "",
					registry_package_name(reg, prov[i], name, sizeof name));
			}
			fprintf(stderr, ")");
		}
		fprintf(stderr, "\n");
		return -1;
	}
	return n;
}

/* The prologue of the one-package commands: exactly one PKG argument, the
 * registry opened read-only, the package's ids. Returns the registry, or NULL
 * with *rc set to the exit status. */
static struct kiln_registry *open_one_package(struct opts *o, const char *cmd, int64_t *ids,
					      size_t cap, int *n, int *rc)
{
	*rc = 2;
	if (o->nargs != 1) {
		cliopt_usage_for(stderr, CMD, "%s: name one PKG", cmd);
		return NULL;
	}
	*rc = 1;
	struct kiln_registry *reg = open_ro(o);
	if (!reg)
		return NULL;
	*n = lookup_package(reg, o->args[0], ids, cap);
	if (*n < 0) {
		registry_close(reg);
		return NULL;
	}
	*rc = 0;
	return reg;
}

/* ---- files --------------------------------------------------------------- */

struct files_ctx {
	bool json;
	int count;
};

static int print_file(void *ctx, const char *listed, const char *canonical, int kind, bool diverted)
{
	struct files_ctx *f = ctx;
	if (f->json) {
		fprintf(out, "%s\n {\"listed\": ", f->count ? "," : "");
		json_str(listed);
		fprintf(out, ", \"canonical\": ");
		json_str(canonical);
		fprintf(out, ", \"kind\": \"%s\", \"diverted\": %s}", kind_name(kind), diverted ? "true" : "false");
	} else if (diverted) {
		fprintf(out, "%s  (diverted to %s)\n", listed, canonical);
	} else if (strcmp(listed, canonical)) {
		fprintf(out, "%s  (canonical %s)\n", listed, canonical);
	} else {
		fprintf(out, "%s\n", listed);
	}
	f->count++;
	return 0;
}

static int cmd_files(struct opts *o)
{
	int64_t ids[16];
	int n, rc;
	struct kiln_registry *reg = open_one_package(o, "files", ids, 16, &n, &rc);
	if (!reg)
		return rc;
	struct files_ctx f = { o->json, 0 };
	if (o->json)
		fprintf(out, "[");
	for (int i = 0; i < n; i++)
		if (registry_each_file(reg, ids[i], print_file, &f) < 0)
			return db_fail(reg);
	if (o->json)
		fprintf(out, "\n]\n");
	if (!f.count)
		fprintf(stderr, CMD ": package %s lists no files\n", o->args[0]);
	registry_close(reg);
	return 0;
}

/* ---- deps ---------------------------------------------------------------- */

struct deps_ctx {
	struct kiln_registry *reg;
	bool json;
	int type, clause, count;
};

static int print_dep(void *ctx, const struct registry_dep *d)
{
	struct deps_ctx *c = ctx;
	static const char *const field[] = { "Depends", "Pre-Depends" };
	int64_t ids[64];
	int n = registry_satisfiers(c->reg, d->name, d->archq, ids, 64);
	if (n < 0)
		return -1;
	if (n > 64)
		n = 64;
	if (c->json) {
		fprintf(out, "%s\n {\"field\": \"%s\", \"clause\": %d, \"alt\": %d, \"name\": ",
		       c->count ? "," : "", field[d->type & 1], d->clause, d->alt);
		json_str(d->name);
		fprintf(out, ", \"arch\": ");
		json_str(d->archq);
		fprintf(out, ", \"version\": ");
		json_str(d->version);
		fprintf(out, ", \"satisfied_by\": [");
		for (int i = 0; i < n; i++) {
			char name[256];
			fprintf(out, "%s", i ? ", " : "");
			json_str(registry_package_name(c->reg, ids[i], name, sizeof name));
		}
		fprintf(out, "]}");
	} else {
		if (d->type != c->type || d->clause != c->clause) {
			if (c->count)
				fprintf(out, "\n");
			fprintf(out, "%s: ", field[d->type & 1]);
		} else {
			fprintf(out, " | ");
		}
		fprintf(out, "%s%s%s", d->name, *d->archq ? ":" : "", d->archq);
		if (*d->version)
			fprintf(out, " (%s)", d->version);
		/* Name what satisfies the atom unless it is the package of that name. */
		char first[256];
		if (n == 0)
			fprintf(out, " [not installed]");
		else if (n > 1 || strcmp(d->name, registry_package_name(c->reg, ids[0], first,
									sizeof first))) {
			for (int i = 0; i < n; i++) {
				char name[256];
				fprintf(out, "%s%s", i ? ", " : " [",
				       registry_package_name(c->reg, ids[i], name, sizeof name));
			}
			fprintf(out, "]");
		}
	}
	c->type = d->type;
	c->clause = d->clause;
	c->count++;
	return 0;
}

static int print_name_list(struct kiln_registry *reg, const char *key, const char *pkg,
			   const struct registry_pkgset *set, bool json)
{
	/* Sorted by name, for people and for diffs. */
	char (*names)[256] = calloc(set->n ? set->n : 1, sizeof *names);
	if (!names) {
		fprintf(stderr, "kiln registry: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < set->n; i++)
		registry_package_name(reg, set->ids[i], names[i], sizeof names[i]);
	qsort(names, set->n, sizeof *names, (int (*)(const void *, const void *))strcmp);
	if (json) {
		fprintf(out, "{\"package\": ");
		json_str(pkg);
		fprintf(out, ", \"%s\": [", key);
	}
	for (size_t i = 0; i < set->n; i++) {
		if (i && !strcmp(names[i], names[i - 1]))
			continue; /* one name, several architectures */
		if (json) {
			fprintf(out, "%s", i ? ", " : "");
			json_str(names[i]);
		} else {
			fprintf(out, "%s\n", names[i]);
		}
	}
	if (json)
		fprintf(out, "]}\n");
	free(names);
	return 0;
}

/* deps PKG --closure: PKG may be virtual (its providers' closure), exactly
 * as for `kiln trace --deps PKG`, so a trace's closure can be recomputed. */
static int cmd_closure(struct opts *o)
{
	if (o->nargs != 1) {
		return cliopt_usage_for(stderr, CMD, "deps: name one PKG");
	}
	struct kiln_registry *reg = open_ro(o);
	if (!reg)
		return 1;
	int64_t any[1];
	int real = registry_find_packages(reg, o->args[0], any, 1);
	if (real == 0 && registry_satisfiers(reg, o->args[0], "", any, 1) == 0) {
		lookup_package(reg, o->args[0], any, 1); /* says it is unknown */
		registry_close(reg);
		return 1;
	}
	struct registry_pkgset set;
	char err[PATH_MAX + 512];
	const char *names[] = { o->args[0] };
	enum registry_profile profile = REGISTRY_PROFILE_HOST;
	if (o->profile && !strcmp(o->profile, "chroot"))
		profile = REGISTRY_PROFILE_CHROOT;
	if (registry_closure_profile(reg, profile, names, 1, o->essential, &set, err, sizeof err)) {
		fprintf(stderr, "kiln registry: %s\n", err);
		registry_close(reg);
		return 1;
	}
	int rc = print_name_list(reg, "closure", o->args[0], &set, o->json);
	registry_pkgset_free(&set);
	registry_close(reg);
	return rc;
}

static int cmd_deps(struct opts *o)
{
	if (o->closure)
		return cmd_closure(o);
	int64_t ids[16];
	int n, rc;
	struct kiln_registry *reg = open_one_package(o, "deps", ids, 16, &n, &rc);
	if (!reg)
		return rc;
	{
		struct deps_ctx c = { reg, o->json, -1, -1, 0 };
		if (o->json) {
			fprintf(out, "{\"package\": ");
			json_str(o->args[0]);
			fprintf(out, ", \"depends\": [");
		}
		for (int i = 0; i < n; i++)
			if (registry_each_dep(reg, ids[i], print_dep, &c) < 0)
				return db_fail(reg);
		if (o->json)
			fprintf(out, "\n]}\n");
		else if (c.count)
			fprintf(out, "\n");
		if (!c.count)
			fprintf(stderr, CMD ": package %s has no Depends or Pre-Depends\n", o->args[0]);
	}
	registry_close(reg);
	return rc;
}

static int cmd_rdeps(struct opts *o)
{
	int64_t ids[16];
	int n, rc;
	struct kiln_registry *reg = open_one_package(o, "rdeps", ids, 16, &n, &rc);
	if (!reg)
		return rc;
	struct registry_pkgset all = { 0 };
	for (int i = 0; i < n; i++) {
		struct registry_pkgset set;
		if (registry_rdeps(reg, ids[i], &set)) {
			registry_pkgset_free(&all);
			return db_fail(reg);
		}
		for (size_t j = 0; j < set.n; j++)
			registry_pkgset_add(&all, set.ids[j]);
		registry_pkgset_free(&set);
	}
	rc = print_name_list(reg, "rdeps", o->args[0], &all, o->json);
	if (!rc && !all.n)
		fprintf(stderr, CMD ": no installed package depends on %s\n", o->args[0]);
	registry_pkgset_free(&all);
	registry_close(reg);
	return rc;
}

struct names_ctx {
	const char *prefix;
	size_t plen;
	bool json;
	long count;
};

static int print_package_name(void *ctx, const char *name)
{
	struct names_ctx *c = ctx;
	if (strncmp(name, c->prefix, c->plen))
		return 0;
	if (c->json) {
		fprintf(out, "%s", c->count ? ", " : "");
		json_str(name);
	} else {
		fprintf(out, "%s\n", name);
	}
	c->count++;
	return 0;
}

/* packages [PREFIX]: for people and for the shell's completion. */
static int cmd_packages(struct opts *o)
{
	if (o->nargs > 1)
		return cliopt_usage_for(stderr, CMD, "packages: unexpected argument '%s'", o->args[1]);
	struct kiln_registry *reg = open_ro(o);
	if (!reg)
		return 1;
	struct names_ctx c = { o->nargs ? o->args[0] : "", 0, o->json, 0 };
	c.plen = strlen(c.prefix);
	if (o->json)
		fprintf(out, "[");
	if (registry_each_package_name(reg, print_package_name, &c) < 0)
		return db_fail(reg);
	if (o->json)
		fprintf(out, "]\n");
	if (!c.count && *c.prefix)
		fprintf(stderr, CMD ": no installed package name starts with '%s'\n", c.prefix);
	else if (!c.count)
		fprintf(stderr, CMD ": %s holds no packages\n", o->db);
	registry_close(reg);
	return 0;
}

static int cmd_stats(struct opts *o)
{
	if (o->nargs) {
		return cliopt_usage_for(stderr, CMD, "stats: unexpected argument '%s'", o->args[0]);
	}
	struct kiln_registry *reg = open_ro(o);
	if (!reg)
		return 1;
	struct registry_stats s;
	if (registry_get_stats(reg, &s))
		return db_fail(reg);
	if (o->json) {
		fprintf(out, "{\"db\": ");
		json_str(o->db);
		fprintf(out, ", \"schema_version\": %d, \"packages\": %lld, \"essential\": %lld, "
		       "\"required\": %lld, \"file_rows\": %lld, \"paths\": %lld, \"diverted\": %lld, \"deps\": %lld, "
		       "\"provides\": %lld, \"dpkg_root\": ",
		       s.schema_version, (long long)s.packages, (long long)s.essential,
		       (long long)s.required, (long long)s.file_rows, (long long)s.paths, (long long)s.diverted,
		       (long long)s.deps, (long long)s.provides);
		json_str(s.dpkg_root);
		fprintf(out, ", \"dpkg_imported_at\": ");
		json_str(s.dpkg_imported_at);
		fprintf(out, ", \"manifest_imported_at\": ");
		json_str(s.manifest_imported_at);
		fprintf(out, "}\n");
	} else {
		fprintf(out, "database:       %s (schema %d)\n", o->db, s.schema_version);
		fprintf(out, "packages:       %lld (%lld essential, %lld Priority: required)\n",
		       (long long)s.packages, (long long)s.essential, (long long)s.required);
		fprintf(out, "file entries:   %lld (%lld distinct paths, %lld diverted)\n",
		       (long long)s.file_rows, (long long)s.paths, (long long)s.diverted);
		fprintf(out, "dependencies:   %lld atoms, %lld provides\n", (long long)s.deps,
		       (long long)s.provides);
		if (*s.dpkg_root)
			fprintf(out, "dpkg import:    root %s at %s\n", s.dpkg_root, s.dpkg_imported_at);
		if (*s.manifest_imported_at)
			fprintf(out, "manifest import: at %s\n", s.manifest_imported_at);
	}
	registry_close(reg);
	return 0;
}

static const struct {
	const char *name;
	int (*run)(struct opts *o);
} commands[] = {
	{ "import", cmd_import }, { "owner", cmd_owner },	{ "files", cmd_files },
	{ "deps", cmd_deps },	  { "rdeps", cmd_rdeps },	{ "packages", cmd_packages },
	{ "stats", cmd_stats },
};

/* Runs the command with its output to -o FILE when there is one: written
 * only if the command succeeds (nothing half-written). */
static int run_to_output(int (*run)(struct opts *o), struct opts *o, const char *output)
{
	out = stdout;
	if (!output || !strcmp(output, "-"))
		return run(o);
	struct outfile file;
	char err[PATH_MAX + 256];
	if (!(out = outfile_fopen(&file, AT_FDCWD, output, -1, 0, err, sizeof err))) {
		fprintf(stderr, CMD ": -o: %s\n", err);
		return 1;
	}
	int rc = run(o);
	if (rc) {
		outfile_abort(&file);
	} else if (outfile_commit(&file, err, sizeof err)) {
		fprintf(stderr, CMD ": -o: %s\n", err);
		rc = 1;
	}
	out = stdout;
	return rc;
}

int cmd_registry(int argc, char **argv)
{
	struct opts o = { 0 };
	const char *output = NULL;
	char **pos = calloc((size_t)argc + 1, sizeof *pos);
	if (!pos)
		return 1;
	int npos = 0, rc = CLIOPT_EXIT_USAGE;
	struct cliparse p;
	cliopt_init(&p, CMD, options, argc, argv, CLIOPT_PERMUTE, stderr);
	for (int id; (id = cliopt_next(&p)) != CLIOPT_END;) {
		switch (id) {
		case CLIOPT_ERROR:
		case CLIOPT_HELP:
		case CLIOPT_VERSION:
			rc = cliopt_answer(id, usage, stdout);
			goto done;
		case CLIOPT_ARG: pos[npos++] = (char *)p.value; break;
		case OPT_DB: o.db = p.value; break;
		case OPT_JSON: o.json = true; break;
		case OPT_OUTPUT: output = p.value; break;
		case OPT_ROOT: o.root = p.value; break;
		case OPT_CLOSURE: o.closure = true; break;
		case OPT_ESSENTIAL: o.essential = true; break;
		case OPT_PROFILE: o.profile = p.value; break;
		}
	}
	if (npos == 0) {
		cliopt_usage(&p, "no command given");
		goto done;
	}
	const char *cmd = pos[0];
	int c = -1;
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (!strcmp(cmd, commands[i].name))
			c = (int)i;
	if (c < 0) {
		cliopt_usage(&p, "unknown command '%s'", cmd);
		goto done;
	}
	/* Options are accepted anywhere on the line; refuse the ones that do
	 * not belong to this command rather than ignore them. */
	const char *misplaced = NULL;
	if (o.root && strcmp(cmd, "import"))
		misplaced = "--root";
	else if (o.closure && strcmp(cmd, "deps"))
		misplaced = "--closure";
	else if (o.essential && (strcmp(cmd, "deps") || !o.closure))
		misplaced = "--essential";
	else if (o.profile && (strcmp(cmd, "deps") || !o.closure))
		misplaced = "--profile";
	if (o.profile && strcmp(o.profile, "host") && strcmp(o.profile, "chroot")) {
		cliopt_usage(&p, "--profile takes host or chroot, not '%s'", o.profile);
		goto done;
	}
	if (misplaced) {
		cliopt_usage(&p, "%s does not apply to '%s'%s", misplaced, cmd,
			     !strcmp(cmd, "deps") ? " without --closure" : "");
		goto done;
	}
	if (output) {
		char err[PATH_MAX + 256];
		if (outfile_check(AT_FDCWD, output, 0, err, sizeof err) < 0) {
			fprintf(stderr, CMD ": -o: %s\n", err);
			rc = CLIOPT_EXIT_USAGE;
			goto done;
		}
	}
	if (!o.db && cli_default_db(o.dbbuf, sizeof o.dbbuf, CMD, stderr) < 0) {
		rc = CLIOPT_EXIT_USAGE;
		goto done;
	}
	if (!o.db)
		o.db = o.dbbuf;
	o.args = pos + 1;
	o.nargs = npos - 1;
	rc = run_to_output(commands[c].run, &o, output);
done:
	free(pos);
	return rc;
}
