/* The report of a trace run: text (for people), JSON (for programs) and the
 * access log (every path with its access classes). */
#include "trace/service/report.h"
#include "util/utf8.h"

#include "common/outfile.h"
#include "trace/service/build_type.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
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

/* ---- text ------------------------------------------------------------- */

enum colour { C_NONE, C_BOLD, C_RED, C_YELLOW, C_GREEN, C_DIM };

static void colour(FILE *out, const struct report_style *st, enum colour c)
{
	static const char *const codes[] = { "\033[0m", "\033[1m", "\033[1;31m", "\033[33m",
					     "\033[1;32m", "\033[2m" };
	if (st->colour)
		fputs(codes[c], out);
}

/* Where the rest of a shortened section is. */
static void print_more(FILE *out, const struct report_style *st, size_t more)
{
	fprintf(out, "    ... and %zu more ", more);
	if (st->json && !strcmp(st->json, "-"))
		fputs("(all in the JSON report on standard output)\n", out);
	else if (st->json) {
		fputs("(all in ", out);
		put_text_cstr(out, st->json);
		fputs(")\n", out);
	} else if (st->log) {
		fputs("(every path in ", out);
		put_text_cstr(out, st->log);
		fputs(")\n", out);
	} else {
		fputs("(--json -o FILE lists them all)\n", out);
	}
}

static void print_proof(FILE *out, const struct tracelog *t, const struct trace_proof *p,
			const struct report_style *st)
{
	char why[2048];
	trace_describe_proof(t, p, st->build_dir, why, sizeof why);
	fprintf(out, "      %s: ", p->probe ? p->probe->id : trace_evidence_name(p->ev));
	put_text_cstr(out, why);
	if (p->client >= 0 && (size_t)p->client < t->nclients)
		fprintf(out, " (pid %ld)", (long)t->clients[p->client].pid);
	fputc('\n', out);
}

static void print_group(FILE *out, const struct tracelog *t, const struct diag_group *g,
			const struct report_style *st, size_t rank)
{
	fprintf(out, "  %zu. ", rank);
	colour(out, st, g->ev <= EV_COMMAND ? C_RED : C_YELLOW);
	put_text_cstr(out, g->name);
	colour(out, st, C_NONE);
	fprintf(out, " (%zu)  evidence: %s", g->nnodes, trace_evidence_name(g->ev));
	if (g->brought_by) {
		fputs("; a dependency of ", out);
		put_text_cstr(out, g->brought_by);
		fputs(", also hidden", out);
	}
	fputc('\n', out);
	if (g->advice) {
		fputs("     ", out);
		put_text_cstr(out, g->advice);
		fputc('\n', out);
	}
	for (size_t i = 0; i < g->nnodes; i++) {
		if (i == TEXT_LINES) {
			print_more(out, st, g->nnodes - TEXT_LINES);
			break;
		}
		struct item it = { g->nodes[i].node, g->nodes[i].f };
		const struct trace_finding *f = it.f;
		print_finding(out, t, &it);
		print_proof(out, t, f->counts.ev != EV_NONE ? &f->counts : &f->harmless, st);
	}
}

static void print_harmless(FILE *out, const struct tracelog *t, const struct trace_diagnosis *d,
			   const struct report_style *st)
{
	size_t n = d->ngroups - d->nranked;
	fprintf(out, "  known harmless probes (not counted by --strict; docs/trace-report.md lists "
		     "them): %zu path%s from %zu package%s\n", d->nharmless_nodes,
		d->nharmless_nodes == 1 ? "" : "s", n, n == 1 ? "" : "s");
	for (size_t i = 0; i < n; i++) {
		if (i == TEXT_LINES) {
			print_more(out, st, n - TEXT_LINES);
			break;
		}
		const struct diag_group *g = &d->groups[d->nranked + i];
		char why[2048];
		trace_describe_proof(t, g->proof, st->build_dir, why, sizeof why);
		colour(out, st, C_DIM);
		fputs("    ", out);
		put_text_cstr(out, g->name);
		fprintf(out, " (%zu): %s: ", g->nnodes, g->proof->probe ? g->proof->probe->id : "?");
		put_text_cstr(out, why);
		colour(out, st, C_NONE);
		fputc('\n', out);
	}
}

