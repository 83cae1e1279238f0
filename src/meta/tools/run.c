/* Running several tools over one model, concurrently when their outputs are
 * separate streams: as many threads as there are CPUs (at most one per job),
 * each taking the next job not yet started. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "meta/tools/tool.h"

struct pool {
	struct meta_model *m;
	struct meta_job *jobs;
	size_t n;
	atomic_size_t next;
};

static void *worker(void *p)
{
	struct pool *pl = p;
	for (;;) {
		size_t i = atomic_fetch_add(&pl->next, 1);
		if (i >= pl->n)
			return NULL;
		struct meta_job *j = &pl->jobs[i];
		j->rc = j->tool->run(pl->m, j->out, j->fmt, &j->err);
	}
}

int meta_run_jobs(struct meta_model *m, struct meta_job *jobs, size_t n, int parallel)
{
	struct pool pl = { .m = m, .jobs = jobs, .n = n };
	atomic_init(&pl.next, 0);
	long cpus = parallel ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
	size_t nthreads = cpus > 1 ? (size_t)cpus : 1;
	if (nthreads > n)
		nthreads = n;
	pthread_t *threads = nthreads > 1 ? calloc(nthreads - 1, sizeof *threads) : NULL;
	size_t started = 0;
	for (size_t t = 0; threads && t + 1 < nthreads; t++)
		if (pthread_create(&threads[started], NULL, worker, &pl) == 0)
			started++;
	worker(&pl); /* this thread works too; jobs no thread took run here */
	for (size_t t = 0; t < started; t++)
		pthread_join(threads[t], NULL);
	free(threads);
	int rc = 0;
	for (size_t i = 0; i < n; i++)
		rc |= jobs[i].rc;
	return rc ? -1 : 0;
}
