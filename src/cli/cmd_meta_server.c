/* kiln meta run [--max-memory N] [--] COMMAND...
 * kiln meta serve [--idle-timeout S] [--max-memory N] [--socket PATH] [--foreground]
 * kiln meta stats [--json]
 * kiln meta stop
 *
 * `run` starts a private meta server (a 0700 directory of its own), runs
 * COMMAND with KILN_META_SOCKET pointing at it, and stops the server when
 * the command ends; the server also stops when `run` dies (the lifeline
 * pipe), removing its socket and directory. `serve` starts one for a shell
 * session and prints the line that exports its socket. */
#include "cli/cmd_meta_server.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cmd_shm_demo.h" /* shm_parse_size */
#include "cli/read_all.h"
#include "common/cliopt.h"
#include "ipc/meta_proto.h"
#include "meta/forward.h"
#include "meta/server.h"

#define EXIT_KILN 125

struct opts {
	struct meta_server_config cfg;
	const char *socket;
	bool foreground, json;
	char **command;
};

enum { OPT_MAX_MEMORY = 1, OPT_IDLE_TIMEOUT, OPT_SOCKET, OPT_JOB_MODE, OPT_FOREGROUND, OPT_JSON };

static const struct cliopt run_opts[] = {
	{ "max-memory", 0, "SIZE", OPT_MAX_MEMORY, "evict idle models beyond SIZE (e.g. 512M, 2G)" },
	{ "job-mode", 0, "thread|fork", OPT_JOB_MODE, NULL }, /* for measurements */
	{ 0 },
};
static const struct cliopt serve_opts[] = {
	{ "idle-timeout", 0, "S", OPT_IDLE_TIMEOUT, "stop after S seconds without a job" },
	{ "max-memory", 0, "SIZE", OPT_MAX_MEMORY, "evict idle models beyond SIZE (e.g. 512M, 2G)" },
	{ "socket", 0, "PATH", OPT_SOCKET, "listen on PATH (default: $XDG_RUNTIME_DIR/kiln-meta/socket)" },
	{ "foreground", 0, NULL, OPT_FOREGROUND, "do not detach" },
	{ "job-mode", 0, "thread|fork", OPT_JOB_MODE, NULL },
	{ 0 },
};
static const struct cliopt stats_opts[] = {
	{ "json", 0, NULL, OPT_JSON, "machine-readable output" },
	{ 0 },
};
static const struct cliopt stop_opts[] = { { 0 } };

static void usage(FILE *out, const char *which, const struct cliopt *opts)
{
	static const struct {
		const char *name, *synopsis, *what;
	} cmds[] = {
		{ "run", "kiln meta run [OPTIONS] [--] COMMAND [ARGS...]",
		  "Runs COMMAND with a private meta server: every 'kiln meta' it starts is\n"
		  "forwarded to the server, which parses each binary once (docs/meta-server.md)." },
		{ "serve", "kiln meta serve [OPTIONS]",
		  "Starts a meta server for a shell session and prints the line that exports\n"
		  "its socket: eval \"$(kiln meta serve)\"." },
		{ "stats", "kiln meta stats [--json]", "The counters of the server in $KILN_META_SOCKET." },
		{ "stop", "kiln meta stop", "Stops the server in $KILN_META_SOCKET once its jobs are done." },
	};
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
		if (!strcmp(which, cmds[i].name))
			fprintf(out, "usage: %s\n\n%s\n\noptions:\n", cmds[i].synopsis, cmds[i].what);
	cliopt_print_options(out, opts);
}

/* Options of the server command argv[0]. 0 to go on, 1 when --help or
 * --version was answered, else the usage error's exit status. */
