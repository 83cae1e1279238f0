/* Driver of `make bench-preload`: what the preload library costs a process.
 *
 *   preload noop                      exit at once (the process under test)
 *   preload spawn N with|without LIB  posix_spawn `preload noop` N times, with
 *                                     or without LD_PRELOAD=LIB in the child's
 *                                     environment only; prints ns per process
 *   preload stat N PATH               N stat() calls; prints ns per call
 *   preload spawn-stat N K PATH       posix_spawn `preload stat K PATH` N times
 *                                     in this process's own environment (so
 *                                     under kiln trace the children are
 *                                     traced); prints ns per process
 */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Spawns and waits for `self` n times; prints ns per process. */
static int spawn_n(int n, const char *self, const posix_spawn_file_actions_t *fa, char *const *argv,
		   char *const *envp)
{
	double t0 = now_ns();
	for (int i = 0; i < n; i++) {
		pid_t pid;
		int st;
		if (posix_spawn(&pid, self, fa, NULL, argv, envp) != 0)
			return 1;
		waitpid(pid, &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			return 1;
	}
	printf("%.0f\n", (now_ns() - t0) / n);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "noop"))
		return 0;
	if (argc == 5 && !strcmp(argv[1], "spawn")) {
		int n = atoi(argv[2]);
		char *envp[512];
		int k = 0;
		static char pre[4200];
		for (char **e = environ; *e && k < 500; e++)
			if (strncmp(*e, "LD_PRELOAD=", 11))
				envp[k++] = *e;
		if (!strcmp(argv[3], "with")) {
			snprintf(pre, sizeof pre, "LD_PRELOAD=%s", argv[4]);
			envp[k++] = pre;
		}
		envp[k] = NULL;
		char self[4096];
		ssize_t l = readlink("/proc/self/exe", self, sizeof self - 1);
		if (l < 0)
			return 1;
		self[l] = '\0';
		char *cargv[] = { self, "noop", NULL };
		return spawn_n(n, self, NULL, cargv, envp);
	}
	if (argc == 5 && !strcmp(argv[1], "spawn-stat")) {
		int n = atoi(argv[2]);
		char self[4096];
		ssize_t l = readlink("/proc/self/exe", self, sizeof self - 1);
		if (l < 0)
			return 1;
		self[l] = '\0';
		char *cargv[] = { self, "stat", argv[3], argv[4], NULL };
		int out = open("/dev/null", O_WRONLY);
		posix_spawn_file_actions_t fa;
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_adddup2(&fa, out, 1);
		return spawn_n(n, self, &fa, cargv, environ);
	}
	if (argc == 4 && !strcmp(argv[1], "stat")) {
		int n = atoi(argv[2]);
		struct stat st;
		double t0 = now_ns();
		for (int i = 0; i < n; i++)
			if (stat(argv[3], &st) != 0)
				return 1;
		printf("%.0f\n", (now_ns() - t0) / n);
		return 0;
	}
	fprintf(stderr, "usage: preload noop | spawn N with|without LIB | stat N PATH | "
			"spawn-stat N K PATH\n");
	return 2;
}
