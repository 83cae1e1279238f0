#include "trace/service/policy.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const action_names[] = { "allow", "read", "ask", "deny", "owned" };
#define NACTIONS (sizeof action_names / sizeof action_names[0])
static const char *const unknown_names[] = { "report", "allow", "hide" };

void policy_init(struct policy *p)
{
	*p = (struct policy){ .unknown = UNKNOWN_REPORT };
}

static void artifacts_free(struct policy_artifacts *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->names[i]);
	free(a->names);
	free(a->dir);
	*a = (struct policy_artifacts){ 0 };
}

void policy_free(struct policy *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->rules[i].prefix);
	free(p->rules);
	for (size_t i = 0; i < p->nskeleton; i++)
		free(p->skeleton[i]);
	free(p->skeleton);
	artifacts_free(&p->art);
	*p = (struct policy){ 0 };
}

const char *policy_action_name(enum policy_action a)
{
	return (unsigned)a < NACTIONS ? action_names[a] : "?";
}

int policy_parse_action(const char *word, enum policy_action *a)
{
	for (size_t i = 0; i < NACTIONS; i++)
		if (!strcmp(word, action_names[i])) {
			*a = (enum policy_action)i;
			return 0;
		}
	return -1;
}

int policy_parse_unknown(const char *word, enum policy_unknown *u)
{
	for (int i = 0; i < 3; i++)
		if (!strcmp(word, unknown_names[i])) {
			*u = (enum policy_unknown)i;
			return 0;
		}
	return -1;
}

