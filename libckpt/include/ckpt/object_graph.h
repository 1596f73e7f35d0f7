/*
 * libckpt — the serialized object graph (TensorFlow's TrackableObjectGraph,
 * trackable_object_graph.proto) as plain C data, and TensorFlow's key naming.
 *
 * Node 0 is the root. Every format maps onto this structure: TensorBundle
 * files carry it in the `_CHECKPOINTABLE_OBJECT_GRAPH` entry; Keras files get
 * one synthesized from their layout; TF1 name-based checkpoints get a flat one
 * (one child per key).
 */
#ifndef CKPT_OBJECT_GRAPH_H
#define CKPT_OBJECT_GRAPH_H

#include "ckpt/common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CKPT_OBJECT_GRAPH_KEY "_CHECKPOINTABLE_OBJECT_GRAPH"
#define CKPT_VARIABLE_VALUE_KEY "VARIABLE_VALUE"

typedef struct ckpt_og_child {
	int node_id;
	char *local_name;
} ckpt_og_child;

typedef struct ckpt_og_attr {
	char *name;            /**< "VARIABLE_VALUE" for variables */
	char *full_name;       /**< TF1 variable name, "" when none */
	char *checkpoint_key;  /**< key of the tensor (or key prefix) in the bundle */
	int optional_restore;
} ckpt_og_attr;

typedef struct ckpt_og_slot {
	int original_variable_node_id;
	char *slot_name;
	int slot_variable_node_id;
} ckpt_og_slot;

typedef struct ckpt_og_node {
	size_t nchildren;
	ckpt_og_child *children;
	size_t nattrs;
	ckpt_og_attr *attrs;
	size_t nslots;          /**< slot variables owned by this (optimizer) node */
	ckpt_og_slot *slots;
	int has_checkpoint_values; /**< -1 absent, 0 false, 1 true */
	char *registered_saver;    /**< name, or NULL */
} ckpt_og_node;

typedef struct ckpt_object_graph {
	size_t nnodes;
	ckpt_og_node *nodes;
} ckpt_object_graph;

/**
 * Decode a serialized TrackableObjectGraph (fields in any order), validated.
 * @param[out] out caller-owned; free with ckpt_object_graph_free
 * @return CKPT_OK; CKPT_EFORMAT for a malformed graph; CKPT_ELIMIT above
 *         CKPT_MAX_OBJECT_GRAPH_BYTES; CKPT_ENOMEM
 */
CKPT_API int ckpt_object_graph_parse(ckpt_object_graph **out, const void *buf, size_t n);
/**
 * Encode as TensorFlow 2.2–2.9 does (field-number order).
 * @param[out] buf caller-owned, freed with free() (not the allocator hook)
 * @param[out] n   bytes in `*buf`
 * @return CKPT_OK or a negative ckpt_status (CKPT_ENOMEM)
 */
CKPT_API int ckpt_object_graph_serialize(void **buf, size_t *n, const ckpt_object_graph *g);
/**
 * Deep copy.
 * @param[out] out caller-owned; free with ckpt_object_graph_free
 * @return CKPT_OK; CKPT_EINVAL for a NULL `g`; CKPT_ENOMEM
 */
CKPT_API int ckpt_object_graph_copy(ckpt_object_graph **out, const ckpt_object_graph *g);
/** Free a graph and everything it holds. NULL ok. */
CKPT_API void ckpt_object_graph_free(ckpt_object_graph *g);

/**
 * Checks that every node id, child and slot reference is in range. Parse
 * calls it; builders of graphs may call it too.
 * @return CKPT_OK; CKPT_EFORMAT naming the bad reference (or no root node);
 *         CKPT_ELIMIT for too many nodes; CKPT_EINVAL for NULL
 */
CKPT_API int ckpt_object_graph_validate(const ckpt_object_graph *g);

/**
 * The object path of `node`: escaped local names along the first BFS path
 * from the root, joined by "/" ("" for the root). Slot variable nodes
 * (reachable only through slot references) get
 * "<var path>/.OPTIMIZER_SLOT/<optimizer path>/<escaped slot>".
 * @param[out] out caller-owned, freed with free()
 * @return CKPT_OK; CKPT_ENOTFOUND when the node is unreachable; CKPT_EINVAL
 *         for a node out of range; CKPT_ENOMEM
 */
CKPT_API int ckpt_object_graph_path(char **out, const ckpt_object_graph *g, int node);

/**
 * TensorFlow's escape: "." -> "..", "/" -> ".S".
 * @param[out] out caller-owned, freed with free()
 * @return CKPT_OK; CKPT_EINVAL for a NULL name; CKPT_ENOMEM
 */
CKPT_API int ckpt_key_escape(char **out, const char *name);
/**
 * Build "<object path>/.ATTRIBUTES/<escaped attr>".
 * @param[out] out caller-owned, freed with free()
 * @return CKPT_OK; CKPT_EINVAL for a NULL argument; CKPT_ENOMEM
 */
CKPT_API int ckpt_key_attribute(char **out, const char *object_path, const char *attr);

#ifdef __cplusplus
}
#endif
#endif
