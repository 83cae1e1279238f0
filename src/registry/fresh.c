#include "registry/fresh.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "registry/import.h"
#include "registry/query.h"
#include "registry/registry.h"

static long long ns(const struct timespec *t)
{
	return (long long)t->tv_sec * 1000000000LL + t->tv_nsec;
}

int registry_dpkg_state(const char *root, char *out, size_t len)
{
	char admin[PATH_MAX];
	size_t n = root ? strlen(root) : 0;
	while (n && root[n - 1] == '/')
		n--;
	snprintf(admin, sizeof admin, "%.*s/var/lib/dpkg", (int)n, n ? root : "");
	char status[PATH_MAX + 16], info[PATH_MAX + 16];
	snprintf(status, sizeof status, "%s/status", admin);
	snprintf(info, sizeof info, "%s/info", admin);
	struct stat s, i;
	if (stat(status, &s) < 0)
		return -1;
	if (stat(info, &i) < 0)
		i.st_mtim = (struct timespec){ 0, 0 };
	snprintf(out, len, "status %lld %lld info %lld", ns(&s.st_mtim), (long long)s.st_size, ns(&i.st_mtim));
	return 0;
}

/* What differs between two states, for the note. */
static void describe(const char *then, const char *now, char *why, size_t len)
{
	long long ts, ss, ti, ns_, sn, in;
	if (sscanf(then, "status %lld %lld info %lld", &ts, &ss, &ti) != 3) {
		snprintf(why, len, "its import did not record the dpkg state");
		return;
	}
	if (sscanf(now, "status %lld %lld info %lld", &ns_, &sn, &in) != 3) {
		snprintf(why, len, "the dpkg database cannot be read");
		return;
	}
	snprintf(why, len, "%s%s%s changed since the import", ts != ns_ || ss != sn ? "dpkg's status file" : "",
		 (ts != ns_ || ss != sn) && ti != in ? " and " : "", ti != in ? "dpkg's info/ directory" : "");
}

enum registry_freshness registry_dpkg_freshness(const char *db, char *root, size_t rootlen,
						char *why, size_t whylen)
{
	char err[PATH_MAX + 256], then[128], now[128], rules[32];
	root[0] = '\0';
	struct kiln_registry *reg = registry_open(db, REGISTRY_RDONLY, err, sizeof err);
	if (!reg)
		return REGISTRY_UNKNOWN;
	int rc = registry_meta(reg, "dpkg_root", root, rootlen) ||
		 registry_meta(reg, "dpkg_state", then, sizeof then) ||
		 registry_meta(reg, "dpkg_import_rules", rules, sizeof rules);
	registry_close(reg);
	if (rc)
		return REGISTRY_UNKNOWN;
	if (!root[0])
		return REGISTRY_FRESH; /* no dpkg import: nothing to compare with */
	int made_by = rules[0] ? atoi(rules) : 1;
	if (made_by < REGISTRY_DPKG_RULES) {
		snprintf(why, whylen, "it was imported by an older kiln (import rules %d, now %d)",
			 made_by, REGISTRY_DPKG_RULES);
		return REGISTRY_STALE;
	}
	if (registry_dpkg_state(root, now, sizeof now) < 0) {
		snprintf(why, whylen, "%s/var/lib/dpkg/status: %s", strcmp(root, "/") ? root : "", strerror(errno));
		return REGISTRY_STALE;
	}
	if (!strcmp(then, now))
		return REGISTRY_FRESH;
	describe(then, now, why, whylen);
	return REGISTRY_STALE;
}

static void warn_cb(void *ctx, const char *msg)
{
	(void)ctx;
	(void)msg; /* a missing .list: the explicit import reports those */
}

int registry_refresh_if_stale(const char *db, bool refresh, const char *prog, FILE *msgs)
{
	char root[PATH_MAX], why[256];
	if (registry_dpkg_freshness(db, root, sizeof root, why, sizeof why) != REGISTRY_STALE)
		return 0;
	if (!refresh) {
		fprintf(msgs, "%s: warning: the registry %s is out of date (%s); its answers may be wrong: "
			      "run 'kiln registry --db %s import dpkg%s%s'\n",
			prog, db, why, db, strcmp(root, "/") ? " --root " : "", strcmp(root, "/") ? root : "");
		return 0;
	}
	struct registry_import_opts io = { .root = root, .warn = warn_cb };
	struct registry_import_result res;
	char err[PATH_MAX + 512];
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (registry_import_dpkg(db, &io, &res, err, sizeof err) < 0) {
		fprintf(msgs, "%s: the registry %s is out of date (%s) and re-importing it failed: %s\n", prog, db,
			why, err);
		return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	fprintf(msgs, "%s: %s: re-imported the registry (%ld packages) in %.1f s\n", prog, why, res.packages,
		(double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	return 0;
}
