/* The report's reasoning without a registry: the program a command line
 * runs, the evidence of an access to files that exist or not, the harmless
 * probe list, the trace log keeping the strongest proof of each kind, and
 * the diagnosis (ranking, failure cause, verdict) built from it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace/service/diagnosis.h"
#include "trace/service/evidence.h"
#include "trace/service/probes.h"
#include "trace/service/tracelog.h"
#include "trace/verdict.h"

static char dir[PATH_MAX];

static void touch(const char *rel, mode_t mode)
{
	char p[PATH_MAX + 64];
	snprintf(p, sizeof p, "%s/%s", dir, rel);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(chmod(p, mode), 0);
}

static const char *at(const char *rel)
{
	static char bufs[4][PATH_MAX + 64];
	static int i;
	char *b = bufs[i++ % 4];
	snprintf(b, PATH_MAX + 64, "%s/%s", dir, rel);
	return b;
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof dir, "/tmp/kiln-evidence-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	char p[PATH_MAX + 64];
	snprintf(p, sizeof p, "%s/bin", dir);
	mkdir(p, 0755);
	snprintf(p, sizeof p, "%s/share", dir);
	mkdir(p, 0755);
	touch("bin/tool", 0755);
	touch("bin/gpg", 0755);
	touch("bin/data", 0644);
	touch("share/file", 0644);
	snprintf(p, sizeof p, "%s/bin/link", dir);
	return symlink("tool", p);
}

static int teardown(void **state)
{
	(void)state;
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	return system(cmd);
}

static const char *prog(const char *cmdline, size_t len)
{
	static char buf[128];
	return trace_program_name(cmdline, len, buf, sizeof buf);
}

#define PROG(lit) prog(lit, sizeof lit - 1)

static void test_program_names(void **state)
{
	(void)state;
	assert_string_equal(PROG("/usr/lib/gcc/x86_64-linux-gnu/12/cc1\0-quiet\0x.c"), "cc1");
	assert_string_equal(PROG("/usr/bin/perl\0/usr/bin/dpkg-buildpackage\0-b"), "dpkg-buildpackage");
	assert_string_equal(PROG("/bin/bash\0./build-aux/missing\0makeinfo"), "missing");
	assert_string_equal(PROG("/usr/bin/perl\0-w\0/usr/bin/dh_auto_build"), "dh_auto_build");
	assert_string_equal(PROG("/bin/sh\0-c\0makeinfo --version"), "sh");
	assert_string_equal(PROG("/usr/bin/env\0LC_ALL=C\0python3\0/usr/bin/tool.py"), "tool.py");
	assert_string_equal(PROG("/usr/bin/python3.11\0-m\0pip"), "python3.11");
	assert_string_equal(PROG("sh"), "sh");
	assert_string_equal(prog("", 0), "");
	const char c[] = "/bin/bash\0/work/pkg/build-aux/missing\0makeinfo";
	assert_string_equal(trace_program_arg(c, sizeof c - 1), "/work/pkg/build-aux/missing");
}

static void test_evidence(void **state)
{
	(void)state;
	struct trace_pathdirs pd;
	char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "/nonexistent-kiln:%s/bin/:relative", dir);
	assert_int_equal(trace_pathdirs_init(&pd, path), 0);
	assert_int_equal(trace_evidence_of(at("bin/tool"), KILN_A_EXEC, &pd), EV_EXEC);
	assert_int_equal(trace_evidence_of(at("bin/tool"), KILN_A_STAT | KILN_A_READ, &pd), EV_READ);
	assert_int_equal(trace_evidence_of(at("bin/data"), KILN_A_WRITE, &pd), EV_READ);
	assert_int_equal(trace_evidence_of(at("bin/tool"), KILN_A_STAT, &pd), EV_COMMAND);
	assert_int_equal(trace_evidence_of(at("bin/link"), KILN_A_STAT, &pd), EV_COMMAND);
	assert_int_equal(trace_evidence_of(at("bin/data"), KILN_A_STAT, &pd), EV_STAT); /* not executable */
	assert_int_equal(trace_evidence_of(at("share/file"), KILN_A_STAT, &pd), EV_STAT); /* not in PATH */
	assert_int_equal(trace_evidence_of(at("share"), KILN_A_STAT, &pd), EV_DIR);
	assert_int_equal(trace_evidence_of(at("share"), KILN_A_LIST, &pd), EV_DIR);
	assert_int_equal(trace_evidence_of(at("share/none.pmc"), KILN_A_STAT, &pd), EV_ABSENT);
	assert_int_equal(trace_evidence_of(at("share/none"), KILN_A_EXEC, &pd), EV_ABSENT);
	assert_int_equal(trace_evidence_of(at("bin/tool/x"), KILN_A_READ, &pd), EV_ABSENT);
	trace_pathdirs_free(&pd);
	/* no PATH: nothing is a command */
	assert_int_equal(trace_pathdirs_init(&pd, NULL), 0);
	assert_int_equal(trace_evidence_of(at("bin/tool"), KILN_A_STAT, &pd), EV_STAT);
	trace_pathdirs_free(&pd);
	/* the bound is never weaker than what a look can give */
	for (unsigned a = 1; a < 128; a++)
		assert_true(trace_evidence_bound(a) <= EV_DIR);
	assert_int_equal(trace_evidence_bound(KILN_A_EXEC | KILN_A_STAT), EV_EXEC);
	assert_int_equal(trace_evidence_bound(KILN_A_STAT), EV_COMMAND);
	assert_string_equal(trace_evidence_name(EV_COMMAND), "command");
	assert_string_equal(trace_evidence_name((enum trace_evidence)99), "none");
}