static int parse_opts(int argc, char **argv, struct opts *o, const struct cliopt *opts, bool command)
{
	struct cliparse p;
	cliopt_init(&p, "kiln meta", opts, argc, argv, command ? CLIOPT_IN_ORDER : CLIOPT_PERMUTE,
		    stderr);
	for (int id; (id = cliopt_next(&p)) != CLIOPT_END;) {
		const char *v = p.value;
		switch (id) {
		case CLIOPT_ERROR:
			return CLIOPT_EXIT_USAGE;
		case CLIOPT_HELP:
			usage(stdout, argv[0], opts);
			return 1;
		case CLIOPT_VERSION:
			cliopt_print_version(stdout);
			return 1;
		case CLIOPT_ARG:
			return cliopt_usage(&p, "%s: unexpected argument '%s'", argv[0], v);
		case OPT_MAX_MEMORY:
			if (shm_parse_size(v, &o->cfg.max_bytes) || !o->cfg.max_bytes)
				return cliopt_usage(&p, "%s: --max-memory: '%s' is not a size (e.g. 512M, 2G)",
						    argv[0], v);
			break;
		case OPT_IDLE_TIMEOUT: {
			char *end;
			unsigned long sec = strtoul(v, &end, 10);
			if (*end || end == v || sec > 1000000)
				return cliopt_usage(&p, "%s: --idle-timeout: '%s' is not a number of seconds",
						    argv[0], v);
			o->cfg.idle_timeout_s = (unsigned)sec;
			break;
		}
		case OPT_SOCKET: o->socket = v; break;
		case OPT_JOB_MODE:
			if (strcmp(v, "thread") && strcmp(v, "fork"))
				return cliopt_usage(&p, "%s: --job-mode is thread or fork", argv[0]);
			o->cfg.fork_jobs = !strcmp(v, "fork");
			break;
		case OPT_FOREGROUND: o->foreground = true; break;
		case OPT_JSON: o->json = true; break;
		}
	}
	if (command) {
		o->command = cliopt_rest(&p);
		if (!o->command[0])
			return cliopt_usage(&p, "%s: no command given", argv[0]);
	}
	return 0;
}

/* Forks the server. In the child: the server, until it ends. In the parent:
 * waits for it to listen; returns its pid, or -1 after printing why not. */
static pid_t start_server(const struct meta_server_config *cfg, int life_rd, int life_wr, bool detach,
			  const char *who)
{
	int ready[2];
	if (pipe2(ready, O_CLOEXEC) < 0) {
		fprintf(stderr, "kiln meta %s: pipe: %s\n", who, strerror(errno));
		return -1;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "kiln meta %s: cannot start the server: %s\n", who, strerror(errno));
		close(ready[0]);
		close(ready[1]);
		return -1;
	}
	if (pid == 0) {
		/* The terminal's signals are the command's; the server ends by
		 * its lifeline, SIGTERM or STOP. */
		signal(SIGINT, SIG_IGN);
		signal(SIGQUIT, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		close(ready[0]);
		if (life_wr >= 0)
			close(life_wr);
		if (detach)
			setsid();
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			if (detach)
				dup2(null, 2);
			close(null);
		}
		_exit(meta_server_main(cfg, ready[1], life_rd));
	}
	close(ready[1]);
	char msg[1200];
	size_t got = cli_read_all(ready[0], msg, sizeof msg);
	close(ready[0]);
	if (got == 0 || msg[0] != 'R') {
		waitpid(pid, NULL, 0);
		fprintf(stderr, "kiln meta %s: the meta server failed to start%s%s\n", who, got > 1 ? ": " : "",
			got > 1 ? msg + 1 : "");
		return -1;
	}
	return pid;
}

static volatile sig_atomic_t command_pid;

static void forward_signal(int sig)
{
	if (command_pid > 0)
		kill(command_pid, sig);
}

