/* The client side of the meta server: `kiln meta ...` with KILN_META_SOCKET
 * set forwards its command line, working directory, umask and descriptors
 * 0-2 to the server and exits with the status the server reports.
 * Protocol: docs/meta-server.md. */
#ifndef KILN_META_FORWARD_H
#define KILN_META_FORWARD_H

#include <stddef.h>

#include "ipc/meta_proto.h"

/* Runs `kiln meta ARGV...` (argv[0] is "meta") on the server at SOCK.
 * Returns the command's exit status; -1 when the job did not start (no
 * server, a refused handshake, a server that closed before starting): one
 * warning line has been printed and the caller runs the command itself.
 * A server that ends after the job started: a message and 125. SIGINT and
 * SIGTERM cancel the job on the server, and the client then dies of them. */
int meta_forward(const char *sock, int argc, char **argv);

/* Connects to the server at SOCK and handshakes. Returns the connected
 * socket, or -1 with a message in err. */
int meta_connect(const char *sock, char *err, size_t errlen);

/* One request without descriptors (STATS, STOP) and its answer of type
 * `want` into buf (exactly len bytes). Returns 0, or -1 with a message. */
int meta_request(int fd, unsigned type, unsigned want, void *buf, size_t len, char *err, size_t errlen);

#endif
