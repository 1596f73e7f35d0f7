/*
 * libckpt — format-independent reading and writing of checkpoint files.
 *
 * A reader opens any supported file (format detected from bytes, never from
 * the name), lists its variables with dtype, shape and role, reads tensors
 * (every checksum verified), and exposes the object graph and metadata.
 * A writer collects tensors and commits them atomically: nothing is visible
 * under the target name until commit succeeds, and a failed or abandoned
 * writer leaves the previous checkpoint intact.
 *
 * PATH forms accepted by ckpt_reader_open for TensorBundles: a prefix
 * ("dir/ckpt-3"), a ".index" file, a directory with a `checkpoint` state
 * file (its latest checkpoint), a SavedModel directory (its
 * variables/variables), a directory holding exactly one ".index".
 */
#ifndef CKPT_READER_H
#define CKPT_READER_H

#include "ckpt/common.h"
#include "ckpt/tensor.h"
#include "ckpt/io.h"
#include "ckpt/object_graph.h"
#include "ckpt/variable.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckpt_reader ckpt_reader;
typedef struct ckpt_writer ckpt_writer;

/** What a stored entry belongs to (from its key / dataset path). */
typedef enum ckpt_role {
	CKPT_ROLE_MODEL = 0,
	CKPT_ROLE_OPTIMIZER = 1,
	CKPT_ROLE_METRIC = 2,
	CKPT_ROLE_OTHER = 3,
	/**
	 * State of the training loop, not of the model: a data loader's
	 * position, an RNG's state — everything below the root child
	 * "trainer_state" (CKPT_TRAINER_STATE, ckpt_checkpoint_trainer_state in
	 * ckpt/host.h). The role lives in the key, so it survives every format
	 * and TensorFlow reads it as any object path.
	 */
	CKPT_ROLE_TRAINER = 4
} ckpt_role;
/** @return "model", "optimizer", "metric", "other" or "trainer" (static). */
CKPT_API const char *ckpt_role_name(ckpt_role r);

/** One extent of a slice of a partitioned variable: length -1 = full dim. */
typedef struct ckpt_extent {
	int64_t start, length;
} ckpt_extent;
typedef struct ckpt_slice {
	int rank;
	ckpt_extent *extents;
} ckpt_slice;

/** Description of one stored entry. Borrowed from the reader. */
typedef struct ckpt_var_info {
	const char *name;      /**< key as stored (TF key, or HDF5 dataset path) */
	ckpt_dtype dtype;
	ckpt_shape shape;
	uint64_t nbytes;       /**< bytes of the tensor as stored */
	ckpt_role role;
	int shard;             /**< data file index, -1 when not applicable */
	int64_t offset;        /**< byte offset in its data file / container, -1 unknown */
	int has_crc32c;        /**< the format stores a crc32c for it */
	uint32_t crc32c;       /**< unmasked stored crc32c when has_crc32c */
	size_t nslices;        /**< >0 for a partitioned "full" entry */
	const ckpt_slice *slices;
	int slice_part;        /**< 1: one slice of a partitioned entry, stored under its slice key; its
	                            bytes are part of that entry's value (which TF lists instead) */
	/**
	 * How TensorFlow synchronizes the variable, where something says it
	 * (`sync_source`): a SavedModel's saved_model.pb, or a caller's
	 * ckpt_sync_rule. CKPT_SYNC_AUTO / CKPT_AGG_NONE when nothing does.
	 * ckpt_checkpoint_load creates sync-on-read variables from it.
	 */
	ckpt_synchronization sync;
	ckpt_aggregation aggregation;
	int sync_source;       /**< CKPT_SYNC_SOURCE_* */
} ckpt_var_info;

#define CKPT_SYNC_SOURCE_NONE 0        /**< nothing says: the default */
#define CKPT_SYNC_SOURCE_SAVED_MODEL 1 /**< the SavedObjectGraph of saved_model.pb */
#define CKPT_SYNC_SOURCE_RULE 2        /**< a ckpt_sync_rule of the caller */

