/* The table of tools and formats. */
#include <string.h>

#include "meta/tools/tool.h"

const struct meta_tool meta_tools[] = {
	{ "types", meta_tool_types, "every type, deduplicated by structure, with sizes and member offsets" },
	{ "frames", meta_tool_frames, "stack-frame layout of every function, offsets from the CFA" },
	{ "extrasyms", meta_tool_extrasyms, "functions and statics in DWARF but not in the symbol table" },
	{ "syscalls", meta_tool_syscalls, "addresses of syscall instructions with their function" },
};
const size_t meta_ntools = sizeof meta_tools / sizeof meta_tools[0];

const struct meta_tool *meta_tool_find(const char *name)
{
	for (size_t i = 0; i < meta_ntools; i++)
		if (!strcmp(meta_tools[i].name, name))
			return &meta_tools[i];
	return NULL;
}

int meta_format_parse(const char *s, enum meta_format *out)
{
	if (!strcmp(s, "text"))
		*out = META_FMT_TEXT;
	else if (!strcmp(s, "json"))
		*out = META_FMT_JSON;
	else if (!strcmp(s, "c"))
		*out = META_FMT_C;
	else
		return -1;
	return 0;
}

const char *meta_format_ext(enum meta_format f)
{
	return f == META_FMT_JSON ? "json" : f == META_FMT_C ? "c" : "txt";
}

int meta_need_dwarf(const struct meta_model *m, const char *tool, struct meta_err *err)
{
	if (m->dwarf)
		return 0;
	if (m->dwarf_error[0]) {
		meta_set_err(err, "%s; '%s' needs it", m->dwarf_error, tool);
		return -1;
	}
	meta_set_err(err, "%s: no DWARF debug info (build with -g, or install its debug file); "
		     "'%s' needs it", m->path, tool);
	return -1;
}
