/*
 * Trackable objects: named children, variables as attributes, optimizer
 * slot variables. Whenever a child, a tracked variable or a slot appears,
 * the object's restore-on-create records (restore_pending.c) are applied.
 */
#include <string.h>
#include "checkpoint_internal.h"
#include "model/variable_internal.h"

int ckpt__check_not_replica(const char *what)
{
	if (ckpt_replica_current())
		return ckpt__fail(CKPT_ESCOPE, NULL, NULL, -1,
			"%s may not be called from replica context (inside ckpt_strategy_run); call it from the trainer's thread",
			what);
	return CKPT_OK;
}

static unsigned long tree_gen;

unsigned long ckpt__tree_generation(void)
{
	return __atomic_load_n(&tree_gen, __ATOMIC_RELAXED);
}

void ckpt__tree_changed(void)
{
	__atomic_fetch_add(&tree_gen, 1, __ATOMIC_RELAXED);
}

#define GROW(arr, cap, n) ckpt__array_grow((void **)&(arr), &(cap), (n), sizeof(*(arr)), 4)

/* Nearly every attribute is VARIABLE_VALUE: one shared, never freed copy of the name instead of one per variable. */
static char variable_value_name[] = CKPT_VARIABLE_VALUE_KEY;

static char *attr_name_dup(const char *name)
{
	return strcmp(name, variable_value_name) == 0 ? variable_value_name : ckpt__strdup(name);
}

static void attr_name_free(char *name)
{
	if (name != variable_value_name)
		ckpt__free(name);
}

static char *edge_name_dup(const char *name, int *in_slab)
{
	size_t n = strlen(name);
	*in_slab = n < CKPT__SLAB_MAX;
	char *d = *in_slab ? ckpt__slab_alloc(n + 1, 16) : ckpt__malloc(n + 1);
	if (d)
		memcpy(d, name, n + 1);
	return d;
}

static void edge_name_free(const ckpt__edge *e)
{
	if (e->name_in_slab)
		ckpt__slab_free(e->name);
	else
		ckpt__free(e->name);
}

/* Room for attribute n: the inline attr1 first, then an array (attrs moved out of it once). */
static int grow_attrs(ckpt_object *o)
{
	if (o->capattrs == 0) {
		o->attrs = &o->attr1;
		o->capattrs = 1;
		return CKPT_OK;
	}
	if (o->nattrs < o->capattrs)
		return CKPT_OK;
	if (o->attrs != &o->attr1)
		return ckpt__array_grow((void **)&o->attrs, &o->capattrs, o->nattrs, sizeof(*o->attrs), 4);
	ckpt__attr *a = ckpt__malloc(4 * sizeof(*a));
	if (!a)
		return CKPT_ENOMEM;
	memcpy(a, o->attrs, o->nattrs * sizeof(*a));
	o->attrs = a;
	o->capattrs = 4;
	return CKPT_OK;
}

int ckpt__object_alloc(ckpt_object **out)
{
	ckpt_object *o = ckpt__slab_alloc(sizeof(*o), 16);
	if (!o)
		return CKPT_ENOMEM;
	memset(o, 0, sizeof(*o));
	o->refs = 1;
	*out = o;
	return CKPT_OK;
}

void ckpt__object_ref(ckpt_object *o)
{
	if (o)
		o->refs++;
}

int ckpt_object_new(ckpt_object **out)
{
	if (!out)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_object_new: NULL out");
	*out = NULL;
	return ckpt__object_alloc(out);
}

int ckpt_optimizer_new(ckpt_object **out, const char *name)
{
	if (!out)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_optimizer_new: NULL out");
	*out = NULL;
	ckpt_object *o;
	CKPT_TRY(ckpt__object_alloc(&o));
	if (name && !(o->opt_name = ckpt__strdup(name))) {
		ckpt_object_free(o);
		return CKPT_ENOMEM;
	}
	*out = o;
	return CKPT_OK;
}

