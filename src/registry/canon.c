#include "registry/canon.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LINKS 40

int canon_init(struct canon *c, const char *root)
{
	strmap_init(&c->dirs);
	c->root[0] = '\0';
	if (!root || !*root)
		return 0;
	size_t n = strlen(root);
	while (n > 1 && root[n - 1] == '/')
		n--;
	if (n == 1 && root[0] == '/')
		return 0;
	if (n >= sizeof c->root) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(c->root, root, n);
	c->root[n] = '\0';
	return 0;
}

void canon_free(struct canon *c)
{
	strmap_free(&c->dirs);
}

/* dir is canonical ("/" or "/a/b"); sets dir to its parent. */
static void parent_of(char *dir)
{
	char *slash = strrchr(dir, '/');
	if (slash == dir)
		dir[1] = '\0';
	else if (slash)
		*slash = '\0';
}

static int join(char *out, size_t len, const char *dir, const char *name, size_t namelen)
{
	size_t dl = strlen(dir);
	if (dl == 1) /* "/" */
		dl = 0;
	if (dl + 1 + namelen + 1 > len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memmove(out, dir, dl);
	out[dl] = '/';
	memcpy(out + dl + 1, name, namelen);
	out[dl + 1 + namelen] = '\0';
	return 0;
}

static int walk(struct canon *c, char *cur, const char *path, int depth);

/* Resolves one component `name` below canonical directory `cur` (in place),
 * following it if it is a symlink. */
static int step(struct canon *c, char *cur, const char *name, size_t namelen, int depth)
{
	char cand[PATH_MAX];
	if (join(cand, sizeof cand, cur, name, namelen))
		return -1;
	const char *hit = strmap_get(&c->dirs, cand);
	if (hit) {
		strcpy(cur, hit);
		return 0;
	}
	char full[PATH_MAX + sizeof c->root];
	snprintf(full, sizeof full, "%s%s", c->root, cand);
	struct stat st;
	if (lstat(full, &st) || !S_ISLNK(st.st_mode)) {
		strcpy(cur, cand); /* a directory, or missing: kept as written */
	} else {
		char target[PATH_MAX];
		ssize_t tl = readlink(full, target, sizeof target - 1);
		if (tl < 0 || depth >= MAX_LINKS) {
			strcpy(cur, cand); /* unreadable link or a loop: left unresolved */
		} else {
			target[tl] = '\0';
			if (target[0] == '/')
				strcpy(cur, "/");
			if (walk(c, cur, target, depth + 1))
				return -1;
		}
	}
	if (!strmap_put(&c->dirs, cand, cur)) {
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

/* Walks every component of `path` from canonical directory `cur` (a
 * PATH_MAX buffer), following all of them; with no `c`, lexically: ".."
 * drops the last component and nothing is followed. */
static int walk(struct canon *c, char *cur, const char *path, int depth)
{
	const char *p = path;
	while (*p) {
		while (*p == '/')
			p++;
		const char *e = p;
		while (*e && *e != '/')
			e++;
		size_t n = (size_t)(e - p);
		if (n == 0 || (n == 1 && p[0] == '.'))
			;
		else if (n == 2 && p[0] == '.' && p[1] == '.')
			parent_of(cur);
		else if (c ? step(c, cur, p, n, depth) : join(cur, PATH_MAX, cur, p, n))
			return -1;
		p = e;
	}
	return 0;
}

int canon_path(struct canon *c, const char *path, char *out, size_t len)
{
	char abs[PATH_MAX];
	if (path[0] != '/') {
		if (c->root[0]) {
			errno = EINVAL;
			return -1;
		}
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof cwd))
			return -1;
		if (snprintf(abs, sizeof abs, "%s/%s", cwd, path) >= (int)sizeof abs) {
			errno = ENAMETOOLONG;
			return -1;
		}
		path = abs;
	}
	/* Split off the last component (ignoring trailing slashes). */
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/')
		n--;
	size_t b = n;
	while (b > 0 && path[b - 1] != '/')
		b--;
	char dir[PATH_MAX];
	if (b >= sizeof dir) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(dir, path, b);
	dir[b] = '\0';
	char cur[PATH_MAX] = "/";
	if (walk(c, cur, dir, 0))
		return -1;
	const char *base = path + b;
	size_t bl = n - b;
	if (bl == 0 || (bl == 1 && base[0] == '.')) {
		/* "/" or "dir/." */
	} else if (bl == 2 && base[0] == '.' && base[1] == '.') {
		parent_of(cur);
	} else if (join(cur, sizeof cur, cur, base, bl)) {
		return -1;
	}
	if (strlen(cur) + 1 > len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(out, cur);
	return 0;
}

int canon_lexical(const char *path, char *out, size_t len)
{
	if (path[0] != '/') {
		errno = EINVAL;
		return -1;
	}
	char cur[PATH_MAX] = "/";
	if (walk(NULL, cur, path, 0))
		return -1;
	if (strlen(cur) + 1 > len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(out, cur);
	return 0;
}
