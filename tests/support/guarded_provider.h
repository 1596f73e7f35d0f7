/*
 * A memory provider for tests (ckpt/memory.h) whose device memory the CPU
 * cannot touch: every device buffer is its own PROT_NONE mapping, opened
 * (PROT_READ | PROT_WRITE) only inside synchronize while the queued copies
 * run. A library path that dereferences device memory crashes (SIGSEGV),
 * and copies land only at synchronize, so one that forgets to synchronize
 * reads stale bytes. Copies are checked: a "device" address that is not in
 * a live device buffer of the right device, or a host address that is, is
 * CKPT_EINVAL. It counts what it is asked to do.
 */
#ifndef CKPT_TEST_GUARDED_PROVIDER_H
#define CKPT_TEST_GUARDED_PROVIDER_H

#include <stdint.h>
#include "ckpt/memory.h"

typedef struct ts_guarded ts_guarded;

typedef struct ts_guarded_stats {
	uint64_t h2d_bytes, d2h_bytes, d2d_bytes, broadcast_bytes;
	uint64_t h2d_calls, d2h_calls, d2d_calls, broadcast_calls, syncs;
	uint64_t device_live;    /* device buffers allocated and not freed */
	uint64_t pinned_live;    /* pinned buffers allocated and not freed */
	uint64_t pinned_peak;    /* most pinned bytes live at once */
	uint64_t h2d_pinned_bytes, d2h_pinned_bytes; /* copies whose host side was this provider's pinned memory */
} ts_guarded_stats;

/** A guarded provider with `num_devices` devices; `with_broadcast`: offer the optional broadcast. */
ts_guarded *ts_guarded_new(int num_devices, int with_broadcast);
void ts_guarded_free(ts_guarded *g);
/** Its provider table (ctx = g). */
const ckpt_memory_provider *ts_guarded_provider(ts_guarded *g);
ts_guarded_stats ts_guarded_get_stats(ts_guarded *g);
/** Start pinned_peak again from the pinned bytes live now. */
void ts_guarded_reset_peak(ts_guarded *g);
/** Fail the next `count` copy enqueues after `after` more succeed (CKPT_EIO); count 0 turns it off. */
void ts_guarded_fail_copies(ts_guarded *g, uint64_t after, uint64_t count);

#endif
