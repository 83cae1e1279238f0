/* Build-Depends of a Debian source package (debian/control), reduced to
 * package names: version constraints and arch qualifiers (:any, :native)
 * stripped, alternatives kept in order, and relations whose architecture
 * restriction ([...]) or build-profile restriction (<...>) excludes this
 * build dropped. */
#ifndef KILN_TRACE_SERVICE_CONTROL_H
#define KILN_TRACE_SERVICE_CONTROL_H

#include <stddef.h>

struct dep_group {       /* "a | b | c": any one of them */
	char **alts;
	size_t n;
};

struct dep_list {
	struct dep_group *groups;
	size_t n;
	unsigned left_out; /* control_build_depends: BUILD_ANY for a Build-Depends-Arch
			    * field the build type left out, BUILD_ALL for -Indep */
};

/* Parses one relationship field value for host architecture `arch` (e.g.
 * "amd64") with the build profiles in `profiles` (space-separated, as in
 * DEB_BUILD_PROFILES; may be NULL). Appends to out. Returns 0, or -1 with a
 * message in err. */
int deps_parse_field(const char *value, const char *arch, const char *profiles,
		     struct dep_list *out, char *err, size_t errlen);

/* Reads from the source paragraph of `file` what a build of type `parts`
 * (build_type.h) needs: Build-Depends, Build-Depends-Arch with BUILD_ANY,
 * Build-Depends-Indep with BUILD_ALL. */
int control_build_depends(const char *file, const char *arch, const char *profiles, unsigned parts,
			  struct dep_list *out, char *err, size_t errlen);

void dep_list_free(struct dep_list *l);

/* The Debian architecture of this build of kiln ("amd64", "arm64", ...). */
const char *deps_host_arch(void);

#endif
