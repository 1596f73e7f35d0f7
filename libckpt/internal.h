/*
 * libckpt internals shared by the core and the format backends. Not
 * installed, and nothing declared here is exported: code outside the
 * library (ckpt_mpi too) uses the public headers, extenders ckpt/sys/.
 * Error helpers after zstd's RETURN_ERROR_IF / FORWARD_IF_ERROR.
 */
#ifndef CKPT_INTERNAL_H
#define CKPT_INTERNAL_H

#include <stdarg.h>
#include <stdint.h>
#include <stddef.h>
#include "ckpt/ckpt.h"
#include "ckpt/sys/alloc.h"
#include "ckpt/sys/error.h"

/* ---- errors ---- */

/**
 * Record an error on this thread and return `code`: the core's name for
 * ckpt_error_set (ckpt/sys/error.h).
 */
#define ckpt__fail ckpt_error_set
/** Same, with the errno of a failed system call (CKPT_EIO). */
int ckpt__fail_errno(int err, const char *path, const char *fmt, ...) CKPT_PRINTF(3, 4);
/** Add a variable name / path to the current error when it has none (keeps the message). */
void ckpt__error_annotate(const char *path, const char *var);

/**
 * After an internal call returning `rc` and a borrowed result: make the last
 * error's code `rc` on failure and CKPT_OK for a successful NULL, so that
 * ckpt_status_of(result) is `rc` (the public borrowed-result functions).
 */
void ckpt__borrowed_status(int rc, int have_result);

/** 1 when `message` quotes `name` ('name'): ckpt_error_format then leaves the variable prefix out. */
int ckpt__message_names(const char *message, const char *name);

/** A copy of an error that can cross threads (OpenMP replicas → caller). */
typedef struct ckpt__error_slot {
	int code;
	char *message, *path, *variable;
	int64_t offset;
	int sys_errno;
} ckpt__error_slot;
/** Copy this thread's last error into `slot` (frees what the slot held). */
void ckpt__error_capture(ckpt__error_slot *slot);
/** How many errors this thread has recorded: compare before and after a call to see whether it set one. */
uint64_t ckpt__error_seq(void);
/** Make `slot` this thread's last error; returns slot->code. */
int ckpt__error_raise(const ckpt__error_slot *slot);
void ckpt__error_slot_clear(ckpt__error_slot *slot);

/* CKPT_TRY(expr): ckpt/sys/error.h */

/* ---- memory (through the allocator hook): the core's names for ckpt/sys/alloc.h ---- */
#define ckpt__malloc ckpt_malloc
#define ckpt__calloc ckpt_calloc /* overflow-checked */
#define ckpt__realloc ckpt_realloc
#define ckpt__free ckpt_free
char *ckpt__strdup(const char *s);
char *ckpt__strndup(const char *s, size_t n);
#include "util/strpool.h"

/*
 * A shape held compactly: rank and a pointer to rank dims kept elsewhere (a
 * pool). What one of 10,000 tiny entries carries instead of a ckpt_shape
 * (264 bytes, mostly unused dims); expanded where a ckpt_shape is needed.
 */
typedef struct ckpt__cshape {
	int rank;
	const int64_t *dims;
} ckpt__cshape;
/** A copy of s's dims in pool p (NULL dims for rank 0); ENOMEM when the pool cannot grow. */
int ckpt__cshape_make(ckpt__cshape *out, ckpt__strpool *p, const ckpt_shape *s);
/** The ckpt_shape of c. */
void ckpt__cshape_expand(const ckpt__cshape *c, ckpt_shape *out);
/** Whether c and s are the same shape (ckpt_shape_equal). */
int ckpt__cshape_equal(const ckpt__cshape *c, const ckpt_shape *s);
#include "util/huge_advice.h"
#include "util/hugebuf.h"
#include "util/slab.h"
#include "util/sort.h"
/** printf into a fresh ckpt__malloc'ed string (NULL on failure, error set). */
char *ckpt__asprintf(const char *fmt, ...) CKPT_PRINTF(1, 2);

