/* kiln's configuration files (man 5 kiln): /etc/kiln/config, then
 * ~/.config/kiln/config ($XDG_CONFIG_HOME), or only $KILN_CONFIG when that
 * is set ("" for none). Lines of "key = value", '#' comments. A later file's
 * value of a single-valued key wins; list keys (allow, read, ask, deny)
 * accumulate; the command line overrides both. */
#ifndef KILN_CLI_CONFIG_H
#define KILN_CLI_CONFIG_H

#include <limits.h>
#include <stddef.h>
#include <stdio.h>

struct cli_config_entry {
	const char *key;           /* one of the known keys (static string) */
	char value[PATH_MAX];      /* '~/' expanded */
	char where[PATH_MAX + 16]; /* "FILE:LINE", for messages */
};

struct cli_config {
	struct cli_config_entry *entries; /* in file order, the system file first */
	size_t n;
};

/* Reads the configuration files. Returns 0, or -1 after a message on ERR
 * prefixed with CMD naming the file and line (an unknown key, a bad line, a
 * relative path, an unreadable file). */
int cli_config_load(struct cli_config *c, const char *cmd, FILE *err);
void cli_config_free(struct cli_config *c);

/* The value of a single-valued key (the last one given), or NULL. */
const struct cli_config_entry *cli_config_get(const struct cli_config *c, const char *key);

/* The registry database to use without --db: $KILN_DB, else the
 * configuration's `registry`, else $XDG_CACHE_HOME/kiln/registry.db
 * (~/.cache/...). Returns 0, or -1 after a message (a bad configuration). */
int cli_default_db(char *buf, size_t len, const char *cmd, FILE *err);

#endif
