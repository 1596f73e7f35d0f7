/*
 * Load: build the object tree a checkpoint describes and create every
 * variable through ckpt_strategy_current() — inside a mirrored scope this
 * recreates the loaded variables as mirrored replicas — then restore the
 * values into it with the ordinary (transactional) restore run.
 *
 * Stored node -> live object: a node whose only value is VARIABLE_VALUE and
 * which has no children becomes a variable node; other nodes become plain
 * objects carrying their values as attributes. Optimizer slot references
 * become slots created through ckpt__slot_create (same strategy check as
 * ckpt_optimizer_create_slot). TF1 name-based files (no object graph) load
 * as a flat tree: one root child per stored key.
 */
#include <string.h>
#include "checkpoint/checkpoint_internal.h"
#include "model/variable_internal.h"

/*
 * Sync-on-read where the file (saved_model.pb) or a sync rule says so
 * (ckpt_var_info.sync, set by the reader). Strings cannot be sync-on-read;
 * SUM / MEAN need float32/64 or int32/64 (variable.h), other dtypes keep
 * one value with ONLY_FIRST_REPLICA, as does an ON_READ variable stored
 * without an aggregation.
 */
static void stored_sync(ckpt_variable_options *vo, const ckpt__value *v)
{
	if (v->sync != CKPT_SYNC_ON_READ || v->dtype == CKPT_DT_STRING)
		return;
	vo->sync = CKPT_SYNC_ON_READ;
	vo->aggregation = v->aggregation;
	ckpt_dtype dt = v->dtype;
	int summable = dt == CKPT_DT_FLOAT || dt == CKPT_DT_DOUBLE || dt == CKPT_DT_INT32 || dt == CKPT_DT_INT64;
	if (vo->aggregation == CKPT_AGG_NONE || (!summable && vo->aggregation != CKPT_AGG_ONLY_FIRST_REPLICA))
		vo->aggregation = CKPT_AGG_ONLY_FIRST_REPLICA;
}

/* Options for the variable of stored value v: the load_variable hook, and its value as initial value. */
static int var_options(ckpt_variable_options *vo, const ckpt__value *v, const ckpt_checkpoint_options *o)
{
	*vo = (ckpt_variable_options)CKPT_VARIABLE_OPTIONS_INIT;
	stored_sync(vo, v);
	if (o->load_variable) {
		ckpt_var_info vi = { 0 };
		vi.name = v->key;
		vi.dtype = v->dtype;
		ckpt__cshape_expand(&v->shape, &vi.shape);
		vi.nbytes = v->t ? v->t->nbytes : 0;
		vi.role = v->role;
		vi.shard = -1;
		vi.offset = -1;
		vi.sync = v->sync;
		vi.aggregation = v->aggregation;
		vi.sync_source = v->sync_source;
		CKPT_TRY(o->load_variable(vo, v->key, &vi, o->load_ctx));
		vo->version = CKPT_VARIABLE_OPTIONS_VERSION;
	}
	/*
	 * The staged value becomes the initial value: one fan-out per variable
	 * instead of zero-fill plus assign. Not for sync-on-read, whose restore
	 * splits SUM values across replicas (the restore run assigns those).
	 */
	if (v->t && vo->sync != CKPT_SYNC_ON_READ && !vo->replica_buffers)
		vo->initial_value = v->t->data;
	return CKPT_OK;
}

/* The variable of stored value `i`. */
static int make_var(ckpt_variable **out, ckpt__session *s, size_t i, const ckpt_checkpoint_options *o)
{
	const ckpt__value *v = ckpt__session_value(s, i);
	ckpt_variable_options vo;
	CKPT_TRY(var_options(&vo, v, o));
	const char *name = v->full_name && *v->full_name ? v->full_name : v->key;
	ckpt_shape sh;
	ckpt__cshape_expand(&v->shape, &sh);
	/* no initial value: the load's restore run writes every copy (see ckpt_checkpoint_load) */
	int rc = vo.initial_value ? ckpt_variable_new(out, name, v->dtype, &sh, &vo)
		: ckpt__variable_new_unfilled(out, name, v->dtype, &sh, &vo);
	if (rc == CKPT_OK && !vo.initial_value && (rc = ckpt__session_note_unfilled(s, *out)) < 0) {
		ckpt_variable_free(*out);
		*out = NULL;
	}
	if (rc < 0)
		ckpt__error_annotate(ckpt__session_path(s), v->key);
	else if (vo.initial_value && ckpt_variable_kind(*out) != CKPT_VAR_SYNC_ON_READ)
		ckpt__session_mark_initialized(s, i);
	return rc;
}

