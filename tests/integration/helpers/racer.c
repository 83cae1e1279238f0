/* Check-then-use races, as an attacker runs them (issue 9, class 5): one
 * process keeps changing what a path names while another uses the path.
 *
 *   racer swap SECS A B          swaps names A and B (renameat2
 *                                RENAME_EXCHANGE) until SECS have passed
 *   racer blink SECS TARGET LINK makes LINK a symlink to TARGET, removes
 *                                it, again, for SECS
 *   racer read SECS PATH VIS HID opens and reads PATH (open) for SECS;
 *                                counts reads that start with VIS or HID
 *   racer fread SECS PATH VIS HID the same through fopen
 *   racer stat SECS PATH VINO HINO  stats PATH for SECS, by stat, fstatat
 *                                and statx in turn; counts results
 *                                whose inode is VINO (visible) or HINO
 *                                (hidden: its metadata revealed); a failed
 *                                call that changed the buffer counts as
 *                                other
 *   racer access SECS PATH       asks access(X_OK) of PATH for SECS, by
 *                                access, faccessat(AT_EACCESS) and eaccess in
 *                                turn: the visible file is not executable
 *                                (EACCES, counted visible), the hidden one is
 *                                (0, counted hidden)
 *   racer write SECS PATH CREAT  open(O_WRONLY|O_TRUNC[|O_CREAT]) + write
 *                                "racer\n" + close, for SECS
 *   racer run SECS PATH VIS HID  runs PATH (posix_spawn and fork+execve
 *                                by turns; PATH is a copy of racer, which
 *                                as `racer exe` prints the file it runs
 *                                from) and counts the runs of each copy (and
 *                                of runs refused with status 127)
 *   racer exe                    prints readlink(/proc/self/exe)
 *   racer whoami                 prints "comm=NAME exe=PATH" (its process name
 *                                and the file it runs from)
 *
 * The counters print as one line: "visible=N hidden=N ENOENT=N ..." (an
 * errno name for each failure seen). The swappers print "swaps=N".
 *
 * With RACER_STOP=FILE in the environment the pair ends together, after at
 * least SECS and at least RACER_MIN_SWAPS changes of the path (so a slow
 * machine gets a longer race, not a smaller one): the swapper creates FILE
 * when it has both (or 10 s after SECS, whatever it has), and the user goes
 * on past SECS until FILE exists. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The swapper's end: SECS passed and enough changes made (RACER_STOP). */
static int swapper_done(double end, long n)
{
	const char *stop = getenv("RACER_STOP");
	if (!stop)
		return now() >= end;
	const char *min = getenv("RACER_MIN_SWAPS");
	double t = now();
	if (t < end || (n < (min ? atol(min) : 0) && t < end + 10))
		return 0;
	int fd = open(stop, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
	return 1;
}

/* The user's end: SECS passed, and with RACER_STOP the swapper done (or
 * gone: at most 12 s past SECS). */
static int user_done(double end)
{
	const char *stop = getenv("RACER_STOP");
	double t = now();
	return t >= end && (!stop || access(stop, F_OK) == 0 || t >= end + 12);
}

#define MAXERR 134
static long visible, hidden, other, exit127, errs[MAXERR];

static void count_err(int e)
{
	errs[e > 0 && e < MAXERR ? e : 0]++;
}

static void count_bytes(const char *buf, long n, const char *vis, const char *hid)
{
	if (n >= (long)strlen(hid) && !strncmp(buf, hid, strlen(hid)))
		hidden++;
	else if (n >= (long)strlen(vis) && !strncmp(buf, vis, strlen(vis)))
		visible++;
	else
		other++;
}

static void report(void)
{
	printf("visible=%ld hidden=%ld other=%ld", visible, hidden, other);
	if (exit127)
		printf(" exit127=%ld", exit127);
	for (int e = 0; e < MAXERR; e++)
		if (errs[e])
			printf(" %s=%ld", e ? strerrorname_np(e) : "E?", errs[e]);
	printf("\n");
}

static int swap(double secs, const char *a, const char *b)
{
	long n = 0;
	double end = now() + secs;
	while (!swapper_done(end, n))
		for (int i = 0; i < 64; i++)
			if (syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, 2 /* RENAME_EXCHANGE */) == 0)
				n++;
	printf("swaps=%ld\n", n);
	return n ? 0 : 1;
}

static int blink(double secs, const char *target, const char *link)
{
	long n = 0;
	double end = now() + secs;
	while (!swapper_done(end, n))
		for (int i = 0; i < 64; i++) {
			if (symlink(target, link) == 0)
				n++;
			unlink(link);
		}
	printf("swaps=%ld\n", n);
	return n ? 0 : 1;
}

static int reader(double secs, const char *path, const char *vis, const char *hid, int use_stdio)
{
	char buf[256];
	double end = now() + secs;
	while (!user_done(end)) {
		long n;
		if (use_stdio) {
			FILE *f = fopen(path, "r");
			if (!f) {
				count_err(errno);
				continue;
			}
			n = (long)fread(buf, 1, sizeof buf, f);
			fclose(f);
		} else {
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd < 0) {
				count_err(errno);
				continue;
			}
			n = read(fd, buf, sizeof buf);
			close(fd);
		}
		count_bytes(buf, n, vis, hid);
	}
	report();
	return 0;
}

