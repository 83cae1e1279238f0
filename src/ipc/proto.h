/* The trace protocol's wire format (docs/protocol.md is the prose).
 *
 * AF_UNIX SOCK_SEQPACKET: one message = one packet = a header and its payload.
 * Both ends are on the same host, so integers are in host byte order. Used by
 * the preload library (client) and the trace service (server); nothing here
 * allocates.
 */
#ifndef KILN_IPC_PROTO_H
#define KILN_IPC_PROTO_H

#include <stdint.h>

#define KILN_PROTO_MAGIC   0x4e4c494bu /* "KILN" */
#define KILN_PROTO_VERSION 2u
#define KILN_MSG_MAX       65536u      /* header + payload, either direction */
#define KILN_PATH_MAX      4096u       /* longest path in a message, bytes */

/* Environment of every traced process (set by `kiln trace`, restored by the
 * preload library into every exec/spawn environment). */
#define KILN_ENV_SOCKET  "KILN_SOCKET"  /* path of the server socket */
#define KILN_ENV_PRELOAD "KILN_PRELOAD" /* absolute path of libkiln-trace.so */
#define KILN_ENV_CACHE   "KILN_CACHE"   /* path of the shared verdict cache (later) */
#define KILN_ENV_RUNDIR  "KILN_RUN_DIR" /* the private run directory */
#define KILN_ENV_TRUSTED "KILN_TRUSTED_LIBS" /* libraries visible for the whole run,
						colon-separated: the loader check skips them */
#define KILN_ENV_EXEC_EXPECT "KILN_EXEC_EXPECT" /* "dev:ino" (hex) of the program a
						 script exec must end up running */
#define KILN_ENV_EXEC_NAME "KILN_EXEC_NAME" /* the process name (comm) of a program
					     kiln ran by fd; set for that program only */
#define KILN_ENV_NAMESPACES "KILN_NAMESPACES" /* "allow", else chroot, mount,
						 unshare... fail with EPERM */
#define KILN_ENV_LOCALES "KILN_LOCALES" /* locale names (':'-separated) whose plan is
					 CLEAN for every category with LOCPATH unset:
					 setlocale need not ask (docs/glibc-data.md) */
#define KILN_ENV_CLEAN "KILN_CLEAN"     /* glibc data sets planned CLEAN for the run:
					 "nss:passwd ... gconv tz" (docs/glibc-data.md) */

enum kiln_msg_type {
	KILN_MSG_HELLO       = 1, /* c->s: struct kiln_hello */
	KILN_MSG_HELLO_OK    = 2, /* s->c: struct kiln_hello_ok */
	KILN_MSG_REFUSED     = 3, /* s->c: u32 reason + text; then the server closes */
	KILN_MSG_QUERY       = 4, /* c->s: struct kiln_query + path bytes */
	KILN_MSG_VERDICT     = 5, /* s->c: struct kiln_verdict_msg */
	KILN_MSG_QUERY_DIR   = 6, /* c->s: struct kiln_query_dir + dir + entries */
	KILN_MSG_VERDICT_DIR = 7, /* s->c: struct kiln_verdict_dir + u8 hidden[count] */
	KILN_MSG_EVENT       = 8, /* c->s: struct kiln_event_msg + path; no reply */
	KILN_MSG_QUERY_DATA  = 9, /* c->s: struct kiln_query_data + a + b; s->c: VERDICT
				   * with an enum kiln_data_answer */
	KILN_MSG_NOTE        = 10, /* c->s: as QUERY, read classes only; no reply: the
				    * path was absent, the client answered itself */
};

struct kiln_msg_hdr {
	uint16_t type;
	uint16_t flags;   /* 0 */
	uint32_t len;     /* payload bytes after this header */
};

struct kiln_hello {
	uint32_t magic;   /* KILN_PROTO_MAGIC */
	uint16_t version; /* KILN_PROTO_VERSION */
	uint16_t role;    /* 1 = trace client, 2 = meta client (src/ipc/meta_proto.h) */
	uint32_t pid;     /* informational; the server trusts SO_PEERCRED */
};

struct kiln_hello_ok {
	uint32_t magic;
	uint16_t version;
	uint16_t reserved;
};

enum kiln_refuse_reason {
	KILN_REFUSE_VERSION = 1,
	KILN_REFUSE_PEER    = 2, /* different uid */
	KILN_REFUSE_BUSY    = 3,
	KILN_REFUSE_BUILD   = 4, /* a client from another kiln build */
};

struct kiln_query {
	uint32_t access;  /* enum kiln_access bits (src/trace/verdict.h) */
	uint32_t qflags;  /* enum kiln_qflags bits */
	uint32_t pathlen; /* path bytes follow, not NUL-terminated, <= KILN_PATH_MAX */
};

/* How an ALLOW answer binds to the file the client's call then reaches
 * (docs/protocol.md, "Binding a verdict to a file"): the path may change
 * between the server's look and the call. */
enum kiln_bind {
	KILN_BIND_ANY         = 0, /* holds whatever the file system does (managed
				    * trees), or nothing to bind (not ALLOW) */
	KILN_BIND_NO_SYMLINKS = 1, /* holds in every state in which the path has no
				    * symlink on its way: the client opens with
				    * RESOLVE_NO_SYMLINKS */
	KILN_BIND_IDENT       = 2, /* holds for the file (or directory) named by the
				    * identities below: the client verifies what it
				    * opened */
};

enum kiln_id_flags {
	KILN_ID_FILE     = 1u << 0, /* dev/ino: the file the path reaches */
	KILN_ID_DEV_ONLY = 1u << 1, /* ... of which only dev counts (procfs: inode
				     * numbers come and go) */
	KILN_ID_DIR      = 1u << 2, /* dir_dev/dir_ino: the directory the path's last
				     * name is in (to create it there) */
};

struct kiln_verdict_msg {
	uint32_t verdict;  /* enum kiln_verdict */
	uint16_t bind;     /* enum kiln_bind */
	uint16_t id_flags; /* enum kiln_id_flags; no KILN_ID_FILE: the path reaches
			    * no file (an open must fail, or create a new one) */
	uint64_t dev, ino;
	uint64_t dir_dev, dir_ino;
	/* For a STAT question READ, for a READ question STAT, when that class's
	 * answer for the same path and qflags is this ALLOW too, for the whole
	 * run (STABLE, not yet asked by anyone): the asking thread may answer
	 * its own next such question and tell the server with a NOTE
	 * (docs/verdict-cache.md, "Answered ahead"). 0 for every other answer. */
	uint32_t ahead;
	uint32_t reserved; /* 0 */
};

/* Followed by dirlen bytes of directory path, then `count` entries, each a
 * uint16_t name length and the name bytes (no NUL). The whole message fits in
 * KILN_MSG_MAX; a client splits longer listings into several queries. */
struct kiln_query_dir {
	uint32_t count;
	uint32_t dirlen;
};

struct kiln_verdict_dir {
	uint32_t count;   /* followed by count bytes: 1 = hide that entry */
};

/* A question about data glibc loads itself (src/trace/verdict.h,
 * kiln_ask_data): alen bytes of a, then b (the rest), neither NUL-terminated
 * nor holding a NUL, each at most KILN_PATH_MAX bytes. */
struct kiln_query_data {
	uint32_t kind;    /* enum kiln_data_kind */
	uint32_t arg;     /* KILN_D_LOCALE: categories, bit c for LC_* category c */
	uint32_t alen;
};

struct kiln_event_msg {
	uint32_t kind;    /* enum kiln_event_kind */
	uint32_t pathlen; /* path bytes follow */
};

#endif