void ckpt_object_free(ckpt_object *o)
{
	if (!o || --o->refs > 0)
		return;
	for (size_t i = 0; i < o->nedges; i++) {
		if (!o->edges[i].weak)
			ckpt_object_free(o->edges[i].child);
		edge_name_free(&o->edges[i]);
	}
	for (size_t i = 0; i < o->nslots; i++) {
		ckpt_object_free(o->slots[i].node);
		ckpt__free(o->slots[i].name);
	}
	for (size_t i = 0; i < o->nattrs; i++) {
		if (o->attrs[i].owned)
			ckpt_variable_free(o->attrs[i].var);
		attr_name_free(o->attrs[i].name);
		ckpt__free(o->attrs[i].suffix);
		ckpt__free(o->attrs[i].source_key);
	}
	ckpt__pending_free(&o->pending);
	ckpt__free(o->edges);
	ckpt__free(o->eidx);
	ckpt__ptrmap_free(&o->slot_last);
	ckpt__free(o->slots);
	if (o->attrs != &o->attr1)
		ckpt__free(o->attrs);
	ckpt__free(o->opt_name);
	ckpt__free(o->source_key);
	ckpt__slab_free(o);
}

static size_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return (size_t)h;
}

/* Index edge i by name; (re)build the table when it gets half full. Best effort: lookups fall back to a scan. */
static void index_edges(ckpt_object *o)
{
	if (o->nedges < 16)
		return;
	if (o->nedges * 2 > o->ecap) {
		size_t nc = o->ecap ? o->ecap * 2 : 64;
		while (o->nedges * 2 > nc)
			nc *= 2;
		size_t *t = ckpt__calloc(nc, sizeof(*t));
		if (!t) {
			ckpt_error_clear();
			ckpt__free(o->eidx);
			o->eidx = NULL;
			o->ecap = 0;
			return;
		}
		ckpt__free(o->eidx);
		o->eidx = t;
		o->ecap = nc;
		for (size_t i = 0; i + 1 < o->nedges; i++) {
			size_t h = name_hash(o->edges[i].name) & (nc - 1);
			while (t[h])
				h = (h + 1) & (nc - 1);
			t[h] = i + 1;
		}
	}
	size_t h = name_hash(o->edges[o->nedges - 1].name) & (o->ecap - 1);
	while (o->eidx[h])
		h = (h + 1) & (o->ecap - 1);
	o->eidx[h] = o->nedges;
}

const ckpt__edge *ckpt__object_edge(const ckpt_object *o, const char *name)
{
	if (o->eidx) {
		size_t h = name_hash(name) & (o->ecap - 1);
		while (o->eidx[h]) {
			const ckpt__edge *e = &o->edges[o->eidx[h] - 1];
			if (strcmp(e->name, name) == 0)
				return e;
			h = (h + 1) & (o->ecap - 1);
		}
		return NULL;
	}
	for (size_t i = 0; i < o->nedges; i++)
		if (strcmp(o->edges[i].name, name) == 0)
			return &o->edges[i];
	return NULL;
}

ckpt__slot *ckpt__object_slot(const ckpt_object *o, const ckpt_variable *primary, const char *name)
{
	for (long i = ckpt__ptrmap_get(&o->slot_last, primary); i >= 0; i = o->slots[i].prev)
		if (strcmp(o->slots[i].name, name) == 0)
			return &o->slots[i];
	return NULL;
}

int ckpt__object_push_attr_tensor(ckpt_object *o, const char *name, const char *suffix, ckpt_variable *var, int owned)
{
	CKPT_TRY(grow_attrs(o));
	char *n = name ? attr_name_dup(name) : NULL;
	char *sfx = suffix && *suffix ? ckpt__strdup(suffix) : NULL;
	if (!n || (suffix && *suffix && !sfx)) {
		attr_name_free(n);
		ckpt__free(sfx);
		return CKPT_ENOMEM;
	}
	ckpt__tree_changed();
	o->attrs[o->nattrs++] = (ckpt__attr){ n, sfx, var, owned, NULL, 0 };
	return CKPT_OK;
}

int ckpt__object_push_attr(ckpt_object *o, const char *name, ckpt_variable *var, int owned)
{
	return ckpt__object_push_attr_tensor(o, name, NULL, var, owned);
}

int ckpt__var_node_new(ckpt_object **out, ckpt_variable *var, int owned)
{
	ckpt_object *o;
	CKPT_TRY(ckpt__object_alloc(&o));
	o->is_var_node = 1;
	int rc = ckpt__object_push_attr(o, CKPT_VARIABLE_VALUE_KEY, var, owned);
	if (rc < 0) {
		ckpt_object_free(o); /* holds no attribute yet: `var` stays the caller's */
		return rc;
	}
	*out = o;
	return CKPT_OK;
}

