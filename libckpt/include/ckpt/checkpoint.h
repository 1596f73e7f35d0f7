/*
 * libckpt — trackable objects, object-based save / restore / load, and the
 * checkpoint manager: the C counterpart of tf.train.Checkpoint and
 * tf.train.CheckpointManager.
 *
 * The live state of a trainer is a tree (a graph, really) of trackable
 * objects. Each object has named children (other objects) and named
 * variables; a variable tracked under a name becomes a child node holding
 * the `VARIABLE_VALUE` attribute, exactly as TensorFlow tracks a
 * tf.Variable. Any object may act as an optimizer and own slot variables
 * bound to (primary variable, slot name). The root is a ckpt_checkpoint,
 * which also owns the `save_counter`.
 *
 * Keys are derived as TensorFlow derives them (tf-bundle.md §7):
 *
 *     model/layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE
 *     model/layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE
 *     save_counter/.ATTRIBUTES/VARIABLE_VALUE
 *
 * and the `_CHECKPOINTABLE_OBJECT_GRAPH` entry is written as TF 2.2-2.9
 * writes it (BFS node order, slot variables after), so tf.train.Checkpoint
 * reads what we write, and we read what it writes.
 *
 * The scope rule (README.md, "Using libckpt in a trainer"): variables are created through
 * ckpt_strategy_current(). Create the model, the optimizer's slots, the
 * metrics and the objects you restore into inside the strategy's scope.
 *
 *     int step(ckpt_replica_ctx *ctx, void *state);   // the trainer's, once per replica
 *
 *     static int run(ckpt_strategy *s, int steps)    // error handling cut short
 *     {
 *         ckpt_checkpoint *ck;
 *         ckpt_object *opt;
 *         ckpt_manager *mgr;
 *         ckpt_restore_status *st;
 *         ckpt_shape shape = { 2, { 784, 10 } };
 *         ckpt_scope_enter(s);
 *         ckpt_checkpoint_new(&ck, NULL);
 *         ckpt_object *model = ckpt_object_new_child(ckpt_checkpoint_root(ck), "model");
 *         ckpt_object *dense = ckpt_object_new_child(model, "layer_with_weights-0");
 *         ckpt_variable *kernel = ckpt_object_add_variable(dense, "kernel", "dense/kernel", CKPT_DT_FLOAT,
 *             &shape, NULL);
 *         ckpt_optimizer_new(&opt, "Adam");                                   // our reference
 *         ckpt_object_add_child(ckpt_checkpoint_root(ck), "optimizer", opt);  // the root takes its own
 *         if (ckpt_manager_new(&mgr, ck, "run/ckpts", 3) < 0)
 *             return -1;
 *         const char *from = ckpt_manager_restore_latest(&st, mgr);  // values held for slots not created yet
 *         if (ckpt_status_of(from) < 0)
 *             return -1;                                             // NULL and CKPT_OK: a fresh start
 *         ckpt_optimizer_create_slot(opt, kernel, "m", NULL);        // restored on create
 *         ckpt_restore_status_free(st);
 *         ckpt_scope_exit(s);
 *         for (int i = 0; i < steps; i++)
 *             ckpt_strategy_run(s, step, ck);
 *         int rc = ckpt_status_of(ckpt_manager_save(mgr));
 *         ckpt_manager_free(mgr);
 *         ckpt_object_free(opt);   // drop our reference when done with `opt`
 *         ckpt_checkpoint_free(ck);
 *         return rc;
 *     }
 *
 * Ownership: objects are reference counted. ckpt_object_new() returns one
 * reference; ckpt_object_add_child() makes the parent take its own
 * reference; ckpt_object_free() drops one. Edges that would close a cycle
 * are kept as non-owning edges. Variables created through
 * ckpt_object_add_variable() / ckpt_optimizer_create_slot() / load are owned
 * by their object; variables given to ckpt_object_track_variable() are
 * borrowed and must outlive every object that tracks them.
 *
 * None of these calls may be made from replica context (ESCOPE), and a
 * checkpoint and its objects are used from one thread at a time.
 */
#ifndef CKPT_CHECKPOINT_H
#define CKPT_CHECKPOINT_H

#include "ckpt/common.h"
#include "ckpt/tensor.h"
#include "ckpt/io.h"
#include "ckpt/object_graph.h"
#include "ckpt/reader.h"
#include "ckpt/strategy.h"
#include "ckpt/variable.h"
#include "ckpt/tier.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckpt_object ckpt_object;
typedef struct ckpt_checkpoint ckpt_checkpoint;
typedef struct ckpt_restore_status ckpt_restore_status;
typedef struct ckpt_tracked_list ckpt_tracked_list;
typedef struct ckpt_manager ckpt_manager;

/** Receives warnings (skipped checkpoints, unconsumed values). NULL = stderr. */
typedef void (*ckpt_warning_fn)(const char *message, void *ctx);

/* ================================================================== */
/* Trackable objects                                                    */
/* ================================================================== */

/**
 * A new empty trackable object (one reference, held by the caller).
 * @param[out] out caller-owned (its reference); release with ckpt_object_free
 * @return CKPT_OK; CKPT_EINVAL for a NULL `out`; CKPT_ENOMEM
 */
CKPT_API int ckpt_object_new(ckpt_object **out);

/**
 * Drop one reference; at zero the object releases its children and frees
 * the variables it owns. NULL ok.
 */
CKPT_API void ckpt_object_free(ckpt_object *obj);

/**
 * Add the edge `parent --local_name--> child`; the parent takes its own
 * reference. A child may have several parents (TF aliases such as Keras
 * `layer-0` and `layer_with_weights-0`); it is one node of the graph.
 * EINVAL when `parent` already has a child named `local_name`.
 *
 * Restore-on-create: when a restore left values pending under this name,
 * they are applied to `child`'s subtree now. A dtype/shape mismatch there
 * fails with CKPT_EMISMATCH and the edge is not added.
 * @return CKPT_OK or a negative ckpt_status as said above
 */
