/* Growable arrays: META_PUSH(array, length, capacity, item) -> 0 or -1 (ENOMEM). */
#ifndef KILN_META_VEC_H
#define KILN_META_VEC_H

#include <stddef.h>

/* Grows *arr (element size ES) so that N elements fit; -1 on ENOMEM. */
int meta_grow(void **arr, size_t *cap, size_t n, size_t es);

/* (the capacity is checked inline: most pushes do not grow) */
#define META_PUSH(arr, len, cap, item) \
	((len) >= (cap) && meta_grow((void **)&(arr), &(cap), (len) + 1, sizeof *(arr)) ? -1 \
									 : ((arr)[(len)++] = (item), 0))

#endif