int cmd_meta_run(int argc, char **argv)
{
	struct opts o = { 0 };
	int rc = parse_opts(argc, argv, &o, run_opts, true);
	if (rc)
		return rc == 1 ? 0 : rc;
	char dir[PATH_MAX], sock[PATH_MAX];
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof dir, "%s/kiln-meta.XXXXXX", tmp && tmp[0] == '/' ? tmp : "/tmp");
	if (!mkdtemp(dir)) { /* mode 0700 */
		fprintf(stderr, "kiln meta run: cannot create a run directory %s: %s\n", dir, strerror(errno));
		return EXIT_KILN;
	}
	if ((size_t)snprintf(sock, sizeof sock, "%s/socket", dir) >= sizeof sock) {
		fprintf(stderr, "kiln meta run: run directory path %s is too long\n", dir);
		rmdir(dir);
		return EXIT_KILN;
	}
	o.cfg.socket = sock;
	o.cfg.rundir = dir;
	int life[2];
	if (pipe2(life, O_CLOEXEC) < 0) {
		fprintf(stderr, "kiln meta run: pipe: %s\n", strerror(errno));
		rmdir(dir);
		return EXIT_KILN;
	}
	pid_t server = start_server(&o.cfg, life[0], life[1], false, "run");
	close(life[0]);
	if (server < 0) {
		close(life[1]);
		rmdir(dir);
		return EXIT_KILN;
	}

	/* The command shares our terminal: ^C reaches it (and us, who wait);
	 * a SIGTERM or SIGHUP sent to us is passed on. */
	struct sigaction ign = { .sa_handler = SIG_IGN }, fwd = { .sa_handler = forward_signal }, old_int,
			 old_quit;
	sigemptyset(&ign.sa_mask);
	sigemptyset(&fwd.sa_mask);
	sigaction(SIGINT, &ign, &old_int);
	sigaction(SIGQUIT, &ign, &old_quit);
	sigaction(SIGTERM, &fwd, NULL);
	sigaction(SIGHUP, &fwd, NULL);
	pid_t cmd = fork();
	if (cmd == 0) {
		sigaction(SIGINT, &old_int, NULL);
		sigaction(SIGQUIT, &old_quit, NULL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		if (setenv(KILN_ENV_META_SOCKET, sock, 1) < 0)
			_exit(EXIT_KILN);
		execvp(o.command[0], o.command);
		int e = errno;
		fprintf(stderr, "kiln meta run: cannot run %s: %s\n", o.command[0], strerror(e));
		_exit(e == ENOENT ? 127 : 126);
	}
	int status = EXIT_KILN;
	if (cmd < 0) {
		fprintf(stderr, "kiln meta run: cannot run %s: %s\n", o.command[0], strerror(errno));
	} else {
		command_pid = cmd;
		int st;
		while (waitpid(cmd, &st, 0) < 0 && errno == EINTR)
			;
		command_pid = 0;
		status = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
	}
	close(life[1]); /* the server stops, lets running jobs finish, cleans up */
	while (waitpid(server, NULL, 0) < 0 && errno == EINTR)
		;
	rmdir(dir);
	return status;
}

/* The default socket of `serve`: in a 0700 directory of ours. */
static int default_socket(char *buf, size_t len)
{
	char dir[PATH_MAX];
	const char *rt = getenv("XDG_RUNTIME_DIR");
	if (rt && rt[0] == '/')
		snprintf(dir, sizeof dir, "%s/kiln-meta", rt);
	else
		snprintf(dir, sizeof dir, "/tmp/kiln-meta-%ld", (long)getuid());
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		fprintf(stderr, "kiln meta serve: cannot create %s: %s\n", dir, strerror(errno));
		return -1;
	}
	struct stat st;
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077)) {
		fprintf(stderr, "kiln meta serve: %s is not a private directory of this user (mode 0700); "
				"use --socket PATH\n", dir);
		return -1;
	}
	if ((size_t)snprintf(buf, len, "%s/socket", dir) >= len) {
		fprintf(stderr, "kiln meta serve: %s is too long a path\n", dir);
		return -1;
	}
	return 0;
}

int cmd_meta_serve(int argc, char **argv)
{
	struct opts o = { 0 };
	int rc = parse_opts(argc, argv, &o, serve_opts, false);
	if (rc)
		return rc == 1 ? 0 : rc;
	char sock[PATH_MAX];
	if (o.socket)
		snprintf(sock, sizeof sock, "%s", o.socket);
	else if (default_socket(sock, sizeof sock) < 0)
		return EXIT_KILN;
	o.cfg.socket = sock;
	if (o.foreground) {
		int ready[2];
		if (pipe2(ready, O_CLOEXEC) < 0)
			return EXIT_KILN;
		/* Announce once listening: the server writes "R" (or "E" and
		 * why not) into a pipe that a second process reads. */
		pid_t pid = fork();
		if (pid == 0) {
			close(ready[1]);
			char msg[1200];
			ssize_t n = read(ready[0], msg, sizeof msg - 1);
			msg[n > 0 ? n : 0] = '\0';
			if (n > 0 && msg[0] == 'R')
				printf("%s=%s; export %s\n", KILN_ENV_META_SOCKET, sock, KILN_ENV_META_SOCKET);
			else
				fprintf(stderr, "kiln meta serve: the meta server failed to start%s%s\n",
					n > 1 ? ": " : "", n > 1 ? msg + 1 : "");
			fflush(stdout);
			_exit(0);
		}
		close(ready[0]);
		rc = meta_server_main(&o.cfg, ready[1], -1);
		if (pid > 0)
			waitpid(pid, NULL, 0);
		return rc ? EXIT_KILN : 0;
	}
	if (start_server(&o.cfg, -1, -1, true, "serve") < 0)
		return EXIT_KILN;
	printf("%s=%s; export %s\n", KILN_ENV_META_SOCKET, sock, KILN_ENV_META_SOCKET);
	return 0;
}