static void print_build(FILE *out, int status)
{
	if (status < 0)
		fputs("  build: exit status unknown\n", out);
	else if (status == 0)
		fputs("  build: succeeded (exit status 0)\n", out);
	else if (status > 128)
		fprintf(out, "  build: failed (exit status %d: killed by signal %d)\n", status, status - 128);
	else
		fprintf(out, "  build: failed (exit status %d)\n", status);
}

void tracelog_write_verdict(const struct trace_diagnosis *d, const struct report_style *st, FILE *out)
{
	colour(out, st, C_BOLD);
	fputs("=== kiln trace verdict: ", out);
	colour(out, st, C_NONE);
	colour(out, st, d->complete && d->exit_status == 0 && d->violations == 0 ? C_GREEN : C_RED);
	put_text_cstr(out, d->verdict ? d->verdict : "(out of memory)");
	colour(out, st, C_NONE);
	fputc('\n', out);
}

/* ---- write probes and glibc's own loads (docs/policy.md, docs/glibc-data.md) --- */

/* access(W_OK) outside the writable areas: answered EACCES, nothing written. */
static void write_probes(FILE *out, const struct tracelog *t, const struct report_style *st)
{
	struct item *v = t->probes.n ? sorted(&t->probes) : NULL;
	if (!v)
		return;
	fprintf(out, "  write probes (access W_OK outside the writable areas; answered EACCES, as "
		     "for a build user who is not root; nothing written): %zu\n", t->probes.n);
	for (size_t i = 0; i < t->probes.n && i < TEXT_LINES; i++)
		print_finding(out, t, &v[i]);
	if (t->probes.n > TEXT_LINES)
		print_more(out, st, t->probes.n - TEXT_LINES);
	free(v);
}

/* Files glibc loads for itself that no hook can hide: kept apart from the
 * hidden ones, which the build did not get. */
static void write_unhidden(FILE *out, const struct tracelog *t, const struct report_style *st)
{
	struct item *v = t->unhidden.n ? sorted(&t->unhidden) : NULL;
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
		print_more(out, st, t->unhidden.n - TEXT_LINES);
	free(v);
}

