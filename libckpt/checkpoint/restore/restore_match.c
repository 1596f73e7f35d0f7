/*
 * Restore, phase 1 (see checkpoint_restore.c): match the stored object graph
 * against the live tree, or stored names against live variables for
 * name-based files, into a plan (restore_plan.h): which value goes to which
 * variable, and which children / slots wait for restore-on-create. Nothing
 * live is changed here.
 */
#include <stdlib.h>
#include <string.h>
#include "restore_plan.h"
#include "checkpoint/partitioned_internal.h"
#include "model/strategy_impl.h"
#include "model/variable_internal.h"
#include "device/device_stream.h"

#define GROW(arr, cap, n) ckpt__array_grow((void **)&(arr), &(cap), (n), sizeof(*(arr)), 8)

typedef struct pair {
	int node;
	ckpt_object *obj;
} pair;

void ckpt__run_set_fresh(ckpt__run *r)
{
	r->fresh = 1;
}

void ckpt__run_set_collective(ckpt__run *r, ckpt_strategy *cs)
{
	r->cs = cs;
}

int ckpt__run_assigned(const ckpt__run *r, const ckpt_variable *var)
{
	return ckpt__ptrmap_get(&r->vars, var) >= 0;
}


static void run_free(ckpt__run *r)
{
	if (!r)
		return;
	ckpt__free(r->asg);
	ckpt__free(r->pc);
	ckpt__free(r->ps);
	ckpt__free(r->visited);
	ckpt__free(r->bound);
	ckpt__ptrmap_free(&r->vars);
	ckpt__free(r);
}

int ckpt__run_new(ckpt__run **out, ckpt__session *s)
{
	*out = NULL;
	ckpt__run *r = ckpt__calloc(1, sizeof(*r));
	if (!r)
		return CKPT_ENOMEM;
	r->s = s;
	const ckpt_object_graph *g = ckpt__session_graph(s);
	size_t nn = g ? g->nnodes : 0;
	r->visited = ckpt__calloc(nn ? nn : 1, 1);
	r->bound = ckpt__calloc(nn ? nn : 1, sizeof(*r->bound));
	if (!r->visited || !r->bound) {
		run_free(r);
		return CKPT_ENOMEM;
	}
	*out = r;
	return CKPT_OK;
}


static int check_value(const ckpt__session *s, const ckpt__value *v, const ckpt_variable *var)
{
	const ckpt_shape *ls = ckpt_variable_shape(var);
	if (v->dtype == ckpt_variable_dtype(var) && ckpt__cshape_equal(&v->shape, ls))
		return CKPT_OK;
	char a[256], b[256];
	ckpt_shape sh;
	ckpt__cshape_expand(&v->shape, &sh);
	ckpt_shape_format(&sh, a, sizeof(a));
	ckpt_shape_format(ls, b, sizeof(b));
	return ckpt__fail(CKPT_EMISMATCH, ckpt__session_path(s), ckpt_variable_name(var), -1,
		"cannot restore variable '%s' from '%s': the checkpoint has %s %s, the live variable is %s %s; "
		"nothing was restored",
		ckpt_variable_name(var), v->key, ckpt_dtype_name(v->dtype), a, ckpt_dtype_name(ckpt_variable_dtype(var)), b);
}

static int add_assignment(ckpt__run *r, size_t val, ckpt_variable *var, ckpt_object *owner)
{
	if (ckpt__ptrmap_get(&r->vars, var) >= 0)
		return CKPT_OK; /* one value per live variable per run: the first match wins */
	CKPT_TRY(check_value(r->s, ckpt__session_value(r->s, val), var));
	CKPT_TRY(ckpt__ptrmap_put(&r->vars, var, 1));
	CKPT_TRY(GROW(r->asg, r->capasg, r->nasg));
	r->asg[r->nasg++] = (assignment){ val, var, owner };
	return CKPT_OK;
}

/* Values of stored node `n` into the attributes of `obj`. */
static int match_values(ckpt__run *r, int n, ckpt_object *obj)
{
	const ckpt__session *s = r->s;
	size_t first, end;
	ckpt__session_node_values(s, n, &first, &end);
	for (size_t i = first; i < end; i++) {
		const ckpt__value *v = ckpt__session_value(s, i);
		if (v->consumed)
			continue;
		for (size_t a = 0; a < obj->nattrs; a++) {
			const char *sfx = obj->attrs[a].suffix ? obj->attrs[a].suffix : "";
			if (strcmp(obj->attrs[a].name, v->attr) != 0 || strcmp(sfx, v->suffix) != 0)
				continue;
			CKPT_TRY(add_assignment(r, i, obj->attrs[a].var, obj));
			if (!*v->suffix && strcmp(v->attr, CKPT_VARIABLE_VALUE_KEY) == 0)
				r->bound[n] = obj->attrs[a].var;
			break;
		}
	}
	return CKPT_OK;
}

