/* The checked window (docs/glibc-data.md): glibc's own opens of its data,
 * which no hook sees, checked like the hooks' by trapping every system call
 * of one thread for the duration of one call (Linux's syscall user
 * dispatch, PR_SET_SYSCALL_USER_DISPATCH, 5.11+).
 *
 * While the thread's selector byte says BLOCK, each system call made from
 * outside this library raises SIGSYS; the handler below checks the path it
 * names as a hook would and then makes the call itself (from inside this
 * library, which the kernel lets through), or answers ENOENT/EACCES. So
 * glibc meets a hidden locale, catalog or NSS module as an absent one and
 * does exactly what it does in a chroot without it.
 *
 * Costs about a microsecond per system call in the window, so it is used
 * only where the server's plan says the outcome depends on hidden files.
 * The SIGSYS handler, once installed, stays: SIGSYS that is not ours goes
 * where the program's disposition (remembered when ours was installed, and
 * again whenever a window finds it replaced) says. All signals but SIGSYS
 * are blocked in the window, so no handler of the program runs trapped. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <ucontext.h>

#include "trace/kt.h"
#include "common/rawsys.h"

#ifndef PR_SET_SYSCALL_USER_DISPATCH
#define PR_SET_SYSCALL_USER_DISPATCH 59
#define PR_SYS_DISPATCH_OFF 0
#define PR_SYS_DISPATCH_ON 1
#define SYSCALL_DISPATCH_FILTER_ALLOW 0
#define SYSCALL_DISPATCH_FILTER_BLOCK 1
#endif
#ifndef SYS_USER_DISPATCH
#define SYS_USER_DISPATCH 2
#endif
#define KT_SA_RESTORER 0x04000000ul

/* This library's text: system calls from here are never trapped. */
extern const char __ehdr_start[] __attribute__((visibility("hidden")));
extern const char __etext[] __attribute__((visibility("hidden")));

/* The kernel's struct sigaction (rt_sigaction with an 8-byte set). */
struct ksigaction {
	void *handler;
	unsigned long flags;
	void (*restorer)(void);
	uint64_t mask;
};

static KT_TLS volatile char selector;
static KT_TLS int in_window, window_broken, window_hidden;
static struct ksigaction program_sigsys; /* the disposition ours replaced */
static KT_HOT _Atomic int unsupported;

/* Our handler returns through this, so its rt_sigreturn is never trapped. */
void kt_sud_restore(void) __attribute__((visibility("hidden")));
__asm__(".text\n"
	".type kt_sud_restore, @function\n"
	"kt_sud_restore:\n"
	"\tmov $15, %eax\n"
	"\tsyscall\n"
	"\thlt\n"
	".size kt_sud_restore, .-kt_sud_restore\n");

static void handler(int sig, siginfo_t *si, void *ucv);

static const struct ksigaction ours = {
	(void *)handler, SA_SIGINFO | KT_SA_RESTORER, kt_sud_restore, ~0ull,
};

/* The program's own SIGSYS (a seccomp trap, kill -SYS): what its
 * disposition says. */
static void forward(int sig, siginfo_t *si, void *ucv)
{
	void *h = program_sigsys.handler;
	if (h == (void *)SIG_IGN)
		return;
	if (h != (void *)SIG_DFL) {
		if (program_sigsys.flags & SA_SIGINFO)
			((void (*)(int, siginfo_t *, void *))h)(sig, si, ucv);
		else
			((void (*)(int))h)(sig);
		return;
	}
	/* Default: die of SIGSYS, as without kiln. */
	struct ksigaction dfl = { (void *)SIG_DFL, 0, NULL, 0 };
	kt_sys4(SYS_rt_sigaction, SIGSYS, &dfl, NULL, 8);
	uint64_t unblock = 1ull << (SIGSYS - 1);
	kt_sys4(SYS_rt_sigprocmask, SIG_UNBLOCK, &unblock, NULL, 8);
	kt_sys3(SYS_tgkill, kt_getpid(), kt_sys0(SYS_gettid), SIGSYS);
}

/* What a trapped system call must fail with (0: make it). */
static int checked(long nr, const long *a)
{
	switch (nr) {
	case SYS_open:
		return kt_check(AT_FDCWD, (const char *)a[0], kt_open_access((int)a[1]),
				kt_open_qflags((int)a[1]), 0);
	case SYS_openat:
		return kt_check((int)a[0], (const char *)a[1], kt_open_access((int)a[2]),
				kt_open_qflags((int)a[2]), 0);
	case SYS_openat2: {
		const struct open_how *how = (const struct open_how *)a[2];
		if (how && (how->resolve & RESOLVE_IN_ROOT))
			return ENOSYS;
		int fl = how ? (int)how->flags : 0;
		return kt_check((int)a[0], (const char *)a[1], kt_open_access(fl), kt_open_qflags(fl), 0);
	}
	case SYS_stat:
		return kt_check(AT_FDCWD, (const char *)a[0], KILN_A_STAT, 0, 0);
	case SYS_lstat:
		return kt_check(AT_FDCWD, (const char *)a[0], KILN_A_STAT, KILN_Q_NOFOLLOW, 0);
	case SYS_newfstatat:
		return kt_check((int)a[0], (const char *)a[1], KILN_A_STAT, 0, (int)a[3]);
	case SYS_statx:
		return kt_check((int)a[0], (const char *)a[1], KILN_A_STAT, 0, (int)a[2]);
	case SYS_access:
		return kt_check(AT_FDCWD, (const char *)a[0], KILN_A_STAT, 0, 0);
	case SYS_faccessat:
		return kt_check((int)a[0], (const char *)a[1], KILN_A_STAT, 0, 0);
	case SYS_faccessat2:
		return kt_check((int)a[0], (const char *)a[1], KILN_A_STAT, 0, (int)a[3]);
	case SYS_readlink:
		return kt_check(AT_FDCWD, (const char *)a[0], KILN_A_STAT, KILN_Q_NOFOLLOW, 0);
	case SYS_readlinkat:
		return kt_check((int)a[0], (const char *)a[1], KILN_A_STAT, KILN_Q_NOFOLLOW, 0);
	case SYS_connect:
		return kt_check_sockaddr((const void *)a[1], (unsigned)a[2], KILN_A_STAT);
	default:
		return 0;
	}
}

