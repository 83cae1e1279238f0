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

static int look(void *ctx, const char *path, struct locale_seen *seen)
{
	(void)ctx;
	struct stat st;
	/* /etc files are the real system's: the plan only asks the sandbox. */
	seen->exists = stat(path, &st) == 0 || !strncmp(path, "/etc/", 5);
	seen->hidden = false;
	for (size_t i = 0; i < 8 && hidden[i]; i++)
		if (!strcmp(path, hidden[i]))
			seen->hidden = true;
	seen->is_dir = false;
	return 0;
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

static const char *plans(void)
{
	static char out[1024];
	struct data_where w = where();
	data_plans_clean(&w, look, NULL, out, sizeof out);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(nss_modules_and_files),
		cmocka_unit_test(gconv_and_localtime),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
