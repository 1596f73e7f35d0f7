/* strpool.c: a generic utility of the core (depends on nothing above libckpt/util/). */
#ifndef CKPT_UTIL_STRPOOL_H
#define CKPT_UTIL_STRPOOL_H

#include <stddef.h>
#include <stdint.h>

/**
 * Strings allocated in bulk and freed together (strpool.c). Zero-initialise;
 * a string stays valid until ckpt__strpool_free.
 */
typedef struct ckpt__strpool {
	struct ckpt__strpool_block *head;
	size_t next_cap;
} ckpt__strpool;
/** Copy n bytes of s plus a NUL into the pool (NULL on ENOMEM, error set). */
char *ckpt__strpool_dup(ckpt__strpool *p, const char *s, size_t n);
/** n uninitialised bytes in the pool, 8-byte aligned (NULL on ENOMEM, error set). */
void *ckpt__strpool_alloc(ckpt__strpool *p, size_t n);
void ckpt__strpool_free(ckpt__strpool *p);

#endif