static int statter(double secs, const char *path, unsigned long long vis, unsigned long long hid)
{
	double end = now() + secs;
	for (unsigned i = 0; !user_done(end); i++) {
		unsigned long long ino;
		int r;
		struct stat st;
		struct statx sx;
		memset(&st, 0xa5, sizeof st);
		memset(&sx, 0xa5, sizeof sx);
		switch (i % 3) {
		case 0:
			r = stat(path, &st);
			ino = st.st_ino;
			break;
		case 1:
			r = fstatat(AT_FDCWD, path, &st, 0);
			ino = st.st_ino;
			break;
		default:
			r = statx(AT_FDCWD, path, 0, STATX_INO, &sx);
			ino = sx.stx_ino;
			break;
		}
		if (r != 0) {
			count_err(errno);
			const unsigned char *b = (i % 3 == 2) ? (void *)&sx : (void *)&st;
			size_t n = (i % 3 == 2) ? sizeof sx : sizeof st;
			while (n && b[n - 1] == 0xa5)
				n--;
			if (n)
				other++; /* what a refused file's stat read into it */
		} else if (ino == hid)
			hidden++;
		else if (ino == vis)
			visible++;
		else
			other++;
	}
	report();
	return 0;
}

static int accesser(double secs, const char *path)
{
	double end = now() + secs;
	for (unsigned i = 0; !user_done(end); i++) {
		int r = i % 3 == 0   ? access(path, X_OK)
			: i % 3 == 1 ? faccessat(AT_FDCWD, path, X_OK, AT_EACCESS)
				     : eaccess(path, X_OK);
		if (r == 0)
			hidden++;
		else if (errno == EACCES)
			visible++;
		else
			count_err(errno);
	}
	report();
	return 0;
}

static int writer(double secs, const char *path, int creat)
{
	double end = now() + secs;
	while (!user_done(end)) {
		int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC | (creat ? O_CREAT : 0), 0644);
		if (fd < 0) {
			count_err(errno);
			continue;
		}
		if (write(fd, "racer\n", 6) == 6)
			visible++;
		close(fd);
	}
	report();
	return 0;
}

static int runner(double secs, const char *path, const char *vis, const char *hid)
{
	char *argv[] = { (char *)path, (char *)"exe", NULL };
	double end = now() + secs;
	for (int i = 0; !user_done(end); i++) {
		int p[2];
		if (pipe2(p, O_CLOEXEC) < 0)
			return 1;
		pid_t pid;
		if (i % 2) {
			posix_spawn_file_actions_t fa;
			posix_spawn_file_actions_init(&fa);
			posix_spawn_file_actions_adddup2(&fa, p[1], 1);
			int e = posix_spawn(&pid, path, &fa, NULL, argv, environ);
			posix_spawn_file_actions_destroy(&fa);
			if (e) {
				count_err(e);
				close(p[0]);
				close(p[1]);
				continue;
			}
		} else {
			pid = fork();
			if (pid == 0) {
				dup2(p[1], 1);
				execve(path, argv, environ);
				_exit(100 + errno);
			}
		}
		close(p[1]);
		char buf[4096];
		long n = 0, r;
		while (n < (long)sizeof buf - 1 && (r = read(p[0], buf + n, sizeof buf - 1 - n)) > 0)
			n += r;
		close(p[0]);
		buf[n] = '\0';
		int st;
		waitpid(pid, &st, 0);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 127) {
			exit127++; /* refused in the new program, before main */
			continue;
		}
		if (WIFEXITED(st) && WEXITSTATUS(st) > 100) {
			count_err(WEXITSTATUS(st) - 100);
			continue;
		}
		/* the copy that ran says where it lives: match by file name */
		if (strstr(buf, hid))
			hidden++;
		else if (strstr(buf, vis))
			visible++;
		else
			other++;
	}
	report();
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "exe")) {
		char p[4096];
		long n = readlink("/proc/self/exe", p, sizeof p - 1);
		if (n < 0)
			return 2;
		p[n] = '\0';
		printf("%s\n", p);
		return 0;
	}
	if (argc == 2 && !strcmp(argv[1], "whoami")) {
		char p[4096], c[64];
		long n = readlink("/proc/self/exe", p, sizeof p - 1);
		int fd = open("/proc/self/comm", O_RDONLY);
		long m = fd >= 0 ? read(fd, c, sizeof c - 1) : -1;
		if (n < 0 || m <= 0)
			return 2;
		p[n] = '\0';
		c[m - 1] = '\0';
		printf("comm=%s exe=%s\n", c, p);
		return 0;
	}
	if (argc < 3)
		return 2;
	double secs = atof(argv[2]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[1], "swap") && argc == 5)
		return swap(secs, argv[3], argv[4]);
	if (!strcmp(argv[1], "blink") && argc == 5)
		return blink(secs, argv[3], argv[4]);
	if (!strcmp(argv[1], "read") && argc == 6)
		return reader(secs, argv[3], argv[4], argv[5], 0);
	if (!strcmp(argv[1], "fread") && argc == 6)
		return reader(secs, argv[3], argv[4], argv[5], 1);
	if (!strcmp(argv[1], "stat") && argc == 6)
		return statter(secs, argv[3], strtoull(argv[4], NULL, 10), strtoull(argv[5], NULL, 10));
	if (!strcmp(argv[1], "access") && argc == 4)
		return accesser(secs, argv[3]);
	if (!strcmp(argv[1], "write") && argc == 5)
		return writer(secs, argv[3], atoi(argv[4]));
	if (!strcmp(argv[1], "run") && argc == 6)
		return runner(secs, argv[3], argv[4], argv[5]);
	return 2;
}
