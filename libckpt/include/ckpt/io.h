/*
 * libckpt — the I/O layer. Every byte a reader or writer touches goes through
 * a ckpt_io (one open file: pread/pwrite at offsets) obtained from a ckpt_vfs
 * (a file system: open, rename, remove, list, sync a directory). Three file
 * systems ship: the POSIX one (default), an in-memory one (tests, fuzzers,
 * readers fed from buffers) and a fault-injecting wrapper that fails the i-th
 * call (crash-consistency tests), after SQLite's VFS and test_vfs.c.
 *
 * The VFS is the only door to files: no reader, writer, manager or command
 * opens, maps, lists, locks or removes a path by itself. Fast paths (mmap,
 * parallel pread on a descriptor, O_DIRECT, cachestat) ask the open file for
 * a descriptor (ckpt_io_fd) and fall back to pread when it has none, so a
 * wrapping VFS keeps them by passing its inner file's descriptor on, or sees
 * every byte by returning -1.
 *
 * Method tables are versioned (the `version` field, first in both tables):
 * a table with version 1 ends after `map` / `destroy`, and the library never
 * reads the version-2 members of it; each of those is also NULL-able, with
 * the fallback its comment states. So a v1 table written for 0.1.0 keeps
 * working unchanged, and a new member is only ever appended. Write tables
 * with designated initializers (`{ .version = CKPT_VFS_METHODS_V2, .open =
 * my_open, ... }`): members appended later then stay zero without a
 * -Wmissing-field-initializers warning.
 *
 * Not files of the VFS: process-private scratch with no name (the Keras
 * archive reader's unnamed $TMPDIR file or memfd for a member, the HDF5
 * sandbox's memfd images), /proc and /dev/null, and the sandbox server's executable.
 *
 * Rules every implementation follows:
 *  - pread returns the number of bytes read in *got; a short read is not an
 *    error at this level. ckpt_io_read_exact turns it into CKPT_EFORMAT with
 *    the offset ("truncated: wanted N bytes at offset O, file has S").
 *  - A file replaced after it was opened either keeps being read as opened
 *    (POSIX) or fails its reads with CKPT_EBUSY (an object store pins reads
 *    to the version it opened, so two versions never mix).
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
	CKPT_IO_WRITE = 2,   /**< create or truncate, write-only (with CKPT_IO_READ: and read back what was written) */
	/**
	 * With CKPT_IO_WRITE: create the file only if `path` does not exist, in
	 * one atomic step, else fail with CKPT_EEXIST. Only for file systems with
	 * CKPT_VFS_CAP_EXCL; ckpt_vfs_open refuses it elsewhere (CKPT_EUNSUPPORTED).
	 */
	CKPT_IO_EXCL = 4,
};

/** Versions of the method tables (their first member). */
#define CKPT_IO_METHODS_V1 1u
#define CKPT_IO_METHODS_V2 2u   /**< adds fd, pread_direct */
#define CKPT_VFS_METHODS_V1 1u
#define CKPT_VFS_METHODS_V2 2u  /**< adds caps, rmdir, lock, unlock */

/** Alignment of buffer, length and offset for pread_direct (O_DIRECT's block). */
#define CKPT_IO_DIRECT_ALIGN 4096u

/** Capabilities of a file system (ckpt_vfs_methods.caps, version 2; see ckpt_vfs_caps). */
enum {
	/**
	 * rename is absent or not atomic (object stores): a writer commits by
	 * writing the final name directly, after everything it depends on, and
	 * never relies on renaming a temporary over it; the file system makes a
	 * file written for CKPT_IO_WRITE visible whole, at a successful close.
	 * Honoured by ckpt_vfs_write_atomic (so by the manager's state file)
	 * and the Keras HDF5 writer.
	 */
	CKPT_VFS_CAP_NO_RENAME = 1u << 0,
	/** open honours CKPT_IO_EXCL atomically (O_EXCL, a conditional put). */
	CKPT_VFS_CAP_EXCL = 1u << 1,
	/** files live in this process's memory: syncing costs nothing and nothing survives the process. */
	CKPT_VFS_CAP_IN_MEMORY = 1u << 2,
};

