/* One message per SOCK_SEQPACKET packet: sendmsg with two payload parts,
 * recv with MSG_TRUNC so an oversized packet is detected, not half-read. */
#include "ipc/msg.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

int kiln_msg_send(int fd, uint16_t type, const void *a, size_t alen,
		  const void *b, size_t blen, int flags)
{
	if (sizeof(struct kiln_msg_hdr) + alen + blen > KILN_MSG_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	struct kiln_msg_hdr hdr = { .type = type, .flags = 0, .len = (uint32_t)(alen + blen) };
	struct iovec iov[3] = {
		{ .iov_base = &hdr, .iov_len = sizeof hdr },
		{ .iov_base = (void *)a, .iov_len = alen },
		{ .iov_base = (void *)b, .iov_len = blen },
	};
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 3 };
	ssize_t n;
	do
		n = sendmsg(fd, &mh, flags | MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	if ((size_t)n != sizeof hdr + alen + blen) { /* cannot happen on SEQPACKET */
		errno = EPROTO;
		return -1;
	}
	return 0;
}

ssize_t kiln_msg_recv(int fd, void *buf, size_t cap, struct kiln_msg_hdr *hdr, int flags)
{
	ssize_t n;
	do
		n = recv(fd, buf, cap, flags | MSG_TRUNC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	if (n == 0)
		return -2;
	if ((size_t)n > cap) {
		errno = EMSGSIZE;
		return -1;
	}
	if ((size_t)n < sizeof *hdr) {
		errno = EPROTO;
		return -1;
	}
	memcpy(hdr, buf, sizeof *hdr);
	if (hdr->len != (size_t)n - sizeof *hdr) {
		errno = EPROTO;
		return -1;
	}
	return (ssize_t)hdr->len;
}
