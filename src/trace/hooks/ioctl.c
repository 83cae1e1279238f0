/* ioctl: the requests that change a file or its file system rather than
 * talk to a device. An fd opened for reading is enough for a file's owner
 * (and root) to set its inode flags (chattr +i: dpkg can no longer replace
 * it), its file system attributes, fs-verity (read-only for good) or an
 * encryption policy: checked as fchmod is. Those on a whole file system
 * (freeze, thaw, label; root only) are refused as a build that is not
 * root would be. Every other request goes to the real ioctl unchecked. */
#include <errno.h>
#include <linux/fs.h>
#include <linux/fsverity.h>
#include <stdarg.h>

#include "trace/kt.h"

static KT_HOT void *_Atomic real_ioctl;

int kt_ioctl_refused(int fd, unsigned long req)
{
	switch (req) {
	case FS_IOC_SETFLAGS:
	case FS_IOC32_SETFLAGS:
	case FS_IOC_SETVERSION:
	case FS_IOC32_SETVERSION:
	case FS_IOC_FSSETXATTR:
	case FS_IOC_ENABLE_VERITY:
	case FS_IOC_SET_ENCRYPTION_POLICY:
		return kt_check_fd_write(fd, KILN_A_WRITE);
	case FIFREEZE:
	case FITHAW:
	case FS_IOC_SETFSLABEL:
		return EPERM;
	default:
		return 0;
	}
}

KT_EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	typedef int (*fn)(int, unsigned long, ...);
	fn real = (fn)kt_real(&real_ioctl, "ioctl");
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	if (kt_guard)
		return real(fd, req, arg);
	kt_enter();
	int err = kt_ioctl_refused(fd, req);
	kt_leave();
	if (err) {
		errno = err;
		return -1;
	}
	return real(fd, req, arg);
}