/**
 * The caller's word on synchronization, where the file does not record it
 * (a TensorBundle never does): entries whose stored key or object path
 * (the key without "/.ATTRIBUTES/VARIABLE_VALUE") matches `pattern`, an
 * fnmatch(3) glob without flags ("*" also matches "/"), get `sync` and
 * `aggregation`. The first matching rule wins, and a rule wins over what a
 * saved_model.pb says. `sync` is CKPT_SYNC_ON_READ (aggregation SUM, MEAN or
 * ONLY_FIRST_REPLICA) or CKPT_SYNC_ON_WRITE (mirrored: overrides the file).
 * A sync-on-read SUM entry gets the role "metric" (a metric accumulator,
 * like tf.keras Metric.add_weight makes them).
 */
typedef struct ckpt_sync_rule {
	const char *pattern;
	ckpt_synchronization sync;
	ckpt_aggregation aggregation;
} ckpt_sync_rule;

/**
 * Does `key` match `rule` (the key itself, or its object path)?
 * This is the test ckpt_reader_open applies with ckpt_open_options.sync_rules.
 * @return 1 when it matches, else 0
 */
CKPT_API int ckpt_sync_rule_matches(const ckpt_sync_rule *rule, const char *key);

typedef struct ckpt_open_options {
	unsigned version;      /**< CKPT_OPEN_OPTIONS_VERSION */
	ckpt_vfs *vfs;         /**< NULL = POSIX */
	int no_verify;         /**< 1 = skip data checksums (structure is still checked) */
	uint64_t memory_budget;/**< 0 = CKPT_DEFAULT_MEMORY_BUDGET */
	/* version 2 */
	const ckpt_sync_rule *sync_rules; /**< applied to every entry at open (read during the call only; may be NULL) */
	size_t num_sync_rules;
} ckpt_open_options;
/** 2 adds sync_rules; version 1 structs (without them) are still accepted. */
#define CKPT_OPEN_OPTIONS_VERSION 2
#define CKPT_OPEN_OPTIONS_INIT { CKPT_OPEN_OPTIONS_VERSION, NULL, 0, 0, NULL, 0 }

/**
 * Open PATH (any supported format). `o` may be NULL.
 * @param[out] out caller-owned; free with ckpt_reader_free
 * @return CKPT_OK or a negative ckpt_status (see ckpt_error_last); the message names the file, the variable and the offset where known
 */
CKPT_API int ckpt_reader_open(ckpt_reader **out, const char *path, const ckpt_open_options *o);
/** Free a reader and everything borrowed from it. NULL ok. */
CKPT_API void ckpt_reader_free(ckpt_reader *r);

/** @return the format's name, e.g. "tf-bundle", "keras-h5-legacy", "keras-h5-legacy-weights",
 * "keras-weights-h5", "keras-v3" (borrowed). */
CKPT_API const char *ckpt_reader_format(const ckpt_reader *r);
/** @return the resolved path (bundle prefix, or the file), borrowed from the reader. */
CKPT_API const char *ckpt_reader_path(const ckpt_reader *r);
/** @return the number of data files (TensorBundle shards); 1 for single-file formats, 0 for NULL. */
CKPT_API int ckpt_reader_num_shards(const ckpt_reader *r);
/**
 * Path of data file `shard` and whether it exists (for missing-shard reports).
 * @param[out] exists 1 when the file exists, else 0 (may be NULL)
 * @return the path, borrowed from the reader; NULL for a shard out of range
 */
CKPT_API const char *ckpt_reader_shard_path(const ckpt_reader *r, int shard, int *exists);

/** @return the number of stored entries (0 for NULL). */
CKPT_API size_t ckpt_reader_num_entries(const ckpt_reader *r);
/** @return entry `i` (borrowed from the reader), or NULL when `i` is out of range. */
CKPT_API const ckpt_var_info *ckpt_reader_var(const ckpt_reader *r, size_t i);
/**
 * Index of the entry stored under `name`.
 * @param[out] index its index (may be NULL)
 * @return CKPT_OK; CKPT_ENOTFOUND naming the key; CKPT_EINVAL for a NULL argument
 */
CKPT_API int ckpt_reader_find(size_t *index, const ckpt_reader *r, const char *name);

