/* Placeholder until the registry component lands: says so and fails. */
#include <stdio.h>

#include "cli/commands.h"

int cmd_registry(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "kiln registry: not implemented yet\n");
	return 2;
}
