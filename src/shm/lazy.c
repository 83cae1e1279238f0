/* Lazy attach shared by all threads of a process, without a lock: one caller
 * claims the attach with a CAS, everyone else goes uncached until it is
 * published with a release store. */
#include <unistd.h>

#include "shm/shmmap.h"

enum { UNTRIED, ATTACHING, READY, FAILED };

struct shmmap *shmmap_lazy_get(struct shmmap_lazy *l, int (*open_fd)(void *ctx), void *ctx,
			       int mode)
{
	int st = __atomic_load_n(&l->state, __ATOMIC_ACQUIRE);
	if (st == READY)
		return &l->map;
	if (st != UNTRIED)
		return NULL;
	if (!__atomic_compare_exchange_n(&l->state, &st, ATTACHING, 0, __ATOMIC_ACQUIRE,
					  __ATOMIC_ACQUIRE))
		return st == READY ? &l->map : NULL;
	int fd = open_fd(ctx);
	char err[8]; /* the reason is not reported: NULL means "go uncached" */
	if (fd < 0 || shmmap_attach_fd(&l->map, fd, mode, err, sizeof err) != 0) {
		if (fd >= 0)
			close(fd);
		__atomic_store_n(&l->state, FAILED, __ATOMIC_RELEASE);
		return NULL;
	}
	l->map.own_fd = 1;
	__atomic_store_n(&l->state, READY, __ATOMIC_RELEASE);
	return &l->map;
}
