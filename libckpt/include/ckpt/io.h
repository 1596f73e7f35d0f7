/*
 * libckpt — the I/O layer. Every byte a reader or writer touches goes through
 * a ckpt_io (one open file: pread/pwrite at offsets) obtained from a ckpt_vfs
 * (a file system: open, rename, remove, list, sync a directory). Three file
 * systems ship: the POSIX one (default), an in-memory one (tests, fuzzers,
 * readers fed from buffers) and a fault-injecting wrapper that fails the i-th
 * call (crash-consistency tests), after SQLite's VFS and test_vfs.c.
 *
 * Rules every implementation follows:
 *  - pread returns the number of bytes read in *got; a short read is not an
 *    error at this level. ckpt_io_read_exact turns it into CKPT_EFORMAT with
 *    the offset ("truncated: wanted N bytes at offset O, file has S").
 *  - Errors set the thread-local last error with the path.
 */
#ifndef CKPT_IO_H
#define CKPT_IO_H

#include "ckpt/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckpt_io ckpt_io;
typedef struct ckpt_vfs ckpt_vfs;

/** Open flags. */
enum {
	CKPT_IO_READ = 1,
	CKPT_IO_WRITE = 2,   /**< create or truncate, write-only */
};

/** Methods of one open file. Version 1; append-only. */
typedef struct ckpt_io_methods {
	unsigned version;
	int (*pread)(ckpt_io *io, void *buf, size_t n, uint64_t off, size_t *got);
	int (*pwrite)(ckpt_io *io, const void *buf, size_t n, uint64_t off);
	int (*size)(ckpt_io *io, uint64_t *out);
	int (*sync)(ckpt_io *io);
	int (*close)(ckpt_io *io);   /**< frees `io`; returns the status of the final flush */
	/** Optional (may be NULL): a stable pointer to the whole content, for zero-copy readers. */
	const void *(*map)(ckpt_io *io, uint64_t *size);
} ckpt_io_methods;

/** Base of every open file; implementations embed it first. */
struct ckpt_io {
	const ckpt_io_methods *methods;
	char *path;  /**< as opened (owned) */
};

/** Methods of a file system. Version 1; append-only. */
typedef struct ckpt_vfs_methods {
	unsigned version;
	int (*open)(ckpt_vfs *vfs, const char *path, int flags, ckpt_io **out);
	int (*rename)(ckpt_vfs *vfs, const char *from, const char *to);
	int (*remove)(ckpt_vfs *vfs, const char *path);         /**< ENOTFOUND when absent */
	int (*exists)(ckpt_vfs *vfs, const char *path, int *is_dir); /**< 1 / 0; is_dir may be NULL */
	int (*sync_dir)(ckpt_vfs *vfs, const char *dir);
	/** Names (not paths) in `dir`, sorted bytewise; free with ckpt_vfs_free_list. */
	int (*list)(ckpt_vfs *vfs, const char *dir, char ***names, size_t *count);
	int (*mkdir)(ckpt_vfs *vfs, const char *dir);           /**< OK when it exists */
	void (*destroy)(ckpt_vfs *vfs);
} ckpt_vfs_methods;

struct ckpt_vfs {
	const ckpt_vfs_methods *methods;
};

/* ---- convenience wrappers (all set the last error on failure) ---- */
CKPT_API int ckpt_io_pread(ckpt_io *io, void *buf, size_t n, uint64_t off, size_t *got);
/** Read exactly n bytes or fail with CKPT_EFORMAT naming the offset and file size. */
CKPT_API int ckpt_io_read_exact(ckpt_io *io, void *buf, size_t n, uint64_t off);
CKPT_API int ckpt_io_pwrite(ckpt_io *io, const void *buf, size_t n, uint64_t off);
CKPT_API int ckpt_io_size(ckpt_io *io, uint64_t *out);
CKPT_API int ckpt_io_sync(ckpt_io *io);
CKPT_API int ckpt_io_close(ckpt_io *io);  /**< NULL ok */
CKPT_API const char *ckpt_io_path(const ckpt_io *io);

CKPT_API int ckpt_vfs_open(ckpt_vfs *vfs, const char *path, int flags, ckpt_io **out);
CKPT_API int ckpt_vfs_rename(ckpt_vfs *vfs, const char *from, const char *to);
CKPT_API int ckpt_vfs_remove(ckpt_vfs *vfs, const char *path);
CKPT_API int ckpt_vfs_exists(ckpt_vfs *vfs, const char *path, int *is_dir);
CKPT_API int ckpt_vfs_sync_dir(ckpt_vfs *vfs, const char *dir);
CKPT_API int ckpt_vfs_list(ckpt_vfs *vfs, const char *dir, char ***names, size_t *count);
CKPT_API int ckpt_vfs_mkdir(ckpt_vfs *vfs, const char *dir);
CKPT_API void ckpt_vfs_free_list(char **names, size_t count);
/** Read a whole (small) file into a fresh buffer, at most `max` bytes (ELIMIT above). */
CKPT_API int ckpt_vfs_read_all(ckpt_vfs *vfs, const char *path, uint64_t max, void **buf, size_t *n);
/**
 * Write `n` bytes to `path` atomically: a temporary sibling, fsync, rename,
 * fsync of the directory. On failure the previous file is untouched.
 */
CKPT_API int ckpt_vfs_write_atomic(ckpt_vfs *vfs, const char *path, const void *buf, size_t n, int fsync_data);
CKPT_API void ckpt_vfs_free(ckpt_vfs *vfs);  /**< NULL ok; the default VFS is never freed */

/** The POSIX file system (process-wide, never freed). */
CKPT_API ckpt_vfs *ckpt_vfs_default(void);

/** An empty in-memory file system. Directories exist implicitly. Thread-safe. */
CKPT_API int ckpt_vfs_memory_new(ckpt_vfs **out);
/** Put a copy of `buf` at `path` (replacing any file there). */
CKPT_API int ckpt_vfs_memory_put(ckpt_vfs *vfs, const char *path, const void *buf, size_t n);
/** Borrow the content of `path` (valid until the file is changed or removed). */
CKPT_API int ckpt_vfs_memory_get(ckpt_vfs *vfs, const char *path, const void **buf, size_t *n);

/**
 * A wrapper over `inner` (borrowed) that counts every call that can fail —
 * open, pread, pwrite, size, sync, close, rename, remove, sync_dir, list,
 * mkdir — and makes call number `fail_at` (1-based) fail with CKPT_EIO
 * (0 = never fail, just count). A failing pwrite writes nothing.
 */
CKPT_API int ckpt_vfs_faulty_new(ckpt_vfs **out, ckpt_vfs *inner, long fail_at);
/** Calls counted so far. */
CKPT_API long ckpt_vfs_faulty_calls(const ckpt_vfs *vfs);
/** 1 once the injected failure has fired. */
CKPT_API int ckpt_vfs_faulty_fired(const ckpt_vfs *vfs);

/** A read-only ckpt_io over caller memory (borrowed; not copied). */
CKPT_API int ckpt_io_open_memory(ckpt_io **out, const void *buf, size_t n, const char *name);

#ifdef __cplusplus
}
#endif
#endif
