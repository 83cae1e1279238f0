/* The event loop. Level-triggered epoll; each wakeup reads at most one
 * message from each ready connection, so a chatty client cannot starve the
 * others. Replies go out with MSG_DONTWAIT: a client that does not read its
 * answers (the protocol allows one request in flight) is closed rather than
 * allowed to block the loop. */
#include "server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ipc/handshake.h"
#include "ipc/msg.h"
#include "ipc/peer.h"

#define CMDLINE_MAX 4096

enum { TAG_LISTEN = -1, TAG_LIFELINE = -2, TAG_SIGNAL = -3 };

struct conn {
	bool open;
	bool greeted;
	bool refused;   /* REFUSED sent: read what the peer still sends, then close */
	pid_t pid;
	int client;
};

struct loop {
	const struct kiln_service *svc;
	struct kiln_server_stats *stats;
	int ep;
	struct conn *conns; /* indexed by fd */
	size_t nconns;
	int spare_fd;       /* closed to accept-and-drop when out of fds */
	char *buf;
	char *cmdline;
};

int kiln_server_listen(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof sa.sun_path) {
		snprintf(err, errlen, "socket path %s is too long (max %zu bytes)", path,
			 sizeof sa.sun_path - 1);
		return -1;
	}
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		snprintf(err, errlen, "cannot create socket: %s", strerror(errno));
		return -1;
	}
	mode_t old = umask(0177);
	int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
	umask(old);
	if (rc < 0 || listen(fd, SOMAXCONN) < 0) {
		snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static int watch(struct loop *l, int fd, int tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = (uint64_t)(int64_t)tag };
	return epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev);
}

static void drop(struct loop *l, int fd)
{
	epoll_ctl(l->ep, EPOLL_CTL_DEL, fd, NULL);
	close(fd);
	l->conns[fd].open = false;
	if (l->conns[fd].greeted && l->svc->closed)
		l->svc->closed(l->svc->ctx, l->conns[fd].client);
}

/* Sends REFUSED and closes once the peer's pending messages are read:
 * closing a Unix socket with unread data resets the peer, which could then
 * lose the REFUSED it has not read yet. */
static void refuse(struct loop *l, int fd, uint32_t reason, const char *text)
{
	l->stats->refused++;
	if (kiln_send_refused(fd, reason, text) < 0) {
		drop(l, fd);
		return;
	}
	shutdown(fd, SHUT_WR);
	l->conns[fd].refused = true;
	char scratch[64];
	while (recv(fd, scratch, sizeof scratch, MSG_DONTWAIT | MSG_TRUNC) > 0)
		;
}

static void accept_all(struct loop *l, int lfd)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			if ((errno == EMFILE || errno == ENFILE) && l->spare_fd >= 0) {
				/* Out of fds: accept and drop one pending client so the
				 * listener does not stay ready forever. */
				close(l->spare_fd);
				int c = accept(lfd, NULL, NULL);
				if (c >= 0)
					close(c);
				l->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
				continue;
			}
			return; /* EAGAIN, or a client that went away meanwhile */
		}
		if ((size_t)fd >= l->nconns) {
			size_t n = l->nconns;
			while (n <= (size_t)fd)
				n *= 2;
			struct conn *c = realloc(l->conns, n * sizeof *c);
			if (!c) {
				close(fd);
				continue;
			}
			memset(c + l->nconns, 0, (n - l->nconns) * sizeof *c);
			l->conns = c;
			l->nconns = n;
		}
		l->conns[fd] = (struct conn){ .open = true, .client = -1 };
		if (watch(l, fd, fd) < 0) {
			close(fd);
			l->conns[fd].open = false;
			continue;
		}
		l->stats->accepted++;
		pid_t pid;
		uid_t uid;
		gid_t gid;
		if (kiln_peer_cred(fd, &pid, &uid, &gid) < 0) {
			refuse(l, fd, KILN_REFUSE_PEER, "cannot identify the peer");
			continue;
		}
		if (uid != getuid()) {
			refuse(l, fd, KILN_REFUSE_PEER, "peer runs as a different user");
			continue;
		}
		l->conns[fd].pid = pid;
	}
}

/* A fuzzing or broken client must not flood the build's stderr: the first
 * few closings are told, the rest only counted (and summed up at the end). */
#define MALFORMED_TOLD 5

