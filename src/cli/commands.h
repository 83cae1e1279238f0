/* The `kiln` subcommands. Each lives in its own file src/cli/cmd_NAME.c and
 * takes argv with argv[0] being the subcommand name. Returns the exit status. */
#ifndef KILN_CLI_COMMANDS_H
#define KILN_CLI_COMMANDS_H

int cmd_shm(int argc, char **argv);
int cmd_registry(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_meta(int argc, char **argv);

#endif
