#include "meta/jobstream.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

struct jobstream {
	int fd;
	int chunked;  /* a pipe or socket: write what poll promised room for */
	atomic_int *cancel, *broken;
};

static ssize_t js_write(void *cookie, const char *buf, size_t n)
{
	struct jobstream *js = cookie;
	size_t done = 0;
	if (js->fd < 0) {
		errno = EBADF;
		return -1;
	}
	while (done < n) {
		if (atomic_load(js->cancel)) {
			errno = ECANCELED;
			break;
		}
		/* Wait in slices so that a cancel ends a write to a full pipe. */
		struct pollfd p = { .fd = js->fd, .events = POLLOUT };
		int r = poll(&p, 1, 100);
		if (r == 0 || (r < 0 && errno == EINTR))
			continue;
		size_t len = n - done;
		if (js->chunked && len > 4096)
			len = 4096;
		ssize_t k = write(js->fd, buf + done, len);
		if (k < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			if (errno == EPIPE) {
				atomic_store(js->broken, 1);
				atomic_store(js->cancel, 1);
			}
			break;
		}
		done += (size_t)k;
	}
	return done ? (ssize_t)done : -1;
}

static int js_close(void *cookie)
{
	struct jobstream *js = cookie;
	if (js->fd >= 0)
		close(js->fd);
	free(js);
	return 0;
}

FILE *meta_job_stream(int fd, atomic_int *cancel, atomic_int *broken, int buffered)
{
	struct jobstream *js = malloc(sizeof *js);
	if (!js) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	struct stat st;
	*js = (struct jobstream){ .fd = fd, .cancel = cancel, .broken = broken };
	js->chunked = fd >= 0 && fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
	FILE *f = fopencookie(js, "w", (cookie_io_functions_t){ .write = js_write, .close = js_close });
	if (!f) {
		js_close(js);
		return NULL;
	}
	if (buffered)
		setvbuf(f, NULL, _IOFBF, 1 << 20);
	else
		setvbuf(f, NULL, _IONBF, 0);
	return f;
}
