#include "trace/service/rundir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <unistd.h>

#include "ipc/proto.h"

/* A directory on tmpfs that this user may create entries in: owned by us
 * and not writable by others ($XDG_RUNTIME_DIR), or sticky (/dev/shm). */
static bool usable_tmpfs(const char *dir)
{
	struct statfs fs;
	struct stat st;
	if (!dir || dir[0] != '/' || statfs(dir, &fs) < 0 || fs.f_type != TMPFS_MAGIC ||
	    stat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || access(dir, W_OK | X_OK) < 0)
		return false;
	if (st.st_uid == geteuid() && !(st.st_mode & (S_IWGRP | S_IWOTH)))
		return true;
	return (st.st_mode & S_ISVTX) != 0;
}

/* The run directory's socket must fit a sockaddr_un: a longer base would
 * make kiln trace fail, not just pick another place. */
static bool short_enough(const char *dir)
{
	static const char tail[] = "/" TRACE_RUNDIR_TEMPLATE "/" TRACE_RUNDIR_SOCKET;
	return strlen(dir) + sizeof tail <= sizeof(((struct sockaddr_un *)0)->sun_path);
}

const char *trace_rundir_base_of(const char *runtime_dir, const char *shm_dir, const char *tmpdir)
{
	if (usable_tmpfs(runtime_dir) && short_enough(runtime_dir))
		return runtime_dir;
	if (usable_tmpfs(shm_dir) && short_enough(shm_dir))
		return shm_dir;
	return tmpdir && tmpdir[0] == '/' && short_enough(tmpdir) ? tmpdir : "/tmp";
}

const char *trace_rundir_base(void)
{
	return trace_rundir_base_of(getenv("XDG_RUNTIME_DIR"), "/dev/shm", getenv("TMPDIR"));
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

int trace_rundir_remove(const char *dir, char *err, size_t errlen)
{
	if (nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT) {
		snprintf(err, errlen, "cannot remove run directory %s: %s", dir, strerror(errno));
		return -1;
	}
	return 0;
}

/* True if process `pid`'s environment holds exactly `needle`
 * ("KILN_RUN_DIR=dir"). Read in pieces: an unfinished entry is carried over
 * to the next piece, or skipped to its end when it is already too long. */
static bool env_has(pid_t pid, const char *needle, size_t nlen)
{
	char path[64], buf[8192 + 4200];
	snprintf(path, sizeof path, "/proc/%ld/environ", (long)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool found = false, skipping = false;
	size_t have = 0;
	for (ssize_t n; !found && (n = read(fd, buf + have, sizeof buf - have)) > 0;) {
		have += (size_t)n;
		size_t start = 0;
		for (size_t i = 0; i < have && !found; i++)
			if (buf[i] == '\0') {
				found = !skipping && i - start == nlen && !memcmp(buf + start, needle, nlen);
				skipping = false;
				start = i + 1;
			}
		size_t tail = have - start;
		if (tail > nlen) {
			skipping = true;
			tail = 0;
		}
		memmove(buf, buf + have - tail, tail);
		have = tail;
	}
	if (!found && !skipping && have == nlen && !memcmp(buf, needle, nlen))
		found = true;
	close(fd);
	return found;
}

/* The processes the scans killed outside the build's process group, each
 * counted once (a killed process is found again while it exits). */
struct kill_tally {
	pid_t pgid;
	size_t counted, nseen;
	pid_t seen[256];
};

static void tally(struct kill_tally *t, pid_t pid, pid_t pgid)
{
	if (t->pgid > 0 && pgid == t->pgid)
		return; /* the group's kill had it */
	for (size_t i = 0; i < t->nseen; i++)
		if (t->seen[i] == pid)
			return;
	if (t->nseen < sizeof t->seen / sizeof t->seen[0])
		t->seen[t->nseen++] = pid;
	t->counted++;
}

/* One scan: signals every process of the build (but this one) with sig;
 * returns how many it found. */
static size_t signal_build(const char *needle, size_t nlen, int sig, struct kill_tally *t)
{
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	size_t n = 0;
	pid_t self = getpid();
	uid_t uid = getuid();
	for (struct dirent *e; (e = readdir(d));) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 0 || pid == self)
			continue;
		struct stat st;
		char p[64];
		snprintf(p, sizeof p, "/proc/%ld", pid);
		if (stat(p, &st) < 0 || (uid != 0 && st.st_uid != uid))
			continue;
		if (!env_has((pid_t)pid, needle, nlen))
			continue;
		pid_t pgid = getpgid((pid_t)pid);
		if (kill((pid_t)pid, sig) == 0) {
			n++;
			tally(t, (pid_t)pid, pgid);
		}
	}
	closedir(d);
	return n;
}

size_t trace_end_build(const char *dir, pid_t pgid, bool *group)
{
	*group = pgid > 0 && kill(-pgid, SIGKILL) == 0;
	char needle[4200];
	int nlen = snprintf(needle, sizeof needle, "%s=%s", KILN_ENV_RUNDIR, dir);
	if (nlen < 0 || (size_t)nlen >= sizeof needle)
		return 0;
	/* A process forked after a scan passed its slot, or in the middle of an
	 * exec (its environment briefly unreadable), is caught by a later
	 * scan: stop after two scans in a row that find nothing. */
	struct kill_tally t = { .pgid = pgid };
	for (int round = 0, empty = 0; round < 100 && empty < 2; round++) {
		size_t n = signal_build(needle, (size_t)nlen, SIGKILL, &t);
		empty = n ? 0 : empty + 1;
	}
	return t.counted;
}