static const char *probe_id(const char *path, const char *node, enum trace_evidence ev, const char *p)
{
	const struct trace_probe *pr = trace_probe_match(path, node, ev, p);
	return pr ? pr->id : NULL;
}

static void test_probes(void **state)
{
	(void)state;
	assert_string_equal(probe_id("/usr/bin/gpg", "/usr/bin/gpg", EV_COMMAND, "dpkg-buildpackage"),
			    "dpkg-signing-tools");
	assert_string_equal(probe_id("/bin/sqop", "/usr/bin/sqop", EV_STAT, "dpkg-source"),
			    "dpkg-signing-tools");
	/* running gpg is not a probe; nor is another program looking for it */
	assert_null(probe_id("/usr/bin/gpg", "/usr/bin/gpg", EV_EXEC, "dpkg-buildpackage"));
	assert_null(probe_id("/usr/bin/gpg", "/usr/bin/gpg", EV_COMMAND, "debian-rules-script"));
	assert_string_equal(probe_id("/etc/selinux/config", "/etc/selinux", EV_READ, "sed"), "selinux-config");
	assert_string_equal(probe_id("/usr/local/bin/initdb", "/usr/lib/postgresql", EV_COMMAND,
				     "dpkg-genbuildinfo"), "dpkg-genbuildinfo-usr-local");
	assert_null(probe_id("/usr/local/bin/initdb", "/usr/lib/postgresql", EV_COMMAND, "configure"));
	assert_string_equal(probe_id("/usr/lib32/libc.so.6", "/usr/lib32", EV_READ, "dpkg-shlibdeps"),
			    "dpkg-shlibdeps-multilib");
	assert_null(probe_id("/usr/lib32/libc.so.6", "/usr/lib32", EV_READ, "ld"));
	/* json-c's cmake configure, on a host with libc6-i386 */
	assert_string_equal(probe_id("/lib32", "/usr/lib32", EV_DIR, "cmake"), "cmake-lib-dirs");
	assert_null(probe_id("/usr/lib32/libz.so", "/usr/lib32", EV_READ, "cmake"));
	assert_null(probe_id("/usr/lib32/libz.so", "/usr/lib32/libz.so", EV_STAT, "cmake"));
	assert_null(probe_id("/usr/lib32", "/usr/lib32", EV_DIR, "configure"));
	/* tinyxml2's include(CTest), on a host with valgrind; running it is no probe */
	assert_string_equal(probe_id("/usr/bin/valgrind", "/usr/bin/valgrind", EV_COMMAND, "cmake"),
			    "ctest-memcheck");
	assert_string_equal(probe_id("/bin/valgrind", "/bin/valgrind", EV_STAT, "cmake"), "ctest-memcheck");
	assert_null(probe_id("/usr/bin/valgrind", "/usr/bin/valgrind", EV_EXEC, "cmake"));
	assert_null(probe_id("/usr/bin/valgrind", "/usr/bin/valgrind", EV_COMMAND, "sh"));
	assert_null(probe_id("/usr/bin/valgrind", "/usr/bin/valgrind", EV_COMMAND, "ctest"));
	assert_string_equal(probe_id("/usr/share/gettext/its", "/usr/share/gettext/its", EV_DIR, "xgettext"),
			    "gettext-its-rules");
	assert_null(probe_id("/usr/share/gettext/its/x.its", "/usr/share/gettext/its", EV_READ, "xgettext"));
	assert_string_equal(probe_id("/usr/lib/x86_64-linux-gnu/perl5/5.36/File/FcntlLock.pm",
				     "/usr/lib/x86_64-linux-gnu/perl5/5.36/File", EV_STAT, "dpkg-gencontrol"),
			    "perl-optional-modules");
	assert_null(probe_id("/usr/share/perl5/Locale/gettext.pm", "/usr/share/perl5/Locale", EV_STAT,
			     "my-build-script"));
	assert_string_equal(probe_id("/usr/share/locale/de/LC_MESSAGES/x.mo", "/usr/share/locale/de/LC_MESSAGES/x.mo",
				     EV_READ, "msgfmt"), "locale-data");
	/* chown -R 0:0 in zlib's debian/rules, on a host whose nsswitch.conf names systemd */
	assert_string_equal(probe_id("/lib/x86_64-linux-gnu/libnss_systemd.so.2",
				     "/usr/lib/x86_64-linux-gnu/libnss_systemd.so.2", EV_READ, "chown"),
			    "nss-modules");
	assert_null(probe_id("/usr/lib/x86_64-linux-gnu/libnss_systemd.so.2",
			     "/usr/lib/x86_64-linux-gnu/libnss_systemd.so.2", EV_EXEC, "sh"));
	assert_null(probe_id("/usr/lib/x86_64-linux-gnu/libnss_wrapper.so",
			     "/usr/lib/x86_64-linux-gnu/libnss_wrapper.so", EV_READ, "ld.so"));
	/* libtry-tiny-perl's test suite on a host with libmodule-runtime-perl */
	assert_string_equal(probe_id("/usr/share/perl5/Module/Runtime.pm", "/usr/share/perl5/Module",
				     EV_STAT, "00-report-prereqs.t"), "perl-report-prereqs");
	assert_string_equal(probe_id("/usr/share/perl5/Module/Runtime.pm", "/usr/share/perl5/Module",
				     EV_READ, "00-report-prereqs.t"), "perl-report-prereqs");
	assert_null(probe_id("/usr/share/perl5/Module/Runtime.pm", "/usr/share/perl5/Module", EV_READ,
			     "01-basic.t"));
	assert_null(probe_id("/usr/bin/valgrind", "/usr/bin/valgrind", EV_COMMAND, "00-report-prereqs.t"));
	/* a name that does not exist: whatever program */
	assert_string_equal(probe_id("/usr/share/perl5/Foo/Bar.pmc", "/usr/share/perl5/Foo", EV_ABSENT, "x"),
			    "absent-name");
	assert_null(probe_id("/usr/include/zlib.h", "/usr/include/zlib.h", EV_READ, "cc1"));
	/* every entry is well-formed */
	for (const struct trace_probe *p = trace_probes; p->id; p++) {
		assert_non_null(p->what);
		assert_non_null(p->paths);
		assert_non_null(p->paths[0]);
		assert_true(p->strongest < EV_ABSENT);
	}
}

