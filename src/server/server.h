/* kiln's server process: a Unix SOCK_SEQPACKET socket in a private run
 * directory and one epoll event loop serving every client, one message per
 * ready connection per turn so no client holds up another. The server checks
 * each peer (SO_PEERCRED: same uid), runs the handshake, records the peer's
 * pid and command line, and hands the messages to a service. */
#ifndef KILN_SERVER_SERVER_H
#define KILN_SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ipc/proto.h"

struct kiln_service {
	void *ctx;
	uint16_t role; /* the role a HELLO must carry */
	/* A client passed the handshake: returns its id (>= 0), or -1 to refuse. */
	int (*hello)(void *ctx, pid_t pid, const char *cmdline, size_t len);
	/* One message after the handshake. Replies are sent on fd with
	 * MSG_DONTWAIT. Returns 0 to keep the connection, -1 to close it. */
	int (*message)(void *ctx, int client, int fd, const struct kiln_msg_hdr *h,
		       const void *payload, size_t len);
	/* Optional, for services whose clients pass descriptors: called instead
	 * of `message`, with the descriptors that came with it (SCM_RIGHTS),
	 * which it owns. Without it, descriptors sent by a client are closed. */
	int (*message_fds)(void *ctx, int client, int fd, const struct kiln_msg_hdr *h,
			   const void *payload, size_t len, int *fds, size_t nfds);
	/* Optional: the connection of a greeted client is closed (it hung up,
	 * or sent something malformed). Not called when the server stops. */
	void (*closed)(void *ctx, int client);
	/* Optional: the build identity a HELLO must carry after its struct
	 * (kiln_hello_check_ident); identlen 0 = none. */
	const unsigned char *ident;
	size_t identlen;
	const char *name; /* in messages; NULL = "kiln trace" */
	/* Optional: called at every turn of the loop that had events (before
	 * its messages are served) and every tick_ms milliseconds when none
	 * come: the only wake-ups of an idle server. */
	void (*tick)(void *ctx);
	int tick_ms;
	/* Optional: a little of the service's own work, done when a turn of
	 * the loop finds no message waiting; returns whether some is left.
	 * The loop then looks again at once rather than sleeping, as it does
	 * after a turn with messages when idle_pending (optional) says there
	 * is some. */
	bool (*idle)(void *ctx);
	bool (*idle_pending)(void *ctx);
	/* Optional: SIGIO arrived (a file lease of the service's is being
	 * broken; the caller blocked SIGIO before taking it). Returns 0, or -1
	 * with a message in err to stop the server with that error. */
	int (*sigio)(void *ctx, char *err, size_t errlen);
};

struct kiln_server_stats {
	unsigned long accepted, refused, closed_malformed;
};

/* Creates the listening socket at `path` (mode 0600, close-on-exec,
 * non-blocking). Returns the fd, or -1 with a message in err. */
int kiln_server_listen(const char *path, char *err, size_t errlen);

/* Serves until `lifeline_fd` reaches end of file (the owner closed its end),
 * SIGTERM arrives or the service's sigio hook fails. Whatever was written on
 * the lifeline before EOF is returned in `note` (NUL-terminated, truncated
 * to notelen). Returns 0, or -1 with a message in err. */
int kiln_server_run(int listen_fd, int lifeline_fd, const struct kiln_service *svc,
		    char *note, size_t notelen, struct kiln_server_stats *stats,
		    char *err, size_t errlen);

#endif
