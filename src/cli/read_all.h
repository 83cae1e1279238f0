/* Reading a server's "ready" pipe to its end. */
#ifndef KILN_CLI_READ_ALL_H
#define KILN_CLI_READ_ALL_H

#include <stddef.h>

/* Reads fd until EOF (or an error, or cap - 1 bytes) into buf and
 * NUL-terminates it. Returns the number of bytes read. */
size_t cli_read_all(int fd, char *buf, size_t cap);

#endif
