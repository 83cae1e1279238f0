/* Framing of kiln's protocols over AF_UNIX SOCK_SEQPACKET: one message is one
 * packet, a struct kiln_msg_hdr and its payload (src/ipc/proto.h). */
#ifndef KILN_IPC_MSG_H
#define KILN_IPC_MSG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ipc/proto.h"

/* Sends one message whose payload is `a` followed by `b` (either may be
 * empty). `flags` are extra send(2) flags (MSG_DONTWAIT); MSG_NOSIGNAL is
 * always set. Returns 0, or -1 with errno (EMSGSIZE when over KILN_MSG_MAX). */
int kiln_msg_send(int fd, uint16_t type, const void *a, size_t alen,
		  const void *b, size_t blen, int flags);

/* Receives one message into buf (cap >= sizeof(struct kiln_msg_hdr)).
 * Returns the payload length (>= 0) with *hdr filled and the payload at
 * buf + sizeof *hdr; -2 on end of stream; -1 with errno on error: EMSGSIZE for
 * a packet larger than cap, EPROTO for a short header or a header whose len
 * disagrees with the packet, EAGAIN on a non-blocking socket with nothing to
 * read, or the socket's own error. */
ssize_t kiln_msg_recv(int fd, void *buf, size_t cap, struct kiln_msg_hdr *hdr, int flags);

/* The same with file descriptors passed alongside (SCM_RIGHTS).
 * kiln_msg_send_fds sends nfds (<= KILN_MSG_MAX_FDS) descriptors with the
 * message. kiln_msg_recv_fds stores up to maxfds received descriptors
 * (close-on-exec) in fds and their number in *nfds; the caller owns them,
 * also when the call fails after receiving (it closes them itself then, so
 * on -1/-2 *nfds is 0). Descriptors beyond maxfds are closed by the kernel. */
#define KILN_MSG_MAX_FDS 8
int kiln_msg_send_fds(int fd, uint16_t type, const void *a, size_t alen,
		      const void *b, size_t blen, const int *fds, size_t nfds, int flags);
ssize_t kiln_msg_recv_fds(int fd, void *buf, size_t cap, struct kiln_msg_hdr *hdr, int flags,
			  int *fds, size_t maxfds, size_t *nfds);

#endif
