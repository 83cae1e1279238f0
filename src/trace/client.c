/* Client side of the trace protocol (docs/protocol.md): implements verdict.h
 * with a round trip to the trace server.
 *
 * Connections are made lazily, on the first question a process asks, with raw
 * system calls, and are moved to fd numbers >= KT_FD_MIN with close-on-exec
 * (programs use the low numbers; exec must not leak them). A process keeps a
 * small pool of connections, each claimed with one atomic CAS, so threads
 * and signal handlers never wait for each other: when every pooled
 * connection is busy (or this process shares the pool's memory with another
 * process, as after clone(CLONE_VM) or an unhooked fork), the question goes
 * over a transient connection. A fork is detected by a pid change.
 *
 * When the server cannot be reached, every question gets KILN_V_ERROR (the
 * hook fails with EIO) and one message per process goes to stderr. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "trace/kt.h"
#include "common/rawsys.h"
#include "trace/vcache.h"

#define KT_POOL   8
#define KT_FD_MIN 100

struct conn {
	_Atomic int busy;
	_Atomic int fd;
};

static KT_HOT struct conn pool[KT_POOL];
static KT_HOT _Atomic int pool_pid;     /* process that owns the pool (0: unclaimed) */
static KT_HOT _Atomic int reported_pid; /* process that already printed the failure */

static void init_pool_fds(void)
{
	for (int i = 0; i < KT_POOL; i++)
		atomic_store(&pool[i].fd, -1);
}

/* ---- messages to stderr without stdio -------------------------------- */

static size_t put(char *buf, size_t at, size_t cap, const char *s)
{
	while (*s && at + 1 < cap)
		buf[at++] = *s++;
	return at;
}

static const char *errno_name(int e)
{
	switch (e) {
	case ENOENT: return "no such socket";
	case ECONNREFUSED: return "connection refused";
	case ECONNRESET: return "connection reset";
	case EPIPE: return "connection closed";
	case EPROTO: return "protocol error";
	case EACCES: return "permission denied";
	case ENAMETOOLONG: return "socket path too long";
	case EMFILE: return "too many open files";
	case ENOTCONN: return "server closed the connection";
	case EPERM: return "the server refused this process";
	default: return "I/O error";
	}
}

static void report_failure(int err)
{
	int pid = kt_getpid();
	int prev = atomic_load(&reported_pid);
	if (prev == pid || !atomic_compare_exchange_strong(&reported_pid, &prev, pid))
		return;
	char msg[512];
	size_t n = 0;
	const char *sock = kt_env(KILN_ENV_SOCKET);
	if (!sock || !*sock) {
		n = put(msg, n, sizeof msg, "kiln: " KILN_ENV_SOCKET " is not set (libkiln-trace.so "
				"preloaded outside kiln trace?)");
	} else {
		n = put(msg, n, sizeof msg, "kiln: trace server ");
		n = put(msg, n, sizeof msg, sock);
		n = put(msg, n, sizeof msg, " unreachable (");
		n = put(msg, n, sizeof msg, errno_name(err));
		n = put(msg, n, sizeof msg, ")");
	}
	n = put(msg, n, sizeof msg, "; file accesses of this process now fail with EIO\n");
	kt_write(2, msg, n);
}

/* ---- one connection --------------------------------------------------- */

static long send_all(int fd, const void *buf, size_t len)
{
	long r;
	do
		r = kt_sys6(SYS_sendto, fd, (long)buf, (long)len, MSG_NOSIGNAL, 0, 0);
	while (r == -EINTR);
	if (r >= 0 && (size_t)r != len)
		return -EPROTO;
	return r < 0 ? r : 0;
}

