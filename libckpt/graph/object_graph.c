/*
 * TensorFlow's TrackableObjectGraph (trackable_object_graph.proto) as C data,
 * and TensorFlow's key naming (trackable_utils.py).
 *
 *   TrackableObjectGraph { repeated TrackableObject nodes = 1; }   node 0 = root
 *   TrackableObject { children = 1 {node_id = 1, local_name = 2};
 *                     attributes = 2 {name = 1, full_name = 2, checkpoint_key = 3, optional_restore = 4};
 *                     slot_variables = 3 {original_variable_node_id = 1, slot_name = 2, slot_variable_node_id = 3};
 *                     registered_saver = 4 {name = 1, object_name = 2};
 *                     has_checkpoint_values = 5 (BoolValue) }
 *
 * Decoding accepts fields in any order (protobuf-c); encoding is in
 * field-number order with proto3 defaults omitted, as TF 2.2-2.9 wrote it.
 * Graph members are allocated with ckpt__malloc; serialize / path / escape
 * results use plain malloc (callers free() them).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <protobuf-c/protobuf-c.h>
#include "trackable_object_graph.pb-c.h"
#include "internal.h"

typedef CkptTf__TrackableObjectGraph PbGraph;
typedef CkptTf__TrackableObjectGraph__TrackableObject PbNode;
typedef CkptTf__TrackableObjectGraph__TrackableObject__ObjectReference PbChild;
typedef CkptTf__TrackableObjectGraph__TrackableObject__SerializedTensor PbAttr;
typedef CkptTf__TrackableObjectGraph__TrackableObject__SlotVariableReference PbSlot;

/*
 * protobuf-c allocates every sub-message and string of an unpacked graph
 * separately (tens of thousands of mallocs for 10,000 variables). It takes
 * them from a bump arena instead: blocks through the allocator hook, freed
 * together once the graph is converted.
 */
typedef union pb_align { long double ld; void *p; uint64_t u; } pb_align; /* C99: no max_align_t */

typedef struct pb_block {
	struct pb_block *next;
	size_t used, cap;
	pb_align data[];
} pb_block;

typedef struct pb_arena {
	pb_block *head;
	size_t next_cap;
} pb_arena;

#define PB_ALIGN (sizeof(pb_align))

static void *pb_arena_alloc(void *ctx, size_t n)
{
	pb_arena *a = ctx;
	n = (n + PB_ALIGN - 1) & ~(PB_ALIGN - 1);
	if (!n)
		n = PB_ALIGN;
	pb_block *b = a->head;
	if (!b || b->cap - b->used < n) {
		size_t cap = a->next_cap > n ? a->next_cap : n;
		if (cap > SIZE_MAX - sizeof(pb_block))
			return NULL;
		b = ckpt__malloc(sizeof(pb_block) + cap);
		if (!b)
			return NULL;
		b->next = a->head;
		b->used = 0;
		b->cap = cap;
		a->head = b;
		if (a->next_cap < ((size_t)1 << 24))
			a->next_cap *= 2;
	}
	void *p = (unsigned char *)b->data + b->used;
	b->used += n;
	return p;
}

static void pb_arena_free_one(void *ctx, void *p) { (void)ctx; (void)p; } /* freed with the arena */

static void pb_arena_release(pb_arena *a)
{
	for (pb_block *b = a->head, *nx; b; b = nx) {
		nx = b->next;
		ckpt__free(b);
	}
	a->head = NULL;
}

static char *dup_str(const char *s)
{
	return ckpt__strdup(s ? s : "");
}