/*
 * Every stored dtype makes a variable: string values become STRING variables
 * (plain, or mirrored inside a mirrored scope) with the stored elements as
 * initial value. A load_variable hook asking for sync-on-read strings fails
 * (variable.h: EUNSUPPORTED).
 */
static int loadable(const ckpt__value *v)
{
	return ckpt_dtype_valid((int)v->dtype);
}

static int is_var_node(const ckpt__session *s, int n)
{
	size_t a, b;
	ckpt__session_node_values(s, n, &a, &b);
	if (b - a != 1)
		return 0;
	const ckpt__value *v = ckpt__session_value(s, a);
	return !*v->suffix && strcmp(v->attr, CKPT_VARIABLE_VALUE_KEY) == 0 && loadable(v) &&
		ckpt__session_graph(s)->nodes[n].nchildren == 0;
}

/* TF wrote no full_name for the value's attribute: neither do we when the object is written again. */
static void keep_no_full_name(ckpt__attr *a, const ckpt__value *v)
{
	a->no_full_name = !(v->full_name && *v->full_name);
}

/* The loadable values of stored node n become attributes of obj (on failure, those added stay with obj). */
static int attach_values(ckpt_object *obj, ckpt__session *s, int n, const ckpt_checkpoint_options *o)
{
	size_t first, end;
	ckpt__session_node_values(s, n, &first, &end);
	for (size_t i = first; i < end; i++) {
		const ckpt__value *sv = ckpt__session_value(s, i);
		if (!loadable(sv))
			continue;
		ckpt_variable *v;
		int rc = make_var(&v, s, i, o);
		if (rc == CKPT_OK && (rc = ckpt__object_push_attr_tensor(obj, sv->attr, sv->suffix, v, 1)) < 0)
			ckpt_variable_free(v);
		else if (rc == CKPT_OK)
			keep_no_full_name(&obj->attrs[obj->nattrs - 1], sv);
		if (rc < 0)
			return rc;
	}
	return CKPT_OK;
}

/* The object for stored node n (not linked yet; one reference for the caller). */
static int make_object(ckpt_object **out, ckpt__session *s, int n, const ckpt_checkpoint_options *o)
{
	if (is_var_node(s, n)) {
		size_t first, end;
		ckpt__session_node_values(s, n, &first, &end);
		ckpt_variable *v;
		CKPT_TRY(make_var(&v, s, first, o));
		int rc = ckpt__var_node_new(out, v, 1);
		if (rc < 0)
			ckpt_variable_free(v);
		else
			keep_no_full_name(&(*out)->attrs[0], ckpt__session_value(s, first));
		return rc;
	}
	ckpt_object *obj;
	CKPT_TRY(ckpt__object_alloc(&obj));
	int rc = attach_values(obj, s, n, o);
	if (rc < 0) {
		ckpt_object_free(obj);
		return rc;
	}
	*out = obj;
	return CKPT_OK;
}

/* The live objects of a graph load, by stored node, and the breadth-first order they were made in. */
typedef struct tree_walk {
	ckpt_object **objs;  /* per node: its object (borrowed from the tree), NULL until made */
	int *queue;          /* nodes in the order they were made; qn of them */
	int *depth;          /* per node: its depth below the root */
	size_t qn;
} tree_walk;

