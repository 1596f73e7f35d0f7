/*
 * Host state tracked by pointer (ckpt/host.h): a variable node whose
 * variable wraps the trainer's memory (one copy, default strategy), so save
 * and restore need nothing special — a save reads copy 0, which is the
 * trainer's memory, and a restore writes it, in place, after verifying the
 * value like any plain variable's.
 */
#include <string.h>
#include "checkpoint_internal.h"
#include "model/variable_internal.h"

int ckpt_object_track_host(ckpt_object *obj, const char *local_name, ckpt_dtype dt, const ckpt_shape *shape,
	void *ptr)
{
	if (!obj || !local_name || !shape)
		return ckpt__fail(CKPT_EINVAL, NULL, local_name, -1, "ckpt_object_track_host: NULL argument");
	CKPT_TRY(ckpt__check_not_replica("ckpt_object_track_host"));
	if (!ptr)
		return ckpt__fail(CKPT_EINVAL, NULL, local_name, -1, "host state '%s': the pointer is NULL", local_name);
	if (*local_name && ckpt__object_edge(obj, local_name))
		return ckpt__fail(CKPT_EINVAL, NULL, local_name, -1,
			"host state '%s': the object already has a child of that name", local_name);
	ckpt_variable *v;
	CKPT_TRY(ckpt__variable_new_host(&v, local_name, dt, shape, ptr));
	ckpt_object *node;
	int rc = ckpt__var_node_new(&node, v, 1);
	if (rc < 0) {
		ckpt_variable_free(v);
		return rc;
	}
	rc = ckpt_object_add_child(obj, local_name, node); /* restore-on-create writes ptr here */
	ckpt_object_free(node); /* frees v too when the edge was not added */
	return rc;
}

static int check_field(const ckpt_object *obj, const ckpt_host_field *fields, size_t i)
{
	const ckpt_host_field *f = &fields[i];
	if (!f->name || !*f->name)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "host struct field %zu has no name", i);
	if (!ckpt_dtype_valid((int)f->dtype) || f->dtype == CKPT_DT_STRING)
		return ckpt__fail(CKPT_EINVAL, NULL, f->name, -1,
			"host struct field '%s': dtype %d is not a fixed-size dtype", f->name, (int)f->dtype);
	size_t es = ckpt_dtype_size(f->dtype);
	if (f->array ? (f->size == 0 || f->size % es != 0) : f->size != es)
		return ckpt__fail(CKPT_EINVAL, NULL, f->name, -1,
			"host struct field '%s' has %zu bytes: not %s of %s (%zu bytes each)", f->name, f->size,
			f->array ? "an array" : "one", ckpt_dtype_name(f->dtype), es);
	for (size_t j = 0; j < i; j++)
		if (strcmp(fields[j].name, f->name) == 0)
			return ckpt__fail(CKPT_EINVAL, NULL, f->name, -1, "host struct field '%s' is listed twice", f->name);
	if (ckpt__object_edge(obj, f->name))
		return ckpt__fail(CKPT_EINVAL, NULL, f->name, -1,
			"host struct field '%s': the object already has a child of that name", f->name);
	return CKPT_OK;
}

int ckpt_object_track_host_struct(ckpt_object *obj, void *base, const ckpt_host_field *fields, size_t nfields)
{
	if (!obj || !base || (nfields && !fields))
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_object_track_host_struct: NULL argument");
	CKPT_TRY(ckpt__check_not_replica("ckpt_object_track_host_struct"));
	for (size_t i = 0; i < nfields; i++)
		CKPT_TRY(check_field(obj, fields, i));
	for (size_t i = 0; i < nfields; i++) {
		const ckpt_host_field *f = &fields[i];
		ckpt_shape shape;
		int64_t n = (int64_t)(f->size / ckpt_dtype_size(f->dtype));
		CKPT_TRY(ckpt_shape_make(&shape, f->array ? 1 : 0, f->array ? &n : NULL));
		CKPT_TRY(ckpt_object_track_host(obj, f->name, f->dtype, &shape, (char *)base + f->offset));
	}
	return CKPT_OK;
}

static int trainer_state_rc(ckpt_object **out, ckpt_checkpoint *ck)
{
	*out = NULL;
	if (!ck)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_checkpoint_trainer_state: NULL checkpoint");
	CKPT_TRY(ckpt__check_not_replica("ckpt_checkpoint_trainer_state"));
	ckpt_object *root = ckpt_checkpoint_root(ck);
	const ckpt__edge *e = ckpt__object_edge(root, CKPT_TRAINER_STATE);
	if (e) {
		/* a variable tracked under the name would put its value, not objects, there */
		if (e->child->is_var_node)
			return ckpt__fail(CKPT_EINVAL, NULL, CKPT_TRAINER_STATE, -1,
				"the root child '" CKPT_TRAINER_STATE "' is a variable, not an object for trainer state");
		*out = e->child;
		return CKPT_OK;
	}
	return ckpt_status_of(*out = ckpt_object_new_child(root, CKPT_TRAINER_STATE));
}

ckpt_object *ckpt_checkpoint_trainer_state(ckpt_checkpoint *ck)
{
	ckpt_object *out;
	int rc = trainer_state_rc(&out, ck);
	ckpt__borrowed_status(rc, out != NULL);
	return rc == CKPT_OK ? out : NULL;
}
