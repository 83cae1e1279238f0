/* kiln's one command-line parser, used by every subcommand (src/cli) and by
 * `kiln meta` (src/meta/cli.c), which also runs inside the meta server's
 * threads: so no global state (unlike getopt_long), and messages go to a
 * stream the caller gives. One syntax for every command:
 *
 *   --name  --name=VALUE  --name VALUE  -x  -xVALUE  -x VALUE  -abc (flags)
 *   "--" ends the options; a lone "-" is an argument (stdout, as a file)
 *   -h/--help and --version belong to every command
 *
 * and one form of usage error, a single line on the error stream, after
 * which the command exits with status 2 (CLIOPT_EXIT_USAGE):
 *
 *   kiln CMD: MESSAGE; see 'kiln CMD --help'
 */
#ifndef KILN_COMMON_CLIOPT_H
#define KILN_COMMON_CLIOPT_H

#include <stdio.h>

#define CLIOPT_EXIT_USAGE 2

struct cliopt {
	const char *name; /* long name without "--" */
	char shortname;   /* 0: none */
	const char *arg;  /* NULL: a flag; else the value's name in the help ("FILE") */
	int id;           /* what cliopt_next returns for it (> 0) */
	const char *help; /* lines separated by '\n'; NULL: accepted but not listed */
};

enum cliopt_order {
	CLIOPT_PERMUTE,  /* options anywhere among the arguments (kiln registry owner --json P) */
	CLIOPT_IN_ORDER, /* options end at the first argument (kiln trace OPTIONS COMMAND...) */
};

/* What cliopt_next returns besides an option's id. */
enum {
	CLIOPT_END = 0,      /* no more (IN_ORDER: cliopt_rest() is what follows) */
	CLIOPT_ARG = -1,     /* an argument, in p->value (PERMUTE only) */
	CLIOPT_ERROR = -2,   /* a usage error, already reported: exit CLIOPT_EXIT_USAGE */
	CLIOPT_HELP = -3,    /* -h or --help */
	CLIOPT_VERSION = -4, /* --version */
};

struct cliparse {
	const char *cmd; /* "kiln trace": the messages' prefix and the --help hint */
	const struct cliopt *opts; /* ends with an entry whose name is NULL */
	int argc;
	char **argv; /* argv[0] is the command's own name; parsing starts at 1 */
	enum cliopt_order order;
	FILE *err;
	/* After cliopt_next: */
	const char *value; /* the option's value, or the argument */
	const char *opt;   /* the option as written, for messages ("--db", "-o") */
	/* Internal state. */
	int next;
	const char *bundle; /* the rest of a "-abc" being read */
	int only_args;      /* after "--" */
	char optbuf[48];
};

void cliopt_init(struct cliparse *p, const char *cmd, const struct cliopt *opts, int argc,
		 char **argv, enum cliopt_order order, FILE *err);

/* The next option's id, or one of the CLIOPT_* values above. */
int cliopt_next(struct cliparse *p);

/* The next word, not yet read (NULL at the end); cliopt_skip() consumes it.
 * For a command's compatibility with an older spelling of an option. */
const char *cliopt_peek(const struct cliparse *p);
void cliopt_skip(struct cliparse *p);

/* IN_ORDER, after CLIOPT_END: the first argument and those after it (a NULL-
 * terminated argv tail; its first element is NULL when none is left). */
char **cliopt_rest(const struct cliparse *p);
int cliopt_nrest(const struct cliparse *p);

/* What every command answers to CLIOPT_ERROR (the exit status 2: the error
 * is already reported), CLIOPT_HELP (USAGE printed on OUT, status 0) and
 * CLIOPT_VERSION (the version on OUT, status 0). Returns that status, or -1
 * for any other ID. */
int cliopt_answer(int id, void (*usage)(FILE *out), FILE *out);

/* Reports a usage error in the one form above and returns CLIOPT_EXIT_USAGE. */
int cliopt_usage(const struct cliparse *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int cliopt_usage_for(FILE *err, const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The "options:" part of a --help text, from the table (so that --help,
 * the man pages' test and the shell completion see the same options). */
void cliopt_print_options(FILE *out, const struct cliopt *opts);

/* "kiln VERSION" and a newline (the version is baked in at build time). */
void cliopt_print_version(FILE *out);
extern const char kiln_version[];

#endif
