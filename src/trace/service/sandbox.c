/* Path resolution one component at a time, as the kernel would do it, with
 * every node reached (intermediate directories, each symlink traversed, the
 * final node) checked against the policy and the registry. A hidden node hides
 * everything reached through it.
 *
 * Three memos, all keyed by what cannot change meaning during a run:
 * - visibility of a canonical node (policy + registry: fixed for the run);
 * - what lstat (and readlink, for a symlink) said of a canonical node in a
 *   registry-managed tree, for the reason given next: a new path below
 *   /usr/include costs one lstat, not one per component;
 * - the whole walk of a path as asked, but only when every node the walk
 *   visited lies in a registry-managed tree (an ask rule, or a read/deny rule
 *   nested in one, never under /proc): those trees do not change while the
 *   build runs, and the build cannot write there (refused). A walk that
 *   touched anything else (the build directory, /tmp, /proc, the catch-all
 *   read area) is redone on every query: a path there can become a symlink
 *   at any moment. A write let through into a managed tree (--report-only)
 *   forgets the walk memo and the node memo. */
#include "trace/service/sandbox.h"

#include "ipc/proto.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LINKS 40 /* the kernel's limit (ELOOP) */

enum vis {
	VIS_VISIBLE = 0,
	VIS_UNKNOWN,        /* ask-tree, not in the registry */
	VIS_HIDDEN_PKG,
	VIS_HIDDEN_RULE,
	VIS_FAILED,
	VIS_HIDDEN_UNOWNED, /* owned-tree, no owner in the closure */
};

static bool vis_hidden(enum vis v)
{
	return v == VIS_HIDDEN_PKG || v == VIS_HIDDEN_RULE || v == VIS_HIDDEN_UNOWNED;
}

#define WALK_MEMO_MAX 262144 /* entries; beyond, walks are not memoised */

struct memo_entry {
	enum vis vis;
	char pkg[];
};

enum walk_outcome { WALK_FAILED, WALK_HIDDEN, WALK_DONE };

/* What a walk found, apart from d->node, d->pkg, d->exists and the
 * identities in d. */
struct walk {
	enum vis vis;  /* WALK_HIDDEN: why; WALK_DONE: visibility of the final node */
	bool is_link, is_dir;
	bool stable;   /* every node visited lies in a managed tree */
	bool links;    /* a symlink was followed */
	bool too_long; /* met a name too long for its file system */
	bool fd_link;  /* ended on a descriptor's magic link (/proc/PID/fd/N) */
};

#define NODE_MEMO_MAX 262144 /* entries; beyond, lstat every time */

/* What lstat said of a node: 0 and its mode and identity, or ENOENT or
 * ENOTDIR; a symlink's target (readlink) with it. */
struct node_seen {
	int err;
	mode_t mode;
	uint64_t dev, ino;
	size_t tlen;
	char target[];
};

struct walk_entry {
	unsigned char outcome, vis;
	bool exists, is_link, is_dir;
	size_t nodelen;
	char strs[]; /* node NUL pkg NUL below NUL */
};

static bool prefix_covers(const struct policy_rule *r, const char *path)
{
	if (r->len == 1)
		return path[0] == '/';
	return !strncmp(path, r->prefix, r->len) && (path[r->len] == '\0' || path[r->len] == '/');
}

/* A rule's area is a managed tree: an ask rule, or a read/deny rule whose
 * nearest enclosing rule is (transitively) an ask rule. Rules are sorted
 * longest first, so enclosing rules come later. */
static unsigned char *stable_rules(const struct policy *p)
{
	unsigned char *st = calloc(p->n ? p->n : 1, 1);
	if (!st)
		return NULL;
	for (size_t i = p->n; i-- > 0;) {
		const struct policy_rule *r = &p->rules[i];
		if (r->action == POLICY_ASK || r->action == POLICY_OWNED) {
			st[i] = 1;
		} else if (r->action != POLICY_ALLOW) {
			for (size_t j = i + 1; j < p->n; j++)
				if (p->rules[j].len < r->len && prefix_covers(&p->rules[j], r->prefix)) {
					st[i] = st[j];
					break;
				}
		}
	}
	return st;
}