static void handler(int sig, siginfo_t *si, void *ucv)
{
	if (si->si_code != SYS_USER_DISPATCH || !in_window) {
		forward(sig, si, ucv);
		return;
	}
	selector = SYSCALL_DISPATCH_FILTER_ALLOW;
	int saved_errno = errno;
	ucontext_t *uc = ucv;
	greg_t *g = uc->uc_mcontext.gregs;
	long nr = g[REG_RAX];
	long a[6] = { g[REG_RDI], g[REG_RSI], g[REG_RDX], g[REG_R10], g[REG_R8], g[REG_R9] };
	long r;
	switch (nr) {
	case SYS_rt_sigprocmask: {
		/* On the mask the handler's return restores, not on its own. */
		uint64_t *mask = (uint64_t *)&uc->uc_sigmask;
		if (a[3] != 8) {
			r = -EINVAL;
			break;
		}
		if (a[2])
			memcpy((void *)a[2], mask, 8);
		r = 0;
		if (a[1]) {
			uint64_t set;
			memcpy(&set, (const void *)a[1], 8);
			set &= ~((1ull << (SIGKILL - 1)) | (1ull << (SIGSTOP - 1)));
			if (a[0] == SIG_BLOCK)
				*mask |= set;
			else if (a[0] == SIG_UNBLOCK)
				*mask &= ~set;
			else if (a[0] == SIG_SETMASK)
				*mask = set;
			else
				r = -EINVAL;
		}
		break;
	}
	case SYS_rt_sigreturn:
	case SYS_clone:
	case SYS_clone3:
	case SYS_fork:
	case SYS_vfork:
	case SYS_execve:
	case SYS_execveat:
		/* Cannot be made from here: run it where it was, untrapped from
		 * now on (the rest of this window goes unchecked). */
		g[REG_RIP] -= 2;
		window_broken = 1;
		errno = saved_errno;
		return;
	case SYS_getdents64:
		r = getdents64((int)a[0], (void *)a[1], (size_t)a[2]);
		if (r < 0)
			r = -errno;
		break;
	default: {
		int e = checked(nr, a);
		window_hidden |= e != 0;
		r = e ? -e : kt_sys6(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	}
	}
	g[REG_RAX] = r;
	errno = saved_errno;
	selector = SYSCALL_DISPATCH_FILTER_BLOCK;
}

/* Our handler in place (the program may have replaced it since). */
static int install(void)
{
	struct ksigaction cur;
	if (kt_sys4(SYS_rt_sigaction, SIGSYS, NULL, &cur, 8) < 0)
		return -1;
	if (cur.handler == (void *)handler)
		return 0;
	program_sigsys = cur;
	return kt_sys4(SYS_rt_sigaction, SIGSYS, &ours, NULL, 8) < 0 ? -1 : 0;
}

void kt_window_disable(void)
{
	atomic_store_explicit(&unsupported, 1, memory_order_relaxed);
}

int kt_window_open(struct kt_window *w)
{
	w->nested = in_window;
	if (w->nested)
		return 0; /* already inside one: its traps cover this too */
	if (atomic_load_explicit(&unsupported, memory_order_relaxed))
		return -1;
	uint64_t all_but_sys = ~(1ull << (SIGSYS - 1));
	kt_sys4(SYS_rt_sigprocmask, SIG_SETMASK, &all_but_sys, &w->mask, 8);
	if (install() < 0 ||
	    kt_sys5(SYS_prctl, PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON,
		    (unsigned long)__ehdr_start, (unsigned long)(__etext - __ehdr_start), &selector) < 0) {
		atomic_store_explicit(&unsupported, 1, memory_order_relaxed);
		kt_sys4(SYS_rt_sigprocmask, SIG_SETMASK, &w->mask, NULL, 8);
		return -1;
	}
	in_window = 1;
	window_broken = 0;
	window_hidden = 0;
	selector = SYSCALL_DISPATCH_FILTER_BLOCK;
	return 0;
}

int kt_window_close(struct kt_window *w)
{
	if (w->nested)
		return 0;
	selector = SYSCALL_DISPATCH_FILTER_ALLOW;
	in_window = 0;
	kt_sys5(SYS_prctl, PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_OFF, 0, 0, 0);
	kt_sys4(SYS_rt_sigprocmask, SIG_SETMASK, &w->mask, NULL, 8);
	return window_hidden;
}

int kt_checked(void (*fn)(void *), void *arg)
{
	struct kt_window w;
	if (kt_window_open(&w) < 0)
		return -1;
	fn(arg);
	kt_window_close(&w);
	return 0;
}
