/* What the preload library's hooks ask, and how they get an answer.
 *
 * The hooks (src/trace/hooks/) only call these functions; the client side of
 * the trace protocol (src/trace/client.c) implements them with a round trip to
 * the trace server, and the shared-memory verdict cache (src/trace/cache.c)
 * answers in front of that round trip.
 *
 * All of these run on the hook path: no locks, no malloc, no stdio; safe in a
 * signal handler, in a vfork child (which must leave nothing in the memory
 * it shares with its parent: kt.h, kt_vfork_child) and in a child after fork
 * in a threaded program.
 */
#ifndef KILN_TRACE_VERDICT_H
#define KILN_TRACE_VERDICT_H

#include <stddef.h>
#include <stdint.h>

/* Access classes: a bit set. */
enum kiln_access {
	KILN_A_STAT   = 1u << 0, /* metadata: stat, access, readlink, lstat */
	KILN_A_READ   = 1u << 1, /* open for reading, dlopen */
	KILN_A_WRITE  = 1u << 2, /* open for writing, truncate, chmod, utime... */
	KILN_A_EXEC   = 1u << 3, /* execve target or #! interpreter */
	KILN_A_LIST   = 1u << 4, /* opendir / getdents of a directory */
	KILN_A_CREATE = 1u << 5, /* a new name: O_CREAT, mkdir, symlink, link, rename target (+DELETE) */
	KILN_A_DELETE = 1u << 6, /* unlink, rmdir, rename source */
};
/* The classes that only read: for a path that does not exist, every verdict
 * ends in ENOENT (a NOTE may carry only these: docs/verdict-cache.md). */
#define KILN_A_READ_CLASSES (KILN_A_STAT | KILN_A_READ | KILN_A_EXEC | KILN_A_LIST)

enum kiln_verdict {
	KILN_V_ALLOW = 0,
	KILN_V_HIDE  = 1, /* the path does not exist for this build: ENOENT */
	KILN_V_DENY  = 2, /* the path exists but this access is refused: EACCES */
	KILN_V_ERROR = 3, /* no answer (server gone): fail closed, EIO */
};

/* Query flags. */
enum kiln_qflags {
	KILN_Q_NOFOLLOW = 1u << 0, /* do not follow a symlink in the last component */
	KILN_Q_PROBE    = 1u << 1, /* access(2)-like: asks whether the access would be
				    * allowed, does nothing (a write class is a probe) */
};

/* Verdict for an absolute path (lexically cleaned: no "//", no "/./"; ".."
 * kept, since only the server resolves symlinks). */
int kiln_ask(const char *abspath, unsigned access, unsigned qflags);

/* How an ALLOW may be used by a call that opens the path
 * (src/ipc/proto.h, enum kiln_bind and enum kiln_id_flags): the server's
 * binding, or the shared cache's (a STABLE value: ANY; an AREA value:
 * NO_SYMLINKS, without identities). */
struct kiln_binding {
	unsigned how;
	unsigned id_flags;
	uint64_t dev, ino, dir_dev, dir_ino;
	int cached; /* the shared cache answered (no identities) */
};

/* Flags of a bound question (kt_ask_bound, src/trace/kt.h). */
#define KILN_ASK_SERVER 1u /* skip the shared cache (the file changed under a bound call) */
#define KILN_ASK_BIND   2u /* the caller opens with RESOLVE_NO_SYMLINKS when told to:
			    * an AREA value needs no symlink check here */
#define KILN_ASK_ABSENT 4u /* the caller answers ENOENT itself when told the path
			    * reaches nothing right now (KT_BIND_ABSENT, kt.h) */


/* Verdicts for `n` entries of directory `absdir` in one round trip: sets
 * hidden[i] = 1 for each entry that must vanish from the listing. Returns 0,
 * or -1 when no answer could be had (caller fails closed). */
int kiln_ask_dir(const char *absdir, const char *const *names, size_t n,
		 unsigned char *hidden);

/* Data glibc opens with internal calls no hook sees (docs/glibc-data.md):
 * the hooks of the functions that load it ask for a plan first. */
enum kiln_data_kind {
	KILN_D_LOCALE = 1,  /* a = LOCPATH ("" if unset), b = a locale name, arg = categories */
	KILN_D_CATALOG = 2, /* a = the domain's directory, b = "DOMAIN\nLC_CATEGORY\nLANGUAGES"
			     * (LANGUAGE, or the category's locale name), arg = 1 */
};
enum kiln_data_answer {
	KILN_D_CLEAN  = 0, /* nothing the build may not see is involved: call through */
	KILN_D_ABSENT = 1, /* glibc would find nothing the build may see: fail as it does then */
	KILN_D_CHECK  = 2, /* both: call through with glibc's own opens checked */
};
/* The plan for one question (KILN_D_CHECK when no answer can be had). */
int kiln_ask_data(unsigned kind, unsigned arg, const char *a, const char *b);

/* Events the server reports but does not decide. */
enum kiln_event_kind {
	KILN_E_SETUID_EXEC = 1, /* exec of a set-uid/set-gid program: preload lost */
	KILN_E_STATIC_EXEC = 2, /* exec of a static binary: hooks bypassed */
};
void kiln_event(unsigned kind, const char *path);

#endif
