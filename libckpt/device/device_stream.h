/*
 * Restore and load into device replicas through a bounded pinned staging
 * ring (ckpt/memory.h: two halves, CKPT_STAGING_DEFAULT_BYTES in all unless
 * ckpt_strategy_set_staging_bytes): the file is read into one half while
 * the other half's host-to-device copy runs, straight into replica 0; the
 * crc32c is computed on the staged bytes as they are read and the pieces are
 * checked against the stored one when the entry is done. The other replicas
 * are filled afterwards, device to device (the restore's fan-out). Peak host
 * memory is the ring, whatever the state's size. Not installed.
 */
#ifndef CKPT_DEVICE_STREAM_H
#define CKPT_DEVICE_STREAM_H

#include "memory_internal.h"

/** The ring of one restore: allocated on first use, for the memory of the variable being filled. */
typedef struct ckpt__ring {
	ckpt__mem *m;           /* whose pinned memory the halves are (NULL: none yet) */
	unsigned char *base;    /* both halves, one host_alloc */
	size_t half;            /* bytes per half */
	size_t want;            /* set by the caller: the largest value to stream (0: unknown); halves no larger */
} ckpt__ring;

/**
 * Read stored entry `entry` of `rd` (fixed-size dtype, with a crc32c, not
 * partitioned; n bytes) into replica 0 of a device variable: copy 0 is `dst`
 * of memory `m`, `name` for messages. On return the bytes have landed and
 * their crc32c matched (ECHECKSUM naming the entry otherwise; copy 0 is then
 * partly written).
 */
int ckpt__ring_stream(ckpt__ring *ring, ckpt__mem *m, ckpt_reader *rd, size_t entry, void *dst, size_t n,
	const char *name);
void ckpt__ring_free(ckpt__ring *ring);

#endif
