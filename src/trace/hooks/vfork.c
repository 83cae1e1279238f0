/* vfork stays vfork: the shells and compiler drivers of a build (dash,
 * gcc, collect2) start every program with it, and run as fork each such child
 * would copy the parent's page tables and fault its pages back in (measured:
 * 100-103 page faults per /bin/true that dash runs, against 55).
 *
 * A C function cannot call vfork for its caller (the child would return
 * through, and the parent then reuse, the frame the child has clobbered), so
 * the hook is glibc's own few instructions: the return address is kept in
 * %rdi across the system call, not on the shared stack. Before it, the
 * parent looks up the real functions a child calls before it execs (exec,
 * close, dup2, dup3) and sets kt_vfork_child (kt.h), which
 * the child's hooks obey; the parent clears it when it resumes. */
#include <errno.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "trace/kt.h"

#define STR_(x) #x
#define STR(x)  STR_(x)

KT_EXPORT pid_t vfork(void);
KT_EXPORT pid_t __vfork(void);

__attribute__((used, visibility("hidden"))) void kt_vfork_enter(void)
{
	kt_resolve_before_child();
	kt_vfork_child = KT_VFORK_CHILD;
}

/* The parent, resumed: `r` is what the system call returned. */
__attribute__((used, visibility("hidden"))) pid_t kt_vfork_leave(long r)
{
	kt_vfork_child = KT_VFORK_NONE;
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return (pid_t)r;
}

/* With a shadow stack (CET), neither side may `ret` to the caller: the
 * child's calls overwrite the parent's shadow-stack entry, so both skip it
 * and jump, as glibc does. rdsspq leaves %rsi 0 when no shadow stack is on
 * (or the CPU has none: it is a no-op there). */
/* In a section of its own, as -ffunction-sections puts each C function, so
 * that src/trace/hot-text.ld can place it with the fork path. */
__asm__(".pushsection .text.vfork, \"ax\", @progbits\n"
	".globl vfork\n"
	".globl __vfork\n"
	".type vfork, @function\n"
	".type __vfork, @function\n"
	".p2align 4\n"
	"vfork:\n"
	"__vfork:\n"
	".cfi_startproc\n"
	"	endbr64\n"
	"	subq $8, %rsp\n"
	".cfi_adjust_cfa_offset 8\n"
	"	call kt_vfork_enter\n"
	"	addq $8, %rsp\n"
	".cfi_adjust_cfa_offset -8\n"
	"	popq %rdi\n"
	".cfi_adjust_cfa_offset -8\n"
	".cfi_register %rip, %rdi\n"
	"	movl $" STR(SYS_vfork) ", %eax\n"
	"	syscall\n"
	"	pushq %rdi\n"
	".cfi_adjust_cfa_offset 8\n"
	".cfi_offset %rip, -8\n"
	"	testq %rax, %rax\n"
	"	jz 1f\n"
	"	movq %rax, %rdi\n"
	"	subq $8, %rsp\n"
	".cfi_adjust_cfa_offset 8\n"
	"	call kt_vfork_leave\n"
	"	addq $8, %rsp\n"
	".cfi_adjust_cfa_offset -8\n"
	"1:\n"
	"	xorl %esi, %esi\n"
	"	rdsspq %rsi\n"
	"	testq %rsi, %rsi\n"
	"	jz 2f\n"
	"	popq %rdi\n"
	".cfi_adjust_cfa_offset -8\n"
	".cfi_register %rip, %rdi\n"
	"	movl $1, %esi\n"
	"	incsspq %rsi\n"
	"	jmp *%rdi\n"
	".cfi_adjust_cfa_offset 8\n"
	".cfi_offset %rip, -8\n"
	"2:\n"
	"	ret\n"
	".cfi_endproc\n"
	".size vfork, .-vfork\n"
	".size __vfork, .-__vfork\n"
	".popsection\n");
