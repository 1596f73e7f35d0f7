/*
 * libckpt — what a SavedModel's `saved_model.pb` says besides the variables:
 * the MetaGraphs with their tags, the signatures (method name, every input
 * and output with its dtype and shape), as `saved_model_cli show --all`
 * shows them, and the variables of the SavedObjectGraph with their
 * synchronization and aggregation, which a TensorBundle does not record.
 *
 * Decoded with protobuf-c from trimmed copies of TensorFlow's public protos
 * (formats/tf_bundle/proto/saved_model.proto): the graph, the functions and
 * everything else not listed here are skipped. Caps: the file is at most
 * CKPT_MAX_SAVED_MODEL_BYTES; every name / key at most CKPT_MAX_NAME_LEN;
 * every shape at most CKPT_MAX_RANK dims (else CKPT_ELIMIT); none of the
 * decoded messages is recursive, so the decoding depth is fixed.
 *
 * ckpt_reader_open() of a SavedModel (its directory, or the prefix
 * DIR/variables/variables when DIR/saved_model.pb exists) reads this file
 * too: ckpt_reader_saved_model() returns it, and the variables it marks
 * sync-on-read get `sync` / `aggregation` (and, for SUM, the role "metric")
 * in their ckpt_var_info. A saved_model.pb that does not decode fails the
 * open with CKPT_EFORMAT naming it.
 */
#ifndef CKPT_SAVED_MODEL_H
#define CKPT_SAVED_MODEL_H

#include "ckpt/common.h"
#include "ckpt/io.h"
#include "ckpt/reader.h"
#include "ckpt/variable.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Size cap of a saved_model.pb (protobuf's own limit is 2 GiB). */
#define CKPT_MAX_SAVED_MODEL_BYTES (1ull << 31)

/** How a signature tensor is encoded (TensorInfo.encoding). */
typedef enum ckpt_sm_encoding {
	CKPT_SM_ENCODING_NONE = 0,      /**< no encoding set */
	CKPT_SM_ENCODING_NAME = 1,      /**< a dense tensor: `name` */
	CKPT_SM_ENCODING_COO_SPARSE = 2,/**< a SparseTensor: `name` is its values tensor */
	CKPT_SM_ENCODING_COMPOSITE = 3  /**< a CompositeTensor (type spec not decoded); `name` is "" */
} ckpt_sm_encoding;

/** One input or output of a signature (TensorInfo). */
typedef struct ckpt_sm_tensor {
	char *key;             /**< its key in the signature's inputs / outputs map */
	char *name;            /**< graph tensor name ("serving_default_x:0"), "" when none */
	ckpt_sm_encoding encoding;
	int dtype;             /**< TensorFlow DataType number (1 = DT_FLOAT, 101 = DT_FLOAT_REF) */
	int rank;              /**< number of dims; -1 = unknown rank */
	int64_t *dims;         /**< `rank` sizes, -1 = unknown; NULL when rank <= 0 */
} ckpt_sm_tensor;

/** One SignatureDef. */
typedef struct ckpt_sm_signature {
	char *key;             /**< "serving_default", "__saved_model_init_op", ... */
	char *method_name;     /**< "tensorflow/serving/predict", "" when none */
	size_t ninputs;
	ckpt_sm_tensor *inputs;   /**< sorted by key (bytewise), one per key (the last one in the file) */
	size_t noutputs;
	ckpt_sm_tensor *outputs;  /**< sorted by key */
} ckpt_sm_signature;

/** A variable of the SavedObjectGraph (SavedVariable). */
typedef struct ckpt_sm_variable {
	int node_id;           /**< its SavedObjectGraph node: the same id in the checkpoint's object graph */
	char *name;            /**< the variable's name ("dense/kernel", "total") */
	int dtype;             /**< TensorFlow DataType number */
	int rank;              /**< -1 = unknown rank */
	int64_t *dims;         /**< `rank` sizes (-1 = unknown), NULL when rank <= 0 */
	int trainable;
	/** CKPT_SYNC_AUTO (TF AUTO and NONE), CKPT_SYNC_ON_WRITE, CKPT_SYNC_ON_READ. */
	ckpt_synchronization sync;
	ckpt_aggregation aggregation; /**< TensorFlow's VariableAggregation (same numbering) */
	int tf_sync;           /**< TensorFlow's VariableSynchronization as stored (0 AUTO .. 3 ON_READ) */
} ckpt_sm_variable;

/** One MetaGraphDef. */
typedef struct ckpt_sm_meta_graph {
	size_t ntags;
	char **tags;           /**< file order ("serve", "gpu") */
	char *tensorflow_version;     /**< MetaInfoDef.tensorflow_version, "" when absent */
	size_t nsignatures;
	ckpt_sm_signature *signatures;/**< sorted by key, one per key */
	size_t nobjects;       /**< nodes of the SavedObjectGraph (0: TF1 SavedModel) */
	size_t nvariables;
	ckpt_sm_variable *variables;  /**< in node order */
} ckpt_sm_meta_graph;

typedef struct ckpt_saved_model {
	int64_t schema_version;
	size_t nmeta_graphs;
	ckpt_sm_meta_graph *meta_graphs; /**< file order */
} ckpt_saved_model;

/**
 * Decode a serialized SavedModel proto.
 * @param[out] out caller-owned; free with ckpt_saved_model_free
 * @return CKPT_OK; CKPT_EFORMAT, CKPT_ELIMIT or CKPT_ENOMEM
 */
CKPT_API int ckpt_saved_model_parse(ckpt_saved_model **out, const void *buf, size_t n);
/**
 * Read and decode `path`: a SavedModel directory (its saved_model.pb) or the
 * saved_model.pb itself. `vfs` NULL = POSIX. ENOTFOUND when there is none;
 * decoding errors name the file. saved_model.pbtxt is not read
 * (CKPT_EUNSUPPORTED).
 * @param[out] out caller-owned; free with ckpt_saved_model_free
 * @return CKPT_OK or a negative ckpt_status as said above
 */
CKPT_API int ckpt_saved_model_read(ckpt_saved_model **out, const char *path, ckpt_vfs *vfs);
/** Free a SavedModel from ckpt_saved_model_parse / _read. NULL ok. */
CKPT_API void ckpt_saved_model_free(ckpt_saved_model *sm);

/**
 * TensorFlow's name of a DataType number, as types.proto spells it and
 * saved_model_cli prints it ("DT_FLOAT", "DT_FLOAT_REF", "DT_INVALID");
 * a number types.proto does not list gives NULL.
 * @return a static string, or NULL
 */
CKPT_API const char *ckpt_tf_dtype_name(int dtype);

/**
 * The SavedModel of a reader opened on a SavedModel (directory, or prefix
 * DIR/variables/variables beside DIR/saved_model.pb); NULL otherwise.
 * @return the SavedModel, borrowed from the reader, or NULL
 */
CKPT_API const ckpt_saved_model *ckpt_reader_saved_model(const ckpt_reader *r);

#ifdef __cplusplus
}
#endif
#endif
