/* clone(3) with CLONE_NEW* flags: a new namespace, refused like unshare
 * (trace/ns.c). The generated hooks cover chroot, unshare, mount & co. */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/types.h>

#include "trace/kt.h"

#define REAL(name, type) ((type)kt_real(&real_##name, #name))
static KT_HOT void *_Atomic real_clone;

KT_EXPORT int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	pid_t *ptid = va_arg(ap, pid_t *);
	void *tls = va_arg(ap, void *);
	pid_t *ctid = va_arg(ap, pid_t *);
	va_end(ap);
	typedef int (*fn_t)(int (*)(void *), void *, int, void *, ...);
	fn_t real = REAL(clone, fn_t);
	int e = real ? kt_ns_refused((unsigned long)(unsigned)flags) : ENOSYS;
	if (e) {
		errno = e;
		return -1;
	}
	return real(fn, stack, flags, arg, ptid, tls, ctid);
}
