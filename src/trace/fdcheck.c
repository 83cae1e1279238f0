/* Checks of calls that name a file by something other than a path string:
 * metadata writes through an fd, and AF_UNIX socket addresses. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include "trace/kt.h"
#include "common/rawsys.h"

int kt_check_fd_write(int fd, unsigned access)
{
	/* An fd opened for writing was checked for writing when it was opened
	 * (no round trip here, the common case: install, cp -p, ld). One
	 * opened for reading, or O_PATH, must not become a way to change a
	 * file outside the writable areas: ask for its path. */
	long fl = kt_sys2(SYS_fcntl, fd, F_GETFL);
	if (fl < 0)
		return 0; /* EBADF & co: the real call says so */
	if (!(fl & O_PATH) && (fl & O_ACCMODE) != O_RDONLY)
		return 0;
	char path[KT_PATH_BUF];
	int n = kt_fd_path(fd, path);
	if (n < 0)
		return EACCES; /* cannot tell which file: fail closed */
	if (path[0] != '/')
		return 0; /* pipe:[...], socket:[...], anon_inode: not a file */
	return kt_verdict_errno(kiln_ask(path, access, KILN_Q_NOFOLLOW), access);
}

int kt_check_sockaddr(const void *addr, unsigned len, unsigned access)
{
	const struct sockaddr_un *sun = addr;
	size_t off = offsetof(struct sockaddr_un, sun_path);
	if (!addr || len <= off || sun->sun_family != AF_UNIX || !sun->sun_path[0])
		return 0; /* not a named AF_UNIX address (abstract, unnamed, IP...) */
	size_t n = len - off;
	if (n > sizeof sun->sun_path)
		n = sizeof sun->sun_path;
	char path[sizeof sun->sun_path + 1];
	memcpy(path, sun->sun_path, n);
	path[n] = '\0';
	return kt_check(AT_FDCWD, path, access, KILN_Q_NOFOLLOW * !!(access & KILN_A_CREATE), 0);
}
