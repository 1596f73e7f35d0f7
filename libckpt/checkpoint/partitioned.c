/*
 * Partitioned variables (ckpt/partitioned.h): the split, the owner rule,
 * tracking by a checkpoint. Their write and restore: partitioned_io.c.
 */
#include <stdio.h>
#include <string.h>
#include "partitioned_internal.h"
#include "model/strategy_impl.h"
#include "model/variable_internal.h"
#include "reader/format_registry.h"

ckpt_strategy *ckpt__partitioned_strategy(const ckpt_partitioned *p)
{
	return p->strategy;
}

static int check_new(const char *name, ckpt_dtype dt, const ckpt_shape *shape, int num_parts,
	const ckpt_variable_options *o)
{
	if (!name || !*name || strlen(name) > CKPT_MAX_NAME_LEN || !shape)
		return ckpt__fail(CKPT_EINVAL, NULL, name, -1, "ckpt_partitioned_new: bad name or NULL shape");
	if (shape->rank < 1 || shape->rank > CKPT_MAX_RANK || shape->dims[0] < 1)
		return ckpt__fail(CKPT_EINVAL, NULL, name, -1,
			"partitioned variable '%s' needs rank >= 1 and at least one row to split (rank %d)", name, shape->rank);
	if (num_parts < 1)
		return ckpt__fail(CKPT_EINVAL, NULL, name, -1, "partitioned variable '%s': %d parts (want >= 1)", name,
			num_parts);
	if (!ckpt_dtype_valid((int)dt) || dt == CKPT_DT_STRING)
		return ckpt__fail(CKPT_EINVAL, NULL, name, -1, "partitioned variable '%s': dtype %s is not supported "
			"(fixed-size dtypes only)", name, ckpt_dtype_name(dt));
	if (o && (o->version != CKPT_VARIABLE_OPTIONS_VERSION || o->sync == CKPT_SYNC_ON_READ || o->replica_buffers))
		return ckpt__fail(CKPT_EINVAL, NULL, name, -1, "partitioned variable '%s': options must be version %d, "
			"not sync-on-read, without replica_buffers", name, CKPT_VARIABLE_OPTIONS_VERSION);
	return CKPT_OK;
}

static int create_parts(ckpt_partitioned *p, const ckpt_variable_options *o)
{
	uint64_t rowbytes;
	ckpt_shape row = p->shape;
	row.dims[0] = 1;
	CKPT_TRY(ckpt_shape_nbytes(&rowbytes, &row, p->dtype));
	int collective = ckpt__strategy_is_collective(p->strategy);
	for (int i = 0; i < p->nparts; i++) {
		if (i % p->workers != p->rank)
			continue;
		ckpt_shape sh = p->shape;
		sh.dims[0] = p->rows[i];
		ckpt_variable_options po = CKPT_VARIABLE_OPTIONS_INIT;
		if (o) {
			po.trainable = o->trainable;
			po.sync = o->sync;
			if (o->initial_value)
				po.initial_value = (const unsigned char *)o->initial_value + (uint64_t)p->row0[i] * rowbytes;
		}
		char *pn = ckpt__asprintf("%s/part_%d", p->name, i);
		if (!pn)
			return CKPT_ENOMEM;
		/* a multi-worker part lives on its owner only: outside the collective creation */
		int rc = collective ? ckpt__variable_new_part(&p->part[i], pn, p->dtype, &sh, &po)
			: ckpt_variable_new(&p->part[i], pn, p->dtype, &sh, &po);
		ckpt__free(pn);
		CKPT_TRY(rc);
	}
	return CKPT_OK;
}

int ckpt_partitioned_new(ckpt_partitioned **out, const char *name, ckpt_dtype dt, const ckpt_shape *shape,
	int num_parts, const ckpt_variable_options *o)
{
	if (!out)
		return ckpt__fail(CKPT_EINVAL, NULL, name, -1, "ckpt_partitioned_new: NULL out");
	*out = NULL;
	if (ckpt_replica_current())
		return ckpt__fail(CKPT_ESCOPE, NULL, name, -1, "partitioned variable '%s' created in replica context: "
			"create it outside ckpt_strategy_run, inside the strategy's scope", name ? name : "");
	ckpt_strategy *s = ckpt_strategy_current();
	int rc = check_new(name, dt, shape, num_parts, o);
	ckpt_partitioned *p = rc == CKPT_OK ? ckpt__calloc(1, sizeof(*p)) : NULL;
	if (rc == CKPT_OK && !p)
		rc = CKPT_ENOMEM;
	if (rc == CKPT_OK) {
		p->strategy = s;
		ckpt__strategy_retain(s, CKPT__REF_VARIABLE);
		p->dtype = dt;
		p->shape = *shape;
		int local = ckpt__strategy_local_replicas(s);
		p->workers = ckpt_strategy_num_replicas(s) / local;
		p->rank = ckpt__strategy_replica_offset(s) / local;
		/* fixed_size_partitioner: at most one part per row */
		p->nparts = (int64_t)num_parts > shape->dims[0] ? (int)shape->dims[0] : num_parts;
		p->name = ckpt__strdup(name);
		p->row0 = ckpt__calloc((size_t)p->nparts, sizeof(int64_t));
		p->rows = ckpt__calloc((size_t)p->nparts, sizeof(int64_t));
		p->part = ckpt__calloc((size_t)p->nparts, sizeof(*p->part));
		rc = p->name && p->row0 && p->rows && p->part ? CKPT_OK : CKPT_ENOMEM;
	}
	if (rc == CKPT_OK) {
		/* R / P rows each, the first R % P parts one more (create_partitioned_variables) */
		int64_t R = shape->dims[0], q = R / p->nparts, rem = R % p->nparts, at = 0;
		for (int i = 0; i < p->nparts; i++) {
			p->row0[i] = at;
			p->rows[i] = q + (i < rem ? 1 : 0);
			at += p->rows[i];
		}
		rc = create_parts(p, o);
	}
	/* every worker's outcome: one that failed fails them all */
	if (ckpt__strategy_is_collective(s))
		rc = ckpt__strategy_ops_of(s)->agree(s, rc);
	if (rc < 0) {
		ckpt_partitioned_free(p);
		return rc;
	}
	*out = p;
	return CKPT_OK;
}

