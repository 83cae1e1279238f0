/* Placeholder until the shm component lands: says so and fails. */
#include <stdio.h>

#include "cli/commands.h"

int cmd_shm(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "kiln shm: not implemented yet\n");
	return 2;
}
