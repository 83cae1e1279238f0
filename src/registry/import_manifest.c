/* The manifest importer: kiln's own package description format (deb822
 * stanzas with a Files field; docs/registry.md), for package managers other
 * than dpkg and for tests. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "registry/builder.h"
#include "registry/canon.h"
#include "registry/deb822.h"
#include "registry/import.h"
#include "registry/internal.h"

static const char *const known_fields[] = {
	"Package", "Version", "Architecture", "Multi-Arch", "Essential", "Depends",
	"Pre-Depends", "Provides", "Files", "Description", "Priority",
};

struct manifest_ctx {
	struct builder *b;
	struct canon *canon;
	struct registry_import_result *res;
	const char *file;
	const char *origin;
	char *err;
	size_t errlen;
};

static int add_files(struct manifest_ctx *m, int64_t id, const struct deb822_stanza *st)
{
	const char *value = deb822_get(st, "Files");
	if (!value)
		return 0;
	int line = deb822_line(st, "Files");
	for (const char *p = value; *p; line++) {
		const char *eol = strchrnul(p, '\n');
		char entry[PATH_MAX];
		while (p < eol && (*p == ' ' || *p == '\t'))
			p++;
		size_t n = (size_t)(eol - p);
		while (n && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r'))
			n--;
		if (n >= sizeof entry) {
			snprintf(m->err, m->errlen, "%s:%d: path too long", m->file, line);
			return -1;
		}
		memcpy(entry, p, n);
		entry[n] = '\0';
		p = *eol ? eol + 1 : eol;
		if (!n)
			continue;
		int kind = REGISTRY_KIND_FILE;
		char *arrow = strstr(entry, " -> ");
		if (arrow) {
			*arrow = '\0';
			kind = REGISTRY_KIND_SYMLINK;
		} else if (n > 1 && entry[n - 1] == '/') {
			kind = REGISTRY_KIND_DIR;
		}
		char listed[PATH_MAX], canonical[PATH_MAX];
		if (entry[0] != '/' || canon_lexical(entry, listed, sizeof listed)) {
			snprintf(m->err, m->errlen, "%s:%d: package '%s': not an absolute path: '%s'",
				 m->file, line, deb822_get(st, "Package"), entry);
			return -1;
		}
		if (canon_path(m->canon, listed, canonical, sizeof canonical)) {
			snprintf(m->err, m->errlen, "%s:%d: cannot canonicalise '%s': %s", m->file, line,
				 listed, strerror(errno));
			return -1;
		}
		if (builder_add_file(m->b, id, listed, canonical, kind, false, m->err, m->errlen))
			return -1;
		m->res->files++;
	}
	return 0;
}

static int manifest_stanza(const struct deb822_stanza *st, void *ctx)
{
	struct manifest_ctx *m = ctx;
	for (int i = 0; i < st->nfields; i++) {
		size_t k = 0;
		while (k < sizeof known_fields / sizeof known_fields[0] &&
		       strcasecmp(known_fields[k], st->fields[i].name))
			k++;
		if (k == sizeof known_fields / sizeof known_fields[0]) {
			snprintf(m->err, m->errlen, "%s:%d: unknown field '%s'", m->file,
				 st->fields[i].line, st->fields[i].name);
			return -1;
		}
	}
	const char *name = deb822_get(st, "Package");
	if (!name || !*name) {
		snprintf(m->err, m->errlen, "%s:%d: stanza has no Package field", m->file, st->line);
		return -1;
	}
	const char *ess = deb822_get(st, "Essential");
	if (ess && strcmp(ess, "yes") && strcmp(ess, "no")) {
		snprintf(m->err, m->errlen, "%s:%d: Essential must be 'yes' or 'no', not '%s'", m->file,
			 deb822_line(st, "Essential"), ess);
		return -1;
	}
	struct builder_package bp = {
		.name = name,
		.version = deb822_get(st, "Version"),
		.arch = deb822_get(st, "Architecture"),
		.multiarch = deb822_get(st, "Multi-Arch"),
		.origin = m->origin,
		.priority = deb822_get(st, "Priority"),
		.essential = ess && !strcmp(ess, "yes"),
	};
	int64_t id = builder_add_package(m->b, &bp, m->err, m->errlen);
	if (id < 0)
		return -1;
	if (id == 0) {
		snprintf(m->err, m->errlen, "%s:%d: package '%s' (arch '%s') is imported twice", m->file,
			 st->line, name, bp.arch ? bp.arch : "");
		return -1;
	}
	static const struct {
		const char *field;
		int type;
	} rels[] = {
		{ "Depends", REGISTRY_DEP_DEPENDS },
		{ "Pre-Depends", REGISTRY_DEP_PRE_DEPENDS },
		{ "Provides", -1 },
	};
	for (size_t r = 0; r < 3; r++) {
		char cause[256];
		if (builder_add_relations(m->b, id, rels[r].type, deb822_get(st, rels[r].field), cause,
					  sizeof cause)) {
			snprintf(m->err, m->errlen, "%s:%d: package '%s': bad %s field: %s", m->file,
				 deb822_line(st, rels[r].field), name, rels[r].field, cause);
			return -1;
		}
	}
	if (add_files(m, id, st))
		return -1;
	m->res->packages++;
	return 0;
}

int registry_import_manifests(const char *dbpath, const char *const *files, size_t nfiles,
			      const struct registry_import_opts *opts,
			      struct registry_import_result *res, char *err, size_t errlen)
{
	memset(res, 0, sizeof *res);
	struct canon canon;
	const char *root = opts->root && *opts->root ? opts->root : "/";
	if (canon_init(&canon, root)) {
		snprintf(err, errlen, "%s: %s", root, strerror(errno));
		return -1;
	}
	struct builder b;
	if (builder_begin(&b, dbpath, err, errlen)) {
		canon_free(&canon);
		return -1;
	}
	int rc = -1;
	for (size_t i = 0; i < nfiles; i++) {
		char abs[PATH_MAX], origin[PATH_MAX + 16];
		if (!realpath(files[i], abs)) {
			snprintf(err, errlen, "%s: %s", files[i], strerror(errno));
			goto out;
		}
		snprintf(origin, sizeof origin, "manifest:%s", abs);
		char *buf = deb822_slurp(files[i], NULL, err, errlen);
		if (!buf)
			goto out;
		struct manifest_ctx m = { &b, &canon, res, files[i], origin, err, errlen };
		int prc = builder_replace_origin(&b, origin, err, errlen);
		long before = res->packages;
		if (!prc)
			prc = deb822_parse(buf, files[i], 1, manifest_stanza, &m, err, errlen);
		free(buf);
		if (prc)
			goto out;
		if (res->packages == before) {
			snprintf(err, errlen, "%s: no package stanza in this manifest", files[i]);
			goto out;
		}
	}
	char when[64];
	time_t now = time(NULL);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	if (builder_set_meta(&b, "manifest_imported_at", when, err, errlen) ||
	    builder_commit(&b, err, errlen))
		goto out;
	res->kept = b.kept;
	rc = 0;
out:
	builder_abort(&b);
	canon_free(&canon);
	return rc;
}
