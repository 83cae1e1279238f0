/* kiln: dispatch to a subcommand. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "common/cliopt.h"

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
	int internal; /* listed apart: a developer's tool, not the user's */
} commands[] = {
	{ "trace", cmd_trace, "build a package with only its declared dependencies visible,\n"
			      "and report what else it reached for", 0 },
	{ "registry", cmd_registry, "import and query the package registry (file -> package -> deps)", 0 },
	{ "meta", cmd_meta, "DWARF metadata tools (types, frames, extrasyms, syscalls) and\n"
			    "their server", 0 },
	{ "help", NULL, "'kiln help COMMAND' is 'kiln COMMAND --help'", 0 },
	{ "shm", cmd_shm, "create, inspect and exercise the shared-memory map of trace mode", 1 },
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void list(FILE *out, int internal)
{
	for (size_t i = 0; i < NCOMMANDS; i++) {
		if (commands[i].internal != internal)
			continue;
		fprintf(out, "  %-9s ", commands[i].name);
		for (const char *s = commands[i].summary; *s; s++)
			fprintf(out, *s == '\n' ? "\n            " : "%c", *s);
		fputc('\n', out);
	}
}

static void usage(FILE *out)
{
	fprintf(out, "usage: kiln COMMAND [ARGS...]\n"
		     "       kiln --version\n\ncommands:\n");
	list(out, 0);
	fprintf(out, "\nfor kiln's developers:\n");
	list(out, 1);
	fprintf(out, "\nOptions of one command: 'kiln COMMAND --help' or 'kiln help COMMAND';\n"
		     "the manual: man kiln. Configuration: ~/.config/kiln/config, /etc/kiln/config\n"
		     "(man 5 kiln).\n");
}

static int find(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (commands[i].run && !strcmp(name, commands[i].name))
			return (int)i;
	return -1;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return cliopt_usage_for(stderr, "kiln", "no command given");
	const char *a = argv[1];
	if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(a, "--version")) {
		cliopt_print_version(stdout);
		return 0;
	}
	if (!strcmp(a, "help")) {
		if (argc < 3) {
			usage(stdout);
			return 0;
		}
		int c = find(argv[2]);
		if (c < 0)
			return cliopt_usage_for(stderr, "kiln", "unknown command '%s'", argv[2]);
		char help[] = "--help";
		char *args[] = { argv[2], help, NULL };
		return commands[c].run(2, args);
	}
	if (a[0] == '-')
		return cliopt_usage_for(stderr, "kiln", "unknown option '%s'", a);
	int c = find(a);
	if (c < 0)
		return cliopt_usage_for(stderr, "kiln", "unknown command '%s'", a);
	return commands[c].run(argc - 1, argv + 1);
}
