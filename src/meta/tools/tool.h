/* The metadata tools: pure functions from a model to an output stream. */
#ifndef KILN_META_TOOL_H
#define KILN_META_TOOL_H

#include <stdio.h>

#include "meta/model.h"
#include "meta/vec.h"

enum meta_format { META_FMT_TEXT, META_FMT_JSON, META_FMT_C };

/* Writes the tool's output for M to OUT. Returns 0, or -1 with err->msg set
 * (e.g. the binary has no DWARF and the tool needs it). */
typedef int (*meta_tool_fn)(struct meta_model *m, FILE *out, enum meta_format fmt,
			    struct meta_err *err);

struct meta_tool {
	const char *name;
	meta_tool_fn run;
	const char *summary;
};

/* One tool run over a model: the tool, its output stream and its result. */
struct meta_job {
	const struct meta_tool *tool;
	FILE *out;
	enum meta_format fmt;
	int rc;
	struct meta_err err;
};

/* Runs N jobs over M: when PARALLEL on up to one thread per CPU, each taking
 * the next job (put the longest first), else one after the other. The model
 * is read-only; the one tool that calls into libdw takes the model's lock.
 * Returns 0 when all succeeded. */
int meta_run_jobs(struct meta_model *m, struct meta_job *jobs, size_t n, int parallel);

extern const struct meta_tool meta_tools[];
extern const size_t meta_ntools;
const struct meta_tool *meta_tool_find(const char *name);
int meta_format_parse(const char *s, enum meta_format *out);
const char *meta_format_ext(enum meta_format f); /* "txt", "json", "c" */

int meta_tool_types(struct meta_model *m, FILE *out, enum meta_format fmt, struct meta_err *err);
/* `types --type NAME`: only the types named NAME ("foo", or "struct foo" for
 * one kind), definitions before declarations, and for a typedef the types
 * it names; -1 with err set when there is none. */
int meta_tool_types_named(struct meta_model *m, FILE *out, enum meta_format fmt, const char *name,
			  struct meta_err *err);
int meta_tool_frames(struct meta_model *m, FILE *out, enum meta_format fmt, struct meta_err *err);
int meta_tool_extrasyms(struct meta_model *m, FILE *out, enum meta_format fmt, struct meta_err *err);
int meta_tool_syscalls(struct meta_model *m, FILE *out, enum meta_format fmt, struct meta_err *err);

/* A virtual base of a class and its byte offset in a complete object of
 * that class (vbases.c). */
#define META_MAX_VBASES 64
struct meta_vbase {
	uint32_t type;
	uint64_t offset;
};
/* The virtual bases (direct and indirect) of class T, in inheritance graph
 * order, with their offsets when T is the most-derived type: how many (0
 * when T has none), or -1 when the layout cannot be derived. OUT holds
 * META_MAX_VBASES. */
int meta_complete_vbases(const struct meta_model *m, uint32_t t, struct meta_vbase *out);

/* Output helpers shared by the tools. */
void meta_put_json_str(FILE *out, const char *s);   /* "..." or null */
void meta_put_c_str(FILE *out, const char *s);      /* "..." or 0 */
/* A short readable name for type T ("struct foo", "int", "char *"). */
void meta_put_type_label(FILE *out, const struct meta_model *m, uint32_t t);
struct meta_obuf;
void meta_obuf_json_str(struct meta_obuf *o, const char *s);
void meta_obuf_c_str(struct meta_obuf *o, const char *s);
void meta_obuf_type_label(struct meta_obuf *o, const struct meta_model *m, uint32_t t);
int meta_need_dwarf(const struct meta_model *m, const char *tool, struct meta_err *err);

#endif