/* Normalises an absolute path lexically into out; -1 on "..". */
static int normalise(const char *in, char *out, size_t cap)
{
	size_t o = 0;
	const char *s = in;
	while (*s) {
		while (*s == '/')
			s++;
		const char *e = strchrnul(s, '/');
		size_t n = (size_t)(e - s);
		if (n == 0)
			break;
		if (n == 2 && s[0] == '.' && s[1] == '.')
			return -1;
		if (!(n == 1 && s[0] == '.')) {
			if (o + 1 + n + 1 > cap)
				return -1;
			out[o++] = '/';
			memcpy(out + o, s, n);
			o += n;
		}
		s = e;
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	return 0;
}

int policy_add(struct policy *p, enum policy_action a, const char *prefix,
	       char *err, size_t errlen)
{
	char expanded[PATH_MAX], norm[PATH_MAX];
	if (prefix[0] == '~' && (prefix[1] == '\0' || prefix[1] == '/')) {
		const char *home = getenv("HOME");
		if (!home || home[0] != '/') {
			snprintf(err, errlen, "cannot expand '%s': HOME is not set to an absolute path", prefix);
			return -1;
		}
		snprintf(expanded, sizeof expanded, "%s%s", home, prefix + 1);
		prefix = expanded;
	}
	if (prefix[0] != '/') {
		snprintf(err, errlen, "policy path '%s' is not absolute", prefix);
		return -1;
	}
	if (normalise(prefix, norm, sizeof norm) < 0) {
		snprintf(err, errlen, "policy path '%s' has a '..' component or is too long", prefix);
		return -1;
	}
	if (p->n == p->cap) {
		size_t ncap = p->cap ? p->cap * 2 : 32;
		struct policy_rule *r = realloc(p->rules, ncap * sizeof *r);
		if (!r) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		p->rules = r;
		p->cap = ncap;
	}
	char *dup = strdup(norm);
	if (!dup) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	p->rules[p->n] = (struct policy_rule){ .prefix = dup, .len = strlen(dup), .action = a,
					       .order = p->n };
	p->n++;
	p->compiled = false;
	return 0;
}

static int add_env_dir(struct policy *p, enum policy_action a, const char *var,
		       const char *suffix, char *err, size_t errlen)
{
	const char *v = getenv(var);
	if (!v || v[0] != '/')
		return 0;
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s%s", v, suffix);
	return policy_add(p, a, path, err, errlen);
}

int policy_add_defaults(struct policy *p, const char *build_dir, bool user_caches, char *err,
			size_t errlen)
{
	static const struct { enum policy_action a; const char *path; } base[] = {
		{ POLICY_READ, "/" },
		/* Trees dpkg manages: the registry decides. */
		{ POLICY_ASK, "/usr" }, { POLICY_ASK, "/etc" }, { POLICY_ASK, "/opt" },
		{ POLICY_ASK, "/bin" }, { POLICY_ASK, "/sbin" }, { POLICY_ASK, "/lib" },
		{ POLICY_ASK, "/lib32" }, { POLICY_ASK, "/lib64" }, { POLICY_ASK, "/libx32" },
		/* Files in /etc that the system generates rather than a package. */
		{ POLICY_READ, "/etc/alternatives" }, { POLICY_READ, "/etc/ld.so.cache" },
		{ POLICY_READ, "/etc/passwd" }, { POLICY_READ, "/etc/group" },
		{ POLICY_READ, "/etc/hosts" }, { POLICY_READ, "/etc/hostname" },
		{ POLICY_READ, "/etc/resolv.conf" }, { POLICY_READ, "/etc/nsswitch.conf" },
		{ POLICY_READ, "/etc/localtime" }, { POLICY_READ, "/etc/timezone" },
		{ POLICY_READ, "/etc/machine-id" }, { POLICY_READ, "/etc/mtab" },
		/* Scratch and kernel trees. */
		{ POLICY_ALLOW, "/tmp" }, { POLICY_ALLOW, "/var/tmp" }, { POLICY_ALLOW, "/dev" },
		{ POLICY_ALLOW, "/proc" }, { POLICY_ALLOW, "/sys" }, { POLICY_ALLOW, "/dev/shm" },
	};
	for (size_t i = 0; i < sizeof base / sizeof base[0]; i++)
		if (policy_add(p, base[i].a, base[i].path, err, errlen) < 0)
			return -1;
	/* The user's cache directories (ccache, pip, ...) and $TMPDIR. */
	if ((user_caches && (add_env_dir(p, POLICY_ALLOW, "HOME", "/.cache", err, errlen) < 0 ||
			     add_env_dir(p, POLICY_ALLOW, "HOME", "/.ccache", err, errlen) < 0 ||
			     add_env_dir(p, POLICY_ALLOW, "XDG_CACHE_HOME", "", err, errlen) < 0 ||
			     add_env_dir(p, POLICY_ALLOW, "CCACHE_DIR", "", err, errlen) < 0)) ||
	    add_env_dir(p, POLICY_ALLOW, "TMPDIR", "", err, errlen) < 0)
		return -1;
	return policy_add(p, POLICY_ALLOW, build_dir, err, errlen);
}

/* The action of the longest rule covering `path` among the rules added so
 * far (compiled or not); POLICY_READ when none does. */
static enum policy_action action_so_far(const struct policy *p, const char *path)
{
	const struct policy_rule *best = NULL;
	for (size_t i = 0; i < p->n; i++) {
		const struct policy_rule *r = &p->rules[i];
		if (policy_covers(r, path) &&
		    (!best || r->len > best->len || (r->len == best->len && r->order > best->order)))
			best = r;
	}
	return best ? best->action : POLICY_READ;
}

int policy_add_skeleton(struct policy *p, const char *dir, char *err, size_t errlen)
{
	if (policy_is_skeleton(p, dir))
		return 0;
	char **sk = realloc(p->skeleton, (p->nskeleton + 1) * sizeof *sk);
	if (!sk || !(sk[p->nskeleton] = strdup(dir))) {
		if (sk)
			p->skeleton = sk;
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	p->skeleton = sk;
	p->nskeleton++;
	return 0;
}

int policy_add_chroot(struct policy *p, const char *home, const char *keep, char *err,
		      size_t errlen)
{
	/* Trees a clean chroot holds only package files in: what no package
	 * of the closure owns there (a toolkit in /usr/local or /opt, a
	 * generated locale-archive, an ld.so.conf.d snippet of either) is not
	 * in the chroot. */
	static const char *const owned[] = { "/usr/local", "/opt", "/usr/lib/locale",
					     "/etc/ld.so.conf.d" };
	for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++)
		if (policy_add(p, POLICY_OWNED, owned[i], err, errlen) < 0)
			return -1;
	/* What base-files' postinst (Debian 12) makes there with
	 * install_directory and install_local_dir: every chroot has them. */
	static const char *const skeleton[] = {
		"/opt", "/usr/local", "/usr/local/share", "/usr/local/share/man", "/usr/local/bin",
		"/usr/local/games", "/usr/local/lib", "/usr/local/include", "/usr/local/sbin",
		"/usr/local/src", "/usr/local/etc", "/usr/local/man",
	};
	for (size_t i = 0; i < sizeof skeleton / sizeof skeleton[0]; i++)
		if (policy_add_skeleton(p, skeleton[i], err, errlen) < 0)
			return -1;
	if (!home || home[0] != '/' || !home[strspn(home, "/")])
		return 0;
	if (policy_add(p, POLICY_DENY, home, err, errlen) < 0)
		return -1;
	const char *needed[] = { p->art.dir, keep };
	for (size_t i = 0; i < 2; i++)
		if (needed[i] && needed[i][0] == '/' && action_so_far(p, needed[i]) == POLICY_DENY &&
		    policy_add(p, POLICY_READ, needed[i], err, errlen) < 0)
			return -1;
	return 0;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	return s;
}

int policy_load_file(struct policy *p, const char *file, char *err, size_t errlen)
{
	FILE *f = fopen(file, "re");
	if (!f) {
		snprintf(err, errlen, "cannot open policy file %s: %s", file, strerror(errno));
		return -1;
	}
	char line[PATH_MAX + 64], sub[PATH_MAX + 128];
	int lineno = 0, rc = 0;
	while (fgets(line, sizeof line, f)) {
		lineno++;
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *s = trim(line);
		if (!*s)
			continue;
		char *arg = s + strcspn(s, " \t");
		if (*arg)
			*arg++ = '\0';
		arg = trim(arg);
		enum policy_action a;
		enum policy_unknown u;
		if (!strcmp(s, "clear") && !*arg) {
			for (size_t i = 0; i < p->n; i++)
				free(p->rules[i].prefix);
			p->n = 0;
		} else if (!strcmp(s, "unknown")) {
			if (policy_parse_unknown(arg, &u) < 0) {
				snprintf(err, errlen, "%s:%d: 'unknown' takes report, allow or hide, not '%s'",
					 file, lineno, arg);
				rc = -1;
				break;
			}
			p->unknown = u;
		} else if (!strcmp(s, "namespaces")) {
			if (strcmp(arg, "allow") && strcmp(arg, "refuse")) {
				snprintf(err, errlen, "%s:%d: 'namespaces' takes allow or refuse, not '%s'",
					 file, lineno, arg);
				rc = -1;
				break;
			}
			p->allow_namespaces = !strcmp(arg, "allow");
		} else if (policy_parse_action(s, &a) == 0) {
			if (!*arg) {
				snprintf(err, errlen, "%s:%d: '%s' needs a path", file, lineno, s);
				rc = -1;
				break;
			}
			if (policy_add(p, a, arg, sub, sizeof sub) < 0) {
				snprintf(err, errlen, "%s:%d: %s", file, lineno, sub);
				rc = -1;
				break;
			}
		} else {
			snprintf(err, errlen, "%s:%d: unknown directive '%s' (expected allow, read, ask, owned, deny, unknown, namespaces or clear)",
				 file, lineno, s);
			rc = -1;
			break;
		}
	}
	if (rc == 0 && ferror(f)) {
		snprintf(err, errlen, "cannot read policy file %s: %s", file, strerror(errno));
		rc = -1;
	}
	fclose(f);
	return rc;
}

static int by_length_then_recency(const void *a, const void *b)
{
	const struct policy_rule *x = a, *y = b;
	if (x->len != y->len)
		return x->len > y->len ? -1 : 1;
	int c = strcmp(x->prefix, y->prefix);
	if (c)
		return c;
	return x->order > y->order ? -1 : x->order < y->order;
}

void policy_compile(struct policy *p)
{
	qsort(p->rules, p->n, sizeof *p->rules, by_length_then_recency);
	/* Keep only the most recent rule of each prefix. */
	size_t o = 0;
	for (size_t i = 0; i < p->n; i++) {
		if (o && !strcmp(p->rules[o - 1].prefix, p->rules[i].prefix)) {
			free(p->rules[i].prefix);
			continue;
		}
		p->rules[o++] = p->rules[i];
	}
	p->n = o;
	p->compiled = true;
}

bool policy_covers(const struct policy_rule *r, const char *path)
{
	if (r->len == 1) /* "/" */
		return path[0] == '/';
	return !strncmp(path, r->prefix, r->len) && (path[r->len] == '\0' || path[r->len] == '/');
}

const struct policy_rule *policy_match(const struct policy *p, const char *path)
{
	/* Rules are sorted longest first, so the first that covers is the most
	 * specific. */
	for (size_t i = 0; i < p->n; i++)
		if (policy_covers(&p->rules[i], path))
			return &p->rules[i];
	return NULL;
}

enum policy_action policy_action_for(const struct policy *p, const char *path)
{
	const struct policy_rule *r = policy_match(p, path);
	return r ? r->action : POLICY_READ;
}

bool policy_is_skeleton(const struct policy *p, const char *path)
{
	for (size_t i = 0; i < p->nskeleton; i++)
		if (!strcmp(p->skeleton[i], path))
			return true;
	return false;
}

bool policy_leads_to_visible(const struct policy *p, const char *path, size_t len)
{
	bool root = len == 1 && path[0] == '/';
	for (size_t i = 0; i < p->n; i++) {
		const struct policy_rule *r = &p->rules[i];
		if (r->action != POLICY_DENY && r->len > len && (root || r->prefix[len] == '/') &&
		    !memcmp(r->prefix, path, len))
			return true;
	}
	return false;
}

int policy_set_artifacts(struct policy *p, const char *dir, const char *const *names, size_t n,
			 char *err, size_t errlen)
{
	char norm[PATH_MAX];
	artifacts_free(&p->art);
	if (dir[0] != '/' || normalise(dir, norm, sizeof norm) < 0) {
		snprintf(err, errlen, "artifact directory '%s' is not a normal absolute path", dir);
		return -1;
	}
	p->art.dir = strdup(norm);
	p->art.names = calloc(n + 1, sizeof *p->art.names);
	for (size_t i = 0; p->art.dir && p->art.names && i < n; i++)
		if ((p->art.names[p->art.n] = strdup(names[i])))
			p->art.n++;
	if (!p->art.dir || !p->art.names || p->art.n != n) {
		artifacts_free(&p->art);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

static bool ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);
	return n >= k && !memcmp(s + n - k, suffix, k);
}

/* NAME_..., NAME-dbgsym_... */
static bool named_for(const char *base, const char *name)
{
	size_t k = strlen(name);
	if (strncmp(base, name, k))
		return false;
	return base[k] == '_' || (!strncmp(base + k, "-dbgsym_", 8));
}

bool policy_is_artifact(const struct policy *p, const char *path)
{
	const struct policy_artifacts *a = &p->art;
	if (!a->dir)
		return false;
	size_t dl = strlen(a->dir);
	if (strncmp(path, a->dir, dl) || path[dl == 1 ? 0 : dl] != '/')
		return false;
	const char *base = path + (dl == 1 ? 1 : dl + 1);
	if (!*base || strchr(base, '/'))
		return false;
	size_t n = strlen(base);
	if (ends_with(base, n, ".new")) /* dpkg-genchanges/-genbuildinfo write X.new, rename it to X */
		n -= 4;
	static const char *const suffixes[] = { ".deb", ".udeb", ".ddeb", ".buildinfo", ".changes",
						".dsc", ".build", ".diff.gz" };
	bool kind = false;
	for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++)
		kind |= ends_with(base, n, suffixes[i]);
	const char *tar = strstr(base, ".tar.");
	kind |= tar && (size_t)(tar - base) < n;
	if (!kind)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (named_for(base, a->names[i]))
			return true;
	return false;
}
