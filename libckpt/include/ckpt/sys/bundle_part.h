/*
 * libckpt for extenders — a TensorBundle written by several processes.
 *
 * TensorFlow's MergeBundles layout: each process writes one data shard
 * `P.data-K-of-N` (as a temporary) and hands its index entries to process 0,
 * which builds the one merged `P.index` and commits. What a cross-process
 * strategy's `write` method (ckpt/sys/strategy.h) uses.
 *
 * Temporaries are named `<final>.tempstate<token>` with a token every
 * process shares, so process 0 can rename (commit) or remove (abort) every
 * shard by name on the shared file system.
 */
#ifndef CKPT_SYS_BUNDLE_PART_H
#define CKPT_SYS_BUNDLE_PART_H

#include "ckpt/common.h"
#include "ckpt/io.h"
#include "ckpt/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One process's shard of a bundle being written. */
typedef struct ckpt_bundle_part ckpt_bundle_part;

/**
 * What one process keeps of its shard of the last committed checkpoint, for
 * incremental saves (ckpt_bundle_part_incremental): every entry it wrote
 * (offset, crc32c, a crc32c per 4 KiB block of large values) and its data
 * file's device, inode, size and modification time after it was written.
 * Owned by the caller across saves (a checkpoint owns one).
 */
typedef struct ckpt_bundle_part_record ckpt_bundle_part_record;

/**
 * Open the temporary of data shard `shard` of `nshards` (parent directories created).
 * @param[out] out the shard writer, caller-owned (free with ckpt_bundle_part_free; NULL on failure)
 * @param vfs the file system (borrowed; outlives the writer)
 * @param prefix the bundle's path prefix `P`
 * @param shard this process's shard, 0 .. nshards - 1
 * @param nshards data shards in all (at most CKPT_MAX_SHARDS)
 * @param token the same value on every process of this write; names the temporaries
 * @return CKPT_OK; CKPT_EINVAL (NULL argument, shard out of range); an I/O status
 */
CKPT_API int ckpt_bundle_part_open(ckpt_bundle_part **out, ckpt_vfs *vfs, const char *prefix, int shard,
	int nshards, uint64_t token);

/**
 * Append one entry (any dtype).
 * @param p the shard writer
 * @param key the checkpoint key
 * @param t the value (read during the call)
 * @return CKPT_OK; CKPT_EINVAL (NULL argument); an I/O status (the writer
 *         then fails every later call)
 */
CKPT_API int ckpt_bundle_part_add(ckpt_bundle_part *p, const char *key, const ckpt_tensor *t);

/**
 * Append rows [row0, row0 + t->shape.dims[0]) of the partitioned variable
 * `name` of full shape `full` under its slice key (every other dimension in
 * full).
 * @param p the shard writer
 * @param name the partitioned variable's key
 * @param full its full shape
 * @param row0 the first row `t` holds
 * @param t the rows (read during the call)
 * @return CKPT_OK; CKPT_EINVAL; an I/O status
 */
CKPT_API int ckpt_bundle_part_add_slice(ckpt_bundle_part *p, const char *name, const ckpt_shape *full, int64_t row0,
	const ckpt_tensor *t);

/**
 * Add the full entry of a partitioned variable (dtype, shape, every part's
 * slice; no data) to this shard's index entries: one process adds it, the
 * owners add the slices.
 * @param p the shard writer
 * @param name the partitioned variable's key
 * @param dt its dtype
 * @param full its full shape
 * @param nparts number of parts
 * @param row0 first row of each part (nparts entries)
 * @param rows rows of each part (nparts entries)
 * @return CKPT_OK; CKPT_EINVAL; CKPT_ENOMEM
 */
CKPT_API int ckpt_bundle_part_add_partitioned_entry(ckpt_bundle_part *p, const char *name, ckpt_dtype dt,
	const ckpt_shape *full, int nparts, const int64_t *row0, const int64_t *rows);

/**
 * Make a shard writer just opened incremental (before any add): a value of
 * 64 KiB or more is compared by crc32c per 4 KiB block with what this
 * process's shard of the last committed save (`rec`) holds under its key
 * (same dtype and shape), and the unchanged blocks are copied from that
 * save's data file without passing through the process: by the kernel
 * (copy_file_range) on the POSIX file system, by the server on S3
 * (UploadPartCopy, conditional on the ETag the object had right after its
 * upload; ranges under S3's 5 MiB part minimum are uploaded);
 * ckpt_bundle_part_add_clean copies a whole value. A source file is used
 * only while it has the device, inode, size and modification time recorded
 * after it was written (S3: its ETag), and only when that save had the same
 * shard and shard count; else the bytes are written from memory. ckpt_bundle_part_finish then records this shard
 * in `rec` as pending; ckpt_bundle_part_record_settle makes it the base of
 * the next save once the whole checkpoint committed.
 * @param p the shard writer, no value added yet
 * @param rec the record (borrowed; outlives the writer)
 * @return 1 taken; 0 declined (neither the POSIX file system nor S3: every
 *         byte is written, nothing recorded); CKPT_EINVAL; CKPT_ENOMEM
 */
CKPT_API int ckpt_bundle_part_incremental(ckpt_bundle_part *p, ckpt_bundle_part_record *rec);

