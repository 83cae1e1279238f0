/* The one command-line parser (common/cliopt.c): every syntax of an option,
 * the two orders, the one form of usage error, and no global state (two
 * parsers interleaved give the same answers as each alone). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cliopt.h"

enum { O_FLAG = 1, O_OUT, O_DB, O_Q };

static const struct cliopt opts[] = {
	{ "flag", 'f', NULL, O_FLAG, "a flag" },
	{ "output", 'o', "FILE", O_OUT, "a file\nsecond line" },
	{ "db", 0, "FILE", O_DB, "a database" },
	{ "quiet", 'q', NULL, O_Q, NULL },
	{ 0 },
};

struct result {
	char log[1024]; /* what the parser returned, in order */
	char err[1024];
	char **rest;
};

/* Parses ARGV (NULL-terminated, argv[0] the command) and logs each result:
 * "F" a flag, "O=v" an option with value v, "A=v" an argument, "E" an error,
 * "H" help, "V" version. */
static struct result parse(enum cliopt_order order, char **argv)
{
	struct result r;
	memset(&r, 0, sizeof r);
	int argc = 0;
	while (argv[argc])
		argc++;
	char *buf = NULL;
	size_t len = 0;
	FILE *err = open_memstream(&buf, &len);
	assert_non_null(err);
	struct cliparse p;
	cliopt_init(&p, "kiln test", opts, argc, argv, order, err);
	size_t n = 0;
	for (int id; (id = cliopt_next(&p)) != CLIOPT_END;) {
		char item[128];
		switch (id) {
		case O_FLAG: snprintf(item, sizeof item, "F "); break;
		case O_Q: snprintf(item, sizeof item, "Q "); break;
		case O_OUT: snprintf(item, sizeof item, "O=%s ", p.value); break;
		case O_DB: snprintf(item, sizeof item, "D=%s ", p.value); break;
		case CLIOPT_ARG: snprintf(item, sizeof item, "A=%s ", p.value); break;
		case CLIOPT_HELP: snprintf(item, sizeof item, "H "); break;
		case CLIOPT_VERSION: snprintf(item, sizeof item, "V "); break;
		default: snprintf(item, sizeof item, "E "); break;
		}
		n += (size_t)snprintf(r.log + n, sizeof r.log - n, "%s", item);
		if (id == CLIOPT_ERROR)
			break;
	}
	r.rest = cliopt_rest(&p);
	fclose(err);
	snprintf(r.err, sizeof r.err, "%s", buf ? buf : "");
	free(buf);
	return r;
}

#define ARGV(...) ((char *[]){ "test", __VA_ARGS__, NULL })

static void every_value_syntax(void **state)
{
	(void)state;
	struct result r = parse(CLIOPT_PERMUTE, ARGV("--output", "a", "--output=b", "-oc", "-o", "d", "-o", "-"));
	assert_string_equal(r.log, "O=a O=b O=c O=d O=- ");
	assert_string_equal(r.err, "");
	/* "--output=" is an empty value; a value may start with '-' */
	r = parse(CLIOPT_PERMUTE, ARGV("--output=", "--db", "--flag"));
	assert_string_equal(r.log, "O= D=--flag ");
}

static void bundled_flags_and_a_value_at_the_end(void **state)
{
	(void)state;
	struct result r = parse(CLIOPT_PERMUTE, ARGV("-fq", "-fqofile", "-qf", "x"));
	assert_string_equal(r.log, "F Q F Q O=file Q F A=x ");
}

static void permute_takes_options_anywhere(void **state)
{
	(void)state;
	struct result r = parse(CLIOPT_PERMUTE, ARGV("a", "--flag", "b", "-", "--", "--flag", "-o"));
	assert_string_equal(r.log, "A=a F A=b A=- A=--flag A=-o ");
}

static void in_order_stops_at_the_first_argument(void **state)
{
	(void)state;
	struct result r = parse(CLIOPT_IN_ORDER, ARGV("--flag", "make", "--flag", "-j2"));
	assert_string_equal(r.log, "F ");
	assert_string_equal(r.rest[0], "make");
	assert_string_equal(r.rest[1], "--flag");
	assert_null(r.rest[3]);
	r = parse(CLIOPT_IN_ORDER, ARGV("-o", "x", "--", "--flag"));
	assert_string_equal(r.log, "O=x ");
	assert_string_equal(r.rest[0], "--flag");
	r = parse(CLIOPT_IN_ORDER, ARGV("--flag", "--"));
	assert_null(r.rest[0]);
}

