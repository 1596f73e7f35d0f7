/*
 * libckpt — the I/O layer. Every byte a reader or writer touches goes through
 * a ckpt_io (one open file: pread/pwrite at offsets) obtained from a ckpt_vfs
 * (a file system: open, rename, remove, list, sync a directory). The POSIX
 * one is the default; ckpt/s3.h adds S3. A trainer passes a ckpt_vfs in the
 * options of a checkpoint, reader or manager and uses the functions below.
 *
 * The VFS is the only door to files: no reader, writer, manager or command
 * opens, maps, lists, locks or removes a path by itself. Fast paths (mmap,
 * parallel pread on a descriptor, O_DIRECT, cachestat) ask the open file for
 * a descriptor (ckpt_io_fd) and fall back to pread when it has none.
 *
 * For extenders (not included by ckpt/ckpt.h): ckpt/sys/vfs.h, the method
 * tables a file system implements; ckpt/sys/vfs_memory.h, the in-memory file
 * system; ckpt/sys/vfs_faulty.h, the fault-injecting wrapper.
 *
 * Errors set the thread-local last error with the path.
 */
#ifndef CKPT_IO_H
#define CKPT_IO_H

#include "ckpt/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One open file (its methods: ckpt/sys/vfs.h). */
typedef struct ckpt_io ckpt_io;
/** One file system (its methods: ckpt/sys/vfs.h). */
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

/* ---- convenience wrappers (all set the last error on failure) ---- */
/**
 * Read up to `n` bytes at `off` (the file's pread method).
 * @param[out] got bytes read, fewer at the end of the file (may be NULL)
 * @return CKPT_OK or a negative ckpt_status
 */
CKPT_API int ckpt_io_pread(size_t *got, ckpt_io *io, void *buf, size_t n, uint64_t off);
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
CKPT_API int ckpt_io_size(uint64_t *out, ckpt_io *io);
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
CKPT_API int ckpt_io_pread_direct(size_t *got, ckpt_io *io, void *buf, size_t n, uint64_t off);

/**
 * Open `path` with CKPT_IO_* `flags` (the file system's open method).
 * @param[out] out the open file, caller-owned; close with ckpt_io_close
 * @return CKPT_OK; CKPT_EUNSUPPORTED for CKPT_IO_EXCL on a file system
 *         without CKPT_VFS_CAP_EXCL; or the open's status (CKPT_ENOTFOUND, CKPT_EEXIST, ...)
 */
CKPT_API int ckpt_vfs_open(ckpt_io **out, ckpt_vfs *vfs, const char *path, int flags);
/** Rename `from` to `to` (the file system's rename method).
 * @return CKPT_OK or a negative ckpt_status */
CKPT_API int ckpt_vfs_rename(ckpt_vfs *vfs, const char *from, const char *to);
/** Remove the file `path`.
 * @return CKPT_OK; CKPT_ENOTFOUND when absent (on S3 only when the client already knew: a DELETE of a
 *         missing key succeeds, so a remove there may answer CKPT_OK); or another negative ckpt_status */
CKPT_API int ckpt_vfs_remove(ckpt_vfs *vfs, const char *path);
/**
 * Whether `path` exists.
 * @param[out] is_dir 1 when it is a directory (may be NULL)
 * @return 1 when it exists, 0 when not, or a negative ckpt_status
 */
CKPT_API int ckpt_vfs_exists(int *is_dir, ckpt_vfs *vfs, const char *path);
/** Make the entries of directory `dir` durable (fsync of the directory where there is one).
 * @return CKPT_OK or a negative ckpt_status */
CKPT_API int ckpt_vfs_sync_dir(ckpt_vfs *vfs, const char *dir);
/**
 * The names (not paths) in `dir`, sorted bytewise.
 * @param[out] names caller-owned; free with ckpt_vfs_free_list
 * @param[out] count entries in `*names`
 * @return CKPT_OK or a negative ckpt_status
 */
CKPT_API int ckpt_vfs_list(char ***names, size_t *count, ckpt_vfs *vfs, const char *dir);
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
CKPT_API int ckpt_vfs_read_all(void **buf, size_t *n, ckpt_vfs *vfs, const char *path, uint64_t max);
/**
 * One operation's reads: between ckpt_vfs_op_begin() and the
 * matching ckpt_vfs_op_end(), small objects (up to 1 MiB: a `checkpoint`
 * state file, an index) that the calling thread reads whole from an S3 VFS
 * are kept, and opened again by the same thread they are served from
 * memory, with no request. Pairs nest; the outermost end drops everything,
 * so no version outlives the operation, and this client's own write,
 * delete or failed read of any key stops every kept object from being
 * served. Within the operation every open sees the version its first read
 * saw. ckpt_reader_open, ckpt_checkpoint_load and ckpt_checkpoint_restore
 * are each one operation; a caller that runs several over the same files
 * (open a reader, then load) may span them with one pair. No effect on
 * other VFSs or with CKPT_S3_CACHE_SECONDS=0.
 */
CKPT_API void ckpt_vfs_op_begin(void);
/** End the operation ckpt_vfs_op_begin started (an unmatched end does nothing). */
CKPT_API void ckpt_vfs_op_end(void);
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
 * A read-only ckpt_io over caller memory (borrowed; not copied: `buf` must outlive it).
 * @param[out] out caller-owned; close with ckpt_io_close
 * @return CKPT_OK; CKPT_EINVAL for a NULL argument; CKPT_ENOMEM
 */
CKPT_API int ckpt_io_open_memory(ckpt_io **out, const void *buf, size_t n, const char *name);

#ifdef __cplusplus
}
#endif
#endif
