#include "trace/service/diagnosis.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/query.h"
#include "trace/service/build_type.h"
#include "trace/service/unused.h"

#define MAX_OWNER_LOOKUPS 2000 /* hidden nodes whose owners are looked up again */
#define MAX_BRINGERS 64        /* ranked packages whose closures are compared */
#define VERDICT_NAMES 3        /* packages the verdict names before "and N more" */

static const char *const rule_group = "(deny rules)";
static const char *const unknown_group = "(unknown to the registry, policy 'unknown hide')";
static const char *const unowned_group = "(no package of the closure owns them: 'owned' rules)";

/* ---- naming processes and proofs ---------------------------------------- */

const char *trace_who(const struct tracelog *t, int client, const char *build_dir, char *buf,
		      size_t len)
{
	if (client < 0 || (size_t)client >= t->nclients) {
		snprintf(buf, len, "an unknown process");
		return buf;
	}
	const struct trace_client *c = &t->clients[client];
	const char *arg = trace_program_arg(c->cmdline, c->len);
	size_t bl = build_dir ? strlen(build_dir) : 0;
	if (bl > 1 && !strncmp(arg, build_dir, bl) && arg[bl] == '/' && arg[bl + 1])
		arg += bl + 1;
	else if (arg[0] == '/')
		arg = strrchr(arg, '/') + 1;
	while (arg[0] == '.' && arg[1] == '/')
		arg += 2;
	snprintf(buf, len, "%s", *arg ? arg : "an unnamed process");
	return buf;
}

void trace_describe_proof(const struct tracelog *t, const struct trace_proof *p,
			  const char *build_dir, char *buf, size_t len)
{
	char who[256];
	trace_who(t, p->client, build_dir, who, sizeof who);
	const char *path = p->path ? p->path : "?";
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	switch (p->ev) {
	case EV_EXEC:
		snprintf(buf, len, "%s run by %s", base, who);
		break;
	case EV_READ:
		snprintf(buf, len, "%s %s by %s", path,
			 p->access & KILN_A_READ ? "read" : "opened for writing", who);
		break;
	case EV_COMMAND:
		snprintf(buf, len, "%s looked up in PATH by %s", base, who);
		break;
	case EV_DIR:
		snprintf(buf, len, "directory %s %s by %s", path,
			 p->access & KILN_A_LIST ? "listed" : "opened", who);
		break;
	case EV_ABSENT:
		snprintf(buf, len, "%s (absent) looked up by %s", path, who);
		break;
	default:
		snprintf(buf, len, "%s looked up by %s", path, who);
		break;
	}
}

/* ---- grouping ------------------------------------------------------------ */

struct item {
	const char *node;
	const struct trace_finding *f;
	const char *group; /* the package it is attributed to, or a policy group */
};

