/* Framing of one message per SOCK_SEQPACKET packet, and the HELLO check. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ipc/handshake.h"
#include "ipc/msg.h"

static char buf[KILN_MSG_MAX + 64];

static void pair(int sv[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
}

static void round_trip(void **state)
{
	(void)state;
	int sv[2];
	pair(sv);
	struct kiln_query q = { .access = 2, .qflags = 1, .pathlen = 4 };
	assert_int_equal(kiln_msg_send(sv[0], KILN_MSG_QUERY, &q, sizeof q, "/usr", 4, 0), 0);
	struct kiln_msg_hdr h;
	ssize_t n = kiln_msg_recv(sv[1], buf, KILN_MSG_MAX, &h, 0);
	assert_int_equal(n, (ssize_t)(sizeof q + 4));
	assert_int_equal(h.type, KILN_MSG_QUERY);
	assert_int_equal(h.len, sizeof q + 4);
	assert_memory_equal(buf + sizeof h + sizeof q, "/usr", 4);
	/* An empty payload. */
	assert_int_equal(kiln_msg_send(sv[0], KILN_MSG_HELLO_OK, NULL, 0, NULL, 0, 0), 0);
	assert_int_equal(kiln_msg_recv(sv[1], buf, KILN_MSG_MAX, &h, 0), 0);
	/* Nothing to read on a non-blocking receive. */
	assert_int_equal(kiln_msg_recv(sv[1], buf, KILN_MSG_MAX, &h, MSG_DONTWAIT), -1);
	assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
	shutdown(sv[0], SHUT_WR);
	assert_int_equal(kiln_msg_recv(sv[1], buf, KILN_MSG_MAX, &h, 0), -2);
}

static void oversized_and_malformed(void **state)
{
	(void)state;
	int sv[2];
	pair(sv);
	static char big[KILN_MSG_MAX];
	assert_int_equal(kiln_msg_send(sv[0], KILN_MSG_QUERY, big, sizeof big, NULL, 0, 0), -1);
	assert_int_equal(errno, EMSGSIZE);
	struct kiln_msg_hdr h;
	/* A raw packet bigger than the receiver's buffer is consumed whole. */
	assert_int_equal(send(sv[0], big, 200, 0), 200);
	assert_int_equal(send(sv[0], "\x04\x00", 2, 0), 2);
	struct kiln_msg_hdr lie = { .type = KILN_MSG_QUERY, .len = 99 };
	assert_int_equal(send(sv[0], &lie, sizeof lie, 0), (ssize_t)sizeof lie);
	assert_int_equal(kiln_msg_recv(sv[1], buf, 100, &h, 0), -1);
	assert_int_equal(errno, EMSGSIZE);
	assert_int_equal(kiln_msg_recv(sv[1], buf, 100, &h, 0), -1);
	assert_int_equal(errno, EPROTO); /* short header */
	assert_int_equal(kiln_msg_recv(sv[1], buf, 100, &h, 0), -1);
	assert_int_equal(errno, EPROTO); /* len disagrees */
}

static void hello_check(void **state)
{
	(void)state;
	struct kiln_hello h = { .magic = KILN_PROTO_MAGIC, .version = KILN_PROTO_VERSION, .role = 1 };
	assert_int_equal(kiln_hello_check(&h, sizeof h, 1), 0);
	assert_int_equal(kiln_hello_check(&h, sizeof h - 1, 1), -1);
	assert_int_equal(kiln_hello_check(&h, sizeof h, 2), -1);
	h.version = KILN_PROTO_VERSION + 1;
	assert_int_equal(kiln_hello_check(&h, sizeof h, 1), KILN_REFUSE_VERSION);
	h.version = KILN_PROTO_VERSION - 1;
	assert_int_equal(kiln_hello_check(&h, sizeof h, 1), KILN_REFUSE_VERSION);
	h.version = KILN_PROTO_VERSION;
	h.magic = 0;
	assert_int_equal(kiln_hello_check(&h, sizeof h, 1), -1);
}

