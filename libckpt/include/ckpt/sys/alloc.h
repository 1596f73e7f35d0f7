/*
 * libckpt for extenders — memory through the allocator hook.
 *
 * Code that plugs into the library (a strategy, a file system, a writer of
 * bundle parts) allocates what the library frees, and what it hands the
 * library, with these: they go through the allocator set with
 * ckpt_set_allocator (ckpt/common.h), so a user's allocator and the fault-
 * injection tests see every byte. On failure they return NULL with the
 * thread's last error set (CKPT_ENOMEM, or CKPT_ELIMIT when a size
 * overflows).
 */
#ifndef CKPT_SYS_ALLOC_H
#define CKPT_SYS_ALLOC_H

#include "ckpt/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @param n bytes (0 allocates 1, so the result is a distinct pointer)
 * @return a new block, caller-owned (free with ckpt_free); NULL with
 *         CKPT_ENOMEM as the last error when the allocator fails
 */
CKPT_API void *ckpt_malloc(size_t n);

/**
 * @param count number of elements
 * @param size bytes per element
 * @return `count * size` zeroed bytes, caller-owned (free with ckpt_free);
 *         NULL with CKPT_ELIMIT as the last error when the product
 *         overflows, CKPT_ENOMEM when the allocator fails
 */
CKPT_API void *ckpt_calloc(size_t count, size_t size);

/**
 * @param p a block from ckpt_malloc / ckpt_calloc / ckpt_realloc, or NULL
 * @param n its new size in bytes
 * @return the moved or grown block, caller-owned; NULL with CKPT_ENOMEM as
 *         the last error when the allocator fails (then `p` is unchanged
 *         and still the caller's)
 */
CKPT_API void *ckpt_realloc(void *p, size_t n);

/**
 * Free a block of ckpt_malloc / ckpt_calloc / ckpt_realloc, or one the
 * library documents as freed with ckpt_free.
 * @param p the block; NULL is accepted
 */
CKPT_API void ckpt_free(void *p);

#ifdef __cplusplus
}
#endif
#endif
