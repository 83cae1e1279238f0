/* The trace service's decision: is this path, reached with these access
 * classes, visible and writable for the build? A pure function of the policy,
 * the registry and the file system as the server sees it (same mount
 * namespace and uid as the build). */
#ifndef KILN_TRACE_SERVICE_SANDBOX_H
#define KILN_TRACE_SERVICE_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "trace/service/pathtab.h"
#include "trace/service/policy.h"
#include "trace/verdict.h"

#define SBX_BUF 16384      /* work buffers: longer resolutions fail closed */
#define SBX_PKG_MAX 128

/* Who owns a canonical path, as the registry (or a test's fake) says. */
enum sbx_owner {
	SBX_OWNER_NONE = 0,    /* no package lists it, but an ancestor directory is listed */
	SBX_OWNER_DEP = 1,     /* some owner is in the dependency closure */
	SBX_OWNER_FOREIGN = 2, /* listed only by packages outside it (one named in pkg) */
	SBX_OWNER_UNMANAGED = 3, /* not listed, and no ancestor directory is either: a
				  * tree the registry knows nothing of (visible, not reported) */
};

struct sbx_oracle {
	void *ctx;
	/* Returns an enum sbx_owner, or -1 on a registry error. */
	int (*owner)(void *ctx, const char *path, char *pkg, size_t pkglen);
};

enum sbx_reason {
	SBX_OK = 0,
	SBX_HIDDEN_PKG,     /* owned by a package outside the closure (pkg) */
	SBX_HIDDEN_RULE,    /* under a deny rule */
	SBX_HIDDEN_UNKNOWN, /* unknown to the registry in an ask-tree, policy "unknown hide" */
	SBX_WRITE_REFUSED,  /* a write outside the writable areas */
	SBX_FAILED,         /* could not decide (registry error, path too long): fail closed */
	SBX_HIDDEN_UNOWNED, /* under an "owned" rule and no package of the closure owns it */
	SBX_WRITE_PROBE,    /* access(W_OK) of an existing file outside the writable areas:
			     * EACCES, as for a build user who is not root; nothing written */
};

struct sbx_decision {
	enum kiln_verdict verdict; /* ALLOW, HIDE or DENY */
	enum sbx_reason reason;
	bool exists;               /* the final path exists */
	bool unknown;              /* allowed, but unknown to the registry in an ask-tree */
	bool stable;               /* the walk only visited registry-managed trees: the
				    * decision holds for the whole run (verdict cache) */
	bool links;                /* the walk followed a symlink */
	/* Identities (from the walk's own lstat calls) that bind the answer to
	 * what the client's call reaches (enum kiln_id_flags): the final node,
	 * and the directory its last name is in. Not set for a walk recalled
	 * from the memo (stable: nothing to bind). */
	unsigned id_flags;
	uint64_t dev, ino, dir_dev, dir_ino;
	char node[SBX_BUF];        /* hidden node, else the final (canonical) path */
	char pkg[SBX_PKG_MAX];     /* owning package for SBX_HIDDEN_PKG */
	/* Hidden by a directory several packages own, when the registry knows
	 * the path asked below it: that path (lexical), which pkg owns. The
	 * report files the finding there, so that each package reached below a
	 * shared directory is named. Else "". */
	char below[SBX_BUF];
};

struct sandbox {
	const struct policy *policy;
	struct sbx_oracle oracle;
	struct pathtab memo;       /* canonical path -> visibility in ask-trees */
	unsigned long oracle_calls;
	/* Walk memo: (path as asked, follow flag) -> result of its resolution,
	 * for walks that only visited nodes in registry-managed trees (see
	 * sandbox.c). Off when memo_walks is false. */
	bool memo_walks;
	struct pathtab walks;
	/* Node memo: canonical node in a managed tree -> what lstat (and
	 * readlink) said of it (sandbox.c). Off with the walk memo. */
	struct pathtab nodes;
	unsigned long node_hits;
	unsigned char *stable_rule; /* per compiled rule: inside a managed tree */
	unsigned long walk_hits, walk_flushes;
	/* Identity of each node of the walk's current prefix, by depth
	 * (ids[0]: the root), and of /proc's file system. */
	struct sbx_id { uint64_t dev, ino; } ids[SBX_BUF / 2 + 1], root_id;
	uint64_t proc_dev;
	char todo[SBX_BUF], tmp[SBX_BUF], key[SBX_BUF + 2];
};

/* The walk memo is on; KILN_TRACE_NO_MEMO=1 in the server's environment
 * turns it off (tests compare both). */
void sandbox_init(struct sandbox *s, const struct policy *compiled, struct sbx_oracle oracle);
void sandbox_free(struct sandbox *s);

/* Tells the sandbox that a write (`access` has write, create or delete
 * classes) decided as `d` for `path` was let through (enforcing ALLOW, or
 * --report-only): if it may change a managed tree, the walk and node memos
 * are forgotten. */
void sandbox_write_passed(struct sandbox *s, const char *path, unsigned access,
			  const struct sbx_decision *d);

/* lstat(node) (absolute, canonical) for those who follow the build's walks
 * after them: from the node memo when a walk kept it there (a node of a
 * managed tree: it cannot change while the build runs), else the system
 * call. Only st_mode, st_dev and st_ino are set from the memo. */
int sandbox_lstat(struct sandbox *s, const char *node, struct stat *st);

/* Decides for `path` (absolute) asked by process `pid` (whose /proc/self it
 * means) with access classes `access` and query flags `qflags`. With
 * KILN_Q_PROBE (access(2) and the like), nothing is written: a hidden path
 * is ENOENT whatever the access, a missing one is left to the kernel
 * (ENOENT), and an existing one outside the writable areas is EACCES with
 * reason SBX_WRITE_PROBE rather than a refused write. */
void sandbox_decide(struct sandbox *s, pid_t pid, const char *path, unsigned access,
		    unsigned qflags, struct sbx_decision *d);

/* A decision that holds for the whole run and is an ALLOW with nothing to
 * report (not unknown to the registry): what may be answered before it is
 * asked (answered ahead, recalled keys). */
static inline bool sbx_stable_allow(const struct sbx_decision *d)
{
	return d->verdict == KILN_V_ALLOW && d->reason == SBX_OK && d->stable && !d->unknown;
}

/* Whether the visibility of an existing node at canonical `path` holds for
 * the whole run (it lies in a registry-managed tree, not under /proc). */
bool sandbox_path_stable(const struct sandbox *s, const char *path);

/* Whether a directory entry must vanish from a listing of canonical
 * directory `dir`: true when the entry itself (not followed) is hidden. */
bool sandbox_entry_hidden(struct sandbox *s, const char *dir, const char *name);

#endif