CKPT_API int ckpt_object_add_child(ckpt_object *parent, const char *local_name, ckpt_object *child);

/**
 * Convenience: ckpt_object_new + add_child.
 * @return the child, borrowed from `parent`; NULL on failure with ckpt_error_last() set: a negative
 *         ckpt_status, as ckpt_object_add_child's
 */
CKPT_API ckpt_object *ckpt_object_new_child(ckpt_object *parent, const char *local_name);

/**
 * Track `var` (borrowed) as the attribute `local_name` of `obj`: adds a
 * child node holding VARIABLE_VALUE, like assigning a tf.Variable to an
 * attribute. Tracking one variable from several objects gives one node.
 * Restore-on-create applies a pending value (EMISMATCH on dtype / shape
 * mismatch; nothing is tracked then).
 * @return CKPT_OK; CKPT_EMISMATCH as said; CKPT_EINVAL when `obj` has a child of
 *         that name; another negative ckpt_status
 */
CKPT_API int ckpt_object_track_variable(ckpt_object *obj, const char *local_name, ckpt_variable *var);

/**
 * Create a variable through the current strategy (ckpt_variable_new with
 * `var_name`, used as the attribute's full_name) and track it under
 * `local_name`; `obj` owns it. A pending restored value is assigned before
 * this returns.
 * @return the variable, borrowed from `obj`; NULL on failure with ckpt_error_last() set: a negative
 *         ckpt_status, as ckpt_variable_new and ckpt_object_track_variable return them
 */
CKPT_API ckpt_variable *ckpt_object_add_variable(ckpt_object *obj, const char *local_name, const char *var_name,
	ckpt_dtype dt, const ckpt_shape *shape, const ckpt_variable_options *o);

/**
 * Create a variable through the current strategy and make it tensor
 * `suffix` of the multi-tensor attribute `attr` of `obj` (which owns it),
 * the way TensorFlow saves a SaveableObject with several tensors: a
 * tf.lookup MutableHashTable tracked as "table" has attribute "table"
 * (checkpoint key "table/.ATTRIBUTES/table" in the object graph) whose
 * tensors are stored under that key + "-keys" and + "-values":
 *
 *     static int track_table(ckpt_object *root, int64_t size)
 *     {
 *         ckpt_shape n = { 1, { size } };
 *         ckpt_object *table = ckpt_object_new_child(root, "table");
 *         if (!table || !ckpt_object_add_attribute_tensor(table, "table", "-keys", NULL, CKPT_DT_STRING, &n, NULL) ||
 *             !ckpt_object_add_attribute_tensor(table, "table", "-values", NULL, CKPT_DT_INT64, &n, NULL))
 *             return ckpt_error_last()->code;
 *         return CKPT_OK;
 *     }
 *
 * `var_name` NULL = attr + suffix. Restore matches (attribute, suffix) with
 * dtype and shape checked like any variable, so a table restores into
 * tensors of the stored size (read it with ckpt_reader first); restore-on-
 * create applies when the object is added to the tree after the restore,
 * not to tensors added to an object already restored. EINVAL on an empty
 * name or suffix, a suffix with '/', a variable node, or an existing
 * (attr, suffix).
 * @return the variable, borrowed from `obj`; NULL on failure with ckpt_error_last() set: a negative
 *         ckpt_status as said above
 */
CKPT_API ckpt_variable *ckpt_object_add_attribute_tensor(ckpt_object *obj, const char *attr, const char *suffix,
	const char *var_name, ckpt_dtype dt, const ckpt_shape *shape, const ckpt_variable_options *o);

/**
 * Tensor `suffix` of multi-tensor attribute `attr` of `obj`.
 * @return the variable, borrowed from `obj`; NULL on failure with ckpt_error_last() set:
 *         CKPT_ENOTFOUND when absent
 */
CKPT_API ckpt_variable *ckpt_object_attribute_tensor(const ckpt_object *obj, const char *attr, const char *suffix);

/**
 * The child object named `local_name`.
 * @return the child, borrowed from `obj`; NULL on failure with ckpt_error_last() set: CKPT_ENOTFOUND
 *         when absent
 */
CKPT_API ckpt_object *ckpt_object_child(const ckpt_object *obj, const char *local_name);

/**
 * The variable tracked under `local_name`.
 * @return the variable, borrowed from `obj`; NULL on failure with ckpt_error_last() set:
 *         CKPT_ENOTFOUND when absent
 */
CKPT_API ckpt_variable *ckpt_object_variable(const ckpt_object *obj, const char *local_name);

/**
 * Walk an object path from `from`: escaped local names joined by "/" as in
 * checkpoint keys ("model/layer_with_weights-0"; a name containing "/" is
 * written ".S"). "" is `from` itself.
 * @return the object, borrowed from the tree; NULL on failure with ckpt_error_last() set:
 *         CKPT_ENOTFOUND naming the missing step
 */
CKPT_API ckpt_object *ckpt_object_find(ckpt_object *from, const char *path);

/** @return the number of children of `obj` (0 for NULL). */
CKPT_API size_t ckpt_object_num_children(const ckpt_object *obj);
/**
 * The child of the i-th edge of `obj` (declaration order).
 * @return the child, borrowed from `obj`; NULL with CKPT_EINVAL set for i out of range
 */
CKPT_API ckpt_object *ckpt_object_child_at(const ckpt_object *obj, size_t i);
/**
 * The name of the i-th edge of `obj` (declaration order).
 * @return the edge's local name, borrowed from `obj`; NULL with CKPT_EINVAL set for i out of range
 */
CKPT_API const char *ckpt_object_child_name(const ckpt_object *obj, size_t i);
/** @return the variable held by a variable node (one made by track / add_variable), borrowed; else NULL. */
CKPT_API ckpt_variable *ckpt_object_node_variable(const ckpt_object *obj);