static void malformed(struct loop *l, int fd, const char *why)
{
	const char *name = l->svc->name ? l->svc->name : "kiln trace";
	if (l->stats->closed_malformed < MALFORMED_TOLD)
		fprintf(stderr, "%s: server: closing the connection of pid %ld: %s\n", name,
			(long)l->conns[fd].pid, why);
	else if (l->stats->closed_malformed == MALFORMED_TOLD)
		fprintf(stderr, "%s: server: more malformed connections; counting them "
				"without a message\n", name);
	l->stats->closed_malformed++;
	drop(l, fd);
}

static void serve_one(struct loop *l, int fd)
{
	struct conn *c = &l->conns[fd];
	if (c->refused) {
		/* Whatever a refused peer sends is dropped; close once it has
		 * sent something or hung up. */
		ssize_t r = recv(fd, l->buf, KILN_MSG_MAX, MSG_DONTWAIT | MSG_TRUNC);
		if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			drop(l, fd);
		return;
	}
	struct kiln_msg_hdr h;
	int fds[KILN_MSG_MAX_FDS];
	size_t nfds = 0;
	ssize_t n = kiln_msg_recv_fds(fd, l->buf, KILN_MSG_MAX, &h, MSG_DONTWAIT, fds,
				      l->svc->message_fds ? KILN_MSG_MAX_FDS : 0, &nfds);
	if (n == -2) {
		drop(l, fd);
		return;
	}
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return;
		if (errno == EMSGSIZE)
			malformed(l, fd, "oversized message");
		else if (errno == EPROTO)
			malformed(l, fd, "message length disagrees with its header");
		else
			drop(l, fd);
		return;
	}
	const char *payload = l->buf + sizeof h;
	if (!c->greeted) {
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
		if (h.type != KILN_MSG_HELLO || h.flags) {
			malformed(l, fd, "first message is not HELLO");
			return;
		}
		int rc = kiln_hello_check_ident(payload, (size_t)n, l->svc->role, l->svc->ident,
						l->svc->identlen);
		if (rc < 0) {
			malformed(l, fd, "bad HELLO (magic, role or size)");
			return;
		}
		if (rc > 0) {
			refuse(l, fd, (uint32_t)rc, rc == KILN_REFUSE_BUILD ? "client from another kiln build"
									     : "protocol version mismatch");
			return;
		}
		size_t cl = kiln_proc_cmdline(c->pid, l->cmdline, CMDLINE_MAX);
		c->client = l->svc->hello(l->svc->ctx, c->pid, l->cmdline, cl);
		if (c->client < 0) {
			refuse(l, fd, KILN_REFUSE_BUSY, "server out of memory");
			return;
		}
		if (kiln_send_hello_ok(fd) < 0) {
			drop(l, fd);
			return;
		}
		c->greeted = true;
		return;
	}
	errno = EPROTO; /* what a validation failure (no syscall) leaves */
	int rc = l->svc->message_fds
			 ? l->svc->message_fds(l->svc->ctx, c->client, fd, &h, payload, (size_t)n, fds, nfds)
			 : l->svc->message(l->svc->ctx, c->client, fd, &h, payload, (size_t)n);
	if (rc < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			malformed(l, fd, "client does not read its answers");
		else if (errno == EPIPE || errno == ECONNRESET)
			drop(l, fd);
		else
			malformed(l, fd, "malformed message");
	}
}

static long long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Reads what the owner wrote on the lifeline; returns true at EOF. */
static bool read_lifeline(int fd, char *note, size_t notelen, size_t *got)
{
	char tmp[256];
	ssize_t n = read(fd, tmp, sizeof tmp);
	if (n < 0)
		return errno != EINTR && errno != EAGAIN;
	if (n == 0)
		return true;
	size_t room = notelen > *got + 1 ? notelen - *got - 1 : 0;
	size_t k = (size_t)n < room ? (size_t)n : room;
	memcpy(note + *got, tmp, k);
	*got += k;
	note[*got] = '\0';
	return false;
}

/* The signals pending on sfd: SIGIO goes to the service. 1 if one of them
 * stops the server (SIGTERM), 0 if none does, -1 with a message in err if
 * the service's answer to SIGIO failed. */