/* Does `from` reach `target` through owning edges? (Then an edge target -> from closes a cycle.) */
static int reaches(ckpt_object *from, ckpt_object *target, int *out)
{
	*out = 0;
	if (from == target) {
		*out = 1;
		return CKPT_OK;
	}
	if (from->nedges == 0 && from->nslots == 0)
		return CKPT_OK;
	ckpt__ptrmap seen = { 0 };
	size_t n = 0, cap = 0;
	ckpt_object **stack = NULL;
	int rc = GROW(stack, cap, n);
	if (rc == CKPT_OK) {
		stack[n++] = from;
		rc = ckpt__ptrmap_put(&seen, from, 1);
	}
	while (rc == CKPT_OK && n > 0 && !*out) {
		ckpt_object *o = stack[--n];
		for (size_t i = 0; i < o->nedges && rc == CKPT_OK; i++) {
			ckpt_object *c = o->edges[i].child;
			if (c == target) {
				*out = 1;
				break;
			}
			if (ckpt__ptrmap_get(&seen, c) >= 0)
				continue;
			rc = ckpt__ptrmap_put(&seen, c, 1);
			if (rc == CKPT_OK && (rc = GROW(stack, cap, n)) == CKPT_OK)
				stack[n++] = c;
		}
	}
	ckpt__free(stack);
	ckpt__ptrmap_free(&seen);
	return rc;
}

int ckpt__object_link(ckpt_object *parent, const char *name, ckpt_object *child, int weak)
{
	CKPT_TRY(GROW(parent->edges, parent->capedges, parent->nedges));
	int in_slab;
	char *n = edge_name_dup(name, &in_slab);
	if (!n)
		return CKPT_ENOMEM;
	if (!weak)
		ckpt__object_ref(child);
	ckpt__tree_changed();
	parent->edges[parent->nedges++] = (ckpt__edge){ n, child, weak, in_slab };
	index_edges(parent);
	return CKPT_OK;
}

static int check_name(const char *fn, const ckpt_object *parent, const char *name)
{
	if (!name || !*name)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "%s: empty child name", fn);
	if (strlen(name) > CKPT_MAX_NAME_LEN)
		return ckpt__fail(CKPT_ELIMIT, NULL, name, -1, "%s: name longer than %d bytes", fn, CKPT_MAX_NAME_LEN);
	if (ckpt__object_edge(parent, name))
		return ckpt__fail(CKPT_EINVAL, NULL, name, -1, "%s: the object already has a child named '%s'", fn,
			name);
	return CKPT_OK;
}

/* fresh: `child` is a variable node this library call just created, freed with it on failure (restore_pending.h) */
static int add_child(ckpt_object *parent, const char *local_name, ckpt_object *child, int fresh)
{
	if (!parent || !child)
		return ckpt__fail(CKPT_EINVAL, NULL, local_name, -1, "ckpt_object_add_child: NULL argument");
	CKPT_TRY(check_name("ckpt_object_add_child", parent, local_name));
	int weak;
	CKPT_TRY(reaches(child, parent, &weak));
	/* make room first, so that nothing can fail after pending values were assigned */
	CKPT_TRY(GROW(parent->edges, parent->capedges, parent->nedges));
	CKPT_TRY(ckpt__pending_apply_child(&parent->pending, local_name, child, fresh));
	return ckpt__object_link(parent, local_name, child, weak);
}

int ckpt_object_add_child(ckpt_object *parent, const char *local_name, ckpt_object *child)
{
	return add_child(parent, local_name, child, 0);
}

static int object_new_child_rc(ckpt_object **out, ckpt_object *parent, const char *local_name)
{
	if (!out || !parent)
		return ckpt__fail(CKPT_EINVAL, NULL, local_name, -1, "ckpt_object_new_child: NULL argument");
	*out = NULL;
	ckpt_object *c;
	CKPT_TRY(ckpt__object_alloc(&c));
	int rc = ckpt_object_add_child(parent, local_name, c);
	ckpt_object_free(c);
	if (rc == CKPT_OK)
		*out = c;
	return rc;
}