/* ---- the log and the diagnosis ------------------------------------------ */

static int client(struct tracelog *t, const char *cmdline, size_t len, pid_t pid)
{
	int c = tracelog_client(t, pid, cmdline, len);
	assert_true(c >= 0);
	return c;
}

static void hide(struct tracelog *t, int c, const char *path, const char *node, unsigned access,
		 const char *pkg)
{
	struct sbx_decision d = { .verdict = KILN_V_HIDE, .reason = SBX_HIDDEN_PKG };
	snprintf(d.node, sizeof d.node, "%s", node);
	snprintf(d.pkg, sizeof d.pkg, "%s", pkg);
	tracelog_query(t, c, path, access, &d);
}

static const struct trace_finding *finding(const struct tracelog *t, const char *node)
{
	const struct trace_finding *f = pathtab_get(&t->hidden, node, strlen(node));
	assert_non_null(f);
	return f;
}

/* A trace log whose build PATH is our bin directory. */
static void log_with_path(struct tracelog *t)
{
	tracelog_init(t, false);
	char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/bin", dir);
	assert_int_equal(tracelog_set_path(t, path), 0);
}

static void test_log_keeps_the_strongest_proof_of_each_kind(void **state)
{
	(void)state;
	struct tracelog t;
	log_with_path(&t);
	int sh = client(&t, "/bin/sh\0./configure", 19, 10);
	int dpkg = client(&t, "/usr/bin/perl\0/usr/bin/dpkg-buildpackage", 41, 11);
	/* harmless first (dpkg looks for gpg), then the build runs it */
	hide(&t, dpkg, at("bin/gpg-missing"), at("bin"), KILN_A_STAT, "gnupg");
	const struct trace_finding *f = finding(&t, at("bin"));
	assert_int_equal(f->counts.ev, EV_NONE);
	assert_int_equal(f->harmless.ev, EV_ABSENT);
	assert_ptr_equal(f->harmless.probe, &trace_probe_absent);
	hide(&t, sh, at("bin/tool"), at("bin"), KILN_A_STAT, "gnupg");
	assert_int_equal(f->counts.ev, EV_COMMAND);
	assert_int_equal(f->counts.client, sh);
	hide(&t, sh, at("bin/tool"), at("bin"), KILN_A_EXEC, "gnupg");
	assert_int_equal(f->counts.ev, EV_EXEC);
	assert_string_equal(f->counts.path, at("bin/tool"));
	unsigned long seq = f->counts.seq;
	/* a weaker access changes nothing (and is not even looked at) */
	hide(&t, dpkg, at("bin/data"), at("bin"), KILN_A_STAT, "gnupg");
	assert_int_equal(f->counts.ev, EV_EXEC);
	assert_int_equal(f->counts.seq, seq);
	assert_string_equal(f->via, at("bin/gpg-missing")); /* the first path asked stays */
	assert_int_equal(f->access, KILN_A_STAT | KILN_A_EXEC);
	tracelog_free(&t);
}

