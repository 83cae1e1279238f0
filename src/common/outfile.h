/* Output files named by the user (kiln trace -o/--log, kiln registry -o, kiln meta
 * -o/--out-dir, the registry database, shm maps), written by one set of rules
 * (docs/output-files.md):
 *
 *   "-"                      standard output (the caller's fd)
 *   /dev/stdout, /dev/fd/N   that open fd of this process, written as is
 *   a symlink                followed; the target is written (the link stays)
 *   FIFO, device, socket...  opened and written through, never replaced
 *   a regular file, or none  written to an unnamed temporary file (O_TMPFILE)
 *                            in the same directory, linked and renamed over the
 *                            name at the end; an existing file's mode is kept
 *
 * outfile_check() answers "can this be written?" without creating anything,
 * so that commands refuse a bad path before they start their work. */
#ifndef KILN_COMMON_OUTFILE_H
#define KILN_COMMON_OUTFILE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

enum outfile_kind {
	OUTFILE_STDOUT,  /* "-", or a link to one of our own fds (/dev/stdout) */
	OUTFILE_THROUGH, /* an existing non-regular file, written in place */
	OUTFILE_REPLACE, /* a regular file or a new one: temporary file + rename */
};

/* Where PATH really leads: symlinks followed (also dangling ones: their
 * target is what gets created). */
struct outfile_dest {
	enum outfile_kind kind;
	int fdnum;            /* OUTFILE_STDOUT: that fd, or -1: the caller's stdout */
	bool magic;           /* OUTFILE_THROUGH via another /proc magic link */
	bool exists;          /* the final name exists */
	mode_t mode;          /* its st_mode when it exists */
	uid_t uid;
	gid_t gid;
	char dir[PATH_MAX];   /* directory of the final name (as a path) */
	char name[NAME_MAX + 1]; /* final name in dir */
	char path[PATH_MAX];  /* dir/name: what is written (== PATH without symlinks) */
};

/* Flags for outfile_resolve / outfile_check / outfile_open. */
enum {
	OUTFILE_REGULAR_ONLY = 1, /* refuse "-" and non-regular files (a database, a map) */
	OUTFILE_NO_REPLACE = 2,   /* refuse an existing file; create a new one only */
};

/* Resolves PATH (relative to DIRFD, or AT_FDCWD) and checks that it can be
 * written under FLAGS: its directory exists and is writable, it is not a
 * directory, a non-regular file is writable. Creates and changes nothing.
 * Returns 0, or -1 with a message naming PATH in err. */
int outfile_resolve(int dirfd, const char *path, int flags, struct outfile_dest *d,
		    char *err, size_t errlen);
int outfile_check(int dirfd, const char *path, int flags, char *err, size_t errlen);

struct outfile {
	struct outfile_dest d;
	int flags;
	int fd;                    /* write here (for "-": the caller's fd, not owned) */
	int dirfd;                 /* OUTFILE_REPLACE: the directory, O_PATH */
	char tmp[NAME_MAX + 1];    /* a named temporary file when O_TMPFILE failed */
	const char *shown;         /* PATH as the user gave it, for messages */
	FILE *f;                   /* outfile_stream() */
};

/* Opens PATH for writing (outfile_resolve's rules); STDOUT_FD is what "-"
 * writes to. Returns 0, or -1 with err set. */
int outfile_open(struct outfile *o, int dirfd, const char *path, int stdout_fd, int flags,
		 char *err, size_t errlen);

/* A stdio stream on o->fd (closed by commit/abort; for "-" the fd stays open). */
FILE *outfile_stream(struct outfile *o, char *err, size_t errlen);

/* outfile_open + outfile_stream: NULL (nothing left open) on error. */
FILE *outfile_fopen(struct outfile *o, int dirfd, const char *path, int stdout_fd, int flags,
		    char *err, size_t errlen);

/* Finishes: flushes the stream, and for OUTFILE_REPLACE gives the data its
 * name (rename over an existing regular file; a name that became something
 * else meanwhile is not replaced). On error nothing is left behind and the
 * old file is untouched. Returns 0 or -1 with err set. */
int outfile_commit(struct outfile *o, char *err, size_t errlen);

/* Drops the output: closes, removes any temporary file. */
void outfile_abort(struct outfile *o);

#endif
