/* The preload library's client (src/trace/client.c) against a tiny trace
 * server running in a child process: verdicts, batched directory questions
 * split over several messages, many threads sharing the lock-free connection
 * pool (more threads than pooled connections), kiln's fds, fork, and failing
 * closed when the server is gone.
 *
 * The client reads KILN_SOCKET once at start-up (as in a traced process), so
 * main() starts the server and re-executes this program with it set. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ipc/proto.h"
#include "trace/kt.h"
#include "trace/verdict.h"

/* ---- the server (child process) -------------------------------------- */

static int verdict_for(const char *p, size_t n)
{
	if (n >= 7 && !memcmp(p + n - 7, "/hidden", 7))
		return KILN_V_HIDE;
	if (n >= 7 && !memcmp(p + n - 7, "/denied", 7))
		return KILN_V_DENY;
	return KILN_V_ALLOW;
}

static void *serve(void *arg)
{
	int c = (int)(intptr_t)arg;
	static __thread char buf[KILN_MSG_MAX];
	char out[KILN_MSG_MAX];
	for (;;) {
		ssize_t n = recv(c, buf, sizeof buf, 0);
		if (n < (ssize_t)sizeof(struct kiln_msg_hdr))
			break;
		struct kiln_msg_hdr h;
		memcpy(&h, buf, sizeof h);
		char *body = buf + sizeof h;
		struct kiln_msg_hdr oh = { 0, 0, 0 };
		size_t olen = 0;
		if (h.type == KILN_MSG_HELLO) {
			struct kiln_hello_ok ok = { KILN_PROTO_MAGIC, KILN_PROTO_VERSION, 0 };
			oh.type = KILN_MSG_HELLO_OK;
			memcpy(out + sizeof oh, &ok, sizeof ok);
			olen = sizeof ok;
		} else if (h.type == KILN_MSG_QUERY) {
			struct kiln_query q;
			memcpy(&q, body, sizeof q);
			struct kiln_verdict_msg v = { (uint32_t)verdict_for(body + sizeof q, q.pathlen) };
			oh.type = KILN_MSG_VERDICT;
			memcpy(out + sizeof oh, &v, sizeof v);
			olen = sizeof v;
		} else if (h.type == KILN_MSG_QUERY_DIR) {
			struct kiln_query_dir qd;
			memcpy(&qd, body, sizeof qd);
			size_t at = sizeof qd + qd.dirlen;
			struct kiln_verdict_dir vd = { qd.count };
			memcpy(out + sizeof oh, &vd, sizeof vd);
			for (uint32_t i = 0; i < qd.count; i++) {
				uint16_t l;
				memcpy(&l, body + at, 2);
				out[sizeof oh + sizeof vd + i] = body[at + 2] == 'h';
				at += 2 + l;
			}
			oh.type = KILN_MSG_VERDICT_DIR;
			olen = sizeof vd + qd.count;
		} else {
			continue; /* EVENT: no answer */
		}
		oh.len = (uint32_t)olen;
		memcpy(out, &oh, sizeof oh);
		if (send(c, out, sizeof oh + olen, MSG_NOSIGNAL) < 0)
			break;
	}
	close(c);
	return NULL;
}

static void run_server(int ls)
{
	for (;;) {
		int c = accept(ls, NULL, NULL);
		if (c < 0)
			continue;
		pthread_t t;
		pthread_create(&t, NULL, serve, (void *)(intptr_t)c);
		pthread_detach(t);
	}
}

/* ---- tests --------------------------------------------------------------- */

static void test_verdicts(void **state)
{
	(void)state;
	assert_int_equal(kiln_ask("/x/ok", KILN_A_READ, 0), KILN_V_ALLOW);
	assert_int_equal(kiln_ask("/x/hidden", KILN_A_STAT, 0), KILN_V_HIDE);
	assert_int_equal(kiln_ask("/x/denied", KILN_A_WRITE, KILN_Q_NOFOLLOW), KILN_V_DENY);
	kiln_event(KILN_E_SETUID_EXEC, "/usr/bin/su");
	assert_int_equal(kiln_ask("/x/ok", KILN_A_READ, 0), KILN_V_ALLOW);
}

