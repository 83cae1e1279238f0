#include "ipc/handshake.h"

#include <string.h>
#include <sys/socket.h>

#include "ipc/msg.h"

int kiln_hello_check_ident(const void *payload, size_t len, uint16_t role,
			   const void *ident, size_t identlen)
{
	struct kiln_hello h;
	if (len < sizeof h || (!identlen && len != sizeof h))
		return -1;
	memcpy(&h, payload, sizeof h);
	if (h.magic != KILN_PROTO_MAGIC || h.role != role)
		return -1;
	if (h.version != KILN_PROTO_VERSION)
		return KILN_REFUSE_VERSION;
	if (identlen && (len - sizeof h != identlen ||
			 memcmp((const char *)payload + sizeof h, ident, identlen)))
		return KILN_REFUSE_BUILD;
	return 0;
}

int kiln_hello_check(const void *payload, size_t len, uint16_t role)
{
	return kiln_hello_check_ident(payload, len, role, NULL, 0);
}

int kiln_send_hello_ok(int fd)
{
	struct kiln_hello_ok ok = { .magic = KILN_PROTO_MAGIC, .version = KILN_PROTO_VERSION };
	return kiln_msg_send(fd, KILN_MSG_HELLO_OK, &ok, sizeof ok, NULL, 0, MSG_DONTWAIT);
}

int kiln_send_refused(int fd, uint32_t reason, const char *text)
{
	return kiln_msg_send(fd, KILN_MSG_REFUSED, &reason, sizeof reason, text, strlen(text),
			     MSG_DONTWAIT);
}
