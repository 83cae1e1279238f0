/* The dpkg importer: ROOT/var/lib/dpkg/{status, info/PKG[:ARCH].list,
 * diversions} -> a new registry database. Only installed packages count. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "registry/builder.h"
#include "registry/canon.h"
#include "registry/deb822.h"
#include "registry/dirkinds.h"
#include "registry/fresh.h"
#include "registry/import.h"
#include "registry/internal.h"

struct dpkg_pkg {
	const char *name, *version, *arch, *multiarch, *depends, *predepends, *provides, *priority;
	bool essential;
	int line;
};

struct status_ctx {
	struct dpkg_pkg *v;
	size_t n, cap;
	long skipped;
	const char *file;
	char *err;
	size_t errlen;
};

static int status_stanza(const struct deb822_stanza *st, void *ctx)
{
	struct status_ctx *s = ctx;
	const char *name = deb822_get(st, "Package");
	const char *status = deb822_get(st, "Status");
	if (!name || !*name) {
		snprintf(s->err, s->errlen, "%s:%d: stanza has no Package field", s->file, st->line);
		return -1;
	}
	if (!status) {
		snprintf(s->err, s->errlen, "%s:%d: package '%s' has no Status field", s->file,
			 st->line, name);
		return -1;
	}
	char want[32], flag[32], state[32], extra[2];
	if (sscanf(status, "%31s %31s %31s %1s", want, flag, state, extra) != 3) {
		snprintf(s->err, s->errlen, "%s:%d: package '%s' has a malformed Status '%s'", s->file,
			 deb822_line(st, "Status"), name, status);
		return -1;
	}
	/* "hold" is a selection, not a state: a held package is installed. */
	if ((strcmp(want, "install") && strcmp(want, "hold")) || strcmp(flag, "ok") ||
	    strcmp(state, "installed")) {
		s->skipped++;
		return 0;
	}
	if (s->n == s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 1024;
		struct dpkg_pkg *v = realloc(s->v, ncap * sizeof *v);
		if (!v) {
			snprintf(s->err, s->errlen, "%s: out of memory", s->file);
			return -1;
		}
		s->v = v;
		s->cap = ncap;
	}
	const char *ess = deb822_get(st, "Essential");
	s->v[s->n++] = (struct dpkg_pkg){
		.name = name,
		.version = deb822_get(st, "Version"),
		.arch = deb822_get(st, "Architecture"),
		.multiarch = deb822_get(st, "Multi-Arch"),
		.depends = deb822_get(st, "Depends"),
		.predepends = deb822_get(st, "Pre-Depends"),
		.provides = deb822_get(st, "Provides"),
		.priority = deb822_get(st, "Priority"),
		.essential = ess && !strcmp(ess, "yes"),
		.line = st->line,
	};
	return 0;
}

/* ROOT/var/lib/dpkg/diversions: records of three lines (diverted path,
 * divert-to path, diverting package or ':' for a local diversion). */
static int read_diversions(const char *path, struct strmap *to, struct strmap *by, char *err,
			   size_t errlen)
{
	char *buf = deb822_slurp(path, NULL, err, errlen);
	if (!buf)
		return errno == ENOENT ? 0 : -1;
	char *lines[3];
	int n = 0, line = 0, rc = 0;
	for (char *p = buf, *eol, *next; *p; p = next) {
		eol = strchrnul(p, '\n');
		next = eol + (*eol != '\0');
		line++;
		*eol = '\0';
		if (!*p) {
			snprintf(err, errlen, "%s:%d: empty line inside a diversion record", path, line);
			rc = -1;
			break;
		}
		lines[n++] = p;
		if (n == 3) {
			if (lines[0][0] != '/' || lines[1][0] != '/') {
				snprintf(err, errlen, "%s:%d: diversion paths must be absolute", path,
					 line - 1);
				rc = -1;
				break;
			}
			if (!strmap_put(to, lines[0], lines[1]) || !strmap_put(by, lines[0], lines[2])) {
				snprintf(err, errlen, "%s: out of memory", path);
				rc = -1;
				break;
			}
			n = 0;
		}
	}
	if (!rc && n) {
		snprintf(err, errlen, "%s:%d: incomplete diversion record (expected 3 lines)", path, line);
		rc = -1;
	}
	free(buf);
	return rc;
}

struct dpkg_import {
	const struct registry_import_opts *opts;
	struct registry_import_result *res;
	struct builder b;
	struct canon canon;
	struct dirkinds kinds;
	struct strmap div_to, div_by;
	/* Directories the lists reach through a listed symlink (below). */
	struct builder_dir *linked;
	size_t nlinked, caplinked;
	char admin[PATH_MAX + 16];
};