/* ---- optimizers and slot variables ---- */

/**
 * A new object that will own slot variables. `name` ("Adam", may be NULL)
 * prefixes the slot variables' names: "Adam/<primary name>/<slot>". Any
 * object can own slots; this only sets the name.
 * @param[out] out caller-owned (its reference); release with ckpt_object_free
 * @return CKPT_OK or a negative ckpt_status (CKPT_EINVAL, CKPT_ENOMEM)
 */
CKPT_API int ckpt_optimizer_new(ckpt_object **out, const char *name);

/**
 * Create slot `slot_name` ("m", "v", "momentum") for `primary` on `opt`:
 * same dtype and shape as `primary`, zeros (or o->initial_value), created
 * under the primary's strategy. The current strategy must be that strategy:
 * otherwise CKPT_ESCOPE with a message naming the variable and both
 * strategies (e.g. model built outside the scope, optimizer inside).
 * Restore-on-create: a value the last restore kept for this (primary, slot)
 * is read from its file and assigned before this returns (CKPT_ECHECKSUM
 * when the file changed since that restore; the slot is not created then).
 * EINVAL when the slot exists already
 * (use ckpt_optimizer_slot).
 * `o->sync` and `o->replica_buffers` are honoured; dtype/shape come from
 * the primary.
 * @return the slot, owned by `opt` (borrowed); NULL on failure with ckpt_error_last() set: a negative
 *         ckpt_status as said above
 */
CKPT_API ckpt_variable *ckpt_optimizer_create_slot(ckpt_object *opt, ckpt_variable *primary, const char *slot_name,
	const ckpt_variable_options *o);

/**
 * The slot `slot_name` of `primary` on `opt`.
 * @return the slot, borrowed from `opt`; NULL on failure with ckpt_error_last() set: CKPT_ENOTFOUND
 *         when absent
 */
CKPT_API ckpt_variable *ckpt_optimizer_slot(const ckpt_object *opt, const ckpt_variable *primary,
	const char *slot_name);

/* ================================================================== */
/* Checkpoints                                                          */
/* ================================================================== */

/**
 * Called by load for every variable it creates, to choose its options (for
 * example sync-on-read SUM for metric accumulators). `o` arrives as
 * CKPT_VARIABLE_OPTIONS_INIT, with `sync` / `aggregation` already set where
 * the file or a sync rule says the variable is sync-on-read (`info->sync`,
 * `info->sync_source`); `key` is the stored key. Return CKPT_OK or a status
 * to abort the load.
 */
typedef int (*ckpt_load_variable_fn)(ckpt_variable_options *o, const char *key,
	const ckpt_var_info *info, void *ctx);

typedef struct ckpt_checkpoint_options {
	unsigned version;           /**< CKPT_CHECKPOINT_OPTIONS_VERSION */
	ckpt_vfs *vfs;              /**< NULL = POSIX (reading and writing) */
	int no_fsync;               /**< 1 = skip fsync when writing (tests, benchmarks); still atomic */
	const char *format;         /**< writer format, NULL = "tf-bundle" */
	ckpt_warning_fn warn;       /**< NULL = print to stderr */
	void *warn_ctx;
	ckpt_load_variable_fn load_variable; /**< NULL = defaults (mirrored in a mirrored scope, else plain) */
	void *load_ctx;
	/* version 2 */
	/**
	 * Synchronization by name where the file does not say it (reader.h):
	 * load creates the variables a rule marks CKPT_SYNC_ON_READ as
	 * sync-on-read with the rule's aggregation (inside a mirrored scope),
	 * e.g. { "train_accuracy*", CKPT_SYNC_ON_READ, CKPT_AGG_SUM }. Without a
	 * rule, what a SavedModel's saved_model.pb records is used. Copied by
	 * ckpt_checkpoint_new.
	 */
	const ckpt_sync_rule *sync_rules;
	size_t num_sync_rules;
	/**
	 * 1 = a debugging aid: every save / write / async save first compares
	 * the copies of every mirrored variable with replica 0's and, when one
	 * differs, fails with CKPT_ESCOPE before writing anything, naming the
	 * first diverged variable (save order), its key, the replicas that
	 * differ and the first differing element. A save writes replica 0's
	 * copy only, so without it a replica-dependent update is saved silently.
	 * Costs a read of every copy per save. 0 (default) = no check.
	 */
	int check_mirrored;
	/* version 3 */
	/**
	 * 1 = restores read each checksummed value of a plain host variable
	 * once, straight into the variable, its crc32c checked as it is read,
	 * instead of verifying every such value in the file first and then
	 * reading it (two passes over the bytes): about half the time of a
	 * restore into existing host buffers (bench/RESULTS.md, "llm.c").
	 * The price: such a restore is no longer all or nothing for plain host
	 * variables. A bad checksum or a failed read returns the error with
	 * the variables read so far already written, and the warning function
	 * names them ("may hold partial values"). Mirrored variables (put back
	 * from their second copy), device variables and everything staged keep
	 * the all-or-nothing guarantee. For a trainer that stops when a restore
	 * fails, which most do at start-up. 0 (default) = verify first.
	 */
	int restore_single_pass;
} ckpt_checkpoint_options;
/**
 * 3 adds restore_single_pass, 2 sync_rules and check_mirrored; version 1
 * and 2 structs (without them) are still accepted.
 */
#define CKPT_CHECKPOINT_OPTIONS_VERSION 3
#define CKPT_CHECKPOINT_OPTIONS_INIT { CKPT_CHECKPOINT_OPTIONS_VERSION, NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 0 }

/**
 * A checkpoint: an empty root object plus options. `o` may be NULL (copied).
 * @param[out] out caller-owned; free with ckpt_checkpoint_free
 * @return CKPT_OK; CKPT_EINVAL for bad options; CKPT_ENOMEM
 */
