/* Answers given ahead (docs/verdict-cache.md, "Answered ahead"): a round
 * trip's VERDICT may say that another read class of the same path and
 * qflags has the same ALLOW for the whole run (proto.h, `ahead`). The
 * asking thread keeps that in one slot of its own, so that its next
 * question, the open that follows a stat as in a compiler's header search,
 * is answered here and told to the server with a NOTE instead of asked.
 *
 * One slot per thread, written and read only by it; a signal handler
 * that asks a question in between may take the slot over, so a reader
 * checks the slot's sequence number around what it read (odd: being
 * written). A forked child keeps its copy but cannot tell (the pool's
 * connections are its parent's): its question goes to the server. A vfork
 * child never touches the slot (it would write its parent's memory). */
#include <string.h>

#include "trace/kt.h"

#define AHEAD_PATH 256 /* longer paths are not kept */

struct ahead {
	unsigned seq;
	unsigned classes; /* read classes still answered here */
	unsigned qflags;
	unsigned plen;
	char path[AHEAD_PATH];
};

static KT_TLS struct ahead slot;

void kt_ahead_keep(const char *path, size_t plen, unsigned qflags, unsigned classes)
{
	classes &= KILN_A_STAT | KILN_A_READ;
	if (!classes || plen >= AHEAD_PATH || kt_vfork_child)
		return;
	slot.seq++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	slot.classes = classes;
	slot.qflags = qflags;
	slot.plen = (unsigned)plen;
	memcpy(slot.path, path, plen);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	slot.seq++;
}

int kt_ahead_take(const char *path, size_t plen, unsigned access, unsigned qflags)
{
	if (kt_vfork_child)
		return 0;
	unsigned seq = slot.seq;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if ((seq & 1) || !(slot.classes & access) || (access & ~slot.classes) ||
	    slot.qflags != qflags || slot.plen != plen || memcmp(slot.path, path, plen) != 0)
		return 0;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (slot.seq != seq)
		return 0;
	slot.classes &= ~access; /* told once; the server's map answers after */
	return 1;
}