static bool rule_stable(const struct sandbox *s, const struct policy_rule *r)
{
	return r && s->stable_rule && s->stable_rule[r - s->policy->rules];
}

static enum policy_action rule_action(const struct policy_rule *r)
{
	return r ? r->action : POLICY_READ;
}

void sandbox_init(struct sandbox *s, const struct policy *compiled, struct sbx_oracle oracle)
{
	s->policy = compiled;
	s->oracle = oracle;
	s->memo = (struct pathtab){ 0 };
	s->oracle_calls = 0;
	const char *off = getenv("KILN_TRACE_NO_MEMO");
	s->memo_walks = !(off && *off && strcmp(off, "0"));
	s->walks = (struct pathtab){ 0 };
	s->nodes = (struct pathtab){ 0 };
	s->node_hits = 0;
	/* Also without the memo: the verdict cache asks d->stable. */
	s->stable_rule = stable_rules(compiled);
	if (!s->stable_rule)
		s->memo_walks = false;
	s->walk_hits = s->walk_flushes = 0;
	struct stat st;
	s->root_id = stat("/", &st) == 0 ? (struct sbx_id){ st.st_dev, st.st_ino } : (struct sbx_id){ 0 };
	s->proc_dev = stat("/proc", &st) == 0 ? st.st_dev : 0;
}

void sandbox_free(struct sandbox *s)
{
	pathtab_free(&s->memo, free);
	pathtab_free(&s->walks, free);
	pathtab_free(&s->nodes, free);
	free(s->stable_rule);
	s->stable_rule = NULL;
}

static enum vis visibility_by_rule(struct sandbox *s, const struct policy_rule *r, const char *path,
				   size_t len, char *pkg);

/* Visibility of an existing canonical node under rule r (policy_match of
 * path); pkg receives the owner when hidden by a package. A directory on
 * the way to a more specific rule that shows something stays visible. */
static enum vis visibility(struct sandbox *s, const struct policy_rule *r, const char *path,
			   size_t len, char *pkg)
{
	enum vis v = visibility_by_rule(s, r, path, len, pkg);
	if (vis_hidden(v) && policy_leads_to_visible(s->policy, path, len)) {
		pkg[0] = '\0';
		return VIS_VISIBLE;
	}
	return v;
}

static enum vis visibility_by_rule(struct sandbox *s, const struct policy_rule *r, const char *path,
				   size_t len, char *pkg)
{
	pkg[0] = '\0';
	enum policy_action action = rule_action(r);
	switch (action) {
	case POLICY_ALLOW:
	case POLICY_READ:
		return VIS_VISIBLE;
	case POLICY_DENY:
		return VIS_HIDDEN_RULE;
	case POLICY_ASK:
	case POLICY_OWNED:
		break;
	}
	struct memo_entry *m = pathtab_get(&s->memo, path, len);
	if (m) {
		snprintf(pkg, SBX_PKG_MAX, "%s", m->pkg);
		return m->vis;
	}
	s->oracle_calls++;
	int own = s->oracle.owner(s->oracle.ctx, path, pkg, SBX_PKG_MAX);
	enum vis v = own == SBX_OWNER_DEP ? VIS_VISIBLE
		   : own == SBX_OWNER_FOREIGN ? VIS_HIDDEN_PKG
		   : own < 0 ? VIS_FAILED
		   : action == POLICY_OWNED ? (policy_is_skeleton(s->policy, path) ? VIS_VISIBLE
								     : VIS_HIDDEN_UNOWNED)
		   : own == SBX_OWNER_UNMANAGED ? VIS_VISIBLE
		   : own == SBX_OWNER_NONE ? VIS_UNKNOWN : VIS_FAILED;
	if (v == VIS_FAILED)
		return v; /* not memoised: a later query may succeed */
	size_t pl = strlen(pkg);
	m = malloc(sizeof *m + pl + 1);
	bool added;
	void **slot = m ? pathtab_put(&s->memo, path, len, &added) : NULL;
	if (!slot) {
		free(m);
		return v;
	}
	m->vis = v;
	memcpy(m->pkg, pkg, pl + 1);
	*slot = m;
	return v;
}

static bool all_digits(const char *s, size_t n)
{
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)s[i]))
			return false;
	return true;
}