ckpt_object *ckpt_object_new_child(ckpt_object *parent, const char *local_name)
{
	ckpt_object *out = NULL;
	int rc = object_new_child_rc(&out, parent, local_name);
	ckpt__borrowed_status(rc, out != NULL);
	return rc == CKPT_OK ? out : NULL;
}

int ckpt_object_track_variable(ckpt_object *obj, const char *local_name, ckpt_variable *var)
{
	if (!obj || !var)
		return ckpt__fail(CKPT_EINVAL, NULL, local_name, -1, "ckpt_object_track_variable: NULL argument");
	CKPT_TRY(check_name("ckpt_object_track_variable", obj, local_name));
	ckpt_object *node;
	CKPT_TRY(ckpt__var_node_new(&node, var, 0));
	int rc = ckpt_object_add_child(obj, local_name, node);
	ckpt_object_free(node);
	return rc;
}

static int object_add_variable_rc(ckpt_variable **out, ckpt_object *obj, const char *local_name,
	const char *var_name, ckpt_dtype dt, const ckpt_shape *shape, const ckpt_variable_options *o)
{
	if (out)
		*out = NULL;
	if (!obj || !shape)
		return ckpt__fail(CKPT_EINVAL, NULL, local_name, -1, "ckpt_object_add_variable: NULL argument");
	CKPT_TRY(ckpt__check_not_replica("ckpt_object_add_variable"));
	CKPT_TRY(check_name("ckpt_object_add_variable", obj, local_name));
	ckpt_variable *v;
	CKPT_TRY(ckpt_variable_new(&v, var_name ? var_name : local_name, dt, shape, o));
	ckpt_object *node;
	int rc = ckpt__var_node_new(&node, v, 1);
	if (rc < 0) {
		ckpt_variable_free(v);
		return rc;
	}
	/* a new variable in the library's memory is fresh; one over the caller's buffers keeps its old bytes on failure */
	rc = add_child(obj, local_name, node, !(o && o->replica_buffers));
	ckpt_object_free(node); /* frees v too when the edge was not added */
	if (rc == CKPT_OK && out)
		*out = v;
	return rc;
}

ckpt_variable *ckpt_object_add_variable(ckpt_object *obj, const char *local_name, const char *var_name,
	ckpt_dtype dt, const ckpt_shape *shape, const ckpt_variable_options *o)
{
	ckpt_variable *out = NULL;
	int rc = object_add_variable_rc(&out, obj, local_name, var_name, dt, shape, o);
	ckpt__borrowed_status(rc, out != NULL);
	return rc == CKPT_OK ? out : NULL;
}

static int object_add_attribute_tensor_rc(ckpt_variable **out, ckpt_object *obj, const char *attr, const char *suffix,
	const char *var_name, ckpt_dtype dt, const ckpt_shape *shape, const ckpt_variable_options *o)
{
	if (out)
		*out = NULL;
	if (!obj || !attr || !suffix || !shape)
		return ckpt__fail(CKPT_EINVAL, NULL, attr, -1, "ckpt_object_add_attribute_tensor: NULL argument");
	CKPT_TRY(ckpt__check_not_replica("ckpt_object_add_attribute_tensor"));
	if (!*attr || !*suffix || strchr(suffix, '/'))
		return ckpt__fail(CKPT_EINVAL, NULL, attr, -1,
			"ckpt_object_add_attribute_tensor: attribute '%s' tensor '%s': both must be non-empty, the suffix without '/'",
			attr, suffix);
	if (obj->is_var_node)
		return ckpt__fail(CKPT_EINVAL, NULL, attr, -1,
			"ckpt_object_add_attribute_tensor: '%s' is a variable node (its one attribute is VARIABLE_VALUE)", attr);
	for (size_t i = 0; i < obj->nattrs; i++) {
		const ckpt__attr *a = &obj->attrs[i];
		if (strcmp(a->name, attr) == 0 && (!a->suffix || strcmp(a->suffix, suffix) == 0))
			return ckpt__fail(CKPT_EINVAL, NULL, attr, -1, "attribute '%s' already has %s%s", attr,
				a->suffix ? "a tensor " : "a single tensor", a->suffix ? a->suffix : "");
	}
	ckpt_variable *v;
	char *dflt = NULL;
	if (!var_name && !(dflt = ckpt__asprintf("%s%s", attr, suffix)))
		return CKPT_ENOMEM;
	int rc = ckpt_variable_new(&v, var_name ? var_name : dflt, dt, shape, o);
	ckpt__free(dflt);
	CKPT_TRY(rc);
	if ((rc = ckpt__object_push_attr_tensor(obj, attr, suffix, v, 1)) < 0) {
		ckpt_variable_free(v);
		return rc;
	}
	if (out)
		*out = v;
	return CKPT_OK;
}