/* Receives one message; returns its payload length or -errno. */
static long recv_msg(int fd, void *buf, size_t cap, uint16_t want_type)
{
	long r;
	do
		r = kt_sys6(SYS_recvfrom, fd, (long)buf, (long)cap, MSG_TRUNC, 0, 0);
	while (r == -EINTR);
	if (r == 0)
		return -ENOTCONN;
	if (r < 0)
		return r;
	if ((size_t)r > cap || (size_t)r < sizeof(struct kiln_msg_hdr))
		return -EPROTO;
	struct kiln_msg_hdr h;
	memcpy(&h, buf, sizeof h);
	if (h.len != (size_t)r - sizeof h || h.type != want_type)
		return -EPROTO;
	return (long)h.len;
}

static int connect_server(int *err)
{
	const char *path = kt_env(KILN_ENV_SOCKET);
	if (!path || !*path) {
		*err = EINVAL;
		return -1;
	}
	struct sockaddr_un sa;
	memset(&sa, 0, sizeof sa);
	sa.sun_family = AF_UNIX;
	size_t plen = strlen(path);
	if (plen >= sizeof sa.sun_path) {
		*err = ENAMETOOLONG;
		return -1;
	}
	memcpy(sa.sun_path, path, plen);

	long fd = kt_sys3(SYS_socket, AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		*err = (int)-fd;
		return -1;
	}
	long hi = kt_sys3(SYS_fcntl, fd, F_DUPFD_CLOEXEC, KT_FD_MIN);
	if (hi >= 0) {
		kt_close((int)fd);
		fd = hi;
	}
	long r;
	r = kt_sys3(SYS_connect, fd, &sa, sizeof sa);
	/* Interrupted by a signal: the connection may be made already. */
	while (r == -EINTR || r == -EALREADY)
		r = kt_sys3(SYS_connect, fd, &sa, sizeof sa);
	if (r == -EISCONN)
		r = 0;
	if (r < 0)
		goto fail;

	struct {
		struct kiln_msg_hdr h;
		struct kiln_hello b;
	} hello = {
		{ KILN_MSG_HELLO, 0, sizeof(struct kiln_hello) },
		{ KILN_PROTO_MAGIC, KILN_PROTO_VERSION, 1, (uint32_t)kt_getpid() },
	};
	r = send_all((int)fd, &hello, sizeof hello);
	if (r < 0)
		goto fail;
	union {
		char raw[512];
		struct {
			struct kiln_msg_hdr h;
			struct kiln_hello_ok b;
		} ok;
	} in;
	in.ok.h.type = 0;
	r = recv_msg((int)fd, &in, sizeof in, KILN_MSG_HELLO_OK);
	if (r == -EPROTO && in.ok.h.type == KILN_MSG_REFUSED)
		r = -EPERM;
	if (r < 0)
		goto fail;
	if (r != sizeof(struct kiln_hello_ok) || in.ok.b.magic != KILN_PROTO_MAGIC ||
	    in.ok.b.version != KILN_PROTO_VERSION) {
		r = -EPROTO;
		goto fail;
	}
	return (int)fd;
fail:
	kt_close((int)fd);
	*err = (int)-r;
	return -1;
}

/* ---- the pool ---------------------------------------------------------- */

/* A slot index claimed for this caller, or -1: use a transient connection. */
static int claim(void)
{
	if (kt_vfork_child)
		return -1; /* the pool and its fds are the parent's */
	int pid = kt_getpid();
	int owner = atomic_load_explicit(&pool_pid, memory_order_acquire);
	if (owner == 0) {
		if (atomic_compare_exchange_strong(&pool_pid, &owner, -1)) {
			init_pool_fds();
			atomic_store_explicit(&pool_pid, pid, memory_order_release);
			owner = pid;
		}
	}
	if (owner != pid)
		return -1;
	for (int i = 0; i < KT_POOL; i++) {
		int idle = 0;
		if (atomic_compare_exchange_strong_explicit(&pool[i].busy, &idle, 1,
							    memory_order_acquire,
							    memory_order_relaxed))
			return i;
	}
	return -1;
}

static void unclaim(int slot)
{
	atomic_store_explicit(&pool[slot].busy, 0, memory_order_release);
}

