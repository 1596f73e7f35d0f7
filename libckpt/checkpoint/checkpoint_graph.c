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

/*
 * Bump allocator for the plan: every string and array of the plan's graph
 * comes from a few large chunks, freed together (per-string mallocs were
 * most of a 10,000-variable plan). The plan's graph is therefore freed by
 * ckpt__plan_free, never by ckpt_object_graph_free.
 */
struct ckpt__arena_chunk {
	struct ckpt__arena_chunk *next;
	size_t used, cap;
	union { long double ld; void *p; uint64_t u; } data[]; /* aligned for anything stored */
};

#define ARENA_CHUNK ((size_t)64 << 10)

static void *arena_alloc(ckpt__arena *a, size_t n)
{
	size_t al = sizeof(((struct ckpt__arena_chunk *)0)->data[0]);
	if (n > SIZE_MAX / 2) {
		ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "object graph string of %zu bytes", n);
		return NULL;
	}
	n = (n + al - 1) & ~(al - 1);
	struct ckpt__arena_chunk *c = a->head;
	if (!c || c->cap - c->used < n) {
		size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
		c = ckpt__malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->next = a->head;
		c->used = 0;
		c->cap = cap;
		a->head = c;
	}
	void *p = (unsigned char *)c->data + c->used;
	c->used += n;
	return p;
}

static void *arena_calloc(ckpt__arena *a, size_t n, size_t elem)
{
	size_t bytes;
	if (__builtin_mul_overflow(n, elem, &bytes)) {
		ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "too many entries (%zu)", n);
		return NULL;
	}
	void *p = arena_alloc(a, bytes ? bytes : 1);
	if (p)
		memset(p, 0, bytes);
	return p;
}

void ckpt__arena_free(ckpt__arena *a)
{
	while (a->head) {
		struct ckpt__arena_chunk *c = a->head;
		a->head = c->next;
		ckpt__free(c);
	}
}

static size_t escaped_len(const char *s)
{
	size_t n = 0;
	for (const char *p = s; *p; p++)
		n += (*p == '.' || *p == '/') ? 2 : 1;
	return n;
}

static char *put_escaped(char *q, const char *s)
{
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
	return q;
}

static char *put_str(char *q, const char *s, size_t n)
{
	memcpy(q, s, n);
	return q + n;
}

static char *arena_strdup(ckpt__arena *a, const char *s)
{
	size_t n = strlen(s);
	char *d = arena_alloc(a, n + 1);
	if (d)
		memcpy(d, s, n + 1);
	return d;
}

/* "<parent>/<escaped name>" ("<escaped name>" under the root) */
static char *child_path(ckpt__arena *a, const char *parent, const char *name)
{
	size_t pl = strlen(parent);
	char *d = arena_alloc(a, pl + 1 + escaped_len(name) + 1);
	if (!d)
		return NULL;
	char *q = d;
	if (pl) {
		q = put_str(q, parent, pl);
		*q++ = '/';
	}
	*put_escaped(q, name) = '\0';
	return d;
}

#define ATTRS_MID "/.ATTRIBUTES/"

/* "<path>/.ATTRIBUTES/<escaped attr>" */
static char *attr_key(ckpt__arena *a, const char *path, const char *attr)
{
	size_t pl = strlen(path), ml = sizeof(ATTRS_MID) - 1;
	char *d = arena_alloc(a, pl + ml + escaped_len(attr) + 1);
	if (!d)
		return NULL;
	char *q = put_str(d, path, pl);
	q = put_str(q, ATTRS_MID, ml);
	*put_escaped(q, attr) = '\0';
	return d;
}

#define SLOT_MID "/.OPTIMIZER_SLOT/"

/* "<var path>/.OPTIMIZER_SLOT/<optimizer path>/<escaped slot>" */
static char *slot_path(ckpt__arena *a, const char *var_path, const char *opt_path, const char *slot)
{
	size_t vl = strlen(var_path), ol = strlen(opt_path), ml = sizeof(SLOT_MID) - 1;
	char *d = arena_alloc(a, vl + ml + ol + 1 + escaped_len(slot) + 1);
	if (!d)
		return NULL;
	char *q = put_str(d, var_path, vl);
	q = put_str(q, SLOT_MID, ml);
	q = put_str(q, opt_path, ol);
	*q++ = '/';
	*put_escaped(q, slot) = '\0';
	return d;
}