/** Methods of one open file. Append-only; `version` is CKPT_IO_METHODS_V1 or _V2. */
typedef struct ckpt_io_methods {
	unsigned version;
	int (*pread)(ckpt_io *io, void *buf, size_t n, uint64_t off, size_t *got);
	int (*pwrite)(ckpt_io *io, const void *buf, size_t n, uint64_t off);
	int (*size)(ckpt_io *io, uint64_t *out);
	int (*sync)(ckpt_io *io);
	int (*close)(ckpt_io *io);   /**< frees `io`; returns the status of the final flush */
	/** Optional (may be NULL): a stable pointer to the whole content, for zero-copy readers. */
	const void *(*map)(ckpt_io *io, uint64_t *size);
	/* ---- version 2 (read only when version >= CKPT_IO_METHODS_V2; each may be NULL) ---- */
	/**
	 * A file descriptor of this open file for the fast paths (mmap, parallel
	 * pread, an O_DIRECT reopen, cachestat), or -1. Borrowed: valid until
	 * close, never closed by the caller. Bytes read through it bypass pread,
	 * so a wrapper that must see every byte (counting, fault injection)
	 * returns -1. NULL: -1.
	 */
	int (*fd)(ckpt_io *io);
	/**
	 * pread that bypasses the operating system's page cache where it can
	 * (cold reads of big files): `buf`, `n` and `off` are multiples of
	 * CKPT_IO_DIRECT_ALIGN. NULL, or CKPT_EUNSUPPORTED from it (the file
	 * system refuses direct I/O): ckpt_io_pread_direct uses pread.
	 */
	int (*pread_direct)(ckpt_io *io, void *buf, size_t n, uint64_t off, size_t *got);
} ckpt_io_methods;

/** Base of every open file; implementations embed it first. */
struct ckpt_io {
	const ckpt_io_methods *methods;
	char *path;  /**< as opened (owned) */
};

/** Methods of a file system. Append-only; `version` is CKPT_VFS_METHODS_V1 or _V2. */
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
	/* ---- version 2 (read only when version >= CKPT_VFS_METHODS_V2; methods may be NULL) ---- */
	/** CKPT_VFS_CAP_* bits (0 for a v1 table). */
	unsigned caps;
	/**
	 * Remove the empty directory `dir`; CKPT_ENOTFOUND when absent. NULL:
	 * CKPT_OK (a file system whose directories exist only through the files
	 * in them, like an object store or the memory VFS, has nothing to remove).
	 */
	int (*rmdir)(ckpt_vfs *vfs, const char *dir);
	/**
	 * Take the one-writer lock of checkpoint directory `dir` (a manager that
	 * saves holds it for its lifetime): CKPT_EBUSY, with a message naming the
	 * holder, when another process or manager holds it. On success *token is
	 * what unlock takes. It must be released when the holder dies, however
	 * it dies (POSIX: flock on `<dir>/checkpoint.lock`). NULL: the library's
	 * in-process registry alone guards the directory (one writer per process).
	 */
	int (*lock)(void **token, ckpt_vfs *vfs, const char *dir);
	/** Release a lock taken by lock (NULL only when lock is NULL). */
	void (*unlock)(ckpt_vfs *vfs, void *token);
} ckpt_vfs_methods;

struct ckpt_vfs {
	const ckpt_vfs_methods *methods;
};

/* ---- convenience wrappers (all set the last error on failure) ---- */
/**
 * Read up to `n` bytes at `off` (the file's pread method).
 * @param[out] got bytes read, fewer at the end of the file (may be NULL)
 * @return CKPT_OK or a negative ckpt_status
 */