/* Every node reachable from the root (already in the walk) made and linked, breadth first. */
static int build_children(tree_walk *w, ckpt__session *s, const ckpt_checkpoint_options *o)
{
	const ckpt_object_graph *g = ckpt__session_graph(s);
	for (size_t qi = 0; qi < w->qn; qi++) {
		int n = w->queue[qi];
		const ckpt_og_node *gn = &g->nodes[n];
		for (size_t c = 0; c < gn->nchildren; c++) {
			int cid = gn->children[c].node_id;
			const char *name = gn->children[c].local_name;
			if (ckpt__object_edge(w->objs[n], name))
				continue; /* duplicate edge name in the file: first wins */
			if (w->objs[cid]) {
				CKPT_TRY(ckpt__object_link(w->objs[n], name, w->objs[cid], 1));
				continue;
			}
			/* hostile files: bounded depth keeps paths and frees linear */
			if (w->depth[n] + 1 > CKPT_MAX_OBJECT_GRAPH_DEPTH)
				return ckpt__fail(CKPT_ELIMIT, ckpt__session_path(s), name, -1,
					"object graph node %d is deeper than %d levels", cid, CKPT_MAX_OBJECT_GRAPH_DEPTH);
			w->depth[cid] = w->depth[n] + 1;
			ckpt_object *child;
			CKPT_TRY(make_object(&child, s, cid, o));
			int rc = ckpt__object_link(w->objs[n], name, child, 0);
			ckpt_object_free(child); /* the parent holds it now (or it is freed) */
			CKPT_TRY(rc);
			w->objs[cid] = child;
			w->queue[w->qn++] = cid;
		}
	}
	return CKPT_OK;
}

/* Slot `sr` of optimizer node n, created through the primary's strategy when its primary was loaded. */
static int build_slot(tree_walk *w, ckpt__session *s, int n, const ckpt_og_slot *sr, const ckpt_checkpoint_options *o)
{
	int orig = sr->original_variable_node_id, sn = sr->slot_variable_node_id;
	ckpt_variable *prim = w->objs[orig] ? ckpt_object_node_variable(w->objs[orig]) : NULL;
	size_t first, end;
	ckpt__session_node_values(s, sn, &first, &end);
	if (!prim || w->objs[sn] || first == end)
		return CKPT_OK; /* primary not loaded, slot already placed, or no stored value */
	const ckpt__value *sv = ckpt__session_value(s, first);
	if (!loadable(sv) || sv->dtype != ckpt_variable_dtype(prim) ||
		!ckpt__cshape_equal(&sv->shape, ckpt_variable_shape(prim)))
		return CKPT_OK; /* the restore run reports it */
	ckpt_variable_options vo;
	CKPT_TRY(var_options(&vo, sv, o));
	ckpt_variable *v;
	/* no initial value: the load's restore run writes every copy, as for make_var */
	int rc = ckpt__slot_create(&v, &w->objs[sn], w->objs[n], prim, sr->slot_name, sv->full_name, &vo,
		!vo.initial_value);
	if (rc == CKPT_OK)
		keep_no_full_name(&w->objs[sn]->attrs[0], sv);
	if (rc == CKPT_OK && !vo.initial_value)
		rc = ckpt__session_note_unfilled(s, v); /* on failure the load frees the tree, the slot with it */
	if (rc == CKPT_OK && vo.initial_value && ckpt_variable_kind(v) != CKPT_VAR_SYNC_ON_READ)
		ckpt__session_mark_initialized(s, first);
	return rc;
}

static int build_graph_tree(ckpt__session *s, ckpt_object *root, const ckpt_checkpoint_options *o)
{
	const ckpt_object_graph *g = ckpt__session_graph(s);
	size_t nn = g->nnodes;
	tree_walk w = { ckpt__calloc(nn, sizeof(*w.objs)), ckpt__calloc(nn, sizeof(*w.queue)),
		ckpt__calloc(nn, sizeof(*w.depth)), 0 };
	int rc = (!w.objs || !w.queue || !w.depth) ? CKPT_ENOMEM : CKPT_OK;
	if (rc == CKPT_OK) {
		w.objs[0] = root;
		w.queue[w.qn++] = 0;
		rc = attach_values(root, s, 0, o); /* root values (rare: "/.ATTRIBUTES/x") */
	}
	if (rc == CKPT_OK)
		rc = build_children(&w, s, o);
	/* slot variables, through the primary's strategy */
	for (size_t qi = 0; qi < w.qn && rc == CKPT_OK; qi++) {
		int n = w.queue[qi];
		const ckpt_og_node *gn = &g->nodes[n];
		for (size_t k = 0; k < gn->nslots && rc == CKPT_OK; k++)
			rc = build_slot(&w, s, n, &gn->slots[k], o);
	}
	ckpt__free(w.objs);
	ckpt__free(w.queue);
	ckpt__free(w.depth);
	return rc;
}

