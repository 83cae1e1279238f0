/* Changes of root, mounts and namespaces (chroot, unshare, clone with
 * CLONE_NEW*, mount and the new mount API, pivot_root, setns). After one of
 * them a path resolves in a root or mount namespace the server does not
 * look at, so every answer would be about another file: refused with EPERM
 * (what a container's seccomp filter says) unless `kiln trace` was told
 * "namespaces allow" by its policy (KILN_NAMESPACES=allow). */
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "ipc/proto.h"
#include "trace/kt.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

#define NS_FLAGS (CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWUTS | \
		  CLONE_NEWIPC | CLONE_NEWCGROUP | CLONE_NEWTIME)

int kt_ns_refused(unsigned long flags)
{
	if (flags != KT_NS_ALWAYS && !(flags & NS_FLAGS))
		return 0;
	kt_init();
	const char *v = kt_env(KILN_ENV_NAMESPACES);
	return v && !strcmp(v, "allow") ? 0 : EPERM;
}
