/* kiln shm: create, inspect and exercise a shared-memory map. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "cli/cmd_shm_demo.h"
#include "common/outfile.h"
#include "shm/shmmap.h"

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
		"SIZE takes a K, M or G suffix (powers of 1024). Keys given on the command\n"
		"line are byte strings without the terminating NUL; values are unsigned\n"
		"64-bit numbers (decimal or 0x hex).\n");
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
	static const struct option opts[] = {
		{ "initial", required_argument, NULL, 'i' },
		{ "max", required_argument, NULL, 'm' },
		{ "root-bits", required_argument, NULL, 'r' },
		{ "subtrie-bits", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct shmmap_params p = { 0 };
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		uint64_t v;
		switch (c) {
		case 'i':
		case 'm':
		case 'r':
		case 's':
			if (shm_parse_size(optarg, &v) != 0) {
				fprintf(stderr, "kiln shm create: bad number '%s'\n", optarg);
				return 2;
			}
			if (c == 'i')
				p.initial_size = v;
			else if (c == 'm')
				p.max_size = v;
			else if (c == 'r')
				p.root_bits = (unsigned)v;
			else
				p.subtrie_bits = (unsigned)v;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	struct shmmap m;
	char err[PATH_MAX + 256];
	/* A map is a new regular file: "-", an existing name (even a symlink)
	 * and a missing directory are refused up front (docs/output-files.md). */
	struct outfile_dest dest; /* a dangling symlink: its target is created */
	if (outfile_resolve(AT_FDCWD, argv[optind], OUTFILE_REGULAR_ONLY | OUTFILE_NO_REPLACE, &dest, err,
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
	       argv[optind], (unsigned long long)st.bytes_committed,
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
		fprintf(stderr, "kiln shm put: bad value '%s'\n", value);
		return 2;
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
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	const char *sub = argv[1];
	if (!strcmp(sub, "create"))
		return do_create(argc - 1, argv + 1);
	if (!strcmp(sub, "demo"))
		return shm_demo(argc - 1, argv + 1);
	if (!strcmp(sub, "stats") && argc == 3)
		return do_stats(argv[2]);
	if (!strcmp(sub, "validate") && argc == 3)
		return do_validate(argv[2]);
	if (!strcmp(sub, "dump") && argc == 3)
		return do_dump(argv[2]);
	if (!strcmp(sub, "get") && argc == 4)
		return do_get(argv[2], argv[3]);
	if (!strcmp(sub, "put") && argc == 5)
		return do_put(argv[2], argv[3], argv[4]);
	if (strcmp(sub, "stats") && strcmp(sub, "validate") && strcmp(sub, "dump") &&
	    strcmp(sub, "get") && strcmp(sub, "put"))
		fprintf(stderr, "kiln shm: unknown subcommand '%s'\n", sub);
	usage(stderr);
	return 2;
}
