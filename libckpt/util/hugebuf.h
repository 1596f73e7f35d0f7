/* hugebuf.c: a generic utility of the core (depends on nothing above libckpt/util/). */
#ifndef CKPT_UTIL_HUGEBUF_H
#define CKPT_UTIL_HUGEBUF_H

#include <stddef.h>
#include <stdint.h>

/**
 * A buffer for tensor data: 64-byte aligned; from 2 MiB on it is 2 MiB
 * aligned (and advised as huge pages when ckpt__advise_huge says so).
 * Allocated through the allocator hook (over-allocation + alignment, so
 * fault injection still sees it). `zero` = 1 zero-fills. NULL with
 * ENOMEM / ELIMIT set on failure. n may be 0.
 */
void *ckpt__buffer_alloc(uint64_t n, int zero);
/** Free a ckpt__buffer_alloc buffer (NULL ok). */
void ckpt__buffer_free(void *p);


/**
 * A variable copy of n bytes: from 64 KiB on, packed with other variables'
 * copies into shared 2 MiB-aligned blocks (64-byte aligned, not zeroed;
 * advised as huge pages when ckpt__advise_huge says so, and then no copy
 * has a tail in 4 KiB pages). Free with the same n.
 */
void *ckpt__variable_buffer_alloc(uint64_t n);
void ckpt__variable_buffer_free(void *p, uint64_t n);

#endif
