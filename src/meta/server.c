/* The meta service on kiln's event loop (src/server): the loop accepts,
 * checks peers and handshakes; each JOB gets a thread of its own, which takes
 * a private filesystem context (unshare(CLONE_FS)) so that it can enter the
 * client's working directory and umask without touching the other jobs, and
 * runs meta_cli_main on the client's descriptors. The loop keeps reading the
 * connection meanwhile: CANCEL, or the client hanging up, cancels the job.
 * Each job thread holds its own duplicate of the connection, so the loop may
 * close its copy at any time and the answer still reaches the right client. */
#include "meta/server.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ipc/meta_proto.h"
#include "ipc/msg.h"
#include "meta/cache.h"
#include "meta/cli.h"
#include "meta/jobstream.h"
#include "server/ident.h"
#include "server/server.h"

#define MAX_ARGS 4096

struct service;

struct job {
	atomic_int refs;      /* the connection's slot and the job thread */
	atomic_int cancel;
	atomic_int broken;    /* a client pipe was closed: SIGPIPE in the client */
	atomic_int child;     /* fork mode: the child running the tools */
	struct service *s;
	int conn;             /* the thread's own duplicate of the connection */
	int cwd, fds[3];      /* from the client; -1 = not open there */
	uint32_t umask;
	int argc;
	char **argv;
	char *args;           /* the strings argv points into */
	int parsed;           /* this job parsed its binary */
	bool forked_parent;   /* fork mode, in the server: the child ran the tools */
	bool in_child;        /* fork mode: this is the child */
	int child_status;     /* fork mode: the child's exit status */
};

struct slot {
	bool used;
	struct job *job;
};

struct service {
	struct meta_cache *cache;
	const struct meta_server_config *cfg;
	pthread_mutex_t lock;
	pthread_cond_t changed; /* a job ended, or the server is stopping */
	uint64_t jobs, running, cancelled;
	struct timespec last_activity;
	bool stopping;
	struct slot *slots;
	size_t nslots;
};

static void job_release(struct job *j)
{
	if (atomic_fetch_sub(&j->refs, 1) != 1)
		return;
	if (j->conn >= 0)
		close(j->conn);
	if (j->cwd >= 0)
		close(j->cwd);
	for (int i = 0; i < 3; i++)
		if (j->fds[i] >= 0)
			close(j->fds[i]);
	free(j->argv);
	free(j->args);
	free(j);
}

static void job_cancel(struct job *j)
{
	atomic_store(&j->cancel, 1);
	pid_t c = atomic_load(&j->child);
	if (c > 0)
		kill(c, SIGKILL);
}

/* ---- the model hooks of meta_cli_main ---------------------------------- */

static int get_model(void *ctx, const char *path, const struct meta_options *opts,
		     struct meta_model **out, struct meta_err *err)
{
	struct job *j = ctx;
	int parsed = 0;
	int rc = meta_cache_get(j->s->cache, path, opts, out, err, &parsed);
	j->parsed |= parsed;
	if (rc || !j->s->cfg->fork_jobs)
		return rc;
	/* Fork mode: the tools run in a child of the warm server. The child
	 * returns the model and carries on in meta_cli_main; the server waits,
	 * then fails the lookup with its streams muted, so that meta_cli_main
	 * returns at once. */
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		j->in_child = true;
		return 0;
	}
	meta_cache_put(j->s->cache, *out);
	*out = NULL;
	j->forked_parent = true;
	atomic_store(&j->cancel, 1); /* mute this side: the child writes everything */
	int st = 0;
	if (pid > 0) {
		atomic_store(&j->child, pid);
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		atomic_store(&j->child, 0);
	}
	j->child_status = pid < 0 ? 1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	meta_set_err(err, "(forked)");
	return -1;
}

static void put_model(void *ctx, struct meta_model *m)
{
	struct job *j = ctx;
	meta_cache_put(j->s->cache, m);
}

/* ---- a job ------------------------------------------------------------- */

static int send_done(struct job *j, int status)
{
	struct kiln_meta_done d = { .status = status, .parsed = (uint32_t)j->parsed,
				    .sigpipe = (uint32_t)atomic_load(&j->broken) };
	return kiln_msg_send(j->conn, KILN_MSG_META_DONE, &d, sizeof d, NULL, 0, 0);
}

