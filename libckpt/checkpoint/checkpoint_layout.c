/*
 * Variables and slots laid out in one caller-owned buffer (ckpt/layout.h):
 * the whole table is checked first — names, dtypes, bounds, alignment, no
 * overlap between fields nor with memory other variables wrap — then each
 * field is created as a variable (or slot) wrapping base + offset, exactly
 * as replica_buffers would.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "checkpoint_internal.h"
#include "model/strategy_impl.h"
#include "model/wrap_registry.h"
#include "ckpt/layout.h"

typedef struct span {
	size_t offset;
	uint64_t nbytes;
	size_t field;
} span;

static int by_offset(const void *a, const void *b)
{
	const span *x = a, *y = b;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* One field on its own: name, dtype, shape, bounds, alignment. */
static int check_field(uint64_t *nbytes, const ckpt_buffer_field *f, size_t i, const char *base, size_t size)
{
	if (!f->name || !*f->name)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "buffer field %zu has no name", i);
	if (!ckpt_dtype_valid((int)f->dtype) || f->dtype == CKPT_DT_STRING)
		return ckpt__fail(CKPT_EINVAL, NULL, f->name, -1, "buffer field '%s': dtype %d is not a fixed-size dtype",
			f->name, (int)f->dtype);
	CKPT_TRY(ckpt_shape_nbytes(nbytes, &f->shape, f->dtype));
	if (f->offset > size || *nbytes > size - f->offset)
		return ckpt__fail(CKPT_EINVAL, NULL, f->name, -1, "buffer field '%s': bytes [%zu, %llu) lie outside the "
			"buffer of %zu bytes", f->name, f->offset, (unsigned long long)(f->offset + *nbytes), size);
	size_t align = ckpt_dtype_size(f->dtype);
	if (align > 1 && ((uintptr_t)base + f->offset) % align != 0)
		return ckpt__fail(CKPT_EINVAL, NULL, f->name, -1, "buffer field '%s' at offset %zu (address %p) is not "
			"aligned to its %s elements (%zu bytes)", f->name, f->offset, (void *)(base + f->offset),
			ckpt_dtype_name(f->dtype), align);
	return CKPT_OK;
}

/*
 * The whole table, before anything is created. `obj` non-NULL: the names
 * become its children, so they must be free there. nbytes[i] gets field i's size.
 */
static int check_table(uint64_t *nbytes, const ckpt_object *obj, void *base, size_t size,
	const ckpt_buffer_field *fields, size_t n)
{
	if (!base || !fields || n == 0)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "buffer variables: NULL buffer or empty table");
	CKPT_TRY(ckpt__check_not_replica("ckpt_object_add_buffer_variables"));
	ckpt_strategy *s = ckpt_strategy_current();
	if (ckpt__strategy_local_replicas(s) > 1)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "buffer variables hold one copy, but %s has %d replicas "
			"here: give each replica its buffer with ckpt_variable_options.replica_buffers",
			ckpt_strategy_describe(s), ckpt__strategy_local_replicas(s));
	for (size_t i = 0; i < n; i++) {
		CKPT_TRY(check_field(&nbytes[i], &fields[i], i, base, size));
		for (size_t j = 0; j < i; j++)
			if (strcmp(fields[i].name, fields[j].name) == 0)
				return ckpt__fail(CKPT_EINVAL, NULL, fields[i].name, -1, "buffer fields %zu and %zu are both "
					"named '%s'", j, i, fields[i].name);
		if (obj && ckpt__object_edge(obj, fields[i].name))
			return ckpt__fail(CKPT_EINVAL, NULL, fields[i].name, -1, "buffer field '%s': the object already has "
				"a child of that name", fields[i].name);
		CKPT_TRY(ckpt__wrap_check((char *)base + fields[i].offset, nbytes[i], fields[i].name, "its buffer field"));
	}
	span *sp = ckpt__malloc(n * sizeof(*sp));
	if (!sp)
		return CKPT_ENOMEM;
	for (size_t i = 0; i < n; i++)
		sp[i] = (span){ fields[i].offset, nbytes[i], i };
	qsort(sp, n, sizeof(*sp), by_offset);
	int rc = CKPT_OK;
	/* sorted by offset, a field overlaps another only if it overlaps the next non-empty one's start */
	size_t prev = SIZE_MAX;
	for (size_t k = 0; k < n && rc == CKPT_OK; k++) {
		if (sp[k].nbytes == 0)
			continue;
		if (prev != SIZE_MAX && sp[prev].offset + sp[prev].nbytes > sp[k].offset)
			rc = ckpt__fail(CKPT_EINVAL, NULL, fields[sp[k].field].name, -1, "buffer fields '%s' [%zu, %llu) and "
				"'%s' [%zu, %llu) overlap: each tensor needs its own bytes", fields[sp[prev].field].name,
				sp[prev].offset, (unsigned long long)(sp[prev].offset + sp[prev].nbytes),
				fields[sp[k].field].name, sp[k].offset, (unsigned long long)(sp[k].offset + sp[k].nbytes));
		prev = k;
	}
	ckpt__free(sp);
	return rc;
}

