/* `kiln shm demo`: many processes and threads filling and reading one map. */
#ifndef KILN_CLI_CMD_SHM_DEMO_H
#define KILN_CLI_CMD_SHM_DEMO_H

#include <stdint.h>

int shm_demo(int argc, char **argv);
/* Parses "64K", "1M", "0x1000", "2GiB"; returns 0 or -1. */
int shm_parse_size(const char *s, uint64_t *out);

#endif
