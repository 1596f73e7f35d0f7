/*
 * libckpt — common definitions: version, status codes, the thread-local last
 * error, the allocator hook and the caps every reader enforces.
 *
 * Conventions (whole API):
 *  - Functions return an int status: CKPT_OK (0) or a negative ckpt_status.
 *  - Out parameters come first; `**out` belongs to the caller; a borrowed
 *    result is a return value.
 *  - Returned `const` pointers are borrowed and live as long as their parent.
 *  - Counts are named `num_` (ckpt_reader_num_entries), getters bare
 *    (ckpt_object_child), never `_count` / `_get_`.
 *  - Every function is documented here with `@param[out]` and `@return`.
 *  scripts/api_rules.py checks these (tests/api/test_api_rules.c).
 *  - Every *_free() accepts NULL.
 *  - On failure, ckpt_error_last() describes what went wrong, with the file
 *    path, the variable name and the byte offset where they are known.
 *
 * Examples in these headers are blocks indented four spaces in a comment,
 * after a blank comment line; those holding code are written as whole C
 * functions and compiled by the suite (tests/api/test_header_examples.c).
 */
#ifndef CKPT_COMMON_H
#define CKPT_COMMON_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define CKPT_API __declspec(dllexport)
#elif defined(__GNUC__)
#define CKPT_API __attribute__((visibility("default")))
#else
#define CKPT_API
#endif

#if defined(__GNUC__)
#define CKPT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define CKPT_PRINTF(f, a)
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define CKPT_VERSION_MAJOR 0
#define CKPT_VERSION_MINOR 2
#define CKPT_VERSION_PATCH 1
/** Compile-time version, MAJOR*1000000 + MINOR*1000 + PATCH. */
#define CKPT_VERSION_NUMBER (CKPT_VERSION_MAJOR * 1000000 + CKPT_VERSION_MINOR * 1000 + CKPT_VERSION_PATCH)
#define CKPT_VERSION_STRING "0.2.1"

/** @return the runtime version of the linked library (compare with CKPT_VERSION_NUMBER). */
CKPT_API int ckpt_version_number(void);

/** Status codes. Values are stable and never reused. */
typedef enum ckpt_status {
	CKPT_OK = 0,
	CKPT_ERROR = -1,       /**< generic failure (see message) */
	CKPT_ENOTFOUND = -2,   /**< file, variable or object not found */
	CKPT_EFORMAT = -3,     /**< malformed or truncated input */
	CKPT_ECHECKSUM = -4,   /**< a stored checksum does not match */
	CKPT_EUNSUPPORTED = -5,/**< valid input using a feature we do not support */
	CKPT_EIO = -6,         /**< operating-system I/O failure (see sys_errno) */
	CKPT_ENOMEM = -7,      /**< allocation failed */
	CKPT_EINVAL = -8,      /**< invalid argument from the caller */
	CKPT_ITEROVER = -9,    /**< iteration finished (not an error) */
	CKPT_ESCOPE = -10,     /**< strategy / scope / replica-context misuse */
	CKPT_EMISMATCH = -11,  /**< dtype or shape differs between checkpoint and live object */
	CKPT_ELIMIT = -12,     /**< a documented cap was exceeded (size, count, rank, budget) */
	CKPT_EBUSY = -13,      /**< held by another writer (a checkpoint directory's manager; the message names its pid) */
	CKPT_EEXIST = -14      /**< an exclusive create (CKPT_IO_EXCL) found the file already there */
} ckpt_status;

/** @return the short stable name of a status ("CKPT_EFORMAT"), static; never NULL. */
CKPT_API const char *ckpt_status_name(int code);

/**
 * The last error of the calling thread. Never NULL; code == CKPT_OK when no
 * error was recorded. The strings stay valid until the next failing call on
 * this thread.
 */
typedef struct ckpt_error {
	int code;             /**< a ckpt_status */
	const char *message;  /**< "crc32c mismatch: want 0x…, got 0x…" */
	const char *path;     /**< file involved, or NULL */
	const char *variable; /**< variable / key / dataset involved, or NULL */
	int64_t offset;       /**< byte offset in `path`, or -1 */
	int sys_errno;        /**< errno of a failed system call, or 0 */
} ckpt_error;

