/* Running several tools over one model, concurrently when their outputs are
 * separate streams. */
#include <pthread.h>
#include <stdlib.h>

#include "meta/tools/tool.h"

struct thread_arg {
	struct meta_model *m;
	struct meta_job *job;
};

static void *run_one(void *p)
{
	struct thread_arg *a = p;
	a->job->rc = a->job->tool->run(a->m, a->job->out, a->job->fmt, &a->job->err);
	return NULL;
}

int meta_run_jobs(struct meta_model *m, struct meta_job *jobs, size_t n, int parallel)
{
	int rc = 0;
	pthread_t *threads = parallel && n > 1 ? calloc(n, sizeof *threads) : NULL;
	struct thread_arg *args = threads ? calloc(n, sizeof *args) : NULL;
	char *started = threads ? calloc(n, 1) : NULL;
	if (threads && args && started) {
		/* the first job runs on this thread, the rest on their own */
		for (size_t i = 1; i < n; i++) {
			args[i] = (struct thread_arg){ m, &jobs[i] };
			started[i] = pthread_create(&threads[i], NULL, run_one, &args[i]) == 0;
		}
		args[0] = (struct thread_arg){ m, &jobs[0] };
		run_one(&args[0]);
		for (size_t i = 1; i < n; i++) {
			if (started[i])
				pthread_join(threads[i], NULL);
			else
				run_one(&args[i]); /* could not start a thread: run it here */
		}
	} else {
		for (size_t i = 0; i < n; i++)
			jobs[i].rc = jobs[i].tool->run(m, jobs[i].out, jobs[i].fmt, &jobs[i].err);
	}
	free(threads);
	free(args);
	free(started);
	for (size_t i = 0; i < n; i++)
		rc |= jobs[i].rc;
	return rc ? -1 : 0;
}
