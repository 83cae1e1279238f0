/* The round trip of a forwarded job, in process: starts a meta server of
 * this build (a client and a server of different builds never talk) with
 * jobs on threads or forked from the warm server, warms it with one job,
 * then times N `kiln meta TOOL BINARY` through meta_forward() (connect,
 * handshake, job with its descriptors, STARTED, DONE), the job's output
 * going to /dev/null. Prints the median and the 90th percentile in
 * microseconds.
 *
 *   meta_rtt SOCKET thread|fork N TOOL BINARY */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "meta/forward.h"
#include "meta/server.h"

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: meta_rtt SOCKET thread|fork N TOOL BINARY\n");
		return 2;
	}
	struct meta_server_config cfg = { .socket = argv[1], .fork_jobs = !strcmp(argv[2], "fork") };
	int ready[2], life[2];
	if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(life, O_CLOEXEC) < 0)
		return 1;
	pid_t server = fork();
	if (server == 0) {
		close(ready[0]);
		close(life[1]);
		_exit(meta_server_main(&cfg, ready[1], life[0]));
	}
	close(ready[1]);
	close(life[0]);
	char c = 0;
	if (server < 0 || read(ready[0], &c, 1) != 1 || c != 'R') {
		fprintf(stderr, "meta_rtt: the server did not start\n");
		return 1;
	}
	int n = atoi(argv[3]);
	double *us = calloc((size_t)(n > 0 ? n : 1), sizeof *us);
	char *args[] = { "meta", argv[4], argv[5], NULL };
	int null = open("/dev/null", O_WRONLY), saved = dup(1);
	if (!us || n < 1 || null < 0 || saved < 0 || dup2(null, 1) < 0)
		return 1;
	if (meta_forward(argv[1], 3, args) != 0) /* warm: the parse */
		return 1;
	for (int i = 0; i < n; i++) {
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		int rc = meta_forward(argv[1], 3, args);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (rc != 0) {
			fprintf(stderr, "meta_rtt: job %d: status %d\n", i, rc);
			return 1;
		}
		us[i] = (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
	}
	dup2(saved, 1);
	close(life[1]);
	waitpid(server, NULL, 0);
	qsort(us, (size_t)n, sizeof *us, cmp);
	printf("%.1f %.1f\n", us[n / 2], us[(n * 9) / 10]);
	return 0;
}
