/*
 * libckpt — asynchronous saves: the trainer is blocked only while the state
 * is staged (copied into buffers the saver owns and reuses); the write runs
 * on a background thread.
 *
 *     ckpt_async_saver *as;
 *     ckpt_async_saver_new(&as, NULL);
 *     for (epoch ...) {
 *         train(...);
 *         ckpt_async_save(as, ck, path);   // returns after staging
 *     }
 *     ckpt_async_wait(as);                 // status of the last write
 *     ckpt_async_saver_free(as);
 *
 * Errors of a background write are never lost: the next call on the saver
 * (save or wait) returns that status and its last error, naming the path.
 * Only one write is in flight: a save waits for the previous write first.
 * The written checkpoint is exactly what ckpt_checkpoint_write() would have
 * written at the moment of staging, and it is committed atomically.
 */
#ifndef CKPT_ASYNC_H
#define CKPT_ASYNC_H

#include "ckpt/checkpoint.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckpt_async_saver ckpt_async_saver;

typedef struct ckpt_async_options {
	unsigned version;   /**< CKPT_ASYNC_OPTIONS_VERSION */
	ckpt_vfs *vfs;      /**< NULL = POSIX */
	int no_fsync;       /**< 1 = skip fsync (tests, benchmarks) */
	const char *format; /**< NULL = "tf-bundle" */
} ckpt_async_options;
#define CKPT_ASYNC_OPTIONS_VERSION 1
#define CKPT_ASYNC_OPTIONS_INIT { CKPT_ASYNC_OPTIONS_VERSION, NULL, 0, NULL }

/** A saver with an empty staging area (grown on first use, then reused). `o` may be NULL. */
CKPT_API int ckpt_async_saver_new(ckpt_async_saver **out, const ckpt_async_options *o);

/**
 * Stage the live state of `ckpt` (one value per logical variable, as
 * ckpt_checkpoint_write) and start writing it to `path` in the background.
 * Returns when staging is done. When the previous background write failed,
 * returns its status (and starts nothing): call again to save.
 */
CKPT_API int ckpt_async_save(ckpt_async_saver *s, ckpt_checkpoint *ckpt, const char *path);

/**
 * Size the staging area for the current state of `ckpt` and touch every page
 * of it now (in parallel), so that even the first ckpt_async_save blocks only
 * for the copy, not for page faults. Optional; call it once after building
 * the model and optimizer (again after adding variables). EINVAL while a
 * write is in flight.
 */
CKPT_API int ckpt_async_saver_reserve(ckpt_async_saver *s, ckpt_checkpoint *ckpt);

/** Wait for the write in flight; its status (CKPT_OK when none). */
CKPT_API int ckpt_async_wait(ckpt_async_saver *s);

/** 1 while a write is in flight. */
CKPT_API int ckpt_async_busy(ckpt_async_saver *s);

/** Seconds the last ckpt_async_save blocked its caller (staging), for monitoring. */
CKPT_API double ckpt_async_last_blocking_seconds(const ckpt_async_saver *s);

/** Wait, then free. NULL ok. */
CKPT_API void ckpt_async_saver_free(ckpt_async_saver *s);

#ifdef __cplusplus
}
#endif
#endif
