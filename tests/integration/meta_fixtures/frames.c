/* Fixture for `frames`: functions record, at run time, the addresses of
 * their locals and formals and their own CFA (__builtin_dwarf_cfa()) at a
 * known PC (the return address of the probe call). The test checks that
 * `kiln meta frames` places each variable at that CFA offset at that PC. */
#include <stdio.h>
#include <string.h>

static void __attribute__((noinline)) probe(const char *fn, const char *var, const void *addr,
					    const void *cfa)
{
	printf("%s %s %lu %lu %lu\n", fn, var, (unsigned long)__builtin_return_address(0),
	       (unsigned long)addr, (unsigned long)cfa);
}

static void __attribute__((noinline)) sink(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

int __attribute__((noinline)) fr_plain(int a, long b)
{
	int x = a * 3;
	char buf[40];
	memset(buf, (int)b, sizeof buf);
	sink(buf);
	probe("fr_plain", "x", &x, __builtin_dwarf_cfa());
	probe("fr_plain", "buf", buf, __builtin_dwarf_cfa());
	probe("fr_plain", "a", &a, __builtin_dwarf_cfa());
	probe("fr_plain", "b", &b, __builtin_dwarf_cfa());
	return x + buf[3];
}

int __attribute__((noinline)) fr_blocks(int n)
{
	double d = n / 2.0;
	sink(&d);
	probe("fr_blocks", "d", &d, __builtin_dwarf_cfa());
	int total = 0;
	for (int i = 0; i < n; i++) {
		long inner[3] = { i, i + 1, i + 2 };
		sink(inner);
		if (i == 1)
			probe("fr_blocks", "inner", inner, __builtin_dwarf_cfa());
		total += (int)inner[2];
	}
	return total;
}

int __attribute__((noinline)) fr_recursive(int depth)
{
	struct { int v[4]; } s = { { depth, depth, depth, depth } };
	sink(&s);
	probe("fr_recursive", "s", &s, __builtin_dwarf_cfa());
	return depth ? fr_recursive(depth - 1) + s.v[2] : 0;
}

int __attribute__((noinline)) fr_vla(int n)
{
	int marker = n;
	char vla[n];
	sink(vla);
	sink(&marker);
	probe("fr_vla", "marker", &marker, __builtin_dwarf_cfa());
	return marker + vla[0];
}

int main(int argc, char **argv)
{
	(void)argv;
	return (fr_plain(argc, 7) + fr_blocks(argc + 2) + fr_recursive(2) + fr_vla(argc + 8)) == 12345;
}
