/*
 * A save of device variables, copied ahead of the writer: while the writer
 * stores value k from one pinned slot, the device-to-host copy of the next
 * device value runs into the other (ckpt/memory.h: device -> pinned ->
 * file, overlapped). Peak pinned memory: two values. Not installed.
 */
#ifndef CKPT_SAVE_DEVICE_H
#define CKPT_SAVE_DEVICE_H

#include "memory_internal.h"

typedef struct ckpt__save_prefetch {
	ckpt__pinned_cache slot[2];
	const ckpt_variable *inflight; /* its copy is enqueued on replica 0's queue, not yet synchronized */
	int inflight_slot;
	int current;                   /* the slot the writer is reading now */
} ckpt__save_prefetch;

/** 1 when a save copies `v` this way (device copies, fixed-size, not sync-on-read). */
int ckpt__save_prefetchable(const ckpt_variable *v);
/** Start copying `next` into the slot the writer is not using (no-op for NULL). */
int ckpt__save_prefetch_start(ckpt__save_prefetch *pf, const ckpt_variable *next);
/** `v`'s replica-0 bytes in pinned memory, landed (its copy started now unless prefetched). */
int ckpt__save_prefetch_get(ckpt__save_prefetch *pf, const ckpt_variable *v, const void **out);
/** Waits for a copy still in flight, frees the slots. */
void ckpt__save_prefetch_free(ckpt__save_prefetch *pf);

#endif
