/* kiln registry: import and query the package registry. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/commands.h"
#include "registry/canon.h"
#include "registry/import.h"
#include "registry/query.h"
#include "registry/registry.h"

#define MAX_OWNERS 4096

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

static void usage(FILE *out)
{
	fprintf(out,
		"usage: kiln registry [--db FILE] [--json] COMMAND [ARGS...]\n"
		"\n"
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
		"  stats                           what the registry holds\n"
		"\n"
		"--db FILE   the registry database (default: $KILN_DB, else\n"
		"            $XDG_CACHE_HOME/kiln/registry.db or ~/.cache/kiln/registry.db)\n"
		"--json      machine-readable output\n");
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c == '\n')
			fputs("\\n", stdout);
		else if (c == '\t')
			fputs("\\t", stdout);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
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
		fprintf(stderr, "kiln registry import: say what to import: 'dpkg' or 'manifest FILE...'\n");
		return 2;
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
			fprintf(stderr, "kiln registry import dpkg: unexpected argument '%s'\n", o->args[1]);
			return 2;
		}
		rc = registry_import_dpkg(o->db, &io, &res, err, sizeof err);
	} else if (!strcmp(what, "manifest")) {
		if (o->nargs < 2) {
			fprintf(stderr, "kiln registry import manifest: name at least one FILE\n");
			return 2;
		}
		rc = registry_import_manifests(o->db, (const char *const *)o->args + 1,
					       (size_t)o->nargs - 1, &io, &res, err, sizeof err);
	} else {
		fprintf(stderr, "kiln registry import: unknown source '%s' (dpkg or manifest)\n", what);
		return 2;
	}
	if (rc) {
		fprintf(stderr, "kiln registry: import failed, %s left unchanged: %s\n", o->db, err);
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (o->json) {
		printf("{\"db\": ");
		json_str(o->db);
		printf(", \"packages\": %ld, \"files\": %ld, \"diverted\": %ld, \"skipped\": %ld, "
		       "\"missing_lists\": %ld, \"kept\": %ld, \"seconds\": %.3f}\n",
		       res.packages, res.files, res.diverted, res.skipped, res.missing_lists, res.kept,
		       secs);
	} else {
		printf("imported %ld packages, %ld files (%ld diverted) into %s in %.2f s\n",
		       res.packages, res.files, res.diverted, o->db, secs);
		if (res.skipped)
			printf("skipped %ld packages that are not installed\n", res.skipped);
		if (res.kept)
			printf("kept %ld packages of other origins\n", res.kept);
		if (res.missing_lists)
			printf("%ld installed packages had no file list\n", res.missing_lists);
	}
	return 0;
}

/* ---- owner ------------------------------------------------------------- */

