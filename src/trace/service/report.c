/* The report of a trace run: text (for people), JSON (for programs) and the
 * access log (every path with its access classes). */
#include "trace/service/tracelog.h"
#include "util/utf8.h"

#include "common/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TEXT_LINES 10 /* per section (per package for hidden files) */

struct item {
	const char *key;
	const struct trace_finding *f;
};

static int by_pkg_then_path(const void *a, const void *b)
{
	const struct item *x = a, *y = b;
	int c = strcmp(x->f->pkg, y->f->pkg);
	if (!c)
		c = x->f->reason - y->f->reason;
	return c ? c : strcmp(x->key, y->key);
}

/* The findings of a table, sorted by package then path; caller frees. */
static struct item *sorted(const struct pathtab *tab)
{
	struct item *v = calloc(tab->n + 1, sizeof *v);
	if (!v)
		return NULL;
	size_t n = 0;
	for (size_t i = 0; i < tab->cap; i++)
		if (tab->slots[i].key)
			v[n++] = (struct item){ tab->slots[i].key, tab->slots[i].val };
	qsort(v, n, sizeof *v, by_pkg_then_path);
	return v;
}

/* A file name or argument in the text report or the access log, one line
 * whatever it holds (docs/trace-report.md): a backslash doubled, \n \t \r
 * for those characters, \xNN for every other control character (C0, DEL,
 * C1) and every byte that is not well-formed UTF-8; the rest as is. */
static void put_text(FILE *out, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	for (size_t i = 0; i < n;) {
		uint32_t cp = 0;
		size_t k = utf8_len(p + i, n - i, &cp);
		if (p[i] == '\\') {
			fputs("\\\\", out);
		} else if (p[i] == '\n' || p[i] == '\t' || p[i] == '\r') {
			fputc('\\', out);
			fputc(p[i] == '\n' ? 'n' : p[i] == '\t' ? 't' : 'r', out);
		} else if (k && cp >= 0x20 && cp != 0x7f && !(cp >= 0x80 && cp < 0xa0)) {
			fwrite(p + i, 1, k, out);
			i += k;
			continue;
		} else {
			/* One escape per byte, so a C1 character's two bytes both show. */
			for (size_t j = 0; j < (k ? k : 1); j++)
				fprintf(out, "\\x%02x", p[i + j]);
			i += k ? k : 1;
			continue;
		}
		i++;
	}
}

static void put_text_cstr(FILE *out, const char *s)
{
	put_text(out, s, strlen(s));
}

static void print_cmdline(FILE *out, const struct trace_client *c)
{
	size_t len = c->len < 120 ? c->len : 120;
	for (size_t i = 0; i < len;) {
		size_t n = strnlen(c->cmdline + i, len - i);
		if (i)
			fputc(' ', out);
		put_text(out, c->cmdline + i, n);
		i += n + 1;
	}
	if (len < c->len)
		fputs("...", out);
}

static void print_who(FILE *out, const struct tracelog *t, int client)
{
	if (client < 0 || (size_t)client >= t->nclients) {
		fputs("(unknown process)", out);
		return;
	}
	const struct trace_client *c = &t->clients[client];
	fprintf(out, "pid %ld: ", (long)c->pid);
	print_cmdline(out, c);
}

static void print_finding(FILE *out, const struct tracelog *t, const struct item *it)
{
	char acc[8];
	tracelog_access_letters(it->f->access, acc);
	fputs("    ", out);
	put_text_cstr(out, it->key);
	fprintf(out, "  [%s]", acc);
	if (strcmp(it->f->via, it->key)) {
		fputs(" via ", out);
		put_text_cstr(out, it->f->via);
	}
	fputs("\n      first reached by ", out);
	print_who(out, t, it->f->client);
	fputc('\n', out);
}

static const char *group_name(const struct trace_finding *f)
{
	switch (f->reason) {
	case SBX_HIDDEN_PKG:
		return f->pkg;
	case SBX_HIDDEN_RULE:
		return "(deny rules)";
	case SBX_HIDDEN_UNOWNED:
		return "(no package of the closure owns them: 'owned' rules)";
	default:
		return "(unknown to the registry, policy 'unknown hide')";
	}
}

