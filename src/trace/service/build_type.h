/* What a build builds, as dpkg-buildpackage's build type: which
 * Build-Depends fields it needs (dpkg-checkbuilddeps, and sbuild, leave
 * out Build-Depends-Arch without an architecture-dependent part and
 * Build-Depends-Indep without an architecture-independent one). */
#ifndef KILN_TRACE_SERVICE_BUILD_TYPE_H
#define KILN_TRACE_SERVICE_BUILD_TYPE_H

enum build_part {
	BUILD_SOURCE = 1u << 0,
	BUILD_ANY = 1u << 1,  /* architecture-dependent packages: Build-Depends-Arch */
	BUILD_ALL = 1u << 2,  /* architecture-independent: Build-Depends-Indep */
	BUILD_FULL = BUILD_SOURCE | BUILD_ANY | BUILD_ALL,
};

/* A --build= list as dpkg-buildpackage takes it ("source", "any", "all",
 * "binary", "full", joined with commas). Returns its parts, 0 if invalid. */
unsigned build_type_parse(const char *list);

/* The build type of argv when argv[0] is dpkg-buildpackage or debuild (by
 * name): its -b -B -A -S -F -g -G or --build= option, the last one given,
 * BUILD_FULL without one. 0 for any other command (not known). */
unsigned build_type_of_command(const char *const *argv);

/* "full", "binary", "any", "all", "source", "source,any", ... */
const char *build_type_name(unsigned parts);

#endif
