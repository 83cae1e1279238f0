/* The meta protocol's wire format (docs/meta-server.md is the prose): a
 * `kiln meta` client forwarding its command line to a meta server. Same
 * transport, framing and handshake as the trace protocol (src/ipc/proto.h),
 * with role 2, and the HELLO followed by the client's build identity
 * (src/server/ident.h): a client and a server of different builds never talk. */
#ifndef KILN_IPC_META_PROTO_H
#define KILN_IPC_META_PROTO_H

#include <stdint.h>

#include "ipc/proto.h"

#define KILN_META_ROLE 2
#define KILN_ENV_META_SOCKET "KILN_META_SOCKET" /* path of the meta server's socket */

enum kiln_meta_msg_type {
	KILN_MSG_META_JOB     = 16, /* c->s: struct kiln_meta_job, argv; fds: cwd, then 0-2 per fdmask */
	KILN_MSG_META_STARTED = 17, /* s->c: empty; the job runs, output may be written from now on */
	KILN_MSG_META_DONE    = 18, /* s->c: struct kiln_meta_done; the job is over */
	KILN_MSG_META_CANCEL  = 19, /* c->s: empty; stop the job (answered by DONE) */
	KILN_MSG_META_STATS   = 20, /* c->s: empty; s->c: struct kiln_meta_stats */
	KILN_MSG_META_STOP    = 21, /* c->s: empty; s->c: DONE {0}; the server drains and exits */
};

/* Followed by argc NUL-terminated strings (argv[0] is "meta"). Descriptors
 * (SCM_RIGHTS): the client's working directory (O_PATH), then those of 0, 1
 * and 2 whose bit is set in fdmask (a closed descriptor is not sent). */
struct kiln_meta_job {
	uint32_t umask;
	uint32_t fdmask;  /* bit N: fd N sent */
	uint32_t argc;
	uint32_t reserved; /* 0 */
};

struct kiln_meta_done {
	int32_t status;   /* the command's exit status */
	uint32_t parsed;  /* 1 when this job parsed its binary (a cache miss) */
	uint32_t sigpipe; /* 1: a write to fd 1 or 2 met a closed pipe; the
	                     client dies of SIGPIPE, as it would have standalone */
	uint32_t reserved;
};

/* Counters since the server started (all u64). */
struct kiln_meta_stats {
	uint64_t pid;
	uint64_t jobs;       /* jobs started */
	uint64_t running;    /* jobs running now */
	uint64_t cancelled;  /* jobs cancelled (CANCEL, or the client hung up) */
	uint64_t hits;       /* model requests served from the cache */
	uint64_t misses;     /* model requests that parsed */
	uint64_t parses;     /* successful parses */
	uint64_t stale;      /* cached models found changed on disk and dropped */
	uint64_t evictions;  /* models evicted for --max-memory */
	uint64_t models;     /* models held now */
	uint64_t bytes;      /* their estimated memory (docs/meta-server.md) */
	uint64_t max_bytes;  /* --max-memory; 0 = unbounded */
	uint64_t peak_bytes; /* highest `bytes` seen */
};

#endif