static int read_signals(int sfd, const struct kiln_service *svc, char *err, size_t errlen)
{
	int stop = 0;
	struct signalfd_siginfo si;
	while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
		if (si.ssi_signo != SIGIO)
			stop = 1;
		else if (svc->sigio && svc->sigio(svc->ctx, err, errlen) < 0)
			return -1;
	}
	return stop;
}

int kiln_server_run(int listen_fd, int lifeline_fd, const struct kiln_service *svc,
		    char *note, size_t notelen, struct kiln_server_stats *stats,
		    char *err, size_t errlen)
{
	struct loop l = { .svc = svc, .stats = stats, .spare_fd = -1 };
	int rc = -1, sfd = -1;
	size_t got = 0;
	if (notelen)
		note[0] = '\0';
	*stats = (struct kiln_server_stats){ 0 };

	/* As many clients as the hard limit allows. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	sigset_t ss;
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	if (svc->sigio)
		sigaddset(&ss, SIGIO);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	sfd = signalfd(-1, &ss, SFD_CLOEXEC | SFD_NONBLOCK);

	l.nconns = 256;
	l.conns = calloc(l.nconns, sizeof *l.conns);
	l.buf = malloc(KILN_MSG_MAX);
	l.cmdline = malloc(CMDLINE_MAX);
	l.ep = epoll_create1(EPOLL_CLOEXEC);
	l.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (!l.conns || !l.buf || !l.cmdline || l.ep < 0 || sfd < 0) {
		snprintf(err, errlen, "cannot set up the event loop: %s", strerror(errno));
		goto out;
	}
	if (watch(&l, listen_fd, TAG_LISTEN) < 0 || watch(&l, lifeline_fd, TAG_LIFELINE) < 0 ||
	    watch(&l, sfd, TAG_SIGNAL) < 0) {
		snprintf(err, errlen, "epoll_ctl: %s", strerror(errno));
		goto out;
	}
	int tick_ms = svc->tick && svc->tick_ms > 0 ? svc->tick_ms : -1;
	long long last_tick = now_ms();
	/* svc->idle may have some, from the start */
	bool work = svc->idle && (!svc->idle_pending || svc->idle_pending(svc->ctx));
	for (bool stop = false; !stop;) {
		struct epoll_event evs[64];
		int n = epoll_wait(l.ep, evs, 64, work ? 0 : tick_ms);
		if (n == 0 && work)
			work = svc->idle(svc->ctx);
		else if (n > 0 && svc->idle)
			work = !svc->idle_pending || svc->idle_pending(svc->ctx);
		/* Every turn (one load when the service has nothing new), and
		 * every tick_ms when nothing comes. */
		if (tick_ms > 0 && (n > 0 || now_ms() - last_tick >= tick_ms)) {
			svc->tick(svc->ctx);
			last_tick = now_ms();
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			snprintf(err, errlen, "epoll_wait: %s", strerror(errno));
			goto out;
		}
		/* Signals first: a SIGIO queued while the server could not run
		 * (stopped, starved) is answered before any message is. */
		for (int i = 0; i < n; i++) {
			if ((int)(int64_t)evs[i].data.u64 != TAG_SIGNAL)
				continue;
			int r = read_signals(sfd, svc, err, errlen);
			if (r < 0)
				goto out;
			if (r > 0)
				stop = true;
		}
		for (int i = 0; i < n; i++) {
			int tag = (int)(int64_t)evs[i].data.u64;
			if (tag == TAG_SIGNAL) {
				continue;
			} else if (tag == TAG_LISTEN) {
				accept_all(&l, listen_fd);
			} else if (tag == TAG_LIFELINE) {
				if (read_lifeline(lifeline_fd, note, notelen, &got))
					stop = true;
			} else if (l.conns[tag].open) {
				serve_one(&l, tag);
			}
		}
	}
	rc = 0;
	if (stats->closed_malformed > MALFORMED_TOLD)
		fprintf(stderr, "kiln trace: server: %lu connections closed as malformed in all\n",
			(unsigned long)stats->closed_malformed);
out:
	for (size_t fd = 0; fd < l.nconns && l.conns; fd++)
		if (l.conns[fd].open)
			close((int)fd);
	if (l.ep >= 0)
		close(l.ep);
	if (sfd >= 0)
		close(sfd);
	if (l.spare_fd >= 0)
		close(l.spare_fd);
	free(l.conns);
	free(l.buf);
	free(l.cmdline);
	return rc;
}
