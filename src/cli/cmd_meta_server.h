/* kiln meta run | serve | stats | stop: the meta server's lifecycle. */
#ifndef KILN_CLI_CMD_META_SERVER_H
#define KILN_CLI_CMD_META_SERVER_H

int cmd_meta_run(int argc, char **argv);
int cmd_meta_serve(int argc, char **argv);
int cmd_meta_stats(int argc, char **argv);
int cmd_meta_stop(int argc, char **argv);

#endif
