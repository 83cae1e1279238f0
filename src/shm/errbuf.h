/* A message builder for caller-provided buffers that uses no stdio and no
 * malloc, so attach can describe a refusal from inside a signal handler or a
 * preload hook. Always NUL-terminates; truncates silently. */
#ifndef KILN_SHM_ERRBUF_H
#define KILN_SHM_ERRBUF_H

#include <stddef.h>
#include <stdint.h>

struct shm_errbuf {
	char *buf;
	size_t cap, len;
};

void shm_eb_init(struct shm_errbuf *e, char *buf, size_t cap);
void shm_eb_str(struct shm_errbuf *e, const char *s);
void shm_eb_u64(struct shm_errbuf *e, uint64_t v);
void shm_eb_hex(struct shm_errbuf *e, uint64_t v);
/* Appends ": " and a short description of errno value err. */
void shm_eb_errno(struct shm_errbuf *e, int err);

#endif
