#include "meta/forward.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ipc/msg.h"
#include "server/ident.h"

/* Seconds a cancelled client waits for the server to confirm the end of its
 * job before it dies of its signal anyway. */
#define CANCEL_WAIT_S 5

static int connect_to(const char *sock, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(sock) >= sizeof sa.sun_path) {
		snprintf(err, errlen, "socket path %s is too long", sock);
		return -1;
	}
	strcpy(sa.sun_path, sock);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "cannot create a socket: %s", strerror(errno));
		return -1;
	}
	int rc;
	do
		rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
	while (rc < 0 && errno == EINTR);
	if (rc < 0) {
		snprintf(err, errlen, "no meta server at %s (%s)", sock, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static int send_hello(int fd)
{
	size_t identlen;
	const unsigned char *ident = kiln_build_ident(&identlen);
	struct kiln_hello h = { .magic = KILN_PROTO_MAGIC, .version = KILN_PROTO_VERSION,
				.role = KILN_META_ROLE, .pid = (uint32_t)getpid() };
	return kiln_msg_send(fd, KILN_MSG_HELLO, &h, sizeof h, ident, identlen, 0);
}

/* Checks the answer to HELLO (N as kiln_msg_recv returned it, the message
 * in buf): 0 accepted, -1 refused or gone (err says). */
static int check_hello_answer(ssize_t n, const struct kiln_msg_hdr *h, const char *buf, const char *sock,
			      char *err, size_t errlen)
{
	if (n < 0 && n != -2) {
		snprintf(err, errlen, "the meta server at %s failed the handshake (%s)", sock, strerror(errno));
		return -1;
	}
	if (n == -2) {
		snprintf(err, errlen, "the meta server at %s closed the connection", sock);
		return -1;
	}
	if (h->type == KILN_MSG_REFUSED && (size_t)n >= sizeof(uint32_t)) {
		snprintf(err, errlen, "the meta server at %s refused this client: %.*s", sock,
			 (int)((size_t)n - sizeof(uint32_t)), buf + sizeof *h + sizeof(uint32_t));
		return -1;
	}
	if (h->type != KILN_MSG_HELLO_OK) {
		snprintf(err, errlen, "the meta server at %s answered the handshake with message %u", sock,
			 h->type);
		return -1;
	}
	return 0;
}

int meta_connect(const char *sock, char *err, size_t errlen)
{
	int fd = connect_to(sock, err, errlen);
	if (fd < 0)
		return -1;
	if (send_hello(fd) < 0 && errno != EPIPE && errno != ECONNRESET) {
		snprintf(err, errlen, "cannot talk to the meta server at %s: %s", sock, strerror(errno));
		close(fd);
		return -1;
	}
	char buf[1024];
	struct kiln_msg_hdr h;
	ssize_t n = kiln_msg_recv(fd, buf, sizeof buf, &h, 0);
	if (check_hello_answer(n, &h, buf, sock, err, errlen) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int meta_request(int fd, unsigned type, unsigned want, void *buf, size_t len, char *err, size_t errlen)
{
	char msg[256];
	struct kiln_msg_hdr h;
	if (kiln_msg_send(fd, (uint16_t)type, NULL, 0, NULL, 0, 0) < 0) {
		snprintf(err, errlen, "cannot send to the meta server: %s", strerror(errno));
		return -1;
	}
	ssize_t n = kiln_msg_recv(fd, msg, sizeof msg, &h, 0);
	if (n < 0 || h.type != want || (size_t)n != len) {
		snprintf(err, errlen, "the meta server gave no answer%s%s", n == -1 ? ": " : "",
			 n == -1 ? strerror(errno) : "");
		return -1;
	}
	memcpy(buf, msg + sizeof h, len);
	return 0;
}

/* The JOB message: header, argv strings; descriptors cwd and 0-2. */
static int send_job(int fd, int argc, char **argv, char *err, size_t errlen)
{
	size_t total = 0;
	for (int i = 0; i < argc; i++)
		total += strlen(argv[i]) + 1;
	if (sizeof(struct kiln_msg_hdr) + sizeof(struct kiln_meta_job) + total > KILN_MSG_MAX) {
		snprintf(err, errlen, "the command line is too long to forward");
		return -1;
	}
	char *args = malloc(total ? total : 1), *p = args;
	if (!args) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < argc; i++) {
		size_t n = strlen(argv[i]) + 1;
		memcpy(p, argv[i], n);
		p += n;
	}
	int fds[4], nfds = 0;
	fds[nfds++] = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fds[0] < 0) {
		snprintf(err, errlen, "cannot open the working directory: %s", strerror(errno));
		free(args);
		return -1;
	}
	struct kiln_meta_job job = { .argc = (uint32_t)argc };
	mode_t um = umask(0);
	umask(um);
	job.umask = um;
	for (int i = 0; i < 3; i++)
		if (fcntl(i, F_GETFD) >= 0) {
			job.fdmask |= 1u << i;
			fds[nfds++] = i;
		}
	int rc = kiln_msg_send_fds(fd, KILN_MSG_META_JOB, &job, sizeof job, args, total, fds, (size_t)nfds, 0);
	int e = errno;
	close(fds[0]);
	free(args);
	if (rc < 0)
		snprintf(err, errlen, "cannot send the job: %s", strerror(e));
	return rc;
}

/* Waits for one message; on a signal from sfd (when >= 0) returns -3 with
 * *sig set. timeout_ms < 0: none; 0 is returned as -4. */
static ssize_t wait_msg(int fd, int sfd, char *buf, size_t cap, struct kiln_msg_hdr *h, int *sig,
			int timeout_ms)
{
	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
		int r = poll(p, sfd >= 0 ? 2 : 1, timeout_ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			return -4;
		if (sfd >= 0 && (p[1].revents & POLLIN)) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
				*sig = (int)si.ssi_signo;
				return -3;
			}
		}
		if (r > 0 && p[0].revents)
			return kiln_msg_recv(fd, buf, cap, h, 0);
	}
}