/* Files glibc loads for itself that no hook can hide (docs/glibc-data.md):
 * kept apart from the hidden ones, which the build did not get. */
static void write_unhidden(FILE *out, const struct tracelog *t)
{
	if (!t->unhidden.n)
		return;
	struct item *v = sorted(&t->unhidden);
	if (!v)
		return;
	fprintf(out, "  loaded by glibc for itself, not hidden (kiln cannot keep them from it): %zu\n",
		t->unhidden.n);
	for (size_t i = 0; i < t->unhidden.n && i < TEXT_LINES; i++) {
		fputs("    ", out);
		put_text_cstr(out, v[i].key);
		fputs(" (", out);
		put_text_cstr(out, v[i].f->pkg);
		fputs("): ", out);
		put_text_cstr(out, v[i].f->via);
		fputs("\n      first for ", out);
		if (v[i].f->client < 0)
			fputs("the build's environment", out);
		else
			print_who(out, t, v[i].f->client);
		fputc('\n', out);
	}
	if (t->unhidden.n > TEXT_LINES)
		fprintf(out, "    ... and %zu more\n", t->unhidden.n - TEXT_LINES);
	free(v);
}

void tracelog_write_text(const struct tracelog *t, FILE *out)
{
	struct item *hid = sorted(&t->hidden), *ref = sorted(&t->refused), *unk = sorted(&t->unknown),
		    *prb = sorted(&t->probes);
	if (!hid || !ref || !unk || !prb) {
		fprintf(out, "kiln trace: out of memory writing the report\n");
		goto done;
	}
	size_t npkgs = 0;
	for (size_t i = 0; i < t->hidden.n; i++)
		if (hid[i].f->reason == SBX_HIDDEN_PKG &&
		    (i == 0 || strcmp(hid[i].f->pkg, hid[i - 1].f->pkg) || hid[i - 1].f->reason != SBX_HIDDEN_PKG))
			npkgs++;

	fprintf(out, "\nkiln trace report%s\n",
		t->report_only ? " (report only: nothing was hidden or refused)" : "");
	fputs("  declared:", out);
	for (size_t i = 0; i < t->ndeclared; i++) {
		fputs(i ? ", " : " ", out);
		put_text_cstr(out, t->declared[i]);
	}
	fprintf(out, "%s (closure with the Essential packages: %zu packages)\n",
		t->ndeclared ? "" : " nothing", t->closure_size);
	fprintf(out, "  %s: %zu path%s, from %zu package%s outside the dependency closure\n",
		t->report_only ? "would be hidden" : "hidden",
		t->hidden.n, t->hidden.n == 1 ? "" : "s", npkgs, npkgs == 1 ? "" : "s");
	for (size_t i = 0, shown = 0; i < t->hidden.n; i++) {
		bool new_group = i == 0 || strcmp(group_name(hid[i].f), group_name(hid[i - 1].f));
		if (new_group) {
			size_t k = i;
			while (k < t->hidden.n && !strcmp(group_name(hid[k].f), group_name(hid[i].f)))
				k++;
			fputs("  ", out);
			put_text_cstr(out, group_name(hid[i].f));
			fprintf(out, " (%zu)\n", k - i);
			shown = 0;
		}
		if (shown++ < TEXT_LINES) {
			print_finding(out, t, &hid[i]);
		} else if (i + 1 == t->hidden.n || strcmp(group_name(hid[i + 1].f), group_name(hid[i].f))) {
			fprintf(out, "    ... and %zu more\n", shown - TEXT_LINES);
		}
	}
	fprintf(out, "  %s: %zu\n", t->report_only ? "writes that would be refused" : "refused writes",
		t->refused.n);
	for (size_t i = 0; i < t->refused.n && i < TEXT_LINES; i++)
		print_finding(out, t, &ref[i]);
	if (t->refused.n > TEXT_LINES)
		fprintf(out, "    ... and %zu more\n", t->refused.n - TEXT_LINES);
	if (t->probes.n)
		fprintf(out, "  write probes (access W_OK outside the writable areas; answered EACCES, as "
			     "for a build user who is not root; nothing written): %zu\n", t->probes.n);
	for (size_t i = 0; i < t->probes.n && i < TEXT_LINES; i++)
		print_finding(out, t, &prb[i]);
	if (t->probes.n > TEXT_LINES)
		fprintf(out, "    ... and %zu more\n", t->probes.n - TEXT_LINES);
	write_unhidden(out, t);
	fprintf(out, "  unknown files (in registry-managed trees, not in the registry; allowed): %zu\n",
		t->unknown.n);
	for (size_t i = 0; i < t->unknown.n && i < TEXT_LINES; i++)
		print_finding(out, t, &unk[i]);
	if (t->unknown.n > TEXT_LINES)
		fprintf(out, "    ... and %zu more\n", t->unknown.n - TEXT_LINES);
	size_t nsetuid = 0, nstatic = 0;
	for (size_t i = 0; i < t->nevents; i++)
		t->events[i].kind == KILN_E_SETUID_EXEC ? nsetuid++ : nstatic++;
	fprintf(out, "  exec events: %zu set-uid/set-gid (preload dropped), %zu static (hooks bypassed)\n",
		nsetuid, nstatic);
	for (size_t i = 0; i < t->nevents && i < TEXT_LINES; i++) {
		fprintf(out, "    %s ", t->events[i].kind == KILN_E_SETUID_EXEC ? "set-uid" : "static");
		put_text_cstr(out, t->events[i].path);
		fputs("\n      by ", out);
		print_who(out, t, t->events[i].client);
		fputc('\n', out);
	}
	if (t->nevents > TEXT_LINES)
		fprintf(out, "    ... and %zu more\n", t->nevents - TEXT_LINES);
	fprintf(out, "  totals: %lu queries (%lu directory listings, %lu entries hidden), %zu paths, "
		"%zu processes (%zu connections); %zu hidden, %zu refused, %zu unknown, %zu exec events",
		t->queries, t->dir_queries, t->entries_hidden, t->paths.n, tracelog_processes(t), t->nclients,
		t->hidden.n, t->refused.n, t->unknown.n, t->nevents);
	if (t->failures)
		fprintf(out, "; %lu undecidable (refused)", t->failures);
	fprintf(out, "; server CPU %.2f s\n", t->server_cpu);
done:
	free(hid);
	free(ref);
	free(unk);
	free(prb);
}