CKPT_API int ckpt_checkpoint_new(ckpt_checkpoint **out, const ckpt_checkpoint_options *o);
/** Free the checkpoint, its root reference and what it holds for restore-on-create (open files, strings). NULL ok. */
CKPT_API void ckpt_checkpoint_free(ckpt_checkpoint *ckpt);

/** @return the root object (borrowed; NULL for NULL). Add the trainer's objects as its children. */
CKPT_API ckpt_object *ckpt_checkpoint_root(ckpt_checkpoint *ckpt);
/** Convenience: ckpt_object_add_child(root, local_name, child).
 * @return as ckpt_object_add_child */
CKPT_API int ckpt_checkpoint_add(ckpt_checkpoint *ckpt, const char *local_name, ckpt_object *child);

/**
 * @return the save counter's value; 0 before the first save (or restore of
 * one), and 0 when it cannot be read (a counter in device memory whose
 * provider fails; saves then fail with the provider's error).
 */
CKPT_API int64_t ckpt_checkpoint_save_counter(const ckpt_checkpoint *ckpt);
/**
 * The `save_counter` variable (INT64 scalar, root child "save_counter"),
 * created through the current strategy when it does not exist yet.
 * @return the variable, borrowed from the checkpoint; NULL on failure with ckpt_error_last() set:
 *         CKPT_EINVAL for a NULL argument or a root child "save_counter" that is not an int64 scalar
 *         variable; another negative ckpt_status
 */
CKPT_API ckpt_variable *ckpt_checkpoint_save_counter_variable(ckpt_checkpoint *ckpt);

/**
 * tf.train.Checkpoint.save: increment save_counter (creating it) and write
 * "<prefix>-<save_counter>". On failure the counter is left as it was and
 * no partial checkpoint is visible.
 * @return the path written, borrowed from the checkpoint, valid until the next save / write / free;
 *         NULL on failure with ckpt_error_last() set: a negative ckpt_status
 */
CKPT_API const char *ckpt_checkpoint_save(ckpt_checkpoint *ckpt, const char *prefix);

/**
 * Data bytes of the checkpoint's last incremental save (see
 * ckpt_manager_options.incremental): `written` went through this process,
 * `reused` came from the save before it (hard links, kernel copies). A
 * multi-worker save: this worker's data shard.
 * 0 / 0 before the first incremental save.
 * @return CKPT_OK; CKPT_EINVAL for a NULL argument
 */
CKPT_API int ckpt_checkpoint_last_save_bytes(uint64_t *written, uint64_t *reused, const ckpt_checkpoint *ckpt);

/**
 * tf.train.Checkpoint.write: write the live state to `path` (a bundle
 * prefix) without touching save_counter. One value per logical variable:
 * the primary copy of a mirrored variable, the aggregate of a sync-on-read
 * one. Data in TF2 order (BFS node order, slot variables, object graph
 * last), committed atomically through ckpt_writer_*.
 * @return CKPT_OK or a negative ckpt_status (see ckpt_error_last)
 */
CKPT_API int ckpt_checkpoint_write(ckpt_checkpoint *ckpt, const char *path);

/**
 * tf.train.Checkpoint.restore into the live objects: match the file's
 * object graph to the live one by child names from the root (entries no
 * graph node refers to — all of a TF1 name-based file — are matched by
 * variable name, without restore-on-create), check
 * dtype and shape, then assign each matched value to every replica
 * (sync-on-read SUM: replica 0 gets the value, the others zero, so the
 * aggregate reads back bit for bit). A failure (EMISMATCH naming
 * the variable and both shapes; read or checksum errors) changes no live
 * variable.
 *
 * No copy of the whole state is made: values of plain variables are checked
 * against their checksums in the file first and then read straight into the
 * variable; mirrored ones are read into copy 0 (checksums verified on the
 * way; a failure puts copy 0 back from copy 1) and fanned out in parallel.
 * Only sync-on-read, string, partitioned and unchecksummed (Keras) values are
 * staged in memory. The one failure that can reach a plain variable is the
 * file changing (or the device failing) between its verification and its
 * read; the restore then returns the error and warns that the named
 * variables may hold partial values. Values whose objects or slots do not
 * exist yet are applied when they are created (restore-on-create): they
 * stay in the file, not in memory. The checkpoint keeps the file open and
 * where each value lies (data file, offset, length, crc32c: the stored one,
 * or for formats without one a crc32c this restore computes through one
 * bounded buffer), reads the value when its object is created, with the
 * same checks and all-or-nothing guarantees, and fails that creation with
 * CKPT_ECHECKSUM, naming the file and the key, when the value's bytes
 * changed in between (rewritten in place, or replaced on object storage).
 * String values alone are kept in memory. When the file has a
 * save_counter, it is created and restored. `path` accepts everything ckpt_reader_open does.
 * @param[out] status (may be NULL) what matched, caller-owned; free it with
 *                   ckpt_restore_status_free before the checkpoint
 * @return CKPT_OK or a negative ckpt_status as said above
 */
CKPT_API int ckpt_checkpoint_restore(ckpt_restore_status **status, ckpt_checkpoint *ckpt, const char *path);

/**
 * Load `path` (any format ckpt_reader_open reads) into a new checkpoint:
 * build an object for every node of the file's object graph (TF1
 * name-based files: one root child per key; Keras files: the synthesized
 * graph) and create every variable through ckpt_strategy_current() —
 * mirrored inside a mirrored scope, plain outside — including optimizer
 * slots, with the file's values (entries no graph node refers to become
 * root children named by their stored key). String tensors have no
 * variable kind: they are not loaded and `*status` lists them, with
 * anything else that could not be placed. A value whose file stores a
 * checksum is verified against it as it is read, before it lands in copy 0
 * (a mismatch fails the load); other copies are copied from copy 0.
 * `o` may be NULL.
 * @param[out] out    caller-owned; free with ckpt_checkpoint_free
 * @param[out] status (may be NULL) caller-owned; free with ckpt_restore_status_free before the checkpoint
 * @return CKPT_OK or a negative ckpt_status (see ckpt_error_last)
 */
