/* kiln's version, baked in at build time: the Makefile writes it to
 * $(BUILD)/gen/kiln_version.h from debian/changelog and `git describe`. */
#include "common/cliopt.h"
#include "kiln_version.h"

const char kiln_version[] = KILN_VERSION;
