#include "manifest_db.h"

#include <stdio.h>

int manifest_db(const char *manifest, const char *text, const char *db,
		struct registry_import_result *r)
{
	FILE *f = fopen(manifest, "w");
	if (!f) {
		perror(manifest);
		return -1;
	}
	int bad = fputs(text, f) < 0;
	if (fclose(f) != 0 || bad) {
		perror(manifest);
		return -1;
	}
	struct registry_import_opts o = { 0 };
	struct registry_import_result mine;
	char err[2048];
	const char *files[] = { manifest };
	if (registry_import_manifests(db, files, 1, &o, r ? r : &mine, err, sizeof err)) {
		fprintf(stderr, "import: %s\n", err);
		return -1;
	}
	return 0;
}