CKPT_API int ckpt_checkpoint_load(ckpt_checkpoint **out, ckpt_restore_status **status, const char *path,
	const ckpt_checkpoint_options *o);

/**
 * Drop every value a restore keeps for objects and slots not created yet,
 * releasing their memory (e.g. an inference model restored from a training
 * checkpoint never creates the optimizer). Later creations get no value.
 */
CKPT_API void ckpt_checkpoint_discard_pending(ckpt_checkpoint *ckpt);

/**
 * The object graph save would write now.
 * Every field TensorFlow writes that the tree determines: children,
 * attributes (full_name left empty where the loaded file had none), slot
 * variables, and has_checkpoint_values on every node as TensorFlow sets it
 * (true on nodes with values and their ancestors) — absent on every node
 * when the tree was loaded from a graph written without it (older
 * TensorFlow), so that such a file is written back as it was.
 * registered_saver is never written: a registered saver's data lives in
 * files of its own that libckpt does not carry.
 * @param[out] out caller-owned; free with ckpt_object_graph_free
 * @return CKPT_OK or a negative ckpt_status (see ckpt_error_last)
 */
CKPT_API int ckpt_checkpoint_object_graph(ckpt_object_graph **out, ckpt_checkpoint *ckpt);

/* ---- enumerating the live tree ---- */

/** One variable reachable from the root (slots included), in save order. */
typedef struct ckpt_tracked_variable {
	const char *key;          /**< checkpoint key save would use */
	const char *path;         /**< object path ("model/dense/kernel"; slots: "<var>/.OPTIMIZER_SLOT/<opt>/<slot>") */
	const char *full_name;    /**< the variable's name (ckpt_variable_name) */
	const char *source_key;   /**< stored key it was last restored / loaded from, NULL if never */
	ckpt_variable *variable;  /**< borrowed from the tree */
	const char *slot_name;    /**< slot variables: the slot name; else NULL */
	ckpt_variable *primary;   /**< slot variables: the primary variable; else NULL */
	int node_id;              /**< node id in the object graph save would write */
} ckpt_tracked_variable;

/**
 * Snapshot of every variable in save order.
 * @param[out] out caller-owned; free with ckpt_tracked_list_free
 * @return CKPT_OK or a negative ckpt_status (see ckpt_error_last)
 */
CKPT_API int ckpt_checkpoint_variables(ckpt_tracked_list **out, ckpt_checkpoint *ckpt);
/** @return the entries in the list (0 for NULL). */
CKPT_API size_t ckpt_tracked_list_num_entries(const ckpt_tracked_list *l);
/** @return entry i (borrowed from the list), NULL when out of range. */
CKPT_API const ckpt_tracked_variable *ckpt_tracked_list_get(const ckpt_tracked_list *l, size_t i);
/** Free the list (not the variables it names). NULL ok. */
CKPT_API void ckpt_tracked_list_free(ckpt_tracked_list *l);

/**
 * Find a variable by object path ("model/layer_with_weights-0/kernel"), by
 * checkpoint key, or by the stored key it was loaded from (TF1 names such
 * as "dense/kernel").
 * @return the variable, borrowed from the tree; NULL on failure with ckpt_error_last() set:
 *         CKPT_ENOTFOUND otherwise
 */
CKPT_API ckpt_variable *ckpt_checkpoint_find_variable(ckpt_checkpoint *ckpt, const char *path);

/* ---- restore status ---- */

/*
 * A NULL status stands for "nothing was restored": it is what
 * ckpt_manager_restore_latest returns on a fresh start. Every call below
 * accepts it: the counts are 0, the path is NULL, and the assertions return
 * CKPT_OK — they check that a restore matched the live tree, and with no
 * restore there is nothing to mismatch. So one pattern serves a first start
 * and a resume:
 *
 *     void create_slots(void);   // the trainer's: the optimizer's slots (restored on create)
 *
 *     static int resume(ckpt_manager *mgr)
 *     {
 *         ckpt_restore_status *st;
 *         const char *from = ckpt_manager_restore_latest(&st, mgr);  // NULL: fresh start, st == NULL
 *         if (ckpt_status_of(from) < 0)
 *             return ckpt_status_of(from);                           // a failure, not a fresh start
 *         create_slots();
 *         int rc = ckpt_restore_status_assert_consumed(st);         // CKPT_OK on a fresh start
 *         ckpt_restore_status_free(st);
 *         return rc;
 *     }
 *
 * Tell the two apart by `from` (or ckpt_manager_latest), not by the status.
 * (TensorFlow's restore(None) returns an initialization-only status whose
 * assert_consumed raises, so Python trainers branch on latest_checkpoint;
 * in C the NULL status makes that branch unnecessary.)
 */

/**
 * What a restore matched. The lists are snapshots taken when *_count() is
 * called (restore-on-create changes them); the strings stay valid until the
 * next *_count() call on the same list or the status is freed.
 */
/** @return the number of stored keys whose values have not been assigned to a live variable (yet). */
CKPT_API size_t ckpt_restore_status_num_unmatched(ckpt_restore_status *st);
/** @return unmatched key i of the last snapshot (borrowed, see above), NULL when out of range. */
CKPT_API const char *ckpt_restore_status_unmatched(const ckpt_restore_status *st, size_t i);
/** @return the number of live variables (reachable from the root) that received no value. */
CKPT_API size_t ckpt_restore_status_num_unrestored(ckpt_restore_status *st);
/** @return unrestored key i of the last snapshot (borrowed, see above), NULL when out of range. */
CKPT_API const char *ckpt_restore_status_unrestored(const ckpt_restore_status *st, size_t i);
/** @return the values assigned so far (immediately and on create). */
CKPT_API size_t ckpt_restore_status_num_restored(const ckpt_restore_status *st);
/** @return the resolved path that was read (borrowed from the status); NULL for a NULL status. */
CKPT_API const char *ckpt_restore_status_path(const ckpt_restore_status *st);

