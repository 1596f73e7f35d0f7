/*
 * The restore session (ckpt__session, refcounted): a stored checkpoint
 * opened for restoring, its object graph and one record per stored value,
 * sorted by node. Restore runs (checkpoint_restore.c) match and consume the
 * values; objects keep references for restore-on-create. The session is
 * the only owner of its values, strings and arenas.
 */
#include <stdlib.h>
#include <string.h>
#include "checkpoint_internal.h"
#include "restore_session.h"


void ckpt__session_ref(ckpt__session *s)
{
	if (s)
		s->refs++;
}

void ckpt__session_unref(ckpt__session *s)
{
	if (!s || --s->refs > 0)
		return;
	for (size_t i = 0; i < s->nvals; i++)
		ckpt_tensor_free(s->vals[i].t);
	ckpt__strpool_free(&s->strings);
	for (size_t i = 0; i < s->narenas; i++)
		ckpt__buffer_free(s->arenas[i]);
	ckpt__free(s->arenas);
	ckpt_reader_free(s->reader);
	ckpt_object_graph_free(s->graph);
	ckpt__buffer_free(s->vals);
	ckpt__free(s->node_first);
	ckpt__free(s->bound_var);
	ckpt__free(s->assigned);
	ckpt__free(s->unfilled);
	ckpt__free(s->path);
	ckpt__free(s->format);
	ckpt__free(s);
}

/*
 * Value for entry vi. attr and full_name belong to s->graph (or are static);
 * the key is copied into the session's pool (the reader closes early), and
 * a multi-tensor value's suffix is the tail of that copy (suffix_at bytes in;
 * 0 = no suffix). full_name NULL: the key itself (name-based values).
 */
static int push_value(ckpt__session *s, size_t *cap, int node, const char *attr, size_t suffix_at,
	const ckpt_var_info *vi, size_t idx, const char *full_name)
{
	if (s->nvals == *cap) {
		/* a ckpt__buffer_alloc buffer (huge pages from 2 MiB on): grown by copying */
		size_t nc = *cap ? *cap * 2 : 16;
		ckpt__value *nv = ckpt__buffer_alloc((uint64_t)nc * sizeof(*nv), 0);
		if (!nv)
			return CKPT_ENOMEM;
		if (s->nvals)
			memcpy(nv, s->vals, s->nvals * sizeof(*nv));
		ckpt__buffer_free(s->vals);
		s->vals = nv;
		*cap = nc;
	}
	const char *key = ckpt__strpool_dup(&s->strings, vi->name, strlen(vi->name));
	if (!key)
		return CKPT_ENOMEM;
	ckpt__value *v = &s->vals[s->nvals];
	memset(v, 0, sizeof(*v));
	v->node = node;
	v->attr = attr ? attr : "";
	v->suffix = suffix_at ? key + suffix_at : "";
	v->key = key;
	v->full_name = full_name ? full_name : key;
	v->reader_index = idx;
	v->dtype = vi->dtype;
	if (ckpt__cshape_make(&v->shape, &s->strings, &vi->shape) < 0)
		return CKPT_ENOMEM;
	v->role = vi->role;
	v->sync = vi->sync;
	v->aggregation = vi->aggregation;
	v->sync_source = vi->sync_source;
	s->nvals++;
	return CKPT_OK;
}

static int build_values(ckpt__session *s)
{
	ckpt_reader *r = s->reader;
	size_t nr = ckpt_reader_num_entries(r);
	unsigned char *used = ckpt__calloc(nr ? nr : 1, 1);
	if (!used)
		return CKPT_ENOMEM;
	/* about one value per entry: sized once (growing by doubling copied and faulted it in again and again) */
	size_t cap = nr + 1;
	s->vals = ckpt__buffer_alloc((uint64_t)cap * sizeof(*s->vals), 0);
	if (!s->vals) {
		ckpt__free(used);
		return CKPT_ENOMEM;
	}
	int rc = CKPT_OK;
	/* readers that synthesize TF keys over entries stored under another name (full_name) */
	int keras = strncmp(ckpt_reader_format(r), "keras", 5) == 0 || strcmp(ckpt_reader_format(r), "safetensors") == 0 ||
		strcmp(ckpt_reader_format(r), "gguf") == 0;
	if (s->graph) {
		size_t nn = s->graph->nnodes;
		s->node_first = ckpt__calloc(nn + 1, sizeof(size_t));
		s->bound_var = ckpt__calloc(nn ? nn : 1, sizeof(*s->bound_var));
		if (!s->node_first || !s->bound_var)
			rc = CKPT_ENOMEM;
		for (size_t n = 0; n < nn && rc == CKPT_OK; n++) {
			s->node_first[n] = s->nvals;
			const ckpt_og_node *gn = &s->graph->nodes[n];
			for (size_t a = 0; a < gn->nattrs && rc == CKPT_OK; a++) {
				const ckpt_og_attr *at = &gn->attrs[a];
				if (!at->checkpoint_key || !*at->checkpoint_key)
					continue;
				size_t idx;
				/* Keras readers synthesize TF keys; their entries are stored under full_name (the dataset path) */
				if (ckpt__reader_lookup(r, at->checkpoint_key, &idx) ||
					(keras && at->full_name && *at->full_name && ckpt__reader_lookup(r, at->full_name, &idx))) {
					used[idx] = 1;
					rc = push_value(s, &cap, (int)n, at->name, 0, ckpt_reader_var(r, idx), idx,
						at->full_name ? at->full_name : "");
					continue;
				}
				/* multi-tensor SaveableObjects: the key is a prefix ("…/table" of "…/table-keys") */
				size_t kl = strlen(at->checkpoint_key);
				for (size_t i = 0; i < nr && rc == CKPT_OK; i++) {
					const ckpt_var_info *vi = ckpt_reader_var(r, i);
					if (!used[i] && strncmp(vi->name, at->checkpoint_key, kl) == 0 && vi->name[kl]) {
						used[i] = 1;
						rc = push_value(s, &cap, (int)n, at->name, kl, vi, i, at->full_name ? at->full_name : "");
					}
				}
			}
		}
		if (rc == CKPT_OK)
			s->node_first[nn] = s->nvals;
	}
	s->nflat_first = s->nvals;
	/*
	 * Entries no attribute refers to (TF1 name-based files: all of them; Keras
	 * layouts the reader could not map) become node -1 values, matched by
	 * variable name and loaded as a flat tree.
	 */
	for (size_t i = 0; i < nr && rc == CKPT_OK; i++) {
		const ckpt_var_info *vi = ckpt_reader_var(r, i);
		/* slices of a partitioned entry are restored through that entry, never as variables of their own */
		if (used[i] || vi->slice_part || strcmp(vi->name, CKPT_OBJECT_GRAPH_KEY) == 0)
			continue;
		rc = push_value(s, &cap, -1, CKPT_VARIABLE_VALUE_KEY, 0, vi, i, NULL);
	}
	ckpt__free(used);
	return rc;
}