void tracelog_write_stats(const struct tracelog *t, FILE *out)
{
	const struct trace_cache_figures *c = &t->cache;
	uint64_t asked = c->hits + c->misses;
	fprintf(out, "kiln trace: verdict cache %s\n", c->enabled ? "on" : "off (--no-cache or --report-only)");
	fprintf(out, "  hits         %" PRIu64 " (%.1f%% of %" PRIu64 " questions)\n", c->hits,
		asked ? 100.0 * (double)c->hits / (double)asked : 0.0, asked);
	fprintf(out, "  misses       %" PRIu64 "\n", c->misses);
	fprintf(out, "  round trips  %lu (%lu path queries, %lu listings)\n", t->queries + t->dir_queries,
		t->queries, t->dir_queries);
	fprintf(out, "  listings     %" PRIu64 " answered from the cache\n", c->listings);
	fprintf(out, "  map          %" PRIu64 " bytes, %" PRIu64 " entries\n", c->map_bytes, c->entries);
	fprintf(out, "  processes    %zu\n", tracelog_processes(t));
}

/* ---- JSON ------------------------------------------------------------- */

/* A JSON string of n bytes. Well-formed UTF-8 is kept; each byte that is not
 * becomes the lone surrogate \\udcNN (Python's "surrogateescape", PEP 383),
 * so the document is always UTF-8 and the exact bytes can be had back
 * (docs/trace-report.md). */
static void json_str(FILE *f, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	fputc('"', f);
	for (size_t i = 0; i < n;) {
		size_t k = utf8_len(p + i, n - i, NULL);
		if (p[i] == '"' || p[i] == '\\')
			fprintf(f, "\\%c", p[i]);
		else if (!k)
			fprintf(f, "\\udc%02x", p[i]);
		else if (p[i] < 0x20 || p[i] == 0x7f)
			fprintf(f, "\\u%04x", p[i]);
		else {
			fwrite(p + i, 1, k, f);
			i += k;
			continue;
		}
		i++;
	}
	fputc('"', f);
}

static void json_cstr(FILE *f, const char *s)
{
	json_str(f, s, strlen(s));
}