static const void *node_key(const ckpt_object *o)
{
	return o->is_var_node ? (const void *)o->attrs[0].var : (const void *)o;
}

void ckpt__plan_free(ckpt__plan *p)
{
	if (!p)
		return;
	ckpt__free(p->nodes);
	if (p->graph)
		ckpt__free(p->graph->nodes);
	ckpt__free(p->graph);
	ckpt__arena_free(&p->arena);
	memset(p, 0, sizeof(*p));
}

typedef struct builder {
	ckpt__plan *p;
	size_t cap;
	ckpt__ptrmap ids;
} builder;

static int add_node(builder *b, ckpt_object *obj, char *path, int *id)
{
	if (b->p->n >= (size_t)INT32_MAX)
		return ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "object graph has too many nodes");
	if (b->p->n == b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 16;
		ckpt__plan_node *nn = ckpt__realloc(b->p->nodes, nc * sizeof(*nn));
		if (!nn)
			return CKPT_ENOMEM;
		b->p->nodes = nn;
		b->cap = nc;
	}
	*id = (int)b->p->n;
	b->p->nodes[b->p->n++] = (ckpt__plan_node){ obj, path, NULL, -1, NULL, 0, NULL };
	return ckpt__ptrmap_put(&b->ids, node_key(obj), *id);
}

/* "<path>/.ATTRIBUTES/<escaped attr><suffix>": the key a multi-tensor attribute's tensor is stored under */
static char *tensor_key(ckpt__arena *a, const char *key, const char *suffix)
{
	size_t kl = strlen(key), sl = strlen(suffix);
	char *d = arena_alloc(a, kl + sl + 1);
	if (d) {
		memcpy(d, key, kl);
		memcpy(d + kl, suffix, sl + 1);
	}
	return d;
}

/*
 * Attribute and variable names are stable while the plan lives: the graph
 * points at them. The tensors of a multi-tensor attribute (same name, each
 * with a suffix) are one SerializedTensor, as TF writes a SaveableObject:
 * name "table", checkpoint_key "<path>/.ATTRIBUTES/table", no full_name
 * (TF gives one to variables only); `pn->keys` has every tensor's own key.
 */
