#include "cli/read_all.h"

#include <errno.h>
#include <unistd.h>

size_t cli_read_all(int fd, char *buf, size_t cap)
{
	size_t got = 0;
	for (ssize_t n; got < cap - 1 && (n = read(fd, buf + got, cap - 1 - got)) != 0;) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	return got;
}