/**
 * The tier a restore read (ckpt/tier.h). ckpt_checkpoint_restore reports
 * CKPT_TIER_STORAGE; ckpt_manager_restore_latest CKPT_TIER_MEMORY when it
 * restored from the memory tier.
 * @return a ckpt_tier; CKPT_TIER_NONE for a NULL status
 */
CKPT_API int ckpt_restore_status_tier(const ckpt_restore_status *st);
/**
 * How many bytes of stored values came from `tier` (a ckpt_tier): the
 * bytes of every value of the checkpoint the restore used, as its index
 * gives them (a partitioned variable's slices counted once), under the tier
 * that held it, and 0 under the other. A restore is served whole by one
 * tier; a memory step the manager skipped (it did not check) and fell back
 * from gave no value, so it counts 0. For a multi-process restore from
 * memory, the whole step each worker restored from (its node's segments
 * and those it received from other nodes).
 * @return bytes; 0 for a NULL status or CKPT_TIER_NONE
 */
CKPT_API uint64_t ckpt_restore_status_tier_bytes(const ckpt_restore_status *st, int tier);

/**
 * assert_consumed.
 * @return CKPT_OK when every stored value was assigned and every live
 *         variable got one, and for a NULL status (nothing was restored);
 *         else CKPT_ENOTFOUND naming the first offenders
 */
CKPT_API int ckpt_restore_status_assert_consumed(ckpt_restore_status *st);
/** assert_existing_objects_matched.
 * @return CKPT_OK when every live variable received a value, and for NULL; else CKPT_ENOTFOUND naming the first */
CKPT_API int ckpt_restore_status_assert_existing_objects_matched(ckpt_restore_status *st);
/**
 * expect_partial: silence the warning that ckpt_restore_status_free otherwise
 * emits when stored values were never used.
 */
CKPT_API void ckpt_restore_status_expect_partial(ckpt_restore_status *st);
/** NULL ok. Pending values stay held by the checkpoint. */
CKPT_API void ckpt_restore_status_free(ckpt_restore_status *st);

/* ================================================================== */
/* Manager                                                              */
/* ================================================================== */

typedef struct ckpt_manager_options {
	unsigned version;            /**< CKPT_MANAGER_OPTIONS_VERSION */
	const char *checkpoint_name; /**< prefix inside the directory, NULL = "ckpt" */
	ckpt_vfs *vfs;               /**< NULL = the checkpoint's, else POSIX */
	ckpt_warning_fn warn;        /**< NULL = the checkpoint's, else stderr */
	void *warn_ctx;
	int no_fsync;                /**< 1 = skip fsync of the state file */
	/**
	 * 1 = ckpt_manager_restore_latest falls back to older checkpoints when
	 * the newest does not verify (version 2; see there). 0, the default, is
	 * TensorFlow's behaviour: the restore fails.
	 */
	int fallback;
	/* version 3 */
	/**
	 * 1 = incremental saves (the TensorBundle format on the POSIX file
	 * system and on s3://, single-process or multi-worker, each worker
	 * reusing its own shard; elsewhere every save stays full). Each
	 * checkpoint is still a complete, ordinary TensorBundle that TensorFlow
	 * reads and that stays valid when older ones are deleted, but bytes that
	 * did not change since the checkpoint's last save do not pass through
	 * this process: values no write touched (see ckpt_variable_mark_dirty)
	 * go into their own data shards, hard-linked from the last checkpoint
	 * once a shard holds only such values, else copied by the kernel
	 * (copy_file_range); a changed value of 64 KiB or more is compared by
	 * crc32c per 4 KiB block, computed as it is written, and its unchanged
	 * blocks are copied by the kernel. A source file is used only while it
	 * has the device, inode, size and modification time it had after its
	 * commit, else the value is written from memory.
	 *
	 * 0 (the default) = every save writes every byte. Off by default: a
	 * block whose crc32c matches the last save's is taken as unchanged (a
	 * 2^-32 chance per changed block that a change is missed, which a full
	 * save does not have); kept checkpoints share files (a tool that edits
	 * one data file in place edits every checkpoint linking it); a write to
	 * a source within the file system's timestamp granularity of its commit
	 * is not seen; and the first incremental save after the state froze
	 * copies the frozen values into their own shard once.
	 */
	int incremental;
	/* version 4: the memory tier (ckpt/tier.h) */
	/**
	 * 0 (default) = no memory tier. k > 0: a save whose number is a
	 * multiple of k writes the state to the memory tier (one segment per
	 * worker under the tier directory). A multi-process checkpoint (ckpt_mpi)
	 * is kept in pieces on the workers' nodes, see memory_copies and
	 * ckpt/tier.h.
	 */
	int memory_every;
	/**
	 * 0 (default) = every save is written to the directory, as without a
	 * memory tier. k > 0 (needs memory_every): only saves whose number is a
	 * multiple of k are; the others go to memory only. A save that neither
	 * tier takes writes nothing but still advances save_counter, and
	 * ckpt_manager_save returns "" for it. A save to both tiers of a
	 * single-process, TensorBundle, non-incremental manager writes the
	 * state once, into memory, and copies the directory's checkpoint from
	 * the memory segment on a background thread: ckpt_manager_save returns
	 * its path once the memory step is committed; the next save that writes
	 * the directory, ckpt_manager_wait, a restore, latest_valid and free
	 * wait for the copy (and report its failure), and the manager's list
	 * shows it from then on. A kill during the copy leaves the directory's
	 * previous checkpoint the newest. A multi-process manager does the same
	 * per worker (each copies its piece's data shard from its node's
	 * segment; the thread calls no MPI); the merged index and the commit are
	 * collective and run at the next manager call on the trainer's thread:
	 * a memory-only save finishes them once every worker's copy is done
	 * (reporting a failed copy instead of saving), a save to the directory,
	 * wait, restore and free wait for them; latest_valid does not.
	 */
	int persist_every;
	/**
	 * The job's name in the tier directory (no '/', not starting with '.').
	 * NULL = "<base name of dir>-<crc32c of its absolute path, hex>". A
	 * restarted job must use the same name to find its segments.
	 */
	const char *memory_job;
	/**
	 * The most bytes the tier may hold for this job (a step being written
	 * (into the spares of ckpt/tier.h, which stand for it between saves)
	 * plus the committed one, plus a superseded step a background copy to
	 * storage still reads: its removed files stay open until the copy
	 * ends); 0 = the space free in the tier directory's file system. A
	 * save that would exceed it fails with CKPT_ELIMIT naming what it
	 * needs and what is free, before writing anything.
	 */
	uint64_t memory_limit;
	/* version 5 */
	/**
	 * A multi-process memory tier (ckpt/tier.h): how many other nodes keep a
	 * copy of each worker's piece, F. 0 (default) = none: losing a node loses
	 * the memory step. F > 0 needs at least F + 1 nodes (CKPT_EINVAL at the
	 * first memory save otherwise); losing up to F nodes keeps every step the
	 * tier committed. Ignored by a single-process checkpoint.
	 */
	int memory_copies;
	/* version 6 */
	/**
	 * A multi-process memory tier with copies (memory_copies > 0): 1 = the
	 * copies to other nodes leave the trainer's thread. A memory save then
	 * blocks only while this worker writes its piece into its node's
	 * segment; a thread of the tier sends it to the F other nodes (over a
	 * second communicator of the strategy) while the trainer trains on, and
	 * step N is committed (the vote, the records, the older step removed)
	 * at the next manager call: the next save, ckpt_manager_wait, a restore
	 * or free, which wait for the copies if they are not done. Until then
	 * the previous committed step is what a restart restores: a failure
	 * costs at most the step being copied. A copy that failed is reported
	 * by that next call (the save it would have started writes nothing), its
	 * step removed. A save that also writes the directory (persist_every)
	 * commits its step before it returns, so that the directory's copy is
	 * made of a committed step. Needs MPI initialized with
	 * MPI_THREAD_MULTIPLE: without it the first memory save fails with
	 * CKPT_EUNSUPPORTED on every worker, naming the level it found.
	 * 0 (default) = the copies are made inside ckpt_manager_save, which
	 * returns once step N is committed. Ignored without copies.
	 */
	int memory_async;
} ckpt_manager_options;
/**
 * 2 adds fallback, 3 incremental, 4 the memory tier, 5 memory_copies, 6 memory_async; version 1-5 structs
 * (without them) are still accepted.
 */
