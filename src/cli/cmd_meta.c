/* kiln meta: the metadata tools (src/meta/cli.c) on this process's stdio and
 * working directory. */
#include <fcntl.h>
#include <stdio.h>

#include "cli/commands.h"
#include "meta/cli.h"

int cmd_meta(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOFBF, 1 << 20);
	struct meta_cli_env env = { .out = stdout, .err = stderr, .dirfd = AT_FDCWD };
	int rc = meta_cli_main(argc, argv, &env);
	if (fflush(stdout) != 0 && rc == 0) {
		perror("kiln meta: writing stdout");
		rc = 1;
	}
	return rc;
}
