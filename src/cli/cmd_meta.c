/* Placeholder until the meta component lands: says so and fails. */
#include <stdio.h>

#include "cli/commands.h"

int cmd_meta(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "kiln meta: not implemented yet\n");
	return 2;
}
