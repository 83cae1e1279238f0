/* What both closures (closure_apt.c: the clean chroot; closure_host.c:
 * every installed alternative) share (closure_kept.c): the registry's
 * answers, kept in a table by question, and the driver that runs a
 * profile's closure. Internal to the registry. */
#ifndef KILN_REGISTRY_CLOSURE_KEPT_H
#define KILN_REGISTRY_CLOSURE_KEPT_H

#include <stdbool.h>
#include <stdint.h>

#include "registry/internal.h"
#include "registry/query.h"

#define CLOSURE_IDS_MAX 256 /* more packages of one name or providers does not happen */

struct closure_ids {
	int64_t v[CLOSURE_IDS_MAX];
	int n;
};

struct closure_atom {
	int clause, alt, type;
	char name[128], archq[32];
};

/* What the registry answered, kept by question: 'r' or 'p' (real,
 * providers), the name, '\0', archq -> package ids; 'd' and a package id ->
 * its dependency rows. Within one closure a clause is looked up again for
 * every package that has it (libc6 for most of them: 1,772 lookups of 336
 * names for GNU hello's report); a snapshot handle, which cannot change,
 * keeps the table for all its closures (the report's unused Build-Depends
 * ask one per declared name). */
struct kept {
	char *key; /* NULL: a free slot */
	size_t klen;
	void *val;
	size_t n;
};

struct kept_table {
	struct kept *v;
	size_t cap, n; /* cap: a power of two, at most half full */
};

/* All a snapshot handle keeps for its closures: the table (the same
 * answers serve both profiles), and each profile's base set with
 * everything it pulls in. */
struct registry_closure_memo {
	struct kept_table answers;
	struct registry_pkgset base[2]; /* by enum registry_profile */
	bool base_known[2];
};

/* One closure being worked out. */
struct closure_run {
	struct kiln_registry *reg;
	sqlite3_stmt *real, *providers, *deps, *base;
	struct registry_pkgset seen;
	struct registry_queue q;
	struct registry_closure_memo *keep; /* the handle's (a snapshot), or NULL */
	struct kept_table *memo;            /* keep's table, or `own` */
	struct kept_table own;
};

/* How a closure run went so far. */
enum closure_state {
	CLOSURE_OK = 0,
	CLOSURE_FAILED,  /* a query failed (reg->err says), or out of memory */
	CLOSURE_UNKNOWN, /* a declared name is unknown: err written */
};

/* What makes a profile's closure (closure_apt.c, closure_host.c). */
struct closure_profile {
	enum registry_profile profile;
	const char *base_sql; /* the base set's packages (a->base) */
	/* Puts in what the base set adds to base_sql's packages (NULL: nothing). */
	int (*add_base)(struct closure_run *a);
	/* Puts a declared name in (CLOSURE_UNKNOWN: err written). */
	enum closure_state (*add_name)(struct closure_run *a, const char *spec, char *err,
				       size_t errlen);
	/* Puts in what one package's dependency rows call for. */
	int (*follow)(struct closure_run *a, const struct closure_atom *atoms, size_t n);
};

/* The closure of names (and of the base set when with_base) under p,
 * breadth-first over each package's dependency rows (Pre-Depends first,
 * clauses and alternatives in order): 0, or -1 with a message in err. */
int closure_compute(struct kiln_registry *reg, const struct closure_profile *p,
		    const char *const *names, size_t n, bool with_base,
		    struct registry_pkgset *out, char *err, size_t errlen);

/* A declared "name[:archq]": the name copied into name[256], the archq
 * ("" for none) returned. */
const char *closure_split_name(const char *spec, char name[256]);

/* The installed packages of (name, archq) (a->real: of that name, archq as
 * in registry_satisfiers(); a->providers: providing it, in apt's order). */
int closure_lookup(struct closure_run *a, sqlite3_stmt *st, const char *name, const char *archq,
		   struct closure_ids *out);

int closure_push(struct closure_run *a, int64_t id);

#endif