/* What follows "/proc/PID" or "/proc/PID/task/TID" in p (NULL if p does not
 * start that way); *pid_end gets the end of "/proc/PID". */
static const char *after_proc_pid(const char *p, const char **pid_end)
{
	if (strncmp(p, "/proc/", 6))
		return NULL;
	const char *q = p + 6;
	size_t n = strcspn(q, "/");
	if (!all_digits(q, n))
		return NULL;
	q += n;
	*pid_end = q;
	if (!strncmp(q, "/task/", 6)) {
		q += 6;
		n = strcspn(q, "/");
		if (!all_digits(q, n))
			return NULL;
		q += n;
	}
	return q;
}

/* /proc/PID/fd/N or /proc/PID/task/TID/fd/N: a magic link to a file the
 * process already holds open, reopened by the kernel without a path walk. */
static bool is_fd_magic_link(const char *p)
{
	const char *pid_end, *q = after_proc_pid(p, &pid_end);
	return q && !strncmp(q, "/fd/", 4) && all_digits(q + 4, strlen(q + 4));
}

/* /proc/PID/root or /proc/PID/cwd (or under task/TID/) of a process in
 * another mount namespace: the kernel follows it into a tree the server
 * cannot resolve (readlink shows a path of that namespace). True also when
 * the namespace cannot be read: never answer ALLOW for such a path. */
static bool proc_link_elsewhere(const char *p)
{
	const char *pid_end, *q = after_proc_pid(p, &pid_end);
	if (!q || (strcmp(q, "/root") && strcmp(q, "/cwd")))
		return false;
	char ns[64];
	snprintf(ns, sizeof ns, "%.*s/ns/mnt", (int)(pid_end - p), p);
	struct stat theirs, ours;
	return stat(ns, &theirs) < 0 || stat("/proc/self/ns/mnt", &ours) < 0 ||
	       theirs.st_ino != ours.st_ino || theirs.st_dev != ours.st_dev;
}

/* The walk ends on a magic link of /proc (a file the process holds, a
 * namespace): what an open reaches is the object it stands for, whose
 * identity stat() gives (the server may read the asker's /proc/PID: same
 * user). */
static void magic_end(struct sbx_decision *d, struct walk *w, const char *node)
{
	struct stat held;
	d->exists = true;
	w->is_link = true;
	if (stat(node, &held) == 0) {
		d->id_flags |= KILN_ID_FILE;
		d->dev = held.st_dev;
		d->ino = held.st_ino;
	}
}

/* Appends the rest of a path lexically (for a path that does not exist):
 * "." dropped, ".." pops. Returns the new length or -1 if too long. */
static long append_lexical(char *cur, size_t clen, const char *rest)
{
	while (*rest) {
		while (*rest == '/')
			rest++;
		size_t n = strcspn(rest, "/");
		if (!n)
			break;
		if (n == 2 && rest[0] == '.' && rest[1] == '.') {
			while (clen && cur[clen - 1] != '/')
				clen--;
			if (clen)
				clen--;
		} else if (!(n == 1 && rest[0] == '.')) {
			if (clen + 1 + n + 1 > SBX_BUF)
				return -1;
			cur[clen++] = '/';
			memcpy(cur + clen, rest, n);
			clen += n;
		}
		rest += n;
	}
	cur[clen] = '\0';
	return (long)clen;
}

/* Copies src (which may lie inside dst) into dst, truncated to cap - 1. */
static void set_str(char *dst, size_t cap, const char *src)
{
	size_t n = strnlen(src, cap - 1);
	memmove(dst, src, n);
	dst[n] = '\0';
}

/* A directory hidden because every package owning it is outside the closure
 * names one of them; when the registry knows the path asked below it (read
 * lexically: the build cannot see what is there), its owner is the package
 * the build reached for, and that path is where the report files it:
 * /usr/share/perl5/Module is libmodule-runtime-perl's and
 * libmodule-implementation-perl's, Module/Runtime.pm only the first's.
 * Only the report's attribution changes, never the verdict. */
