#include "registry/dirkinds.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "registry/registry.h"

void dirkinds_init(struct dirkinds *k, const char *root)
{
	k->root = root;
	strmap_init(&k->listed);
	strmap_init(&k->special);
}

void dirkinds_free(struct dirkinds *k)
{
	strmap_free(&k->listed);
	strmap_free(&k->special);
}

static const char *kind_of_mode(mode_t m)
{
	return S_ISDIR(m) ? "d" : S_ISLNK(m) ? "l" : NULL;
}

/* Records the directories and symlinks of directory DIR ("/" or "/a/b"). */
static int list(struct dirkinds *k, const char *dir)
{
	if (!strmap_put(&k->listed, dir, ""))
		return -1;
	char full[PATH_MAX * 2];
	snprintf(full, sizeof full, "%s%s", k->root, dir);
	DIR *d = opendir(full);
	if (!d)
		return 0; /* missing or not a directory: its entries are "files", as lstat says */
	size_t dl = strcmp(dir, "/") ? strlen(dir) : 0;
	char path[PATH_MAX * 2];
	int rc = 0;
	for (struct dirent *e; rc == 0 && (e = readdir(d));) {
		const char *kind = NULL;
		if (e->d_type == DT_DIR) {
			kind = "d";
		} else if (e->d_type == DT_LNK) {
			kind = "l";
		} else if (e->d_type == DT_UNKNOWN) { /* file systems without d_type */
			struct stat st;
			if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
				kind = kind_of_mode(st.st_mode);
		}
		if (!kind || !strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof path, "%.*s/%s", (int)dl, dir, e->d_name);
		if (!strmap_put(&k->special, path, kind))
			rc = -1;
	}
	closedir(d);
	return rc;
}

int dirkinds_kind(struct dirkinds *k, const char *p)
{
	const char *slash = strrchr(p, '/');
	if (!slash || !slash[1]) { /* "/" (or not canonical): ask the file system */
		char full[PATH_MAX * 2];
		snprintf(full, sizeof full, "%s%s", k->root, p);
		struct stat st;
		if (lstat(full, &st))
			return REGISTRY_KIND_FILE;
		const char *kind = kind_of_mode(st.st_mode);
		return !kind ? REGISTRY_KIND_FILE : kind[0] == 'd' ? REGISTRY_KIND_DIR : REGISTRY_KIND_SYMLINK;
	}
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%.*s", slash == p ? 1 : (int)(slash - p), p);
	if (!strmap_get(&k->listed, dir) && list(k, dir) < 0) {
		errno = ENOMEM;
		return -1;
	}
	const char *kind = strmap_get(&k->special, p);
	return !kind ? REGISTRY_KIND_FILE : kind[0] == 'd' ? REGISTRY_KIND_DIR : REGISTRY_KIND_SYMLINK;
}
