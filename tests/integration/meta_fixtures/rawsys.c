/* Fixture for `syscalls`: a static binary (all of libc's syscall sites) plus
 * raw syscall instructions of its own, and the bytes 0f 05 hidden inside
 * other instructions, which must not count. */
#include <unistd.h>
#include <sys/syscall.h>

long __attribute__((noinline)) raw_getpid(void)
{
	long ret;
	__asm__ volatile("syscall" : "=a"(ret) : "a"(SYS_getpid) : "rcx", "r11", "memory");
	return ret;
}

/* Never called: the other ways into the kernel, for the scanner to find. */
void __attribute__((noinline, used)) other_entries(void)
{
	__asm__ volatile("int $0x80\n\tsysenter" : : : "memory");
}

unsigned __attribute__((noinline)) hidden_bytes(void)
{
	unsigned v;
	/* mov $0x050f050f, %eax: the immediate holds 0f 05 twice */
	__asm__ volatile("mov $0x050f050f, %0" : "=r"(v));
	return v;
}

/* A data object inside .text (as hand-written crypto assembly has): objdump
 * dumps it as data, so its 0f 05 bytes are no syscall either. */
__asm__(".text\n.type fx_text_table, @object\nfx_text_table:\n"
	".byte 0x0f, 0x05, 0x90, 0x0f, 0x05\n.size fx_text_table, 5\n");

int main(void)
{
	return (int)(raw_getpid() + syscall(SYS_getppid) + hidden_bytes() == 0);
}