static void owner_below(struct sandbox *s, const char *dir, size_t dlen, const char *rest,
			char *pkg, char *below)
{
	rest += strspn(rest, "/");
	if (!*rest)
		return;
	char owner[SBX_PKG_MAX];
	memcpy(below, dir, dlen + 1);
	long l = append_lexical(below, dlen, rest);
	if (l <= (long)dlen || below[dlen] != '/' || memcmp(below, dir, dlen)) {
		below[0] = '\0'; /* '..' back out of the directory: not below it */
		return;
	}
	s->oracle_calls++;
	if (s->oracle.owner(s->oracle.ctx, below, owner, sizeof owner) == SBX_OWNER_FOREIGN)
		memcpy(pkg, owner, strlen(owner) + 1);
	else
		below[0] = '\0';
}

static void hide(struct sbx_decision *d, enum vis v, const char *node, const char *pkg)
{
	d->verdict = KILN_V_HIDE;
	d->reason = v == VIS_HIDDEN_PKG ? SBX_HIDDEN_PKG
		  : v == VIS_HIDDEN_RULE ? SBX_HIDDEN_RULE
		  : v == VIS_HIDDEN_UNOWNED ? SBX_HIDDEN_UNOWNED : SBX_HIDDEN_UNKNOWN;
	set_str(d->node, sizeof d->node, node);
	set_str(d->pkg, sizeof d->pkg, pkg);
}

static void fail(struct sbx_decision *d, const char *path)
{
	d->verdict = KILN_V_DENY;
	d->reason = SBX_FAILED;
	set_str(d->node, sizeof d->node, path);
}

/* lstat(cur) (clen bytes), from the node memo for a node of a managed tree
 * (`stable`), kept there after the first time; *seen is then the kept
 * answer, whose target a symlink's walk uses instead of readlink. An answer
 * other than success, ENOENT or ENOTDIR is never kept (the walk fails
 * closed on it), nor a symlink whose target cannot be read. */
static int node_lstat(struct sandbox *s, const char *cur, size_t clen, bool stable, struct stat *st,
		      const struct node_seen **seen)
{
	*seen = NULL;
	stable = stable && s->memo_walks;
	const struct node_seen *n = stable ? pathtab_get(&s->nodes, cur, clen) : NULL;
	if (n) {
		s->node_hits++;
		*seen = n;
		if (n->err) {
			errno = n->err;
			return -1;
		}
		st->st_mode = n->mode;
		st->st_dev = (dev_t)n->dev;
		st->st_ino = (ino_t)n->ino;
		return 0;
	}
	int rc = lstat(cur, st), err = rc < 0 ? errno : 0;
	if (!stable || (err && err != ENOENT && err != ENOTDIR) || s->nodes.n >= NODE_MEMO_MAX)
		goto out;
	ssize_t tl = 0;
	if (!err && S_ISLNK(st->st_mode) && (tl = readlink(cur, s->tmp, SBX_BUF - 1)) <= 0)
		goto out;
	struct node_seen *e = malloc(sizeof *e + (size_t)tl + 1);
	bool added;
	void **slot = e ? pathtab_put(&s->nodes, cur, clen, &added) : NULL;
	if (!slot || !added) {
		free(e);
		goto out;
	}
	*e = (struct node_seen){ .err = err, .mode = err ? 0 : st->st_mode,
				 .dev = err ? 0 : st->st_dev, .ino = err ? 0 : st->st_ino,
				 .tlen = (size_t)tl };
	memcpy(e->target, s->tmp, (size_t)tl);
	e->target[tl] = '\0';
	*slot = e;
	*seen = e;
out:
	errno = err;
	return rc;
}

/* Whether what lstat says of node `cur` (clen bytes, under `rule`) holds
 * for the whole run: it lies in a managed tree, and not under /proc. */
static bool node_in_managed_tree(const struct sandbox *s, const struct policy_rule *rule,
				 const char *cur, size_t clen)
{
	return rule_stable(s, rule) &&
	       !(clen >= 5 && !memcmp(cur, "/proc", 5) && (clen == 5 || cur[5] == '/'));
}

int sandbox_lstat(struct sandbox *s, const char *node, struct stat *st)
{
	size_t len = strlen(node);
	const struct node_seen *seen;
	return node_lstat(s, node, len,
			  node_in_managed_tree(s, policy_match(s->policy, node), node, len), st, &seen);
}

/* Resolves `path` (absolute, shorter than SBX_BUF) into d->node, d->pkg and
 * d->exists, and *w. On WALK_HIDDEN the decision is already marked hidden; on
 * WALK_FAILED, failed. */
