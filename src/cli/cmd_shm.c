/* kiln shm: create, inspect and exercise a shared-memory map. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "cli/cmd_shm_demo.h"
#include "common/cliopt.h"
#include "common/outfile.h"
#include "shm/shmmap.h"

#define CMD "kiln shm"

enum { OPT_INITIAL = 1, OPT_MAX, OPT_ROOT_BITS, OPT_SUBTRIE_BITS };
static const struct cliopt create_opts[] = {
	{ "initial", 0, "SIZE", OPT_INITIAL, "create: the file's first size" },
	{ "max", 0, "SIZE", OPT_MAX, "create: the most it may grow to" },
	{ "root-bits", 0, "N", OPT_ROOT_BITS, "create: 2^N slots in the root table" },
	{ "subtrie-bits", 0, "N", OPT_SUBTRIE_BITS, "create: 2^N slots in each subtrie" },
	{ 0 },
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: kiln shm create PATH [--initial SIZE] [--max SIZE] [--root-bits N] [--subtrie-bits N]\n"
		"       kiln shm stats PATH\n"
		"       kiln shm validate PATH\n"
		"       kiln shm dump PATH\n"
		"       kiln shm get PATH KEY\n"
		"       kiln shm put PATH KEY VALUE\n"
		"       kiln shm demo [--procs N] [--threads N] [--keys N] [--map PATH] [--max SIZE]\n"
		"\n"
		"The shared-memory map of trace mode's verdict cache (docs/shm.md), for kiln's\n"
		"developers. SIZE takes a K, M or G suffix (powers of 1024). Keys given on the\n"
		"command line are byte strings without the terminating NUL; values are\n"
		"unsigned 64-bit numbers (decimal or 0x hex); 'kiln shm demo --help' has the\n"
		"demo's options.\n\noptions:\n");
	cliopt_print_options(out, create_opts);
}

int shm_parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *s == '-')
		return -1;
	unsigned shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	}
	if (*end == 'i' && end[1] == 'B')
		end += 2;
	else if (*end == 'B')
		end++;
	if (*end || (shift && v > (~0ull >> shift)))
		return -1;
	*out = v << shift;
	return 0;
}

static int attach_or_complain(struct shmmap *m, const char *path, int mode)
{
	char err[512];
	if (shmmap_attach(m, path, mode, err, sizeof err) != 0) {
		fprintf(stderr, "kiln shm: %s\n", err);
		return -1;
	}
	return 0;
}

static int do_create(int argc, char **argv)
{
	const struct cliopt *opts = create_opts;
	struct shmmap_params p = { 0 };
	const char *path = NULL;
	struct cliparse cp;
	cliopt_init(&cp, CMD, opts, argc, argv, CLIOPT_PERMUTE, stderr);
	for (int id; (id = cliopt_next(&cp)) != CLIOPT_END;) {
		uint64_t v;
		switch (id) {
		case CLIOPT_ERROR:
		case CLIOPT_HELP:
		case CLIOPT_VERSION:
			return cliopt_answer(id, usage, stdout);
		case CLIOPT_ARG:
			if (path)
				return cliopt_usage(&cp, "create: unexpected argument '%s'", cp.value);
			path = cp.value;
			break;
		default:
			if (shm_parse_size(cp.value, &v) != 0)
				return cliopt_usage(&cp, "create: %s: bad number '%s'", cp.opt, cp.value);
			if (id == OPT_INITIAL)
				p.initial_size = v;
			else if (id == OPT_MAX)
				p.max_size = v;
			else if (id == OPT_ROOT_BITS)
				p.root_bits = (unsigned)v;
			else
				p.subtrie_bits = (unsigned)v;
		}
	}
	if (!path)
		return cliopt_usage(&cp, "create: name the map's PATH");
	struct shmmap m;
	char err[PATH_MAX + 256];
	/* A map is a new regular file: "-", an existing name (even a symlink)
	 * and a missing directory are refused up front (docs/output-files.md). */
	struct outfile_dest dest; /* a dangling symlink: its target is created */
	if (outfile_resolve(AT_FDCWD, path, OUTFILE_REGULAR_ONLY | OUTFILE_NO_REPLACE, &dest, err,
			    sizeof err)) {
		fprintf(stderr, "kiln shm create: %s\n", err);
		return 1;
	}
	if (shmmap_create(&m, dest.path, &p, err, sizeof err) != 0) {
		fprintf(stderr, "kiln shm create: %s\n", err);
		return 1;
	}
	struct shmmap_stats st;
	shmmap_stats(&m, &st);
	printf("%s: created, %llu bytes committed, maximum %llu, root 2^%u slots, subtries 2^%u\n",
	       path, (unsigned long long)st.bytes_committed,
	       (unsigned long long)st.max_size, st.root_bits, st.subtrie_bits);
	shmmap_detach(&m);
	return 0;
}

static int do_stats(const char *path)
{
	struct shmmap m;
	if (attach_or_complain(&m, path, SHMMAP_RDONLY) != 0)
		return 1;
	struct shmmap_stats st;
	shmmap_stats(&m, &st);
	struct stat sb;
	long long fsize = fstat(m.fd, &sb) == 0 ? (long long)sb.st_size : -1;
	printf("path            %s\n", path);
	printf("version         %u\n", st.version);
	printf("entries         %llu\n", (unsigned long long)st.entries);
	printf("subtries        %llu\n", (unsigned long long)st.subtries);
	printf("bytes_used      %llu\n", (unsigned long long)st.bytes_used);
	printf("bytes_committed %llu\n", (unsigned long long)st.bytes_committed);
	printf("file_size       %lld\n", fsize);
	printf("max_size        %llu\n", (unsigned long long)st.max_size);
	printf("root_bits       %u\n", st.root_bits);
	printf("subtrie_bits    %u\n", st.subtrie_bits);
	shmmap_detach(&m);
	return 0;
}