static int fill_attrs(ckpt__arena *ar, ckpt_og_node *gn, ckpt__plan_node *pn)
{
	const ckpt_object *obj = pn->obj;
	if (obj->parted) {
		/* as TF2 writes a ShardedVariable: one VARIABLE_VALUE whose full entry lists the slices */
		if (!(gn->attrs = arena_calloc(ar, 1, sizeof(*gn->attrs))))
			return CKPT_ENOMEM;
		ckpt_og_attr *a = &gn->attrs[gn->nattrs++];
		a->name = (char *)CKPT_VARIABLE_VALUE_KEY;
		a->full_name = (char *)ckpt_partitioned_name(obj->parted);
		a->checkpoint_key = attr_key(ar, pn->path, CKPT_VARIABLE_VALUE_KEY);
		pn->parted_key = a->checkpoint_key;
		return a->checkpoint_key ? CKPT_OK : CKPT_ENOMEM;
	}
	if (!obj->nattrs)
		return CKPT_OK;
	gn->attrs = arena_calloc(ar, obj->nattrs, sizeof(*gn->attrs));
	pn->keys = arena_calloc(ar, obj->nattrs, sizeof(*pn->keys));
	if (!gn->attrs || !pn->keys)
		return CKPT_ENOMEM;
	for (size_t i = 0; i < obj->nattrs; i++) {
		const ckpt__attr *at = &obj->attrs[i];
		if (at->suffix) {
			size_t j = 0;
			while (j < i && !(obj->attrs[j].suffix && strcmp(obj->attrs[j].name, at->name) == 0))
				j++;
			if (j < i) { /* a later tensor of an attribute already listed */
				size_t k = 0;
				while (strcmp(gn->attrs[k].name, at->name) != 0)
					k++;
				pn->keys[i] = tensor_key(ar, gn->attrs[k].checkpoint_key, at->suffix);
				if (!pn->keys[i])
					return CKPT_ENOMEM;
				continue;
			}
		}
		ckpt_og_attr *a = &gn->attrs[gn->nattrs++];
		a->name = at->name;
		a->full_name = at->suffix || at->no_full_name ? "" : (char *)ckpt_variable_name(at->var);
		a->checkpoint_key = attr_key(ar, pn->path, at->name);
		if (!a->checkpoint_key)
			return CKPT_ENOMEM;
		pn->keys[i] = at->suffix ? tensor_key(ar, a->checkpoint_key, at->suffix) : a->checkpoint_key;
		if (!pn->keys[i])
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
	/* every slot is picked at most once: room for all of them */
	ckpt_og_node *gn = &b->p->graph->nodes[oid];
	gn->slots = arena_calloc(&b->p->arena, opt->nslots, sizeof(*gn->slots));
	int rc = names && gn->slots ? CKPT_OK : CKPT_ENOMEM;
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
				char *path = slot_path(&b->p->arena, b->p->nodes[picks[k].primary_id].path, b->p->nodes[oid].path,
					s->name);
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
			ckpt_og_slot *r = &gn->slots[gn->nslots++];
			r->original_variable_node_id = picks[k].primary_id;
			r->slot_variable_node_id = sid;
			r->slot_name = s->name;
		}
	}
	ckpt__free(picks);
	ckpt__free(names);
	return rc;
}

static int build(builder *b, ckpt_object *root)
{
	ckpt__plan *p = b->p;
	char *rp = arena_strdup(&p->arena, "");
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
			char *path = child_path(&p->arena, p->nodes[i].path, o->edges[e].name);
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
			gn->children = arena_calloc(&p->arena, o->nedges, sizeof(*gn->children));
			if (!gn->children)
				return CKPT_ENOMEM;
			for (size_t e = 0; e < o->nedges; e++) {
				ckpt_og_child *c = &gn->children[gn->nchildren++];
				c->node_id = ckpt__ptrmap_get(&b->ids, node_key(o->edges[e].child));
				c->local_name = o->edges[e].name;
			}
		}
		CKPT_TRY(fill_attrs(&p->arena, gn, &p->nodes[i]));
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
			CKPT_TRY(fill_attrs(&p->arena, gn, &p->nodes[k]));
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

/*
 * has_checkpoint_values as TF writes it on every node (its checkpoint util
 * module, fill_object_graph_proto's last step): true on a node with attributes or slot
 * variables and on every node that reaches one through its children, false
 * elsewhere. TF reads a node without the field as "has values when it has
 * children or attributes": an empty container would count as holding values.
 */
static void mark_has_values(ckpt_object_graph *g)
{
	for (size_t i = 0; i < g->nnodes; i++)
		g->nodes[i].has_checkpoint_values = g->nodes[i].nattrs > 0 || g->nodes[i].nslots > 0;
	/* children mostly come after their parent (BFS ids): a backward sweep settles a tree in one pass */
	for (int changed = 1; changed;) {
		changed = 0;
		for (size_t i = g->nnodes; i-- > 0;) {
			ckpt_og_node *n = &g->nodes[i];
			for (size_t c = 0; c < n->nchildren && !n->has_checkpoint_values; c++) {
				int id = n->children[c].node_id;
				if (id >= 0 && (size_t)id < g->nnodes && g->nodes[id].has_checkpoint_values)
					n->has_checkpoint_values = changed = 1;
			}
		}
	}
}

int ckpt__plan_build_to_write(ckpt__plan *p, ckpt_checkpoint *ck)
{
	CKPT_TRY(ckpt__plan_build(p, ck->root));
	if (!ck->graph_without_has_values)
		mark_has_values(p->graph);
	return CKPT_OK;
}