/* ---- checked arithmetic ---- */
static inline int ckpt__add_u64(uint64_t a, uint64_t b, uint64_t *out) { return __builtin_add_overflow(a, b, out); }
static inline int ckpt__mul_u64(uint64_t a, uint64_t b, uint64_t *out) { return __builtin_mul_overflow(a, b, out); }

/* ---- checksums ---- */
#include "util/crc.h"

/* ---- paths ---- */
/** dirname into a fresh string ("." when none). */
char *ckpt__path_dir(const char *path);
/** mkdir -p `dir` through the VFS (each missing component in turn). */
int ckpt__vfs_mkdirs(ckpt_vfs *vfs, const char *dir);
/**
 * The name a writer fills before it commits `final`: `final` itself on a file
 * system without rename (CKPT_VFS_CAP_NO_RENAME: the object appears whole at
 * close, after what it depends on), else `final` + "." + `suffix`. Caller frees.
 */
char *ckpt__vfs_temp_name(ckpt_vfs *vfs, const char *final, const char *suffix);
/**
 * Mark an open file written for a commit that will not happen: its close
 * then publishes nothing (an S3 object is not uploaded; elsewhere a no-op,
 * the caller removes the temporary).
 */
void ckpt__io_abandon(ckpt_io *io);
/**
 * Send everything written to `io` so far without publishing it, so that its
 * close can only complete what is stored (an S3 object: every part uploaded
 * and stored, the completion left); CKPT_OK and nothing done elsewhere.
 */
int ckpt__io_stage(ckpt_io *io);
/** Publish `tmp` as `final`: a rename, or nothing when they are the same name. */
int ckpt__vfs_publish(ckpt_vfs *vfs, const char *tmp, const char *final);
/** 1 for the process-wide S3 VFS, which ckpt_vfs_free never frees (io_s3.c). */
int ckpt__vfs_is_shared_s3(const ckpt_vfs *vfs);
/** 1 for any S3 VFS. */
int ckpt__vfs_is_s3(const ckpt_vfs *vfs);
/**
 * 1 when a file is at `path`, 0 when nothing or only a directory is, or the
 * failure (never "absent" for an outage). Where only a file matters (an
 * older bundle's index) this spares the S3 VFS the listing by which
 * ckpt_vfs_exists tells an absent key from a non-empty prefix: one HEAD.
 */
int ckpt__vfs_file_exists(ckpt_vfs *vfs, const char *path);
/** The same on the S3 VFS `vfs`: its HEAD (or its client's cache) only (io_s3.c). */
int ckpt__s3_object_exists(ckpt_vfs *vfs, const char *path);

/* ---- server-side copies on S3 (storage/s3/s3_copy.c), for incremental saves ---- */
/* S3's smallest part but the last, and its largest part */
#define CKPT__S3_MIN_PART (5ull << 20)
#define CKPT__S3_MAX_PART (5ull << 30)
/** Bytes of the part an S3 writer is filling (*part: its part size); UINT64_MAX for any other file. */
uint64_t ckpt__io_open_part(const ckpt_io *io, uint64_t *part);
/**
 * Append n bytes at src_off of the object src_path to the S3 writer dst as
 * one part copied by the server (UploadPartCopy), if the source's ETag is
 * still `etag`. CKPT__DECLINED, dst unchanged but for its filled part sent,
 * when the source is gone or replaced, the server refuses, or S3's part
 * sizes do not allow it (n outside [CKPT__S3_MIN_PART, CKPT__S3_MAX_PART],
 * or a filled part under the minimum): the caller writes the bytes.
 * crc32c: the bytes' crc32c, given to the completion.
 */
int ckpt__io_copy_append(ckpt_io *dst, const char *src_path, const char *etag, uint64_t src_off, uint64_t n,
	uint32_t crc32c);
/**
 * The same for k consecutive ranges of the source (len[i] bytes each, crc[i]
 * their crc32c) as k parts, sent in parallel: *done of them, a prefix, were
 * copied and appended; CKPT__DECLINED when none was.
 */
