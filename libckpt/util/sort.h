/* sort.c: a generic utility of the core (depends on nothing above libckpt/util/). */
#ifndef CKPT_UTIL_SORT_H
#define CKPT_UTIL_SORT_H

#include <stddef.h>
#include <stdint.h>

/**
 * Stable sort of n elements of sz bytes, linear when the input is a few
 * ascending runs (sort.c); qsort past 16 runs. ENOMEM (array unchanged
 * or partly merged, still a permutation) when a merge buffer cannot be had.
 */
int ckpt__sort(void *base, size_t n, size_t sz, int (*cmp)(const void *, const void *));

#endif