ckpt_variable *ckpt_object_add_attribute_tensor(ckpt_object *obj, const char *attr, const char *suffix,
	const char *var_name, ckpt_dtype dt, const ckpt_shape *shape, const ckpt_variable_options *o)
{
	ckpt_variable *out = NULL;
	int rc = object_add_attribute_tensor_rc(&out, obj, attr, suffix, var_name, dt, shape, o);
	ckpt__borrowed_status(rc, out != NULL);
	return rc == CKPT_OK ? out : NULL;
}

static int object_get_attribute_tensor_rc(ckpt_variable **out, const ckpt_object *obj, const char *attr, const char *suffix)
{
	if (!out || !obj || !attr || !suffix)
		return ckpt__fail(CKPT_EINVAL, NULL, attr, -1, "ckpt_object_attribute_tensor: NULL argument");
	*out = NULL;
	for (size_t i = 0; i < obj->nattrs; i++) {
		const ckpt__attr *a = &obj->attrs[i];
		if (a->suffix && strcmp(a->name, attr) == 0 && strcmp(a->suffix, suffix) == 0) {
			*out = a->var;
			return CKPT_OK;
		}
	}
	return ckpt__fail(CKPT_ENOTFOUND, NULL, attr, -1, "no tensor '%s' of attribute '%s'", suffix, attr);
}

ckpt_variable *ckpt_object_attribute_tensor(const ckpt_object *obj, const char *attr, const char *suffix)
{
	ckpt_variable *out = NULL;
	int rc = object_get_attribute_tensor_rc(&out, obj, attr, suffix);
	ckpt__borrowed_status(rc, out != NULL);
	return rc == CKPT_OK ? out : NULL;
}

static int object_get_child_rc(ckpt_object **out, const ckpt_object *obj, const char *local_name)
{
	if (!out || !obj || !local_name)
		return ckpt__fail(CKPT_EINVAL, NULL, local_name, -1, "ckpt_object_child: NULL argument");
	*out = NULL;
	const ckpt__edge *e = ckpt__object_edge(obj, local_name);
	if (!e)
		return ckpt__fail(CKPT_ENOTFOUND, NULL, local_name, -1, "no child named '%s'", local_name);
	*out = e->child;
	return CKPT_OK;
}

ckpt_object *ckpt_object_child(const ckpt_object *obj, const char *local_name)
{
	ckpt_object *out = NULL;
	int rc = object_get_child_rc(&out, obj, local_name);
	ckpt__borrowed_status(rc, out != NULL);
	return rc == CKPT_OK ? out : NULL;
}

static int object_get_variable_rc(ckpt_variable **out, const ckpt_object *obj, const char *local_name)
{
	if (!out || !obj || !local_name)
		return ckpt__fail(CKPT_EINVAL, NULL, local_name, -1, "ckpt_object_variable: NULL argument");
	*out = NULL;
	const ckpt__edge *e = ckpt__object_edge(obj, local_name);
	if (!e || !e->child->is_var_node)
		return ckpt__fail(CKPT_ENOTFOUND, NULL, local_name, -1, "no variable tracked as '%s'", local_name);
	*out = e->child->attrs[0].var;
	return CKPT_OK;
}

ckpt_variable *ckpt_object_variable(const ckpt_object *obj, const char *local_name)
{
	ckpt_variable *out = NULL;
	int rc = object_get_variable_rc(&out, obj, local_name);
	ckpt__borrowed_status(rc, out != NULL);
	return rc == CKPT_OK ? out : NULL;
}

ckpt_variable *ckpt_object_node_variable(const ckpt_object *obj)
{
	return obj && obj->is_var_node ? obj->attrs[0].var : NULL;
}

