/* Each entry below was seen in real package builds under kiln trace with
 * correct Build-Depends (docs/trace-report.md says which and why each is
 * harmless). An entry matches when the program and the path (as asked, or
 * the hidden node) match and the evidence is no stronger than it allows:
 * dpkg-buildpackage looking for gpg is a probe, a build running gpg is not. */
#include "trace/service/probes.h"

#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

const struct trace_probe trace_probe_absent = {
	.id = "absent-name",
	.what = "only names that do not exist were looked up below a directory of the package "
		"(the build got ENOENT, as it would with the package installed)",
	.strongest = EV_ABSENT,
};

const struct trace_probe trace_probe_build_type = {
	.id = "build-type",
	.what = "declared in a Build-Depends field this build type leaves out (Build-Depends-Indep "
		"in a -B build), which sbuild does not install for it either; the build only "
		"looked for it",
	.strongest = EV_COMMAND,
};

#define LIST(...) ((const char *const[]){ __VA_ARGS__, NULL })

const struct trace_probe trace_probes[] = {
	{
		.id = "dpkg-signing-tools",
		.what = "dpkg looks for the OpenPGP tools it could sign or verify with (Dpkg::OpenPGP)",
		.programs = LIST("dpkg-*", "debsign"),
		.paths = LIST("*/bin/gpg", "*/bin/gpg2", "*/bin/gpgv", "*/bin/gpgv2", "*/bin/gpg-agent",
			      "*/bin/sq", "*/bin/sqv", "*/bin/sqop", "*/bin/sopv", "*/bin/pgpainless-cli",
			      "*/bin/rsop", "*/bin/gosop"),
		.strongest = EV_COMMAND,
	},
	{
		.id = "dpkg-genbuildinfo-usr-local",
		.what = "dpkg-genbuildinfo walks /usr/local for its Build-Tainted-By field "
			"(usr-local-has-programs...), following links out of it",
		.programs = LIST("dpkg-genbuildinfo"),
		.paths = LIST("/usr/local/*"),
		.strongest = EV_COMMAND,
	},
	{
		.id = "dpkg-shlibdeps-multilib",
		.what = "dpkg-shlibdeps searches every library directory, other ABIs' too, and "
			"skips libraries of another ELF class",
		.programs = LIST("dpkg-shlibdeps"),
		.paths = LIST("/lib32", "/lib32/*", "/usr/lib32", "/usr/lib32/*", "/libx32", "/libx32/*",
			      "/usr/libx32", "/usr/libx32/*", "/usr/lib64", "/usr/lib64/*"),
		.strongest = EV_READ,
	},
	{
		.id = "cmake-lib-dirs",
		.what = "CMake's find_package and find_library look at each prefix's lib* "
			"directories (lib32, libx32, lib64), whatever the target's word size",
		.programs = LIST("cmake"),
		.paths = LIST("/lib32", "/usr/lib32", "/libx32", "/usr/libx32", "/lib64", "/usr/lib64"),
		.strongest = EV_DIR,
	},
	{
		.id = "ctest-memcheck",
		.what = "CMake's CTest module looks for a memory checker in every project that "
			"includes it, for `ctest -T memcheck`, which package builds do not run",
		.programs = LIST("cmake"),
		.paths = LIST("*/bin/valgrind", "*/bin/drmemory", "*/bin/cuda-memcheck",
			      "*/bin/compute-sanitizer", "*/bin/purify", "*/bin/boundscheck"),
		.strongest = EV_COMMAND,
	},
	{
		.id = "perl-optional-modules",
		.what = "dpkg's and debhelper's Perl code tries modules it can do without "
			"(File::FcntlLock, Locale::gettext, Algorithm::Merge, PerlIO::gzip)",
		.programs = LIST("dpkg*", "dh", "dh_*", "debhelper*"),
		.paths = LIST("*/File/FcntlLock.pm", "*/File/FcntlLock.pmc", "*/Locale/gettext.pm",
			      "*/Locale/gettext.pmc", "*/Algorithm/Merge.pm", "*/Algorithm/Merge.pmc",
			      "*/PerlIO/gzip.pm", "*/PerlIO/gzip.pmc"),
		.strongest = EV_STAT,
	},
	{
		.id = "perl-report-prereqs",
		.what = "Dist::Zilla's t/00-report-prereqs.t reports the version of each "
			"prerequisite it finds in @INC and passes whatever is missing",
		.programs = LIST("00-report-prereqs.t"),
		.paths = LIST("*.pm", "*.pmc"),
		.strongest = EV_READ,
	},
	{
		.id = "selinux-config",
		.what = "programs linked with libselinux look for /etc/selinux/config at start",
		.paths = LIST("/etc/selinux", "/etc/selinux/*"),
		.strongest = EV_READ,
	},
	{
		.id = "nss-modules",
		.what = "glibc loads the NSS modules the host's /etc/nsswitch.conf names (libnss-systemd "
			"adds systemd to passwd and group); a chroot's names only what it has, and "
			"without the module glibc asks the next service, as there",
		.paths = LIST("/usr/lib/*/libnss_*.so.2", "/lib/*/libnss_*.so.2", "/usr/lib/libnss_*.so.2",
			      "/lib/libnss_*.so.2"),
		.strongest = EV_READ,
	},
	{
		.id = "gettext-its-rules",
		.what = "xgettext and msgfmt list every ITS rule directory (XML formats other "
			"packages teach them), needed or not",
		.programs = LIST("xgettext", "msgfmt", "msgmerge"),
		.paths = LIST("/usr/share/gettext/its", "/usr/share/gettext/its/*",
			      "/usr/share/gettext-*/its", "/usr/share/gettext-*/its/*"),
		.strongest = EV_DIR,
	},
	{
		.id = "locale-data",
		.what = "message catalogs and locale data of other packages (translations: the "
			"build's output does not depend on them; sbuild builds under C.UTF-8)",
		.paths = LIST("/usr/share/locale/*", "/usr/share/locale-langpack/*", "/usr/lib/locale/*",
			      "/usr/share/i18n/*"),
		.strongest = EV_READ,
	},
	{
		.id = "zone-data",
		.what = "glibc reads the local time zone (/etc/localtime into /usr/share/zoneinfo, "
			"tzdata) for any program that prints a local time; every buildd chroot has "
			"tzdata (Priority: required)",
		.paths = LIST("/usr/share/zoneinfo", "/usr/share/zoneinfo/*"),
		.strongest = EV_READ,
	},
	{ 0 },
};

