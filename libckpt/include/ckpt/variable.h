/*
 * libckpt — variables created through the current strategy.
 *
 * Kinds:
 *  - plain: one buffer; created outside any scope (default strategy).
 *  - mirrored: one buffer per replica, kept identical; created inside a
 *    mirrored scope. Cross-replica assign writes every copy.
 *  - sync-on-read: per-replica accumulators (metrics); a cross-replica read
 *    aggregates with SUM, MEAN or ONLY_FIRST_REPLICA.
 *
 * The loud rule: updating a variable from replica context requires that the
 * variable belongs to the strategy being run. A plain variable updated inside
 * a mirrored run fails with CKPT_ESCOPE and a message naming the variable,
 * both strategies and the fix ("created outside strategy scope; create or
 * load it inside the scope").
 *
 * Sync-on-read SUM / MEAN aggregation supports float32, float64, int32 and
 * int64 (other dtypes: ONLY_FIRST_REPLICA). String variables are not
 * supported (EUNSUPPORTED). Outside a mirrored scope a sync-on-read request
 * gives a plain variable that keeps its aggregation.
 *
 * Memory: host copies are 64-byte aligned (2 MiB aligned from 2 MiB on) in
 * 4 KiB pages. CKPT_HUGE_PAGES=1 in the environment (read once per process)
 * advises them as transparent huge pages; off by default because on VMs that
 * hand free memory back to their host huge pages fault in several times
 * slower (README, Changes, 0.2.1).
 */
#ifndef CKPT_VARIABLE_H
#define CKPT_VARIABLE_H

#include "ckpt/common.h"
#include "ckpt/tensor.h"
#include "ckpt/strategy.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckpt_variable ckpt_variable;

typedef enum ckpt_var_kind {
	CKPT_VAR_PLAIN = 0,
	CKPT_VAR_MIRRORED = 1,
	CKPT_VAR_SYNC_ON_READ = 2
} ckpt_var_kind;
/** @return "plain", "mirrored", "sync-on-read" (static); "invalid" for another value. */
CKPT_API const char *ckpt_var_kind_name(ckpt_var_kind k);

typedef enum ckpt_synchronization {
	CKPT_SYNC_AUTO = 0,     /**< on-write (mirrored) inside a mirrored scope */
	CKPT_SYNC_ON_WRITE = 1,
	CKPT_SYNC_ON_READ = 2   /**< metrics: per-replica accumulation */
} ckpt_synchronization;

typedef enum ckpt_aggregation {
	CKPT_AGG_NONE = 0,
	CKPT_AGG_SUM = 1,
	CKPT_AGG_MEAN = 2,
	CKPT_AGG_ONLY_FIRST_REPLICA = 3
} ckpt_aggregation;

typedef struct ckpt_variable_options {
	unsigned version;                 /**< CKPT_VARIABLE_OPTIONS_VERSION */
	ckpt_synchronization sync;
	ckpt_aggregation aggregation;     /**< required (not NONE) for SYNC_ON_READ */
	int trainable;                    /**< informational */
	const void *initial_value;        /**< nbytes copied into every replica; NULL = zeros */
	/**
	 * Wrap trainer-owned buffers instead of allocating: an array of
	 * num_replicas pointers (1 for plain variables), each of nbytes.
	 * Fixed-size dtypes only. Without initial_value their contents are kept
	 * as they are. The array itself is read during the call only.
	 * Lifetime: each buffer stays valid, at the same address, until the
	 * variable is freed (ckpt_variable_free, or for a tracked variable the
	 * free of its last object / ckpt_checkpoint_free); the library never
	 * frees it. It is read by saves and written by restores (in place, all
	 * or nothing) and by assign; otherwise it is the trainer's.
	 * Alignment: any address is accepted (the library copies bytes);
	 * aligning to the dtype's size is the trainer's own need for typed
	 * access (ckpt_object_add_buffer_variables, ckpt/layout.h, requires it).
	 * Overlap: host buffers must not overlap each other, initial_value
	 * (unless equal), or memory another live variable wraps (host state,
	 * other replica_buffers): CKPT_EINVAL naming both variables. Under a
	 * memory provider they are device buffers of the replica's device,
	 * freed by the caller after the variable.
	 */
	void *const *replica_buffers;
} ckpt_variable_options;
#define CKPT_VARIABLE_OPTIONS_VERSION 1
#define CKPT_VARIABLE_OPTIONS_INIT { CKPT_VARIABLE_OPTIONS_VERSION, CKPT_SYNC_AUTO, CKPT_AGG_NONE, 1, NULL, NULL }

