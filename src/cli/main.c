/* kiln: dispatch to a subcommand. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{ "trace", cmd_trace, "run a build in the package sandbox and report what it reached for" },
	{ "registry", cmd_registry, "import and query the package registry (file -> package -> deps)" },
	{ "meta", cmd_meta, "DWARF metadata tools: types, frames, extrasyms, syscalls" },
	{ "shm", cmd_shm, "create, inspect and exercise the shared-memory map" },
};

static void usage(FILE *out)
{
	fprintf(out, "usage: kiln COMMAND [ARGS...]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\n'kiln COMMAND --help' describes one command.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "kiln: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
