/*
 * Variables whose copies live in a memory provider's device memory
 * (ckpt_strategy_mirrored_on with a provider that is not host-addressable):
 * the writes and reads variable.c does with memcpy for host copies, done
 * with the provider's queued copies instead. Replica 0 is written from the
 * host and synchronized, then the other replicas are filled device to
 * device (or by the provider's broadcast). Not installed.
 */
#ifndef CKPT_VARIABLE_DEVICE_H
#define CKPT_VARIABLE_DEVICE_H

#include "memory_internal.h"

/**
 * Write a value into every copy bufs[0..m->n-1] of `nbytes`.
 * src: host memory, or NULL (zeros), or bufs[0] (the value is already in copy 0).
 * other_unit: NULL = every other copy gets copy 0's value; else every other
 * copy is filled with this element (usize bytes: the sync-on-read SUM split).
 * On return every copy has landed.
 */
int ckpt__device_write(ckpt__mem *m, void *const *bufs, size_t nbytes, const void *src,
	const void *other_unit, size_t usize, const char *name);

/** Copy `replica`'s bytes [off, off + n) into host `dst`; landed on return. */
int ckpt__device_read(ckpt__mem *m, int replica, const void *buf, size_t off, void *dst, size_t n,
	const char *name);

/** Whether copies 0 and r of `nbytes` are bit-identical (1 / 0), or a negative status. Streams in chunks. */
int ckpt__device_equal(ckpt__mem *m, void *const *bufs, int r, size_t nbytes, const char *name);

/** Bytes per chunk device reads stream through (sync-on-read aggregation, comparisons). */
#define CKPT__DEVICE_CHUNK ((size_t)1 << 20)

#endif
