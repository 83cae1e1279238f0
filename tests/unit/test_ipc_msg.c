/* Framing of one message per SOCK_SEQPACKET packet, and the HELLO check. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

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
	h.version = 2;
	assert_int_equal(kiln_hello_check(&h, sizeof h, 1), KILN_REFUSE_VERSION);
	h.version = KILN_PROTO_VERSION;
	h.magic = 0;
	assert_int_equal(kiln_hello_check(&h, sizeof h, 1), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip),
		cmocka_unit_test(oversized_and_malformed),
		cmocka_unit_test(hello_check),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
