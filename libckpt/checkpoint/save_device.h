/*
 * A save of device variables through a bounded pinned ring (ckpt/memory.h:
 * device -> pinned -> file, overlapped; the ring is the strategy's staging
 * ring, two halves). A value that fits a half is copied one ahead of the
 * writer: while the writer stores value k from one half, the device-to-host
 * copy of the next device value runs into the other. A larger value goes in
 * pieces of a half to a writer that takes values in pieces (TensorBundle):
 * piece k + 1 is copied while piece k is written, and the crc32c is combined
 * from the pieces'. Peak pinned memory: the ring, whatever the value size;
 * a format that takes values only whole (ckpt_format.writer_add_pieces NULL)
 * gets such a value through pinned memory of its size besides. A save whose
 * values are all smaller than a half gets halves of its largest value's size.
 * Not installed.
 */
#ifndef CKPT_SAVE_DEVICE_H
#define CKPT_SAVE_DEVICE_H

#include "device/memory_internal.h"

typedef struct ckpt__save_prefetch {
	ckpt__mem *m;                  /* whose pinned memory the ring is (NULL: none yet) */
	unsigned char *base;           /* both halves, one pinned allocation */
	size_t half;
	const ckpt_variable *inflight; /* its copy is enqueued on replica 0's queue, not yet synchronized */
	int inflight_slot;
	int current;                   /* the half the writer is reading now */
	ckpt__pinned_cache whole;      /* a value larger than a half, for a writer that takes values only whole */
	size_t largest;                /* the largest device value of the save (0: unknown): no half is larger */
} ckpt__save_prefetch;

/** 1 when a save copies `v` this way (device copies, fixed-size, not sync-on-read). */
int ckpt__save_prefetchable(const ckpt_variable *v);
/** 1 when `v` is larger than a half of its ring: it goes in pieces (ckpt__save_stream) where the writer can. */
int ckpt__save_in_pieces(const ckpt_variable *v);
/** Start copying `next` into the half the writer is not using (no-op for NULL or a value larger than a half). */
int ckpt__save_prefetch_start(ckpt__save_prefetch *pf, const ckpt_variable *next);
/** `v`'s replica-0 bytes in pinned memory, landed (its copy started now unless prefetched). */
int ckpt__save_prefetch_get(ckpt__save_prefetch *pf, const ckpt_variable *v, const void **out);
/** Add `v` (replica 0) to `w` under `key` in pieces through the ring (ckpt__writer_add_pieces). */
int ckpt__save_stream(ckpt__save_prefetch *pf, ckpt_writer *w, const ckpt_variable *v, const char *key);
/**
 * Pinned memory of v's provider a value read here may stage through (a
 * device sync-on-read aggregate): the half of the ring no copy is filling,
 * *n bytes; NULL and 0 while another provider's copy is in flight. Valid
 * until the next call on `pf`.
 */
int ckpt__save_scratch(ckpt__save_prefetch *pf, const ckpt_variable *v, void **out, size_t *n);
/** Waits for a copy still in flight, frees the ring. */
void ckpt__save_prefetch_free(ckpt__save_prefetch *pf);

#endif
