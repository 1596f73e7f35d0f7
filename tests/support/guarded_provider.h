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
	uint64_t device_alloc_calls, host_alloc_calls; /* allocations asked for, failed ones included */
	uint64_t fill_calls, fill_bytes;              /* the optional fill method */
} ts_guarded_stats;

/** A guarded provider with `num_devices` devices; `with_broadcast`: offer the optional broadcast. */
ts_guarded *ts_guarded_new(int num_devices, int with_broadcast);
/** Offer the optional fill method (ckpt/memory.h) or not; call before making a strategy over it. */
void ts_guarded_set_fill(ts_guarded *g, int with_fill);
void ts_guarded_free(ts_guarded *g);
/** Its provider table (ctx = g). */
const ckpt_memory_provider *ts_guarded_provider(ts_guarded *g);
ts_guarded_stats ts_guarded_get_stats(ts_guarded *g);
/** Start pinned_peak again from the pinned bytes live now. */
void ts_guarded_reset_peak(ts_guarded *g);
/** Fail the next `count` copy enqueues after `after` more succeed (CKPT_EIO); count 0 turns it off. */
void ts_guarded_fail_copies(ts_guarded *g, uint64_t after, uint64_t count);

/* The calls ts_guarded_fail_nth counts. */
#define TS_G_DEVICE_ALLOC 0x01u
#define TS_G_HOST_ALLOC   0x02u
#define TS_G_H2D          0x04u
#define TS_G_D2H          0x08u
#define TS_G_D2D          0x10u
#define TS_G_BROADCAST    0x20u
#define TS_G_FILL         0x40u
#define TS_G_ALL          0x7fu

/**
 * Fail the k-th (0-based) call from now on among the kinds in `mask`, once.
 * An allocation fails with CKPT_ENOMEM. A copy or fill fails at enqueue
 * (CKPT_EIO) when `at_sync` is 0; with `at_sync` 1 it is accepted and the
 * synchronize of its queue fails instead, with half of its bytes written and
 * the copies enqueued after it on that queue dropped. A broadcast writes half
 * of the first destination and fails. Every failure sets a message of its own.
 */
void ts_guarded_fail_nth(ts_guarded *g, unsigned mask, uint64_t k, int at_sync);
/** Whether the failure ts_guarded_fail_nth armed has happened (it is then disarmed). */
int ts_guarded_fired(ts_guarded *g);

#endif