/**
 * Create a variable through the current strategy (ckpt_strategy_current()).
 * `o` may be NULL.
 * @param[out] out caller-owned; free with ckpt_variable_free
 * @return CKPT_OK; CKPT_ESCOPE from replica context; CKPT_EINVAL for bad
 *         options, dtype or shape; CKPT_ENOMEM; another negative ckpt_status
 */
CKPT_API int ckpt_variable_new(ckpt_variable **out, const char *name, ckpt_dtype dt,
	const ckpt_shape *shape, const ckpt_variable_options *o);
/** Free the variable and the copies it allocated (not wrapped replica_buffers). NULL ok. */
CKPT_API void ckpt_variable_free(ckpt_variable *v);

/** @return the name (borrowed from `v`); NULL for NULL. */
CKPT_API const char *ckpt_variable_name(const ckpt_variable *v);
/** @return the dtype; CKPT_DT_INVALID for NULL. */
CKPT_API ckpt_dtype ckpt_variable_dtype(const ckpt_variable *v);
/** @return the shape (borrowed from `v`); NULL for NULL. */
CKPT_API const ckpt_shape *ckpt_variable_shape(const ckpt_variable *v);
/** @return the bytes of one copy (STRING: the sum of the element lengths); 0 for NULL. */
CKPT_API uint64_t ckpt_variable_nbytes(const ckpt_variable *v);
/** @return plain, mirrored or sync-on-read; CKPT_VAR_PLAIN for NULL. */
CKPT_API ckpt_var_kind ckpt_variable_kind(const ckpt_variable *v);
/** @return the aggregation; CKPT_AGG_NONE for NULL. */
CKPT_API ckpt_aggregation ckpt_variable_aggregation(const ckpt_variable *v);
/** @return the strategy it was created under (borrowed); NULL for NULL. */
CKPT_API ckpt_strategy *ckpt_variable_strategy(const ckpt_variable *v);
/** @return the copies held: num_replicas for mirrored / sync-on-read, 1 for plain; 0 for NULL. */
CKPT_API int ckpt_variable_num_replicas(const ckpt_variable *v);
/** @return where it was created, for messages (borrowed): "outside any strategy scope" /
 * "inside MirroredStrategy(2 replicas)#1 scope"; NULL for NULL. */
CKPT_API const char *ckpt_variable_origin(const ckpt_variable *v);

/**
 * Raw buffer of copy `replica` (read-only use; updates go through the calls
 * below). Under a strategy over a memory provider (ckpt/memory.h) this is
 * device memory: dereference it only when the provider's caps say
 * host_addressable.
 * @return the buffer, borrowed from `v`; NULL for a replica out of range
 */
CKPT_API const void *ckpt_variable_replica_data(const ckpt_variable *v, int replica);

/**
 * Cross-replica assign (outside replica context): copy `n` (== nbytes) bytes
 * into every copy. For SYNC_ON_READ with SUM the value is divided across
 * replicas so that the aggregate equals `src` bit for bit, for every N:
 * replica 0 gets `src` and the others zero (floats: -0.0, the exact
 * identity of addition, so a stored -0.0 also reads back as -0.0). The
 * per-replica partial sums are therefore not the ones that were saved, only
 * their aggregate. (TensorFlow divides `src` by N instead, inexact unless N
 * is a power of two.) With MEAN / ONLY_FIRST_REPLICA every copy gets `src`.
 * Copies are written in parallel (OpenMP). `src` may be copy 0 but must not
 * overlap another copy (EINVAL). In replica context: ESCOPE.
 * @return CKPT_OK or a negative ckpt_status as said above (also CKPT_EINVAL when n != nbytes)
 */
CKPT_API int ckpt_variable_assign(ckpt_variable *v, const void *src, size_t n);
/**
 * Cross-replica read into `dst` (n == nbytes): the primary copy of a
 * mirrored or plain variable; the aggregate of a sync-on-read one.
 * SUM combines replicas in order 0..N-1 in the variable's type; MEAN adds in
 * a wider type (double for float32, long double for float64) and divides by
 * N, rounding once, so N equal copies (a restored or assigned value) read
 * back bit for bit for any N up to 2048 (integers truncate toward zero).
 * @return CKPT_OK; CKPT_ELIMIT when an integer SUM overflows; CKPT_EINVAL when n != nbytes
 *         or for a STRING variable; another negative ckpt_status
 */