CKPT_API int ckpt_io_pread(ckpt_io *io, void *buf, size_t n, uint64_t off, size_t *got);
/** Read exactly n bytes.
 * @return CKPT_OK; CKPT_EFORMAT naming the offset and file size when the file is shorter; or the read's status */
CKPT_API int ckpt_io_read_exact(ckpt_io *io, void *buf, size_t n, uint64_t off);
/** Write `n` bytes at `off` (the file's pwrite method).
 * @return CKPT_OK or a negative ckpt_status */
CKPT_API int ckpt_io_pwrite(ckpt_io *io, const void *buf, size_t n, uint64_t off);
/**
 * The file's size in bytes (the file's size method).
 * @param[out] out the size
 * @return CKPT_OK or a negative ckpt_status
 */
CKPT_API int ckpt_io_size(ckpt_io *io, uint64_t *out);
/** Flush the file to stable storage (the file's sync method).
 * @return CKPT_OK or a negative ckpt_status */
CKPT_API int ckpt_io_sync(ckpt_io *io);
/** Close and free `io`. NULL ok.
 * @return CKPT_OK, or the close's failure */
CKPT_API int ckpt_io_close(ckpt_io *io);
/** @return the path `io` was opened with (borrowed from `io`), or NULL for a NULL io. */
CKPT_API const char *ckpt_io_path(const ckpt_io *io);
/**
 * @return the open file's descriptor for fast paths (borrowed, valid until
 * close), or -1 when it has none (a v1 table, fd NULL, or a wrapper that sees
 * every byte): then use pread. NULL io: -1.
 */
CKPT_API int ckpt_io_fd(const ckpt_io *io);
/**
 * Read bypassing the page cache where the file system can (buf, n, off
 * multiples of CKPT_IO_DIRECT_ALIGN), else an ordinary pread.
 * @param[out] got bytes read (a short read is not an error)
 * @return CKPT_OK or a negative ckpt_status
 */
CKPT_API int ckpt_io_pread_direct(ckpt_io *io, void *buf, size_t n, uint64_t off, size_t *got);

/**
 * Open `path` with CKPT_IO_* `flags` (the file system's open method).
 * @param[out] out the open file, caller-owned; close with ckpt_io_close
 * @return CKPT_OK; CKPT_EUNSUPPORTED for CKPT_IO_EXCL on a file system
 *         without CKPT_VFS_CAP_EXCL; or the open's status (CKPT_ENOTFOUND, CKPT_EEXIST, ...)
 */
CKPT_API int ckpt_vfs_open(ckpt_vfs *vfs, const char *path, int flags, ckpt_io **out);
/** Rename `from` to `to` (the file system's rename method).
 * @return CKPT_OK or a negative ckpt_status */
CKPT_API int ckpt_vfs_rename(ckpt_vfs *vfs, const char *from, const char *to);
/** Remove the file `path`.
 * @return CKPT_OK; CKPT_ENOTFOUND when absent; or another negative ckpt_status */
CKPT_API int ckpt_vfs_remove(ckpt_vfs *vfs, const char *path);
/**
 * Whether `path` exists.
 * @param[out] is_dir 1 when it is a directory (may be NULL)
 * @return 1 when it exists, 0 when not, or a negative ckpt_status
 */
CKPT_API int ckpt_vfs_exists(ckpt_vfs *vfs, const char *path, int *is_dir);
/** Make the entries of directory `dir` durable (fsync of the directory where there is one).
 * @return CKPT_OK or a negative ckpt_status */
CKPT_API int ckpt_vfs_sync_dir(ckpt_vfs *vfs, const char *dir);
/**
 * The names (not paths) in `dir`, sorted bytewise.
 * @param[out] names caller-owned; free with ckpt_vfs_free_list
 * @param[out] count entries in `*names`
 * @return CKPT_OK or a negative ckpt_status
 */