static void test_dir_batches(void **state)
{
	(void)state;
	enum { N = 3000 };
	static char store[N][200];
	static const char *names[N];
	static unsigned char hidden[N];
	for (int i = 0; i < N; i++) {
		/* long names: more than one message is needed */
		memset(store[i], 'n', 150);
		store[i][0] = (i % 3 == 0) ? 'h' : 'v';
		snprintf(store[i] + 150, 50, "%d", i);
		names[i] = store[i];
	}
	assert_int_equal(kiln_ask_dir("/some/dir", names, N, hidden), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(hidden[i], i % 3 == 0);
}

static void *hammer(void *arg)
{
	(void)arg;
	for (int i = 0; i < 300; i++) {
		if (kiln_ask("/t/hidden", KILN_A_STAT, 0) != KILN_V_HIDE)
			return (void *)1;
		if (kiln_ask("/t/ok", KILN_A_STAT, 0) != KILN_V_ALLOW)
			return (void *)1;
	}
	return NULL;
}

static void test_threads_share_the_pool(void **state)
{
	(void)state;
	enum { T = 16 }; /* twice the pool: some questions go over transient connections */
	pthread_t t[T];
	for (int i = 0; i < T; i++)
		assert_int_equal(pthread_create(&t[i], NULL, hammer, NULL), 0);
	for (int i = 0; i < T; i++) {
		void *r;
		pthread_join(t[i], &r);
		assert_null(r);
	}
}

static void test_kiln_fds(void **state)
{
	(void)state;
	int fds[KT_MAX_KILN_FDS];
	int n = kt_kiln_fds(fds);
	assert_true(n >= 1);
	for (int i = 0; i < n; i++) {
		assert_true(fds[i] >= 100);
		assert_true(kt_is_kiln_fd(fds[i]));
		assert_true(fcntl(fds[i], F_GETFD) & FD_CLOEXEC);
		if (i)
			assert_true(fds[i] > fds[i - 1]);
	}
	assert_false(kt_is_kiln_fd(0));
	/* dup2 is about to reuse the first one's number: it moves away */
	int moved = fds[0];
	assert_int_equal(kt_release_fd_number(moved), 0);
	assert_false(kt_is_kiln_fd(moved));
	assert_int_equal(kiln_ask("/x/hidden", KILN_A_STAT, 0), KILN_V_HIDE);
}

static void test_fork_child_reconnects(void **state)
{
	(void)state;
	pid_t pid = fork();
	if (pid == 0) {
		kt_client_after_fork();
		int ok = kt_kiln_fds((int[KT_MAX_KILN_FDS]){ 0 }) == 0 &&
			 kiln_ask("/c/hidden", KILN_A_STAT, 0) == KILN_V_HIDE &&
			 kt_kiln_fds((int[KT_MAX_KILN_FDS]){ 0 }) == 1;
		_exit(ok ? 0 : 1);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* a child that did not go through the fork hook: transient connections */
	pid = fork();
	if (pid == 0)
		_exit(kiln_ask("/c/denied", KILN_A_WRITE, 0) == KILN_V_DENY ? 0 : 1);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void test_server_gone_fails_closed(void **state)
{
	(void)state;
	pid_t server = (pid_t)atoi(getenv("KT_TEST_SERVER_PID"));
	kill(server, SIGKILL);
	waitpid(server, NULL, 0);
	assert_int_equal(kiln_ask("/x/ok", KILN_A_READ, 0), KILN_V_ERROR);
	const char *names[] = { "a" };
	unsigned char hidden[1];
	assert_int_equal(kiln_ask_dir("/x", names, 1, hidden), -1);
}

/* Every variable kiln puts back into exec environments is captured at
 * start-up (the constructor skips entries by their first letter: a name
 * that did not start with 'L' or 'K' would be lost), and nothing else is. */
static const char *const kept_env[] = {
	"LD_PRELOAD=/k/lib.so", "KILN_SOCKET=/k/s", "KILN_PRELOAD=/k/p", "KILN_CACHE=/k/c",
	"KILN_RUN_DIR=/k", "KILN_NAMESPACES=allow", "KILN_TRACE_MARKS=0",
};
#define NKEPT_ENV (sizeof kept_env / sizeof kept_env[0])

static int check_captured_env(void)
{
	size_t n;
	const char *const *all = kt_env_all(&n);
	if (n != NKEPT_ENV)
		return 1;
	for (size_t i = 0; i < NKEPT_ENV; i++) {
		const char *eq = strchr(kept_env[i], '=');
		char name[64];
		snprintf(name, sizeof name, "%.*s", (int)(eq - kept_env[i]), kept_env[i]);
		const char *v = kt_env(name);
		if (!v || strcmp(v, eq + 1) != 0 || strcmp(all[i], kept_env[i]) != 0)
			return 1;
	}
	return kt_env("KILN_OTHER") != NULL || kt_env("LD_LIBRARY_PATH") != NULL;
}

static void test_every_kept_variable_is_captured(void **state)
{
	(void)state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *envp[NKEPT_ENV + 4];
		size_t k = 0;
		envp[k++] = "A_FIRST=1";
		for (size_t i = 0; i < NKEPT_ENV; i++)
			envp[k++] = (char *)kept_env[i];
		envp[k++] = "LD_LIBRARY_PATH=/x";
		envp[k++] = "KILN_OTHER=1";
		envp[k] = NULL;
		char *argv[] = { "test_trace_client", "--check-captured-env", NULL };
		execve("/proc/self/exe", argv, envp);
		_exit(2);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--check-captured-env"))
		return check_captured_env();
	if (!getenv("KT_TEST_SERVER_PID")) {
		char dir[] = "/tmp/kiln-client-test-XXXXXX";
		if (!mkdtemp(dir))
			return 1;
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		snprintf(sa.sun_path, sizeof sa.sun_path, "%s/sock", dir);
		int ls = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(ls, 64) < 0)
			return 1;
		pid_t pid = fork();
		if (pid == 0)
			run_server(ls);
		close(ls);
		char pidstr[16];
		snprintf(pidstr, sizeof pidstr, "%d", (int)pid);
		setenv("KILN_SOCKET", sa.sun_path, 1);
		setenv("KT_TEST_SERVER_PID", pidstr, 1);
		setenv("KT_TEST_DIR", dir, 1);
		execv("/proc/self/exe", argv);
		return 1;
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verdicts),
		cmocka_unit_test(test_dir_batches),
		cmocka_unit_test(test_threads_share_the_pool),
		cmocka_unit_test(test_kiln_fds),
		cmocka_unit_test(test_fork_child_reconnects),
		cmocka_unit_test(test_server_gone_fails_closed),
		cmocka_unit_test(test_every_kept_variable_is_captured),
	};
	int r = cmocka_run_group_tests(tests, NULL, NULL);
	char path[200];
	snprintf(path, sizeof path, "%s/sock", getenv("KT_TEST_DIR"));
	unlink(path);
	rmdir(getenv("KT_TEST_DIR"));
	return r;
}
