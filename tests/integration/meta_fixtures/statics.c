/* Fixture for `extrasyms`: static functions and variables (file scope and
 * function scope) that `objcopy --discard-all` removes from the symbol table
 * while DWARF keeps describing them. */
#include <stdio.h>
#include <stdlib.h>

static int fx_counter = 3;
static char fx_buffer[100];
static const double fx_table[7] = { 1, 2, 3 };
static struct { int a; long b; } fx_pair = { 1, 2 };

static int __attribute__((noinline)) fx_add(int a, int b)
{
	return a + b + fx_counter;
}

static void __attribute__((noinline)) fx_fill(char c)
{
	static int fx_calls;
	fx_calls++;
	for (int i = 0; i < 10; i++)
		fx_buffer[i] = c;
	fx_buffer[10] = (char)fx_calls;
}

/* At -O2 GCC moves the unlikely branch into a separate part, fx_split.cold,
 * a local symbol of its own that DWARF describes as a second PC range. */
static int __attribute__((noinline)) fx_split(int x)
{
	if (__builtin_expect(x == 987654, 0)) {
		for (int i = 0; i < x; i++)
			fprintf(stderr, "rare %d %d %s\n", x, i, fx_buffer);
		fx_buffer[x % 100] = 1;
		abort();
	}
	return x * 2;
}

int fx_global_var = 5;

int fx_global_fn(int x)
{
	fx_fill('a');
	return fx_add(x, fx_global_var) + (int)fx_table[1] + (int)fx_pair.b + fx_split(x);
}

int main(int argc, char **argv)
{
	(void)argv;
	printf("%d %s\n", fx_global_fn(argc), fx_buffer);
	return 0;
}
