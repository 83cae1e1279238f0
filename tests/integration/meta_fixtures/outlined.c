/* Fixture for `frames` on code GCC moved or copied out of its function:
 * split_me is split at -O2 into a small header inlined into its callers and
 * split_me.part.0 (the rest); resolve is inlined twice, and the variables of
 * its loop (hops, a) exist only in its abstract instance: the inlined copies
 * have no block for them. */
#include <stdio.h>

int sink;
unsigned table[64];

__attribute__((noinline)) void do_something(int x)
{
	sink += x;
}

int split_me(int a, int b, int limit)
{
	int header_only = limit * 3;
	if (a < header_only)
		return 1;
	int local = a * b, other = a + b;
	do_something(local); do_something(other); do_something(local); do_something(other);
	do_something(local); do_something(other); do_something(local); do_something(other);
	printf("%d %d\n", local, other);
	return 2;
}

int nalias;

__attribute__((noinline)) unsigned lookup_alias(unsigned off)
{
	return table[off & 63];
}

__attribute__((noinline)) unsigned lookup(unsigned off, unsigned lo, unsigned hi)
{
	return off + lo * hi;
}

static unsigned resolve(unsigned off, const char *what, unsigned lo, unsigned hi)
{
	if (!off)
		return ~0u;
	for (int hops = 0; nalias && hops < 4; hops++) {
		unsigned a = lookup_alias(off);
		if (a == ~0u)
			break;
		off = table[a & 63];
		lo = hi = 0;
	}
	unsigned t = lookup(off, lo, hi);
	if (t == ~0u)
		printf("%s refers to %u\n", what, off);
	return t;
}

__attribute__((noinline)) unsigned resolve_all(unsigned *offs, unsigned n)
{
	unsigned sum = 0;
	for (unsigned i = 0; i < n; i++)
		sum += resolve(offs[i], "a type", i, n);
	for (unsigned i = 0; i < n; i++)
		sum += resolve(offs[i] + 1, "a member", i, n);
	return sum;
}

int main(int argc, char **argv)
{
	(void)argv;
	unsigned offs[3] = { 1, 2, (unsigned)argc };
	table[3] = 5;
	return split_me(argc, 1, 5) + split_me(argc * 200, 2, 7) + split_me(argc * 300, 3, 9) +
	       (int)resolve_all(offs, 3);
}
