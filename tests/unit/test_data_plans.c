/* The run-wide plans of glibc's own data (src/trace/service/data_plans.c)
 * on a synthetic tree: nsswitch.conf and its defaults, NSS modules and
 * database files, the gconv directory, /etc/localtime. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace/service/data_plans.h"

static char dir[PATH_MAX];
static const char *hidden[8];

static bool listed_hidden(const char *path)
{
	for (size_t i = 0; i < 8 && hidden[i]; i++)
		if (!strcmp(path, hidden[i]))
			return true;
	return false;
}

/* What the build would see: a symlink followed. */
static int look(void *ctx, const char *path, struct locale_seen *seen)
{
	(void)ctx;
	struct stat st;
	/* /etc files are the real system's: the plan only asks the sandbox. */
	seen->exists = stat(path, &st) == 0 || !strncmp(path, "/etc/", 5);
	char real[PATH_MAX];
	seen->hidden = listed_hidden(path) || (realpath(path, real) && listed_hidden(real));
	seen->is_dir = false;
	return 0;
}

/* A listing's judgement of an entry: the name itself. Counts its calls;
 * entry_says < 0 makes it answer "cannot tell". */
static unsigned entry_calls;
static int entry_says;

static int entry_hidden(void *ctx, const char *d, const char *name)
{
	(void)ctx;
	entry_calls++;
	if (entry_says < 0)
		return -1;
	char p[PATH_MAX * 2];
	snprintf(p, sizeof p, "%s/%s", d, name);
	return listed_hidden(p);
}

static void put(const char *rel, const char *text)
{
	char p[PATH_MAX * 2];
	snprintf(p, sizeof p, "%s/%s", dir, rel);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static char paths[4][PATH_MAX + 32];

static struct data_where where(void)
{
	snprintf(paths[0], sizeof paths[0], "%s/nsswitch.conf", dir);
	snprintf(paths[1], sizeof paths[1], "%s/lib", dir);
	snprintf(paths[2], sizeof paths[2], "%s/gconv", dir);
	snprintf(paths[3], sizeof paths[3], "%s/localtime", dir);
	return (struct data_where){ paths[0], paths[1], paths[2], paths[3] };
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof dir, "/tmp/kiln-data-plans-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	char p[PATH_MAX + 32];
	snprintf(p, sizeof p, "%s/lib", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof p, "%s/gconv", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof p, "%s/gconv/gconv-modules.d", dir);
	mkdir(p, 0755);
	put("gconv/IBM1047.so", "x");
	put("gconv/gconv-modules.d/extra.conf", "x");
	snprintf(p, sizeof p, "%s/other", dir);
	mkdir(p, 0755);
	put("lib/libnss_systemd.so.2", "x");
	put("zone", "x");
	snprintf(p, sizeof p, "%s/localtime", dir);
	char zone[PATH_MAX + 32];
	snprintf(zone, sizeof zone, "%s/zone", dir);
	return symlink(zone, p);
}

static int teardown(void **state)
{
	(void)state;
	char cmd[PATH_MAX + 32];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd);
}

static bool has(const char *list, const char *token)
{
	size_t n = strlen(token);
	for (const char *p = list; *p;) {
		size_t k = strcspn(p, " ");
		if (k == n && !memcmp(p, token, n))
			return true;
		p += k + (p[k] == ' ');
	}
	return false;
}

static bool with_entries;

static const char *plans(void)
{
	static char out[1024];
	struct data_where w = where();
	struct data_sandbox sb = { NULL, look, with_entries ? entry_hidden : NULL };
	data_plans_clean(&w, &sb, out, sizeof out);
	return out;
}

