#include "trace/service/postinst_dirs.h"

#include <stdio.h>
#include <string.h>

/* Read off the packages' postinst scripts (bookworm): each makes these with
 * mkdir when they are missing. Not here: ocaml-base's versioned
 * /usr/local/lib/ocaml/4.13.1/stublibs (the registry holds no versions). */
static const struct {
	const char *pkg;
	const char *dirs[POSTINST_DIRS_MAX];
} table[] = {
	{ "ca-certificates", { "/usr/local/share/ca-certificates" } },
	{ "fontconfig-config", { "/usr/local/share/fonts" } },
	{ "r-base-core", { "/usr/local/lib/R", "/usr/local/lib/R/site-library" } },
	{ "sgml-base",
	  { "/usr/local/share/sgml", "/usr/local/share/sgml/declaration", "/usr/local/share/sgml/dtd",
	    "/usr/local/share/sgml/entities", "/usr/local/share/sgml/misc",
	    "/usr/local/share/sgml/stylesheet" } },
	{ "tex-common", { "/usr/local/share/texmf" } },
	{ "xml-core",
	  { "/usr/local/share/xml", "/usr/local/share/xml/declaration",
	    "/usr/local/share/xml/entities", "/usr/local/share/xml/misc",
	    "/usr/local/share/xml/schema" } },
};

/* python3.N-minimal makes /usr/local/lib/python3.N/dist-packages. */
static size_t python_dirs(const char *name, const char *out[POSTINST_DIRS_MAX], char *buf,
			  size_t cap)
{
	if (strncmp(name, "python3.", 8))
		return 0;
	const char *v = name + 8;
	size_t vl = strspn(v, "0123456789");
	if (!vl || strcmp(v + vl, "-minimal"))
		return 0;
	int n = snprintf(buf, cap, "/usr/local/lib/python3.%.*s", (int)vl, v);
	if (n < 0 || (size_t)n + 1 >= cap)
		return 0;
	char *site = buf + n + 1;
	size_t left = cap - (size_t)n - 1;
	int m = snprintf(site, left, "/usr/local/lib/python3.%.*s/dist-packages", (int)vl, v);
	if (m < 0 || (size_t)m >= left)
		return 0;
	out[0] = buf;
	out[1] = site;
	return 2;
}

size_t postinst_dirs_of(const char *name, const char *out[POSTINST_DIRS_MAX], char *buf,
			size_t cap)
{
	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
		if (strcmp(table[i].pkg, name))
			continue;
		size_t n = 0;
		while (n < POSTINST_DIRS_MAX && table[i].dirs[n])
			out[n] = table[i].dirs[n], n++;
		return n;
	}
	return python_dirs(name, out, buf, cap);
}

int postinst_dirs_add(struct policy *p, struct kiln_registry *reg,
		      const struct registry_pkgset *closure, char *err, size_t errlen)
{
	for (size_t i = 0; i < closure->n; i++) {
		char name[256], buf[128];
		registry_package_name(reg, closure->ids[i], name, sizeof name);
		const char *dirs[POSTINST_DIRS_MAX];
		size_t n = postinst_dirs_of(name, dirs, buf, sizeof buf);
		for (size_t k = 0; k < n; k++)
			if (policy_add_skeleton(p, dirs[k], err, errlen) < 0)
				return -1;
	}
	return 0;
}