static int do_validate(const char *path)
{
	struct shmmap m;
	if (attach_or_complain(&m, path, SHMMAP_RDONLY) != 0)
		return 1;
	char err[512];
	long long n = shmmap_validate(&m, err, sizeof err);
	shmmap_detach(&m);
	if (n < 0) {
		fprintf(stderr, "kiln shm validate: %s: corrupt: %s\n", path, err);
		return 1;
	}
	printf("%s: ok, %lld entries\n", path, n);
	return 0;
}

static void put_escaped(const unsigned char *k, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (k[i] >= 0x20 && k[i] < 0x7f && k[i] != '\\')
			putchar(k[i]);
		else
			printf("\\x%02x", k[i]);
	}
}

static int dump_one(const void *key, size_t len, uint64_t value, void *ctx)
{
	(void)ctx;
	printf("0x%016llx\t", (unsigned long long)value);
	put_escaped(key, len);
	putchar('\n');
	return 0;
}

static int do_dump(const char *path)
{
	struct shmmap m;
	if (attach_or_complain(&m, path, SHMMAP_RDONLY) != 0)
		return 1;
	int rc = shmmap_iterate(&m, dump_one, NULL);
	shmmap_detach(&m);
	if (rc < 0) {
		fprintf(stderr, "kiln shm dump: %s: corrupt structure, dump incomplete "
			"(run 'kiln shm validate %s')\n", path, path);
		return 1;
	}
	return 0;
}

static int do_get(const char *path, const char *key)
{
	struct shmmap m;
	if (attach_or_complain(&m, path, SHMMAP_RDONLY) != 0)
		return 1;
	uint64_t v;
	int hit = shmmap_lookup(&m, key, strlen(key), &v);
	shmmap_detach(&m);
	if (!hit) {
		fprintf(stderr, "kiln shm get: %s: no entry for '%s'\n", path, key);
		return 1;
	}
	printf("%llu\n", (unsigned long long)v);
	return 0;
}

static int do_put(const char *path, const char *key, const char *value)
{
	uint64_t v;
	char *end;
	errno = 0;
	v = strtoull(value, &end, 0);
	if (errno || *end || end == value || *value == '-') {
		return cliopt_usage_for(stderr, CMD, "put: bad value '%s'", value);
	}
	struct shmmap m;
	if (attach_or_complain(&m, path, SHMMAP_RDWR) != 0)
		return 1;
	uint64_t w = 0;
	enum shmmap_status s = shmmap_insert(&m, key, strlen(key), v, &w);
	shmmap_detach(&m);
	switch (s) {
	case SHMMAP_INSERTED:
		printf("inserted %llu\n", (unsigned long long)w);
		return 0;
	case SHMMAP_EXISTS:
		printf("exists %llu\n", (unsigned long long)w);
		return 0;
	default:
		fprintf(stderr, "kiln shm put: %s: %s\n", path, shmmap_status_name(s));
		return 1;
	}
}

int cmd_shm(int argc, char **argv)
{
	static const struct {
		const char *name;
		int nargs; /* after the name; -1: its own options */
	} subs[] = { { "create", -1 }, { "demo", -1 }, { "stats", 1 }, { "validate", 1 },
		     { "dump", 1 },     { "get", 2 },	{ "put", 3 } };
	static const char *const argnames[] = { "PATH", "KEY", "VALUE" };
	static const struct cliopt none[] = { { 0 } };
	struct cliparse p;
	cliopt_init(&p, CMD, none, argc, argv, CLIOPT_IN_ORDER, stderr);
	int first = cliopt_answer(cliopt_next(&p), usage, stdout);
	if (first >= 0)
		return first;
	char **rest = cliopt_rest(&p);
	int n = cliopt_nrest(&p);
	if (n < 1)
		return cliopt_usage(&p, "no command given");
	const char *sub = rest[0];
	size_t i = 0;
	while (i < sizeof subs / sizeof subs[0] && strcmp(sub, subs[i].name))
		i++;
	if (i == sizeof subs / sizeof subs[0])
		return cliopt_usage(&p, "unknown command '%s'", sub);
	if (subs[i].nargs < 0)
		return !strcmp(sub, "create") ? do_create(n, rest) : shm_demo(n, rest);
	/* The others take no options but the common ones. */
	struct cliparse q;
	char **args = calloc((size_t)n + 1, sizeof *args);
	if (!args)
		return 1;
	int nargs = 0, rc = -1;
	cliopt_init(&q, CMD, none, n, rest, CLIOPT_PERMUTE, stderr);
	for (int id; rc < 0 && (id = cliopt_next(&q)) != CLIOPT_END;) {
		if (id == CLIOPT_ARG)
			args[nargs++] = (char *)q.value;
		else
			rc = cliopt_answer(id, usage, stdout);
	}
	if (rc < 0 && nargs < subs[i].nargs)
		rc = cliopt_usage(&q, "%s: name its %s", sub, argnames[nargs]);
	else if (rc < 0 && nargs > subs[i].nargs)
		rc = cliopt_usage(&q, "%s: unexpected argument '%s'", sub, args[subs[i].nargs]);
	if (rc < 0) {
		if (!strcmp(sub, "stats"))
			rc = do_stats(args[0]);
		else if (!strcmp(sub, "validate"))
			rc = do_validate(args[0]);
		else if (!strcmp(sub, "dump"))
			rc = do_dump(args[0]);
		else if (!strcmp(sub, "get"))
			rc = do_get(args[0], args[1]);
		else
			rc = do_put(args[0], args[1], args[2]);
	}
	free(args);
	return rc;
}
