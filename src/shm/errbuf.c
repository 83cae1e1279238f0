#include <errno.h>
#include <string.h>

#include "shm/errbuf.h"

void shm_eb_init(struct shm_errbuf *e, char *buf, size_t cap)
{
	e->buf = buf;
	e->cap = buf ? cap : 0;
	e->len = 0;
	if (e->cap)
		buf[0] = '\0';
}

static void shm_eb_putc(struct shm_errbuf *e, char c)
{
	if (e->len + 1 < e->cap) {
		e->buf[e->len++] = c;
		e->buf[e->len] = '\0';
	}
}

void shm_eb_str(struct shm_errbuf *e, const char *s)
{
	while (*s)
		shm_eb_putc(e, *s++);
}

void shm_eb_u64(struct shm_errbuf *e, uint64_t v)
{
	char tmp[24];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		shm_eb_putc(e, tmp[--n]);
}

void shm_eb_hex(struct shm_errbuf *e, uint64_t v)
{
	char tmp[20];
	int n = 0;
	do {
		tmp[n++] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	shm_eb_str(e, "0x");
	while (n)
		shm_eb_putc(e, tmp[--n]);
}

/* strerror is not async-signal-safe; name the errors attach and growth meet. */
void shm_eb_errno(struct shm_errbuf *e, int err)
{
	static const struct { int num; const char *text; } known[] = {
		{ ENOENT, "No such file or directory" },
		{ EACCES, "Permission denied" },
		{ EPERM, "Operation not permitted" },
		{ EEXIST, "File exists" },
		{ ENOSPC, "No space left on device" },
		{ EFBIG, "File too large" },
		{ ENOMEM, "Cannot allocate memory" },
		{ EINVAL, "Invalid argument" },
		{ EISDIR, "Is a directory" },
		{ ENOTDIR, "Not a directory" },
		{ EBADF, "Bad file descriptor" },
		{ EROFS, "Read-only file system" },
		{ EOPNOTSUPP, "Operation not supported" },
		{ ENODEV, "No such device" },
		{ EMFILE, "Too many open files" },
		{ ELOOP, "Too many levels of symbolic links" },
		{ ENAMETOOLONG, "File name too long" },
	};
	shm_eb_str(e, ": ");
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
		if (known[i].num == err) {
			shm_eb_str(e, known[i].text);
			return;
		}
	shm_eb_str(e, "errno ");
	shm_eb_u64(e, (uint64_t)err);
}
