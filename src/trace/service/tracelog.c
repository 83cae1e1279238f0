#include "trace/service/tracelog.h"

#include <stdlib.h>
#include <string.h>

void tracelog_init(struct tracelog *t, bool report_only)
{
	*t = (struct tracelog){ .report_only = report_only };
}

int tracelog_set_path(struct tracelog *t, const char *path)
{
	trace_pathdirs_free(&t->pathdirs);
	return trace_pathdirs_init(&t->pathdirs, path);
}

static void free_finding(void *p)
{
	struct trace_finding *f = p;
	if (f) {
		free(f->via);
		free(f->counts.path);
		free(f->harmless.path);
	}
	free(f);
}

void tracelog_free(struct tracelog *t)
{
	for (size_t i = 0; i < t->nclients; i++)
		free(t->clients[i].cmdline);
	free(t->clients);
	pathtab_free(&t->paths, free);
	pathtab_free(&t->hidden, free_finding);
	pathtab_free(&t->refused, free_finding);
	pathtab_free(&t->probes, free_finding);
	pathtab_free(&t->unknown, free_finding);
	pathtab_free(&t->unhidden, free_finding);
	pathtab_free(&t->left_out, NULL);
	for (size_t i = 0; i < t->nevents; i++)
		free(t->events[i].path);
	free(t->events);
	trace_pathdirs_free(&t->pathdirs);
	for (size_t i = 0; i < t->nallowed; i++)
		free(t->allowed[i]);
	free(t->allowed);
	*t = (struct tracelog){ 0 };
}

static void keep_allowed(struct tracelog *t, const char *path)
{
	if (t->nallowed == t->capallowed) {
		size_t ncap = t->capallowed ? t->capallowed * 2 : 256;
		char **v = realloc(t->allowed, ncap * sizeof *v);
		if (!v) {
			t->allowed_lost = true;
			return;
		}
		t->allowed = v;
		t->capallowed = ncap;
	}
	if (!(t->allowed[t->nallowed] = strdup(path)))
		t->allowed_lost = true;
	else
		t->nallowed++;
}

int tracelog_client(struct tracelog *t, pid_t pid, const char *cmdline, size_t len)
{
	if (t->nclients == t->capclients) {
		size_t ncap = t->capclients ? t->capclients * 2 : 64;
		struct trace_client *c = realloc(t->clients, ncap * sizeof *c);
		if (!c)
			return -1;
		t->clients = c;
		t->capclients = ncap;
	}
	char *copy = malloc(len + 1);
	if (!copy)
		return -1;
	memcpy(copy, cmdline, len);
	copy[len] = '\0';
	t->clients[t->nclients] = (struct trace_client){ .pid = pid, .cmdline = copy, .len = len };
	return (int)t->nclients++;
}

/* Keeps the strongest evidence a hidden node gets, apart for accesses that
 * match a known harmless probe. Only an access that could outrank what
 * counts already is looked at (a stat of the path, at most two). */
static void weigh(const struct tracelog *t, struct trace_finding *f, const char *node,
		  const char *path, int client, unsigned access)
{
	if (f->counts.ev <= (int)trace_evidence_bound(access))
		return;
	enum trace_evidence ev = trace_evidence_of(path, access, &t->pathdirs);
	char prog[128] = "";
	if (client >= 0 && (size_t)client < t->nclients)
		trace_program_name(t->clients[client].cmdline, t->clients[client].len, prog, sizeof prog);
	const struct trace_probe *probe = trace_probe_match(path, node, ev, prog);
	if (!probe && ev >= trace_probe_build_type.strongest && f->pkg[0] &&
	    pathtab_get(&t->left_out, f->pkg, strlen(f->pkg)))
		probe = &trace_probe_build_type;
	struct trace_proof *p = probe ? &f->harmless : &f->counts;
	if ((int)ev >= p->ev)
		return;
	char *copy = strdup(path);
	if (!copy)
		return;
	free(p->path);
	*p = (struct trace_proof){ .ev = (int)ev, .client = client, .access = access,
				   .seq = t->queries, .probe = probe, .path = copy };
}

static struct trace_finding *record(struct tracelog *t, struct pathtab *tab, const char *key,
				    int client, unsigned access, int reason, const char *via,
				    const char *pkg)
{
	bool added;
	void **slot = pathtab_put(tab, key, strlen(key), &added);
	if (!slot)
		return NULL;
	struct trace_finding *f = *slot;
	if (f) {
		f->access |= access;
		return f;
	}
	size_t pl = strlen(pkg);
	f = malloc(sizeof *f + pl + 1);
	if (!f)
		return NULL;
	*f = (struct trace_finding){ .client = client, .access = access, .reason = reason,
				     .seq = t->queries, .via = strdup(via),
				     .counts = { .ev = EV_NONE }, .harmless = { .ev = EV_NONE } };
	memcpy(f->pkg, pkg, pl + 1);
	*slot = f;
	return f;
}

