/* Path resolution one component at a time, as the kernel would do it, with
 * every node reached (intermediate directories, each symlink traversed, the
 * final node) checked against the policy and the registry. A hidden node hides
 * everything reached through it. */
#include "trace/service/sandbox.h"

#include <ctype.h>
#include <errno.h>
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
};

struct memo_entry {
	enum vis vis;
	char pkg[];
};

void sandbox_init(struct sandbox *s, const struct policy *compiled, struct sbx_oracle oracle)
{
	s->policy = compiled;
	s->oracle = oracle;
	s->memo = (struct pathtab){ 0 };
	s->oracle_calls = 0;
}

void sandbox_free(struct sandbox *s)
{
	pathtab_free(&s->memo, free);
}

/* Visibility of an existing canonical node; pkg receives the owner when
 * hidden by a package. */
static enum vis visibility(struct sandbox *s, const char *path, size_t len, char *pkg)
{
	pkg[0] = '\0';
	switch (policy_action_for(s->policy, path)) {
	case POLICY_ALLOW:
	case POLICY_READ:
		return VIS_VISIBLE;
	case POLICY_DENY:
		return VIS_HIDDEN_RULE;
	case POLICY_ASK:
		break;
	}
	struct memo_entry *m = pathtab_get(&s->memo, path, len);
	if (m) {
		snprintf(pkg, SBX_PKG_MAX, "%s", m->pkg);
		return m->vis;
	}
	s->oracle_calls++;
	int own = s->oracle.owner(s->oracle.ctx, path, pkg, SBX_PKG_MAX);
	enum vis v = own == SBX_OWNER_DEP || own == SBX_OWNER_UNMANAGED ? VIS_VISIBLE
		   : own == SBX_OWNER_FOREIGN ? VIS_HIDDEN_PKG
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

/* /proc/PID/fd/N or /proc/PID/task/TID/fd/N: a magic link to a file the
 * process already holds open, reopened by the kernel without a path walk. */
static bool is_fd_magic_link(const char *p)
{
	if (strncmp(p, "/proc/", 6))
		return false;
	p += 6;
	size_t n = strcspn(p, "/");
	if (!all_digits(p, n))
		return false;
	p += n;
	if (!strncmp(p, "/task/", 6)) {
		p += 6;
		n = strcspn(p, "/");
		if (!all_digits(p, n))
			return false;
		p += n;
	}
	if (strncmp(p, "/fd/", 4))
		return false;
	p += 4;
	return all_digits(p, strlen(p));
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

static void hide(struct sbx_decision *d, enum vis v, const char *node, const char *pkg)
{
	d->verdict = KILN_V_HIDE;
	d->reason = v == VIS_HIDDEN_PKG ? SBX_HIDDEN_PKG
		  : v == VIS_HIDDEN_RULE ? SBX_HIDDEN_RULE : SBX_HIDDEN_UNKNOWN;
	set_str(d->node, sizeof d->node, node);
	set_str(d->pkg, sizeof d->pkg, pkg);
}

static void fail(struct sbx_decision *d, const char *path)
{
	d->verdict = KILN_V_DENY;
	d->reason = SBX_FAILED;
	set_str(d->node, sizeof d->node, path);
}

void sandbox_decide(struct sandbox *s, pid_t pid, const char *path, unsigned access,
		    unsigned qflags, struct sbx_decision *d)
{
	char *cur = d->node; /* canonical prefix resolved so far; "" is the root */
	size_t clen = 0;
	char pkg[SBX_PKG_MAX];
	int links = 0;
	bool follow_last = !(qflags & KILN_Q_NOFOLLOW);
	bool final_is_link = false, final_is_dir = false;
	enum vis final_vis = VIS_VISIBLE;

	d->verdict = KILN_V_ALLOW;
	d->reason = SBX_OK;
	d->exists = false;
	d->unknown = false;
	d->pkg[0] = '\0';
	cur[0] = '\0';

	size_t plen = strlen(path);
	if (path[0] != '/' || plen >= SBX_BUF) {
		fail(d, path);
		return;
	}
	memcpy(s->todo, path, plen + 1);
	/* A trailing slash asks for a directory: a final symlink is followed. */
	if (plen > 1 && path[plen - 1] == '/')
		follow_last = true;
	size_t tpos = 0;

	for (;;) {
		while (s->todo[tpos] == '/')
			tpos++;
		if (!s->todo[tpos]) {
			d->exists = true;
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
			continue;
		}
		char pidbuf[24];
		if (clen == 5 && !memcmp(cur, "/proc", 5) &&
		    ((n == 4 && !memcmp(comp, "self", 4)) || (n == 11 && !memcmp(comp, "thread-self", 11)))) {
			/* The client's /proc/self, not the server's. */
			n = (size_t)snprintf(pidbuf, sizeof pidbuf, "%ld", (long)pid);
			comp = pidbuf;
		}
		size_t before = clen;
		if (clen + 1 + n + 1 > SBX_BUF) {
			fail(d, path);
			return;
		}
		cur[clen++] = '/';
		memmove(cur + clen, comp, n);
		clen += n;
		cur[clen] = '\0';

		struct stat st;
		if (lstat(cur, &st) < 0) {
			/* Does not exist (or cannot be searched): the kernel fails the
			 * call itself; the rest only matters for the write check. */
			long l = append_lexical(cur, clen, s->todo + tpos);
			if (l < 0) {
				fail(d, path);
				return;
			}
			clen = (size_t)l;
			break;
		}
		enum vis v = visibility(s, cur, clen, pkg);
		if (v == VIS_FAILED) {
			fail(d, cur);
			return;
		}
		if (v == VIS_HIDDEN_PKG || v == VIS_HIDDEN_RULE) {
			hide(d, v, cur, pkg);
			goto hidden;
		}
		if (S_ISLNK(st.st_mode) && (!last || follow_last)) {
			if (last && is_fd_magic_link(cur)) {
				d->exists = true;
				final_is_link = true;
				break;
			}
			if (++links > MAX_LINKS)
				break; /* ELOOP for the kernel too */
			ssize_t tl = readlink(cur, s->tmp, SBX_BUF - 1);
			if (tl <= 0)
				break;
			size_t rest = strlen(s->todo + tpos);
			if ((size_t)tl + 1 + rest + 1 > SBX_BUF) {
				fail(d, path);
				return;
			}
			s->tmp[tl] = '/';
			memcpy(s->tmp + tl + 1, s->todo + tpos, rest + 1);
			memcpy(s->todo, s->tmp, (size_t)tl + 1 + rest + 1);
			tpos = 0;
			clen = s->todo[0] == '/' ? 0 : before;
			cur[clen] = '\0';
			continue;
		}
		if (last) {
			final_vis = v;
			final_is_link = S_ISLNK(st.st_mode);
			final_is_dir = S_ISDIR(st.st_mode);
		} else if (!S_ISDIR(st.st_mode)) {
			break; /* ENOTDIR for the kernel */
		}
	}
	if (clen == 0) {
		cur[0] = '/';
		cur[1] = '\0';
	}

	if (d->exists && final_vis == VIS_UNKNOWN && !final_is_link) {
		if (s->policy->unknown == UNKNOWN_HIDE) {
			hide(d, VIS_UNKNOWN, d->node, "");
			goto hidden;
		}
		d->unknown = s->policy->unknown == UNKNOWN_REPORT;
	}
	unsigned writes = access & (KILN_A_WRITE | KILN_A_CREATE | KILN_A_DELETE);
	/* Creating a name that exists as a directory changes nothing: the kernel
	 * answers EEXIST (mkdir -p walks every ancestor that way). */
	if (writes == KILN_A_CREATE && d->exists && final_is_dir)
		writes = 0;
	if (writes && policy_action_for(s->policy, d->node) != POLICY_ALLOW) {
		d->verdict = KILN_V_DENY;
		d->reason = SBX_WRITE_REFUSED;
	}
	return;

hidden:
	/* Creating a name that is hidden cannot succeed: refuse it, as the
	 * kernel would in a read-only directory. */
	if (access & KILN_A_CREATE)
		d->verdict = KILN_V_DENY;
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
	enum vis v = visibility(s, p, o + nl, pkg);
	if (v == VIS_HIDDEN_PKG || v == VIS_HIDDEN_RULE)
		return true;
	return v == VIS_UNKNOWN && s->policy->unknown == UNKNOWN_HIDE && !S_ISLNK(st.st_mode);
}