void kt_client_after_fork(void)
{
	/* The child owns a copy of the pool: the parent's threads that held
	 * slots do not exist here, and the sockets are the parent's. */
	if (atomic_load(&pool_pid) <= 0)
		return;
	for (int i = 0; i < KT_POOL; i++) {
		int fd = atomic_exchange(&pool[i].fd, -1);
		if (fd >= 0)
			kt_close(fd);
		atomic_store(&pool[i].busy, 0);
	}
	/* unclaimed: the child's first question claims it (a getpid then,
	 * not in every child a shell forks) */
	atomic_store_explicit(&pool_pid, 0, memory_order_release);
}

int kt_is_kiln_fd(int fd)
{
	if (fd < KT_FD_MIN || kt_vfork_child == KT_VFORK_NO_FDS)
		return 0;
	if (fd == kt_cache_fd())
		return 1;
	if (atomic_load(&pool_pid) <= 0)
		return 0;
	for (int i = 0; i < KT_POOL; i++)
		if (atomic_load_explicit(&pool[i].fd, memory_order_relaxed) == fd)
			return 1;
	return 0;
}

int kt_kiln_fds(int *out)
{
	int n = 0;
	if (kt_vfork_child == KT_VFORK_NO_FDS)
		return 0;
	int owned = atomic_load(&pool_pid) > 0;
	for (int i = owned ? 0 : KT_POOL; i <= KT_POOL && n < KT_MAX_KILN_FDS; i++) {
		int fd = i < KT_POOL ? atomic_load_explicit(&pool[i].fd, memory_order_relaxed)
				     : kt_cache_fd();
		if (fd < 0)
			continue;
		int j = n++;
		while (j > 0 && out[j - 1] > fd) {
			out[j] = out[j - 1];
			j--;
		}
		out[j] = fd;
	}
	return n;
}

int kt_release_fd_number(int fd)
{
	if (!kt_is_kiln_fd(fd))
		return 0;
	if (kt_vfork_child) { /* the program's now, in this child only */
		kt_vfork_child = KT_VFORK_NO_FDS;
		return 0;
	}
	if (fd == kt_cache_fd()) {
		kt_cache_move_fd();
		return 0;
	}
	for (int i = 0; i < KT_POOL; i++) {
		if (atomic_load(&pool[i].fd) != fd)
			continue;
		int idle = 0;
		if (!atomic_compare_exchange_strong(&pool[i].busy, &idle, 1))
			return EBUSY;
		long nfd = kt_sys3(SYS_fcntl, fd, F_DUPFD_CLOEXEC, KT_FD_MIN);
		atomic_store(&pool[i].fd, nfd >= 0 ? (int)nfd : -1);
		kt_close(fd);
		unclaim(i);
	}
	return 0;
}

/* One request/answer exchange over a pooled or transient connection, with
 * one retry on a fresh connection if a pooled one turned out to be dead.
 * Returns the answer's payload length or -errno. */
static long exchange(const void *req, size_t reqlen, void *resp, size_t cap,
		     uint16_t want_type, int no_reply)
{
	int slot = claim();
	long r = -EIO;
	for (int attempt = 0; attempt < 2; attempt++) {
		int fd = slot >= 0 ? atomic_load(&pool[slot].fd) : -1;
		int fresh = 0;
		if (fd < 0) {
			int err = 0;
			fd = connect_server(&err);
			if (fd < 0) {
				r = -err;
				break;
			}
			fresh = 1;
			if (slot >= 0)
				atomic_store(&pool[slot].fd, fd);
		}
		r = send_all(fd, req, reqlen);
		if (r == 0)
			r = no_reply ? 0 : recv_msg(fd, resp, cap, want_type);
		if (slot < 0) {
			kt_close(fd);
			if (r >= 0 || fresh)
				break;
			continue;
		}
		if (r >= 0)
			break;
		atomic_store(&pool[slot].fd, -1);
		/* EBADF/ENOTSOCK: the program closed kiln's fd behind its back
		 * (raw syscall) and the number may be its own file now. */
		if (r != -EBADF && r != -ENOTSOCK)
			kt_close(fd);
		if (fresh || r == -EPROTO)
			break;
	}
	if (slot >= 0)
		unclaim(slot);
	if (r < 0)
		report_failure((int)-r);
	return r;
}