/* A directory dpkg lists that is a symlink here, with entries below it
 * (merged /usr: libc6's /lib64 -> usr/lib64): the directory it leads to
 * plays its part, so it is the package's too, once no package lists it
 * (/usr/lib64 is nobody's otherwise, where /usr/bin is base-files'). */
static int note_linked_dir(struct dpkg_import *im, int64_t id, struct strmap *links,
			   const char *listed, const char *canonical)
{
	const char *slash = strrchr(listed, '/');
	const char *cslash = strrchr(canonical, '/');
	if (!slash || slash == listed || !cslash || cslash == canonical)
		return 0;
	char parent[PATH_MAX];
	snprintf(parent, sizeof parent, "%.*s", (int)(slash - listed), listed);
	const char *seen = strmap_get(links, parent);
	if (!seen || *seen)
		return 0;
	if (im->nlinked == im->caplinked) {
		size_t cap = im->caplinked ? 2 * im->caplinked : 64;
		struct builder_dir *v = realloc(im->linked, cap * sizeof *v);
		if (!v)
			return -1;
		im->linked = v;
		im->caplinked = cap;
	}
	struct builder_dir *d = &im->linked[im->nlinked];
	d->pkg = id;
	d->listed = strdup(parent);
	d->canonical = strndup(canonical, (size_t)(cslash - canonical));
	if (!d->listed || !d->canonical || !strmap_put(links, parent, "taken")) {
		free((char *)d->listed);
		free((char *)d->canonical);
		return -1;
	}
	im->nlinked++;
	return 0;
}

static char *open_list(struct dpkg_import *im, const struct dpkg_pkg *p, char *path, size_t len,
		       char *err, size_t errlen)
{
	if (p->arch && *p->arch) {
		snprintf(path, len, "%s/info/%s:%s.list", im->admin, p->name, p->arch);
		char *buf = deb822_slurp(path, NULL, err, errlen);
		if (buf || errno != ENOENT)
			return buf;
	}
	snprintf(path, len, "%s/info/%s.list", im->admin, p->name);
	return deb822_slurp(path, NULL, err, errlen);
}

static int import_list(struct dpkg_import *im, const struct dpkg_pkg *p, int64_t id, char *err,
		       size_t errlen)
{
	char path[PATH_MAX + 300];
	char *buf = open_list(im, p, path, sizeof path, err, errlen);
	if (!buf) {
		if (errno != ENOENT)
			return -1;
		char msg[PATH_MAX + 400];
		snprintf(msg, sizeof msg,
			 "%s: missing; package '%s' is installed, assuming it has no files (as dpkg does)",
			 path, p->name);
		if (im->opts->warn)
			im->opts->warn(im->opts->warn_ctx, msg);
		im->res->missing_lists++;
		return 0;
	}
	int line = 0, rc = 0;
	struct strmap links; /* listed symlinks of this package: "" or "taken" */
	strmap_init(&links);
	for (char *s = buf, *eol, *next; *s; s = next) {
		eol = strchrnul(s, '\n');
		next = eol + (*eol != '\0');
		line++;
		char *e = eol;
		while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
			e--;
		*e = '\0';
		if (!*s)
			continue;
		char listed[PATH_MAX], canonical[PATH_MAX];
		if (s[0] != '/' || canon_lexical(s, listed, sizeof listed)) {
			snprintf(err, errlen, "%s:%d: not an absolute path: '%.80s'", path, line, s);
			rc = -1;
			break;
		}
		const char *real = listed;
		bool diverted = false;
		const char *by = strmap_get(&im->div_by, listed);
		if (by && (!strcmp(by, ":") || strcmp(by, p->name))) {
			real = strmap_get(&im->div_to, listed);
			diverted = true;
		}
		if (canon_path(&im->canon, real, canonical, sizeof canonical)) {
			snprintf(err, errlen, "%s:%d: cannot canonicalise '%s': %s", path, line, real,
				 strerror(errno));
			rc = -1;
			break;
		}
		int kind = dirkinds_kind(&im->kinds, canonical);
		if (kind < 0) {
			snprintf(err, errlen, "%s: out of memory", path);
			rc = -1;
			break;
		}
		if (builder_add_file(&im->b, id, listed, canonical, kind, diverted, err, errlen)) {
			rc = -1;
			break;
		}
		if (!diverted && (note_linked_dir(im, id, &links, listed, canonical) ||
				  (kind == REGISTRY_KIND_SYMLINK && !strmap_get(&links, listed) &&
				   !strmap_put(&links, listed, "")))) {
			snprintf(err, errlen, "%s: out of memory", path);
			rc = -1;
			break;
		}
		im->res->files++;
		im->res->diverted += diverted;
	}
	strmap_free(&links);
	free(buf);
	return rc;
}