void tracelog_write_text(const struct tracelog *t, const struct trace_diagnosis *d,
			 const struct report_style *st, FILE *out)
{
	if (st->quiet) {
		tracelog_write_verdict(d, st, out);
		return;
	}
	struct item *ref = sorted(&t->refused), *unk = sorted(&t->unknown);
	if (!ref || !unk) {
		fprintf(out, "kiln trace: out of memory writing the report\n");
		goto done;
	}
	size_t npkgs = 0, nranked_pkgs = 0;
	for (size_t i = 0; i < d->ngroups; i++)
		if (d->groups[i].reason == SBX_HIDDEN_PKG) {
			npkgs++;
			nranked_pkgs += d->groups[i].ev != EV_NONE;
		}

	fputc('\n', out);
	colour(out, st, C_BOLD);
	fprintf(out, "=== kiln trace report%s ===\n",
		t->report_only ? " (report only: nothing was hidden or refused)" : "");
	colour(out, st, C_NONE);
	fputs("  declared:", out);
	for (size_t i = 0; i < t->ndeclared; i++) {
		fputs(i ? ", " : " ", out);
		put_text_cstr(out, t->declared[i]);
	}
	fprintf(out, "%s (closure with the Essential packages: %zu packages)\n",
		t->ndeclared ? "" : " nothing", t->closure_size);
	unsigned bp = t->build_parts, lo = t->build_left_out;
	if (lo) {
		fprintf(out, "  build type: %s (", build_type_name(bp));
		if (t->build_type_from && !strcmp(t->build_type_from, "--build-type"))
			fputs("--build-type", out);
		else {
			put_text_cstr(out, t->build_type_from ? t->build_type_from : "?");
			fputs("'s options", out);
		}
		bool both = lo == (BUILD_ANY | BUILD_ALL);
		fprintf(out, "): %s%s%s left out, as dpkg-checkbuilddeps and sbuild leave %s\n",
			lo & BUILD_ANY ? "Build-Depends-Arch" : "", both ? " and " : "",
			lo & BUILD_ALL ? "Build-Depends-Indep" : "", both ? "them" : "it");
	}
	print_build(out, d->exit_status);
	fprintf(out, "  %s: %zu path%s, from %zu package%s outside the dependency closure "
		"(%zu ranked, %zu known harmless probes only)\n",
		t->report_only ? "would be hidden" : "hidden",
		t->hidden.n, t->hidden.n == 1 ? "" : "s", npkgs, npkgs == 1 ? "" : "s", nranked_pkgs,
		npkgs - nranked_pkgs);
	if (d->nranked) {
		colour(out, st, C_BOLD);
		fputs("  ranked, most likely missing first (evidence: exec > read > command in PATH > "
		      "directory > stat):\n", out);
		colour(out, st, C_NONE);
	}
	for (size_t i = 0; i < d->nranked; i++)
		print_group(out, t, &d->groups[i], st, i + 1);
	if (d->ngroups > d->nranked)
		print_harmless(out, t, d, st);
	fprintf(out, "  %s: %zu\n", t->report_only ? "writes that would be refused" : "refused writes",
		t->refused.n);
	for (size_t i = 0; i < t->refused.n && i < TEXT_LINES; i++)
		print_finding(out, t, &ref[i]);
	if (t->refused.n > TEXT_LINES)
		print_more(out, st, t->refused.n - TEXT_LINES);
	write_probes(out, t, st);
	write_unhidden(out, t, st);
	fprintf(out, "  unknown files (in registry-managed trees, not in the registry; allowed): %zu\n",
		t->unknown.n);
	for (size_t i = 0; i < t->unknown.n && i < TEXT_LINES; i++)
		print_finding(out, t, &unk[i]);
	if (t->unknown.n > TEXT_LINES)
		print_more(out, st, t->unknown.n - TEXT_LINES);
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
		print_more(out, st, t->nevents - TEXT_LINES);
	if (!d->unused_known) {
		fprintf(out, "  unused %s: not worked out%s\n", d->unused_label,
			d->exit_status != 0 ? " (the build did not succeed)" : "");
	} else {
		fprintf(out, "  unused %s (none of their files reached): %s", d->unused_label,
			d->nunused ? "" : "none");
		for (size_t i = 0; i < d->nunused; i++) {
			fputs(i ? ", " : "", out);
			put_text_cstr(out, d->unused[i]);
			if (d->unused_by && d->unused_by[i]) {
				fputs(" (virtual, provided by ", out);
				put_text_cstr(out, d->unused_by[i]);
				fputc(')', out);
			}
		}
		fputc('\n', out);
	}
	fprintf(out, "  totals: %lu queries (%lu directory listings, %lu entries hidden), %zu paths, "
		"%zu processes (%zu connections); %zu hidden (%zu harmless), %zu refused, %zu unknown, "
		"%zu exec events",
		t->queries, t->dir_queries, t->entries_hidden, t->paths.n, tracelog_processes(t), t->nclients,
		t->hidden.n, d->nharmless_nodes, t->refused.n, t->unknown.n, t->nevents);
	if (t->failures)
		fprintf(out, "; %lu undecidable (refused)", t->failures);
	fprintf(out, "; server CPU %.2f s\n", t->server_cpu);
	if (st->strict && d->violations && d->exit_status == 0)
		fprintf(out, "  --strict: exit status 1: %lu finding%s that count (ranked hidden paths, "
			"refused writes)\n", d->violations, d->violations == 1 ? "" : "s");
	tracelog_write_verdict(d, st, out);
done:
	free(ref);
	free(unk);
}