#define CKPT_MANAGER_OPTIONS_VERSION 6
#define CKPT_MANAGER_OPTIONS_INIT { CKPT_MANAGER_OPTIONS_VERSION, NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, NULL, 0, 0, 0 }

/**
 * tf.train.CheckpointManager over `dir` (created when missing) for `ckpt`
 * (borrowed; NULL = read-only use: latest / list / latest_valid).
 * `max_to_keep` <= 0 keeps everything.
 *
 * One writer per directory: a manager with a checkpoint holds the
 * directory's lock (ckpt_vfs_lock) until ckpt_manager_free — on the POSIX
 * VFS an flock(2) on `dir/checkpoint.lock`, which holds the holder's pid and
 * which the kernel releases when the holder dies (a killed trainer never
 * blocks the next). A second manager with a checkpoint on the same
 * directory, in this process or another, fails here with CKPT_EBUSY; the
 * message names the holder's pid and the lock file. A holder that is exiting
 * (killed, still finishing an fsync or freeing its memory; Linux /proc
 * tells) is waited for, up to 60 s, before the same refusal. On a VFS
 * without a lock method the lock excludes managers of this process only.
 * Read-only managers and readers take no lock.
 *
 * Reads the `checkpoint` state file when present. Complete "ckpt-N" that it
 * does not list are adopted as the newest: all of them when there is no
 * state file, else those numbered above every listed one (a save that died
 * after committing its checkpoint, before the state file). With a
 * checkpoint — holding the lock proves their writer is gone — the manager
 * also removes leftover temporaries (`*.tempstate*`, `*_temp*`) and data
 * shards of "ckpt-N" whose index is gone, deletes the oldest beyond
 * max_to_keep, and rewrites the state file if it changed anything: it
 * finishes the save a crash interrupted.
 * @param[out] out caller-owned; free with ckpt_manager_free
 * @return CKPT_OK; CKPT_EBUSY as said above; another negative ckpt_status
 */
CKPT_API int ckpt_manager_new(ckpt_manager **out, ckpt_checkpoint *ckpt, const char *dir, int max_to_keep);
/**
 * ckpt_manager_new with options (`o` may be NULL).
 * @param[out] out caller-owned; free with ckpt_manager_free
 * @return as ckpt_manager_new
 */
CKPT_API int ckpt_manager_new_ext(ckpt_manager **out, ckpt_checkpoint *ckpt, const char *dir, int max_to_keep,
	const ckpt_manager_options *o);
/**
 * Wait for an async save in flight, release the directory's lock and free.
 * With a memory tier: when the directory holds a checkpoint at least as new
 * as the newest step in memory (a clean finish), the job's segments are
 * removed; otherwise they are kept, with a warning, for a restart (or
 * `ckpt tier drop`). NULL ok.
 */
CKPT_API void ckpt_manager_free(ckpt_manager *m);

