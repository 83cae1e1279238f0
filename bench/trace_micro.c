/* Micro benchmark of `make bench-trace`: what a checked file access costs.
 *
 *   trace_micro LIST PROCS THREADS PASSES
 *
 * Reads the paths of LIST (one per line), forks PROCS processes of THREADS
 * threads each; every thread does one untimed pass over all paths (stat, open
 * O_RDONLY, close each), waits for all the others at a process-shared
 * barrier, then does PASSES timed passes. Any failed stat or open (a path the
 * sandbox hides, a missing file) fails the run: the figure is only of paths
 * that were really reached. Prints "key value" lines:
 *
 *   paths, workers, cpus, calls   what was measured (calls: 3 per path and pass)
 *   wall_s                        first timed start to last timed end
 *   ns_per_call                   wall_s * min(workers, cpus) / calls: the
 *                                 machine's core time per call
 *   thread_ns_per_call            median over threads of its own wall time
 *                                 per call (includes waiting for a core)
 *   cpu_ns_per_call               the calling threads' own CPU time (user +
 *                                 system, CLOCK_THREAD_CPUTIME_ID) over the
 *                                 timed passes, summed, per call: what the
 *                                 calls cost the threads making them, without
 *                                 what other processes (kiln's server, the
 *                                 VM's other tenants) took from the machine
 *                                 meanwhile
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct result {
	double t0, t1;
	double c0, c1; /* the thread's CPU time */
	int err;
	char path[256];
};

struct shared {
	pthread_barrier_t start;
	struct result res[];
};

static char **paths;
static size_t npaths;
static int passes;
static struct shared *sh;

static double clock_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int one_pass(struct result *r)
{
	struct stat st;
	for (size_t i = 0; i < npaths; i++) {
		int fd;
		if (stat(paths[i], &st) != 0 || (fd = open(paths[i], O_RDONLY | O_CLOEXEC)) < 0) {
			r->err = errno;
			snprintf(r->path, sizeof r->path, "%s", paths[i]);
			return -1;
		}
		close(fd);
	}
	return 0;
}

static void *worker(void *arg)
{
	struct result *r = arg;
	int failed = one_pass(r);
	/* Every worker reaches the barrier, failed or not, so none waits forever. */
	pthread_barrier_wait(&sh->start);
	if (failed)
		return NULL;
	r->t0 = clock_ns(CLOCK_MONOTONIC);
	r->c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	for (int p = 0; p < passes && !r->err; p++)
		one_pass(r);
	r->c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	r->t1 = clock_ns(CLOCK_MONOTONIC);
	return NULL;
}

static int read_list(const char *file)
{
	FILE *f = fopen(file, "r");
	if (!f) {
		fprintf(stderr, "trace_micro: %s: %s\n", file, strerror(errno));
		return -1;
	}
	size_t cap = 0;
	char *line = NULL, *buf = NULL;
	size_t bufcap = 0;
	ssize_t n;
	while ((n = getline(&buf, &bufcap, f)) > 0) {
		if (buf[n - 1] == '\n')
			buf[--n] = '\0';
		if (n == 0)
			continue;
		if (npaths == cap) {
			cap = cap ? 2 * cap : 1024;
			char **p = realloc(paths, cap * sizeof *paths);
			if (!p)
				goto oom;
			paths = p;
		}
		if (!(line = strdup(buf)))
			goto oom;
		paths[npaths++] = line;
	}
	free(buf);
	fclose(f);
	if (npaths == 0) {
		fprintf(stderr, "trace_micro: %s: no paths\n", file);
		return -1;
	}
	return 0;
oom:
	fprintf(stderr, "trace_micro: out of memory reading %s\n", file);
	free(buf);
	fclose(f);
	return -1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void run_process(int first, int threads)
{
	pthread_t tid[64];
	for (int t = 0; t < threads; t++)
		if (pthread_create(&tid[t], NULL, worker, &sh->res[first + t]) != 0) {
			fprintf(stderr, "trace_micro: pthread_create failed\n");
			_exit(1);
		}
	for (int t = 0; t < threads; t++)
		pthread_join(tid[t], NULL);
	_exit(0);
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: trace_micro LIST PROCS THREADS PASSES\n");
		return 2;
	}
	int procs = atoi(argv[2]), threads = atoi(argv[3]);
	passes = atoi(argv[4]);
	if (procs < 1 || procs > 64 || threads < 1 || threads > 64 || passes < 1) {
		fprintf(stderr, "trace_micro: PROCS and THREADS must be 1..64, PASSES at least 1\n");
		return 2;
	}
	if (read_list(argv[1]) != 0)
		return 1;
	int workers = procs * threads;
	size_t size = sizeof *sh + workers * sizeof sh->res[0];
	sh = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("trace_micro: mmap");
		return 1;
	}
	pthread_barrierattr_t ba;
	pthread_barrierattr_init(&ba);
	pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
	if (pthread_barrier_init(&sh->start, &ba, workers) != 0) {
		fprintf(stderr, "trace_micro: pthread_barrier_init failed\n");
		return 1;
	}
	for (int p = 0; p < procs; p++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("trace_micro: fork");
			return 1;
		}
		if (pid == 0)
			run_process(p * threads, threads);
	}
	int bad = 0, st;
	for (int p = 0; p < procs; p++)
		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad = 1;
	if (bad) {
		fprintf(stderr, "trace_micro: a worker process failed\n");
		return 1;
	}

	double first = 0, last = 0, cpu = 0, per_thread[64 * 64];
	double calls_per_thread = (double)passes * npaths * 3;
	for (int w = 0; w < workers; w++) {
		struct result *r = &sh->res[w];
		if (r->err) {
			fprintf(stderr, "trace_micro: %s: %s\n", r->path, strerror(r->err));
			return 1;
		}
		if (w == 0 || r->t0 < first)
			first = r->t0;
		if (r->t1 > last)
			last = r->t1;
		per_thread[w] = (r->t1 - r->t0) / calls_per_thread;
		cpu += r->c1 - r->c0;
	}
	qsort(per_thread, workers, sizeof per_thread[0], cmp_double);
	cpu_set_t set;
	int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
	double calls = calls_per_thread * workers;
	double wall = last - first;
	int busy = workers < cpus ? workers : cpus;
	printf("paths %zu\nworkers %d\ncpus %d\ncalls %.0f\nwall_s %.6f\n", npaths, workers, cpus,
	       calls, wall / 1e9);
	printf("ns_per_call %.1f\n", wall * busy / calls);
	printf("thread_ns_per_call %.1f\n",
	       workers % 2 ? per_thread[workers / 2]
			   : (per_thread[workers / 2 - 1] + per_thread[workers / 2]) / 2);
	printf("cpu_ns_per_call %.1f\n", cpu / calls);
	return 0;
}