static int proof_order(const struct trace_finding *a, const struct trace_finding *b)
{
	if (a->counts.ev != b->counts.ev)
		return a->counts.ev - b->counts.ev;
	if (a->counts.ev == EV_NONE && a->harmless.ev != b->harmless.ev)
		return a->harmless.ev - b->harmless.ev;
	const struct trace_proof *x = a->counts.ev != EV_NONE ? &a->counts : &a->harmless,
				 *y = b->counts.ev != EV_NONE ? &b->counts : &b->harmless;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

static int by_group_then_proof(const void *pa, const void *pb)
{
	const struct item *a = pa, *b = pb;
	int c = strcmp(a->group, b->group);
	if (!c)
		c = a->f->reason - b->f->reason;
	if (!c)
		c = proof_order(a->f, b->f);
	return c ? c : strcmp(a->node, b->node);
}

/* A directory several packages own is named after the first owner the
 * sandbox found; attribute it to an owner that the build reached files of
 * (files have one owner), as that is the package it was after. */
static void attribute(struct item *v, size_t n, struct kiln_registry *reg)
{
	size_t looked = 0;
	for (size_t i = 0; i < n && reg; i++) {
		if (v[i].f->reason != SBX_HIDDEN_PKG || looked++ >= MAX_OWNER_LOOKUPS)
			continue;
		int64_t ids[64];
		int m = registry_owners(reg, v[i].node, ids, 64);
		if (m <= 1)
			continue;
		const char *best = NULL;
		int best_ev = EV_NONE + 1;
		for (int k = 0; k < m && k < 64; k++) {
			char name[SBX_PKG_MAX];
			registry_package_name(reg, ids[k], name, sizeof name);
			for (size_t j = 0; j < n; j++)
				if (j != i && v[j].f->reason == SBX_HIDDEN_PKG && !strcmp(v[j].f->pkg, name) &&
				    v[j].f->counts.ev < best_ev) {
					best = v[j].f->pkg;
					best_ev = v[j].f->counts.ev;
				}
		}
		if (best)
			v[i].group = best;
	}
}

static int make_groups(struct trace_diagnosis *d, struct item *v, size_t n)
{
	d->groups = calloc(n ? n : 1, sizeof *d->groups);
	if (!d->groups)
		return -1;
	for (size_t i = 0; i < n;) {
		size_t k = i;
		while (k < n && !strcmp(v[k].group, v[i].group) && v[k].f->reason == v[i].f->reason)
			k++;
		struct diag_group *g = &d->groups[d->ngroups++];
		g->reason = v[i].f->reason;
		g->name = strdup(v[i].group);
		g->nodes = calloc(k - i, sizeof *g->nodes);
		if (!g->name || !g->nodes)
			return -1;
		for (size_t j = i; j < k; j++) {
			g->nodes[g->nnodes++] = (struct diag_node){ v[j].node, v[j].f };
			if (v[j].f->counts.ev == EV_NONE)
				d->nharmless_nodes++;
			else
				d->violations++;
		}
		g->best = &g->nodes[0];
		g->ev = g->best->f->counts.ev;
		g->proof = g->ev != EV_NONE ? &g->best->f->counts : &g->best->f->harmless;
		i = k;
	}
	return 0;
}

/* ---- what depends on what ------------------------------------------------ */

static int64_t package_id(struct kiln_registry *reg, const char *name)
{
	int64_t id[1];
	return registry_find_packages(reg, name, id, 1) > 0 ? id[0] : -1;
}

/* A ranked package that another ranked package depends on (both hidden) is
 * shown under it: writing the one that depends is enough. */
static void find_bringers(struct trace_diagnosis *d, struct kiln_registry *reg)
{
	size_t n = 0;
	struct diag_group *r[MAX_BRINGERS];
	int64_t id[MAX_BRINGERS];
	struct registry_pkgset cl[MAX_BRINGERS];
	for (size_t i = 0; i < d->ngroups && n < MAX_BRINGERS; i++) {
		struct diag_group *g = &d->groups[i];
		if (g->reason != SBX_HIDDEN_PKG || g->ev == EV_NONE || (id[n] = package_id(reg, g->name)) < 0)
			continue;
		char err[256];
		cl[n] = (struct registry_pkgset){ 0 };
		const char *name = g->name;
		if (registry_closure(reg, &name, 1, false, &cl[n], err, sizeof err) < 0) {
			registry_pkgset_free(&cl[n]);
			continue;
		}
		r[n++] = g;
	}
	/* brings[i][j]: i depends on j, j not on i */
	for (size_t j = 0; j < n; j++) {
		struct diag_group *top = NULL;
		for (size_t i = 0; i < n; i++) {
			if (i == j || !registry_pkgset_has(&cl[i], id[j]) || registry_pkgset_has(&cl[j], id[i]))
				continue;
			/* Prefer a bringer nothing else here brings: the one to write. */
			bool brought = false;
			for (size_t k = 0; k < n && !brought; k++)
				brought = k != i && registry_pkgset_has(&cl[k], id[i]) &&
					  !registry_pkgset_has(&cl[i], id[k]);
			if (!top || !brought)
				top = r[i];
			if (!brought)
				break;
		}
		if (top)
			r[j]->brought_by = strdup(top->name);
	}
	for (size_t i = 0; i < n; i++)
		registry_pkgset_free(&cl[i]);
}

static const struct diag_group *find_group(const struct trace_diagnosis *d, const char *name)
{
	for (size_t i = 0; i < d->ngroups; i++)
		if (d->groups[i].reason == SBX_HIDDEN_PKG && !strcmp(d->groups[i].name, name))
			return &d->groups[i];
	return NULL;
}

static const struct diag_group *head_of(const struct trace_diagnosis *d, const struct diag_group *g)
{
	const struct diag_group *h = g;
	for (int hops = 0; hops < 8 && h->brought_by; hops++) {
		const struct diag_group *up = find_group(d, h->brought_by);
		if (!up)
			break;
		h = up;
	}
	return h;
}

/* Sort keys, computed before the groups move. */
struct order {
	size_t index;
	bool ranked, package, is_head;
	int head_ev, ev;
	unsigned long head_seq;
	const char *head_name, *name;
};

static int by_order(const void *pa, const void *pb)
{
	const struct order *a = pa, *b = pb;
	if (a->ranked != b->ranked)
		return b->ranked - a->ranked;
	if (!a->ranked)
		return strcmp(a->name, b->name);
	/* Packages before policy groups; then by head: its evidence (or that
	 * of what it brings), its first proof, its name; a head before what
	 * it brings. */
	if (a->package != b->package)
		return a->package ? -1 : 1;
	if (a->head_ev != b->head_ev)
		return a->head_ev - b->head_ev;
	if (a->head_seq != b->head_seq)
		return a->head_seq < b->head_seq ? -1 : 1;
	int c = strcmp(a->head_name, b->head_name);
	if (c)
		return c;
	if (a->is_head != b->is_head)
		return a->is_head ? -1 : 1;
	if (a->ev != b->ev)
		return a->ev - b->ev;
	return strcmp(a->name, b->name);
}

static int sort_groups(struct trace_diagnosis *d)
{
	struct order *o = calloc(d->ngroups + 1, sizeof *o);
	struct diag_group *sorted = calloc(d->ngroups + 1, sizeof *sorted);
	if (!o || !sorted) {
		free(o);
		free(sorted);
		return -1;
	}
	for (size_t i = 0; i < d->ngroups; i++) {
		const struct diag_group *g = &d->groups[i], *h = head_of(d, g);
		int ev = h->ev;
		for (size_t j = 0; j < d->ngroups; j++)
			if (d->groups[j].ev < ev && head_of(d, &d->groups[j]) == h)
				ev = d->groups[j].ev;
		o[i] = (struct order){ .index = i, .ranked = g->ev != EV_NONE,
				       .package = g->reason == SBX_HIDDEN_PKG, .is_head = h == g,
				       .head_ev = ev, .ev = g->ev, .head_seq = h->proof->seq,
				       .head_name = h->name, .name = g->name };
	}
	qsort(o, d->ngroups, sizeof *o, by_order);
	for (size_t i = 0; i < d->ngroups; i++) {
		sorted[i] = d->groups[o[i].index];
		sorted[i].best = &sorted[i].nodes[0];
	}
	free(d->groups);
	d->groups = sorted;
	free(o);
	return 0;
}

/* ---- what to write in debian/control ------------------------------------- */

static bool satisfiable(struct kiln_registry *reg, const char *name)
{
	int64_t id[1];
	return registry_satisfiers(reg, name, "", id, 1) > 0;
}

static char *group_text(const struct dep_group *g)
{
	size_t len = 1;
	for (size_t i = 0; i < g->n; i++)
		len += strlen(g->alts[i]) + 3;
	char *s = malloc(len);
	if (!s)
		return NULL;
	s[0] = '\0';
	for (size_t i = 0; i < g->n; i++) {
		if (i)
			strcat(s, " | ");
		strcat(s, g->alts[i]);
	}
	return s;
}

static char *fmt(const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	char *s;
	if (vasprintf(&s, f, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

/* For a `|` alternative or a virtual package of the Build-Depends that the
 * clean chroot resolves to another package than the one the build used. */
static void advise(struct diag_group *g, const struct diag_input *in)
{
	g->write = strdup(g->name);
	if (!in->reg || !in->control || g->reason != SBX_HIDDEN_PKG)
		return;
	unsigned lo = in->log->build_left_out;
	if (lo && pathtab_get(&in->log->left_out, g->name, strlen(g->name))) {
		g->advice = fmt("%s comes with %s only, which a build of type %s leaves out (sbuild "
				"does not install it): this build needs it, so it belongs in "
				"Build-Depends", g->name,
				lo == BUILD_ALL ? "Build-Depends-Indep"
				: lo == BUILD_ANY ? "Build-Depends-Arch"
						  : "Build-Depends-Arch or -Indep",
				build_type_name(in->log->build_parts));
		return;
	}
	int64_t self = package_id(in->reg, g->name);
	for (size_t i = 0; i < in->control->n && !g->advice; i++) {
		const struct dep_group *dg = &in->control->groups[i];
		size_t c = 0;
		while (c < dg->n && !satisfiable(in->reg, dg->alts[c]))
			c++;
		if (c == dg->n)
			continue;
		const char *chosen = dg->alts[c];
		char *text = group_text(dg);
		if (!text)
			return;
		bool listed = false;
		for (size_t a = 0; a < dg->n; a++)
			listed |= !strcmp(dg->alts[a], g->name);
		if (listed && strcmp(chosen, g->name)) {
			g->advice = fmt("debian/control has '%s': a clean chroot gets %s (apt takes the "
					"first alternative it can install), this build needs %s: write "
					"'%s' (first, or alone)", text, chosen, g->name, g->name);
		} else if (self >= 0 && package_id(in->reg, chosen) < 0) {
			/* A virtual package: is it provided by this one, and by
			 * another in the closure? */
			int64_t ids[64];
			int m = registry_satisfiers(in->reg, chosen, "", ids, 64);
			bool provides = false;
			const char *other = NULL;
			char name[SBX_PKG_MAX];
			for (int k = 0; k < m && k < 64; k++) {
				provides |= ids[k] == self;
				if (!other && ids[k] != self && in->closure && registry_pkgset_has(in->closure, ids[k]))
					other = registry_package_name(in->reg, ids[k], name, sizeof name);
			}
			if (provides) {
				free(g->write);
				g->write = fmt("%s | %s", g->name, chosen);
				g->advice = fmt("'%s' in debian/control is a virtual package: a clean chroot "
						"gets %s for it, this build needs %s: write '%s | %s'",
						chosen, other ? other : "another provider", g->name, g->name,
						chosen);
			}
		}
		free(text);
	}
}

/* ---- the failure --------------------------------------------------------- */

/* Strength as a cause: exec, then a refused write (EACCES fails the
 * command that asked), then the evidence order. */
static int cause_strength(int ev)
{
	return ev == EV_EXEC ? 0 : ev + 1;
}

static void find_cause(struct trace_diagnosis *d, const struct tracelog *t)
{
	int best = 1 << 20;
	unsigned long seq = 0;
	for (size_t i = 0; i < d->ngroups; i++)
		for (size_t j = 0; j < d->groups[i].nnodes; j++) {
			const struct diag_node *nd = &d->groups[i].nodes[j];
			const struct trace_proof *p = &nd->f->counts;
			if (p->ev == EV_NONE)
				continue;
			int s = cause_strength(p->ev);
			if (s < best || (s == best && p->seq > seq)) {
				best = s;
				seq = p->seq;
				d->cause = (struct diag_cause){ nd->node, nd->f, p, d->groups[i].name };
			}
		}
	for (size_t i = 0; i < t->refused.cap; i++) {
		const struct trace_finding *f = t->refused.slots[i].val;
		if (!t->refused.slots[i].key || !f)
			continue;
		if (1 < best || (1 == best && f->seq > seq)) {
			best = 1;
			seq = f->seq;
			d->cause = (struct diag_cause){ t->refused.slots[i].key, f, NULL, NULL };
		}
	}
}

/* ---- the verdict --------------------------------------------------------- */

struct buf {
	char *s;
	size_t len, cap;
	bool oom;
};

static void add(struct buf *b, const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	char *s;
	int n = vasprintf(&s, f, ap);
	va_end(ap);
	if (n < 0) {
		b->oom = true;
		return;
	}
	if (b->len + (size_t)n + 1 > b->cap) {
		size_t cap = (b->len + (size_t)n + 1) * 2;
		char *ns = realloc(b->s, cap);
		if (!ns) {
			free(s);
			b->oom = true;
			return;
		}
		b->s = ns;
		b->cap = cap;
	}
	memcpy(b->s + b->len, s, (size_t)n + 1);
	b->len += (size_t)n;
	free(s);
}

static void name_groups(struct buf *b, const struct trace_diagnosis *d, const struct diag_input *in,
			bool strong)
{
	size_t named = 0, more = 0;
	for (size_t i = 0; i < d->nranked; i++) {
		const struct diag_group *g = &d->groups[i];
		if (g->reason != SBX_HIDDEN_PKG || g->brought_by || (g->ev <= EV_COMMAND) != strong)
			continue;
		if (named == VERDICT_NAMES) {
			more++;
			continue;
		}
		char why[1024];
		trace_describe_proof(in->log, g->proof, in->build_dir, why, sizeof why);
		if (strcmp(g->write, g->name))
			add(b, "%s%s (write '%s'; %s)", named ? ", " : "", g->name, g->write, why);
		else
			add(b, "%s%s (%s)", named ? ", " : "", g->name, why);
		named++;
	}
	if (more)
		add(b, " and %zu more", more);
}

static size_t count_heads(const struct trace_diagnosis *d, bool strong)
{
	size_t n = 0;
	for (size_t i = 0; i < d->nranked; i++)
		n += d->groups[i].reason == SBX_HIDDEN_PKG && !d->groups[i].brought_by &&
		     (d->groups[i].ev <= EV_COMMAND) == strong;
	return n;
}

static char *make_verdict(const struct trace_diagnosis *d, const struct diag_input *in)
{
	struct buf b = { 0 };
	const struct tracelog *t = in->log;
	size_t strong = count_heads(d, true), weak = count_heads(d, false), policy = 0;
	for (size_t i = 0; i < d->nranked; i++)
		policy += d->groups[i].reason != SBX_HIDDEN_PKG ? d->groups[i].nnodes : 0;
	if (!strong && !weak) {
		add(&b, "Build-Depends look complete");
	} else {
		if (strong) {
			add(&b, "probably missing: ");
			name_groups(&b, d, in, true);
		}
		if (weak) {
			add(&b, "%spossibly missing: ", strong ? "; " : "");
			name_groups(&b, d, in, false);
		}
	}
	if (policy)
		add(&b, "; %zu path%s hidden by policy rules", policy, policy == 1 ? "" : "s");
	if (t->refused.n)
		add(&b, "; %zu write%s refused", t->refused.n, t->refused.n == 1 ? "" : "s");
	if (d->exit_status > 0) {
		add(&b, "; the build failed (exit status %d", d->exit_status);
		if (d->exit_status > 128)
			add(&b, ": killed by signal %d", d->exit_status - 128);
		add(&b, ")");
		if (d->cause.node && d->cause.proof) {
			/* Its proof is said already when it is its package's. */
			const struct diag_group *cg = find_group(d, d->cause.group);
			char why[1024];
			trace_describe_proof(t, d->cause.proof, in->build_dir, why, sizeof why);
			if (cg && cg->proof == d->cause.proof && !cg->brought_by)
				add(&b, ", most likely because %s was hidden (%s)", d->cause.node, d->cause.group);
			else
				add(&b, ", most likely because %s was hidden (%s: %s)", d->cause.node,
				    d->cause.group, why);
		} else if (d->cause.node) {
			char who[256];
			trace_who(t, d->cause.f->client, in->build_dir, who, sizeof who);
			add(&b, ", most likely because a write to %s was refused (by %s)", d->cause.node, who);
		} else {
			add(&b, ", and kiln hid or refused nothing that counts");
		}
	} else if (d->exit_status < 0) {
		add(&b, "; the build's exit status is unknown");
	}
	if (d->nunused) {
		add(&b, "; unused %s: ", d->unused_label);
		for (size_t i = 0; i < d->nunused; i++)
			add(&b, "%s%s", i ? ", " : "", d->unused[i]);
	}
	if (b.oom) {
		free(b.s);
		return NULL;
	}
	return b.s;
}

/* ---- all of it ----------------------------------------------------------- */

/* A declared name no package of the closure is called, a virtual one (a
 * package of the closure Provides it, and it has no files of its own): the
 * providers in the closure ("perl", "a, b"), for the report to say why
 * nothing of it was reached. NULL for a real package, and on any failure
 * (the note is then left out). */
static char *providers(const struct diag_input *in, const char *name)
{
	int64_t ids[16];
	int n = registry_satisfiers(in->reg, name, "", ids, 16);
	char buf[512];
	size_t len = 0;
	for (int i = 0; i < n && i < 16; i++) {
		if (!registry_pkgset_has(in->closure, ids[i]))
			continue;
		char nm[256];
		registry_package_name(in->reg, ids[i], nm, sizeof nm);
		if (!strcmp(nm, name))
			return NULL;
		int w = snprintf(buf + len, sizeof buf - len, "%s%s", len ? ", " : "", nm);
		if (w < 0 || (size_t)w >= sizeof buf - len)
			break;
		len += (size_t)w;
	}
	return len ? strdup(buf) : NULL;
}

int trace_diagnose(const struct diag_input *in, struct trace_diagnosis *d, FILE *warn)
{
	const struct tracelog *t = in->log;
	*d = (struct trace_diagnosis){ .exit_status = in->exit_status,
				       .unused_label = in->control ? "Build-Depends" : "declared dependencies" };
	int rc = -1;
	size_t n = 0;
	struct item *v = calloc(t->hidden.n + 1, sizeof *v);
	if (!v)
		return -1;
	for (size_t i = 0; i < t->hidden.cap; i++) {
		const struct trace_finding *f = t->hidden.slots[i].val;
		if (!t->hidden.slots[i].key || !f)
			continue;
		v[n] = (struct item){ t->hidden.slots[i].key, f,
				      f->reason == SBX_HIDDEN_PKG ? f->pkg
				      : f->reason == SBX_HIDDEN_RULE ? rule_group
				      : f->reason == SBX_HIDDEN_UNOWNED ? unowned_group : unknown_group };
		n++;
	}
	attribute(v, n, in->reg);
	qsort(v, n, sizeof *v, by_group_then_proof);
	if (make_groups(d, v, n) < 0)
		goto out;
	d->violations += t->refused.n;
	for (size_t i = 0; i < d->ngroups; i++)
		d->nranked += d->groups[i].ev != EV_NONE;
	if (in->reg)
		find_bringers(d, in->reg);
	if (sort_groups(d) < 0)
		goto out;
	for (size_t i = 0; i < d->ngroups; i++) {
		advise(&d->groups[i], in);
		if (!d->groups[i].write)
			goto out;
	}
	d->complete = count_heads(d, true) + count_heads(d, false) == 0;
	if (d->exit_status > 0)
		find_cause(d, t);

	/* A failed build stopped before it used what it needed later: its
	 * unused list would be wrong. */
	if (in->reg && in->closure && t->ndeclared && d->exit_status == 0) {
		char err[1024];
		struct registry_pkgset touched = { 0 };
		size_t *idx = calloc(t->ndeclared, sizeof *idx);
		long k = idx ? 0 : -1;
		if (k == 0 && (in->touched ? touched_finish(in->touched, t, &touched, err, sizeof err)
					   : trace_touched_packages(t, in->policy, in->reg, &touched, err,
								    sizeof err)) < 0)
			k = -1;
		if (k == 0)
			k = trace_unused_deps(in->reg, in->profile, t->declared, t->ndeclared, in->closure,
					      &touched, in->touched ? touched_rests(in->touched) : NULL,
					      idx, err, sizeof err);
		if (k >= 0 && (d->unused = calloc((size_t)k + 1, sizeof *d->unused)) &&
		    (d->unused_by = calloc((size_t)k + 1, sizeof *d->unused_by))) {
			for (long i = 0; i < k; i++) {
				d->unused[i] = t->declared[idx[i]];
				d->unused_by[i] = providers(in, d->unused[i]);
			}
			d->nunused = (size_t)k;
			d->unused_known = true;
		} else if (k < 0 && warn) {
			fprintf(warn, "kiln trace: unused Build-Depends not worked out: %s\n",
				idx ? err : "out of memory");
		}
		free(idx);
		registry_pkgset_free(&touched);
	}
	d->verdict = make_verdict(d, in);
	rc = d->verdict ? 0 : -1;
out:
	free(v);
	return rc;
}

void trace_diagnosis_free(struct trace_diagnosis *d)
{
	for (size_t i = 0; d->unused_by && i < d->nunused; i++)
		free(d->unused_by[i]);
	free(d->unused_by);
	for (size_t i = 0; i < d->ngroups; i++) {
		free(d->groups[i].name);
		free(d->groups[i].nodes);
		free(d->groups[i].brought_by);
		free(d->groups[i].write);
		free(d->groups[i].advice);
	}
	free(d->groups);
	free(d->unused);
	free(d->verdict);
	*d = (struct trace_diagnosis){ 0 };
}