/**
 * Read entry `i` into a new tensor, verifying its checksum (unless no_verify).
 * @param[out] out caller-owned; free with ckpt_tensor_free
 * @return CKPT_OK or a negative ckpt_status (see ckpt_error_last) (CKPT_ECHECKSUM, CKPT_EFORMAT, CKPT_EINVAL for a bad index)
 */
CKPT_API int ckpt_reader_read(ckpt_tensor **out, ckpt_reader *r, size_t i);
/**
 * Read a fixed-size-dtype entry straight into `dst` (n must equal nbytes),
 * verifying its checksum. No staging copy.
 * @return CKPT_OK or a negative ckpt_status (see ckpt_error_last)
 */
CKPT_API int ckpt_reader_read_into(ckpt_reader *r, size_t i, void *dst, size_t n);
/**
 * Check entry `i` (structure and checksum) without keeping its bytes: the
 * TensorBundle backend reads it through a small bounded buffer. Checkpoint
 * restore calls this for every value before it writes any variable. Backends
 * without a cheaper way read the entry into a temporary tensor.
 *
 * ckpt_reader_read_into() and ckpt_reader_verify() may be called from several
 * threads at once on one reader (distinct or equal entries).
 * @return CKPT_OK when the entry checks, else a negative ckpt_status
 */
CKPT_API int ckpt_reader_verify(ckpt_reader *r, size_t i);
/**
 * Check every entry, as ckpt_reader_verify() of each would, in one pass the
 * backend may pipeline: a TensorBundle whose data is mostly not in the page
 * cache is read with several O_DIRECT requests in flight (and left out of
 * the cache, as a verification should).
 * @return CKPT_OK when every entry checks; otherwise the error of one failing
 *         entry (call ckpt_reader_verify() per entry to list them all)
 */
CKPT_API int ckpt_reader_verify_all(ckpt_reader *r);

/**
 * The object graph (TensorBundle: decoded `_CHECKPOINTABLE_OBJECT_GRAPH`;
 * Keras: synthesized from the layout; TF1 name-based: NULL).
 * @return the graph, borrowed from the reader, or NULL
 */
CKPT_API const ckpt_object_graph *ckpt_reader_object_graph(const ckpt_reader *r);

/**
 * Metadata strings by key, NULL when absent. Keys: "keras_version",
 * "backend", "model_config", "training_config", "config.json",
 * "metadata.json"; "safetensors.metadata" and "gguf.kv" (JSON rendered on
 * first request from ckpt_reader_kv()'s pairs), "gguf.version",
 * "gguf.alignment", "gguf.tensor_types".
 * @return the string, borrowed from the reader, or NULL
 */
CKPT_API const char *ckpt_reader_meta(const ckpt_reader *r, const char *key);

/** Type of a typed metadata value; the numbers are GGUF's. */
typedef enum ckpt_kv_type {
	CKPT_KV_U8 = 0, CKPT_KV_I8, CKPT_KV_U16, CKPT_KV_I16, CKPT_KV_U32, CKPT_KV_I32, CKPT_KV_F32, CKPT_KV_BOOL,
	CKPT_KV_STRING, CKPT_KV_ARRAY, CKPT_KV_U64, CKPT_KV_I64, CKPT_KV_F64
} ckpt_kv_type;

/**
 * One typed metadata pair, read in place (valid until the reader is freed):
 * a GGUF key-value pair, or a safetensors `__metadata__` entry (a string).
 */
typedef struct ckpt_kv {
	const char *key;            /**< NUL-terminated UTF-8 */
	ckpt_kv_type type;
	ckpt_kv_type elem_type;     /**< CKPT_KV_ARRAY: the elements' type (never an array) */
	uint64_t count;             /**< CKPT_KV_ARRAY: elements; otherwise 1 */
	/**
	 * The value as GGUF stores it, little-endian: a number's bytes (bool: one
	 * byte); a string's bytes (no NUL; not always UTF-8 in GGUF); an array's
	 * elements back to back, each string element a u64 length then its bytes.
	 */
	const unsigned char *data;
	uint64_t nbytes;            /**< bytes at data */
} ckpt_kv;

/**
 * Typed metadata pairs of the checkpoint, in file order: GGUF's key-value
 * pairs, safetensors' `__metadata__`; 0 for formats without them. The same
 * pairs are rendered as JSON under ckpt_reader_meta() "gguf.kv" /
 * "safetensors.metadata" on the first request; this reads them without
 * that copy.
 * @return the number of pairs
 */