size_t ckpt_object_num_children(const ckpt_object *obj)
{
	return obj ? obj->nedges : 0;
}

static int edge_in_range(const ckpt_object *obj, size_t i, const char *fn)
{
	if (!obj || i >= obj->nedges)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "%s: index %zu out of range [0, %zu)", fn, i,
			obj ? obj->nedges : 0);
	return CKPT_OK;
}

ckpt_object *ckpt_object_child_at(const ckpt_object *obj, size_t i)
{
	return edge_in_range(obj, i, "ckpt_object_child_at") == CKPT_OK ? obj->edges[i].child : NULL;
}

const char *ckpt_object_child_name(const ckpt_object *obj, size_t i)
{
	return edge_in_range(obj, i, "ckpt_object_child_name") == CKPT_OK ? obj->edges[i].name : NULL;
}

/* Undo TensorFlow's escape for one path component (".." -> ".", ".S" -> "/"). */
static char *unescape(const char *s, size_t n)
{
	char *d = ckpt__malloc(n + 1);
	if (!d)
		return NULL;
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '.' && i + 1 < n && (s[i + 1] == '.' || s[i + 1] == 'S')) {
			d[j++] = s[i + 1] == '.' ? '.' : '/';
			i++;
		} else {
			d[j++] = s[i];
		}
	}
	d[j] = '\0';
	return d;
}

static int object_find_rc(ckpt_object **out, ckpt_object *from, const char *path)
{
	if (!out || !from || !path)
		return ckpt__fail(CKPT_EINVAL, NULL, path, -1, "ckpt_object_find: NULL argument");
	*out = NULL;
	ckpt_object *cur = from;
	const char *p = path;
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		char *name = unescape(p, n);
		if (!name)
			return CKPT_ENOMEM;
		const ckpt__edge *e = ckpt__object_edge(cur, name);
		if (!e) {
			int rc = ckpt__fail(CKPT_ENOTFOUND, NULL, path, -1, "object path '%s': no child '%s' after '%.*s'",
				path, name, (int)(p - path), path);
			ckpt__free(name);
			return rc;
		}
		ckpt__free(name);
		cur = e->child;
		p += n;
		if (*p == '/')
			p++;
	}
	*out = cur;
	return CKPT_OK;
}

ckpt_object *ckpt_object_find(ckpt_object *from, const char *path)
{
	ckpt_object *out = NULL;
	int rc = object_find_rc(&out, from, path);
	ckpt__borrowed_status(rc, out != NULL);
	return rc == CKPT_OK ? out : NULL;
}

/* ---- optimizer slots ---- */

int ckpt__slot_create(ckpt_variable **out, ckpt_object **node_out, ckpt_object *opt, ckpt_variable *primary,
	const char *slot_name, const char *var_name, const ckpt_variable_options *o, int unfilled)
{
	ckpt_strategy *cur = ckpt_strategy_current();
	ckpt_strategy *own = ckpt_variable_strategy(primary);
	if (cur != own)
		return ckpt__fail(CKPT_ESCOPE, NULL, ckpt_variable_name(primary), -1,
			"cannot create optimizer slot '%s' for variable '%s': the variable was created %s (strategy %s) "
			"but the current strategy is %s; create the model and the optimizer in the same strategy scope "
			"(load or restore checkpoints inside that scope too)",
			slot_name, ckpt_variable_name(primary), ckpt_variable_origin(primary), ckpt_strategy_describe(own),
			ckpt_strategy_describe(cur));
	if (ckpt__object_slot(opt, primary, slot_name))
		return ckpt__fail(CKPT_EINVAL, NULL, ckpt_variable_name(primary), -1,
			"slot '%s' of variable '%s' exists already", slot_name, ckpt_variable_name(primary));
	CKPT_TRY(GROW(opt->slots, opt->capslots, opt->nslots));
	char *vname = var_name && *var_name ? ckpt__strdup(var_name) : opt->opt_name ? ckpt__asprintf("%s/%s/%s", opt->opt_name, ckpt_variable_name(primary), slot_name)
		: ckpt__asprintf("%s/%s", ckpt_variable_name(primary), slot_name);
	char *sname = ckpt__strdup(slot_name);
	if (!vname || !sname) {
		ckpt__free(vname);
		ckpt__free(sname);
		return CKPT_ENOMEM;
	}
	ckpt_variable_options vo = CKPT_VARIABLE_OPTIONS_INIT;
	if (o)
		vo = *o;
	vo.version = CKPT_VARIABLE_OPTIONS_VERSION;
	ckpt_variable *v;
	int rc = unfilled ? ckpt__variable_new_unfilled(&v, vname, ckpt_variable_dtype(primary), ckpt_variable_shape(primary),
		&vo) : ckpt_variable_new(&v, vname, ckpt_variable_dtype(primary), ckpt_variable_shape(primary), &vo);
	ckpt__free(vname);
	if (rc < 0) {
		ckpt__free(sname);
		return rc;
	}
	ckpt_object *node;
	rc = ckpt__var_node_new(&node, v, 1);
	if (rc < 0) {
		ckpt_variable_free(v);
		ckpt__free(sname);
		return rc;
	}
	long prev = ckpt__ptrmap_get(&opt->slot_last, primary);
	rc = ckpt__ptrmap_put(&opt->slot_last, primary, (int)opt->nslots);
	if (rc < 0) {
		ckpt_object_free(node);
		ckpt__free(sname);
		return rc;
	}
	ckpt__tree_changed();
	opt->slots[opt->nslots++] = (ckpt__slot){ primary, sname, node, prev };
	*out = v;
	if (node_out)
		*node_out = node;
	return CKPT_OK;
}