int ckpt__io_copy_ranges(ckpt_io *dst, const char *src_path, const char *etag, uint64_t src_off, const uint64_t *len,
	const uint32_t *crc, size_t k, size_t *done);
/** CopyObject of src_path to dst_path (S3 VFS) if the source's ETag is still `etag`; CKPT__DECLINED otherwise. */
int ckpt__vfs_copy_object(ckpt_vfs *vfs, const char *src_path, const char *etag, const char *dst_path);
/** The ETag and size of an S3 object, asked of the server (not the cache); CKPT__DECLINED for another VFS. */
int ckpt__vfs_etag(ckpt_vfs *vfs, const char *path, char *etag, size_t cap, uint64_t *size);
/** Ranged GETs the S3 VFS sent in this process, and the bytes they asked for (tests count requests). */
void ckpt__s3_read_stats(uint64_t *gets, uint64_t *bytes);
/** a "/" b into a fresh string (b absolute → copy of b). */
char *ckpt__path_join(const char *a, const char *b);
/**
 * CKPT_OK when `name`, read from the checkpoint state file `state` in `dir`,
 * may be acted on. In an s3:// directory it must stay under it: an absolute
 * name, an s3:// URL or a "." / ".." segment is refused (CKPT_EFORMAT naming
 * the state file and the name), so a state file cannot make a restore read,
 * or retention delete, another prefix or bucket. Local directories keep
 * TensorFlow's rule (any path). (s3_config.c)
 */
int ckpt__state_name_check(const char *dir, const char *state, const char *name);

/* ---- roles ---- */
/** Classify a stored key / dataset path as model, optimizer, metric or other. */
ckpt_role ckpt__role_from_key(const char *key);

/* ---- synchronization of stored variables (sync.c) ---- */
/** EINVAL unless every rule is well formed (pattern, ON_READ + aggregation, or ON_WRITE). */
int ckpt__sync_rules_check(const ckpt_sync_rule *rules, size_t n);
/** Deep copy (patterns too), checked; *out NULL when n == 0. */
int ckpt__sync_rules_copy(ckpt_sync_rule **out, const ckpt_sync_rule *rules, size_t n);
void ckpt__sync_rules_free(ckpt_sync_rule *rules, size_t n);
/**
 * After a backend opened `r` (name index built): sync / aggregation from its
 * SavedModel, then from `rules`; sync-on-read SUM entries become metrics.
 */
int ckpt__reader_apply_sync(ckpt_reader *r, const ckpt_sync_rule *rules, size_t n);
/**
 * A TrackableObjectGraph in the form TensorFlow writes, decoded without
 * protobuf-c (og_decode.c): 1 with *out set (not yet validated), 0 when the
 * bytes need protobuf-c, CKPT_ENOMEM.
 */
int ckpt__object_graph_decode_fast(ckpt_object_graph **out, const void *buf, size_t n);
/** ckpt_object_graph_parse through protobuf-c only (size cap checked by the caller). */
int ckpt__object_graph_parse_pb(ckpt_object_graph **out, const void *buf, size_t n);
/** ckpt_object_graph_serialize through protobuf-c (the reference the library's own encoder is tested against). */
int ckpt__object_graph_serialize_pb(const ckpt_object_graph *g, void **buf, size_t *n);
/** Index of the first entry named `name`: 1 when found (no error set either way). */
int ckpt__reader_lookup(const ckpt_reader *r, const char *name, size_t *index);
/** Build the index ckpt__reader_lookup uses (reader_index.c; readers of more than a few entries). */
int ckpt__reader_build_name_index(ckpt_reader *r);
/** Move the reader's object graph to the caller (a session keeps it past the reader); NULL when none. */
ckpt_object_graph *ckpt__reader_take_object_graph(ckpt_reader *r);

/* Reading many entries at once (reader.c; the TensorBundle backend's cold-read pipeline). */
/** One whole fixed-size entry: into dst (n bytes), or only checked against its crc32c when dst is NULL. */
typedef struct ckpt__read_req {
	size_t entry;
	void *dst;
	size_t n;
} ckpt__read_req;
/** A backend's answer: it chose not to handle the call and wrote nothing. */
#define CKPT__DECLINED 1
/**
 * ckpt__reader_read_many flag: batch only files that lend no descriptor
 * (object storage, where each entry read alone is a request); decline local
 * files, whose page cache an entry-by-entry pass fills for the reads after it.
 */
