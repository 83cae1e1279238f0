/* The server side of the handshake (docs/protocol.md, "Handshake"). */
#ifndef KILN_IPC_HANDSHAKE_H
#define KILN_IPC_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

/* Checks a HELLO payload. Returns 0 if acceptable, a kiln_refuse_reason if
 * the client must be refused politely (version), or -1 if the message is
 * malformed (wrong size, bad magic or role): close without an answer. */
int kiln_hello_check(const void *payload, size_t len, uint16_t role);

/* The same for a role whose HELLO carries the build's identity after the
 * struct (identlen > 0 bytes, e.g. kiln_build_ident() of src/server/ident.h): a HELLO whose identity
 * differs (in length or bytes) is refused with KILN_REFUSE_BUILD. With
 * identlen 0 this is kiln_hello_check. */
int kiln_hello_check_ident(const void *payload, size_t len, uint16_t role,
			   const void *ident, size_t identlen);


/* Answers HELLO_OK, or REFUSED with a reason and a human-readable text. */
int kiln_send_hello_ok(int fd);
int kiln_send_refused(int fd, uint32_t reason, const char *text);

#endif