static bool any_match(const char *const *patterns, const char *s)
{
	for (; *patterns; patterns++)
		if (!fnmatch(*patterns, s, 0))
			return true;
	return false;
}

const struct trace_probe *trace_probe_match(const char *path, const char *node,
					    enum trace_evidence ev, const char *program)
{
	if (ev == EV_ABSENT)
		return &trace_probe_absent;
	for (const struct trace_probe *p = trace_probes; p->id; p++) {
		if (ev < p->strongest)
			continue;
		if (p->programs && !any_match(p->programs, program))
			continue;
		if (any_match(p->paths, path) || any_match(p->paths, node))
			return p;
	}
	return NULL;
}

static const char *base_name(const char *s)
{
	const char *slash = strrchr(s, '/');
	return slash ? slash + 1 : s;
}

static bool is_interpreter(const char *name)
{
	static const char *const names[] = { "sh", "bash", "dash", "ksh", "mksh", "zsh", "perl",
					     "perl5*", "python", "python[0-9]*", "ruby*", "tclsh*",
					     "env", NULL };
	return any_match(names, name);
}

const char *trace_program_arg(const char *cmdline, size_t len)
{
	const char *arg = cmdline, *end = cmdline + len;
	if (!len)
		return "";
	/* Through `env [VAR=x...] interpreter script` and `interpreter [-opts] script`. */
	for (int hops = 0; hops < 3 && is_interpreter(base_name(arg)); hops++) {
		bool env = !strcmp(base_name(arg), "env");
		const char *next = arg + strnlen(arg, (size_t)(end - arg)) + 1;
		while (next < end && (next[0] == '-' || (env && strchr(next, '=')))) {
			/* sh -c, perl -e, python -c/-m: the program is the
			 * interpreter's own code: name the interpreter. */
			if (!env && (!strcmp(next, "-c") || !strcmp(next, "-e") || !strcmp(next, "-E") ||
				     !strcmp(next, "-m")))
				return arg;
			next += strnlen(next, (size_t)(end - next)) + 1;
		}
		if (next >= end || !*next)
			break;
		arg = next;
	}
	return arg;
}

const char *trace_program_name(const char *cmdline, size_t len, char *buf, size_t buflen)
{
	snprintf(buf, buflen, "%s", base_name(trace_program_arg(cmdline, len)));
	return buf;
}