static enum walk_outcome walk(struct sandbox *s, pid_t pid, const char *path, bool follow_last,
			      struct sbx_decision *d, struct walk *w)
{
	char *cur = d->node; /* canonical prefix resolved so far; "" is the root */
	size_t clen = 0;
	size_t depth = 0;    /* components in cur; s->ids[depth] is cur's identity */
	char pkg[SBX_PKG_MAX];
	int links = 0;
	s->ids[0] = s->root_id;

	*w = (struct walk){ .vis = VIS_VISIBLE, .stable = true };
	size_t plen = strlen(path);
	memcpy(s->todo, path, plen + 1);
	size_t tpos = 0;

	for (;;) {
		while (s->todo[tpos] == '/')
			tpos++;
		if (!s->todo[tpos]) {
			d->exists = true;
			d->id_flags |= KILN_ID_FILE;
			d->dev = s->ids[depth].dev;
			d->ino = s->ids[depth].ino;
			if (d->dev == s->proc_dev)
				d->id_flags |= KILN_ID_DEV_ONLY;
			if (depth) { /* where a name replacing it would be made */
				d->id_flags |= KILN_ID_DIR;
				d->dir_dev = s->ids[depth - 1].dev;
				d->dir_ino = s->ids[depth - 1].ino;
			}
			break;
		}
		const char *comp = s->todo + tpos;
		size_t n = strcspn(comp, "/");
		tpos += n;
		size_t after = tpos;
		while (s->todo[after] == '/')
			after++;
		bool last = !s->todo[after];

		if (n == 1 && comp[0] == '.')
			continue;
		if (n == 2 && comp[0] == '.' && comp[1] == '.') {
			while (clen && cur[clen - 1] != '/')
				clen--;
			if (clen)
				clen--;
			cur[clen] = '\0';
			if (depth)
				depth--;
			continue;
		}
		char pidbuf[24];
		if (clen == 5 && !memcmp(cur, "/proc", 5) &&
		    ((n == 4 && !memcmp(comp, "self", 4)) || (n == 11 && !memcmp(comp, "thread-self", 11)))) {
			/* The client's /proc/self, not the server's. */
			n = (size_t)snprintf(pidbuf, sizeof pidbuf, "%ld", (long)pid);
			comp = pidbuf;
			w->stable = false;
		}
		size_t before = clen;
		if (clen + 1 + n + 1 > SBX_BUF || depth + 1 >= sizeof s->ids / sizeof s->ids[0]) {
			fail(d, path);
			return WALK_FAILED;
		}
		depth++;
		cur[clen++] = '/';
		memmove(cur + clen, comp, n);
		clen += n;
		cur[clen] = '\0';

		const struct policy_rule *rule = policy_match(s->policy, cur);
		bool node_stable = node_in_managed_tree(s, rule, cur, clen);
		if (!node_stable)
			w->stable = false;
		struct stat st;
		const struct node_seen *seen;
		if (node_lstat(s, cur, clen, node_stable, &st, &seen) < 0) {
			/* A name too long for its file system, in a directory
			 * this walk reached (cur is short of PATH_MAX, so the
			 * name is what is too long): nothing can have it, and the
			 * kernel fails every call reaching it with ENAMETOOLONG,
			 * whatever the call would do. Rare: not kept. */
			if (errno == ENAMETOOLONG && clen < PATH_MAX) {
				w->too_long = true;
				w->stable = false;
				break;
			}
			/* Only "does not exist" is the kernel's answer too; any other
			 * failure (a canonical form past PATH_MAX, EACCES, EIO...)
			 * says nothing about what the build's call reaches: fail
			 * closed. */
			if (errno != ENOENT && errno != ENOTDIR) {
				fail(d, path);
				return WALK_FAILED;
			}
			/* Does not exist: the kernel fails the call itself; the
			 * rest only matters for the write check. A last name may
			 * be created: in the directory this walk saw. */
			if (last && errno == ENOENT) {
				d->id_flags |= KILN_ID_DIR;
				d->dir_dev = s->ids[depth - 1].dev;
				d->dir_ino = s->ids[depth - 1].ino;
			}
			long l = append_lexical(cur, clen, s->todo + tpos);
			if (l < 0) {
				fail(d, path);
				return WALK_FAILED;
			}
			clen = (size_t)l;
			break;
		}
		s->ids[depth] = (struct sbx_id){ st.st_dev, st.st_ino };
		enum vis v = visibility(s, rule, cur, clen, pkg);
		if (v == VIS_FAILED) {
			fail(d, cur);
			return WALK_FAILED;
		}
		if (vis_hidden(v)) {
			if (v == VIS_HIDDEN_PKG && S_ISDIR(st.st_mode))
				owner_below(s, cur, clen, s->todo + tpos, pkg, d->below);
			hide(d, v, cur, pkg);
			w->vis = v;
			return WALK_HIDDEN;
		}
		if (S_ISLNK(st.st_mode) && (!last || follow_last)) {
			if (last && is_fd_magic_link(cur)) {
				magic_end(d, w, cur);
				w->fd_link = true;
				return WALK_DONE;
			}
			if (proc_link_elsewhere(cur)) {
				fail(d, path);
				return WALK_FAILED;
			}
			if (++links > MAX_LINKS)
				break; /* ELOOP for the kernel too */
			w->links = true;
			ssize_t tl = seen ? (ssize_t)seen->tlen : readlink(cur, s->tmp, SBX_BUF - 1);
			if (seen)
				memcpy(s->tmp, seen->target, seen->tlen);
			if (tl <= 0) {
				fail(d, path); /* changed under us: fail closed */
				return WALK_FAILED;
			}
			const char *pid_end;
			if (s->tmp[0] != '/' && after_proc_pid(cur, &pid_end)) {
				/* A magic link to no path (ns/mnt -> "mnt:[4026531841]",
				 * a socket held open): the kernel opens the object. */
				if (!last)
					break; /* ENOTDIR for the kernel */
				magic_end(d, w, cur);
				return WALK_DONE;
			}
			size_t rest = strlen(s->todo + tpos);
			if ((size_t)tl + 1 + rest + 1 > SBX_BUF) {
				fail(d, path);
				return WALK_FAILED;
			}
			s->tmp[tl] = '/';
			memcpy(s->tmp + tl + 1, s->todo + tpos, rest + 1);
			memcpy(s->todo, s->tmp, (size_t)tl + 1 + rest + 1);
			tpos = 0;
			clen = s->todo[0] == '/' ? 0 : before;
			depth = s->todo[0] == '/' ? 0 : depth - 1;
			cur[clen] = '\0';
			continue;
		}
		if (last) {
			w->vis = v;
			w->is_link = S_ISLNK(st.st_mode);
			w->is_dir = S_ISDIR(st.st_mode);
		} else if (!S_ISDIR(st.st_mode)) {
			break; /* ENOTDIR for the kernel */
		}
	}
	if (clen == 0) {
		cur[0] = '/';
		cur[1] = '\0';
	}
	return WALK_DONE;
}

