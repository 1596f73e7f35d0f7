/*
 * libckpt for extenders — reporting an error the way the library does.
 *
 * A strategy, a file system or any code called by the library fails by
 * setting the thread's last error (read back with ckpt_error_last,
 * ckpt/common.h) and returning the negative status; the library passes both
 * to its caller unchanged.
 */
#ifndef CKPT_SYS_ERROR_H
#define CKPT_SYS_ERROR_H

#include "ckpt/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Make an error the calling thread's last error.
 * @param code a negative ckpt_status (returned unchanged)
 * @param path the file involved, or NULL (copied)
 * @param variable the variable, key or dataset involved, or NULL (copied)
 * @param offset the byte offset in `path`, or -1 when unknown
 * @param fmt the message, printf rules
 * @return `code`, so that `return ckpt_error_set(CKPT_EINVAL, ...);` reports and fails in one line
 */
CKPT_API int ckpt_error_set(int code, const char *path, const char *variable, int64_t offset, const char *fmt, ...)
	CKPT_PRINTF(5, 6);

/** Evaluate `expr` (an int status) and return it from the enclosing function when it is negative. */
#define CKPT_TRY(expr) do { int ckpt_try_rc_ = (expr); if (ckpt_try_rc_ < 0) return ckpt_try_rc_; } while (0)

#ifdef __cplusplus
}
#endif
#endif