static void help_and_version_belong_to_every_command(void **state)
{
	(void)state;
	struct result r = parse(CLIOPT_PERMUTE, ARGV("--help", "-h", "--version"));
	assert_string_equal(r.log, "H H V ");
}

static void usage_errors_are_one_line(void **state)
{
	(void)state;
	const struct {
		char **argv;
		const char *err;
	} cases[] = {
		{ ARGV("--frob"), "kiln test: unknown option '--frob'; see 'kiln test --help'\n" },
		{ ARGV("--frob=1"), "kiln test: unknown option '--frob'; see 'kiln test --help'\n" },
		{ ARGV("-fZ"), "kiln test: unknown option '-Z'; see 'kiln test --help'\n" },
		{ ARGV("--flag=yes"), "kiln test: option '--flag' takes no value; see 'kiln test --help'\n" },
		{ ARGV("--db"), "kiln test: option '--db' needs a value (FILE); see 'kiln test --help'\n" },
		{ ARGV("-fo"), "kiln test: option '-o' needs a value (FILE); see 'kiln test --help'\n" },
		/* no abbreviations: a later option of the same prefix must not
		 * change what an old command line means */
		{ ARGV("--out", "x"), "kiln test: unknown option '--out'; see 'kiln test --help'\n" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct result r = parse(CLIOPT_PERMUTE, cases[i].argv);
		assert_non_null(strstr(r.log, "E "));
		assert_string_equal(r.err, cases[i].err);
	}
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_int_equal(cliopt_usage_for(f, "kiln x", "no %s given", "PATH"), CLIOPT_EXIT_USAGE);
	fclose(f);
	assert_string_equal(buf, "kiln x: no PATH given; see 'kiln x --help'\n");
	free(buf);
}

static void two_parsers_interleaved(void **state)
{
	(void)state;
	char **a = ARGV("-o", "1", "x", "--flag");
	char **b = ARGV("--db=2", "y", "-q");
	struct cliparse pa, pb;
	cliopt_init(&pa, "a", opts, 5, a, CLIOPT_PERMUTE, stderr);
	cliopt_init(&pb, "b", opts, 4, b, CLIOPT_PERMUTE, stderr);
	assert_int_equal(cliopt_next(&pa), O_OUT);
	assert_int_equal(cliopt_next(&pb), O_DB);
	assert_string_equal(pa.value, "1");
	assert_string_equal(pb.value, "2");
	assert_int_equal(cliopt_next(&pa), CLIOPT_ARG);
	assert_int_equal(cliopt_next(&pb), CLIOPT_ARG);
	assert_string_equal(pa.value, "x");
	assert_string_equal(pb.value, "y");
	assert_int_equal(cliopt_next(&pb), O_Q);
	assert_int_equal(cliopt_next(&pa), O_FLAG);
	assert_int_equal(cliopt_next(&pa), CLIOPT_END);
	assert_int_equal(cliopt_next(&pb), CLIOPT_END);
}

static void peek_and_skip(void **state)
{
	(void)state;
	char **a = ARGV("--flag", "word", "--", "cmd");
	struct cliparse p;
	cliopt_init(&p, "a", opts, 5, a, CLIOPT_IN_ORDER, stderr);
	assert_int_equal(cliopt_next(&p), O_FLAG);
	assert_string_equal(cliopt_peek(&p), "word");
	cliopt_skip(&p);
	assert_int_equal(cliopt_next(&p), CLIOPT_END);
	assert_string_equal(cliopt_rest(&p)[0], "cmd");
}

static void the_help_lists_the_table(void **state)
{
	(void)state;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	cliopt_print_options(f, opts);
	fclose(f);
	assert_non_null(strstr(buf, "  -f, --flag                a flag\n"));
	assert_non_null(strstr(buf, "  -o, --output FILE         a file\n                            second line\n"));
	assert_non_null(strstr(buf, "      --db FILE             a database\n"));
	assert_null(strstr(buf, "quiet")); /* NULL help: accepted, not listed */
	assert_non_null(strstr(buf, "--help"));
	assert_non_null(strstr(buf, "--version"));
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_value_syntax),
		cmocka_unit_test(bundled_flags_and_a_value_at_the_end),
		cmocka_unit_test(permute_takes_options_anywhere),
		cmocka_unit_test(in_order_stops_at_the_first_argument),
		cmocka_unit_test(help_and_version_belong_to_every_command),
		cmocka_unit_test(usage_errors_are_one_line),
		cmocka_unit_test(two_parsers_interleaved),
		cmocka_unit_test(peek_and_skip),
		cmocka_unit_test(the_help_lists_the_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