CKPT_API size_t ckpt_reader_num_kv(const ckpt_reader *r);
/**
 * Pair i of ckpt_reader_num_kv().
 * @param[out] out the pair, pointing into the reader
 * @return CKPT_OK, or CKPT_EINVAL when i is out of range
 */
CKPT_API int ckpt_reader_kv(ckpt_kv *out, const ckpt_reader *r, size_t i);

/* ------------------------------------------------------------------ */

typedef struct ckpt_write_options {
	unsigned version;      /**< CKPT_WRITE_OPTIONS_VERSION */
	ckpt_vfs *vfs;         /**< NULL = POSIX */
	int num_shards;        /**< TensorBundle data files (0 = 1) */
	int no_fsync;          /**< 1 = skip fsync (benchmarks, tests); rename is still atomic */
} ckpt_write_options;
#define CKPT_WRITE_OPTIONS_VERSION 1
#define CKPT_WRITE_OPTIONS_INIT { CKPT_WRITE_OPTIONS_VERSION, NULL, 0, 0 }

/**
 * Start writing `path` in `format` (NULL = "tf-bundle"; for a bundle,
 * `path` is the prefix). Nothing is visible until ckpt_writer_commit.
 * @param[out] out caller-owned; free with ckpt_writer_free
 * @return CKPT_OK or a negative ckpt_status (see ckpt_error_last)
 */
CKPT_API int ckpt_writer_open(ckpt_writer **out, const char *path, const char *format,
	const ckpt_write_options *o);
/**
 * Add a tensor under `name` (a bundle key or a dataset path). Data is
 * written in the order added; `shard` picks the data file (0 when unsure).
 * The tensor may be released after the call returns.
 * @return CKPT_OK or a negative ckpt_status (see ckpt_error_last)
 */
CKPT_API int ckpt_writer_add(ckpt_writer *w, const char *name, const ckpt_tensor *t, int shard);
/**
 * Announce a tensor that will be added, before the first ckpt_writer_add
 * (optional). The single-file formats whose header lists every tensor
 * before the data (safetensors, GGUF) otherwise keep a copy of each added
 * tensor until commit; once every tensor has been announced, they write the
 * header at the first add and each added tensor straight to its place:
 * no copy, and memory that does not grow with the checkpoint.
 *
 * The contract, once any tensor is announced: announce all of them before
 * the first add, each with the dtype and shape it will be added with; set
 * metadata and the object graph before the first add; add exactly the
 * announced set (any order). Anything else fails with CKPT_EINVAL, and
 * commit names a tensor announced but never added. A tensor the format
 * cannot hold fails here, as its add would (CKPT_EUNSUPPORTED).
 * TensorBundle and the Keras writers accept announcements and ignore them.
 * @return CKPT_OK or a negative ckpt_status as said above
 */
CKPT_API int ckpt_writer_announce(ckpt_writer *w, const char *name, ckpt_dtype dtype, const ckpt_shape *shape);
/**
 * Attach the object graph. TensorBundle writes it as the
 * `_CHECKPOINTABLE_OBJECT_GRAPH` entry, last in shard 0; Keras writers use it
 * to lay out layers and optimizer state.
 * @return CKPT_OK or a negative ckpt_status (see ckpt_error_last)
 */
CKPT_API int ckpt_writer_set_object_graph(ckpt_writer *w, const ckpt_object_graph *g);
/** Set metadata `key` (Keras: "model_config", "config.json", ...).
 * @return CKPT_OK or a negative ckpt_status (see ckpt_error_last) */
CKPT_API int ckpt_writer_set_meta(ckpt_writer *w, const char *key, const char *value);
/** Write everything, fsync, rename into place (the index last).
 * @return CKPT_OK; on failure a negative ckpt_status, and the previous checkpoint is intact */
CKPT_API int ckpt_writer_commit(ckpt_writer *w);
/** Free; an uncommitted writer removes its temporary files. NULL ok. */
CKPT_API void ckpt_writer_free(ckpt_writer *w);

#ifdef __cplusplus
}
#endif
#endif
