/* The libraries kiln itself was loaded with, those the build may read for
 * the whole run (trusted.h). */
#include "trace/service/trusted.h"

#include <link.h>
#include <string.h>
#include <unistd.h>

void trusted_libs(struct sandbox *s, char *out, size_t cap)
{
	size_t at = 0;
	out[0] = '\0';
	static struct sbx_decision d;
	for (const struct link_map *l = _r_debug.r_map; l; l = l->l_next) {
		size_t n = l->l_name ? strlen(l->l_name) : 0;
		if (!n || l->l_name[0] != '/' || memchr(l->l_name, ':', n) || at + n + 2 > cap)
			continue;
		sandbox_decide(s, getpid(), l->l_name, KILN_A_READ, 0, &d);
		if (d.verdict != KILN_V_ALLOW || !d.stable || !d.exists)
			continue;
		if (at)
			out[at++] = ':';
		memcpy(out + at, l->l_name, n + 1);
		at += n;
	}
}