static void die_of(int sig, const sigset_t *old)
{
	signal(sig, SIG_DFL);
	sigprocmask(SIG_SETMASK, old, NULL);
	raise(sig);
	_exit(128 + sig);
}

int meta_forward(const char *sock, int argc, char **argv)
{
	char err[1200];
	int fd = connect_to(sock, err, sizeof err);
	if (fd < 0)
		goto standalone;
	/* The terminal's signals wait in a signalfd while the job runs; a
	 * pending one is delivered as usual if the command runs here. */
	sigset_t ss, old;
	sigemptyset(&ss);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGTERM);
	sigprocmask(SIG_BLOCK, &ss, &old);
	int sfd = signalfd(-1, &ss, SFD_CLOEXEC);
	/* HELLO and JOB at once: a refusing server drops the job unread. */
	if (send_hello(fd) < 0 && errno != EPIPE && errno != ECONNRESET) {
		snprintf(err, sizeof err, "cannot talk to the meta server at %s: %s", sock, strerror(errno));
		goto fallback;
	}
	char jerr[256];
	int sent = send_job(fd, argc, argv, jerr, sizeof jerr);
	char buf[1024];
	struct kiln_msg_hdr h;
	int sig = 0;
	/* Any wait can be interrupted: a server that is stuck (stopped, say)
	 * must not make the client deaf to ^C. */
	ssize_t n = wait_msg(fd, sfd, buf, sizeof buf, &h, &sig, -1);
	if (n == -3) { /* not started yet: nothing written, nothing to cancel */
		close(fd);
		die_of(sig, &old);
	}
	if (check_hello_answer(n, &h, buf, sock, err, sizeof err) < 0)
		goto fallback;
	if (sent < 0) {
		snprintf(err, sizeof err, "%s", jerr);
		goto fallback;
	}
	n = wait_msg(fd, sfd, buf, sizeof buf, &h, &sig, -1);
	if (n == -3) {
		close(fd);
		die_of(sig, &old);
	}
	if (n < 0 || h.type != KILN_MSG_META_STARTED) {
		snprintf(err, sizeof err, "the meta server at %s closed the connection before starting the job",
			 sock);
		goto fallback;
	}
	/* From here on the server may have written output: never run again. */
	n = wait_msg(fd, sfd, buf, sizeof buf, &h, &sig, -1);
	if (n == -3) {
		kiln_msg_send(fd, KILN_MSG_META_CANCEL, NULL, 0, NULL, 0, 0);
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do { /* wait for the job's end, not forever */
			int other;
			n = wait_msg(fd, sfd, buf, sizeof buf, &h, &other, 200);
			clock_gettime(CLOCK_MONOTONIC, &t);
		} while ((n == -3 || n == -4 || (n >= 0 && h.type != KILN_MSG_META_DONE)) &&
			 t.tv_sec - t0.tv_sec < CANCEL_WAIT_S);
		close(fd);
		die_of(sig, &old);
	}
	close(fd);
	if (sfd >= 0)
		close(sfd);
	if (n != (ssize_t)sizeof(struct kiln_meta_done) || h.type != KILN_MSG_META_DONE) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		fprintf(stderr, "kiln meta: the meta server at %s ended during the job; its output may be "
				"incomplete\n", sock);
		return 125;
	}
	struct kiln_meta_done d;
	memcpy(&d, buf + sizeof h, sizeof d);
	if (d.sigpipe)
		die_of(SIGPIPE, &old);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return d.status;

fallback:
	close(fd);
	if (sfd >= 0)
		close(sfd);
	sigprocmask(SIG_SETMASK, &old, NULL);
standalone:
	fprintf(stderr, "kiln meta: warning: %s; running standalone\n", err);
	return -1;
}