/* Runs the command line on the client's descriptors; the exit status. */
static int run_job(struct job *j)
{
	/* Our own cwd and umask: the client's, for this thread only. */
	if (unshare(CLONE_FS) < 0 || fchdir(j->cwd) < 0)
		return -1;
	umask((mode_t)j->umask);
	FILE *out = meta_job_stream(j->fds[1], &j->cancel, &j->broken, 1);
	j->fds[1] = -1;
	FILE *err = meta_job_stream(j->fds[2], &j->cancel, &j->broken, 0);
	j->fds[2] = -1;
	if (!out || !err) {
		if (out)
			fclose(out);
		if (err)
			fclose(err);
		return -1;
	}
	struct meta_cli_env env = {
		.out = out, .err = err, .dirfd = AT_FDCWD, .get_model = get_model,
		.put_model = put_model, .ctx = j, .cancel = &j->cancel,
	};
	int rc = meta_cli_main(j->argc, j->argv, &env);
	if (j->forked_parent)
		rc = j->child_status;
	if (fflush(out) != 0 && rc == 0) { /* as cmd_meta reports it */
		fprintf(err, "kiln meta: writing stdout: %s\n", strerror(errno));
		rc = 1;
	}
	fclose(out);
	fclose(err);
	if (j->in_child)
		_exit(rc);
	return rc;
}

