/* hugebuf.c: a generic utility of the core (depends on nothing above libckpt/util/). */
#ifndef CKPT_UTIL_HUGEBUF_H
#define CKPT_UTIL_HUGEBUF_H

#include <stddef.h>
#include <stdint.h>

/**
 * Ask for transparent huge pages on the whole 2 MiB pages inside
 * [p, p + n) — only when CKPT_HUGE_PAGES=1 (read once). Off by default:
 * on the VMs this project is measured on (Firecracker, free page reporting)
 * a huge page lands on memory the host has taken back, and first touch ran
 * at 0.4 GB/s against 2.7 GB/s for 4 KiB pages (a 2.1 GB restore from S3:
 * 6.3-7.7 s with, 3.3 s without). Only a hint either way.
 */
void ckpt__advise_huge(void *p, size_t n);

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
