/*
 * The old values of the device variables a restore writes (ckpt/memory.h),
 * kept before it writes any of them and put back if any later step fails:
 * what makes a restore onto device replicas all-or-nothing, as the host
 * path is (restore_commit.c). A provider may fail any copy, so without a
 * copy of the old values a failure half-way through the fan-out would leave
 * the replicas of one variable disagreeing and the others new. Not
 * installed.
 */
#ifndef CKPT_RESTORE_UNDO_H
#define CKPT_RESTORE_UNDO_H

#include "device/memory_internal.h"

typedef struct ckpt__undo_entry ckpt__undo_entry;

typedef struct ckpt__device_undo {
	ckpt__undo_entry *e;   /* sorted by variable */
	size_t n;
} ckpt__device_undo;

/**
 * Keep the old value of every device variable among vars[0..n) (others are
 * skipped): replica 0's copy for mirrored and plain ones (their replicas
 * hold one value), every replica's for sync-on-read ones. Kept in a device
 * buffer beside the replica, or in pinned host memory when the device has
 * no room; landed on return. On failure nothing is kept and no variable
 * has changed.
 */
int ckpt__device_undo_keep(ckpt__device_undo *u, ckpt_variable *const *vars, size_t n);
/** `v` is about to be written (a no-op for a variable not kept). */
void ckpt__device_undo_touch(ckpt__device_undo *u, const ckpt_variable *v);
/**
 * Put the old value back into every replica of every touched variable; the
 * error set before the call is kept. @return how many variables could not
 * be put back (a second provider failure), the first one's name in *first.
 */
size_t ckpt__device_undo_rollback(ckpt__device_undo *u, const char **first);
void ckpt__device_undo_free(ckpt__device_undo *u);

#endif