static void *job_thread(void *arg)
{
	struct job *j = arg;
	struct service *s = j->s;
	bool was_cancelled = true;
	if (kiln_msg_send(j->conn, KILN_MSG_META_STARTED, NULL, 0, NULL, 0, 0) == 0) {
		int rc = atomic_load(&j->cancel) ? 1 : run_job(j);
		/* (read before DONE: the client hangs up once it has it) */
		was_cancelled = atomic_load(&j->cancel) && !atomic_load(&j->broken) && !j->forked_parent;
		if (rc >= 0)
			send_done(j, rc);
		/* rc < 0: the job could not start its streams or enter the
		 * client's directory: closing without DONE fails the client. */
	}
	close(j->conn);
	j->conn = -1;
	job_release(j);
	pthread_mutex_lock(&s->lock);
	s->running--;
	s->cancelled += was_cancelled;
	clock_gettime(CLOCK_MONOTONIC, &s->last_activity);
	pthread_cond_broadcast(&s->changed);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* Checks and unpacks a JOB message into a new job (taking the descriptors). */
static struct job *job_new(struct service *s, const void *payload, size_t len, int *fds, size_t nfds)
{
	struct kiln_meta_job h;
	if (len < sizeof h)
		return NULL;
	memcpy(&h, payload, sizeof h);
	size_t want = 1;
	for (int i = 0; i < 3; i++)
		want += (h.fdmask >> i) & 1;
	if (h.reserved || (h.fdmask & ~7u) || nfds != want || h.argc < 1 || h.argc > MAX_ARGS)
		return NULL;
	const char *p = (const char *)payload + sizeof h, *end = (const char *)payload + len;
	if (p == end || end[-1] != '\0')
		return NULL;
	struct job *j = calloc(1, sizeof *j);
	if (!j)
		return NULL;
	j->argv = calloc(h.argc + 1, sizeof *j->argv);
	j->args = malloc((size_t)(end - p));
	if (!j->argv || !j->args) {
		free(j->argv);
		free(j->args);
		free(j);
		return NULL;
	}
	memcpy(j->args, p, (size_t)(end - p));
	char *q = j->args, *qend = j->args + (end - p);
	for (uint32_t i = 0; i < h.argc; i++) {
		if (q >= qend) {
			free(j->argv);
			free(j->args);
			free(j);
			return NULL;
		}
		j->argv[i] = q;
		q += strlen(q) + 1;
	}
	if (q != qend) {
		free(j->argv);
		free(j->args);
		free(j);
		return NULL;
	}
	j->argc = (int)h.argc;
	j->umask = h.umask & 0777;
	j->s = s;
	j->conn = -1;
	j->cwd = fds[0];
	size_t k = 1;
	for (int i = 0; i < 3; i++)
		j->fds[i] = (h.fdmask >> i) & 1 ? fds[k++] : -1;
	atomic_init(&j->refs, 1);
	return j;
}

static int start_job(struct service *s, struct slot *sl, int conn, const void *payload, size_t len,
		     int *fds, size_t nfds)
{
	struct job *j = sl->job ? NULL : job_new(s, payload, len, fds, nfds);
	if (!j) {
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
		errno = EPROTO;
		return -1;
	}
	j->conn = fcntl(conn, F_DUPFD_CLOEXEC, 0);
	pthread_mutex_lock(&s->lock);
	bool stopping = s->stopping;
	pthread_mutex_unlock(&s->lock);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_t t;
	atomic_store(&j->refs, 2);
	if (j->conn < 0 || stopping || pthread_create(&t, &attr, job_thread, j) != 0) {
		/* Not started: the client sees the connection close before
		 * STARTED and runs the command itself. */
		pthread_attr_destroy(&attr);
		atomic_store(&j->refs, 1);
		job_release(j);
		errno = EPIPE;
		return -1;
	}
	pthread_attr_destroy(&attr);
	sl->job = j;
	pthread_mutex_lock(&s->lock);
	s->jobs++;
	s->running++;
	clock_gettime(CLOCK_MONOTONIC, &s->last_activity);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* ---- the service hooks -------------------------------------------------- */

static int svc_hello(void *ctx, pid_t pid, const char *cmdline, size_t len)
{
	(void)pid;
	(void)cmdline;
	(void)len;
	struct service *s = ctx;
	for (size_t i = 0; i < s->nslots; i++)
		if (!s->slots[i].used) {
			s->slots[i] = (struct slot){ .used = true };
			return (int)i;
		}
	size_t n = s->nslots ? 2 * s->nslots : 64;
	struct slot *sl = realloc(s->slots, n * sizeof *sl);
	if (!sl || n > (size_t)1 << 30)
		return -1;
	memset(sl + s->nslots, 0, (n - s->nslots) * sizeof *sl);
	s->slots = sl;
	int id = (int)s->nslots;
	s->nslots = n;
	s->slots[id].used = true;
	return id;
}

static void svc_closed(void *ctx, int client)
{
	struct service *s = ctx;
	struct slot *sl = &s->slots[client];
	if (sl->job) {
		job_cancel(sl->job); /* a no-op when it has finished */
		job_release(sl->job);
	}
	*sl = (struct slot){ 0 };
}

static void fill_stats(struct service *s, struct kiln_meta_stats *st)
{
	struct meta_cache_stats cs;
	meta_cache_get_stats(s->cache, &cs);
	pthread_mutex_lock(&s->lock);
	*st = (struct kiln_meta_stats){
		.pid = (uint64_t)getpid(), .jobs = s->jobs, .running = s->running,
		.cancelled = s->cancelled, .hits = cs.hits, .misses = cs.misses, .parses = cs.parses,
		.stale = cs.stale, .evictions = cs.evictions, .models = cs.models, .bytes = cs.bytes,
		.max_bytes = cs.max_bytes, .peak_bytes = cs.peak_bytes,
	};
	pthread_mutex_unlock(&s->lock);
}

static int svc_message(void *ctx, int client, int fd, const struct kiln_msg_hdr *h, const void *payload,
		       size_t len, int *fds, size_t nfds)
{
	struct service *s = ctx;
	struct slot *sl = &s->slots[client];
	if (h->type == KILN_MSG_META_JOB)
		return start_job(s, sl, fd, payload, len, fds, nfds);
	for (size_t i = 0; i < nfds; i++)
		close(fds[i]);
	if (nfds || len) {
		errno = EPROTO;
		return -1;
	}
	switch (h->type) {
	case KILN_MSG_META_CANCEL:
		if (sl->job)
			job_cancel(sl->job);
		return 0;
	case KILN_MSG_META_STATS: {
		struct kiln_meta_stats st;
		fill_stats(s, &st);
		return kiln_msg_send(fd, KILN_MSG_META_STATS, &st, sizeof st, NULL, 0, MSG_DONTWAIT);
	}
	case KILN_MSG_META_STOP: {
		struct kiln_meta_done d = { 0 };
		int rc = kiln_msg_send(fd, KILN_MSG_META_DONE, &d, sizeof d, NULL, 0, MSG_DONTWAIT);
		kill(getpid(), SIGTERM); /* the loop stops, then running jobs drain */
		return rc;
	}
	default:
		errno = EPROTO;
		return -1;
	}
}

/* ---- the idle timeout --------------------------------------------------- */

static void *idle_thread(void *arg)
{
	struct service *s = arg;
	pthread_mutex_lock(&s->lock);
	while (!s->stopping) {
		struct timespec now, until;
		clock_gettime(CLOCK_MONOTONIC, &now);
		until = s->last_activity;
		until.tv_sec += s->cfg->idle_timeout_s;
		if (!s->running && (now.tv_sec > until.tv_sec ||
				    (now.tv_sec == until.tv_sec && now.tv_nsec >= until.tv_nsec))) {
			kill(getpid(), SIGTERM);
			break;
		}
		/* the condition variable runs on CLOCK_REALTIME: wait a slice */
		struct timespec slice;
		clock_gettime(CLOCK_REALTIME, &slice);
		slice.tv_sec += 1;
		pthread_cond_timedwait(&s->changed, &s->lock, &slice);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* ---- the server process ------------------------------------------------- */

int meta_server_listen(const char *path, char *err, size_t errlen)
{
	struct stat st;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, errlen, "%s exists and is not a socket", path);
			return -1;
		}
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
		int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		int rc = fd < 0 ? -1 : connect(fd, (struct sockaddr *)&sa, sizeof sa);
		int e = errno;
		if (fd >= 0)
			close(fd);
		if (rc == 0) {
			snprintf(err, errlen, "a meta server is already listening on %s", path);
			return -1;
		}
		if (e != ECONNREFUSED) {
			snprintf(err, errlen, "cannot tell whether %s is in use: %s", path, strerror(e));
			return -1;
		}
		unlink(path); /* stale: its server is gone */
	}
	return kiln_server_listen(path, err, errlen);
}

static void report_ready(int fd, const char *msg)
{
	if (fd < 0)
		return;
	char buf[1100];
	int n = snprintf(buf, sizeof buf, "%s%s", msg ? "E" : "R", msg ? msg : "");
	if (write(fd, buf, (size_t)n) < 0) {
		/* the starter is gone: it will not wait for us */
	}
	close(fd);
}

int meta_server_main(const struct meta_server_config *cfg, int ready_fd, int lifeline_fd)
{
	char err[1024];
	int rc = 1;
	/* Before any thread exists: SIGTERM only through the loop's signalfd,
	 * and a client's closed pipe is an EPIPE, not our death. */
	sigset_t ss;
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &ss, NULL);
	signal(SIGPIPE, SIG_IGN);

	struct service s = { .cfg = cfg };
	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.changed, NULL);
	clock_gettime(CLOCK_MONOTONIC, &s.last_activity);
	int life[2] = { -1, -1 };
	int lfd = -1;
	pthread_t idle;
	bool idle_started = false;
	if (!(s.cache = meta_cache_new(cfg->max_bytes))) {
		report_ready(ready_fd, "out of memory");
		goto out;
	}
	if (lifeline_fd < 0) { /* none: one that never ends */
		if (pipe2(life, O_CLOEXEC) < 0) {
			snprintf(err, sizeof err, "pipe: %s", strerror(errno));
			report_ready(ready_fd, err);
			goto out;
		}
		lifeline_fd = life[0];
	}
	if ((lfd = meta_server_listen(cfg->socket, err, sizeof err)) < 0) {
		report_ready(ready_fd, err);
		goto out;
	}
	if (cfg->idle_timeout_s && pthread_create(&idle, NULL, idle_thread, &s) == 0)
		idle_started = true;
	size_t identlen;
	const unsigned char *ident = kiln_build_ident(&identlen);
	struct kiln_service svc = {
		.ctx = &s, .role = KILN_META_ROLE, .hello = svc_hello, .message_fds = svc_message,
		.closed = svc_closed, .ident = ident, .identlen = identlen, .name = "kiln meta",
	};
	report_ready(ready_fd, NULL);
	ready_fd = -1;
	char note[64];
	struct kiln_server_stats stats;
	if (kiln_server_run(lfd, lifeline_fd, &svc, note, sizeof note, &stats, err, sizeof err) < 0)
		fprintf(stderr, "kiln meta: server: %s\n", err);
	else
		rc = 0;
	/* Stop taking clients, then let the running jobs finish. */
	close(lfd);
	lfd = -1;
	unlink(cfg->socket);
	pthread_mutex_lock(&s.lock);
	s.stopping = true;
	pthread_cond_broadcast(&s.changed);
	while (s.running)
		pthread_cond_wait(&s.changed, &s.lock);
	pthread_mutex_unlock(&s.lock);
out:
	if (ready_fd >= 0)
		report_ready(ready_fd, "the server failed to start");
	if (idle_started)
		pthread_join(idle, NULL);
	if (lfd >= 0) {
		close(lfd);
		unlink(cfg->socket);
	}
	for (size_t i = 0; i < s.nslots; i++)
		if (s.slots[i].job)
			job_release(s.slots[i].job);
	free(s.slots);
	meta_cache_free(s.cache);
	if (life[0] >= 0) {
		close(life[0]);
		close(life[1]);
	}
	if (cfg->rundir)
		rmdir(cfg->rundir);
	pthread_mutex_destroy(&s.lock);
	pthread_cond_destroy(&s.changed);
	return rc;
}
