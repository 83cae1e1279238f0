/* Driver of `make bench-preload`: what the preload library costs a process.
 *
 *   preload noop                      exit at once (the process under test)
 *   preload spawn N with|without LIB  posix_spawn `preload noop` N times, with
 *                                     or without LD_PRELOAD=LIB in the child's
 *                                     environment only; prints ns per process
 *   preload spawn N inherit           the same with this process's environment
 *                                     as it is (run under `kiln trace`: the
 *                                     child is a traced process)
 *   preload stat N PATH               N stat() calls; prints ns per call
 *   preload open N PATH               N open() + close(); prints ns per call
 *   preload stat-open FILE            each path of FILE (one per line) once:
 *                                     stat, then open + close (a compiler's
 *                                     header search); prints ns per path
 *   preload spawn-prog N PROG ARG...  posix_spawn PROG N times in this
 *                                     process's environment; ns per process
 *   preload spawn-stat N K PATH       posix_spawn `preload stat K PATH` N times
 *                                     in this process's own environment (so
 *                                     under kiln trace the children are
 *                                     traced); prints ns per process
 *   preload spawn-stat-cold N K PATH MB  the same, writing MB MiB of memory
 *                                     before each spawn (untimed) so that
 *                                     each child starts with cold caches, as
 *                                     one among a build's other processes
 *   preload locale NAME               setlocale(LC_ALL, NAME) and exit (what
 *                                     nearly every program of a build does
 *                                     first: NAME "" takes $LC_ALL...)
 *   preload spawn-locale N NAME       posix_spawn `preload locale NAME` N times
 *                                     in this process's own environment
 *   preload fork N                    fork N children that do what a shell's
 *                                     child of a pipe or $(...) does before
 *                                     it runs anything (dup2 onto stdout,
 *                                     close, one write) and _exit; the parent
 *                                     itself never calls dup2 or close; ns
 *                                     per child
 *   preload fork-exec N PROG          stat PROG once (as a shell does when it
 *                                     looks a command up), then fork N
 *                                     children that each exec PROG with no
 *                                     arguments, as a shell runs a command:
 *                                     what each of a configure script's
 *                                     processes costs; per_child's figures
 */
#include <fcntl.h>
#include <locale.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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

static double cpu_ns(const struct rusage *r)
{
	return (r->ru_utime.tv_sec + r->ru_stime.tv_sec) * 1e9 +
	       (r->ru_utime.tv_usec + r->ru_stime.tv_usec) * 1e3;
}

/* Prints `wall` ns per child on stdout, and on stderr "cpu_ns=C minflt=F":
 * the CPU time and minor page faults per child of the n children waited for
 * since r0, which a loaded machine inflates far less than the wall time
 * (scheduling waits are not in them). */
static int per_child(const struct rusage *r0, int n, double wall)
{
	struct rusage r1;
	getrusage(RUSAGE_CHILDREN, &r1);
	fprintf(stderr, "cpu_ns=%.0f minflt=%.1f\n", (cpu_ns(&r1) - cpu_ns(r0)) / n,
		(double)(r1.ru_minflt - r0->ru_minflt) / n);
	printf("%.0f\n", wall);
	return 0;
}

/* Spawns and waits for `self` n times (per_child's figures). */
static int spawn_n(int n, const char *self, const posix_spawn_file_actions_t *fa, char *const *argv,
		   char *const *envp, size_t thrash)
{
	char *junk = thrash ? malloc(thrash) : NULL;
	if (thrash && !junk)
		return 1;
	struct rusage r0;
	getrusage(RUSAGE_CHILDREN, &r0);
	double wall = 0;
	for (int i = 0; i < n; i++) {
		for (size_t k = 0; k < thrash; k += 64)
			junk[k] = (char)(i + k);
		pid_t pid;
		int st;
		double t0 = now_ns();
		if (posix_spawn(&pid, self, fa, NULL, argv, envp) != 0)
			return 1;
		waitpid(pid, &st, 0);
		wall += now_ns() - t0;
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			return 1;
	}
	free(junk);
	return per_child(&r0, n, wall / n);
}

/* Forks n children, each of which sets up its stdout as a shell's child of
 * a pipe does and exits (per_child's figures). */
