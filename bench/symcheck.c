/* Driver of `make bench-vcache`: what it costs to know that a path has no
 * symlink on its way, the check the verdict cache makes before using an
 * "area" verdict (docs/verdict-cache.md), against the alternative of an
 * lstat per component, and against a plain stat of the path.
 *
 *   symcheck N PATH    prints "openat2_ns lstatwalk_ns stat_ns" per check
 */
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int by_openat2(const char *path)
{
	struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS };
	long fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
	if (fd < 0)
		return 0;
	close((int)fd);
	return 1;
}

static int by_lstat_walk(const char *path)
{
	char buf[4096];
	size_t n = strlen(path);
	if (n >= sizeof buf)
		return 0;
	memcpy(buf, path, n + 1);
	struct stat st;
	for (size_t i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		char c = buf[i];
		buf[i] = '\0';
		int r = lstat(buf, &st);
		buf[i] = c;
		if (r != 0 || S_ISLNK(st.st_mode))
			return 0;
	}
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: symcheck N PATH\n");
		return 2;
	}
	int n = atoi(argv[1]);
	const char *p = argv[2];
	struct stat st;
	double t0 = now_ns();
	for (int i = 0; i < n; i++)
		if (!by_openat2(p))
			return 1;
	double t1 = now_ns();
	for (int i = 0; i < n; i++)
		if (!by_lstat_walk(p))
			return 1;
	double t2 = now_ns();
	for (int i = 0; i < n; i++)
		if (stat(p, &st) != 0)
			return 1;
	double t3 = now_ns();
	printf("%.1f %.1f %.1f\n", (t1 - t0) / n, (t2 - t1) / n, (t3 - t2) / n);
	return 0;
}