CKPT_API int ckpt_variable_read(const ckpt_variable *v, void *dst, size_t n);

/**
 * Replica-context access for an update: returns this replica's copy in
 * `*out`. Fails with CKPT_ESCOPE (message names the variable, the running
 * strategy and the variable's strategy, and says how to fix it) when the
 * variable does not belong to the strategy being run — for example a plain
 * variable (created outside the scope) updated in a mirrored run.
 * Outside replica context, it returns the primary copy of a variable of the
 * default strategy, and ESCOPE for mirrored ones (use ckpt_variable_assign).
 * @return the copy, borrowed from `v` (not to be freed); NULL on failure with ckpt_error_last() set:
 *         CKPT_ESCOPE as said above
 */
CKPT_API void *ckpt_variable_local(ckpt_variable *v);

/** @return 1 when every replica copy is bit-identical to the primary, else 0. */
CKPT_API int ckpt_variable_replicas_identical(const ckpt_variable *v);

/*
 * Change tracking for incremental saves (ckpt_manager_options.incremental).
 * The library sees every write it makes (assign, ckpt_strategy_run through
 * ckpt_variable_local, restores) and an incremental save skips a value that
 * none touched since the last committed save. It cannot see writes to
 * memory the trainer owns (replica_buffers, host state): such a value is in
 * doubt, so every save compares it block by block (crc32c of 4 KiB blocks,
 * computed while writing) with the last save and writes the blocks that
 * differ. A trainer that marks its writes can spare that pass.
 */
/**
 * `v`'s memory was written behind the library's back: the next
 * incremental save writes it (still block by block).
 * @return CKPT_OK; CKPT_EINVAL for NULL
 */
CKPT_API int ckpt_variable_mark_dirty(ckpt_variable *v);
/**
 * on = 1: the trainer promises to call ckpt_variable_mark_dirty after
 * every write to `v`'s own buffers (replica_buffers, host state), so an
 * unmarked `v` counts as unchanged and incremental saves reuse its bytes
 * without reading them. A write left unmarked is then lost from later
 * checkpoints. on = 0 (the default): such values are compared block by
 * block at every save. Counts as a write itself.
 * @return CKPT_OK; CKPT_EINVAL for NULL
 */
CKPT_API int ckpt_variable_set_marks_writes(ckpt_variable *v, int on);

/*
 * String variables and the tensor API (added for DT_STRING checkpoints).
 *
 * A STRING variable is plain or mirrored (sync-on-read: EUNSUPPORTED;
 * replica_buffers: EINVAL). Every replica holds its own deep copy of the
 * elements. For a STRING variable:
 *  - ckpt_variable_options.initial_value is a `const ckpt_bytes *` array of
 *    num_elements elements (NULL = every element empty);
 *  - ckpt_variable_nbytes is the sum of the element lengths;
 *  - ckpt_variable_replica_data(v, r) returns replica r's `const ckpt_bytes *`
 *    array (num_elements entries), valid until the next assign / free;
 *  - ckpt_variable_local in replica context returns this replica's
 *    ckpt_bytes array: read-only by contract (update with assign_tensor);
 *  - ckpt_variable_replicas_identical compares element by element;
 *  - ckpt_variable_assign / ckpt_variable_read (raw bytes) fail with
 *    CKPT_EINVAL: use the two calls below.
 */

/**
 * Cross-replica assign of a tensor, for every dtype. dtype and shape must
 * equal the variable's (CKPT_EMISMATCH naming the variable and both
 * dtypes / shapes). Fixed-size dtypes: as ckpt_variable_assign(v, t->data,
 * t->nbytes). STRING: every replica gets a deep copy of t's elements; all
 * copies are built before any is replaced, so on failure the variable is
 * unchanged. In replica context: ESCOPE.
 * @return CKPT_OK or a negative ckpt_status as said above
 */
CKPT_API int ckpt_variable_assign_tensor(ckpt_variable *v, const ckpt_tensor *t);
/**
 * Cross-replica read into a new tensor, for every dtype: fixed-size as
 * ckpt_variable_read (sync-on-read: the aggregate); STRING: a deep copy of
 * the primary copy's elements.
 * @param[out] out caller-owned; free with ckpt_tensor_free
 * @return CKPT_OK or a negative ckpt_status as ckpt_variable_read's
 */
CKPT_API int ckpt_variable_read_tensor(ckpt_tensor **out, const ckpt_variable *v);

#ifdef __cplusplus
}
#endif
#endif