int ckpt_checkpoint_object_graph(ckpt_object_graph **out, ckpt_checkpoint *ck)
{
	if (!out || !ck)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_checkpoint_object_graph: NULL argument");
	*out = NULL;
	ckpt__plan p;
	CKPT_TRY(ckpt__plan_build_to_write(&p, ck));
	/* the plan's graph borrows from the tree and its arena: the caller gets a deep copy */
	int rc = ckpt_object_graph_copy(out, p.graph);
	ckpt__plan_free(&p);
	return rc;
}

/* ---- enumeration ---- */

struct ckpt_tracked_list {
	size_t n;
	ckpt_tracked_variable *v;
	ckpt__arena strings; /* keys and paths: the plan's, taken over */
};

/* The list; with `owners`, also where each entry's source_key lives (*owners: ckpt__malloc'ed, one per entry). */
static int variables(ckpt_tracked_list **out, ckpt_checkpoint *ck, char ****owners)
{
	*out = NULL;
	ckpt__plan p;
	CKPT_TRY(ckpt__plan_build(&p, ck->root));
	size_t total = 0;
	for (size_t i = 0; i < p.n; i++)
		total += p.nodes[i].obj->nattrs;
	ckpt_tracked_list *l = ckpt__calloc(1, sizeof(*l));
	if (l)
		l->v = ckpt__calloc(total ? total : 1, sizeof(*l->v));
	if (l && l->v && owners && !(*owners = ckpt__calloc(total ? total : 1, sizeof(**owners)))) {
		ckpt__free(l->v);
		l->v = NULL;
	}
	if (!l || !l->v) {
		if (l)
			ckpt__free(l->v);
		ckpt__free(l);
		ckpt__plan_free(&p);
		return CKPT_ENOMEM;
	}
	for (size_t i = 0; i < p.n; i++) {
		ckpt_object *o = p.nodes[i].obj;
		for (size_t a = 0; a < o->nattrs; a++) {
			if (owners)
				(*owners)[l->n] = o->is_var_node ? &o->source_key : &o->attrs[a].source_key;
			ckpt_tracked_variable *t = &l->v[l->n++];
			t->key = p.nodes[i].keys[a];
			t->path = o->is_var_node ? p.nodes[i].path : t->key;
			t->variable = o->attrs[a].var;
			t->full_name = ckpt_variable_name(t->variable);
			t->source_key = o->is_var_node ? o->source_key : o->attrs[a].source_key;
			t->node_id = (int)i;
			if (p.nodes[i].slot) {
				t->slot_name = p.nodes[i].slot->name;
				t->primary = p.nodes[i].slot->primary;
			}
		}
	}
	l->strings = p.arena;
	p.arena.head = NULL;
	ckpt__plan_free(&p);
	*out = l;
	return CKPT_OK;
}

int ckpt_checkpoint_variables(ckpt_tracked_list **out, ckpt_checkpoint *ck)
{
	if (!out || !ck)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_checkpoint_variables: NULL argument");
	return variables(out, ck, NULL);
}

size_t ckpt_tracked_list_num_entries(const ckpt_tracked_list *l)
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
	ckpt__arena_free(&l->strings);
	ckpt__free(l->v);
	ckpt__free(l);
}

/*
 * find_variable's index: the tracked list with its paths and keys, and the
 * variables' names, hashed to their first position. Rebuilt when any object
 * changed since (ckpt__tree_generation). Stored keys a variable was restored
 * from (source_key) change without that, so they are read live from the
 * owning objects, in list order, up to the first path / key hit.
 */
typedef struct name_slot {
	const char *s;
	size_t idx;
} name_slot;

typedef struct name_index {
	size_t cap;          /* power of 2, 0 = empty */
	name_slot *t;
} name_index;

struct ckpt__find_cache {
	unsigned long gen;
	ckpt_tracked_list *l;
	char ***owner;               /* per entry: the source_key it reports (its object's, or its attribute's) */
	name_index paths;            /* paths and keys */
	name_index names;            /* full names */
};

