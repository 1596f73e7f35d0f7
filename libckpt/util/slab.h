/* slab.c: a generic utility of the core (depends on nothing above libckpt/util/). */
#ifndef CKPT_UTIL_SLAB_H
#define CKPT_UTIL_SLAB_H

#include <stddef.h>
#include <stdint.h>

/**
 * Small long-lived allocations (variables, their small copies, tracked
 * objects) packed into shared blocks that become huge pages (slab.c):
 * n <= CKPT__SLAB_MAX bytes aligned to `align` (16, 32 or 64), not zeroed.
 * A block is freed with its last allocation. NULL on ENOMEM (error set).
 */
#define CKPT__SLAB_MAX ((size_t)16 << 10)
void *ckpt__slab_alloc(size_t n, size_t align);
void ckpt__slab_free(void *p);

#endif