void ckpt_partitioned_free(ckpt_partitioned *p)
{
	if (!p)
		return;
	for (int i = 0; p->part && i < p->nparts; i++)
		ckpt_variable_free(p->part[i]);
	if (p->strategy)
		ckpt__strategy_release(p->strategy, CKPT__REF_VARIABLE);
	ckpt__free(p->part);
	ckpt__free(p->row0);
	ckpt__free(p->rows);
	ckpt__free(p->name);
	ckpt__free(p);
}

const char *ckpt_partitioned_name(const ckpt_partitioned *p) { return p ? p->name : NULL; }
ckpt_dtype ckpt_partitioned_dtype(const ckpt_partitioned *p) { return p ? p->dtype : CKPT_DT_INVALID; }
const ckpt_shape *ckpt_partitioned_shape(const ckpt_partitioned *p) { return p ? &p->shape : NULL; }
int ckpt_partitioned_num_parts(const ckpt_partitioned *p) { return p ? p->nparts : 0; }

int ckpt_partitioned_part_rows(int64_t *first, int64_t *rows, const ckpt_partitioned *p, int i)
{
	if (!p || i < 0 || i >= p->nparts)
		return ckpt__fail(CKPT_EINVAL, NULL, p ? p->name : NULL, -1, "part %d out of range [0, %d)", i,
			p ? p->nparts : 0);
	if (first)
		*first = p->row0[i];
	if (rows)
		*rows = p->rows[i];
	return CKPT_OK;
}

int ckpt_partitioned_owner(const ckpt_partitioned *p, int i)
{
	return p && i >= 0 && i < p->nparts ? i % p->workers : -1;
}

ckpt_variable *ckpt_partitioned_part(const ckpt_partitioned *p, int i)
{
	return p && i >= 0 && i < p->nparts ? p->part[i] : NULL;
}

int ckpt_checkpoint_track_partitioned(ckpt_checkpoint *ck, ckpt_partitioned *p)
{
	if (!ck || !p)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_checkpoint_track_partitioned: NULL argument");
	for (size_t i = 0; i < ck->nparted; i++)
		if (strcmp(ck->parted[i]->name, p->name) == 0)
			return ckpt__fail(CKPT_EINVAL, NULL, p->name, -1,
				"the checkpoint already tracks a partitioned variable named '%s'", p->name);
	if (ck->nparted == ck->capparted) {
		size_t nc = ck->capparted ? ck->capparted * 2 : 4;
		ckpt_partitioned **np = ckpt__realloc(ck->parted, nc * sizeof(*np));
		if (!np)
			return CKPT_ENOMEM;
		ck->parted = np;
		ck->capparted = nc;
	}
	ck->parted[ck->nparted++] = p;
	return CKPT_OK;
}

int ckpt_checkpoint_untrack_partitioned(ckpt_checkpoint *ck, ckpt_partitioned *p)
{
	for (size_t i = 0; ck && i < ck->nparted; i++)
		if (ck->parted[i] == p) {
			memmove(ck->parted + i, ck->parted + i + 1, (ck->nparted - i - 1) * sizeof(*ck->parted));
			ck->nparted--;
			return CKPT_OK;
		}
	return ckpt__fail(CKPT_ENOTFOUND, NULL, p ? p->name : NULL, -1, "the checkpoint does not track it");
}

int ckpt_object_track_partitioned(ckpt_object *obj, const char *local_name, ckpt_partitioned *p)
{
	if (!obj || !p)
		return ckpt__fail(CKPT_EINVAL, NULL, local_name, -1, "ckpt_object_track_partitioned: NULL argument");
	ckpt_object *node;
	CKPT_TRY(ckpt__object_alloc(&node));
	node->parted = p;
	int rc = ckpt_object_add_child(obj, local_name, node);
	ckpt_object_free(node);
	return rc;
}