static int cmd_owner(struct opts *o)
{
	if (o->nargs < 1) {
		fprintf(stderr, "kiln registry owner: name at least one PATH\n");
		return 2;
	}
	struct kiln_registry *reg = open_ro(o);
	if (!reg)
		return 1;
	struct canon canon;
	canon_init(&canon, "/");
	static int64_t ids[MAX_OWNERS];
	int status = 0;
	if (o->json)
		printf("[");
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
			printf("%s\n {\"path\": ", i ? "," : "");
			json_str(o->args[i]);
			printf(", \"canonical\": ");
			json_str(path);
			printf(", \"owners\": [");
			for (int j = 0; j < n; j++) {
				char name[256];
				printf("%s", j ? ", " : "");
				json_str(registry_package_name(reg, ids[j], name, sizeof name));
			}
			printf("]}");
		} else if (n) {
			for (int j = 0; j < n; j++) {
				char name[256];
				printf("%s%s", j ? ", " : "",
				       registry_package_name(reg, ids[j], name, sizeof name));
			}
			if (strcmp(path, o->args[i]))
				printf(": %s -> %s\n", o->args[i], path);
			else
				printf(": %s\n", path);
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
		printf("\n]\n");
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
		fprintf(stderr, "kiln registry %s: name one PKG\n", cmd);
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
		printf("%s\n {\"listed\": ", f->count ? "," : "");
		json_str(listed);
		printf(", \"canonical\": ");
		json_str(canonical);
		printf(", \"kind\": \"%s\", \"diverted\": %s}", kind_name(kind), diverted ? "true" : "false");
	} else if (diverted) {
		printf("%s  (diverted to %s)\n", listed, canonical);
	} else if (strcmp(listed, canonical)) {
		printf("%s  (canonical %s)\n", listed, canonical);
	} else {
		printf("%s\n", listed);
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
		printf("[");
	for (int i = 0; i < n; i++)
		if (registry_each_file(reg, ids[i], print_file, &f) < 0)
			return db_fail(reg);
	if (o->json)
		printf("\n]\n");
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
		printf("%s\n {\"field\": \"%s\", \"clause\": %d, \"alt\": %d, \"name\": ",
		       c->count ? "," : "", field[d->type & 1], d->clause, d->alt);
		json_str(d->name);
		printf(", \"arch\": ");
		json_str(d->archq);
		printf(", \"version\": ");
		json_str(d->version);
		printf(", \"satisfied_by\": [");
		for (int i = 0; i < n; i++) {
			char name[256];
			printf("%s", i ? ", " : "");
			json_str(registry_package_name(c->reg, ids[i], name, sizeof name));
		}
		printf("]}");
	} else {
		if (d->type != c->type || d->clause != c->clause) {
			if (c->count)
				printf("\n");
			printf("%s: ", field[d->type & 1]);
		} else {
			printf(" | ");
		}
		printf("%s%s%s", d->name, *d->archq ? ":" : "", d->archq);
		if (*d->version)
			printf(" (%s)", d->version);
		/* Name what satisfies the atom unless it is the package of that name. */
		char first[256];
		if (n == 0)
			printf(" [not installed]");
		else if (n > 1 || strcmp(d->name, registry_package_name(c->reg, ids[0], first,
									sizeof first))) {
			for (int i = 0; i < n; i++) {
				char name[256];
				printf("%s%s", i ? ", " : " [",
				       registry_package_name(c->reg, ids[i], name, sizeof name));
			}
			printf("]");
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
		printf("{\"package\": ");
		json_str(pkg);
		printf(", \"%s\": [", key);
	}
	for (size_t i = 0; i < set->n; i++) {
		if (i && !strcmp(names[i], names[i - 1]))
			continue; /* one name, several architectures */
		if (json) {
			printf("%s", i ? ", " : "");
			json_str(names[i]);
		} else {
			printf("%s\n", names[i]);
		}
	}
	if (json)
		printf("]}\n");
	free(names);
	return 0;
}

/* deps PKG --closure: PKG may be virtual (its providers' closure), exactly
 * as for `kiln trace --deps PKG`, so a trace's closure can be recomputed. */
