/*
 * libckpt — host state tracked by pointer: a trainer's own step counter, RNG
 * state, data position, or any struct of fixed-size fields, checkpointed
 * without copying it into variables and back.
 *
 *     #include <stddef.h>   // offsetof, for CKPT_HOST_*
 *
 *     typedef struct { uint64_t rng[4]; int64_t position; double lr; } loop_state;
 *     static int64_t step = 0;
 *     static loop_state state;
 *     static const ckpt_host_field loop_fields[] = {
 *         CKPT_HOST_ARRAY(loop_state, rng, CKPT_DT_UINT64),
 *         CKPT_HOST_SCALAR(loop_state, position, CKPT_DT_INT64),
 *         CKPT_HOST_SCALAR(loop_state, lr, CKPT_DT_DOUBLE),
 *     };
 *
 *     static int track_loop(ckpt_checkpoint *ck)
 *     {
 *         ckpt_shape scalar = { 0 };
 *         int rc = ckpt_object_track_host(ckpt_checkpoint_root(ck), "step", CKPT_DT_INT64, &scalar, &step);
 *         ckpt_object *data = ckpt_object_new_child(ckpt_checkpoint_root(ck), "data");
 *         if (rc < 0 || !data)
 *             return rc < 0 ? rc : ckpt_error_last()->code;
 *         return ckpt_object_track_host_struct(data, &state, loop_fields, 3);
 *     }
 *
 * Semantics:
 *  - The library reads the memory at every save (ckpt_checkpoint_save /
 *    write, the manager; an async save reads it while staging, before it
 *    returns) and writes it at every restore that matches it (the restore
 *    itself, or restore-on-create when the value is tracked after the
 *    restore). It never touches it otherwise: between those calls the
 *    memory is the trainer's, to update directly.
 *  - One copy per process: host state is never replicated and belongs to no
 *    strategy, whatever scope is active when it is tracked (it needs none).
 *    It is not a variable of the strategy being run: if replica functions
 *    update it inside ckpt_strategy_run, keeping it consistent is the
 *    trainer's business (for example only replica 0 writes it, or the loop
 *    updates it after ckpt_strategy_run returns); ckpt_variable_local on it
 *    in replica context is CKPT_ESCOPE.
 *  - Keys are TensorFlow's: tracked as `step` on the root, the value is
 *    `step/.ATTRIBUTES/VARIABLE_VALUE`, like a tf.Variable attribute, so
 *    tf.train.Checkpoint(step=tf.Variable(0, dtype=tf.int64)) restores it.
 *  - It appears everywhere a variable does: ckpt_checkpoint_variables (a
 *    plain variable with one copy; ckpt_variable_is_host says which),
 *    restore status counts and assertions, dtype / shape checks
 *    (CKPT_EMISMATCH leaves the memory unchanged), ckpt_checkpoint_find_variable.
 *  - The memory must stay valid, at the same address, until the object is
 *    freed (ckpt_checkpoint_free); it is never freed by the library.
 *    Any alignment is fine.
 */
#ifndef CKPT_HOST_H
#define CKPT_HOST_H

#include "ckpt/common.h"
#include "ckpt/tensor.h"
#include "ckpt/variable.h"
#include "ckpt/checkpoint.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Track the `shape`-shaped `dt` tensor at `ptr` (ckpt_shape_nbytes bytes,
 * owned by the caller) as the attribute `local_name` of `obj`. Fixed-size
 * dtypes only (EINVAL for STRING). A value a restore holds for it is
 * written into `ptr` before this returns (restore-on-create; CKPT_EMISMATCH
 * on a dtype / shape difference, nothing tracked and `ptr` unchanged).
 * EINVAL when `obj` already has a child of that name or `ptr` is NULL;
 * ESCOPE in replica context.
 * @return CKPT_OK or a negative ckpt_status as said above
 */
CKPT_API int ckpt_object_track_host(ckpt_object *obj, const char *local_name, ckpt_dtype dt,
	const ckpt_shape *shape, void *ptr);

/** One field of a struct tracked by ckpt_object_track_host_struct. */
typedef struct ckpt_host_field {
	const char *name;  /**< attribute name (the key's path component) */
	ckpt_dtype dtype;  /**< element dtype, fixed-size */
	size_t offset;     /**< offsetof(struct, field) */
	size_t size;       /**< sizeof the field, checked against the dtype */
	int array;         /**< 0: a scalar (size == dtype size); 1: shape [size / dtype size] */
} ckpt_host_field;

/** A scalar field, tracked under its own name. */
#define CKPT_HOST_SCALAR(type, field, dt) { #field, (dt), offsetof(type, field), sizeof(((type *)0)->field), 0 }
/** A fixed-size 1-D array field (`T field[n]`), tracked under its own name with shape [n]. */
#define CKPT_HOST_ARRAY(type, field, dt) { #field, (dt), offsetof(type, field), sizeof(((type *)0)->field), 1 }

/**
 * Track fields[0..nfields) of the struct at `base` as host state on `obj`
 * (each as by ckpt_object_track_host, at base + offset). Every field is
 * checked first — names non-empty and distinct from each other and from
 * `obj`'s children, dtype fixed-size, size a multiple of the dtype size
 * (scalars: equal) — so a bad table tracks nothing (EINVAL naming the
 * field). A failure after the checks (CKPT_EMISMATCH from restore-on-create,
 * ENOMEM) leaves the fields before the failing one tracked.
 * @return CKPT_OK or a negative ckpt_status as said above
 */
CKPT_API int ckpt_object_track_host_struct(ckpt_object *obj, void *base, const ckpt_host_field *fields,
	size_t nfields);

/** The root child that holds trainer state (see ckpt_checkpoint_trainer_state). */
#define CKPT_TRAINER_STATE "trainer_state"

/**
 * The object for trainer state — a data loader's position, an RNG's state,
 * anything of the training loop rather than of the model: the root child
 * CKPT_TRAINER_STATE, created on the first call. Track host values (or
 * variables) on it as on any object. Its entries are stored under
 * "trainer_state/..." keys (TensorFlow reads them as any object path:
 * tf.train.Checkpoint(trainer_state=tf.Module()) with the same attributes
 * restores them) and get the role CKPT_ROLE_TRAINER (ckpt/reader.h), which
 * `ckpt inspect` and `--json` show apart from the model and which
 * `ckpt convert --no-optimizer` drops with the optimizer.
 * @return the object, borrowed from the checkpoint; NULL on failure with ckpt_error_last() set:
 *         CKPT_EINVAL for a NULL checkpoint, or a root child of that name that is a variable;
 *         CKPT_ESCOPE in replica context; CKPT_ENOMEM
 */
CKPT_API ckpt_object *ckpt_checkpoint_trainer_state(ckpt_checkpoint *ckpt);

/** @return 1 when `v` is host state tracked by pointer (ckpt_object_track_host), else 0. */
CKPT_API int ckpt_variable_is_host(const ckpt_variable *v);

#ifdef __cplusplus
}
#endif
#endif
