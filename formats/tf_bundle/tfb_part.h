/*
 * A TensorBundle written by several processes (MergeBundles' layout): each
 * writes one data shard `P.data-K-of-N` (as a temporary) and hands its index
 * entries to process 0, which builds the one merged `P.index` and commits.
 * Not installed; exported (CKPT_API) for the in-tree ckpt_mpi library.
 *
 * Temporaries are named `<final>.tempstate<token>` with a token every
 * process shares, so process 0 can rename (commit) or remove (abort) every
 * shard by name on the shared file system.
 */
#ifndef CKPT_TFB_PART_H
#define CKPT_TFB_PART_H

#include "ckpt/tensor.h"
#include "ckpt/io.h"

typedef struct ckpt__tfb_part ckpt__tfb_part;

/** Open the temporary of shard `shard` of `nshards` (parent directories created). */
CKPT_API int ckpt__tfb_part_open(ckpt__tfb_part **out, ckpt_vfs *vfs, const char *prefix, int shard,
	int nshards, uint64_t token);
/** Append one entry (any dtype). */
CKPT_API int ckpt__tfb_part_add(ckpt__tfb_part *p, const char *key, const ckpt_tensor *t);
/**
 * Append rows [row0, row0 + t->shape.dims[0]) of the partitioned variable
 * `name` of full shape `full` under its slice key (every other dimension in
 * full; tfb.h tfb_row_slice_key).
 */
CKPT_API int ckpt__tfb_part_add_slice(ckpt__tfb_part *p, const char *name, const ckpt_shape *full, int64_t row0,
	const ckpt_tensor *t);
/**
 * Add the full entry of a partitioned variable (dtype, shape, every part's
 * slice; no data) to this shard's index entries: one process adds it, the
 * owners add the slices.
 */
CKPT_API int ckpt__tfb_part_add_partitioned_entry(ckpt__tfb_part *p, const char *name, ckpt_dtype dt,
	const ckpt_shape *full, int nparts, const int64_t *row0, const int64_t *rows);
/**
 * Flush, fsync (unless no_fsync) and close the shard; `*entries` (free with
 * ckpt__free) holds its index entries: per entry varint key length, key,
 * varint value length, BundleEntryProto.
 */
CKPT_API int ckpt__tfb_part_finish(ckpt__tfb_part *p, int no_fsync, void **entries, size_t *n);
/** Free (closes the file if still open; the temporary stays: see discard). */
CKPT_API void ckpt__tfb_part_free(ckpt__tfb_part *p);
/** Remove shard `shard`'s temporary if it exists. */
CKPT_API void ckpt__tfb_part_discard(ckpt_vfs *vfs, const char *prefix, int shard, int nshards, uint64_t token);
/**
 * Process 0: merge every shard's entries into `P.index` (header num_shards =
 * nshards, keys sorted, duplicates EINVAL) written as a temporary and
 * fsynced; retire an older index of the prefix; rename every data shard;
 * rename the index LAST; fsync the directory. Before the index rename
 * nothing is visible; on failure the temporaries are removed.
 */
CKPT_API int ckpt__tfb_merge_commit(ckpt_vfs *vfs, const char *prefix, int nshards, uint64_t token,
	const void *const *entries, const size_t *lens, int no_fsync);

#endif