static int import_packages(struct dpkg_import *im, struct status_ctx *s, char *err, size_t errlen)
{
	for (size_t i = 0; i < s->n; i++) {
		const struct dpkg_pkg *p = &s->v[i];
		struct builder_package bp = {
			.name = p->name, .version = p->version, .arch = p->arch,
			.multiarch = p->multiarch, .origin = "dpkg", .essential = p->essential,
			.priority = p->priority,
		};
		int64_t id = builder_add_package(&im->b, &bp, err, errlen);
		if (id < 0)
			return -1;
		if (id == 0) {
			snprintf(err, errlen, "%s:%d: package '%s:%s' appears twice", s->file, p->line,
				 p->name, p->arch ? p->arch : "");
			return -1;
		}
		struct {
			const char *field, *value;
			int type;
		} rels[] = {
			{ "Depends", p->depends, REGISTRY_DEP_DEPENDS },
			{ "Pre-Depends", p->predepends, REGISTRY_DEP_PRE_DEPENDS },
			{ "Provides", p->provides, -1 },
		};
		for (size_t r = 0; r < 3; r++) {
			char cause[256];
			if (builder_add_relations(&im->b, id, rels[r].type, rels[r].value, cause,
						  sizeof cause)) {
				snprintf(err, errlen, "%s:%d: package '%s': bad %s field: %s", s->file,
					 p->line, p->name, rels[r].field, cause);
				return -1;
			}
		}
		if (import_list(im, p, id, err, errlen))
			return -1;
		im->res->packages++;
	}
	return 0;
}

int registry_import_dpkg(const char *dbpath, const struct registry_import_opts *opts,
			 struct registry_import_result *res, char *err, size_t errlen)
{
	struct dpkg_import im = { .opts = opts, .res = res };
	memset(res, 0, sizeof *res);
	const char *root = opts->root && *opts->root ? opts->root : "/";
	if (canon_init(&im.canon, root)) {
		snprintf(err, errlen, "%s: %s", root, strerror(errno));
		return -1;
	}
	if (snprintf(im.admin, sizeof im.admin, "%s/var/lib/dpkg", im.canon.root) >=
	    (int)sizeof im.admin) {
		snprintf(err, errlen, "%s: path too long", root);
		canon_free(&im.canon);
		return -1;
	}
	dirkinds_init(&im.kinds, im.canon.root);
	strmap_init(&im.div_to);
	strmap_init(&im.div_by);
	char status_path[PATH_MAX + 32], div_path[PATH_MAX + 32];
	snprintf(status_path, sizeof status_path, "%s/status", im.admin);
	snprintf(div_path, sizeof div_path, "%s/diversions", im.admin);
	struct status_ctx s = { .file = status_path, .err = err, .errlen = errlen };
	int rc = -1;
	char *status = NULL;
	/* Taken before reading: a change during the import makes the next
	 * freshness check (registry/fresh.h) re-import. */
	char state[128];
	if (registry_dpkg_state(root, state, sizeof state) < 0) {
		snprintf(err, errlen, "%s: %s", status_path, strerror(errno));
		goto out;
	}
	status = deb822_slurp(status_path, NULL, err, errlen);
	if (!status)
		goto out;
	if (deb822_parse(status, status_path, 0, status_stanza, &s, err, errlen) ||
	    read_diversions(div_path, &im.div_to, &im.div_by, err, errlen))
		goto out;
	if (builder_begin(&im.b, dbpath, err, errlen))
		goto out;
	char when[64], abs_root[PATH_MAX]; /* absolute: fresh.c compares it later, from anywhere */
	char rules[16];
	snprintf(rules, sizeof rules, "%d", REGISTRY_DPKG_RULES);
	time_t now = time(NULL);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	if (builder_replace_origin(&im.b, "dpkg", err, errlen) ||
	    import_packages(&im, &s, err, errlen) ||
	    builder_add_unowned_dirs(&im.b, im.linked, im.nlinked, err, errlen) ||
	    builder_set_meta(&im.b, "dpkg_root", realpath(root, abs_root) ? abs_root : root, err, errlen) ||
	    builder_set_meta(&im.b, "dpkg_imported_at", when, err, errlen) ||
	    builder_set_meta(&im.b, "dpkg_state", state, err, errlen) ||
	    builder_set_meta(&im.b, "dpkg_import_rules", rules, err, errlen) ||
	    builder_commit(&im.b, err, errlen)) {
		builder_abort(&im.b);
		goto out;
	}
	res->kept = im.b.kept;
	res->skipped = s.skipped;
	rc = 0;
out:
	free(status);
	free(s.v);
	for (size_t i = 0; i < im.nlinked; i++) {
		free((char *)im.linked[i].listed);
		free((char *)im.linked[i].canonical);
	}
	free(im.linked);
	strmap_free(&im.div_to);
	strmap_free(&im.div_by);
	dirkinds_free(&im.kinds);
	canon_free(&im.canon);
	return rc;
}
