/*
 * Internals of the asynchronous saver for savers built on it (the manager's
 * async save, manager_async.c): a job that writes with the caller's writer
 * options and runs a hook on the background thread once the write is done.
 */
#ifndef CKPT_ASYNC_INTERNAL_H
#define CKPT_ASYNC_INTERNAL_H

#include "internal.h"
#include "ckpt/async.h"

/**
 * Runs on the background thread after the write (committed or not; the
 * writer is freed, so temporaries are gone). `rc` is the write's status,
 * its error is this thread's last error; the return value becomes the
 * job's status.
 */
typedef int (*ckpt__async_done_fn)(int rc, void *ctx);
/** Called by ckpt_async_saver_free after joining a job that still has an owner. */
typedef void (*ckpt__async_detach_fn)(void *ctx);

/**
 * ckpt_async_save with `wo` and `format` instead of the saver's options, and
 * `done` run after the write. Until ckpt__async_release(s, ctx) the saver
 * belongs to `ctx`: a plain ckpt_async_save on it is refused (EINVAL) so
 * that its status is not consumed under the owner.
 */
int ckpt__async_save_job(ckpt_async_saver *s, ckpt_checkpoint *ck, const char *path, const ckpt_write_options *wo,
	const char *format, ckpt__async_done_fn done, ckpt__async_detach_fn detach, void *ctx, const char *owner_name);
/** Join the job (if running), consume its status, drop the ownership of `ctx`. */
void ckpt__async_release(ckpt_async_saver *s, void *ctx);

#endif