int ckpt__session_open(ckpt__session **out, const char *path, const ckpt_checkpoint_options *o)
{
	*out = NULL;
	ckpt__session *s = ckpt__calloc(1, sizeof(*s));
	if (!s)
		return CKPT_ENOMEM;
	s->refs = 1;
	s->warn = o ? o->warn : NULL;
	s->warn_ctx = o ? o->warn_ctx : NULL;
	ckpt_open_options oo = CKPT_OPEN_OPTIONS_INIT;
	oo.vfs = o ? o->vfs : NULL;
	oo.sync_rules = o ? o->sync_rules : NULL;
	oo.num_sync_rules = o ? o->num_sync_rules : 0;
	int rc = ckpt_reader_open(&s->reader, path, &oo);
	if (rc == CKPT_OK) {
		s->path = ckpt__strdup(ckpt_reader_path(s->reader));
		s->format = ckpt__strdup(ckpt_reader_format(s->reader));
		if (!s->path || !s->format)
			rc = CKPT_ENOMEM;
	}
	/* the session outlives its reader (closed once every value is read): it takes the graph, no copy */
	ckpt_object_graph *g = rc == CKPT_OK ? ckpt__reader_take_object_graph(s->reader) : NULL;
	if (g && g->nnodes == 0) {
		ckpt_object_graph_free(g);
		g = NULL;
	}
	s->graph = g;
	if (g && (size_t)g->nnodes > (size_t)INT32_MAX)
		rc = ckpt__fail(CKPT_ELIMIT, path, NULL, -1, "object graph with %zu nodes", g->nnodes);
	if (rc == CKPT_OK)
		rc = build_values(s);
	if (rc < 0) {
		ckpt__session_unref(s);
		return rc;
	}
	*out = s;
	return CKPT_OK;
}


const ckpt_variable *ckpt__session_bound_var(const ckpt__session *s, int node)
{
	return s->bound_var[node];
}

const char *ckpt__session_path(const ckpt__session *s)
{
	return s->path;
}

ckpt_reader *ckpt__session_reader(ckpt__session *s)
{
	return s->reader;
}

void ckpt__session_consume_key(ckpt__session *s, const char *key)
{
	for (size_t i = 0; i < s->nvals; i++)
		if (strcmp(s->vals[i].key, key) == 0)
			s->vals[i].consumed = 1;
}

size_t ckpt__session_unconsumed(const ckpt__session *s, const char **keys)
{
	size_t n = 0;
	for (size_t i = 0; i < s->nvals; i++) {
		if (s->vals[i].consumed)
			continue;
		if (keys)
			keys[n] = s->vals[i].key;
		n++;
	}
	return n;
}

ckpt_variable *const *ckpt__session_assigned(const ckpt__session *s, size_t *n)
{
	*n = s->nassigned;
	return s->assigned;
}

ckpt_warning_fn ckpt__session_warning(const ckpt__session *s, void **ctx)
{
	*ctx = s->warn_ctx;
	return s->warn;
}

int ckpt__session_note_unfilled(ckpt__session *s, ckpt_variable *v)
{
	if (s->nunfilled == s->capunfilled) {
		size_t nc = s->capunfilled ? s->capunfilled * 2 : 64;
		ckpt_variable **p = ckpt__realloc(s->unfilled, nc * sizeof(*p));
		if (!p)
			return CKPT_ENOMEM;
		s->unfilled = p;
		s->capunfilled = nc;
	}
	s->unfilled[s->nunfilled++] = v;
	return CKPT_OK;
}

ckpt_variable *const *ckpt__session_unfilled(const ckpt__session *s, size_t *n)
{
	*n = s->nunfilled;
	return s->unfilled;
}