static int optimizer_create_slot_rc(ckpt_variable **out, ckpt_object *opt, ckpt_variable *primary,
	const char *slot_name, const ckpt_variable_options *o)
{
	if (out)
		*out = NULL;
	if (!opt || !primary || !slot_name || !*slot_name)
		return ckpt__fail(CKPT_EINVAL, NULL, slot_name, -1, "ckpt_optimizer_create_slot: NULL argument");
	CKPT_TRY(ckpt__check_not_replica("ckpt_optimizer_create_slot"));
	ckpt_variable *v;
	ckpt_object *node;
	CKPT_TRY(ckpt__slot_create(&v, &node, opt, primary, slot_name, NULL, o, 0));
	int rc = ckpt__pending_apply_slot(&opt->pending, primary, slot_name, node, !(o && o->replica_buffers));
	if (rc < 0) {
		/* restore-on-create failed (mismatch): the slot is not created */
		ckpt__tree_changed();
		opt->nslots--;
		ckpt__ptrmap_put(&opt->slot_last, primary, (int)opt->slots[opt->nslots].prev); /* no growth: key exists */
		ckpt_object_free(opt->slots[opt->nslots].node);
		ckpt__free(opt->slots[opt->nslots].name);
		return rc;
	}
	if (out)
		*out = v;
	return CKPT_OK;
}

ckpt_variable *ckpt_optimizer_create_slot(ckpt_object *opt, ckpt_variable *primary, const char *slot_name,
	const ckpt_variable_options *o)
{
	ckpt_variable *out = NULL;
	int rc = optimizer_create_slot_rc(&out, opt, primary, slot_name, o);
	ckpt__borrowed_status(rc, out != NULL);
	return rc == CKPT_OK ? out : NULL;
}

static int optimizer_get_slot_rc(ckpt_variable **out, const ckpt_object *opt, const ckpt_variable *primary,
	const char *slot_name)
{
	if (!out || !opt || !primary || !slot_name)
		return ckpt__fail(CKPT_EINVAL, NULL, slot_name, -1, "ckpt_optimizer_slot: NULL argument");
	*out = NULL;
	ckpt__slot *s = ckpt__object_slot(opt, primary, slot_name);
	if (!s)
		return ckpt__fail(CKPT_ENOTFOUND, NULL, ckpt_variable_name(primary), -1,
			"no slot '%s' for variable '%s'", slot_name, ckpt_variable_name(primary));
	*out = s->node->attrs[0].var;
	return CKPT_OK;
}

ckpt_variable *ckpt_optimizer_slot(const ckpt_object *opt, const ckpt_variable *primary, const char *slot_name)
{
	ckpt_variable *out = NULL;
	int rc = optimizer_get_slot_rc(&out, opt, primary, slot_name);
	ckpt__borrowed_status(rc, out != NULL);
	return rc == CKPT_OK ? out : NULL;
}
