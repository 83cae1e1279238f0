#include "trace/service/build_type.h"

#include <stddef.h>
#include <string.h>

static const struct {
	const char *name;
	unsigned parts;
} names[] = {
	{ "full", BUILD_FULL },
	{ "binary", BUILD_ANY | BUILD_ALL },
	{ "source", BUILD_SOURCE },
	{ "any", BUILD_ANY },
	{ "all", BUILD_ALL },
};
#define NNAMES (sizeof names / sizeof *names)

unsigned build_type_parse(const char *list)
{
	unsigned parts = 0;
	const char *s = list;
	do {
		size_t n = strcspn(s, ",");
		size_t i = 0;
		while (i < NNAMES && (strlen(names[i].name) != n || strncmp(names[i].name, s, n)))
			i++;
		if (i == NNAMES)
			return 0;
		parts |= names[i].parts;
		s += n;
	} while (*s++ == ',');
	return parts;
}

unsigned build_type_of_command(const char *const *argv)
{
	if (!argv || !argv[0])
		return 0;
	const char *base = strrchr(argv[0], '/');
	base = base ? base + 1 : argv[0];
	if (strcmp(base, "dpkg-buildpackage") && strcmp(base, "debuild"))
		return 0;
	static const struct {
		const char *opt;
		unsigned parts;
	} shorts[] = {
		{ "-b", BUILD_ANY | BUILD_ALL }, { "-B", BUILD_ANY }, { "-A", BUILD_ALL },
		{ "-S", BUILD_SOURCE }, { "-F", BUILD_FULL }, { "-g", BUILD_SOURCE | BUILD_ALL },
		{ "-G", BUILD_SOURCE | BUILD_ANY },
	};
	unsigned parts = BUILD_FULL;
	for (size_t i = 1; argv[i]; i++) {
		if (!strncmp(argv[i], "--build=", 8)) {
			unsigned p = build_type_parse(argv[i] + 8);
			if (p)
				parts = p;
			continue;
		}
		for (size_t k = 0; k < sizeof shorts / sizeof *shorts; k++)
			if (!strcmp(argv[i], shorts[k].opt))
				parts = shorts[k].parts;
	}
	return parts;
}

const char *build_type_name(unsigned parts)
{
	static const char *const combos[8] = {
		"none", "source", "any", "source,any", "all", "source,all", "binary", "full",
	};
	return combos[parts & BUILD_FULL];
}