int ckpt_object_add_buffer_variables(ckpt_object *obj, void *base, size_t size, const ckpt_buffer_field *fields,
	size_t n)
{
	if (!obj)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_object_add_buffer_variables: NULL object");
	uint64_t *nbytes = ckpt__malloc((n ? n : 1) * sizeof(*nbytes));
	if (!nbytes)
		return CKPT_ENOMEM;
	int rc = check_table(nbytes, obj, base, size, fields, n);
	ckpt__free(nbytes);
	for (size_t i = 0; i < n && rc == CKPT_OK; i++) {
		ckpt_variable_options o = CKPT_VARIABLE_OPTIONS_INIT;
		void *buf[1] = { (char *)base + fields[i].offset };
		o.replica_buffers = buf;
		rc = ckpt_status_of(ckpt_object_add_variable(obj, fields[i].name, fields[i].name, fields[i].dtype,
			&fields[i].shape, &o));
	}
	return rc;
}

/* The primaries of a slot table: owner's variables named by the fields, each of the field's dtype and shape. */
static int check_primaries(const ckpt_object *owner, const char *slot_name, const ckpt_buffer_field *fields, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const ckpt__edge *e = fields[i].name ? ckpt__object_edge(owner, fields[i].name) : NULL;
		const ckpt_variable *p = e && e->child->is_var_node ? ckpt_object_node_variable(e->child) : NULL;
		if (!p)
			return ckpt__fail(CKPT_ENOTFOUND, NULL, fields[i].name, -1, "buffer slot '%s' of field %zu: the owner "
				"has no variable '%s'", slot_name, i, fields[i].name ? fields[i].name : "(null)");
		if (ckpt_variable_dtype(p) != fields[i].dtype || !ckpt_shape_equal(ckpt_variable_shape(p), &fields[i].shape))
			return ckpt__fail(CKPT_EMISMATCH, NULL, fields[i].name, -1, "buffer slot '%s' of '%s': the field's "
				"dtype and shape are not its variable's", slot_name, fields[i].name);
	}
	return CKPT_OK;
}

int ckpt_optimizer_create_buffer_slots(ckpt_object *opt, ckpt_object *owner, const char *slot_name, void *base,
	size_t size, const ckpt_buffer_field *fields, size_t n)
{
	if (!opt || !owner || !slot_name || !*slot_name)
		return ckpt__fail(CKPT_EINVAL, NULL, slot_name, -1, "ckpt_optimizer_create_buffer_slots: NULL argument");
	uint64_t *nbytes = ckpt__malloc((n ? n : 1) * sizeof(*nbytes));
	if (!nbytes)
		return CKPT_ENOMEM;
	int rc = check_table(nbytes, NULL, base, size, fields, n);
	ckpt__free(nbytes);
	if (rc == CKPT_OK)
		rc = check_primaries(owner, slot_name, fields, n);
	for (size_t i = 0; i < n && rc == CKPT_OK; i++) {
		ckpt_variable_options o = CKPT_VARIABLE_OPTIONS_INIT;
		void *buf[1] = { (char *)base + fields[i].offset };
		o.replica_buffers = buf;
		ckpt_variable *p = ckpt_object_node_variable(ckpt__object_edge(owner, fields[i].name)->child);
		rc = ckpt_status_of(ckpt_optimizer_create_slot(opt, p, slot_name, &o));
	}
	return rc;
}