CKPT_API int ckpt_vfs_list(ckpt_vfs *vfs, const char *dir, char ***names, size_t *count);
/** Create directory `dir`.
 * @return CKPT_OK, also when it exists; or a negative ckpt_status */
CKPT_API int ckpt_vfs_mkdir(ckpt_vfs *vfs, const char *dir);
/** Free the `count` names of a ckpt_vfs_list result and the array. NULL ok. */
CKPT_API void ckpt_vfs_free_list(char **names, size_t count);
/** @return the CKPT_VFS_CAP_* bits of `vfs` (0 for a v1 method table). */
CKPT_API unsigned ckpt_vfs_caps(const ckpt_vfs *vfs);
/**
 * Remove the empty directory `dir` (CKPT_OK where the file system has no
 * directories of its own to remove).
 * @return CKPT_OK, CKPT_ENOTFOUND when absent, or another negative ckpt_status
 */
CKPT_API int ckpt_vfs_rmdir(ckpt_vfs *vfs, const char *dir);
/**
 * Take the one-writer lock of checkpoint directory `dir` through the file
 * system, and the in-process registry that refuses a second manager of the
 * same directory in this process (also for file systems without a lock).
 * @param[out] token what ckpt_vfs_unlock takes (caller-owned)
 * @return CKPT_OK, CKPT_EBUSY (the message names the holder), or another negative ckpt_status
 */
CKPT_API int ckpt_vfs_lock(void **token, ckpt_vfs *vfs, const char *dir);
/** Release a lock from ckpt_vfs_lock. NULL token ok. */
CKPT_API void ckpt_vfs_unlock(ckpt_vfs *vfs, void *token);
/**
 * Read a whole (small) file into a fresh buffer, at most `max` bytes. A
 * file replaced while it is read (CKPT_EBUSY from the VFS) is read again
 * from the start, up to 4 times: the result is always one whole version.
 * @param[out] buf caller-owned, NUL-terminated after its `*n` bytes; free with ckpt_free
 * @param[out] n   bytes read
 * @return CKPT_OK; CKPT_ELIMIT for a file above `max`; CKPT_ENOMEM; or the open / read status
 */
CKPT_API int ckpt_vfs_read_all(ckpt_vfs *vfs, const char *path, uint64_t max, void **buf, size_t *n);
/**
 * Write `n` bytes to `path` atomically: a temporary sibling, fsync, rename,
 * fsync of the directory. On failure the previous file is untouched. On a
 * file system with CKPT_VFS_CAP_NO_RENAME: `path` itself, in one write,
 * which such a file system publishes whole at a successful close.
 * @return CKPT_OK or a negative ckpt_status
 */
CKPT_API int ckpt_vfs_write_atomic(ckpt_vfs *vfs, const char *path, const void *buf, size_t n, int fsync_data);
CKPT_API void ckpt_vfs_free(ckpt_vfs *vfs);  /**< NULL ok; the default VFS is never freed */

/** @return the POSIX file system (process-wide, never freed). */
CKPT_API ckpt_vfs *ckpt_vfs_default(void);

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
 * @param[out] buf borrowed: valid until the file is changed or removed
 * @param[out] n   its size in bytes
 * @return CKPT_OK; CKPT_ENOTFOUND when there is no such file; CKPT_ENOMEM
 */
CKPT_API int ckpt_vfs_memory_get(ckpt_vfs *vfs, const char *path, const void **buf, size_t *n);

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

/**
 * A read-only ckpt_io over caller memory (borrowed; not copied: `buf` must outlive it).
 * @param[out] out caller-owned; close with ckpt_io_close
 * @return CKPT_OK; CKPT_EINVAL for a NULL argument; CKPT_ENOMEM
 */
CKPT_API int ckpt_io_open_memory(ckpt_io **out, const void *buf, size_t n, const char *name);

#ifdef __cplusplus
}
#endif
#endif
