/*
 * libckpt extender API — an in-memory file system (tests, fuzzers, readers
 * fed from buffers): its files live in this process and die with it. Not
 * included by ckpt/ckpt.h.
 */
#ifndef CKPT_SYS_VFS_MEMORY_H
#define CKPT_SYS_VFS_MEMORY_H

#include "ckpt/io.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * An empty in-memory file system. Directories exist implicitly. Thread-safe.
 * @param[out] out caller-owned; free with ckpt_vfs_free
 * @return CKPT_OK or CKPT_ENOMEM
 */
CKPT_API int ckpt_vfs_memory_new(ckpt_vfs **out);
/** Put a copy of `buf` at `path` (replacing any file there).
 * @return CKPT_OK or a negative ckpt_status (CKPT_ENOMEM) */
CKPT_API int ckpt_vfs_memory_put(ckpt_vfs *vfs, const char *path, const void *buf, size_t n);
/**
 * Borrow the content of `path`.
 * @param[out] n   its size in bytes
 * @return its content ("" when empty), borrowed: valid until the file is changed or removed;
 *         NULL on failure with ckpt_error_last() set: CKPT_ENOTFOUND when there is no such file; CKPT_ENOMEM
 */
CKPT_API const void *ckpt_vfs_memory_get(size_t *n, ckpt_vfs *vfs, const char *path);

#ifdef __cplusplus
}
#endif
#endif
