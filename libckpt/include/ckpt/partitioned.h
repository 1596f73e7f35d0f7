/*
 * libckpt — partitioned variables: one logical variable split along its
 * first axis into P parts, the C counterpart of a TF1 PartitionedVariable
 * (tf.compat.v1.get_variable(..., partitioner=fixed_size_partitioner(P)))
 * and of a TF2 ShardedVariable (FixedShardsPartitioner). Each part is an
 * ordinary ckpt_variable holding a block of rows, which the trainer reads
 * and updates directly (an embedding table too large for one worker).
 *
 *     void init_rows(ckpt_variable *part, int64_t first, int64_t rows);   // the trainer's
 *
 *     static int track_embedding(ckpt_partitioned **emb, ckpt_checkpoint *ck, ckpt_strategy *s)
 *     {
 *         ckpt_shape sh = { 2, { 1000000, 64 } };
 *         ckpt_scope_enter(s);                      // a multi-worker strategy, say
 *         int rc = ckpt_partitioned_new(emb, "emb", CKPT_DT_FLOAT, &sh, 3, NULL);
 *         if (rc == CKPT_OK)
 *             rc = ckpt_object_track_partitioned(ckpt_checkpoint_root(ck), "emb", *emb);
 *         ckpt_scope_exit(s);
 *         for (int i = 0; rc == CKPT_OK && i < ckpt_partitioned_num_parts(*emb); i++) {
 *             ckpt_variable *part = ckpt_partitioned_part(*emb, i);  // NULL: another worker's
 *             int64_t first, rows;
 *             ckpt_partitioned_part_rows(&first, &rows, *emb, i);
 *             if (part)
 *                 init_rows(part, first, rows);
 *         }
 *         return rc;
 *     }
 *
 * The split is fixed_size_partitioner's: R rows into P parts of R / P rows,
 * the first R % P parts one row more; part i covers rows
 * [first_i, first_i + rows_i) and every other dimension in full. P is
 * capped at R, as TensorFlow caps it.
 *
 * Where the parts live (owner rule): under a multi-worker strategy (ckpt/mpi.h)
 * part i belongs to worker i % W; only that worker holds it, as one plain
 * copy (a parameter-server shard, not a mirrored variable: update it from
 * the trainer's thread with ckpt_variable_assign / ckpt_variable_local
 * outside ckpt_strategy_run). Under the default and mirrored strategies
 * every part is local and created through the current strategy (mirrored
 * parts inside a mirrored scope).
 *
 * Stored as TensorFlow stores it: an entry KEY with the full dtype and
 * shape and one TensorSliceProto per part (BundleEntryProto.slices, every
 * extent explicit), and each part's rows under the slice key
 * EncodeTensorNameSlice(KEY, slice) — read by tf.train.load_checkpoint and
 * by our reader as the full tensor. KEY depends on how it is tracked:
 *  - ckpt_object_track_partitioned(obj, "emb", p): the object-graph key,
 *    "emb/.ATTRIBUTES/VARIABLE_VALUE" under the root, with a graph node
 *    whose VARIABLE_VALUE attribute has full_name `name` — what
 *    tf.train.Checkpoint(emb=sharded_variable) writes;
 *  - ckpt_checkpoint_track_partitioned(ck, p): `name` itself, outside the
 *    object graph — what tf.compat.v1.train.Saver writes and restores
 *    (with the same or another partitioner).
 * In a multi-worker save each part's bytes are written by its owner into
 * the owner's data shard; the merged index holds every entry.
 *
 * Restore (ckpt_checkpoint_restore and the manager) reads, for each part
 * this process holds, only the byte ranges of the stored rows that part
 * covers — of a stored partitioned entry with any number of axis-0 slices
 * (resharding P -> P' and W -> W' at load), or of an unpartitioned entry
 * of the full shape. Checksums stay verified although no process reads a
 * whole stored slice: each range's crc32c is computed while reading, and
 * the ranges of every stored entry (gathered from every worker) are
 * combined in order and compared with its stored crc32c. A missing key is
 * ENOTFOUND (as TF1's Saver); a different dtype or full shape EMISMATCH.
 * The checkpoint must be a TensorBundle whose partitioned entries are
 * split along axis 0 only (EUNSUPPORTED otherwise); other formats restore
 * by reading the whole tensor. Conversely, a partitioned entry also
 * restores into an unpartitioned variable of the full shape (tracked
 * under the same object path, or, for a name-keyed entry, named `name`).
 * A partitioned variable tracked after a restore gets no value then (no
 * restore-on-create), and the restore status's lists leave it out.
 *
 * Not supported: string dtype, sync-on-read parts, replica_buffers, async
 * saves (ckpt/async.h fails with EUNSUPPORTED when a partitioned variable
 * is tracked).
 */
