/* Placeholder until the trace component lands: says so and fails. */
#include <stdio.h>

#include "cli/commands.h"

int cmd_trace(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "kiln trace: not implemented yet\n");
	return 2;
}
