/* Sandbox policy: rules that give each path prefix an action, matched per
 * path component (/usr/lib covers /usr/lib/x but not /usr/libexec), the
 * longest matching prefix winning. docs/policy.md is the user's view. */
#ifndef KILN_TRACE_SERVICE_POLICY_H
#define KILN_TRACE_SERVICE_POLICY_H

#include <stdbool.h>
#include <stddef.h>

/* Every action from POLICY_ASK on hides something, or asks the registry. */
enum policy_action {
	POLICY_ALLOW = 0, /* visible, reads and writes allowed */
	POLICY_READ  = 1, /* visible, writes refused */
	POLICY_ASK   = 2, /* the registry decides visibility; writes refused */
	POLICY_DENY  = 3, /* hidden; writes refused */
	POLICY_OWNED = 4, /* visible only when a package of the closure owns it (no
			   * owner or only foreign owners: hidden); writes refused */
};

/* What to do with an existing file in an ask-tree that the registry does not
 * know. */
enum policy_unknown {
	UNKNOWN_REPORT = 0, /* allow it and name it in the report (default) */
	UNKNOWN_ALLOW  = 1, /* allow it silently */
	UNKNOWN_HIDE   = 2, /* hide it and name it in the report */
};

struct policy_rule {
	char *prefix;     /* normalised absolute path; "/" for the root */
	size_t len;
	enum policy_action action;
	size_t order;     /* position of addition: a later rule for the same prefix wins */
};

/* A package build's results beside its source tree (artifacts.c): new files
 * in `dir` named NAME_*.deb (.udeb, .ddeb, .buildinfo, .changes, .dsc,
 * .build, source tarballs, and their ".new" temporaries) for NAME the source
 * or a binary package (or NAME-dbgsym) are writable. */
struct policy_artifacts {
	char *dir;       /* normalised absolute directory; NULL: none */
	char **names;
	size_t n;
};

struct policy {
	struct policy_rule *rules;
	size_t n, cap;
	/* Directories an "owned" tree shows though no package lists them: those
	 * a maintainer script of every system makes (base-files' postinst makes
	 * /usr/local/bin...). Exact, normalised paths. */
	char **skeleton;
	size_t nskeleton;
	enum policy_unknown unknown;
	/* chroot, unshare/clone of namespaces, mount, pivot_root, setns: refused
	 * with EPERM unless a policy file says "namespaces allow" (paths would
	 * then resolve somewhere the server does not look). */
	bool allow_namespaces;
	bool compiled;
	struct policy_artifacts art;
};

void policy_init(struct policy *p);
void policy_free(struct policy *p);

/* Adds a rule. `prefix` must be absolute ("~" and "~/..." expand to $HOME);
 * it is normalised ("//", "/./" and a trailing "/" removed; ".." refused).
 * Returns 0, or -1 with a message in err. */
int policy_add(struct policy *p, enum policy_action a, const char *prefix,
	       char *err, size_t errlen);

/* The default policy for Debian package builds (docs/policy.md), with
 * `build_dir` (absolute) allowed. `user_caches`: also allow the invoking
 * user's cache directories (~/.cache, ~/.ccache, $XDG_CACHE_HOME,
 * $CCACHE_DIR); the chroot profile, whose build has no such home, does not. */
int policy_add_defaults(struct policy *p, const char *build_dir, bool user_caches, char *err,
			size_t errlen);

/* The chroot profile's additions (docs/profiles.md): what a clean buildd
 * chroot does not have is hidden. Files no package of the closure owns in
 * /usr/local, /opt, /usr/lib/locale and /etc/ld.so.conf.d ("owned" rules;
 * the directories base-files' postinst makes there stay: p->skeleton),
 * and the invoking user's home directory `home` (a deny rule; skipped when
 * NULL, "/" or not absolute), except what kiln trace needs in it: the
 * artifact directory (p->art.dir, when set before) and `keep` (the preload
 * library), made readable where the home rule would hide them. */
int policy_add_chroot(struct policy *p, const char *home, const char *keep, char *err,
		      size_t errlen);

/* Reads a policy file: lines "ACTION PATH" (allow, read, ask, owned, deny),
 * "unknown report|allow|hide", "clear" (drop every rule so far), comments
 * from '#'. Errors name the file and line. */
int policy_load_file(struct policy *p, const char *file, char *err, size_t errlen);

/* Sorts the rules for matching; must be called after the last addition. */
void policy_compile(struct policy *p);

/* Whether rule r's prefix covers absolute normalised `path` (per component). */
bool policy_covers(const struct policy_rule *r, const char *path);

/* The rule covering absolute normalised path `path` (NULL if none). */
const struct policy_rule *policy_match(const struct policy *p, const char *path);
/* Its action; paths no rule covers are POLICY_READ. */
enum policy_action policy_action_for(const struct policy *p, const char *path);

/* Adds absolute normalised directory `dir` to p->skeleton (once). Returns
 * 0, -1 out of memory. */
int policy_add_skeleton(struct policy *p, const char *dir, char *err, size_t errlen);

/* Whether absolute normalised `path` is one of p->skeleton. */
bool policy_is_skeleton(const struct policy *p, const char *path);

/* Whether absolute normalised `path` (of length len) is a proper ancestor of
 * a rule that shows something (any action but deny): a directory on the way
 * to a visible area stays visible whatever hides it, so that area can be
 * reached (its other entries stay hidden). */
bool policy_leads_to_visible(const struct policy *p, const char *path, size_t len);

/* Makes DIR's artifacts of packages NAMES writable (struct policy_artifacts). */
int policy_set_artifacts(struct policy *p, const char *dir, const char *const *names, size_t n,
			 char *err, size_t errlen);
/* Whether absolute normalised PATH is one of those artifacts. */
bool policy_is_artifact(const struct policy *p, const char *path);

const char *policy_action_name(enum policy_action a);
int policy_parse_action(const char *word, enum policy_action *a);
int policy_parse_unknown(const char *word, enum policy_unknown *u);

#endif
