/* The system calls src/shm makes, each returning its result or -errno and
 * leaving errno alone.
 *
 * Compiled into the preload library (KILN_SHM_RAW_SYSCALLS, set by the
 * Makefile for those objects) they are raw system calls: that library is
 * bound lazily, and a traced process's first question attached the map
 * through libc's fstat, pread and mmap, three PLT slots resolved by ld.so
 * on the spot (timed in place: 7-14 us for the first, 15-20 us in all; a
 * first question took 104-112 us, 85-94 us since; docs/benchmarks.md). Everywhere else
 * (kiln itself, the unit tests) they are libc's, which sanitizers
 * intercept: a mapping made behind ThreadSanitizer's back keeps the shadow
 * of whatever was mapped there before. */
#ifndef KILN_SHM_SYS_H
#define KILN_SHM_SYS_H

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef KILN_SHM_RAW_SYSCALLS
#include "common/rawsys.h"

static inline long shm_sys_fstat(int fd, struct stat *st)
{
	return kt_sys2(SYS_fstat, fd, st);
}

static inline long shm_sys_pread(int fd, void *buf, size_t n, off_t off)
{
	return kt_sys4(SYS_pread64, fd, buf, n, off);
}

/* The address, or -errno (never MAP_FAILED). */
static inline long shm_sys_mmap(size_t len, int prot, int flags, int fd)
{
	return kt_sys6(SYS_mmap, 0, len, prot, flags, fd, 0);
}

static inline long shm_sys_munmap(void *addr, size_t len)
{
	return kt_sys2(SYS_munmap, addr, len);
}

static inline long shm_sys_madvise(void *addr, size_t len, int advice)
{
	return kt_sys3(SYS_madvise, addr, len, advice);
}
#else
/* r as a system call returns it: -errno on failure, errno as it was. */
static inline long shm_sys_result(long r, int fail, int saved)
{
	if (fail) {
		r = -errno;
		errno = saved;
	}
	return r;
}

static inline long shm_sys_fstat(int fd, struct stat *st)
{
	int saved = errno;
	long r = fstat(fd, st);
	return shm_sys_result(r, r < 0, saved);
}

static inline long shm_sys_pread(int fd, void *buf, size_t n, off_t off)
{
	int saved = errno;
	long r = pread(fd, buf, n, off);
	return shm_sys_result(r, r < 0, saved);
}

static inline long shm_sys_mmap(size_t len, int prot, int flags, int fd)
{
	int saved = errno;
	void *p = mmap(NULL, len, prot, flags, fd, 0);
	return shm_sys_result((long)p, p == MAP_FAILED, saved);
}

static inline long shm_sys_munmap(void *addr, size_t len)
{
	int saved = errno;
	long r = munmap(addr, len);
	return shm_sys_result(r, r < 0, saved);
}

static inline long shm_sys_madvise(void *addr, size_t len, int advice)
{
	int saved = errno;
	long r = madvise(addr, len, advice);
	return shm_sys_result(r, r < 0, saved);
}
#endif

/* A mapping's address from shm_sys_mmap's result, or NULL. */
static inline void *shm_sys_addr(long r)
{
	return r < 0 && r > -4096 ? NULL : (void *)r;
}

#endif