/* ---- verdict.h ---------------------------------------------------------- */

/* Sends a question whose answer is a VERDICT message, a verdict of at most
 * `max`; fills *v and returns 0, or -1 (no answer: the failure is reported). */
static int verdict_exchange(const void *req, size_t reqlen, uint32_t max,
			    struct kiln_verdict_msg *v)
{
	union {
		char raw[64];
		struct {
			struct kiln_msg_hdr h;
			struct kiln_verdict_msg v;
		} m;
	} resp;
	long r = exchange(req, reqlen, &resp, sizeof resp, KILN_MSG_VERDICT, 0);
	if (r != sizeof(struct kiln_verdict_msg) || resp.m.v.verdict > max ||
	    resp.m.v.bind > KILN_BIND_IDENT) {
		if (r >= 0)
			report_failure(EPROTO);
		return -1;
	}
	*v = resp.m.v;
	return 0;
}

/* The round trip of a question the cache did not answer; *b (may be NULL)
 * gets the server's binding. */
static int ask_server(struct kt_question *req, size_t plen, unsigned access, unsigned qflags,
		      struct kiln_binding *b)
{
	req->h = (struct kiln_msg_hdr){ KILN_MSG_QUERY, 0,
					(uint32_t)(sizeof req->q + plen) };
	req->q = (struct kiln_query){ access, qflags, (uint32_t)plen };
	/* The header, query and path are contiguous (no padding: 8 + 12 bytes). */
	struct kiln_verdict_msg v;
	if (verdict_exchange(req, sizeof req->h + req->h.len, KILN_V_DENY, &v) < 0)
		return KILN_V_ERROR;
	if (b)
		*b = (struct kiln_binding){ v.bind, v.id_flags, v.dev, v.ino, v.dir_dev, v.dir_ino, 0 };
	if (v.ahead && v.verdict == KILN_V_ALLOW)
		kt_ahead_keep(req->path, plen, qflags, v.ahead & ~access);
	return (int)v.verdict;
}

/* Sends req (its header, query and path filled in) as a NOTE over a
 * connection this process already has, without waiting: 1 when it went. */
static int tell(struct kt_question *req, size_t plen, unsigned access, unsigned qflags)
{
	int slot = claim();
	if (slot < 0)
		return 0;
	int fd = atomic_load(&pool[slot].fd);
	int told = 0;
	if (fd >= 0) {
		req->h = (struct kiln_msg_hdr){ KILN_MSG_NOTE, 0, (uint32_t)(sizeof req->q + plen) };
		req->q = (struct kiln_query){ access, qflags, (uint32_t)plen };
		size_t len = sizeof req->h + req->h.len;
		told = kt_sys6(SYS_sendto, fd, (long)req, (long)len, MSG_NOSIGNAL | MSG_DONTWAIT, 0,
			       0) == (long)len;
	}
	unclaim(slot);
	return told;
}

/* A question an earlier round trip of this thread answered ahead (ahead.c),
 * told to the server; 0: ask as usual (nothing kept, or no connection free
 * to tell it over). */
static int answered_ahead(struct kt_question *req, size_t plen, unsigned access, unsigned qflags)
{
	if (!kt_ahead_take(req->path, plen, access, qflags) || !tell(req, plen, access, qflags))
		return 0;
	kt_cache_count_ahead();
	return 1;
}

/* A read-class question the map did not answer, about a path that does not
 * exist right now: whatever the server would say (ALLOW, or HIDE), the call
 * ends in the kernel's ENOENT. So it is answered ALLOW here and the server
 * is told with a NOTE, over a connection this process already has, without
 * waiting: it decides, logs and caches as for a QUERY (docs/verdict-cache.md,
 * "Absent paths"). A path with a symlink before its missing name is told
 * only when the call is not bound: a bound open opens without following
 * symlinks, and would send itself to the server anyway.
 * 0: ask as usual (no connection free, a full socket, or the path is there). */
