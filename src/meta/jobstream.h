/* The output streams of a forwarded job: a FILE over one of the client's
 * descriptors (received with SCM_RIGHTS) that stops writing once the job is
 * cancelled, even when the reader of a pipe has stalled. */
#ifndef KILN_META_JOBSTREAM_H
#define KILN_META_JOBSTREAM_H

#include <stdatomic.h>
#include <stdio.h>

/* Owns fd (-1: a descriptor the client did not have open; writes fail with
 * EBADF, as they would in the client). A write after *cancel is set fails
 * with ECANCELED. EPIPE sets *broken and *cancel: the client would have died
 * of SIGPIPE there, so nothing more is written anywhere. buffered: fully
 * buffered (stdout) or unbuffered (stderr), as kiln's own streams are.
 * Returns NULL when out of memory (fd is closed then). */
FILE *meta_job_stream(int fd, atomic_int *cancel, atomic_int *broken, int buffered);

#endif
