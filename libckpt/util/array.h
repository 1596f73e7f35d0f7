/* array.c: a generic utility of the core (depends on nothing above libckpt/util/). */
#ifndef CKPT_UTIL_ARRAY_H
#define CKPT_UTIL_ARRAY_H

#include <stddef.h>
#include <stdint.h>

/**
 * Make room for element n of the array *arr (capacity *cap elements of
 * `elem` bytes): doubles the capacity, from `first`, when n >= *cap.
 * @return CKPT_OK, CKPT_ENOMEM (array unchanged) or CKPT_ELIMIT when the size overflows.
 */
int ckpt__array_grow(void **arr, size_t *cap, size_t n, size_t elem, size_t first);

#endif
