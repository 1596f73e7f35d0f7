/* ptrmap.c: a generic utility of the core (depends on nothing above libckpt/util/). */
#ifndef CKPT_UTIL_PTRMAP_H
#define CKPT_UTIL_PTRMAP_H

#include <stddef.h>
#include <stdint.h>

/* generic pointer -> int map (open addressing) */
typedef struct ckpt__ptrmap {
	size_t cap, n;
	const void **keys;
	int *vals;
} ckpt__ptrmap;
int ckpt__ptrmap_put(ckpt__ptrmap *m, const void *key, int val);
int ckpt__ptrmap_get(const ckpt__ptrmap *m, const void *key); /* -1 when absent */
void ckpt__ptrmap_free(ckpt__ptrmap *m);

#endif
