/*
 * libckpt — variables laid out in one caller-owned buffer: a trainer that
 * keeps all its parameters at offsets of one allocation (llm.c: 16 tensors
 * in one float buffer, AdamW's m and v in two more of the same layout)
 * registers them from one table, zero copy, instead of one
 * ckpt_object_add_variable and one ckpt_optimizer_create_slot per tensor.
 *
 *     #include <stddef.h>
 *
 *     enum { WTE, LN_W, NT };                     // the trainer's tensors
 *     static const ckpt_buffer_field fields[NT] = {
 *         { "wte", CKPT_DT_FLOAT, { 2, { 50257, 768 } }, 0 },
 *         { "ln_w", CKPT_DT_FLOAT, { 1, { 768 } }, 50257 * 768 * sizeof(float) },
 *     };
 *
 *     static int track_params(ckpt_checkpoint *ck, float *params, float *m, float *v, size_t bytes)
 *     {
 *         ckpt_object *opt;
 *         ckpt_object *model = ckpt_object_new_child(ckpt_checkpoint_root(ck), "model");
 *         int rc = ckpt_status_of(model);
 *         if (rc == CKPT_OK)
 *             rc = ckpt_object_add_buffer_variables(model, params, bytes, fields, NT);
 *         if (rc == CKPT_OK && (rc = ckpt_optimizer_new(&opt, "AdamW")) == CKPT_OK) {
 *             rc = ckpt_checkpoint_add(ck, "optimizer", opt);
 *             if (rc == CKPT_OK)
 *                 rc = ckpt_optimizer_create_buffer_slots(opt, model, "m", m, bytes, fields, NT);
 *             if (rc == CKPT_OK)
 *                 rc = ckpt_optimizer_create_buffer_slots(opt, model, "v", v, bytes, fields, NT);
 *             ckpt_object_free(opt);
 *         }
 *         return rc;
 *     }
 *
 * Rules, checked for the whole table before anything is created (a bad
 * table creates nothing; CKPT_EINVAL naming the field):
 *  - each field has a non-empty name, distinct from the other fields' and
 *    from the object's children, a fixed-size dtype and a valid shape;
 *  - it lies inside the buffer: offset + bytes <= size;
 *  - it is aligned: base + offset is a multiple of the dtype's size (the
 *    trainer reads it as an array of that type);
 *  - no two fields overlap, and no field overlaps memory another live
 *    variable wraps (replica_buffers, host state, another table): two
 *    variables over the same bytes would overwrite each other at every
 *    restore. Gaps between fields are allowed (padding, untracked data).
 * The variables wrap the buffer as ckpt_variable_options.replica_buffers
 * does (ckpt/variable.h): the buffer must stay valid, at the same address,
 * until the variables are freed (with their object, or
 * ckpt_checkpoint_free); its contents are kept as they are at creation; a
 * save reads it and a restore writes it in place. Restore-on-create
 * applies as for any variable. A failure after the checks (CKPT_EMISMATCH
 * from restore-on-create, CKPT_ENOMEM) leaves the fields before the failing
 * one created. One copy per variable: under a strategy with several local
 * replicas these calls are CKPT_EINVAL (give each replica its buffer with
 * replica_buffers instead).
 */
#ifndef CKPT_LAYOUT_H
#define CKPT_LAYOUT_H

#include "ckpt/common.h"
#include "ckpt/tensor.h"
#include "ckpt/variable.h"
#include "ckpt/checkpoint.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One tensor at an offset of a caller-owned buffer. */
typedef struct ckpt_buffer_field {
	const char *name;  /**< attribute name on the object (the key's path component), and the variable's name */
	ckpt_dtype dtype;  /**< fixed-size */
	ckpt_shape shape;
	size_t offset;     /**< bytes from the buffer's start */
} ckpt_buffer_field;

/**
 * Create fields[0..nfields) as variables of `obj` (one copy each, through
 * the current strategy) wrapping `base` + offset, checked as the top of
 * this header says. Each is tracked under its field's name
 * (ckpt_object_variable(obj, name) finds it).
 * @return CKPT_OK; CKPT_EINVAL as said above; CKPT_EMISMATCH from restore-on-create; CKPT_ESCOPE in
 *         replica context; CKPT_ENOMEM
 */
CKPT_API int ckpt_object_add_buffer_variables(ckpt_object *obj, void *base, size_t size,
	const ckpt_buffer_field *fields, size_t nfields);

/**
 * For each field, create the slot `slot_name` in optimizer `opt`
 * (ckpt_optimizer_create_slot) of the variable `owner` tracks under the
 * field's name (made by ckpt_object_add_buffer_variables with the same
 * table), wrapping `base` + offset: another buffer of the same layout
 * (AdamW's m). Each primary must exist with the field's dtype and shape
 * (CKPT_ENOTFOUND / CKPT_EMISMATCH naming it, nothing created). Checked as
 * the top of this header says.
 * @return as ckpt_object_add_buffer_variables; CKPT_ENOTFOUND, CKPT_EMISMATCH as said
 */
CKPT_API int ckpt_optimizer_create_buffer_slots(ckpt_object *opt, ckpt_object *owner, const char *slot_name,
	void *base, size_t size, const ckpt_buffer_field *fields, size_t nfields);

#ifdef __cplusplus
}
#endif
#endif
