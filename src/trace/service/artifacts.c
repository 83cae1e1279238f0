#include "trace/service/artifacts.h"

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "registry/deb822.h"

#define MAX_PACKAGES 256

struct names {
	const char *v[MAX_PACKAGES];
	size_t n;
};

static int collect(const struct deb822_stanza *st, void *ctx)
{
	struct names *nm = ctx;
	const char *name = deb822_get(st, nm->n ? "Package" : "Source");
	if (!name && !nm->n)
		name = deb822_get(st, "Package"); /* no Source paragraph */
	if (name && *name && nm->n < MAX_PACKAGES)
		nm->v[nm->n++] = name;
	return 0;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* DIR when PATH (absolute) is DIR/debian/control, written into dir. */
static int source_tree_of(const char *path, char *dir, size_t len)
{
	char buf[PATH_MAX];
	snprintf(buf, sizeof buf, "%s", path);
	char *slash = strrchr(buf, '/');
	if (!slash || strcmp(slash, "/control"))
		return -1;
	*slash = '\0';
	slash = strrchr(buf, '/');
	if (!slash || strcmp(slash, "/debian"))
		return -1;
	*slash = '\0';
	if (!*buf)
		return -1; /* /debian/control: no parent to write to */
	return snprintf(dir, len, "%s", buf) < (int)len ? 0 : -1;
}

int artifacts_add_to_policy(struct policy *p, const char *control, const char *command,
			    const char *cwd, char *err, size_t errlen)
{
	char file[PATH_MAX], tree[PATH_MAX], guess[PATH_MAX];
	bool builder = command && (!strcmp(base_name(command), "dpkg-buildpackage") ||
				   !strcmp(base_name(command), "debuild"));
	if (control && realpath(control, file) && source_tree_of(file, tree, sizeof tree) == 0) {
		/* the tree of --deps-from-control */
	} else if (builder && snprintf(guess, sizeof guess, "%s/debian/control", cwd) < (int)sizeof guess &&
		   access(guess, R_OK) == 0 && realpath(guess, file) &&
		   source_tree_of(file, tree, sizeof tree) == 0) {
		/* dpkg-buildpackage run in its source tree */
	} else {
		return 0;
	}
	char *buf = deb822_slurp(file, NULL, err, errlen);
	if (!buf)
		return -1;
	struct names nm = { .n = 0 };
	int rc = deb822_parse(buf, file, 1, collect, &nm, err, errlen);
	if (rc == 0 && nm.n)
		rc = policy_set_artifacts(p, dirname(tree), nm.v, nm.n, err, errlen);
	free(buf);
	return rc < 0 ? -1 : 0;
}