static void walk_remember(struct sandbox *s, size_t klen, enum walk_outcome o,
			  const struct walk *w, const struct sbx_decision *d)
{
	if (s->walks.n >= WALK_MEMO_MAX)
		return;
	size_t nl = strlen(d->node), pl = strlen(d->pkg), bl = strlen(d->below);
	struct walk_entry *e = malloc(sizeof *e + nl + 1 + pl + 1 + bl + 1);
	if (!e)
		return;
	bool added;
	void **slot = pathtab_put(&s->walks, s->key, klen, &added);
	if (!slot || !added) {
		free(e);
		return;
	}
	*e = (struct walk_entry){ .outcome = (unsigned char)o, .vis = (unsigned char)w->vis,
				  .exists = d->exists, .is_link = w->is_link, .is_dir = w->is_dir,
				  .nodelen = nl };
	memcpy(e->strs, d->node, nl + 1);
	memcpy(e->strs + nl + 1, d->pkg, pl + 1);
	memcpy(e->strs + nl + 1 + pl + 1, d->below, bl + 1);
	*slot = e;
}

static enum walk_outcome walk_recall(const struct walk_entry *e, struct walk *w,
				     struct sbx_decision *d)
{
	*w = (struct walk){ .vis = (enum vis)e->vis, .is_link = e->is_link, .is_dir = e->is_dir,
			    .stable = true };
	d->exists = e->exists;
	if (e->outcome == WALK_HIDDEN) {
		const char *pkg = e->strs + e->nodelen + 1;
		hide(d, w->vis, e->strs, pkg);
		set_str(d->below, sizeof d->below, pkg + strlen(pkg) + 1);
		return WALK_HIDDEN;
	}
	memcpy(d->node, e->strs, e->nodelen + 1);
	return WALK_DONE;
}

