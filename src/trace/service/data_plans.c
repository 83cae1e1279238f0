/* The run-wide plans of glibc's own data loads (data_plans.h), from glibc
 * 2.36's rules: nss/nss_database.c (nsswitch.conf and its defaults),
 * iconv/gconv_conf.c and gconv_cache.c, time/tzfile.c. Each is a superset
 * of what glibc may open, so "clean" means no file it may open is hidden. */
#include "trace/service/data_plans.h"

#include "registry/deb822.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *const data_nss_databases[] = {
	"aliases", "ethers", "group", "gshadow", "hosts", "initgroups", "netgroup",
	"networks", "passwd", "protocols", "publickey", "rpc", "services", "shadow",
};
const size_t data_nss_ndatabases = sizeof data_nss_databases / sizeof data_nss_databases[0];

/* The file of a database for the "files" service (initgroups: group's). */
static const char *files_of(const char *db)
{
	return !strcmp(db, "initgroups") ? "group" : db;
}

struct data_where data_where_default(void)
{
#if defined(__x86_64__)
#define MULTIARCH "x86_64-linux-gnu"
#else
#error "kiln knows the multiarch directory of x86-64 only"
#endif
	return (struct data_where){
		.nsswitch = "/etc/nsswitch.conf",
		.libdir = "/usr/lib/" MULTIARCH,
		.gconv_dir = "/usr/lib/" MULTIARCH "/gconv",
		.localtime = "/etc/localtime",
	};
}

/* True when path is hidden (or the sandbox cannot tell: not clean). */
static bool hidden(const struct data_sandbox *l, const char *path)
{
	struct locale_seen s;
	return l->look(l->ctx, path, &s) < 0 || (s.exists && s.hidden);
}

/* The services of db in nsswitch.conf (its text `conf`, NULL when it
 * cannot be read; space-separated into out), or its default when the file
 * does not name it. */
static void services_of(const char *conf, const char *db, char *out, size_t cap)
{
	/* nss_database.c's defaults, with the compat and nis ones as Debian's
	 * glibc (without libnsl) turns them into "files". */
	const char *def = !strcmp(db, "hosts") || !strcmp(db, "networks") ? "files dns"
			: !strcmp(db, "initgroups") ? "" : "files";
	snprintf(out, cap, "%s", def);
	FILE *f = conf && *conf ? fmemopen((void *)conf, strlen(conf), "r") : NULL;
	if (!f)
		return;
	char line[2048];
	size_t dl = strlen(db);
	while (fgets(line, sizeof line, f)) {
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *p = line;
		while (isspace((unsigned char)*p))
			p++;
		if (strncasecmp(p, db, dl) || (p[dl] != ':' && !isspace((unsigned char)p[dl])))
			continue;
		p = strchr(p + dl, ':');
		if (!p)
			continue;
		size_t o = 0;
		out[0] = '\0';
		for (p++; *p;) {
			while (isspace((unsigned char)*p))
				p++;
			if (*p == '[') { /* an action: [NOTFOUND=return] */
				char *end = strchr(p, ']');
				p = end ? end + 1 : p + strlen(p);
				continue;
			}
			size_t n = strcspn(p, " \t\n[");
			if (n && o + n + 2 < cap) {
				o += (size_t)snprintf(out + o, cap - o, "%s%.*s", o ? " " : "", (int)n, p);
			}
			p += n;
		}
	}
	fclose(f);
}

static bool nss_clean(const struct data_sandbox *l, const struct data_where *w, const char *conf,
		      const char *db)
{
	char path[4096], services[1024];
	services_of(conf, db, services, sizeof services);
	/* initgroups with no services of its own goes by group's. */
	if (!services[0] && !strcmp(db, "initgroups"))
		services_of(conf, "group", services, sizeof services);
	for (char *s = services, *save = NULL, *tok; (tok = strtok_r(s, " ", &save)); s = NULL) {
		if (!strcmp(tok, "files") || !strcmp(tok, "compat")) {
			snprintf(path, sizeof path, "/etc/%s", files_of(db));
			if (hidden(l, path))
				return false;
		}
		if (!strcmp(tok, "dns")) {
			static const char *const dns[] = { "/etc/resolv.conf", "/etc/host.conf",
							   "/etc/gai.conf" };
			for (size_t i = 0; i < 3; i++)
				if (hidden(l, dns[i]))
					return false;
			continue;
		}
		if (!strcmp(tok, "files"))
			continue; /* built into libc since 2.34 */
		if (!strcmp(tok, "db")) {
			snprintf(path, sizeof path, "/var/lib/misc/%s.db", files_of(db));
			if (hidden(l, path))
				return false;
		}
		snprintf(path, sizeof path, "%s/libnss_%s.so.2", w->libdir, tok);
		if (hidden(l, path))
			return false;
	}
	return true;
}

/* No file of the gconv directory (and its gconv-modules.d) hidden: with
 * GCONV_PATH unset, glibc reads its cache or configuration there and
 * loads modules from there only. A symlink is judged by what it leads to
 * (glibc's open follows it), any other entry as a listing judges it. */
static bool gconv_clean(const struct data_sandbox *l, const char *dir, int depth)
{
	if (hidden(l, dir))
		return false;
	DIR *d = opendir(dir);
	if (!d)
		return true;
	bool clean = true;
	struct dirent *e;
	while (clean && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char path[4096];
		if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path)
			continue;
		int h = -1;
		if (l->entry_hidden && (e->d_type == DT_REG || e->d_type == DT_DIR))
			h = l->entry_hidden(l->ctx, dir, e->d_name);
		if (h < 0)
			h = hidden(l, path);
		if (h)
			clean = false;
		else if (e->d_type == DT_DIR && depth == 0)
			clean = gconv_clean(l, path, 1);
	}
	closedir(d);
	return clean;
}

size_t data_plans_clean(const struct data_where *w, const struct data_sandbox *l, char *out, size_t cap)
{
	size_t o = 0;
	out[0] = '\0';
	/* nsswitch.conf itself hidden: no database is clean. */
	bool conf_visible = !hidden(l, w->nsswitch);
	char cerr[256];
	size_t clen;
	char *conf = conf_visible ? deb822_slurp(w->nsswitch, &clen, cerr, sizeof cerr) : NULL;
	for (size_t i = 0; conf_visible && i < data_nss_ndatabases; i++)
		if (nss_clean(l, w, conf, data_nss_databases[i]) &&
		    o + strlen(data_nss_databases[i]) + 6 < cap)
			o += (size_t)snprintf(out + o, cap - o, "%snss:%s", o ? " " : "", data_nss_databases[i]);
	free(conf);
	if (gconv_clean(l, w->gconv_dir, 0) && o + 7 < cap)
		o += (size_t)snprintf(out + o, cap - o, "%sgconv", o ? " " : "");
	/* TZ unset: /etc/localtime, followed (the look follows symlinks). */
	if (!hidden(l, w->localtime) && o + 4 < cap)
		o += (size_t)snprintf(out + o, cap - o, "%stz", o ? " " : "");
	return o;
}
