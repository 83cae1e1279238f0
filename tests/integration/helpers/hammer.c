/* Asks about the same paths over and over from several threads, as a busy
 * build does, and says whether each path always got the same answer.
 *
 *   hammer THREADS ROUNDS PATH...
 *
 * Each thread, ROUNDS times, for every PATH (starting at a different one per
 * thread): stat, lstat, access(R_OK), open(O_RDONLY) + close, and for a
 * directory a full readdir. At the end one line per path:
 *   "PATH stat=E lstat=E open=E entries=N" (E: OK or the errno value, N: the
 *   entries a listing returned, -1 if not a directory), or
 *   "PATH INCONSISTENT ..." when two calls of one kind disagreed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAXP 256

struct answer {
	int stat_e, lstat_e, open_e, entries;
};

static int npaths, rounds;
static char **paths;
static struct answer first[MAXP];
static int seen[MAXP], bad[MAXP];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int err_of(int r)
{
	return r < 0 ? errno : 0;
}

static void one(int i)
{
	struct stat st;
	struct answer a;
	a.stat_e = err_of(stat(paths[i], &st));
	a.lstat_e = err_of(lstat(paths[i], &st));
	int fd = open(paths[i], O_RDONLY | O_CLOEXEC);
	a.open_e = err_of(fd);
	if (fd >= 0)
		close(fd);
	a.entries = -1;
	DIR *d = opendir(paths[i]);
	if (d) {
		a.entries = 0;
		while (readdir(d))
			a.entries++;
		closedir(d);
	}
	pthread_mutex_lock(&lock);
	if (!seen[i]) {
		first[i] = a;
		seen[i] = 1;
	} else if (first[i].stat_e != a.stat_e || first[i].lstat_e != a.lstat_e ||
		   first[i].open_e != a.open_e || first[i].entries != a.entries) {
		bad[i] = 1;
	}
	pthread_mutex_unlock(&lock);
}

static void *worker(void *arg)
{
	int start = (int)(long)arg;
	for (int r = 0; r < rounds; r++)
		for (int k = 0; k < npaths; k++)
			one((start + k) % npaths);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: hammer THREADS ROUNDS PATH...\n");
		return 2;
	}
	int threads = atoi(argv[1]);
	rounds = atoi(argv[2]);
	paths = argv + 3;
	npaths = argc - 3 > MAXP ? MAXP : argc - 3;
	pthread_t t[64];
	if (threads < 1 || threads > 64)
		return 2;
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)(long)(i * 7));
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < npaths; i++)
		printf("%s %sstat=%d lstat=%d open=%d entries=%d\n", paths[i], bad[i] ? "INCONSISTENT " : "",
		       first[i].stat_e, first[i].lstat_e, first[i].open_e, first[i].entries);
	return 0;
}