static int note_absent(struct kt_question *req, size_t plen, unsigned access, unsigned qflags,
		       int bound)
{
	/* The cheap tests first: --no-cache and vfork children never tell,
	 * and only an absent path needs a connection claimed. */
	if ((access & ~KILN_A_READ_CLASSES) || kt_vfork_child ||
	    !kt_cache_absent(req->path, (qflags & KILN_Q_NOFOLLOW) != 0, !bound))
		return 0;
	return tell(req, plen, access, qflags);
}

int kiln_ask_data(unsigned kind, unsigned arg, const char *a, const char *b)
{
	kt_init();
	size_t alen = strlen(a), blen = strlen(b);
	if (alen > KILN_PATH_MAX || blen > KILN_PATH_MAX)
		return KILN_D_CHECK;
	char key[SHMMAP_MAX_KEY];
	int cached;
	if (kt_cache_ask_key(key, vc_key_data(key, kind, arg, a, alen, b, blen), &cached))
		return cached;
	struct {
		struct kiln_msg_hdr h;
		struct kiln_query_data q;
		char s[2 * KILN_PATH_MAX];
	} req;
	req.h = (struct kiln_msg_hdr){ KILN_MSG_QUERY_DATA, 0,
				       (uint32_t)(sizeof req.q + alen + blen) };
	req.q = (struct kiln_query_data){ kind, arg, (uint32_t)alen };
	memcpy(req.s, a, alen);
	memcpy(req.s + alen, b, blen);
	struct kiln_verdict_msg v;
	return verdict_exchange(&req, sizeof req.h + req.h.len, KILN_D_CHECK, &v) < 0 ? KILN_D_CHECK
										      : (int)v.verdict;
}

int kt_ask_question(struct kt_question *req, size_t plen, unsigned access, unsigned qflags)
{
	kt_init();
	if (plen > KILN_PATH_MAX)
		return KILN_V_ERROR;
	int cached;
	unsigned how;
	if (kt_cache_ask(req->path, plen, access, qflags, 0, &cached, &how))
		return cached;
	if (answered_ahead(req, plen, access, qflags) || note_absent(req, plen, access, qflags, 0))
		return KILN_V_ALLOW;
	return ask_server(req, plen, access, qflags, NULL);
}

int kt_ask_bound(struct kt_question *req, size_t plen, unsigned access, unsigned qflags,
		 unsigned flags, struct kiln_binding *b)
{
	kt_init();
	if (plen > KILN_PATH_MAX)
		return KILN_V_ERROR;
	if (flags & KILN_ASK_SERVER)
		return ask_server(req, plen, access, qflags, b);
	int cached, bind = (flags & KILN_ASK_BIND) != 0;
	if (kt_cache_ask(req->path, plen, access, qflags, bind, &cached, &b->how)) {
		b->id_flags = 0; /* a cache value has no identities */
		b->cached = 1;
		return cached;
	}
	if (answered_ahead(req, plen, access, qflags)) {
		/* An answer for the whole run: nothing to bind. */
		*b = (struct kiln_binding){ .how = KILN_BIND_ANY, .cached = 1 };
		return KILN_V_ALLOW;
	}
	int absent = (flags & KILN_ASK_ABSENT) != 0;
	if (note_absent(req, plen, access, qflags, bind && !absent)) {
		/* Opened without following a symlink: one made meanwhile
		 * sends the open to the server (ELOOP), as for an AREA value.
		 * A stat or access answers ENOENT itself: the kernel's answer
		 * at the moment it was seen, through symlinks too. */
		*b = (struct kiln_binding){
			.how = absent ? KT_BIND_ABSENT : bind ? KILN_BIND_NO_SYMLINKS : KILN_BIND_ANY,
			.cached = 1,
		};
		return KILN_V_ALLOW;
	}
	return ask_server(req, plen, access, qflags, b);
}

