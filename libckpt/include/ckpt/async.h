/*
 * libckpt — asynchronous saves: the trainer is blocked only while the state
 * is staged (copied into buffers the saver owns and reuses); the write runs
 * on a background thread.
 *
 *     void train_one_epoch(ckpt_checkpoint *ck);        // the trainer's
 *
 *     static int train(ckpt_checkpoint *ck, int epochs)
 *     {
 *         ckpt_async_saver *as;
 *         if (ckpt_async_saver_new(&as, NULL) < 0)
 *             return -1;
 *         for (int epoch = 0; epoch < epochs; epoch++) {
 *             train_one_epoch(ck);
 *             if (ckpt_async_save(as, ck, "run/model") < 0)   // returns after staging
 *                 break;                                    // this or the previous write failed
 *         }
 *         int rc = ckpt_async_wait(as);                     // status of the last write
 *         ckpt_async_saver_free(as);
 *         return rc;
 *     }
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

/**
 * A saver with an empty staging area (grown on first use, then reused). `o` may be NULL.
 * @param[out] out the saver, owned by the caller (ckpt_async_saver_free)
 * @return CKPT_OK; CKPT_EINVAL for a NULL `out` or an unsupported options version; CKPT_ENOMEM
 */
CKPT_API int ckpt_async_saver_new(ckpt_async_saver **out, const ckpt_async_options *o);

/**
 * Stage the live state of `ckpt` (one value per logical variable, as
 * ckpt_checkpoint_write) and start writing it to `path` in the background.
 * Returns when staging is done. When the previous background write failed,
 * returns its status (and starts nothing): call again to save.
 * @return CKPT_OK once staged; the previous write's status; or a negative ckpt_status
 */
CKPT_API int ckpt_async_save(ckpt_async_saver *s, ckpt_checkpoint *ckpt, const char *path);

/**
 * Size the staging area for the current state of `ckpt` and touch every page
 * of it now (in parallel), so that even the first ckpt_async_save blocks only
 * for the copy, not for page faults. Optional; call it once after building
 * the model and optimizer (again after adding variables).
 * @return CKPT_OK; CKPT_EINVAL while a write is in flight; CKPT_ENOMEM
 */
CKPT_API int ckpt_async_saver_reserve(ckpt_async_saver *s, ckpt_checkpoint *ckpt);

/** Wait for the write in flight.
 * @return its status (CKPT_OK when none) */
CKPT_API int ckpt_async_wait(ckpt_async_saver *s);

/** @return 1 while a write is in flight, else 0 (also for NULL). */
CKPT_API int ckpt_async_busy(ckpt_async_saver *s);

/** @return the seconds the last ckpt_async_save blocked its caller (staging), for monitoring; 0 before one. */
CKPT_API double ckpt_async_last_blocking_seconds(const ckpt_async_saver *s);

/** Wait, then free. NULL ok. */
CKPT_API void ckpt_async_saver_free(ckpt_async_saver *s);

/* ------------------------------------------------------------------ */
/* Asynchronous saves through the checkpoint manager                    */
/* ------------------------------------------------------------------ */

/*
 *     void train_one_epoch(ckpt_checkpoint *ck);        // the trainer's
 *
 *     static int train(ckpt_checkpoint *ck, int epochs)
 *     {
 *         ckpt_async_saver *as;
 *         ckpt_manager *mgr;
 *         if (ckpt_async_saver_new(&as, NULL) < 0)
 *             return -1;
 *         if (ckpt_manager_new(&mgr, ck, "run/ckpts", 3) < 0) {
 *             ckpt_async_saver_free(as);
 *             return -1;
 *         }
 *         for (int epoch = 0; epoch < epochs; epoch++) {
 *             train_one_epoch(ck);
 *             if (!ckpt_manager_save_async(mgr, as))     // also reports the previous save's failure
 *                 fprintf(stderr, "save: %s\n", ckpt_error_last()->message);
 *         }
 *         int rc = ckpt_manager_wait(mgr);   // status of the last save, folded into the manager
 *         ckpt_manager_free(mgr);
 *         ckpt_async_saver_free(as);
 *         return rc;
 *     }
 */

/**
 * Everything ckpt_manager_save does — number N = max(save_counter, highest
 * existing) + 1, save_counter set to N, "<dir>/ckpt-N" committed
 * atomically, the oldest beyond max_to_keep deleted, the `checkpoint` state
 * file rewritten, under the directory's lock — with the writing, deleting
 * and state-file update on `s`'s background thread. Returns when the state
 * is staged (the trainer may then change every variable).
 *
 * The checkpoint is written with the manager's checkpoint options (format,
 * VFS, fsync), exactly as a synchronous save; `s`'s own options are not
 * used. The path returned names the checkpoint being written; it is
 * borrowed from the manager, valid until the next call that waits.
 *
 * Calls that wait for the save in flight and fold its outcome into the
 * manager: ckpt_manager_wait, ckpt_manager_save_async, ckpt_manager_save,
 * ckpt_manager_save_number, ckpt_manager_latest_valid,
 * ckpt_manager_restore_latest and ckpt_manager_free. The first of them
 * reports a background failure (its status and last error, naming the
 * path) and, for a save, starts nothing: call again to save. After a
 * failure nothing of ckpt-N remains, save_counter is back to its value
 * before the save, and the previous latest checkpoint is still the latest
 * and valid. Until then ckpt_manager_latest / _num_checkpoints / _checkpoint show
 * the manager as it was before the save.
 *
 * While the save is in flight `s` belongs to the manager: ckpt_async_save
 * on it is refused (EINVAL); ckpt_async_wait on it is allowed (the manager
 * still reports the outcome). Free the manager (or call ckpt_manager_wait)
 * before freeing `s`; a saver freed first waits for the write, and the
 * manager applies its outcome at its next call.
 * @return the checkpoint being written, borrowed as said above; NULL on failure with ckpt_error_last()
 *         set: a previous background failure; or a negative ckpt_status
 */
CKPT_API const char *ckpt_manager_save_async(ckpt_manager *m, ckpt_async_saver *s);

/**
 * Wait for the manager's asynchronous save in flight (if any), and for a
 * checkpoint being copied from the memory tier (ckpt_manager_options
 * persist_every), and fold them into the manager. A failure is reported once.
 * @return its status (CKPT_OK when none)
 */
CKPT_API int ckpt_manager_wait(ckpt_manager *m);

#ifdef __cplusplus
}
#endif
#endif