int ckpt_object_graph_validate(const ckpt_object_graph *g)
{
	if (!g)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "NULL object graph");
	if (g->nnodes == 0)
		return ckpt__fail(CKPT_EFORMAT, NULL, NULL, -1, "object graph has no root node");
	if (g->nnodes > INT32_MAX)
		return ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "object graph has %zu nodes", g->nnodes);
	long n = (long)g->nnodes;
	for (size_t i = 0; i < g->nnodes; i++) {
		const ckpt_og_node *o = &g->nodes[i];
		for (size_t k = 0; k < o->nchildren; k++)
			if (o->children[k].node_id < 0 || o->children[k].node_id >= n)
				return ckpt__fail(CKPT_EFORMAT, NULL, o->children[k].local_name, -1,
					"node %zu: child '%s' refers to node %d, graph has %zu nodes", i,
					o->children[k].local_name ? o->children[k].local_name : "",
					o->children[k].node_id, g->nnodes);
		for (size_t k = 0; k < o->nslots; k++) {
			const ckpt_og_slot *s = &o->slots[k];
			if (s->original_variable_node_id < 0 || s->original_variable_node_id >= n ||
			    s->slot_variable_node_id < 0 || s->slot_variable_node_id >= n)
				return ckpt__fail(CKPT_EFORMAT, NULL, s->slot_name, -1,
					"node %zu: slot '%s' refers to nodes %d/%d, graph has %zu nodes", i,
					s->slot_name ? s->slot_name : "", s->original_variable_node_id,
					s->slot_variable_node_id, g->nnodes);
		}
	}
	return CKPT_OK;
}

static int convert_node(ckpt_og_node *d, const PbNode *s)
{
	d->has_checkpoint_values = s->has_checkpoint_values ? (s->has_checkpoint_values->value ? 1 : 0) : -1;
	if (s->registered_saver && !(d->registered_saver = dup_str(s->registered_saver->name)))
		return CKPT_ENOMEM;
	if (s->n_children && !(d->children = ckpt__calloc(s->n_children, sizeof(*d->children))))
		return CKPT_ENOMEM;
	for (; d->nchildren < s->n_children; d->nchildren++) {
		const PbChild *c = s->children[d->nchildren];
		ckpt_og_child *o = &d->children[d->nchildren];
		o->node_id = c->node_id;
		if (!(o->local_name = dup_str(c->local_name)))
			return CKPT_ENOMEM;
	}
	if (s->n_attributes && !(d->attrs = ckpt__calloc(s->n_attributes, sizeof(*d->attrs))))
		return CKPT_ENOMEM;
	for (; d->nattrs < s->n_attributes; d->nattrs++) {
		const PbAttr *a = s->attributes[d->nattrs];
		ckpt_og_attr *o = &d->attrs[d->nattrs];
		o->optional_restore = a->optional_restore ? 1 : 0;
		if (!(o->name = dup_str(a->name)) || !(o->full_name = dup_str(a->full_name)) ||
		    !(o->checkpoint_key = dup_str(a->checkpoint_key))) {
			d->nattrs++;
			return CKPT_ENOMEM;
		}
	}
	if (s->n_slot_variables && !(d->slots = ckpt__calloc(s->n_slot_variables, sizeof(*d->slots))))
		return CKPT_ENOMEM;
	for (; d->nslots < s->n_slot_variables; d->nslots++) {
		const PbSlot *sv = s->slot_variables[d->nslots];
		ckpt_og_slot *o = &d->slots[d->nslots];
		o->original_variable_node_id = sv->original_variable_node_id;
		o->slot_variable_node_id = sv->slot_variable_node_id;
		if (!(o->slot_name = dup_str(sv->slot_name))) {
			d->nslots++;
			return CKPT_ENOMEM;
		}
	}
	return CKPT_OK;
}

int ckpt_object_graph_parse(ckpt_object_graph **out, const void *buf, size_t n)
{
	*out = NULL;
	if (n > CKPT_MAX_OBJECT_GRAPH_BYTES)
		return ckpt__fail(CKPT_ELIMIT, NULL, CKPT_OBJECT_GRAPH_KEY, -1,
			"object graph of %zu bytes exceeds the %llu-byte cap", n,
			(unsigned long long)CKPT_MAX_OBJECT_GRAPH_BYTES);
	/* graphs as TensorFlow writes them, without protobuf-c (og_decode.c); the rest through it */
	ckpt_object_graph *g = NULL;
	int fast = ckpt__object_graph_decode_fast(&g, buf, n);
	if (fast < 0)
		return fast;
	if (!fast)
		return ckpt__object_graph_parse_pb(out, buf, n);
	int rc = ckpt_object_graph_validate(g);
	if (rc < 0) {
		ckpt_object_graph_free(g);
		return rc;
	}
	*out = g;
	return CKPT_OK;
}

