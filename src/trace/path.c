/* Absolute, lexically clean paths, computed without resolving symlinks (only
 * the server resolves: it checks every symlink it traverses). Raw system
 * calls only: getcwd and readlink of /proc/self/fd/N. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "trace/kt.h"
#include "common/rawsys.h"

/* The bytes that end a stretch of ordinary path characters. */
static const unsigned char stop[256] = { [0] = 1, ['/'] = 1 };

/* Length of `s` if it is already clean (no empty or "." component, no
 * trailing slash; leading slashes skipped by the caller), else -1. Nearly
 * every path a build asks about is: one tight pass (a table test per byte,
 * four at a time), then one copy. A byte at a time: a wider load could read
 * past the terminator (string.c says why that is not done). */
static long clean_length(const char *s)
{
	if (s[0] == '.' && (s[1] == '/' || !s[1]))
		return -1;
	const unsigned char *p = (const unsigned char *)s;
	for (;;) {
		while (!stop[p[0]] && !stop[p[1]] && !stop[p[2]] && !stop[p[3]])
			p += 4;
		while (!stop[*p])
			p++;
		if (!*p)
			return (const char *)p - s;
		if (p[1] == '/' || !p[1] || (p[1] == '.' && (p[2] == '/' || !p[2])))
			return -1;
		p++;
	}
}

/* Appends the components of `s` to out[0..len), returns the new length or
 * -ENAMETOOLONG; *end gets the terminator of `s`. out always starts with
 * "/". */
static int append_components(char *out, int len, const char *s, const char **end)
{
	while (*s == '/')
		s++;
	long whole = *s ? clean_length(s) : 0;
	if (whole >= 0) {
		int need = (len > 1 && whole ? 1 : 0) + (int)whole;
		*end = s + whole;
		if ((long)len + need > (long)KILN_PATH_MAX)
			return -ENAMETOOLONG;
		if (len > 1 && whole)
			out[len++] = '/';
		memcpy(out + len, s, (size_t)whole);
		return len + (int)whole;
	}
	while (*s) {
		while (*s == '/')
			s++;
		const char *c = s;
		while (*s && *s != '/')
			s++;
		size_t n = (size_t)(s - c);
		if (n == 0 || (n == 1 && c[0] == '.'))
			continue;
		int need = (len > 1 ? 1 : 0) + (int)n;
		if (len + need > (int)KILN_PATH_MAX)
			return -ENAMETOOLONG;
		if (len > 1)
			out[len++] = '/';
		memcpy(out + len, c, n);
		len += (int)n;
	}
	*end = s;
	return len;
}

int kt_path_join(const char *base, const char *rel, char *out)
{
	int len = 1;
	const char *end;
	out[0] = '/';
	if (rel[0] != '/') {
		len = append_components(out, len, base, &end);
		if (len < 0)
			return len;
	}
	len = append_components(out, len, rel, &end);
	if (len < 0)
		return len;
	out[len] = '\0';
	return len;
}

int kt_fd_path(int fd, char *out)
{
	char link[32] = "/proc/self/fd/";
	char digits[12];
	int nd = 0;
	unsigned v = (unsigned)fd;
	if (fd < 0)
		return -EBADF;
	do {
		digits[nd++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	size_t p = strlen(link);
	while (nd)
		link[p++] = digits[--nd];
	link[p] = '\0';
	long n = kt_sys4(SYS_readlinkat, AT_FDCWD, link, out, KT_PATH_BUF - 1);
	if (n < 0) {
		/* An fd that is not open is the caller's EBADF, not ours. */
		if (kt_sys2(SYS_fcntl, fd, F_GETFD) < 0)
			return -EBADF;
		return (int)n;
	}
	if (n >= (long)KT_PATH_BUF - 1)
		return -ENAMETOOLONG;
	out[n] = '\0';
	if (out[0] != '/') /* socket:[..], pipe:[..], anon_inode:... */
		return -ENOTDIR;
	return (int)n;
}

/* The base directory is read straight into `out` (the kernel gives it
 * absolute and clean) and `path` appended to it: no second path buffer on
 * the stack. The pass that cleans `path` finds its end, so its tail is
 * judged here without another strlen. */
int kt_path_at_tail(int dirfd, const char *path, char *out, int *tail)
{
	const char *end = path;
	int len;
	if (path[0] == '/') {
		out[0] = '/';
		len = append_components(out, 1, path, &end);
		goto done;
	}
	if (dirfd == AT_FDCWD) {
		long n = kt_sys2(SYS_getcwd, out, KT_PATH_BUF);
		if (n < 0)
			return (int)n;
		if (out[0] != '/') /* "(unreachable)/...": outside our root */
			return -ENOENT;
		len = (int)strlen(out);
	} else {
		len = kt_fd_path(dirfd, out);
		if (len < 0)
			return len;
	}
	if (len > 1 && out[len - 1] == '/')
		len--; /* never from the kernel; kept for the invariant */
	len = append_components(out, len, path, &end);
done:
	if (len < 0)
		return len;
	out[len] = '\0';
	if (tail)
		*tail = kt_path_tail_n(path, (size_t)(end - path));
	return len;
}

int kt_path_at(int dirfd, const char *path, char *out)
{
	return kt_path_at_tail(dirfd, path, out, NULL);
}