/* A write through a descriptor's magic link (the walk's last node,
 * d->node) is a write to the file the process holds, which the kernel
 * reopens, truncates or changes through it: its own path, put in s->tmp
 * (1). 0: no path (a pipe, a socket: the kernel's business). -1: a path
 * that is not the held file's (renamed since, another mount namespace):
 * nothing to decide the write on. A deleted file's former path ("PATH
 * (deleted)", no links left) is where it was. */
static int held_file_path(struct sandbox *s, const struct sbx_decision *d)
{
	static const char deleted[] = " (deleted)";
	const size_t dl = sizeof deleted - 1;
	ssize_t n = readlink(d->node, s->tmp, SBX_BUF - 1);
	if (n <= 0)
		return -1;
	s->tmp[n] = '\0';
	if (s->tmp[0] != '/')
		return 0;
	if (!(d->id_flags & KILN_ID_FILE)) /* magic_end could not stat the held file */
		return -1;
	struct stat named, held;
	if (stat(s->tmp, &named) == 0 && named.st_dev == d->dev && named.st_ino == d->ino)
		return 1;
	if ((size_t)n > dl && !strcmp(s->tmp + n - dl, deleted) && stat(d->node, &held) == 0 &&
	    held.st_nlink == 0) {
		s->tmp[n - dl] = '\0';
		return 1;
	}
	return -1;
}

/* The policy action a name at `node` would have if it did not exist: its
 * own, unless a deny rule covers it (that rule is what hides it); then the
 * action of the area around the rule. */
static enum policy_action absent_action(struct sandbox *s, const char *node)
{
	enum policy_action a = policy_action_for(s->policy, node);
	set_str(s->tmp, SBX_BUF, node);
	while (a == POLICY_DENY) {
		const struct policy_rule *r = policy_match(s->policy, s->tmp);
		if (!r || r->len <= 1)
			break;
		set_str(s->tmp, SBX_BUF, r->prefix);
		char *slash = strrchr(s->tmp, '/');
		if (slash == s->tmp)
			slash[1] = '\0';
		else
			*slash = '\0';
		a = policy_action_for(s->policy, s->tmp);
	}
	return a;
}