int ckpt__object_graph_parse_pb(ckpt_object_graph **out, const void *buf, size_t n)
{
	*out = NULL;
	ckpt_error_clear(); /* a NULL from unpack is ENOMEM only if the allocator said so */
	pb_arena arena = { NULL, n < 4096 ? 4096 : n * 2 };
	ProtobufCAllocator alloc = { pb_arena_alloc, pb_arena_free_one, &arena };
	PbGraph *pg = ckpt_tf__trackable_object_graph__unpack(&alloc, n, buf);
	if (!pg) {
		pb_arena_release(&arena);
		if (ckpt_error_last()->code == CKPT_ENOMEM)
			return CKPT_ENOMEM;
		return ckpt__fail(CKPT_EFORMAT, NULL, CKPT_OBJECT_GRAPH_KEY, -1,
			"cannot decode the TrackableObjectGraph (%zu bytes)", n);
	}
	ckpt_object_graph *g = ckpt__calloc(1, sizeof(*g));
	int rc = g ? CKPT_OK : CKPT_ENOMEM;
	if (rc == CKPT_OK && pg->n_nodes && !(g->nodes = ckpt__calloc(pg->n_nodes, sizeof(*g->nodes))))
		rc = CKPT_ENOMEM;
	for (size_t i = 0; rc == CKPT_OK && i < pg->n_nodes; i++) {
		g->nnodes++;
		rc = convert_node(&g->nodes[i], pg->nodes[i]);
	}
	pb_arena_release(&arena); /* everything unpack allocated */
	if (rc == CKPT_OK)
		rc = ckpt_object_graph_validate(g);
	if (rc < 0) {
		ckpt_object_graph_free(g);
		return rc;
	}
	*out = g;
	return CKPT_OK;
}

static char *nz(const char *s)
{
	return (char *)(s ? s : "");
}

/*
 * protobuf-c views of the whole graph, pointing into `g`: one array per
 * message kind (a handful of allocations, not six per node).
 */
typedef struct pb_views {
	PbNode *nodes; PbNode **np;
	PbChild *c; PbChild **cp;
	PbAttr *a; PbAttr **ap;
	PbSlot *s; PbSlot **sp;
	CkptTf__RegisteredSaver *saver;
	CkptTf__BoolValue *hcv;
} pb_views;

static void pb_views_free(pb_views *v)
{
	ckpt__free(v->nodes); ckpt__free(v->np);
	ckpt__free(v->c); ckpt__free(v->cp);
	ckpt__free(v->a); ckpt__free(v->ap);
	ckpt__free(v->s); ckpt__free(v->sp);
	ckpt__free(v->saver); ckpt__free(v->hcv);
}

