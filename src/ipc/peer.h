/* Who is at the other end of a Unix socket. */
#ifndef KILN_IPC_PEER_H
#define KILN_IPC_PEER_H

#include <stddef.h>
#include <sys/types.h>

/* The peer's credentials as the kernel recorded them at connect (SO_PEERCRED).
 * Returns 0, or -1 with errno. */
int kiln_peer_cred(int fd, pid_t *pid, uid_t *uid, gid_t *gid);

/* The command line of `pid` from /proc/PID/cmdline: its arguments separated by
 * NUL bytes, truncated to cap bytes. Returns the number of bytes stored (0 if
 * the process is gone or has no command line). */
size_t kiln_proc_cmdline(pid_t pid, char *buf, size_t cap);

#endif
