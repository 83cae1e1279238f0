/* `kiln meta` as a library function, so that the same command line can run
 * in the `kiln` process or, forwarded, in a server that keeps models warm:
 * no global state (kiln's own argument parser, common/cliopt.h, not getopt),
 * output and messages to the given streams, relative paths against a given directory fd, and the
 * model obtained through an optional hook (a cache). */
#ifndef KILN_META_CLI_H
#define KILN_META_CLI_H

#include <stdatomic.h>
#include <stdio.h>

#include "meta/model.h"

struct meta_cli_env {
	FILE *out;   /* tool output when not written to files */
	FILE *err;   /* messages */
	int dirfd;   /* relative paths (BINARY, -o, --out-dir) resolve here; AT_FDCWD */
	/* Optional model cache: get returns a model for PATH (0) or fails with
	 * err set (-1); put hands it back when the command is done. When NULL,
	 * the model is built and freed by the command. */
	int (*get_model)(void *ctx, const char *path, const struct meta_options *opts,
			 struct meta_model **out, struct meta_err *err);
	void (*put_model)(void *ctx, struct meta_model *m);
	void *ctx;
	/* Optional: set (by another thread) to cancel the command: it then
	 * stops before running the tools and never renames an output file
	 * into place. */
	const atomic_int *cancel;
};

/* Runs `kiln meta ARGS...` (argv[0] is "meta"). Returns the exit status:
 * 0 success, 1 a file could not be processed or written, 2 usage. */
int meta_cli_main(int argc, char **argv, const struct meta_cli_env *env);

/* Whether the command line can run in a meta server on this process's
 * behalf: not when an output (-o FILE, or --out-dir DIR) names one of this
 * process's own descriptors or its terminal (/dev/stdout, /dev/fd/N,
 * /proc/self/..., /dev/tty, or a symlink to one), which the server would
 * resolve to its own. Unparsable command lines are forwardable (the server
 * reports them as a standalone run would). */
int meta_cli_forwardable(int argc, char **argv);

#endif