static int cmd_closure(struct opts *o)
{
	if (o->nargs != 1) {
		fprintf(stderr, "kiln registry deps: name one PKG\n");
		return 2;
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
		if (o->json)
			printf("{\"package\": \"%s\", \"depends\": [", o->args[0]);
		for (int i = 0; i < n; i++)
			if (registry_each_dep(reg, ids[i], print_dep, &c) < 0)
				return db_fail(reg);
		if (o->json)
			printf("\n]}\n");
		else if (c.count)
			printf("\n");
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
	registry_pkgset_free(&all);
	registry_close(reg);
	return rc;
}

static int cmd_stats(struct opts *o)
{
	if (o->nargs) {
		fprintf(stderr, "kiln registry stats: unexpected argument '%s'\n", o->args[0]);
		return 2;
	}
	struct kiln_registry *reg = open_ro(o);
	if (!reg)
		return 1;
	struct registry_stats s;
	if (registry_get_stats(reg, &s))
		return db_fail(reg);
	if (o->json) {
		printf("{\"db\": ");
		json_str(o->db);
		printf(", \"schema_version\": %d, \"packages\": %lld, \"essential\": %lld, "
		       "\"required\": %lld, \"file_rows\": %lld, \"paths\": %lld, \"diverted\": %lld, \"deps\": %lld, "
		       "\"provides\": %lld, \"dpkg_root\": ",
		       s.schema_version, (long long)s.packages, (long long)s.essential,
		       (long long)s.required, (long long)s.file_rows, (long long)s.paths, (long long)s.diverted,
		       (long long)s.deps, (long long)s.provides);
		json_str(s.dpkg_root);
		printf(", \"dpkg_imported_at\": ");
		json_str(s.dpkg_imported_at);
		printf(", \"manifest_imported_at\": ");
		json_str(s.manifest_imported_at);
		printf("}\n");
	} else {
		printf("database:       %s (schema %d)\n", o->db, s.schema_version);
		printf("packages:       %lld (%lld essential, %lld Priority: required)\n",
		       (long long)s.packages, (long long)s.essential, (long long)s.required);
		printf("file entries:   %lld (%lld distinct paths, %lld diverted)\n",
		       (long long)s.file_rows, (long long)s.paths, (long long)s.diverted);
		printf("dependencies:   %lld atoms, %lld provides\n", (long long)s.deps,
		       (long long)s.provides);
		if (*s.dpkg_root)
			printf("dpkg import:    root %s at %s\n", s.dpkg_root, s.dpkg_imported_at);
		if (*s.manifest_imported_at)
			printf("manifest import: at %s\n", s.manifest_imported_at);
	}
	registry_close(reg);
	return 0;
}

int cmd_registry(int argc, char **argv)
{
	struct opts o = { 0 };
	char **pos = calloc((size_t)argc + 1, sizeof *pos);
	if (!pos)
		return 1;
	int npos = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			free(pos);
			return 0;
		} else if (!strcmp(a, "--json")) {
			o.json = true;
		} else if (!strcmp(a, "--closure")) {
			o.closure = true;
		} else if (!strcmp(a, "--essential")) {
			o.essential = true;
		} else if (!strcmp(a, "--db") || !strcmp(a, "--root") || !strcmp(a, "--profile")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "kiln registry: %s needs an argument\n", a);
				free(pos);
				return 2;
			}
			*(!strcmp(a, "--db") ? &o.db : !strcmp(a, "--root") ? &o.root : &o.profile) =
				argv[++i];
		} else if (!strncmp(a, "--profile=", 10)) {
			o.profile = a + 10;
		} else if (!strncmp(a, "--db=", 5)) {
			o.db = a + 5;
		} else if (!strncmp(a, "--root=", 7)) {
			o.root = a + 7;
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "kiln registry: unknown option '%s'\n", a);
			usage(stderr);
			free(pos);
			return 2;
		} else {
			pos[npos++] = argv[i];
		}
	}
	if (npos == 0) {
		usage(stderr);
		free(pos);
		return 2;
	}
	if (!o.db)
		o.db = registry_default_path(o.dbbuf, sizeof o.dbbuf);
	const char *cmd = pos[0];
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
		fprintf(stderr, "kiln registry: --profile takes host or chroot, not '%s'\n", o.profile);
		free(pos);
		return 2;
	}
	if (misplaced) {
		fprintf(stderr, "kiln registry: %s does not apply to '%s'%s\n", misplaced, cmd,
			!strcmp(cmd, "deps") ? " without --closure" : "");
		free(pos);
		return 2;
	}
	o.args = pos + 1;
	o.nargs = npos - 1;
	static const struct {
		const char *name;
		int (*run)(struct opts *o);
	} cmds[] = {
		{ "import", cmd_import }, { "owner", cmd_owner }, { "files", cmd_files },
		{ "deps", cmd_deps },     { "rdeps", cmd_rdeps }, { "stats", cmd_stats },
	};
	int rc = -1;
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
		if (!strcmp(cmd, cmds[i].name))
			rc = cmds[i].run(&o);
	if (rc == -1) {
		fprintf(stderr, "kiln registry: unknown command '%s'\n", cmd);
		usage(stderr);
		rc = 2;
	}
	free(pos);
	return rc;
}