unsigned long tracelog_round_trips(const struct tracelog *t)
{
	return t->queries + t->dir_queries - (unsigned long)t->cache.notes_decided -
	       (unsigned long)t->cache.recall_used;
}

/* How the server held the registry: the JSON report's name, --stats's line. */
static const struct {
	const char *name, *text;
} registry_held[] = {
	[REGISTRY_SNAPSHOT_NONE] = { "", NULL },
	[REGISTRY_SNAPSHOT_COPY] = { "copy", "read from a copy taken at the start" },
	[REGISTRY_SNAPSHOT_LEASED] = { "lease", "read from its file under a read lease (no copy taken)" },
	[REGISTRY_SNAPSHOT_COPY_AFTER_LEASE] = { "lease-then-copy",
		"read under a read lease, then from a copy (written during the build)" },
};

void tracelog_write_stats(const struct tracelog *t, FILE *out)
{
	const struct trace_cache_figures *c = &t->cache;
	uint64_t asked = c->hits + c->misses;
	fprintf(out, "kiln trace: verdict cache %s\n", c->enabled ? "on" : "off (--no-cache or --report-only)");
	fprintf(out, "  hits         %" PRIu64 " (%.1f%% of %" PRIu64 " questions)\n", c->hits,
		asked ? 100.0 * (double)c->hits / (double)asked : 0.0, asked);
	fprintf(out, "  misses       %" PRIu64 "\n", c->misses);
	fprintf(out, "  round trips  %lu (%lu path queries, %lu listings)\n", tracelog_round_trips(t),
		t->queries - (unsigned long)c->notes_decided - (unsigned long)c->recall_used,
		t->dir_queries);
	fprintf(out, "  notes        %" PRIu64 " (absent paths the processes answered themselves,\n"
		     "               and %" PRIu64 " questions an earlier round trip answered ahead)\n",
		c->notes, c->ahead);
	fprintf(out, "  logged       %" PRIu64 " (fresh names answered from directory values)\n",
		c->logged);
	fprintf(out, "  recalled     %" PRIu64 " (the last build's questions answered before"
		     " they were\n               asked; %" PRIu64 " of them used)\n",
		c->recalled, c->recall_used);
	fprintf(out, "  listings     %" PRIu64 " answered from the cache\n", c->listings);
	fprintf(out, "  map          %" PRIu64 " bytes, %" PRIu64 " entries\n", c->map_bytes, c->entries);
	fprintf(out, "  processes    %zu\n", tracelog_processes(t));
	if (registry_held[t->registry_snapshot].text)
		fprintf(out, "  registry     %s\n", registry_held[t->registry_snapshot].text);
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

static void json_proof(FILE *f, const struct tracelog *t, const struct trace_proof *p,
		       const char *build_dir)
{
	if (p->ev == EV_NONE) {
		fputs("null", f);
		return;
	}
	char why[2048];
	trace_describe_proof(t, p, build_dir, why, sizeof why);
	fprintf(f, "{\"kind\":\"%s\",\"path\":", trace_evidence_name(p->ev));
	json_cstr(f, p->path ? p->path : "");
	fputs(",\"access\":", f);
	json_access(f, p->access);
	fputs(",\"text\":", f);
	json_cstr(f, why);
	fputc(',', f);
	json_who(f, t, p->client);
	fputc('}', f);
}

static void json_findings(FILE *f, const struct tracelog *t, const struct item *v, size_t n,
			  bool hidden, const char *build_dir)
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
		if (hidden) {
			const struct trace_finding *x = v[i].f;
			const struct trace_proof *p = x->counts.ev != EV_NONE ? &x->counts : &x->harmless;
			fputs(",\"harmless\":", f);
			if (x->counts.ev == EV_NONE && p->probe)
				json_cstr(f, p->probe->id);
			else
				fputs("null", f);
			fputs(",\"evidence\":", f);
			json_proof(f, t, p, build_dir);
		}
		fputc('}', f);
	}
	fputc(']', f);
}

