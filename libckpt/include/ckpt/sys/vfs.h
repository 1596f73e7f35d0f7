/*
 * libckpt extender API — the method tables of a file system (ckpt_vfs) and
 * of its open files (ckpt_io), for a VFS implementer: a wrapper (counting,
 * progress, fault injection) or a new store. Not included by ckpt/ckpt.h.
 *
 * A wrapping VFS keeps the fast paths by passing its inner file's
 * descriptor on (the io `fd` method), or sees every byte by returning -1.
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
 * Rules every implementation follows:
 *  - pread returns the number of bytes read in *got; a short read is not an
 *    error at this level. ckpt_io_read_exact turns it into CKPT_EFORMAT with
 *    the offset ("truncated: wanted N bytes at offset O, file has S").
 *  - A file replaced after it was opened either keeps being read as opened
 *    (POSIX) or fails its reads with CKPT_EBUSY (an object store pins reads
 *    to the version it opened, so two versions never mix).
 *  - Errors set the thread-local last error with the path (ckpt/sys/error.h).
 *
 * What a VFS does not see: process-private scratch with no name (the Keras
 * archive reader's unnamed $TMPDIR file or memfd for a member, the HDF5
 * sandbox's memfd images), /proc and /dev/null, and the sandbox server's
 * executable.
 */
#ifndef CKPT_SYS_VFS_H
#define CKPT_SYS_VFS_H

#include "ckpt/io.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Versions of the method tables (their first member). */
#define CKPT_IO_METHODS_V1 1u
#define CKPT_IO_METHODS_V2 2u   /**< adds fd, pread_direct */
#define CKPT_IO_METHODS_V3 3u   /**< adds pwrite_crc */
#define CKPT_VFS_METHODS_V1 1u
#define CKPT_VFS_METHODS_V2 2u  /**< adds caps, rmdir, lock, unlock */


/** Methods of one open file. Append-only; `version` is CKPT_IO_METHODS_V1, _V2 or _V3. */
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
	/* ---- version 3 (read only when version >= CKPT_IO_METHODS_V3; may be NULL) ---- */
	/**
	 * pwrite that also returns the crc32c of the n bytes (ckpt_crc32c_extend
	 * from 0), for a file whose write is a copy in this process's memory:
	 * it takes the crc of each piece just copied, while it is in cache,
	 * instead of the writer reading the caller's bytes a second time (the
	 * memory tier's mapped files). NULL: the writer crcs, then pwrites.
	 */
	int (*pwrite_crc)(ckpt_io *io, const void *buf, size_t n, uint64_t off, uint32_t *crc);
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
	/** ENOTFOUND when absent, where the file system can tell without asking twice (S3: a DELETE of a missing
	 *  key succeeds, so only an absence the client already knows is reported; callers treat both alike) */
	int (*remove)(ckpt_vfs *vfs, const char *path);
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

#ifdef __cplusplus
}
#endif
#endif