static void json_access(FILE *f, unsigned access)
{
	static const char *const names[] = { "stat", "read", "write", "exec", "list", "create", "delete" };
	fputc('[', f);
	bool first = true;
	for (int i = 0; i < 7; i++)
		if (access & (1u << i)) {
			fprintf(f, "%s\"%s\"", first ? "" : ",", names[i]);
			first = false;
		}
	fputc(']', f);
}

static void json_who(FILE *f, const struct tracelog *t, int client)
{
	if (client < 0 || (size_t)client >= t->nclients) {
		fputs("\"pid\":null,\"argv\":[]", f);
		return;
	}
	const struct trace_client *c = &t->clients[client];
	fprintf(f, "\"pid\":%ld,\"argv\":[", (long)c->pid);
	for (size_t i = 0; c->len && i <= c->len;) {
		size_t n = strnlen(c->cmdline + i, c->len - i);
		if (i)
			fputc(',', f);
		json_str(f, c->cmdline + i, n);
		i += n + 1;
	}
	fputc(']', f);
}

static void json_findings(FILE *f, const struct tracelog *t, const struct item *v, size_t n)
{
	fputc('[', f);
	for (size_t i = 0; i < n; i++) {
		fputs(i ? ",\n  {\"path\":" : "\n  {\"path\":", f);
		json_cstr(f, v[i].key);
		fputs(",\"via\":", f);
		json_cstr(f, v[i].f->via);
		if (v[i].f->reason == SBX_HIDDEN_PKG) {
			fputs(",\"package\":", f);
			json_cstr(f, v[i].f->pkg);
		} else if (v[i].f->reason == SBX_HIDDEN_RULE) {
			fputs(",\"rule\":\"deny\"", f);
		} else if (v[i].f->reason == SBX_HIDDEN_UNKNOWN) {
			fputs(",\"rule\":\"unknown hide\"", f);
		} else if (v[i].f->reason == SBX_HIDDEN_UNOWNED) {
			fputs(",\"rule\":\"owned\"", f);
		}
		fputs(",\"access\":", f);
		json_access(f, v[i].f->access);
		fputc(',', f);
		json_who(f, t, v[i].f->client);
		fputc('}', f);
	}
	fputc(']', f);
}