static int pb_views_build(pb_views *v, const ckpt_object_graph *g)
{
	size_t nc = 0, na = 0, ns = 0, nn = g->nnodes ? g->nnodes : 1;
	for (size_t i = 0; i < g->nnodes; i++) {
		nc += g->nodes[i].nchildren;
		na += g->nodes[i].nattrs;
		ns += g->nodes[i].nslots;
	}
	memset(v, 0, sizeof(*v));
	v->nodes = ckpt__calloc(nn, sizeof(*v->nodes));
	v->np = ckpt__calloc(nn, sizeof(*v->np));
	v->c = ckpt__calloc(nc + 1, sizeof(*v->c));
	v->cp = ckpt__calloc(nc + 1, sizeof(*v->cp));
	v->a = ckpt__calloc(na + 1, sizeof(*v->a));
	v->ap = ckpt__calloc(na + 1, sizeof(*v->ap));
	v->s = ckpt__calloc(ns + 1, sizeof(*v->s));
	v->sp = ckpt__calloc(ns + 1, sizeof(*v->sp));
	v->saver = ckpt__calloc(nn, sizeof(*v->saver));
	v->hcv = ckpt__calloc(nn, sizeof(*v->hcv));
	if (!v->nodes || !v->np || !v->c || !v->cp || !v->a || !v->ap || !v->s || !v->sp || !v->saver || !v->hcv) {
		pb_views_free(v);
		return CKPT_ENOMEM;
	}
	size_t ic = 0, ia = 0, is = 0;
	for (size_t i = 0; i < g->nnodes; i++) {
		const ckpt_og_node *o = &g->nodes[i];
		PbNode *p = &v->nodes[i];
		ckpt_tf__trackable_object_graph__trackable_object__init(p);
		v->np[i] = p;
		p->n_children = o->nchildren;
		p->children = v->cp + ic;
		for (size_t k = 0; k < o->nchildren; k++, ic++) {
			ckpt_tf__trackable_object_graph__trackable_object__object_reference__init(&v->c[ic]);
			v->c[ic].node_id = o->children[k].node_id;
			v->c[ic].local_name = nz(o->children[k].local_name);
			v->cp[ic] = &v->c[ic];
		}
		p->n_attributes = o->nattrs;
		p->attributes = v->ap + ia;
		for (size_t k = 0; k < o->nattrs; k++, ia++) {
			ckpt_tf__trackable_object_graph__trackable_object__serialized_tensor__init(&v->a[ia]);
			v->a[ia].name = nz(o->attrs[k].name);
			v->a[ia].full_name = nz(o->attrs[k].full_name);
			v->a[ia].checkpoint_key = nz(o->attrs[k].checkpoint_key);
			v->a[ia].optional_restore = o->attrs[k].optional_restore ? 1 : 0;
			v->ap[ia] = &v->a[ia];
		}
		p->n_slot_variables = o->nslots;
		p->slot_variables = v->sp + is;
		for (size_t k = 0; k < o->nslots; k++, is++) {
			ckpt_tf__trackable_object_graph__trackable_object__slot_variable_reference__init(&v->s[is]);
			v->s[is].original_variable_node_id = o->slots[k].original_variable_node_id;
			v->s[is].slot_name = nz(o->slots[k].slot_name);
			v->s[is].slot_variable_node_id = o->slots[k].slot_variable_node_id;
			v->sp[is] = &v->s[is];
		}
		if (o->registered_saver) {
			ckpt_tf__registered_saver__init(&v->saver[i]);
			v->saver[i].name = o->registered_saver;
			p->registered_saver = &v->saver[i];
		}
		if (o->has_checkpoint_values >= 0) {
			ckpt_tf__bool_value__init(&v->hcv[i]);
			v->hcv[i].value = o->has_checkpoint_values ? 1 : 0;
			p->has_checkpoint_values = &v->hcv[i];
		}
	}
	return CKPT_OK;
}

/* protobuf-c's encoding: the reference og_encode.c is tested against (the library encodes there). */
int ckpt__object_graph_serialize_pb(const ckpt_object_graph *g, void **buf, size_t *n)
{
	*buf = NULL;
	*n = 0;
	CKPT_TRY(ckpt_object_graph_validate(g));
	pb_views v;
	CKPT_TRY(pb_views_build(&v, g));
	PbGraph pg = CKPT_TF__TRACKABLE_OBJECT_GRAPH__INIT;
	pg.n_nodes = g->nnodes;
	pg.nodes = v.np;
	size_t len = ckpt_tf__trackable_object_graph__get_packed_size(&pg);
	unsigned char *b = malloc(len ? len : 1);
	int rc = CKPT_OK;
	if (!b) {
		rc = ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "out of memory (%zu bytes)", len);
	} else {
		*n = ckpt_tf__trackable_object_graph__pack(&pg, b);
		*buf = b;
	}
	pb_views_free(&v);
	return rc;
}