static void nss_modules_and_files(void **state)
{
	(void)state;
	memset(hidden, 0, sizeof hidden);
	put("nsswitch.conf", "# comment\npasswd:  files systemd\ngroup: files [NOTFOUND=return] systemd\n"
			     "hosts: files dns\nservices: db files\n");
	char module[PATH_MAX + 64];
	snprintf(module, sizeof module, "%s/lib/libnss_systemd.so.2", dir);
	assert_true(has(plans(), "nss:passwd"));
	/* libnss-systemd outside the closure: passwd and group (and
	 * initgroups, by group's services), not hosts. */
	hidden[0] = module;
	const char *p = plans();
	assert_false(has(p, "nss:passwd"));
	assert_false(has(p, "nss:group"));
	assert_false(has(p, "nss:initgroups"));
	assert_true(has(p, "nss:hosts"));
	/* Database files: netbase's /etc/services. */
	hidden[0] = "/etc/services";
	p = plans();
	assert_false(has(p, "nss:services"));
	assert_true(has(p, "nss:passwd"));
	assert_true(has(p, "nss:protocols"));
	/* A database nsswitch.conf does not name: its default, "files". */
	hidden[0] = "/etc/protocols";
	assert_false(has(plans(), "nss:protocols"));
	/* hosts' dns: resolv.conf. */
	hidden[0] = "/etc/resolv.conf";
	p = plans();
	assert_false(has(p, "nss:hosts"));
	assert_true(has(p, "nss:passwd"));
	/* nsswitch.conf itself. */
	hidden[0] = where().nsswitch;
	assert_false(has(plans(), "nss:passwd"));
	memset(hidden, 0, sizeof hidden);
}

static void gconv_and_localtime(void **state)
{
	(void)state;
	memset(hidden, 0, sizeof hidden);
	put("nsswitch.conf", "passwd: files\n");
	assert_true(has(plans(), "gconv"));
	assert_true(has(plans(), "tz"));
	char p[PATH_MAX + 64];
	snprintf(p, sizeof p, "%s/gconv/gconv-modules.d/extra.conf", dir);
	hidden[0] = p;
	assert_false(has(plans(), "gconv"));
	snprintf(p, sizeof p, "%s/gconv/IBM1047.so", dir);
	assert_false(has(plans(), "gconv"));
	hidden[0] = where().localtime;
	assert_false(has(plans(), "tz"));
	assert_true(has(plans(), "gconv"));
	memset(hidden, 0, sizeof hidden);
}

/* The server's cheaper question for the gconv directory's files: asked of
 * every file and directory, never of a symlink, whose target counts. */
static void gconv_entries_as_listed(void **state)
{
	(void)state;
	memset(hidden, 0, sizeof hidden);
	put("nsswitch.conf", "passwd: files\n");
	with_entries = true;
	entry_says = 0;
	entry_calls = 0;
	assert_true(has(plans(), "gconv"));
	assert_int_equal(entry_calls, 3); /* IBM1047.so, gconv-modules.d, its extra.conf */
	char p[PATH_MAX + 64], link[PATH_MAX + 64], target[PATH_MAX + 64];
	snprintf(p, sizeof p, "%s/gconv/IBM1047.so", dir);
	hidden[0] = p;
	assert_false(has(plans(), "gconv"));
	/* A module that is a symlink to a hidden file: its name is listed, but
	 * glibc's open would not find it. */
	hidden[0] = NULL;
	put("other/UTF-7.so", "x");
	snprintf(link, sizeof link, "%s/gconv/UTF-7.so", dir);
	snprintf(target, sizeof target, "%s/other/UTF-7.so", dir);
	assert_int_equal(symlink(target, link), 0);
	assert_true(has(plans(), "gconv"));
	hidden[0] = target;
	entry_calls = 0;
	assert_false(has(plans(), "gconv"));
	/* Cannot tell: the file is asked as the build would open it. */
	unlink(link);
	hidden[0] = NULL;
	entry_says = -1;
	assert_true(has(plans(), "gconv"));
	hidden[0] = p;
	assert_false(has(plans(), "gconv"));
	with_entries = false;
	entry_says = 0;
	memset(hidden, 0, sizeof hidden);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(nss_modules_and_files),
		cmocka_unit_test(gconv_and_localtime),
		cmocka_unit_test(gconv_entries_as_listed),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
