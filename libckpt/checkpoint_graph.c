/*
 * From the live object tree to TensorFlow's TrackableObjectGraph and keys,
 * as TF 2.x save_util.py / util.py serialize_slot_variables build them:
 *  - node ids in BFS order from the root, children in declaration order;
 *    a node reachable by several edges gets one id (its path is the first
 *    BFS path) and every edge is still listed;
 *  - then slot variables: per optimizer (BFS order), per slot name (order
 *    of first creation), per primary variable node in id order;
 *  - keys: "<path>/.ATTRIBUTES/<escaped attr>", slot paths
 *    "<var path>/.OPTIMIZER_SLOT/<optimizer path>/<escaped slot>".
 */
#include <stdlib.h>
#include <string.h>
#include "checkpoint_internal.h"

static char *escape_name(const char *s)
{
	size_t n = 0;
	for (const char *p = s; *p; p++)
		n += (*p == '.' || *p == '/') ? 2 : 1;
	char *d = ckpt__malloc(n + 1);
	if (!d)
		return NULL;
	char *q = d;
	for (const char *p = s; *p; p++) {
		if (*p == '.') {
			*q++ = '.';
			*q++ = '.';
		} else if (*p == '/') {
			*q++ = '.';
			*q++ = 'S';
		} else {
			*q++ = *p;
		}
	}
	*q = '\0';
	return d;
}

static char *child_path(const char *parent, const char *name)
{
	char *e = escape_name(name);
	if (!e)
		return NULL;
	if (!*parent)
		return e;
	char *p = ckpt__asprintf("%s/%s", parent, e);
	ckpt__free(e);
	return p;
}

static char *attr_key(const char *path, const char *attr)
{
	char *e = escape_name(attr);
	if (!e)
		return NULL;
	char *k = ckpt__asprintf("%s/.ATTRIBUTES/%s", path, e);
	ckpt__free(e);
	return k;
}

static const void *node_key(const ckpt_object *o)
{
	return o->is_var_node ? (const void *)o->attrs[0].var : (const void *)o;
}

void ckpt__plan_free(ckpt__plan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++)
		ckpt__free(p->nodes[i].path);
	ckpt__free(p->nodes);
	ckpt_object_graph_free(p->graph);
	memset(p, 0, sizeof(*p));
}

typedef struct builder {
	ckpt__plan *p;
	size_t cap;
	ckpt__ptrmap ids;
} builder;

static int add_node(builder *b, ckpt_object *obj, char *path, int *id)
{
	if (b->p->n >= (size_t)INT32_MAX) {
		ckpt__free(path);
		return ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "object graph has too many nodes");
	}
	if (b->p->n == b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 16;
		ckpt__plan_node *nn = ckpt__realloc(b->p->nodes, nc * sizeof(*nn));
		if (!nn) {
			ckpt__free(path);
			return CKPT_ENOMEM;
		}
		b->p->nodes = nn;
		b->cap = nc;
	}
	*id = (int)b->p->n;
	b->p->nodes[b->p->n++] = (ckpt__plan_node){ obj, path, -1, NULL, 0 };
	return ckpt__ptrmap_put(&b->ids, node_key(obj), *id);
}

static int fill_attrs(ckpt_og_node *gn, const ckpt_object *obj, const char *path)
{
	if (!obj->nattrs)
		return CKPT_OK;
	gn->attrs = ckpt__calloc(obj->nattrs, sizeof(*gn->attrs));
	if (!gn->attrs)
		return CKPT_ENOMEM;
	for (size_t i = 0; i < obj->nattrs; i++) {
		ckpt_og_attr *a = &gn->attrs[gn->nattrs++];
		a->name = ckpt__strdup(obj->attrs[i].name);
		a->full_name = ckpt__strdup(ckpt_variable_name(obj->attrs[i].var));
		a->checkpoint_key = attr_key(path, obj->attrs[i].name);
		if (!a->name || !a->full_name || !a->checkpoint_key)
			return CKPT_ENOMEM;
	}
	return CKPT_OK;
}

typedef struct slot_pick {
	int primary_id;
	const ckpt__slot *slot;
} slot_pick;

static int cmp_pick(const void *a, const void *b)
{
	const slot_pick *x = a, *y = b;
	return (x->primary_id > y->primary_id) - (x->primary_id < y->primary_id);
}

