/* Unit-test support: a registry database imported from manifest text. */
#ifndef KILN_TESTS_MANIFEST_DB_H
#define KILN_TESTS_MANIFEST_DB_H

#include "registry/import.h"

/* Writes `text` (kiln's manifest format) to the file `manifest` and imports
 * it into the database `db`: 0, or -1 with why on stderr. *r gets the
 * import's counts when r is not NULL. */
int manifest_db(const char *manifest, const char *text, const char *db,
		struct registry_import_result *r);

#endif