/**
 * Save "<dir>/ckpt-N" with N = max(save_counter, highest existing number) + 1
 * (save_counter is set to N): commit the checkpoint atomically, replace the
 * state file atomically listing it and the checkpoints about to be deleted
 * (the save is then committed; a state file that cannot be written fails it
 * before anything is deleted), delete the oldest beyond max_to_keep (each
 * index first), then replace the state file without them — TensorFlow's
 * order. Retention is best effort: a delete that fails (an append-only
 * bucket, an outage) is a warning naming the checkpoint and the reason, never
 * a failed save; the checkpoint stays listed and the next save tries again.
 * A crash at any point leaves at most max_to_keep complete checkpoints plus
 * the one being written, and the next manager restores the newest complete
 * one (and drops from its list any the state file names that are gone). Waits for an async save in flight first
 * (ckpt/async.h: ckpt_manager_save_async); if that failed, returns its
 * error and saves nothing.
 * @return the checkpoint written, borrowed from the manager until the next save or free; NULL on
 *         failure with ckpt_error_last() set: a negative ckpt_status
 */
CKPT_API const char *ckpt_manager_save(ckpt_manager *m);
/**
 * ckpt_manager_save with an explicit number (for example the epoch); save_counter is set to it.
 * @return as ckpt_manager_save's: borrowed from the manager; NULL on failure, as ckpt_manager_save
 */
CKPT_API const char *ckpt_manager_save_number(ckpt_manager *m, int64_t number);

/** @return the latest recorded checkpoint prefix ("dir/ckpt-3", borrowed), NULL when none. Not validated. */
CKPT_API const char *ckpt_manager_latest(const ckpt_manager *m);
/** @return the number of checkpoints kept. */
CKPT_API size_t ckpt_manager_num_checkpoints(const ckpt_manager *m);
/** @return checkpoint i of those kept, oldest first (a prefix path, borrowed); NULL when out of range. */
CKPT_API const char *ckpt_manager_checkpoint(const ckpt_manager *m, size_t i);

/**
 * The newest checkpoint that is complete: its index opens and parses and
 * every data shard exists with the size the index implies. Incomplete or
 * corrupt ones are skipped with a warning naming the file and the reason;
 * choosing one that the state file did not list (adopted, see
 * ckpt_manager_new) warns once too. An I/O failure while checking is
 * returned, not taken for incompleteness. Waits for an async save in
 * flight first.
 * @return the checkpoint's prefix, borrowed from the manager; NULL on failure with ckpt_error_last()
 *         set: CKPT_ENOTFOUND when none is valid; an I/O failure)
 */
CKPT_API const char *ckpt_manager_latest_valid(ckpt_manager *m);

/**
 * Restore the latest valid checkpoint into the manager's checkpoint.
 * With a memory tier (memory_every), the newest complete step this job
 * holds there is restored instead when it is newer than the newest
 * checkpoint the directory lists: nothing is read from the directory then,
 * and ckpt_restore_status_tier says CKPT_TIER_MEMORY. A segment that does
 * not check (header, sizes, a tensor's crc32c) is skipped with a warning,
 * for an older memory step or the directory, and changes no variable.
 * When there is none, returns NULL with ckpt_error_last() cleared (its code
 * CKPT_OK, so ckpt_status_of gives CKPT_OK) and *status = NULL: a fresh
 * start; the NULL status's assertions pass, see "restore status" above.
 *
 * A checkpoint that is complete but does not verify (a crc32c mismatch:
 * CKPT_ECHECKSUM; a malformed entry or data: CKPT_EFORMAT) fails the
 * restore, as in TensorFlow. With the manager option `fallback` set, the
 * restore instead warns (through the manager's warning function) with that
 * checkpoint's path and the reason, and tries the next older one, until
 * one restores; the path returned names it. A failed attempt changes no
 * live variable (restores are all-or-nothing), so the one restored is the
 * only one applied. When none verifies, the newest one's error is returned.
 * Other failures (CKPT_EMISMATCH with the live tree, CKPT_EIO, CKPT_ENOMEM)
 * are not about the checkpoint and end the restore either way.
 * @param[out] status (may be NULL) caller-owned; free with ckpt_restore_status_free
 * @return the checkpoint restored, borrowed from the manager; NULL on a fresh
 *         start (as said above) or on failure with ckpt_error_last() set: a
 *         negative ckpt_status, as ckpt_checkpoint_restore's
 */
CKPT_API const char *ckpt_manager_restore_latest(ckpt_restore_status **status, ckpt_manager *m);

/**
 * For a tool without a model (`ckpt restore --job`): load the newest
 * checkpoint of a read-only manager (created with ckpt NULL) into a new
 * checkpoint, as ckpt_checkpoint_load does (every variable created from
 * what is stored). With a memory tier in the manager's options
 * (memory_every > 0, memory_job; the tier directory from CKPT_TIER_DIR or
 * /dev/shm) the newest complete step of a single-process job held there is
 * loaded when it is newer than every checkpoint the directory lists,
 * reading nothing from the directory (ckpt_restore_status_tier says
 * CKPT_TIER_MEMORY); a segment that does not check is skipped with a
 * warning. Otherwise the directory's newest complete checkpoint is loaded.
 * A multi-process job's steps need its workers (ckpt_manager_restore_latest
 * under the strategy): they are not considered. A read-only manager never
 * removes a segment.
 * @param[out] out the loaded checkpoint, caller-owned (free with ckpt_checkpoint_free); NULL when nothing was loaded
 * @param[out] status (may be NULL) caller-owned; free with ckpt_restore_status_free before the checkpoint
 * @param m a read-only manager (CKPT_EINVAL for one with a checkpoint)
 * @param o options of the new checkpoint, as ckpt_checkpoint_load's (NULL ok); its VFS is the manager's for the
 *          directory and POSIX for the tier
 * @return the segment's or checkpoint's prefix loaded, borrowed from the
 *         manager; NULL when there is none (ckpt_error_last() cleared) or on
 *         failure with ckpt_error_last() set
 */
CKPT_API const char *ckpt_manager_load_latest(ckpt_checkpoint **out, ckpt_restore_status **status, ckpt_manager *m,
	const ckpt_checkpoint_options *o);

#ifdef __cplusplus
}
#endif
#endif
