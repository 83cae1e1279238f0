#include "trace/service/evidence.h"

#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "trace/verdict.h"

const char *trace_evidence_name(enum trace_evidence e)
{
	static const char *const names[] = { "exec", "read", "command", "directory",
					     "stat", "absent", "none" };
	return (unsigned)e <= EV_NONE ? names[e] : "none";
}

static int add_dir(struct trace_pathdirs *pd, const char *dir, size_t len)
{
	for (size_t i = 0; i < pd->n; i++)
		if (strlen(pd->dirs[i]) == len && !memcmp(pd->dirs[i], dir, len))
			return 0;
	char **v = realloc(pd->dirs, (pd->n + 1) * sizeof *v);
	if (!v)
		return -1;
	pd->dirs = v;
	if (!(v[pd->n] = strndup(dir, len)))
		return -1;
	pd->n++;
	return 0;
}

int trace_pathdirs_init(struct trace_pathdirs *pd, const char *path)
{
	*pd = (struct trace_pathdirs){ 0 };
	for (const char *p = path; p && *p;) {
		size_t full = strcspn(p, ":"), n = full;
		while (n > 1 && p[n - 1] == '/')
			n--;
		/* Only absolute entries: a relative one means the cwd of each
		 * process, which the server does not track. */
		if (n && p[0] == '/') {
			if (add_dir(pd, p, n) < 0)
				return -1;
			char lex[PATH_MAX], real[PATH_MAX];
			if (n < sizeof lex) {
				memcpy(lex, p, n);
				lex[n] = '\0';
				if (realpath(lex, real) && add_dir(pd, real, strlen(real)) < 0)
					return -1;
			}
		}
		p += full;
		if (*p == ':')
			p++;
	}
	return 0;
}

void trace_pathdirs_free(struct trace_pathdirs *pd)
{
	for (size_t i = 0; i < pd->n; i++)
		free(pd->dirs[i]);
	free(pd->dirs);
	*pd = (struct trace_pathdirs){ 0 };
}

static bool in_path_dir(const char *path, const struct trace_pathdirs *pd)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;
	if (n == 0)
		n = 1; /* "/x": the root directory */
	for (size_t i = 0; i < pd->n; i++)
		if (strlen(pd->dirs[i]) == n && !memcmp(pd->dirs[i], path, n))
			return true;
	return false;
}

enum trace_evidence trace_evidence_bound(unsigned access)
{
	if (access & KILN_A_EXEC)
		return EV_EXEC;
	if (access & (KILN_A_READ | KILN_A_WRITE))
		return EV_READ;
	if (access & KILN_A_STAT)
		return EV_COMMAND;
	return EV_DIR; /* a listing */
}

enum trace_evidence trace_evidence_of(const char *path, unsigned access,
				      const struct trace_pathdirs *pd)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return EV_ABSENT;
	if (S_ISLNK(st.st_mode)) {
		struct stat target;
		if (stat(path, &target) == 0)
			st = target;
	}
	if (S_ISDIR(st.st_mode))
		return EV_DIR; /* a stat is how ls, test -d and find start */
	if (access & KILN_A_EXEC)
		return EV_EXEC;
	if (access & (KILN_A_READ | KILN_A_WRITE))
		return EV_READ;
	if (S_ISREG(st.st_mode) && (st.st_mode & 0111) && in_path_dir(path, pd))
		return EV_COMMAND;
	return EV_STAT;
}