static int fork_n(int n)
{
	int p[2];
	if (pipe(p) != 0)
		return 1;
	struct rusage r0;
	getrusage(RUSAGE_CHILDREN, &r0);
	double t0 = now_ns();
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			if (dup2(p[1], 1) < 0 || close(p[0]) || close(p[1]) || write(1, "x", 1) != 1)
				_exit(1);
			_exit(0);
		}
		char c;
		int st;
		if (read(p[0], &c, 1) != 1 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st))
			return 1;
	}
	return per_child(&r0, n, (now_ns() - t0) / n);
}

/* Stats prog, then forks n children that exec it (per_child's figures). */
static int fork_exec_n(int n, char *prog)
{
	struct stat st;
	if (stat(prog, &st) != 0)
		return 1;
	char *argv[] = { prog, NULL };
	struct rusage r0;
	getrusage(RUSAGE_CHILDREN, &r0);
	double t0 = now_ns();
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			execv(prog, argv);
			_exit(127);
		}
		int ws;
		if (waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws) || WEXITSTATUS(ws))
			return 1;
	}
	return per_child(&r0, n, (now_ns() - t0) / n);
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "noop"))
		return 0;
	int inherit = argc == 4 && !strcmp(argv[1], "spawn") && !strcmp(argv[3], "inherit");
	if (inherit || (argc == 5 && !strcmp(argv[1], "spawn"))) {
		int n = atoi(argv[2]);
		char *envp[512];
		int k = 0;
		static char pre[4200];
		for (char **e = environ; *e && k < 500; e++)
			if (inherit || strncmp(*e, "LD_PRELOAD=", 11))
				envp[k++] = *e;
		if (!inherit && !strcmp(argv[3], "with")) {
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
		return spawn_n(n, self, NULL, cargv, envp, 0);
	}
	if (argc == 3 && !strcmp(argv[1], "locale")) {
		setlocale(LC_ALL, argv[2]);
		return 0;
	}
	int cold = argc == 6 && !strcmp(argv[1], "spawn-stat-cold");
	if ((argc == 5 && !strcmp(argv[1], "spawn-stat")) || cold ||
	    (argc == 4 && !strcmp(argv[1], "spawn-locale"))) {
		int n = atoi(argv[2]);
		char self[4096];
		ssize_t l = readlink("/proc/self/exe", self, sizeof self - 1);
		if (l < 0)
			return 1;
		self[l] = '\0';
		char *cargv[] = { self, "stat", argv[3], argv[4], NULL };
		if (argc == 4) {
			cargv[1] = "locale";
			cargv[2] = argv[3];
			cargv[3] = NULL;
		}
		int out = open("/dev/null", O_WRONLY);
		posix_spawn_file_actions_t fa;
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_adddup2(&fa, out, 1);
		return spawn_n(n, self, &fa, cargv, environ, cold ? (size_t)atoi(argv[5]) << 20 : 0);
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
	if (argc == 4 && !strcmp(argv[1], "open")) {
		int n = atoi(argv[2]);
		double t0 = now_ns();
		for (int i = 0; i < n; i++) {
			int fd = open(argv[3], O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				return 1;
			close(fd);
		}
		printf("%.0f\n", (now_ns() - t0) / n);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "stat-open")) {
		/* Each path of FILE (one per line) once: stat, then open + close,
		 * as a compiler's header search does; ns per path. */
		FILE *f = fopen(argv[2], "r");
		if (!f)
			return 1;
		char line[4096];
		int n = 0;
		struct stat st;
		double t0 = now_ns();
		while (fgets(line, sizeof line, f)) {
			line[strcspn(line, "\n")] = '\0';
			if (stat(line, &st) == 0) {
				int fd = open(line, O_RDONLY | O_CLOEXEC);
				if (fd >= 0)
					close(fd);
			}
			n++;
		}
		double t = now_ns() - t0;
		fclose(f);
		if (!n)
			return 1;
		printf("%.0f\n", t / n);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "fork"))
		return fork_n(atoi(argv[2]));
	if (argc == 4 && !strcmp(argv[1], "fork-exec"))
		return fork_exec_n(atoi(argv[2]), argv[3]);
	if (argc >= 4 && !strcmp(argv[1], "spawn-prog")) {
		int n = atoi(argv[2]);
		return spawn_n(n, argv[3], NULL, argv + 3, environ, 0);
	}
	fprintf(stderr, "usage: preload noop | spawn N with|without LIB | spawn N inherit | "
			"stat N PATH | open N PATH | stat-open FILE | spawn-stat N K PATH | spawn-stat-cold N K PATH MB | "
			"spawn-prog N PROG [ARG...] | "
			"locale NAME | spawn-locale N NAME | fork N | fork-exec N PROG\n");
	return 2;
}