void tracelog_query(struct tracelog *t, int client, const char *path, unsigned access,
		    const struct sbx_decision *d)
{
	t->queries++;
	tracelog_seen(t, client, path, access, d);
}

void tracelog_seen(struct tracelog *t, int client, const char *path, unsigned access,
		   const struct sbx_decision *d)
{
	bool added;
	void **slot = pathtab_put(&t->paths, path, strlen(path), &added);
	if (slot) {
		struct trace_path *p = *slot;
		if (!p && (p = calloc(1, sizeof *p)))
			p->client = client;
		if (p) {
			if (t->track_allowed && d->verdict == KILN_V_ALLOW &&
			    !(p->verdicts & (1u << KILN_V_ALLOW)))
				keep_allowed(t, path);
			p->access |= access;
			p->verdicts |= 1u << d->verdict;
			*slot = p;
		}
	}
	switch (d->reason) {
	case SBX_HIDDEN_PKG:
	case SBX_HIDDEN_RULE:
	case SBX_HIDDEN_UNKNOWN:
	case SBX_HIDDEN_UNOWNED: {
		struct trace_finding *f = record(t, &t->hidden, d->below[0] ? d->below : d->node, client,
						 access, d->reason, path, d->pkg);
		if (f)
			weigh(t, f, d->node, path, client, access);
		break;
	}
	case SBX_WRITE_REFUSED:
		record(t, &t->refused, d->node, client, access, d->reason, path, "");
		break;
	case SBX_WRITE_PROBE:
		record(t, &t->probes, d->node, client, access, d->reason, path, "");
		break;
	case SBX_FAILED:
		t->failures++;
		break;
	case SBX_OK:
		break;
	}
	if (d->unknown)
		record(t, &t->unknown, d->node, client, access, SBX_OK, path, "");
}

void tracelog_unhidden(struct tracelog *t, int client, const char *path, const char *pkg,
		       const char *why)
{
	record(t, &t->unhidden, path, client, KILN_A_READ, SBX_OK, why, pkg);
}

void tracelog_dir(struct tracelog *t, unsigned long entries_hidden)
{
	t->dir_queries++;
	t->entries_hidden += entries_hidden;
}

void tracelog_event(struct tracelog *t, int client, unsigned kind, const char *path)
{
	if (t->nevents == t->capevents) {
		size_t ncap = t->capevents ? t->capevents * 2 : 16;
		struct trace_event *e = realloc(t->events, ncap * sizeof *e);
		if (!e)
			return;
		t->events = e;
		t->capevents = ncap;
	}
	char *copy = strdup(path);
	if (!copy)
		return;
	t->events[t->nevents++] = (struct trace_event){ .kind = kind, .client = client, .path = copy };
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

static bool cache_pid(const struct tracelog *t, pid_t pid)
{
	return pid >= 0 && (size_t)pid / 64 < t->cache_pid_words &&
	       (__atomic_load_n(&t->cache_pids[pid / 64], __ATOMIC_RELAXED) >> (pid % 64) & 1);
}

size_t tracelog_processes(const struct tracelog *t)
{
	size_t n = 0;
	for (size_t i = 0; i < t->cache_pid_words; i++)
		n += (size_t)__builtin_popcountll(__atomic_load_n(&t->cache_pids[i], __ATOMIC_RELAXED));
	if (!t->nclients)
		return n;
	pid_t *pids = malloc(t->nclients * sizeof *pids);
	if (!pids)
		return n + t->nclients; /* an upper bound beats no figure */
	size_t k = 0;
	for (size_t i = 0; i < t->nclients; i++)
		if (!cache_pid(t, t->clients[i].pid))
			pids[k++] = t->clients[i].pid;
	qsort(pids, k, sizeof *pids, cmp_pid);
	for (size_t i = 0; i < k; i++)
		n += i == 0 || pids[i] != pids[i - 1];
	free(pids);
	return n;
}

void tracelog_access_letters(unsigned access, char out[8])
{
	static const char letters[] = "srwxlcd";
	for (int i = 0; i < 7; i++)
		out[i] = (access & (1u << i)) ? letters[i] : '-';
	out[7] = '\0';
}