int tracelog_write_json(const struct tracelog *t, const char *file, int exit_status,
			char *err, size_t errlen)
{
	struct outfile out;
	struct item *hid = sorted(&t->hidden), *ref = sorted(&t->refused), *unk = sorted(&t->unknown),
		    *prb = sorted(&t->probes);
	FILE *f = hid && ref && unk && prb ? outfile_fopen(&out, AT_FDCWD, file, STDOUT_FILENO, 0, err, errlen)
					   : NULL;
	if (!f) {
		if (!hid || !ref || !unk || !prb)
			snprintf(err, errlen, "out of memory writing %s", file);
		free(hid);
		free(ref);
		free(unk);
		free(prb);
		return -1;
	}
	fprintf(f, "{\"mode\":\"%s\",", t->report_only ? "report-only" : "enforce");
	if (exit_status >= 0)
		fprintf(f, "\"exit_status\":%d,", exit_status);
	else
		fputs("\"exit_status\":null,", f);
	fputs("\n\"declared\":[", f);
	for (size_t i = 0; i < t->ndeclared; i++) {
		if (i)
			fputc(',', f);
		json_cstr(f, t->declared[i]);
	}
	fprintf(f, "],\"closure_packages\":%zu,", t->closure_size);
	fputs("\n\"hidden\":", f);
	json_findings(f, t, hid, t->hidden.n);
	fputs(",\n\"refused_writes\":", f);
	json_findings(f, t, ref, t->refused.n);
	fputs(",\n\"write_probes\":", f);
	json_findings(f, t, prb, t->probes.n);
	fputs(",\n\"unknown\":", f);
	json_findings(f, t, unk, t->unknown.n);
	struct item *unh = sorted(&t->unhidden);
	fputs(",\n\"unhidden_glibc_data\":[", f);
	for (size_t i = 0; unh && i < t->unhidden.n; i++) {
		fputs(i ? ",\n  {\"path\":" : "\n  {\"path\":", f);
		json_cstr(f, unh[i].key);
		fputs(",\"package\":", f);
		json_cstr(f, unh[i].f->pkg);
		fputs(",\"why\":", f);
		json_cstr(f, unh[i].f->via);
		fputc(',', f);
		json_who(f, t, unh[i].f->client);
		fputc('}', f);
	}
	fputc(']', f);
	free(unh);
	fputs(",\n\"exec_events\":[", f);
	for (size_t i = 0; i < t->nevents; i++) {
		fprintf(f, "%s{\"kind\":\"%s\",\"path\":", i ? ",\n  " : "\n  ",
			t->events[i].kind == KILN_E_SETUID_EXEC ? "setuid" : "static");
		json_cstr(f, t->events[i].path);
		fputc(',', f);
		json_who(f, t, t->events[i].client);
		fputc('}', f);
	}
	fputs("],\n\"processes\":[", f);
	for (size_t i = 0; i < t->nclients; i++) {
		fputs(i ? ",\n  {" : "\n  {", f);
		json_who(f, t, (int)i);
		fputc('}', f);
	}
	size_t npkgs = 0;
	for (size_t i = 0; i < t->hidden.n; i++)
		if (hid[i].f->reason == SBX_HIDDEN_PKG && (i == 0 || strcmp(hid[i].f->pkg, hid[i - 1].f->pkg)))
			npkgs++;
	fprintf(f, "],\n\"totals\":{\"queries\":%lu,\"dir_queries\":%lu,\"entries_hidden\":%lu,"
		"\"paths\":%zu,\"processes\":%zu,\"connections\":%zu,\"hidden\":%zu,\"hidden_packages\":%zu,"
		"\"refused_writes\":%zu,\"write_probes\":%zu,\"unknown\":%zu,\"exec_events\":%zu,\"undecidable\":%lu,"
		"\"violations\":%lu,\"server_cpu_seconds\":%.3f},\n",
		t->queries, t->dir_queries, t->entries_hidden, t->paths.n, tracelog_processes(t),
		t->nclients, t->hidden.n,
		npkgs, t->refused.n, t->probes.n, t->unknown.n, t->nevents, t->failures, tracelog_violations(t),
		t->server_cpu);
	const struct trace_cache_figures *c = &t->cache;
	fprintf(f, "\"cache\":{\"enabled\":%s,\"hits\":%" PRIu64 ",\"misses\":%" PRIu64
		",\"round_trips\":%lu,\"listings\":%" PRIu64 ",\"map_bytes\":%" PRIu64
		",\"entries\":%" PRIu64 "}}\n",
		c->enabled ? "true" : "false", c->hits, c->misses, t->queries + t->dir_queries,
		c->listings, c->map_bytes, c->entries);
	free(hid);
	free(ref);
	free(unk);
	free(prb);
	return outfile_commit(&out, err, errlen);
}

static int by_key(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int tracelog_write_log(const struct tracelog *t, const char *file, char *err, size_t errlen)
{
	struct outfile out;
	const char **keys = calloc(t->paths.n + 1, sizeof *keys);
	FILE *f = keys ? outfile_fopen(&out, AT_FDCWD, file, STDOUT_FILENO, 0, err, errlen) : NULL;
	if (!f) {
		if (!keys)
			snprintf(err, errlen, "out of memory writing %s", file);
		free(keys);
		return -1;
	}
	size_t n = 0;
	for (size_t i = 0; i < t->paths.cap; i++)
		if (t->paths.slots[i].key)
			keys[n++] = t->paths.slots[i].key;
	qsort(keys, n, sizeof *keys, by_key);
	static const char *const vnames[] = { "allow", "hide", "deny", "error" };
	for (size_t i = 0; i < n; i++) {
		const struct trace_path *p = pathtab_get(&t->paths, keys[i], strlen(keys[i]));
		char acc[8];
		tracelog_access_letters(p->access, acc);
		fprintf(f, "%s ", acc);
		bool first = true;
		for (int v = 0; v < 4; v++)
			if (p->verdicts & (1u << v)) {
				fprintf(f, "%s%s", first ? "" : ",", vnames[v]);
				first = false;
			}
		fputc(' ', f);
		put_text_cstr(f, keys[i]);
		fputc('\n', f);
	}
	free(keys);
	return outfile_commit(&out, err, errlen);
}