static size_t str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return (size_t)h;
}

static int index_init(name_index *x, size_t n)
{
	size_t cap = 16;
	while (cap < n * 2)
		cap *= 2;
	x->t = ckpt__calloc(cap, sizeof(*x->t));
	if (!x->t)
		return CKPT_ENOMEM;
	x->cap = cap;
	return CKPT_OK;
}

/* first insertion of a string wins (entries are inserted in list order) */
static void index_put(name_index *x, const char *s, size_t idx)
{
	size_t h = str_hash(s) & (x->cap - 1);
	while (x->t[h].s) {
		if (strcmp(x->t[h].s, s) == 0)
			return;
		h = (h + 1) & (x->cap - 1);
	}
	x->t[h] = (name_slot){ s, idx };
}

static size_t index_get(const name_index *x, const char *s)
{
	size_t h = str_hash(s) & (x->cap - 1);
	while (x->t[h].s) {
		if (strcmp(x->t[h].s, s) == 0)
			return x->t[h].idx;
		h = (h + 1) & (x->cap - 1);
	}
	return SIZE_MAX;
}

void ckpt__find_cache_free(struct ckpt__find_cache *c)
{
	if (!c)
		return;
	ckpt_tracked_list_free(c->l);
	ckpt__free(c->owner);
	ckpt__free(c->paths.t);
	ckpt__free(c->names.t);
	ckpt__free(c);
}

static int find_cache_build(struct ckpt__find_cache **out, ckpt_checkpoint *ck)
{
	*out = NULL;
	unsigned long gen = ckpt__tree_generation();
	struct ckpt__find_cache *c = ckpt__calloc(1, sizeof(*c));
	if (!c)
		return CKPT_ENOMEM;
	c->gen = gen;
	int rc = variables(&c->l, ck, &c->owner);
	size_t n = c->l ? c->l->n : 0;
	if (rc == CKPT_OK)
		rc = index_init(&c->paths, 2 * n);
	if (rc == CKPT_OK)
		rc = index_init(&c->names, n);
	if (rc < 0) {
		ckpt__find_cache_free(c);
		return rc;
	}
	for (size_t i = 0; i < n; i++) {
		const ckpt_tracked_variable *t = &c->l->v[i];
		index_put(&c->paths, t->path, i);
		index_put(&c->paths, t->key, i);
		index_put(&c->names, t->full_name, i);
	}
	*out = c;
	return CKPT_OK;
}

static int checkpoint_find_variable_rc(ckpt_variable **out, ckpt_checkpoint *ck, const char *path)
{
	if (!out || !ck || !path)
		return ckpt__fail(CKPT_EINVAL, NULL, path, -1, "ckpt_checkpoint_find_variable: NULL argument");
	*out = NULL;
	if (!ck->find || ck->find->gen != ckpt__tree_generation()) {
		ckpt__find_cache_free(ck->find);
		ck->find = NULL;
		CKPT_TRY(find_cache_build(&ck->find, ck));
	}
	const struct ckpt__find_cache *c = ck->find;
	size_t hit = index_get(&c->paths, path);
	size_t upto = hit == SIZE_MAX ? c->l->n : hit;
	for (size_t i = 0; i < upto; i++) {
		const char *sk = *c->owner[i];
		if (sk && strcmp(sk, path) == 0) {
			hit = i;
			break;
		}
	}
	if (hit == SIZE_MAX)
		hit = index_get(&c->names, path);
	if (hit == SIZE_MAX)
		return ckpt__fail(CKPT_ENOTFOUND, NULL, path, -1,
			"no tracked variable with object path, key or stored name '%s'", path);
	*out = c->l->v[hit].variable;
	return CKPT_OK;
}

ckpt_variable *ckpt_checkpoint_find_variable(ckpt_checkpoint *ck, const char *path)
{
	ckpt_variable *out = NULL;
	int rc = checkpoint_find_variable_rc(&out, ck, path);
	ckpt__borrowed_status(rc, out != NULL);
	return rc == CKPT_OK ? out : NULL;
}
