#include "ipc/peer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

int kiln_peer_cred(int fd, pid_t *pid, uid_t *uid, gid_t *gid)
{
	struct ucred cr;
	socklen_t len = sizeof cr;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return -1;
	if (len != sizeof cr) {
		errno = EPROTO;
		return -1;
	}
	*pid = cr.pid;
	*uid = cr.uid;
	*gid = cr.gid;
	return 0;
}

size_t kiln_proc_cmdline(pid_t pid, char *buf, size_t cap)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%ld/cmdline", (long)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	size_t got = 0;
	while (got < cap) {
		ssize_t n = read(fd, buf + got, cap - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	while (got > 0 && buf[got - 1] == '\0') /* drop the terminating NULs */
		got--;
	return got;
}