static void hello_with_identity(void **state)
{
	(void)state;
	unsigned char msg[sizeof(struct kiln_hello) + 4];
	struct kiln_hello h = { .magic = KILN_PROTO_MAGIC, .version = KILN_PROTO_VERSION, .role = 2 };
	memcpy(msg, &h, sizeof h);
	memcpy(msg + sizeof h, "\x01\x02\x03\x04", 4);
	assert_int_equal(kiln_hello_check_ident(msg, sizeof msg, 2, "\x01\x02\x03\x04", 4), 0);
	assert_int_equal(kiln_hello_check_ident(msg, sizeof msg, 2, "\x01\x02\x03\x05", 4), KILN_REFUSE_BUILD);
	assert_int_equal(kiln_hello_check_ident(msg, sizeof msg - 1, 2, "\x01\x02\x03\x04", 4),
			 KILN_REFUSE_BUILD);
	assert_int_equal(kiln_hello_check_ident(msg, sizeof msg, 2, "\x01\x02\x03\x04\x05", 5),
			 KILN_REFUSE_BUILD);
	assert_int_equal(kiln_hello_check_ident(msg, sizeof msg, 1, "\x01\x02\x03\x04", 4), -1);
	/* without an identity, extra bytes are malformed, as before */
	assert_int_equal(kiln_hello_check_ident(msg, sizeof msg, 2, NULL, 0), -1);
	h.version = 9;
	memcpy(msg, &h, sizeof h);
	assert_int_equal(kiln_hello_check_ident(msg, sizeof msg, 2, "\x01\x02\x03\x04", 4),
			 KILN_REFUSE_VERSION);
}

static ino_t ino_of(int fd)
{
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	return st.st_ino;
}

static int open_fds(void)
{
	int n = 0;
	for (int fd = 0; fd < 1024; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

static void descriptors_travel(void **state)
{
	(void)state;
	int sv[2], p[2];
	pair(sv);
	assert_int_equal(pipe(p), 0);
	int before = open_fds();
	int fds[3] = { p[0], p[1], sv[0] };
	assert_int_equal(kiln_msg_send_fds(sv[0], 16, "job", 3, NULL, 0, fds, 3, 0), 0);
	struct kiln_msg_hdr h;
	int got[KILN_MSG_MAX_FDS];
	size_t n = 99;
	assert_int_equal(kiln_msg_recv_fds(sv[1], buf, KILN_MSG_MAX, &h, 0, got, KILN_MSG_MAX_FDS, &n), 3);
	assert_int_equal(n, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(ino_of(got[i]), ino_of(fds[i]));
		assert_true(fcntl(got[i], F_GETFD) & FD_CLOEXEC);
	}
	/* the received write end is the same pipe */
	assert_int_equal(write(got[1], "x", 1), 1);
	char c;
	assert_int_equal(read(p[0], &c, 1), 1);
	for (int i = 0; i < 3; i++)
		close(got[i]);

	/* more than the receiver takes: the rest are closed, not leaked */
	assert_int_equal(kiln_msg_send_fds(sv[0], 16, NULL, 0, NULL, 0, fds, 3, 0), 0);
	assert_int_equal(kiln_msg_recv_fds(sv[1], buf, KILN_MSG_MAX, &h, 0, got, 1, &n), 0);
	assert_int_equal(n, 1);
	close(got[0]);
	/* a receiver that takes none (kiln_msg_recv) */
	assert_int_equal(kiln_msg_send_fds(sv[0], 16, NULL, 0, NULL, 0, fds, 2, 0), 0);
	assert_int_equal(kiln_msg_recv(sv[1], buf, KILN_MSG_MAX, &h, 0), 0);
	/* a malformed packet with descriptors: they are closed, *nfds is 0 */
	assert_int_equal(kiln_msg_send_fds(sv[0], 16, "x", 1, NULL, 0, fds, 2, 0), 0);
	assert_int_equal(kiln_msg_recv_fds(sv[1], buf, 4, &h, 0, got, KILN_MSG_MAX_FDS, &n), -1);
	assert_int_equal(errno, EMSGSIZE);
	assert_int_equal(n, 0);
	/* too many to send */
	int many[KILN_MSG_MAX_FDS + 1];
	for (int i = 0; i <= KILN_MSG_MAX_FDS; i++)
		many[i] = p[0];
	assert_int_equal(kiln_msg_send_fds(sv[0], 16, NULL, 0, NULL, 0, many, KILN_MSG_MAX_FDS + 1, 0), -1);
	assert_int_equal(errno, EMSGSIZE);
	/* nothing leaked */
	assert_int_equal(open_fds(), before);
	close(p[0]);
	close(p[1]);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip),
		cmocka_unit_test(oversized_and_malformed),
		cmocka_unit_test(hello_check),
		cmocka_unit_test(hello_with_identity),
		cmocka_unit_test(descriptors_travel),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
