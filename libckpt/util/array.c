/* Growable arrays: the one doubling rule the core's arrays use. */
#include "../internal.h"
#include "array.h"

int ckpt__array_grow(void **arr, size_t *cap, size_t n, size_t elem, size_t first)
{
	if (n < *cap)
		return CKPT_OK;
	size_t nc = *cap ? *cap * 2 : first;
	size_t bytes;
	if (__builtin_mul_overflow(nc, elem, &bytes))
		return ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "too many entries (%zu)", nc);
	void *p = ckpt__realloc(*arr, bytes);
	if (!p)
		return CKPT_ENOMEM;
	*arr = p;
	*cap = nc;
	return CKPT_OK;
}
