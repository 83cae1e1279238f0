/* The meta server: `kiln meta` command lines forwarded by clients
 * (src/meta/forward.h) run here against models kept warm in a cache
 * (src/meta/cache.h). Protocol: docs/meta-server.md, src/ipc/meta_proto.h. */
#ifndef KILN_META_SERVER_H
#define KILN_META_SERVER_H

#include <stddef.h>
#include <stdint.h>

struct meta_server_config {
	const char *socket;        /* where to listen; a stale socket there is replaced */
	const char *rundir;        /* removed at exit when set (kiln meta run's private dir) */
	uint64_t max_bytes;        /* --max-memory; 0 = unbounded */
	unsigned idle_timeout_s;   /* stop after this long without a job; 0 = never */
	int fork_jobs;             /* run each job in a child forked from the warm server
	                              (kept for measuring; threads are the default) */
};

/* Runs the server in this process until the lifeline (a pipe's read end, or
 * -1 for none) reaches EOF, SIGTERM or STOP arrives, or the idle timeout
 * passes; then it stops listening, lets running jobs finish, removes the
 * socket (and cfg->rundir) and returns 0, or 1 if it could not start.
 * On ready_fd (-1: none) it writes "R" once listening, or "E" and a message,
 * and closes it. */
int meta_server_main(const struct meta_server_config *cfg, int ready_fd, int lifeline_fd);

/* Listens on PATH like kiln_server_listen, replacing a stale socket left by
 * a dead server; a live server there is an error. Returns the fd or -1. */
int meta_server_listen(const char *path, char *err, size_t errlen);

#endif
