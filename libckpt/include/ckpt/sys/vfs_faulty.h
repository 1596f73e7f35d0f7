/*
 * libckpt extender API — a fault-injecting file system that fails the i-th
 * call of an inner one (crash-consistency tests, after SQLite's test_vfs.c).
 * Not included by ckpt/ckpt.h.
 */
#ifndef CKPT_SYS_VFS_FAULTY_H
#define CKPT_SYS_VFS_FAULTY_H

#include "ckpt/io.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * A wrapper over `inner` (borrowed) that counts every call that can fail —
 * open, pread, pread_direct, pwrite, size, sync, close, rename, remove,
 * sync_dir, list, mkdir, rmdir, lock — and makes call number `fail_at`
 * (1-based) fail with CKPT_EIO (0 = never fail, just count). A failing
 * pwrite writes nothing. It has `inner`'s capabilities but lends no file
 * descriptor (ckpt_io_fd is -1), so every byte goes through its count.
 * @param[out] out caller-owned; free with ckpt_vfs_free (which leaves `inner` alone)
 * @return CKPT_OK; CKPT_EINVAL for a NULL argument; CKPT_ENOMEM
 */
CKPT_API int ckpt_vfs_faulty_new(ckpt_vfs **out, ckpt_vfs *inner, long fail_at);
/** @return the calls counted so far by a ckpt_vfs_faulty_new file system. */
CKPT_API long ckpt_vfs_faulty_calls(const ckpt_vfs *vfs);
/** @return 1 once the injected failure of a ckpt_vfs_faulty_new file system has fired, else 0. */
CKPT_API int ckpt_vfs_faulty_fired(const ckpt_vfs *vfs);

#ifdef __cplusplus
}
#endif
#endif
