/* The registry's schema. Bump REGISTRY_SCHEMA_VERSION and add a migration in
 * db.c whenever it changes; docs/registry.md describes every column. */
#include "registry/internal.h"

const char registry_schema_tables_sql[] =
	"CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);\n"
	"CREATE TABLE packages(\n"
	"  id INTEGER PRIMARY KEY,\n"
	"  name TEXT NOT NULL,\n"
	"  version TEXT NOT NULL DEFAULT '',\n"
	"  arch TEXT NOT NULL DEFAULT '',\n"
	"  origin TEXT NOT NULL,\n"
	"  essential INTEGER NOT NULL DEFAULT 0,\n"
	"  multiarch TEXT NOT NULL DEFAULT '',\n"
	"  priority TEXT NOT NULL DEFAULT '',\n" /* dpkg Priority: required, important, ... */
	"  UNIQUE(name, arch));\n"
	"CREATE TABLE files(\n"
	"  canonical TEXT NOT NULL,\n"
	"  pkg INTEGER NOT NULL REFERENCES packages(id),\n"
	"  listed TEXT,\n" /* NULL when equal to canonical */
	"  kind INTEGER NOT NULL,\n"
	"  diverted INTEGER NOT NULL DEFAULT 0);\n"
	"CREATE TABLE deps(\n"
	"  pkg INTEGER NOT NULL REFERENCES packages(id),\n"
	"  type INTEGER NOT NULL,\n"
	"  clause INTEGER NOT NULL,\n"
	"  alt INTEGER NOT NULL,\n"
	"  name TEXT NOT NULL,\n"
	"  archq TEXT NOT NULL DEFAULT '',\n"
	"  version TEXT NOT NULL DEFAULT '');\n"
	"CREATE TABLE provides(\n"
	"  pkg INTEGER NOT NULL REFERENCES packages(id),\n"
	"  name TEXT NOT NULL,\n"
	"  version TEXT NOT NULL DEFAULT '');\n";

/* Migration v -> v + 1 of a database built by an older kiln (version 0,
 * an empty file, gets the whole schema instead). */
const char *registry_migration_sql(int from)
{
	switch (from) {
	case 1: /* 1 -> 2: the dpkg Priority of each package */
		return "ALTER TABLE packages ADD COLUMN priority TEXT NOT NULL DEFAULT ''";
	default:
		return "";
	}
}

const char registry_schema_indexes_sql[] =
	"CREATE INDEX files_by_canonical ON files(canonical, pkg);\n"
	"CREATE INDEX files_by_pkg ON files(pkg);\n"
	"CREATE INDEX deps_by_pkg ON deps(pkg);\n"
	"CREATE INDEX deps_by_name ON deps(name);\n"
	"CREATE INDEX provides_by_name ON provides(name);\n"
	"CREATE INDEX provides_by_pkg ON provides(pkg);\n";