static void json_nullable(FILE *f, const char *s)
{
	if (s)
		json_cstr(f, s);
	else
		fputs("null", f);
}

static void json_diagnosis(FILE *f, const struct tracelog *t, const struct trace_diagnosis *d,
			   const char *build_dir)
{
	fputs(",\n\"packages\":[", f);
	for (size_t i = 0; i < d->ngroups; i++) {
		const struct diag_group *g = &d->groups[i];
		fputs(i ? ",\n  {\"name\":" : "\n  {\"name\":", f);
		json_cstr(f, g->name);
		fprintf(f, ",\"reason\":\"%s\",", g->reason == SBX_HIDDEN_PKG ? "package"
						   : g->reason == SBX_HIDDEN_RULE ? "deny rule"
						   : g->reason == SBX_HIDDEN_UNOWNED ? "owned rule" : "unknown hide");
		if (g->ev != EV_NONE)
			fprintf(f, "\"rank\":%zu,\"evidence\":\"%s\",\"harmless\":null,", i + 1,
				trace_evidence_name(g->ev));
		else {
			fputs("\"rank\":null,\"evidence\":\"none\",\"harmless\":", f);
			json_nullable(f, g->proof->probe ? g->proof->probe->id : NULL);
			fputc(',', f);
		}
		fputs("\"proof\":", f);
		json_proof(f, t, g->proof, build_dir);
		fputs(",\"brought_by\":", f);
		json_nullable(f, g->brought_by);
		fputs(",\"write\":", f);
		json_nullable(f, g->reason == SBX_HIDDEN_PKG ? g->write : NULL);
		fputs(",\"advice\":", f);
		json_nullable(f, g->advice);
		fputs(",\"paths\":[", f);
		for (size_t j = 0; j < g->nnodes; j++) {
			if (j)
				fputc(',', f);
			json_cstr(f, g->nodes[j].node);
		}
		fputs("]}", f);
	}
	fputs("],\n\"unused\":", f);
	if (!d->unused_known) {
		fputs("null", f);
	} else {
		fputc('[', f);
		for (size_t i = 0; i < d->nunused; i++) {
			if (i)
				fputc(',', f);
			json_cstr(f, d->unused[i]);
		}
		fputc(']', f);
	}
	fputs(",\n\"unused_virtual\":", f);
	if (!d->unused_known) {
		fputs("null", f);
	} else {
		fputc('{', f);
		bool any = false;
		for (size_t i = 0; i < d->nunused; i++) {
			if (!d->unused_by || !d->unused_by[i])
				continue;
			fputs(any ? "," : "", f);
			json_cstr(f, d->unused[i]);
			fputc(':', f);
			json_cstr(f, d->unused_by[i]);
			any = true;
		}
		fputc('}', f);
	}
	fputs(",\n\"verdict\":{\"text\":", f);
	json_nullable(f, d->verdict);
	fprintf(f, ",\"complete\":%s,\"failed\":%s,\"missing\":[", d->complete ? "true" : "false",
		d->exit_status > 0 ? "true" : "false");
	bool first = true;
	for (size_t i = 0; i < d->nranked; i++)
		if (d->groups[i].reason == SBX_HIDDEN_PKG && !d->groups[i].brought_by) {
			fputs(first ? "" : ",", f);
			json_cstr(f, d->groups[i].name);
			first = false;
		}
	fputs("],\"cause\":", f);
	if (!d->cause.node) {
		fputs("null", f);
	} else {
		fputs("{\"path\":", f);
		json_cstr(f, d->cause.node);
		fprintf(f, ",\"kind\":\"%s\",\"package\":", d->cause.proof ? "hidden" : "refused write");
		json_nullable(f, d->cause.group);
		fputs(",\"evidence\":", f);
		if (d->cause.proof)
			json_proof(f, t, d->cause.proof, build_dir);
		else {
			fputs("null,", f);
			json_who(f, t, d->cause.f->client);
		}
		fputc('}', f);
	}
	fputc('}', f);
}