/* Append the slot nodes of optimizer node `oid`. */
static int add_slots(builder *b, int oid, size_t nbfs)
{
	ckpt_object *opt = b->p->nodes[oid].obj;
	slot_pick *picks = ckpt__calloc(opt->nslots, sizeof(*picks));
	if (!picks)
		return CKPT_ENOMEM;
	/* slot names in order of first creation (a handful: "m", "v", ...) */
	const char **names = ckpt__calloc(opt->nslots, sizeof(*names));
	size_t nnames = 0;
	int rc = names ? CKPT_OK : CKPT_ENOMEM;
	for (size_t si = 0; si < opt->nslots && rc == CKPT_OK; si++) {
		size_t k = 0;
		while (k < nnames && strcmp(names[k], opt->slots[si].name) != 0)
			k++;
		if (k == nnames)
			names[nnames++] = opt->slots[si].name;
	}
	for (size_t ni = 0; ni < nnames && rc == CKPT_OK; ni++) {
		const char *name = names[ni];
		size_t np = 0;
		for (size_t k = 0; k < opt->nslots; k++) {
			if (strcmp(opt->slots[k].name, name) != 0)
				continue;
			int pid = ckpt__ptrmap_get(&b->ids, opt->slots[k].primary);
			if (pid < 0 || (size_t)pid >= nbfs)
				continue; /* primary not tracked: TF skips its slots too */
			picks[np++] = (slot_pick){ pid, &opt->slots[k] };
		}
		qsort(picks, np, sizeof(*picks), cmp_pick);
		for (size_t k = 0; k < np && rc == CKPT_OK; k++) {
			const ckpt__slot *s = picks[k].slot;
			int sid = ckpt__ptrmap_get(&b->ids, node_key(s->node));
			if (sid < 0) {
				char *e = escape_name(s->name);
				char *path = e ? ckpt__asprintf("%s/.OPTIMIZER_SLOT/%s/%s", b->p->nodes[picks[k].primary_id].path,
					b->p->nodes[oid].path, e) : NULL;
				ckpt__free(e);
				if (!path) {
					rc = CKPT_ENOMEM;
					break;
				}
				rc = add_node(b, s->node, path, &sid);
				if (rc < 0)
					break;
				b->p->nodes[sid].slot_of = picks[k].primary_id;
				b->p->nodes[sid].slot = s;
			}
			ckpt_og_node *gn = &b->p->graph->nodes[oid];
			ckpt_og_slot *ns = ckpt__realloc(gn->slots, (gn->nslots + 1) * sizeof(*ns));
			if (!ns) {
				rc = CKPT_ENOMEM;
				break;
			}
			gn->slots = ns;
			ckpt_og_slot *r = &gn->slots[gn->nslots++];
			r->original_variable_node_id = picks[k].primary_id;
			r->slot_variable_node_id = sid;
			if (!(r->slot_name = ckpt__strdup(s->name)))
				rc = CKPT_ENOMEM;
		}
	}
	ckpt__free(picks);
	ckpt__free(names);
	return rc;
}

static int build(builder *b, ckpt_object *root)
{
	ckpt__plan *p = b->p;
	char *rp = ckpt__strdup("");
	if (!rp)
		return CKPT_ENOMEM;
	int id;
	CKPT_TRY(add_node(b, root, rp, &id));
	/* BFS: ids first (the graph arrays are sized once the count is known) */
	for (size_t i = 0; i < p->n; i++) {
		ckpt_object *o = p->nodes[i].obj;
		for (size_t e = 0; e < o->nedges; e++) {
			ckpt_object *c = o->edges[e].child;
			if (ckpt__ptrmap_get(&b->ids, node_key(c)) >= 0)
				continue;
			if (p->nodes[i].depth + 1 > CKPT_MAX_OBJECT_GRAPH_DEPTH)
				return ckpt__fail(CKPT_ELIMIT, NULL, o->edges[e].name, -1,
					"object tree deeper than %d levels (at '%s')", CKPT_MAX_OBJECT_GRAPH_DEPTH, p->nodes[i].path);
			char *path = child_path(p->nodes[i].path, o->edges[e].name);
			if (!path)
				return CKPT_ENOMEM;
			CKPT_TRY(add_node(b, c, path, &id));
			p->nodes[id].depth = p->nodes[i].depth + 1;
		}
	}
	size_t nbfs = p->n;
	size_t nslots = 0;
	for (size_t i = 0; i < nbfs; i++)
		nslots += p->nodes[i].obj->nslots;
	p->graph = ckpt__calloc(1, sizeof(*p->graph));
	if (!p->graph)
		return CKPT_ENOMEM;
	p->graph->nodes = ckpt__calloc(nbfs + nslots, sizeof(ckpt_og_node));
	if (!p->graph->nodes)
		return CKPT_ENOMEM;
	p->graph->nnodes = nbfs;
	for (size_t i = 0; i < nbfs; i++) {
		ckpt_og_node *gn = &p->graph->nodes[i];
		gn->has_checkpoint_values = -1;
		ckpt_object *o = p->nodes[i].obj;
		if (o->nedges) {
			gn->children = ckpt__calloc(o->nedges, sizeof(*gn->children));
			if (!gn->children)
				return CKPT_ENOMEM;
			for (size_t e = 0; e < o->nedges; e++) {
				ckpt_og_child *c = &gn->children[gn->nchildren++];
				c->node_id = ckpt__ptrmap_get(&b->ids, node_key(o->edges[e].child));
				if (!(c->local_name = ckpt__strdup(o->edges[e].name)))
					return CKPT_ENOMEM;
			}
		}
		CKPT_TRY(fill_attrs(gn, o, p->nodes[i].path));
	}
	for (size_t i = 0; i < nbfs; i++) {
		if (!p->nodes[i].obj->nslots)
			continue;
		size_t before = p->n;
		CKPT_TRY(add_slots(b, (int)i, nbfs));
		for (size_t k = before; k < p->n; k++) {
			ckpt_og_node *gn = &p->graph->nodes[k];
			gn->has_checkpoint_values = -1;
			p->graph->nnodes = k + 1;
			CKPT_TRY(fill_attrs(gn, p->nodes[k].obj, p->nodes[k].path));
		}
	}
	return CKPT_OK;
}