#ifndef CKPT_PARTITIONED_H
#define CKPT_PARTITIONED_H

#include "ckpt/common.h"
#include "ckpt/tensor.h"
#include "ckpt/variable.h"
#include "ckpt/checkpoint.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckpt_partitioned ckpt_partitioned;

/**
 * A partitioned variable `name` of `dt` and full `shape` (rank >= 1,
 * shape->dims[0] >= 1) in `num_parts` (>= 1; capped at dims[0]) parts,
 * created through the current strategy (see the owner rule above). Part i
 * is the variable "<name>/part_<i>". `o` may be NULL; of its fields
 * `initial_value` (NULL = zeros) is the FULL tensor's bytes, of which each
 * part copies its rows (under a multi-worker strategy each owner takes
 * its rows from its own initial_value: nothing is broadcast), and
 * `trainable` is kept; `sync` must be AUTO or
 * ON_WRITE and `replica_buffers` NULL (EINVAL). Not in replica context
 * (ESCOPE). Under a multi-worker strategy the call is collective (every
 * worker creates the same partitioned variables in the same order; a
 * failure on one is returned on every worker).
 * @param[out] out caller-owned; free with ckpt_partitioned_free
 * @return CKPT_OK or a negative ckpt_status as said above (also CKPT_ENOMEM)
 */
CKPT_API int ckpt_partitioned_new(ckpt_partitioned **out, const char *name, ckpt_dtype dt,
	const ckpt_shape *shape, int num_parts, const ckpt_variable_options *o);
/** Free the parts this process holds. NULL ok. Untrack it from every checkpoint first. */
CKPT_API void ckpt_partitioned_free(ckpt_partitioned *p);

/** @return the name given to ckpt_partitioned_new (borrowed from `p`); NULL for NULL. */
CKPT_API const char *ckpt_partitioned_name(const ckpt_partitioned *p);
/** @return the dtype; CKPT_DT_INVALID for NULL. */
CKPT_API ckpt_dtype ckpt_partitioned_dtype(const ckpt_partitioned *p);
/** @return the full shape (borrowed from `p`); NULL for NULL. */
CKPT_API const ckpt_shape *ckpt_partitioned_shape(const ckpt_partitioned *p);
/** @return the number of parts P (after the cap at dims[0]); 0 for NULL. */
CKPT_API int ckpt_partitioned_num_parts(const ckpt_partitioned *p);
/**
 * Rows of part i: [*first, *first + *rows).
 * @param[out] first its first row (may be NULL)
 * @param[out] rows  its number of rows (may be NULL)
 * @return CKPT_OK; CKPT_EINVAL for i outside [0, P)
 */
CKPT_API int ckpt_partitioned_part_rows(int64_t *first, int64_t *rows, const ckpt_partitioned *p, int i);
/** @return the worker that holds part i (i % W under a multi-worker strategy, else 0); -1 for a bad i. */
CKPT_API int ckpt_partitioned_owner(const ckpt_partitioned *p, int i);
/**
 * Part i (shape [rows_i, dims[1], ...]).
 * @return the part, borrowed from `p`; NULL when another worker holds it or i is out of range
 */
CKPT_API ckpt_variable *ckpt_partitioned_part(const ckpt_partitioned *p, int i);

/**
 * Track `p` (borrowed: it must outlive every object that tracks it) as the
 * child `local_name` of `obj`, a node of the object graph like a tracked
 * variable: saved and restored under the object-graph key (TF2's layout).
 * @return CKPT_OK; CKPT_EINVAL when `obj` has a child of that name; another negative ckpt_status
 */
CKPT_API int ckpt_object_track_partitioned(ckpt_object *obj, const char *local_name, ckpt_partitioned *p);

/**
 * Save `p` with `ck` (borrowed: it must outlive the checkpoint or be
 * untracked first) under the key `name`, outside the object graph (TF1
 * Saver's layout), and restore it from there.
 * @return CKPT_OK; CKPT_EINVAL when `ck` already tracks a partitioned variable of that name;
 *         another negative ckpt_status
 */
CKPT_API int ckpt_checkpoint_track_partitioned(ckpt_checkpoint *ck, ckpt_partitioned *p);
/** Stop tracking `p`.
 * @return CKPT_OK; CKPT_ENOTFOUND when `ck` does not track it */
CKPT_API int ckpt_checkpoint_untrack_partitioned(ckpt_checkpoint *ck, ckpt_partitioned *p);

#ifdef __cplusplus
}
#endif
#endif
