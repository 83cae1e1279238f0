/* The run directory and the build's processes at the end of a run: what
 * `kiln trace` and, if kiln itself dies, the trace server clean up. */
#ifndef KILN_TRACE_SERVICE_RUNDIR_H
#define KILN_TRACE_SERVICE_RUNDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Where the run directory is made: the directory every traced process maps
 * its verdict cache and statistics file from, so a memory file system when
 * there is one ($XDG_RUNTIME_DIR, else /dev/shm: no page-cache writeback of
 * the map, no file-system work when a process first writes a page of the
 * statistics file), else $TMPDIR, else /tmp; a directory too long for the
 * run directory's socket path (a sockaddr_un) is passed over. Returns a
 * static string. */
const char *trace_rundir_base(void);
/* The run directory kiln trace makes in that base (mkdtemp's template), and
 * its server's socket in it. */
#define TRACE_RUNDIR_TEMPLATE "kiln-trace.XXXXXX"
#define TRACE_RUNDIR_SOCKET "socket"
/* The same choice among given candidates (NULL: none): one of them. */
const char *trace_rundir_base_of(const char *runtime_dir, const char *shm_dir, const char *tmpdir);

/* Removes the run directory and everything in it (never following a
 * symlink). 0, or -1 with a message naming the path in err. */
int trace_rundir_remove(const char *dir, char *err, size_t errlen);

/* Ends every process of the build: the process group `pgid` (if > 0) and
 * every process of this user whose environment names this run directory
 * (KILN_RUN_DIR=dir: kiln puts it into every exec of the build, so a
 * double-forked daemon that left the group is found too). The scan repeats
 * until two in a row find none. Returns how many processes outside the
 * group the scans killed; *group says whether the group's kill reached any
 * process. */
size_t trace_end_build(const char *dir, pid_t pgid, bool *group);

#endif