static void test_diagnosis_ranks_and_finds_the_cause(void **state)
{
	(void)state;
	struct tracelog t;
	log_with_path(&t);
	int cc = client(&t, "/usr/lib/gcc/cc1\0x.c", 20, 20);
	int dpkg = client(&t, "/usr/bin/perl\0/usr/bin/dpkg-shlibdeps", 37, 21);
	int missing = client(&t, "/bin/bash\0/x/build-aux/missing\0tool", 35, 22);
	hide(&t, cc, at("share/file"), at("share/file"), KILN_A_STAT, "statpkg");    /* stat */
	hide(&t, missing, at("bin/tool"), at("bin/tool"), KILN_A_STAT, "toolpkg");   /* command */
	hide(&t, cc, at("share/none.h"), at("share"), KILN_A_READ, "absentpkg");     /* absent */
	hide(&t, dpkg, "/usr/lib32/libc.so.6", "/usr/lib32", KILN_A_STAT, "lib32x"); /* probe */
	struct trace_diagnosis d;
	struct diag_input in = { .log = &t, .exit_status = 2, .build_dir = "/x" };
	assert_int_equal(trace_diagnose(&in, &d, NULL), 0);
	assert_int_equal(d.ngroups, 4);
	assert_int_equal(d.nranked, 2);
	assert_string_equal(d.groups[0].name, "toolpkg");
	assert_int_equal(d.groups[0].ev, EV_COMMAND);
	assert_string_equal(d.groups[1].name, "statpkg");
	assert_int_equal(d.groups[1].ev, EV_STAT);
	/* harmless ones after, by name */
	assert_string_equal(d.groups[2].name, "absentpkg");
	assert_string_equal(d.groups[3].name, "lib32x");
	assert_int_equal(d.nharmless_nodes, 2);
	assert_int_equal(d.violations, 2);
	assert_false(d.complete);
	assert_false(d.unused_known); /* no registry */
	assert_string_equal(d.cause.node, at("bin/tool"));
	assert_string_equal(d.cause.group, "toolpkg");
	char expect[4096];
	snprintf(expect, sizeof expect,
		 "probably missing: toolpkg (tool looked up in PATH by build-aux/missing); possibly missing: "
		 "statpkg (%s looked up by cc1); the build failed (exit status 2), most likely because %s "
		 "was hidden (toolpkg)",
		 at("share/file"), at("bin/tool"));
	assert_string_equal(d.verdict, expect);
	char who[64];
	assert_string_equal(trace_who(&t, cc, "/x", who, sizeof who), "cc1");
	assert_string_equal(trace_who(&t, 99, "/x", who, sizeof who), "an unknown process");
	trace_diagnosis_free(&d);

	/* only harmless: complete; killed by a signal */
	struct tracelog h;
	tracelog_init(&h, false);
	int p = client(&h, "/usr/bin/perl\0/usr/bin/dpkg-buildpackage", 41, 30);
	hide(&h, p, at("bin/gpg"), at("bin/gpg"), KILN_A_STAT, "gpg");
	in = (struct diag_input){ .log = &h, .exit_status = 137 };
	assert_int_equal(trace_diagnose(&in, &d, NULL), 0);
	assert_true(d.complete);
	assert_int_equal(d.violations, 0);
	assert_string_equal(d.verdict, "Build-Depends look complete; the build failed (exit status 137: "
				       "killed by signal 9), and kiln hid or refused nothing that counts");
	trace_diagnosis_free(&d);
	tracelog_free(&h);
	tracelog_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_program_names),
		cmocka_unit_test(test_evidence),
		cmocka_unit_test(test_probes),
		cmocka_unit_test(test_log_keeps_the_strongest_proof_of_each_kind),
		cmocka_unit_test(test_diagnosis_ranks_and_finds_the_cause),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