/* "write_probes" and "unhidden_glibc_data" of the JSON report. */
static void json_probes_and_unhidden(FILE *f, const struct tracelog *t, const char *build_dir)
{
	struct item *prb = sorted(&t->probes), *unh = sorted(&t->unhidden);
	fputs(",\n\"write_probes\":", f);
	json_findings(f, t, prb, prb ? t->probes.n : 0, false, build_dir);
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
	free(prb);
	free(unh);
}

int tracelog_write_json(const struct tracelog *t, const struct trace_diagnosis *d, const char *file,
			char *err, size_t errlen)
{
	int exit_status = d->exit_status;
	char cwd[PATH_MAX];
	const char *build_dir = getcwd(cwd, sizeof cwd) ? cwd : NULL;
	struct outfile out;
	struct item *hid = sorted(&t->hidden), *ref = sorted(&t->refused), *unk = sorted(&t->unknown);
	FILE *f = hid && ref && unk ? outfile_fopen(&out, AT_FDCWD, file, STDOUT_FILENO, 0, err, errlen) : NULL;
	if (!f) {
		if (!hid || !ref || !unk)
			snprintf(err, errlen, "out of memory writing %s", file);
		free(hid);
		free(ref);
		free(unk);
		return -1;
	}
	fprintf(f, "{\"schema_version\":%d,\"mode\":\"%s\",", TRACE_REPORT_SCHEMA,
		t->report_only ? "report-only" : "enforce");
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
	if (t->build_parts)
		fprintf(f, "\"build_type\":\"%s\",", build_type_name(t->build_parts));
	else
		fputs("\"build_type\":null,", f);
	fputs("\n\"hidden\":", f);
	json_findings(f, t, hid, t->hidden.n, true, build_dir);
	fputs(",\n\"refused_writes\":", f);
	json_findings(f, t, ref, t->refused.n, false, build_dir);
	fputs(",\n\"unknown\":", f);
	json_findings(f, t, unk, t->unknown.n, false, build_dir);
	json_probes_and_unhidden(f, t, build_dir);
	json_diagnosis(f, t, d, build_dir);
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
		"\"harmless\":%zu,\"violations\":%lu,\"server_cpu_seconds\":%.3f,"
		"\"registry_snapshot\":\"%s\"},\n",
		t->queries, t->dir_queries, t->entries_hidden, t->paths.n, tracelog_processes(t),
		t->nclients, t->hidden.n,
		npkgs, t->refused.n, t->probes.n, t->unknown.n, t->nevents, t->failures, d->nharmless_nodes,
		d->violations, t->server_cpu, registry_held[t->registry_snapshot].name);
	const struct trace_cache_figures *c = &t->cache;
	fprintf(f, "\"cache\":{\"enabled\":%s,\"hits\":%" PRIu64 ",\"misses\":%" PRIu64
		",\"round_trips\":%lu,\"notes\":%" PRIu64 ",\"ahead\":%" PRIu64 ",\"logged\":%" PRIu64
		",\"recalled\":%" PRIu64 ",\"recall_used\":%" PRIu64
		",\"listings\":%" PRIu64 ",\"map_bytes\":%" PRIu64 ",\"entries\":%" PRIu64 "}}\n",
		c->enabled ? "true" : "false", c->hits, c->misses, tracelog_round_trips(t), c->notes,
		c->ahead, c->logged, c->recalled, c->recall_used, c->listings, c->map_bytes,
		c->entries);
	free(hid);
	free(ref);
	free(unk);
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
