#ifndef KILN_SERVER_IDENT_H
#define KILN_SERVER_IDENT_H

#include <stddef.h>

/* This kiln build's identity: the GNU build id of the running executable
 * (or, linked without one, a fixed string of its version and build time).
 * Sets *len; the bytes are static. */
const unsigned char *kiln_build_ident(size_t *len);

#endif