void sandbox_decide(struct sandbox *s, pid_t pid, const char *path, unsigned access,
		    unsigned qflags, struct sbx_decision *d)
{
	bool follow_last = !(qflags & KILN_Q_NOFOLLOW);
	bool probe = qflags & KILN_Q_PROBE;

	d->verdict = KILN_V_ALLOW;
	d->reason = SBX_OK;
	d->exists = false;
	d->unknown = false;
	d->stable = false;
	d->links = false;
	d->id_flags = 0;
	d->dev = d->ino = d->dir_dev = d->dir_ino = 0;
	d->pkg[0] = '\0';
	d->node[0] = '\0';
	d->below[0] = '\0';

	size_t plen = strlen(path);
	if (path[0] != '/' || plen >= SBX_BUF) {
		fail(d, path);
		return;
	}
	/* A trailing slash asks for a directory: a final symlink is followed. */
	if (plen > 1 && path[plen - 1] == '/')
		follow_last = true;

	struct walk w;
	enum walk_outcome o;
	size_t klen = plen + 2;
	struct walk_entry *e = NULL;
	if (s->memo_walks) {
		memcpy(s->key, path, plen);
		s->key[plen] = '\0';
		s->key[plen + 1] = follow_last ? 'F' : 'N';
		e = pathtab_get(&s->walks, s->key, klen);
	}
	if (e) {
		s->walk_hits++;
		o = walk_recall(e, &w, d);
	} else {
		o = walk(s, pid, path, follow_last, d, &w);
		if (o == WALK_FAILED)
			return;
		if (s->memo_walks && w.stable)
			walk_remember(s, klen, o, &w, d);
	}
	d->stable = w.stable;
	d->links = w.links;
	if (o == WALK_HIDDEN)
		goto hidden;
	if (w.too_long)
		return; /* ALLOW, reads and writes alike: the kernel says ENAMETOOLONG */

	if (d->exists && w.vis == VIS_UNKNOWN && !w.is_link) {
		if (s->policy->unknown == UNKNOWN_HIDE) {
			hide(d, VIS_UNKNOWN, d->node, "");
			goto hidden;
		}
		d->unknown = s->policy->unknown == UNKNOWN_REPORT;
	}
	unsigned writes = access & (KILN_A_WRITE | KILN_A_CREATE | KILN_A_DELETE);
	/* Creating a name that exists as a directory changes nothing: the kernel
	 * answers EEXIST (mkdir -p walks every ancestor that way). A probe of
	 * a missing name is the kernel's ENOENT. */
	if ((writes == KILN_A_CREATE && d->exists && w.is_dir) || (probe && !d->exists))
		writes = 0;
	if (writes && w.fd_link) {
		int held = held_file_path(s, d);
		if (held < 0) {
			fail(d, d->node);
		} else if (held > 0 && policy_action_for(s->policy, s->tmp) != POLICY_ALLOW &&
			   !policy_is_artifact(s->policy, s->tmp)) {
			set_str(d->node, sizeof d->node, s->tmp); /* the report names the file */
			d->verdict = KILN_V_DENY;
			d->reason = probe ? SBX_WRITE_PROBE : SBX_WRITE_REFUSED;
		}
		return;
	}
	if (writes && policy_action_for(s->policy, d->node) != POLICY_ALLOW &&
	    !policy_is_artifact(s->policy, d->node)) {
		d->verdict = KILN_V_DENY;
		d->reason = probe ? SBX_WRITE_PROBE : SBX_WRITE_REFUSED;
	}
	return;

hidden:
	if (probe)
		return; /* access() of an absent name: ENOENT, wherever it is */
	/* A hidden path answers as an absent one would in the same place
	 * (docs/policy.md): where writes are refused, a write, create or
	 * delete is refused whether the name exists or not; and creating a
	 * hidden name cannot succeed anywhere (it would clobber the hidden
	 * file). Still reported as hidden. */
	if ((access & KILN_A_CREATE) ||
	    ((access & (KILN_A_WRITE | KILN_A_DELETE)) && absent_action(s, d->node) != POLICY_ALLOW))
		d->verdict = KILN_V_DENY;
}

void sandbox_write_passed(struct sandbox *s, const char *path, unsigned access,
			  const struct sbx_decision *d)
{
	if (!(access & (KILN_A_WRITE | KILN_A_CREATE | KILN_A_DELETE)) || (!s->walks.n && !s->nodes.n))
		return;
	if (rule_stable(s, policy_match(s->policy, d->node)) ||
	    rule_stable(s, policy_match(s->policy, path))) {
		pathtab_free(&s->walks, free);
		pathtab_free(&s->nodes, free);
		s->walk_flushes++;
	}
}

bool sandbox_path_stable(const struct sandbox *s, const char *path)
{
	if (!strncmp(path, "/proc", 5) && (path[5] == '\0' || path[5] == '/'))
		return false;
	return rule_stable(s, policy_match(s->policy, path));
}

bool sandbox_entry_hidden(struct sandbox *s, const char *dir, const char *name)
{
	size_t dl = strlen(dir), nl = strlen(name);
	if (dl + 1 + nl + 1 > SBX_BUF)
		return false;
	char *p = s->tmp;
	memcpy(p, dir, dl);
	size_t o = dl;
	if (!(dl == 1 && dir[0] == '/'))
		p[o++] = '/';
	memcpy(p + o, name, nl + 1);
	struct stat st;
	if (lstat(p, &st) < 0)
		return false;
	char pkg[SBX_PKG_MAX];
	enum vis v = visibility(s, policy_match(s->policy, p), p, o + nl, pkg);
	if (vis_hidden(v))
		return true;
	return v == VIS_UNKNOWN && s->policy->unknown == UNKNOWN_HIDE && !S_ISLNK(st.st_mode);
}
