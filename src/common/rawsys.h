/* Raw system calls for the preload library (src/trace) and for src/shm as
 * compiled into it (src/shm/sys.h).
 *
 * The hook path must not call libc functions that the library itself hooks
 * (they would re-enter the hooks), nor anything that locks or allocates. So
 * every system call kiln makes on its own behalf inside a traced process goes
 * through these inline wrappers: no errno, the result is the kernel's
 * (negative errno on failure). x86-64 only for now.
 */
#ifndef KILN_COMMON_RAWSYS_H
#define KILN_COMMON_RAWSYS_H

#include <stddef.h>
#include <sys/syscall.h>

#if !defined(__x86_64__)
#error "kiln's preload library implements raw system calls for x86-64 only"
#endif

static inline long kt_sys6(long n, long a, long b, long c, long d, long e, long f)
{
	long ret;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

#define kt_sys0(n)             kt_sys6((n), 0, 0, 0, 0, 0, 0)
#define kt_sys1(n, a)          kt_sys6((n), (long)(a), 0, 0, 0, 0, 0)
#define kt_sys2(n, a, b)       kt_sys6((n), (long)(a), (long)(b), 0, 0, 0, 0)
#define kt_sys3(n, a, b, c)    kt_sys6((n), (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define kt_sys4(n, a, b, c, d) kt_sys6((n), (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
#define kt_sys5(n, a, b, c, d, e) \
	kt_sys6((n), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0)

/* Whether a raw system call's result is an error (-4095..-1): the one test
 * for calls such as mmap whose successes are not all non-negative ints. */
static inline int kt_sys_failed(long r)
{
	return r < 0 && r > -4096;
}

static inline int kt_getpid(void) { return (int)kt_sys0(SYS_getpid); }
static inline long kt_close(int fd) { return kt_sys1(SYS_close, fd); }
static inline long kt_write(int fd, const void *buf, size_t n)
{
	return kt_sys3(SYS_write, fd, buf, n);
}

#endif
