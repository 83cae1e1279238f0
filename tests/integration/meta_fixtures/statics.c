/* Fixture for `extrasyms`: static functions and variables (file scope and
 * function scope) that `objcopy --discard-all` removes from the symbol table
 * while DWARF keeps describing them. */
#include <stdio.h>

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

int fx_global_var = 5;

int fx_global_fn(int x)
{
	fx_fill('a');
	return fx_add(x, fx_global_var) + (int)fx_table[1] + (int)fx_pair.b;
}

int main(int argc, char **argv)
{
	(void)argv;
	printf("%d %s\n", fx_global_fn(argc), fx_buffer);
	return 0;
}