int ckpt__run_match_node(ckpt__run *r, int start, ckpt_object *obj)
{
	const ckpt__session *s = r->s;
	const ckpt_object_graph *g = ckpt__session_graph(s);
	size_t qn = 0, qcap = 0, qi = 0;
	pair *q = NULL;
	size_t nc = 0, capc = 0;
	pair *cands = NULL;   /* (optimizer node, live optimizer) with slot refs */
	int rc = GROW(q, qcap, qn);
	if (rc == CKPT_OK) {
		q[qn++] = (pair){ start, obj };
		r->visited[start] = 1;
	}
	while (rc == CKPT_OK && qi < qn) {
		pair p = q[qi++];
		const ckpt_og_node *gn = &g->nodes[p.node];
		rc = match_values(r, p.node, p.obj);
		for (size_t c = 0; c < gn->nchildren && rc == CKPT_OK; c++) {
			int cid = gn->children[c].node_id;
			if (r->visited[cid])
				continue;
			const ckpt__edge *e = ckpt__object_edge(p.obj, gn->children[c].local_name);
			if (e) {
				r->visited[cid] = 1;
				if ((rc = GROW(q, qcap, qn)) == CKPT_OK)
					q[qn++] = (pair){ cid, e->child };
			} else if ((rc = GROW(r->pc, r->cappc, r->npc)) == CKPT_OK) {
				char *nm = ckpt__strdup(gn->children[c].local_name);
				if (!nm)
					rc = CKPT_ENOMEM;
				else
					r->pc[r->npc++] = (pend_child){ p.obj, nm, cid };
			}
		}
		if (rc == CKPT_OK && gn->nslots && (rc = GROW(cands, capc, nc)) == CKPT_OK)
			cands[nc++] = p;
	}
	/* slots last: their primaries are bound by now */
	for (size_t k = 0; k < nc && rc == CKPT_OK; k++) {
		const ckpt_og_node *gn = &g->nodes[cands[k].node];
		ckpt_object *opt = cands[k].obj;
		for (size_t i = 0; i < gn->nslots && rc == CKPT_OK; i++) {
			const ckpt_og_slot *sr = &gn->slots[i];
			int orig = sr->original_variable_node_id, sn = sr->slot_variable_node_id;
			if (r->visited[sn])
				continue;
			const ckpt_variable *prim = r->bound[orig] ? r->bound[orig] : ckpt__session_bound_var(s, orig);
			ckpt__slot *live = prim ? ckpt__object_slot(opt, prim, sr->slot_name) : NULL;
			if (live) {
				r->visited[sn] = 1;
				rc = match_values(r, sn, live->node);
			} else if ((rc = GROW(r->ps, r->capps, r->nps)) == CKPT_OK) {
				char *nm = ckpt__strdup(sr->slot_name);
				if (!nm)
					rc = CKPT_ENOMEM;
				else
					r->ps[r->nps++] = (pend_slot){ opt, orig, sn, nm };
			}
		}
	}
	ckpt__free(q);
	ckpt__free(cands);
	return rc;
}

typedef struct named_value {
	const char *key;
	size_t val;
} named_value;

static int cmp_named(const void *a, const void *b)
{
	return strcmp(((const named_value *)a)->key, ((const named_value *)b)->key);
}

/* TF1 name-based files: match every live variable by its name (binary search over the keys). */
static int run_match_names(ckpt__run *r, ckpt_object *root)
{
	const ckpt__session *s = r->s;
	size_t first, end;
	ckpt__session_flat_values(s, &first, &end);
	size_t nflat = end - first;
	named_value *idx = ckpt__calloc(nflat ? nflat : 1, sizeof(*idx));
	if (!idx)
		return CKPT_ENOMEM;
	size_t n = 0;
	for (size_t k = first; k < end; k++) {
		const ckpt__value *v = ckpt__session_value(s, k);
		if (!v->consumed)
			idx[n++] = (named_value){ v->key, k };
	}
	qsort(idx, n, sizeof(*idx), cmp_named);
	ckpt__plan p;
	int rc = ckpt__plan_build(&p, root);
	if (rc < 0) {
		ckpt__free(idx);
		return rc;
	}
	for (size_t i = 0; i < p.n && rc == CKPT_OK; i++) {
		ckpt_object *o = p.nodes[i].obj;
		for (size_t a = 0; a < o->nattrs && rc == CKPT_OK; a++) {
			named_value want = { ckpt_variable_name(o->attrs[a].var), 0 };
			const named_value *hit = bsearch(&want, idx, n, sizeof(*idx), cmp_named);
			if (hit)
				rc = add_assignment(r, hit->val, o->attrs[a].var, o);
		}
	}
	ckpt__plan_free(&p);
	ckpt__free(idx);
	return rc;
}

int ckpt__run_match_root(ckpt__run *r, ckpt_object *root)
{
	if (ckpt__session_graph(r->s))
		CKPT_TRY(ckpt__run_match_node(r, 0, root));
	size_t first, end;
	ckpt__session_flat_values(r->s, &first, &end);
	if (first < end)
		return run_match_names(r, root);
	return CKPT_OK;
}

int ckpt__run_match_slot(ckpt__run *r, int slot_node, ckpt_object *node)
{
	r->visited[slot_node] = 1;
	return match_values(r, slot_node, node);
}

static void drop_names(ckpt__run *r)
{
	for (size_t i = 0; i < r->npc; i++)
		ckpt__free(r->pc[i].name);
	for (size_t i = 0; i < r->nps; i++)
		ckpt__free(r->ps[i].slot_name);
	r->npc = r->nps = 0;
}

void ckpt__run_discard(ckpt__run *r)
{
	if (!r)
		return;
	drop_names(r);
	run_free(r);
}