int ckpt_object_graph_copy(ckpt_object_graph **out, const ckpt_object_graph *g)
{
	*out = NULL;
	if (!g)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "NULL object graph");
	ckpt_object_graph *c = ckpt__calloc(1, sizeof(*c));
	if (!c)
		return CKPT_ENOMEM;
	if (g->nnodes && !(c->nodes = ckpt__calloc(g->nnodes, sizeof(*c->nodes)))) {
		ckpt__free(c);
		return CKPT_ENOMEM;
	}
	int rc = CKPT_OK;
	for (size_t i = 0; rc == CKPT_OK && i < g->nnodes; i++) {
		const ckpt_og_node *s = &g->nodes[i];
		ckpt_og_node *d = &c->nodes[i];
		c->nnodes++;
		d->has_checkpoint_values = s->has_checkpoint_values;
		if (s->registered_saver && !(d->registered_saver = ckpt__strdup(s->registered_saver)))
			rc = CKPT_ENOMEM;
		if (rc == CKPT_OK && s->nchildren && !(d->children = ckpt__calloc(s->nchildren, sizeof(*d->children))))
			rc = CKPT_ENOMEM;
		for (; rc == CKPT_OK && d->nchildren < s->nchildren; d->nchildren++) {
			d->children[d->nchildren].node_id = s->children[d->nchildren].node_id;
			if (!(d->children[d->nchildren].local_name = dup_str(s->children[d->nchildren].local_name)))
				rc = CKPT_ENOMEM;
		}
		if (rc == CKPT_OK && s->nattrs && !(d->attrs = ckpt__calloc(s->nattrs, sizeof(*d->attrs))))
			rc = CKPT_ENOMEM;
		for (; rc == CKPT_OK && d->nattrs < s->nattrs; d->nattrs++) {
			const ckpt_og_attr *a = &s->attrs[d->nattrs];
			ckpt_og_attr *b = &d->attrs[d->nattrs];
			b->optional_restore = a->optional_restore;
			if (!(b->name = dup_str(a->name)) || !(b->full_name = dup_str(a->full_name)) ||
			    !(b->checkpoint_key = dup_str(a->checkpoint_key)))
				rc = CKPT_ENOMEM;
		}
		if (rc == CKPT_OK && s->nslots && !(d->slots = ckpt__calloc(s->nslots, sizeof(*d->slots))))
			rc = CKPT_ENOMEM;
		for (; rc == CKPT_OK && d->nslots < s->nslots; d->nslots++) {
			d->slots[d->nslots] = s->slots[d->nslots];
			if (!(d->slots[d->nslots].slot_name = dup_str(s->slots[d->nslots].slot_name)))
				rc = CKPT_ENOMEM;
		}
	}
	if (rc < 0) {
		ckpt_object_graph_free(c);
		return rc;
	}
	*out = c;
	return CKPT_OK;
}

/* ---- key naming ---- */

static char *escape_malloc(const char *name)
{
	size_t n = 0;
	for (const char *p = name; *p; p++)
		n += (*p == '.' || *p == '/') ? 2 : 1;
	char *o = malloc(n + 1);
	if (!o)
		return NULL;
	char *q = o;
	for (const char *p = name; *p; p++) {
		if (*p == '.') { *q++ = '.'; *q++ = '.'; }
		else if (*p == '/') { *q++ = '.'; *q++ = 'S'; }
		else *q++ = *p;
	}
	*q = '\0';
	return o;
}

int ckpt_key_escape(char **out, const char *name)
{
	*out = NULL;
	if (!name)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "NULL name");
	*out = escape_malloc(name);
	return *out ? CKPT_OK : ckpt__fail(CKPT_ENOMEM, NULL, name, -1, "out of memory");
}

int ckpt_key_attribute(char **out, const char *object_path, const char *attr)
{
	*out = NULL;
	if (!object_path || !attr)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "NULL object path or attribute");
	char *e = escape_malloc(attr);
	if (!e)
		return ckpt__fail(CKPT_ENOMEM, NULL, attr, -1, "out of memory");
	size_t n = strlen(object_path) + strlen("/.ATTRIBUTES/") + strlen(e) + 1;
	char *o = malloc(n);
	if (o)
		snprintf(o, n, "%s/.ATTRIBUTES/%s", object_path, e);
	free(e);
	*out = o;
	return o ? CKPT_OK : ckpt__fail(CKPT_ENOMEM, NULL, attr, -1, "out of memory");
}

/*
 * BFS from the root following children in declaration order: the first
 * visit fixes a node's parent edge (parent node, child index).
 */
static int bfs_parents(const ckpt_object_graph *g, int *pnode, int *pchild)
{
	int *queue = ckpt__calloc(g->nnodes, sizeof(int));
	if (!queue)
		return CKPT_ENOMEM;
	for (size_t i = 0; i < g->nnodes; i++)
		pnode[i] = -2; /* unvisited */
	pnode[0] = -1;
	size_t head = 0, tail = 0;
	queue[tail++] = 0;
	while (head < tail) {
		int u = queue[head++];
		const ckpt_og_node *o = &g->nodes[u];
		for (size_t k = 0; k < o->nchildren; k++) {
			int v = o->children[k].node_id;
			if (pnode[v] != -2)
				continue;
			pnode[v] = u;
			pchild[v] = (int)k;
			queue[tail++] = v;
		}
	}
	ckpt__free(queue);
	return CKPT_OK;
}