/**
 * ckpt_bundle_part_add of a fixed-size value the caller knows unchanged
 * since the save the record describes (the library saw no write to it): on
 * an incremental writer its stored bytes are copied from that save's file
 * without reading `t`, with that save's crc32c; written from `t` where they
 * cannot be (not recorded, another dtype or shape, the file changed).
 * @return as ckpt_bundle_part_add
 */
CKPT_API int ckpt_bundle_part_add_clean(ckpt_bundle_part *p, const char *key, const ckpt_tensor *t);

/**
 * On an incremental writer on the POSIX file system, before any add: this shard's values are exactly
 * `keys` / `values` (n, fixed-size dtypes), every one unchanged since the
 * recorded save (the library saw no write to it). When that save's shard
 * holds exactly these values (the same keys, dtypes and shapes), its data
 * file becomes this shard's temporary by a hard link (a committed data file
 * is never written again) and the entries take its offsets and crc32c: no
 * byte is written or copied. Then only ckpt_bundle_part_add_partitioned_entry
 * and ckpt_bundle_part_finish may follow. Otherwise nothing is done: add the
 * values as usual.
 * @return 1 linked; 0 not possible; CKPT_EINVAL; CKPT_ENOMEM; an I/O status
 */
CKPT_API int ckpt_bundle_part_reuse_all(ckpt_bundle_part *p, size_t n, const char *const *keys,
	const ckpt_tensor *const *values);

/**
 * A new, empty record (the first incremental save reuses nothing).
 * @param[out] out the record, caller-owned (free with ckpt_bundle_part_record_free)
 * @return CKPT_OK; CKPT_EINVAL; CKPT_ENOMEM
 */
CKPT_API int ckpt_bundle_part_record_new(ckpt_bundle_part_record **out);

/**
 * After a write: `committed` 1 (the whole checkpoint is visible) makes the
 * shard ckpt_bundle_part_finish recorded the base of the next save; 0 drops it
 * and keeps the base. A committed save that recorded nothing (declined)
 * leaves no base.
 * @param rec the record; NULL is accepted (returns 0)
 * @param committed whether the checkpoint committed
 * @return 1 when the record now describes the save just committed, else 0
 */
CKPT_API int ckpt_bundle_part_record_settle(ckpt_bundle_part_record *rec, int committed);

/**
 * Data bytes of the save last settled as committed: `written` went through
 * this process, `reused` was copied from the save before it.
 * @param rec the record; NULL gives 0 / 0
 */
CKPT_API void ckpt_bundle_part_record_bytes(uint64_t *written, uint64_t *reused, const ckpt_bundle_part_record *rec);

/** Free a record. @param rec NULL is accepted */
CKPT_API void ckpt_bundle_part_record_free(ckpt_bundle_part_record *rec);

/**
 * Flush, fsync (unless `no_fsync`) and close the shard.
 * @param[out] entries its index entries, caller-owned (free with ckpt_free):
 *             per entry varint key length, key, varint value length,
 *             BundleEntryProto; what process 0 passes to ckpt_bundle_merge_commit
 * @param[out] n bytes in `*entries`
 * @param p the shard writer (still to be freed)
 * @param no_fsync 1 skips the fsync
 * @return CKPT_OK; the status of an earlier failed add; an I/O status
 */
CKPT_API int ckpt_bundle_part_finish(void **entries, size_t *n, ckpt_bundle_part *p, int no_fsync);

/**
 * Free the writer (closes the file if still open; the temporary stays: see
 * ckpt_bundle_part_discard).
 * @param p the shard writer; NULL is accepted
 */
CKPT_API void ckpt_bundle_part_free(ckpt_bundle_part *p);

/**
 * Remove shard `shard`'s temporary if it exists. Keeps the thread's last
 * error as it was, so it can run on a failure path.
 * @param vfs the file system
 * @param prefix the bundle's path prefix
 * @param shard the shard whose temporary to remove
 * @param nshards data shards in all
 * @param token the write's token
 */
CKPT_API void ckpt_bundle_part_discard(ckpt_vfs *vfs, const char *prefix, int shard, int nshards, uint64_t token);

/**
 * Process 0: merge every shard's entries into `P.index` (header num_shards =
 * nshards, keys sorted, duplicates CKPT_EINVAL) written as a temporary and
 * fsynced; retire an older index of the prefix; rename every data shard;
 * rename the index LAST; fsync the directory. Before the index rename
 * nothing is visible; on failure the temporaries are removed.
 * @param vfs the file system
 * @param prefix the bundle's path prefix
 * @param nshards data shards in all
 * @param token the write's token
 * @param entries each shard's entries from ckpt_bundle_part_finish (nshards; borrowed)
 * @param lens their lengths
 * @param no_fsync 1 skips the fsyncs
 * @return CKPT_OK; CKPT_EINVAL; CKPT_EFORMAT (malformed entries); an I/O status
 */
CKPT_API int ckpt_bundle_merge_commit(ckpt_vfs *vfs, const char *prefix, int nshards, uint64_t token,
	const void *const *entries, const size_t *lens, int no_fsync);

#ifdef __cplusplus
}
#endif
#endif