/* Entries no attribute refers to: one root child per stored key. */
static int build_flat_tree(ckpt__session *s, ckpt_object *root, const ckpt_checkpoint_options *o)
{
	size_t first, end;
	ckpt__session_flat_values(s, &first, &end);
	for (size_t i = first; i < end; i++) {
		const ckpt__value *fv = ckpt__session_value(s, i);
		if (!loadable(fv) || ckpt__object_edge(root, fv->key))
			continue;
		ckpt_variable *v;
		CKPT_TRY(make_var(&v, s, i, o));
		ckpt_object *node;
		int rc = ckpt__var_node_new(&node, v, 1);
		if (rc < 0) {
			ckpt_variable_free(v);
			return rc;
		}
		rc = ckpt__object_link(root, fv->key, node, 0);
		ckpt_object_free(node);
		CKPT_TRY(rc);
	}
	return CKPT_OK;
}

/*
 * Variables created unfilled that the run did not assign (none expected) get
 * zeros, never stale memory. Every one of them is in the tree: a load that
 * could not link one failed (and freed it) before this.
 */
static int zero_unassigned(const ckpt__session *s, const ckpt__run *r)
{
	size_t n;
	ckpt_variable *const *unfilled = ckpt__session_unfilled(s, &n);
	for (size_t i = 0; i < n; i++)
		if (!ckpt__run_assigned(r, unfilled[i]))
			ckpt__variable_zero(unfilled[i]);
	return CKPT_OK;
}

static int load(ckpt_checkpoint **out, ckpt_restore_status **status, const char *path,
	const ckpt_checkpoint_options *o);

/* One operation (ckpt_vfs_op_begin): the state file and index the reader opens are read once. */
int ckpt_checkpoint_load(ckpt_checkpoint **out, ckpt_restore_status **status, const char *path,
	const ckpt_checkpoint_options *o)
{
	ckpt_vfs_op_begin();
	int rc = load(out, status, path, o);
	ckpt_vfs_op_end();
	return rc;
}

static int load(ckpt_checkpoint **out, ckpt_restore_status **status, const char *path,
	const ckpt_checkpoint_options *o)
{
	if (out)
		*out = NULL;
	if (status)
		*status = NULL;
	if (!out || !path)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_checkpoint_load: NULL argument");
	CKPT_TRY(ckpt__check_not_replica("ckpt_checkpoint_load"));
	ckpt_checkpoint *ck;
	CKPT_TRY(ckpt_checkpoint_new(&ck, o));
	ckpt__session *s = NULL;
	ckpt__run *r = NULL;
	int rc = ckpt__session_open(&s, path, &ck->opts);
	/*
	 * Without a load_variable hook the variables are created empty and the
	 * restore run reads the values straight into them (no staged copy of the
	 * state: half the peak memory, one pass of first-touch faults less).
	 * The hook is told each value's size and gets it as initial value, so
	 * then everything is staged first.
	 */
	if (rc == CKPT_OK && ck->opts.load_variable)
		rc = ckpt__session_stage_all(s);
	const ckpt_object_graph *g = s ? ckpt__session_graph(s) : NULL;
	if (rc == CKPT_OK)
		rc = g ? build_graph_tree(s, ck->root, &ck->opts) : CKPT_OK;
	if (rc == CKPT_OK && g) {
		/* older TF wrote no has_checkpoint_values: such a file written again keeps its graph as it was */
		int any = 0;
		for (size_t i = 0; i < g->nnodes && !any; i++)
			any = g->nodes[i].has_checkpoint_values >= 0;
		ck->graph_without_has_values = !any;
	}
	if (rc == CKPT_OK)
		rc = build_flat_tree(s, ck->root, &ck->opts);
	if (rc == CKPT_OK && (rc = ckpt__run_new(&r, s)) == CKPT_OK)
		ckpt__run_set_fresh(r);
	if (rc == CKPT_OK)
		rc = ckpt__run_match_root(r, ck->root);
	if (rc == CKPT_OK)
		rc = ckpt__run_commit(r);
	if (rc == CKPT_OK)
		rc = zero_unassigned(s, r);
	ckpt__run_discard(r);
	if (rc == CKPT_OK && status)
		rc = ckpt__restore_status_new(status, s, ck);
	ckpt__session_unref(s);
	if (rc < 0) {
		ckpt_checkpoint_free(ck);
		return rc;
	}
	*out = ck;
	return CKPT_OK;
}