/* Escaped path of a BFS-reachable node into a fresh malloc'ed string. */
static int tree_path(const ckpt_object_graph *g, const int *pnode, const int *pchild, int node, char **out)
{
	int chain[CKPT_MAX_OBJECT_GRAPH_DEPTH];
	int depth = 0;
	for (int v = node; v != 0; v = pnode[v]) {
		if (depth == CKPT_MAX_OBJECT_GRAPH_DEPTH)
			return ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1,
				"node %d is deeper than %d levels", node, CKPT_MAX_OBJECT_GRAPH_DEPTH);
		chain[depth++] = v;
	}
	size_t len = 1;
	char **parts = ckpt__calloc((size_t)depth + 1, sizeof(char *));
	if (!parts)
		return CKPT_ENOMEM;
	int rc = CKPT_OK;
	for (int i = 0; i < depth && rc == CKPT_OK; i++) {
		int v = chain[depth - 1 - i];
		const char *name = g->nodes[pnode[v]].children[pchild[v]].local_name;
		parts[i] = escape_malloc(name ? name : "");
		if (!parts[i])
			rc = ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "out of memory");
		else
			len += strlen(parts[i]) + 1;
	}
	char *o = rc == CKPT_OK ? malloc(len) : NULL;
	if (rc == CKPT_OK && !o)
		rc = ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "out of memory");
	if (o) {
		size_t p = 0;
		for (int i = 0; i < depth; i++) {
			if (i)
				o[p++] = '/';
			size_t l = strlen(parts[i]);
			memcpy(o + p, parts[i], l);
			p += l;
		}
		o[p] = '\0';
	}
	for (int i = 0; i < depth; i++)
		free(parts[i]);
	ckpt__free(parts);
	*out = o;
	return rc;
}

int ckpt_object_graph_path(char **out, const ckpt_object_graph *g, int node)
{
	*out = NULL;
	CKPT_TRY(ckpt_object_graph_validate(g));
	if (node < 0 || (size_t)node >= g->nnodes)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "node %d out of range (%zu nodes)", node, g->nnodes);
	int *pnode = ckpt__calloc(g->nnodes, sizeof(int));
	int *pchild = ckpt__calloc(g->nnodes, sizeof(int));
	int rc = (pnode && pchild) ? bfs_parents(g, pnode, pchild) : CKPT_ENOMEM;
	if (rc == CKPT_OK && pnode[node] != -2) {
		rc = tree_path(g, pnode, pchild, node, out);
		goto done;
	}
	/* a slot variable: "<var path>/.OPTIMIZER_SLOT/<optimizer path>/<escaped slot>" */
	for (size_t o = 0; rc == CKPT_OK && o < g->nnodes; o++) {
		const ckpt_og_node *opt = &g->nodes[o];
		for (size_t k = 0; k < opt->nslots; k++) {
			const ckpt_og_slot *s = &opt->slots[k];
			if (s->slot_variable_node_id != node || pnode[s->original_variable_node_id] == -2 ||
			    pnode[o] == -2)
				continue;
			char *vp = NULL, *op = NULL, *sn = NULL;
			rc = tree_path(g, pnode, pchild, s->original_variable_node_id, &vp);
			if (rc == CKPT_OK)
				rc = tree_path(g, pnode, pchild, (int)o, &op);
			if (rc == CKPT_OK && !(sn = escape_malloc(s->slot_name ? s->slot_name : "")))
				rc = ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "out of memory");
			if (rc == CKPT_OK) {
				size_t len = strlen(vp) + strlen(op) + strlen(sn) + sizeof("/.OPTIMIZER_SLOT//");
				*out = malloc(len);
				if (*out)
					snprintf(*out, len, "%s/.OPTIMIZER_SLOT/%s/%s", vp, op, sn);
				else
					rc = ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "out of memory");
			}
			free(vp);
			free(op);
			free(sn);
			goto done;
		}
	}
	if (rc == CKPT_OK)
		rc = ckpt__fail(CKPT_ENOTFOUND, NULL, NULL, -1,
			"node %d is not reachable from the root nor a slot variable", node);
done:
	ckpt__free(pnode);
	ckpt__free(pchild);
	return rc;
}