/** @return the calling thread's last error (borrowed, thread-local); never NULL. */
CKPT_API const ckpt_error *ckpt_error_last(void);
/**
 * The status of a call that returns a borrowed pointer (NULL on failure, with
 * the last error set): `ckpt_status_of(c = ckpt_object_child(o, "x"))`.
 * @return CKPT_OK when `result` is not NULL, else ckpt_error_last()->code
 *         (CKPT_OK for a function whose NULL is a documented success, such as
 *         ckpt_manager_restore_latest on a fresh start)
 */
CKPT_API int ckpt_status_of(const void *result);
/** Reset the calling thread's last error to code CKPT_OK. */
CKPT_API void ckpt_error_clear(void);
/**
 * Format the last error as one line: "<path>: variable '<v>' at offset <n>:
 * <message>" (parts omitted when unknown; the "variable '<v>'" part also
 * when the message already quotes '<v>', so the name is said once).
 * `e` NULL = ckpt_error_last(). The line is cut to fit `n` bytes.
 * @return `buf`
 */
CKPT_API char *ckpt_error_format(const ckpt_error *e, char *buf, size_t n);

/**
 * Allocator hook (all library allocations except those made inside HDF5,
 * libarchive, jansson and protobuf-c go through it). Pass NULL to restore the
 * C library allocator. Not thread-safe against concurrent allocation: set it
 * before using the library.
 */
typedef struct ckpt_allocator {
	void *(*malloc_fn)(size_t n, void *ctx);
	void *(*realloc_fn)(void *p, size_t n, void *ctx);
	void (*free_fn)(void *p, void *ctx);
	void *ctx;
} ckpt_allocator;
/** Install `a` (copied) as the allocator hook above; NULL, or one missing a function, restores the C library's. */
CKPT_API void ckpt_set_allocator(const ckpt_allocator *a);

/*
 * Caps enforced by every reader. A file that needs more is rejected with
 * CKPT_ELIMIT (or CKPT_EFORMAT when the value is impossible for its size).
 */
#define CKPT_MAX_RANK 32                       /**< tensor rank */
#define CKPT_MAX_NAME_LEN 4096                 /**< bytes in one variable name / key */
#define CKPT_MAX_VARIABLES 4000000             /**< entries in one checkpoint */
#define CKPT_MAX_SHARDS 65536                  /**< data files of one bundle */
#define CKPT_MAX_INDEX_BYTES (1ull << 31)      /**< size of a .index file */
#define CKPT_MAX_BLOCK_BYTES (64ull << 20)     /**< one SSTable block, uncompressed */
#define CKPT_MAX_OBJECT_GRAPH_BYTES (256ull << 20) /**< serialized object graph */
#define CKPT_MAX_OBJECT_GRAPH_DEPTH 512        /**< path length in the object graph */
#define CKPT_MAX_ATTR_BYTES (16ull << 20)      /**< one HDF5 attribute / JSON config */
#define CKPT_MAX_ZIP_MEMBER_BYTES (16ull << 30)/**< one .keras member, uncompressed */
#define CKPT_MAX_ZIP_RATIO 100                 /**< uncompressed / compressed ratio above 4 GiB */
#define CKPT_MAX_JSON_DEPTH 256                /**< nesting of a Keras config */
/**
 * Default global read budget: a reader never allocates more than
 * max(file size, 64 MiB) for one tensor beyond what the file can hold;
 * a declared tensor size larger than its stored bytes is rejected.
 */
#define CKPT_DEFAULT_MEMORY_BUDGET (64ull << 30)
/**
 * Bytes of a `checkpoint` state file (text CheckpointState) read by
 * ckpt_reader_open(dir) and the manager; a larger one is ELIMIT.
 */
#define CKPT_MAX_STATE_FILE_BYTES (16ull << 20)

#ifdef __cplusplus
}
#endif
#endif