int ckpt__plan_build(ckpt__plan *p, ckpt_object *root)
{
	memset(p, 0, sizeof(*p));
	builder b = { p, 0, { 0 } };
	int rc = build(&b, root);
	ckpt__ptrmap_free(&b.ids);
	if (rc < 0)
		ckpt__plan_free(p);
	return rc;
}

int ckpt_checkpoint_object_graph(ckpt_object_graph **out, ckpt_checkpoint *ck)
{
	if (!out || !ck)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_checkpoint_object_graph: NULL argument");
	*out = NULL;
	ckpt__plan p;
	CKPT_TRY(ckpt__plan_build(&p, ck->root));
	*out = p.graph;
	p.graph = NULL;
	ckpt__plan_free(&p);
	return CKPT_OK;
}

/* ---- enumeration ---- */

struct ckpt_tracked_list {
	size_t n;
	ckpt_tracked_variable *v;
	char **strings;      /* keys and paths owned by the list */
	size_t nstrings;
};

int ckpt_checkpoint_variables(ckpt_tracked_list **out, ckpt_checkpoint *ck)
{
	if (!out || !ck)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_checkpoint_variables: NULL argument");
	*out = NULL;
	ckpt__plan p;
	CKPT_TRY(ckpt__plan_build(&p, ck->root));
	size_t total = 0;
	for (size_t i = 0; i < p.n; i++)
		total += p.nodes[i].obj->nattrs;
	ckpt_tracked_list *l = ckpt__calloc(1, sizeof(*l));
	int rc = CKPT_ENOMEM;
	if (!l)
		goto done;
	l->v = ckpt__calloc(total ? total : 1, sizeof(*l->v));
	l->strings = ckpt__calloc(total * 2 + 1, sizeof(char *));
	if (!l->v || !l->strings)
		goto done;
	for (size_t i = 0; i < p.n; i++) {
		const ckpt_og_node *gn = &p.graph->nodes[i];
		ckpt_object *o = p.nodes[i].obj;
		for (size_t a = 0; a < o->nattrs; a++) {
			ckpt_tracked_variable *t = &l->v[l->n++];
			char *key = ckpt__strdup(gn->attrs[a].checkpoint_key);
			char *path = o->is_var_node ? ckpt__strdup(p.nodes[i].path) : ckpt__strdup(key);
			if (key)
				l->strings[l->nstrings++] = key;
			if (path)
				l->strings[l->nstrings++] = path;
			if (!key || !path)
				goto done;
			t->key = key;
			t->path = path;
			t->variable = o->attrs[a].var;
			t->full_name = ckpt_variable_name(t->variable);
			t->source_key = o->source_key;
			t->node_id = (int)i;
			if (p.nodes[i].slot) {
				t->slot_name = p.nodes[i].slot->name;
				t->primary = p.nodes[i].slot->primary;
			}
		}
	}
	rc = CKPT_OK;
	*out = l;
	l = NULL;
done:
	ckpt_tracked_list_free(l);
	ckpt__plan_free(&p);
	return rc;
}

size_t ckpt_tracked_list_count(const ckpt_tracked_list *l)
{
	return l ? l->n : 0;
}

const ckpt_tracked_variable *ckpt_tracked_list_get(const ckpt_tracked_list *l, size_t i)
{
	return l && i < l->n ? &l->v[i] : NULL;
}

void ckpt_tracked_list_free(ckpt_tracked_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->nstrings; i++)
		ckpt__free(l->strings[i]);
	ckpt__free(l->strings);
	ckpt__free(l->v);
	ckpt__free(l);
}

int ckpt_checkpoint_find_variable(ckpt_variable **out, ckpt_checkpoint *ck, const char *path)
{
	if (!out || !ck || !path)
		return ckpt__fail(CKPT_EINVAL, NULL, path, -1, "ckpt_checkpoint_find_variable: NULL argument");
	*out = NULL;
	ckpt_tracked_list *l;
	CKPT_TRY(ckpt_checkpoint_variables(&l, ck));
	ckpt_variable *found = NULL;
	for (int pass = 0; pass < 2 && !found; pass++) {
		for (size_t i = 0; i < l->n && !found; i++) {
			const ckpt_tracked_variable *t = &l->v[i];
			if (pass == 0 && (strcmp(t->path, path) == 0 || strcmp(t->key, path) == 0 ||
				(t->source_key && strcmp(t->source_key, path) == 0)))
				found = t->variable;
			if (pass == 1 && strcmp(t->full_name, path) == 0)
				found = t->variable;
		}
	}
	ckpt_tracked_list_free(l);
	if (!found)
		return ckpt__fail(CKPT_ENOTFOUND, NULL, path, -1,
			"no tracked variable with object path, key or stored name '%s'", path);
	*out = found;
	return CKPT_OK;
}