/* Connects to the server in KILN_META_SOCKET and makes one request per
 * (type, answer type, answer buffer) triple, in order. 0, or 1 after a
 * message. */
struct request {
	unsigned type, want;
	void *buf;
	size_t len;
};

static int request_env(const char *who, const struct request *rq, size_t n)
{
	const char *sock = getenv(KILN_ENV_META_SOCKET);
	if (!sock || !*sock) {
		fprintf(stderr, "kiln meta %s: %s is not set (start a server with kiln meta serve)\n", who,
			KILN_ENV_META_SOCKET);
		return 1;
	}
	char err[1200];
	int fd = meta_connect(sock, err, sizeof err);
	for (size_t i = 0; fd >= 0 && i < n; i++)
		if (meta_request(fd, rq[i].type, rq[i].want, rq[i].buf, rq[i].len, err, sizeof err) < 0) {
			close(fd);
			fd = -1;
		}
	if (fd < 0) {
		fprintf(stderr, "kiln meta %s: %s\n", who, err);
		return 1;
	}
	close(fd);
	return 0;
}

int cmd_meta_stats(int argc, char **argv)
{
	struct opts o = { 0 };
	int rc = parse_opts(argc, argv, &o, stats_opts, false);
	if (rc)
		return rc == 1 ? 0 : rc;
	struct kiln_meta_stats st;
	struct request rq = { KILN_MSG_META_STATS, KILN_MSG_META_STATS, &st, sizeof st };
	if (request_env("stats", &rq, 1))
		return 1;
	const struct { const char *name; uint64_t v; } f[] = {
		{ "pid", st.pid }, { "jobs", st.jobs }, { "running", st.running },
		{ "cancelled", st.cancelled }, { "hits", st.hits }, { "misses", st.misses },
		{ "parses", st.parses }, { "stale", st.stale }, { "evictions", st.evictions },
		{ "models", st.models }, { "bytes", st.bytes }, { "peak_bytes", st.peak_bytes },
		{ "max_bytes", st.max_bytes },
	};
	size_t n = sizeof f / sizeof f[0];
	for (size_t i = 0; i < n; i++) {
		if (o.json)
			printf("%s\"%s\": %" PRIu64 "%s", i ? " " : "{", f[i].name, f[i].v, i + 1 < n ? "," : "}\n");
		else
			printf("%-11s %" PRIu64 "\n", f[i].name, f[i].v);
	}
	return 0;
}

/* Whether PID is gone (or a zombie nobody has reaped yet). */
static bool process_gone(pid_t pid)
{
	char path[64], buf[256];
	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return true;
	bool zombie = false;
	if (fgets(buf, sizeof buf, f)) {
		const char *p = strrchr(buf, ')');
		zombie = p && (p[2] == 'Z' || p[2] == 'X');
	}
	fclose(f);
	return zombie;
}

int cmd_meta_stop(int argc, char **argv)
{
	struct opts o = { 0 };
	int rc = parse_opts(argc, argv, &o, stop_opts, false);
	if (rc)
		return rc == 1 ? 0 : rc;
	struct kiln_meta_stats st;
	struct kiln_meta_done d;
	struct request rq[] = { { KILN_MSG_META_STATS, KILN_MSG_META_STATS, &st, sizeof st },
				{ KILN_MSG_META_STOP, KILN_MSG_META_DONE, &d, sizeof d } };
	if (request_env("stop", rq, 2))
		return 1;
	/* It drains its running jobs first: wait for it, within reason. */
	for (int i = 0; i < 6000 && !process_gone((pid_t)st.pid); i++)
		nanosleep(&(struct timespec){ .tv_nsec = 10000000 }, NULL);
	return 0;
}