#define CKPT__READ_MANY_REMOTE_ONLY 1u
/**
 * Read or verify every request, as ckpt_reader_read_into / ckpt_reader_verify
 * would one by one, but in one pass the backend may pipeline (a cold
 * TensorBundle: O_DIRECT reads in flight; object storage: few large ranged
 * reads). `flags`: CKPT__READ_MANY_* bits. CKPT__DECLINED when the backend
 * has no such path for these requests (nothing written; read them one by
 * one); else CKPT_OK or the error of the lowest failing request.
 */
int ckpt__reader_read_many(ckpt_reader *r, const ckpt__read_req *req, size_t n, unsigned flags);
/** Free the reader's scratch buffers (ckpt_format.trim); it stays open. NULL ok. */
void ckpt__reader_trim(ckpt_reader *r);
/**
 * The fast paths' way to a whole file: open `path` through `vfs` and return a
 * descriptor of it (a duplicate of the one the open file lends, caller-owned,
 * with its size in *size) when it is a regular file that lends one; -1 with
 * no error set otherwise (the VFS path that follows reports any error).
 */
int ckpt__vfs_open_fd(ckpt_vfs *vfs, const char *path, uint64_t *size);
/**
 * ckpt_io_pread_direct without its fallback: CKPT_EUNSUPPORTED (error set)
 * when the io cannot read around the page cache, or refuses this request
 * (alignment). n 0 asks only whether it can.
 */
int ckpt__io_pread_direct_only(ckpt_io *io, void *buf, size_t n, uint64_t off, size_t *got);
/** 1 when `io` writes and crcs in one pass (pwrite_crc, io methods version 3). */
int ckpt__io_fuses_crc(const ckpt_io *io);
/** pwrite_crc: write and return the bytes' crc32c; CKPT_EUNSUPPORTED (error set) without one. */
int ckpt__io_pwrite_crc(ckpt_io *io, const void *buf, size_t n, uint64_t off, uint32_t *crc);

/* ---- the one-writer lock of a checkpoint directory (ckpt_vfs_lock) ---- */

/** The POSIX lock file, beside a checkpoint directory's `checkpoint` state file. */
#define CKPT_LOCK_FILE "checkpoint.lock"
/** io_posix_lock.c: the POSIX file system's lock and unlock methods. */
int ckpt__posix_lock(void **token, ckpt_vfs *vfs, const char *dir);
void ckpt__posix_unlock(ckpt_vfs *vfs, void *token);
/*
 * io_lock_registry.c: the locks this process holds, by key. add: CKPT_EBUSY
 * (no message: the caller words it) when the key is held; *entry is what
 * remove takes (NULL ok).
 */
int ckpt__lock_registry_add(void **entry, const char *key);
void ckpt__lock_registry_remove(void *entry);
int ckpt__lock_registry_has(const char *key);
/** What the process named in a lock file is doing (lock_holder.c; Linux /proc). */
typedef enum ckpt__holder_state {
	CKPT__HOLDER_LIVE,    /* running (or not inspectable): a real second writer */
	CKPT__HOLDER_EXITING, /* dying, still holding its files: the lock goes when it is gone */
	CKPT__HOLDER_GONE,    /* no such process, or a zombie (its files are closed) */
} ckpt__holder_state;
ckpt__holder_state ckpt__lock_holder_state(long pid);
/** CKPT_EBUSY with the message naming the holder (`pid` 0: unknown, our own pid: this process). */
int ckpt__lock_refuse(const char *dir, const char *lock_path, long pid);
/** The lock of a file system without a lock method: the registry alone, keyed by VFS and directory. */
int ckpt__lock_registry_take(void **token, ckpt_vfs *vfs, const char *dir);
void ckpt__lock_registry_drop(void *token);

#endif
