/* kiln meta: the metadata tools (src/meta/cli.c) on this process's stdio and
 * working directory, forwarded to the meta server in KILN_META_SOCKET when
 * there is one; and the server's own commands (src/cli/cmd_meta_server.c). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd_meta_server.h"
#include "cli/commands.h"
#include "ipc/meta_proto.h"
#include "meta/cli.h"
#include "meta/forward.h"

int cmd_meta(int argc, char **argv)
{
	if (argc >= 2) {
		if (!strcmp(argv[1], "run"))
			return cmd_meta_run(argc - 1, argv + 1);
		if (!strcmp(argv[1], "serve"))
			return cmd_meta_serve(argc - 1, argv + 1);
		if (!strcmp(argv[1], "stats"))
			return cmd_meta_stats(argc - 1, argv + 1);
		if (!strcmp(argv[1], "stop"))
			return cmd_meta_stop(argc - 1, argv + 1);
	}
	/* Under kiln trace the server's file accesses would escape the trace's
	 * checks: a traced build runs its tools itself; so does a command whose
	 * output is one of this process's own descriptors (/dev/stdout...). */
	const char *sock = getenv(KILN_ENV_META_SOCKET);
	if (sock && *sock && !getenv(KILN_ENV_SOCKET) && meta_cli_forwardable(argc, argv)) {
		int rc = meta_forward(sock, argc, argv);
		if (rc >= 0)
			return rc;
	}
	setvbuf(stdout, NULL, _IOFBF, 1 << 20);
	struct meta_cli_env env = { .out = stdout, .err = stderr, .dirfd = AT_FDCWD };
	int rc = meta_cli_main(argc, argv, &env);
	if (fflush(stdout) != 0 && rc == 0) {
		perror("kiln meta: writing stdout");
		rc = 1;
	}
	return rc;
}
