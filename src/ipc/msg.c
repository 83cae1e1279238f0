/* One message per SOCK_SEQPACKET packet: sendmsg with two payload parts,
 * recv with MSG_TRUNC so an oversized packet is detected, not half-read.
 * Descriptors travel as SCM_RIGHTS ancillary data of the same packet. */
#include "ipc/msg.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

int kiln_msg_send_fds(int fd, uint16_t type, const void *a, size_t alen,
		      const void *b, size_t blen, const int *fds, size_t nfds, int flags)
{
	if (sizeof(struct kiln_msg_hdr) + alen + blen > KILN_MSG_MAX || nfds > KILN_MSG_MAX_FDS) {
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
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(KILN_MSG_MAX_FDS * sizeof(int))];
	} ctl;
	if (nfds) {
		memset(&ctl, 0, sizeof ctl);
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
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

int kiln_msg_send(int fd, uint16_t type, const void *a, size_t alen,
		  const void *b, size_t blen, int flags)
{
	return kiln_msg_send_fds(fd, type, a, alen, b, blen, NULL, 0, flags);
}

static void close_all(int *fds, size_t *nfds)
{
	for (size_t i = 0; i < *nfds; i++)
		close(fds[i]);
	*nfds = 0;
}

ssize_t kiln_msg_recv_fds(int fd, void *buf, size_t cap, struct kiln_msg_hdr *hdr, int flags,
			  int *fds, size_t maxfds, size_t *nfds)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(KILN_MSG_MAX_FDS * sizeof(int))];
	} ctl;
	size_t dummy;
	if (!nfds)
		nfds = &dummy;
	*nfds = 0;
	if (maxfds > KILN_MSG_MAX_FDS)
		maxfds = KILN_MSG_MAX_FDS;
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (maxfds) {
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(maxfds * sizeof(int));
	}
	ssize_t n;
	do
		n = recvmsg(fd, &mh, flags | MSG_TRUNC | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	if (maxfds)
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < k; i++) {
				int f;
				memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
				if (*nfds < maxfds)
					fds[(*nfds)++] = f;
				else
					close(f);
			}
		}
	if (n == 0) {
		close_all(fds, nfds);
		return -2;
	}
	if ((size_t)n > cap) {
		close_all(fds, nfds);
		errno = EMSGSIZE;
		return -1;
	}
	if ((size_t)n < sizeof *hdr) {
		close_all(fds, nfds);
		errno = EPROTO;
		return -1;
	}
	memcpy(hdr, buf, sizeof *hdr);
	if (hdr->len != (size_t)n - sizeof *hdr) {
		close_all(fds, nfds);
		errno = EPROTO;
		return -1;
	}
	return (ssize_t)hdr->len;
}

ssize_t kiln_msg_recv(int fd, void *buf, size_t cap, struct kiln_msg_hdr *hdr, int flags)
{
	return kiln_msg_recv_fds(fd, buf, cap, hdr, flags, NULL, 0, NULL);
}