int kiln_ask(const char *abspath, unsigned access, unsigned qflags)
{
	struct kt_question req;
	size_t plen = strlen(abspath);
	if (plen > KILN_PATH_MAX)
		return KILN_V_ERROR;
	memcpy(req.path, abspath, plen + 1);
	return kt_ask_question(&req, plen, access, qflags);
}

#define DIR_BATCH_MAX 1024

/* The round trips of a listing the cache could not answer: a frame of its
 * own (noinline), so the cache's answer is not looked up below 17 KiB of
 * buffers (every stack page a forked child writes is a page fault). */
static __attribute__((noinline)) int ask_dir_server(const char *absdir, size_t dlen,
						    const char *const *names, size_t n,
						    unsigned char *hidden)
{
	char req[16384]; /* on the caller's stack: long listings take several */
	size_t done = 0;
	while (done < n) {
		struct kiln_query_dir qd = { 0, (uint32_t)dlen };
		size_t at = sizeof(struct kiln_msg_hdr) + sizeof qd;
		memcpy(req + at, absdir, dlen);
		at += dlen;
		size_t i = done;
		for (; i < n && i - done < DIR_BATCH_MAX; i++) {
			size_t nl = strlen(names[i]);
			if (nl > 0xffff || at + 2 + nl > sizeof req)
				break;
			uint16_t l16 = (uint16_t)nl;
			memcpy(req + at, &l16, 2);
			memcpy(req + at + 2, names[i], nl);
			at += 2 + nl;
		}
		if (i == done)
			return -1; /* one name that cannot fit: not a real name */
		qd.count = (uint32_t)(i - done);
		struct kiln_msg_hdr h = { KILN_MSG_QUERY_DIR, 0,
					  (uint32_t)(at - sizeof h) };
		memcpy(req, &h, sizeof h);
		memcpy(req + sizeof h, &qd, sizeof qd);
		char resp[sizeof(struct kiln_msg_hdr) + sizeof(struct kiln_verdict_dir) +
			  DIR_BATCH_MAX + 16];
		long r = exchange(req, at, resp, sizeof resp, KILN_MSG_VERDICT_DIR, 0);
		struct kiln_verdict_dir vd;
		if (r < (long)sizeof vd)
			goto bad;
		memcpy(&vd, resp + sizeof h, sizeof vd);
		if (vd.count != qd.count || (size_t)r != sizeof vd + vd.count)
			goto bad;
		const unsigned char *flags =
			(const unsigned char *)resp + sizeof h + sizeof vd;
		for (size_t k = 0; k < qd.count; k++)
			hidden[done + k] = flags[k] ? 1 : 0;
		done = i;
		continue;
bad:
		if (r >= 0)
			report_failure(EPROTO);
		return -1;
	}
	return 0;
}

int kiln_ask_dir(const char *absdir, const char *const *names, size_t n,
		 unsigned char *hidden)
{
	kt_init();
	size_t dlen = strlen(absdir);
	if (dlen > KILN_PATH_MAX)
		return -1;
	if (kt_cache_ask_dir(absdir, names, n, hidden))
		return 0;
	return ask_dir_server(absdir, dlen, names, n, hidden);
}

void kiln_event(unsigned kind, const char *path)
{
	kt_init();
	size_t plen = strlen(path);
	if (plen > KILN_PATH_MAX)
		plen = KILN_PATH_MAX;
	struct {
		struct kiln_msg_hdr h;
		struct kiln_event_msg e;
		char path[KILN_PATH_MAX];
	} req;
	req.h = (struct kiln_msg_hdr){ KILN_MSG_EVENT, 0,
				       (uint32_t)(sizeof req.e + plen) };
	req.e = (struct kiln_event_msg){ kind, (uint32_t)plen };
	memcpy(req.path, path, plen);
	exchange(&req, sizeof req.h + req.h.len, NULL, 0, 0, 1);
}
