/*
 * Restore into live objects (tf.train.Checkpoint.restore).
 *
 * Phases, so that a failed restore changes no live variable:
 *  1. match: walk the stored object graph from a node and the live tree from
 *     an object in step, by child names (TF's _CheckpointPosition); check
 *     dtype and shape of every matched value (EMISMATCH names the variable
 *     and both shapes); note children and slots that do not exist yet;
 *  2. verify: values that can be read in place (plain and mirrored
 *     variables, checksummed entries) have their checksums verified in the
 *     file; the others (sync-on-read, strings, partitioned entries, values
 *     kept for restore-on-create) are staged in memory;
 *  3. commit: every assignment is checked, then verified values are read
 *     straight into copy 0 and everything is fanned out to every replica
 *     (sync-on-read SUM is split by the variable layer); then the "pending"
 *     records that restore-on-create applies later are attached.
 * No copy of the whole state is made: peak memory is the live variables plus
 * what has to be staged. See ckpt__run_commit for the one failure that can
 * come after a variable was written (the file changing under the restore).
 * String values are read as owned string tensors (not into the arena); in
 * the commit their per-replica copies are built (ckpt__variable_stage_strings)
 * before anything is written and swapped in only after the fixed-size
 * fan-out succeeded, so a failure leaves string variables unchanged too.
 * TF1 name-based files have no object graph: they match live variables by
 * ckpt_variable_name, as TF2's name-based restore does.
 * Across processes (ckpt__run_set_collective) nothing is read in place:
 * every value is staged (this process's part of the bytes when the
 * strategy shares the reading), every assignment prepared, the outcome
 * agreed through the strategy's share_staged, and only then is anything
 * written, from memory: every process restores or none does.
 */
#include <stdlib.h>
#include <string.h>
#include "checkpoint_internal.h"
#include "partitioned_internal.h"
#include "strategy_impl.h"
#include "variable_internal.h"
#include "device_stream.h"

/* ================================================================== */
/* session                                                              */
/* ================================================================== */

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
	size_t nr = ckpt_reader_count(r);
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

/* ================================================================== */
/* one matching run                                                     */
/* ================================================================== */

typedef struct assignment {
	size_t val;
	ckpt_variable *var;
	ckpt_object *owner;  /* variable node that gets source_key */
} assignment;

typedef struct pend_child {
	ckpt_object *obj;
	char *name;         /* owned until attached */
	int node;
} pend_child;

typedef struct pend_slot {
	ckpt_object *opt;
	int orig, slot_node;
	char *slot_name;    /* owned until attached */
} pend_slot;

typedef struct pair {
	int node;
	ckpt_object *obj;
} pair;

struct ckpt__run {
	ckpt__session *s;
	size_t nasg, capasg;
	assignment *asg;
	size_t npc, cappc;
	pend_child *pc;
	size_t nps, capps;
	pend_slot *ps;
	unsigned char *visited;
	ckpt_variable **bound;    /* per node, this run */
	ckpt__ptrmap vars;        /* live variables given a value in this run */
	int fresh;                /* load: every variable is new (ckpt__run_set_fresh) */
	ckpt_strategy *cs;        /* restore across processes (ckpt__run_set_collective) */
};

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

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return CKPT_OK;
	size_t nc = *cap ? *cap * 2 : 8;
	void *p = ckpt__realloc(*arr, nc * elem);
	if (!p)
		return CKPT_ENOMEM;
	*arr = p;
	*cap = nc;
	return CKPT_OK;
}
#define GROW(arr, cap, n) grow((void **)&(arr), &(cap), (n), sizeof(*(arr)))

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
	size_t nn = s->graph ? s->graph->nnodes : 0;
	r->visited = ckpt__calloc(nn ? nn : 1, 1);
	r->bound = ckpt__calloc(nn ? nn : 1, sizeof(*r->bound));
	if (!r->visited || !r->bound) {
		run_free(r);
		return CKPT_ENOMEM;
	}
	*out = r;
	return CKPT_OK;
}


static int stage(ckpt__session *s, const unsigned char *want, void **arena, int parts, int part, uint64_t *bounds);

int ckpt__session_stage_all(ckpt__session *s)
{
	if (!s->reader)
		return CKPT_OK;
	unsigned char *want = ckpt__calloc(s->nvals ? s->nvals : 1, 1);
	void **na = ckpt__realloc(s->arenas, (s->narenas + 1) * sizeof(*na));
	int rc = (!want || !na) ? CKPT_ENOMEM : CKPT_OK;
	if (na)
		s->arenas = na;
	for (size_t i = 0; i < s->nvals && rc == CKPT_OK; i++)
		want[i] = !s->vals[i].t && !s->vals[i].consumed;
	void *arena = NULL;
	if (rc == CKPT_OK)
		rc = stage(s, want, &arena, 1, 0, NULL);
	if (rc == CKPT_OK) {
		if (arena)
			s->arenas[s->narenas++] = arena;
		ckpt_reader_free(s->reader);
		s->reader = NULL;
	}
	ckpt__free(want);
	return rc;
}

/* Drop the tensors staged in the temporary arena (values of this run) and the arena itself. */
static void release_staged(ckpt__session *s, void *arena)
{
	for (size_t i = 0; i < s->nvals; i++) {
		ckpt__value *v = &s->vals[i];
		if (v->temp) {
			ckpt_tensor_free(v->t);
			v->t = NULL;
			v->temp = 0;
		}
	}
	ckpt__buffer_free(arena);
}

/* Drop the values staged for later (restore-on-create) when the commit failed. */
static void release_later(ckpt__session *s, const unsigned char *want, void *arena)
{
	for (size_t i = 0; i < s->nvals; i++) {
		if (want[i]) {
			ckpt_tensor_free(s->vals[i].t);
			s->vals[i].t = NULL;
		}
	}
	ckpt__buffer_free(arena);
}

/*
 * Read the values flagged in `want` into one huge-page arena (fresh 4 KiB
 * pages cost more than the read itself), straight from the reader with
 * checksums verified. The tensors wrap the arena; *arena is freed by the
 * caller once they are released.
 * parts > 1 (a restore whose processes share the reading): the arena's
 * bytes are cut into `parts` equal ranges, each value belongs to the range
 * its first byte is in, and only the values of range `part` are read here
 * (strings, outside the arena, always are); bounds[0..parts] receives where
 * each part's values begin in the arena (bounds[parts]: its size), for the
 * strategy to share them.
 */
static int stage(ckpt__session *s, const unsigned char *want, void **arena, int parts, int part, uint64_t *bounds)
{
	static unsigned char empty[64];
	*arena = NULL;
	uint64_t total = 0;
	for (size_t i = 0; i < s->nvals; i++) {
		if (!want[i] || s->vals[i].dtype == CKPT_DT_STRING)
			continue;
		uint64_t nb;
		ckpt_shape sh;
		ckpt__cshape_expand(&s->vals[i].shape, &sh);
		CKPT_TRY(ckpt_shape_nbytes(&sh, s->vals[i].dtype, &nb));
		if (ckpt__add_u64(total, 63, &total) || ckpt__add_u64(total & ~(uint64_t)63, nb, &total))
			return ckpt__fail(CKPT_ELIMIT, s->path, s->vals[i].key, -1, "checkpoint values exceed 2^64 bytes");
	}
	if (total > SIZE_MAX)
		return ckpt__fail(CKPT_ELIMIT, s->path, NULL, -1, "%llu bytes of values do not fit in memory",
			(unsigned long long)total);
	unsigned char *base = total ? ckpt__buffer_alloc(total, 0) : NULL;
	if (total && !base)
		return CKPT_ENOMEM;
	int rc = CKPT_OK;
	uint64_t off = 0, chunk = parts > 1 ? total / (uint64_t)parts + 1 : 0;
	int next = 0; /* the first part whose start is not known yet */
	size_t i;
	for (i = 0; i < s->nvals && rc == CKPT_OK; i++) {
		ckpt__value *v = &s->vals[i];
		if (!want[i])
			continue;
		ckpt_shape sh;
		ckpt__cshape_expand(&v->shape, &sh);
		if (v->dtype == CKPT_DT_STRING) {
			/* variable-length elements: an owned string tensor, outside the arena */
			rc = ckpt_reader_read(s->reader, v->reader_index, &v->t);
			if (rc == CKPT_OK && (v->t->dtype != CKPT_DT_STRING || !ckpt_shape_equal(&v->t->shape, &sh))) {
				ckpt_tensor_free(v->t);
				v->t = NULL;
				rc = ckpt__fail(CKPT_EFORMAT, s->path, v->key, -1,
					"string entry read back with another dtype or shape than its index entry");
			}
			if (rc < 0)
				ckpt__error_annotate(s->path, v->key);
			continue;
		}
		uint64_t nb;
		ckpt_shape_nbytes(&sh, v->dtype, &nb);
		off = (off + 63) & ~(uint64_t)63;
		unsigned char *dst = nb ? base + off : empty;
		int owner = parts > 1 ? (int)(off / chunk) : part;
		while (bounds && next <= owner)
			bounds[next++] = off;
		rc = nb && owner == part ? ckpt_reader_read_into(s->reader, v->reader_index, dst, (size_t)nb) : CKPT_OK;
		if (rc == CKPT_EUNSUPPORTED) {
			/* e.g. a partitioned entry the backend only assembles in ckpt_reader_read */
			ckpt_tensor *t;
			if ((rc = ckpt_reader_read(s->reader, v->reader_index, &t)) == CKPT_OK) {
				if (t->nbytes == nb)
					memcpy(dst, t->data, (size_t)nb);
				else
					rc = ckpt__fail(CKPT_EFORMAT, s->path, v->key, -1, "entry has %llu bytes, want %llu",
						(unsigned long long)t->nbytes, (unsigned long long)nb);
				ckpt_tensor_free(t);
			}
		}
		if (rc == CKPT_OK)
			rc = ckpt_tensor_wrap(&v->t, v->dtype, &sh, dst, nb);
		if (rc < 0)
			ckpt__error_annotate(s->path, v->key);
		off += nb;
	}
	if (rc < 0) {
		for (size_t k = 0; k < i; k++) {
			if (want[k]) {
				ckpt_tensor_free(s->vals[k].t);
				s->vals[k].t = NULL;
			}
		}
		ckpt__buffer_free(base);
		return rc;
	}
	while (bounds && next <= parts)
		bounds[next++] = total;
	*arena = base;
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
	return ckpt__fail(CKPT_EMISMATCH, s->path, ckpt_variable_name(var), -1,
		"cannot restore variable '%s' from '%s': the checkpoint has %s %s, the live variable is %s %s; "
		"nothing was restored",
		ckpt_variable_name(var), v->key, ckpt_dtype_name(v->dtype), a, ckpt_dtype_name(ckpt_variable_dtype(var)), b);
}

static int add_assignment(ckpt__run *r, size_t val, ckpt_variable *var, ckpt_object *owner)
{
	if (ckpt__ptrmap_get(&r->vars, var) >= 0)
		return CKPT_OK; /* one value per live variable per run: the first match wins */
	CKPT_TRY(check_value(r->s, &r->s->vals[val], var));
	CKPT_TRY(ckpt__ptrmap_put(&r->vars, var, 1));
	CKPT_TRY(GROW(r->asg, r->capasg, r->nasg));
	r->asg[r->nasg++] = (assignment){ val, var, owner };
	return CKPT_OK;
}

/* Values of stored node `n` into the attributes of `obj`. */
static int match_values(ckpt__run *r, int n, ckpt_object *obj)
{
	ckpt__session *s = r->s;
	for (size_t i = s->node_first[n]; i < s->node_first[n + 1]; i++) {
		ckpt__value *v = &s->vals[i];
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

static int run_match(ckpt__run *r, int start, ckpt_object *obj)
{
	ckpt__session *s = r->s;
	const ckpt_object_graph *g = s->graph;
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
			ckpt_variable *prim = r->bound[orig] ? r->bound[orig] : s->bound_var[orig];
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
	ckpt__session *s = r->s;
	size_t nflat = s->nvals - s->nflat_first;
	named_value *idx = ckpt__calloc(nflat ? nflat : 1, sizeof(*idx));
	if (!idx)
		return CKPT_ENOMEM;
	size_t n = 0;
	for (size_t k = s->nflat_first; k < s->nvals; k++)
		if (!s->vals[k].consumed)
			idx[n++] = (named_value){ s->vals[k].key, k };
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
	if (r->s->graph)
		CKPT_TRY(run_match(r, 0, root));
	if (r->s->nflat_first < r->s->nvals)
		return run_match_names(r, root);
	return CKPT_OK;
}

static int reserve_pending(ckpt__run *r)
{
	/* room for every record, so that attaching cannot fail after values were assigned */
	for (size_t i = 0; i < r->npc; i++) {
		ckpt_object *o = r->pc[i].obj;
		size_t need = o->npchild + r->npc;
		if (need > o->cappchild) {
			void *p = ckpt__realloc(o->pchild, need * sizeof(*o->pchild));
			if (!p)
				return CKPT_ENOMEM;
			o->pchild = p;
			o->cappchild = need;
		}
	}
	for (size_t i = 0; i < r->nps; i++) {
		ckpt_object *o = r->ps[i].opt;
		size_t need = o->npslot + r->nps;
		if (need > o->cappslot) {
			void *p = ckpt__realloc(o->pslot, need * sizeof(*o->pslot));
			if (!p)
				return CKPT_ENOMEM;
			o->pslot = p;
			o->cappslot = need;
		}
	}
	return CKPT_OK;
}

static void drop_names(ckpt__run *r)
{
	for (size_t i = 0; i < r->npc; i++)
		ckpt__free(r->pc[i].name);
	for (size_t i = 0; i < r->nps; i++)
		ckpt__free(r->ps[i].slot_name);
	r->npc = r->nps = 0;
}

/*
 * A value read straight into copy 0 of its variable (no staging): the
 * variable is plain or mirrored, the entry has a stored crc32c and is not
 * partitioned, and no other variable of this run takes the same value.
 */
typedef struct direct {
	int rollback;        /* mirrored: copy 1 still holds the old value */
	size_t val;
	size_t entry;        /* reader index */
	ckpt_variable *var;
	void *dst;           /* copy 0 */
	size_t n;
} direct;

/* Entries from this size on go one at a time: the reader spreads each over the threads. */
#define DIRECT_BIG ((size_t)8 << 20)
/* Below this many bytes in all, a thread team costs more than it saves. */
#define DIRECT_PARALLEL_MIN ((uint64_t)4 << 20)

static int direct_one(ckpt_reader *rd, const direct *d, int read)
{
	return read ? ckpt_reader_read_into(rd, d->entry, d->dst, d->n) : ckpt_reader_verify(rd, d->entry);
}

/*
 * Verify (read = 0) or read (read = 1) every direct value: big entries one
 * after the other, the rest spread over an OpenMP team. touched[i] is set
 * before value i is read. The error of the lowest failing index is raised.
 */
static int run_direct(ckpt_reader *rd, const direct *d, size_t n, int read, unsigned char *touched)
{
	/*
	 * Reads go to the backend as one batch first: a cold TensorBundle is read
	 * with several O_DIRECT requests in flight. Verification passes stay entry
	 * by entry: they are followed by the reads, which want the page cache the
	 * verification filled.
	 */
	ckpt__read_req *req = read && n ? ckpt__malloc(n * sizeof(*req)) : NULL;
	if (req) {
		for (size_t i = 0; i < n; i++)
			req[i] = (ckpt__read_req){ d[i].entry, d[i].dst, d[i].n };
		int rc = ckpt__reader_read_many(rd, req, n);
		ckpt__free(req);
		if (rc != CKPT__DECLINED) {
			if (touched)
				memset(touched, 1, n);
			return rc;
		}
	} else if (read && n) {
		ckpt_error_clear(); /* no room for the batch: entry by entry */
	}
	uint64_t small = 0;
	for (size_t i = 0; i < n; i++) {
		if (d[i].n < DIRECT_BIG) {
			small += d[i].n;
			continue;
		}
		if (touched)
			touched[i] = 1;
		CKPT_TRY(direct_one(rd, &d[i], read));
	}
	ckpt__error_slot slot = { 0 };
	long first = -1;
	int err = CKPT_OK, failed = 0;
	long nn = (long)n;
	#pragma omp parallel for schedule(dynamic, 8) if (small >= DIRECT_PARALLEL_MIN)
	for (long i = 0; i < nn; i++) {
		int stop;
		#pragma omp atomic read
		stop = failed;
		if (stop || d[i].n >= DIRECT_BIG)
			continue;
		if (touched)
			touched[i] = 1;
		int e = direct_one(rd, &d[i], read);
		if (e < 0) {
			#pragma omp critical(ckpt_restore_direct)
			{
				if (first < 0 || i < first) {
					first = i;
					err = e;
					ckpt__error_capture(&slot);
				}
				#pragma omp atomic write
				failed = 1;
			}
		}
	}
	if (first >= 0) {
		ckpt__error_raise(&slot);
		ckpt__error_slot_clear(&slot);
	}
	return err;
}

/*
 * A direct read failed after every check had passed (the file changed while
 * it was read, or the device failed): put mirrored copies 0 back from copy 1;
 * a plain variable has no second copy, so say which ones may be partial.
 */
static void undo_direct(ckpt__session *s, const direct *d, size_t n, const unsigned char *touched)
{
	ckpt__error_slot slot = { 0 };
	ckpt__error_capture(&slot);
	size_t lost = 0;
	const char *first = NULL;
	for (size_t i = 0; i < n; i++) {
		if (touched[i] && !ckpt__variable_rollback_primary(d[i].var)) {
			if (!lost++)
				first = ckpt_variable_name(d[i].var);
		}
	}
	if (lost)
		ckpt__warn(s->warn, s->warn_ctx,
			"restore from %s failed after its checksums were verified (the file changed or the device "
			"failed while it was read): %zu plain variable(s), first '%s', may hold partial values",
			s->path, lost, first);
	ckpt__error_raise(&slot);
	ckpt__error_slot_clear(&slot);
}

static int cmp_rollback_first(const void *a, const void *b)
{
	const direct *x = a, *y = b;
	if (x->rollback != y->rollback)
		return y->rollback - x->rollback;
	return x->val < y->val ? -1 : x->val > y->val; /* keep file order within each group */
}

/* Whether value `val` of this run can be read in place into `var`. */
static int can_read_direct(const ckpt__session *s, const ckpt__value *v, ckpt_variable *var, unsigned uses)
{
	if (!s->reader || v->t || v->initialized || uses != 1 || v->dtype == CKPT_DT_STRING ||
	    !ckpt__variable_direct_restorable(var))
		return 0;
	const ckpt_var_info *vi = ckpt_reader_var(s->reader, v->reader_index);
	return vi && vi->has_crc32c && vi->nslices == 0;
}

/*
 * Whether value `val` goes to a device variable through the pinned ring
 * (device_stream.h): as can_read_direct, for copies only the provider may
 * touch. Sync-on-read ones are staged (their copies differ: no rollback).
 */
static int can_stream(const ckpt__session *s, const ckpt__value *v, ckpt_variable *var, unsigned uses)
{
	if (!s->reader || v->t || v->initialized || uses != 1 || v->dtype == CKPT_DT_STRING ||
	    !ckpt__variable_on_device(var) || ckpt_variable_kind(var) == CKPT_VAR_SYNC_ON_READ ||
	    ckpt_variable_nbytes(var) == 0)
		return 0;
	const ckpt_var_info *vi = ckpt_reader_var(s->reader, v->reader_index);
	return vi && vi->has_crc32c && vi->nslices == 0;
}

/* Stream every value of `d` into copy 0 of its device variable; touched[i] is set before value i is written. */
static int run_stream(ckpt_reader *rd, const direct *d, size_t n, unsigned char *touched)
{
	ckpt__ring ring = { 0 };
	int rc = CKPT_OK;
	for (size_t i = 0; i < n && rc == CKPT_OK; i++) {
		touched[i] = 1;
		rc = ckpt__ring_stream(&ring, ckpt__strategy_mem(ckpt_variable_strategy(d[i].var)), rd, d[i].entry, d[i].dst,
			d[i].n, ckpt_variable_name(d[i].var));
	}
	ckpt__ring_free(&ring);
	return rc;
}

/*
 * Commit one run, all or nothing:
 *  1. stage what cannot be read in place (sync-on-read, strings, partitioned
 *     or unchecksummed entries, values shared by several variables) and what
 *     restore-on-create needs later; verify in the file the checksums of the
 *     plain variables' values (bounded buffers, no copy of the state);
 *  2. check every assignment and allocate everything the commit needs;
 *  3. read straight into copy 0, checksums verified on the way: mirrored
 *     variables first (a failure puts copy 0 back from copy 1), then the
 *     plain ones, verified in step 1;
 *  4. fan out to the other copies, swap in strings, attach pending records.
 * Steps 1–2 change nothing; a failure in step 3 is undone for mirrored
 * variables, and for plain ones it needs the file to change under us after
 * step 1 (undo_direct warns); step 4 cannot fail. Across processes there is
 * no step 3: between 2 and 4 the processes agree (and share staged parts).
 */
int ckpt__run_commit(ckpt__run *r)
{
	ckpt__session *s = r->s;
	size_t need = s->nassigned + r->nasg;
	if (need > s->capassigned) {
		ckpt_variable **na = ckpt__realloc(s->assigned, (need ? need : 1) * sizeof(*na));
		if (!na)
			return r->cs ? ckpt__strategy_ops_of(r->cs)->share_staged(r->cs, CKPT_ENOMEM, 0, NULL, NULL) : CKPT_ENOMEM;
		s->assigned = na;
		s->capassigned = need;
	}
	size_t nv = s->nvals ? s->nvals : 1, na1 = r->nasg ? r->nasg : 1;
	unsigned char *uses = ckpt__calloc(nv, 1);
	unsigned char *want_now = ckpt__calloc(nv, 1), *want_later = ckpt__calloc(nv, 1);
	unsigned char *touched = ckpt__calloc(na1, 1), *is_direct = ckpt__calloc(na1, 1);
	direct *dir = ckpt__calloc(na1, sizeof(*dir));
	/* device variables: streamed through the pinned ring into copy 0, like dir */
	direct *str = ckpt__calloc(na1, sizeof(*str));
	unsigned char *str_touched = ckpt__calloc(na1, 1);
	char **keys = ckpt__calloc(na1, sizeof(char *));
	ckpt_variable **vars = ckpt__calloc(na1, sizeof(*vars));
	const void **srcs = ckpt__calloc(na1, sizeof(*srcs));
	size_t *sizes = ckpt__calloc(na1, sizeof(*sizes));
	/* string values: per-replica copies built now, swapped in after the fan-out */
	ckpt_variable **svars = ckpt__calloc(na1, sizeof(*svars));
	void **sstaged = ckpt__calloc(na1, sizeof(*sstaged));
	void **arenas = s->reader ? ckpt__realloc(s->arenas, (s->narenas + 1) * sizeof(*arenas)) : s->arenas;
	if (arenas)
		s->arenas = arenas;
	/* across processes: this process's part of the reading, and where each part lies in the arenas */
	int parts = 1, part = 0;
	if (r->cs && ckpt__strategy_ops_of(r->cs)->restore_parts)
		parts = ckpt__strategy_ops_of(r->cs)->restore_parts(r->cs, &part);
	uint64_t *bnow = parts > 1 ? ckpt__calloc((size_t)parts + 1, sizeof(*bnow)) : NULL;
	uint64_t *blater = parts > 1 ? ckpt__calloc((size_t)parts + 1, sizeof(*blater)) : NULL;
	int rc = (!uses || !want_now || !want_later || !touched || !is_direct || !dir || !str || !str_touched || !keys || !vars || !srcs || !sizes ||
		!svars || !sstaged || (s->reader && !arenas) || (parts > 1 && (!bnow || !blater))) ? CKPT_ENOMEM : CKPT_OK;
	void *now = NULL, *later = NULL;
	ckpt__assign_plan *plan = NULL;
	size_t ndir = 0, nrb = 0, nwrite = 0, nstr = 0, nstream = 0, nsrb = 0;

	/* 1. stage and verify */
	for (size_t i = 0; i < r->nasg && rc == CKPT_OK; i++)
		if (uses[r->asg[i].val] < 2)
			uses[r->asg[i].val]++;
	for (size_t i = 0; i < r->nasg && rc == CKPT_OK; i++) {
		const assignment *a = &r->asg[i];
		ckpt__value *v = &s->vals[a->val];
		if (!r->cs && can_read_direct(s, v, a->var, uses[a->val])) {
			is_direct[i] = 1;
			dir[ndir++] = (direct){ r->fresh || ckpt_variable_num_replicas(a->var) > 1, a->val, v->reader_index, a->var,
				ckpt__variable_data(a->var, 0), (size_t)ckpt_variable_nbytes(a->var) };
		} else if (!r->cs && can_stream(s, v, a->var, uses[a->val])) {
			is_direct[i] = 1;
			str[nstream++] = (direct){ r->fresh || ckpt_variable_num_replicas(a->var) > 1, a->val, v->reader_index,
				a->var, ckpt__variable_data(a->var, 0), (size_t)ckpt_variable_nbytes(a->var) };
		} else if (!v->t && s->reader)
			want_now[a->val] = 1;
	}
	if (rc == CKPT_OK && s->reader) {
		for (size_t i = 0; i < s->nvals; i++)
			want_later[i] = !want_now[i] && !s->vals[i].t && !s->vals[i].consumed;
		for (size_t i = 0; i < ndir; i++)
			want_later[dir[i].val] = 0;
		for (size_t i = 0; i < nstream; i++)
			want_later[str[i].val] = 0;
		rc = stage(s, want_now, &now, parts, part, bnow);
		for (size_t i = 0; i < s->nvals && rc == CKPT_OK; i++)
			s->vals[i].temp = want_now[i];
		if (rc == CKPT_OK)
			rc = stage(s, want_later, &later, parts, part, blater);
		/* rollbackable values first; only the others need a verification pass */
		int src = ckpt__sort(dir, ndir, sizeof(*dir), cmp_rollback_first); /* nearly sorted: built in value order */
		if (rc == CKPT_OK)
			rc = src;
		while (nrb < ndir && dir[nrb].rollback)
			nrb++;
		if (rc == CKPT_OK)
			rc = run_direct(s->reader, dir + nrb, ndir - nrb, 0, NULL);
		/* device values without a second copy to roll back from are verified in the file first, too */
		int ssrc = ckpt__sort(str, nstream, sizeof(*str), cmp_rollback_first);
		if (rc == CKPT_OK)
			rc = ssrc;
		while (nsrb < nstream && str[nsrb].rollback)
			nsrb++;
		if (rc == CKPT_OK)
			rc = run_direct(s->reader, str + nsrb, nstream - nsrb, 0, NULL);
	}

	/* 2. check and allocate */
	for (size_t i = 0; i < r->nasg && rc == CKPT_OK; i++) {
		const assignment *a = &r->asg[i];
		const ckpt__value *v = &s->vals[a->val];
		const ckpt_tensor *t = v->t;
		if (!(keys[i] = ckpt__strdup(v->key)))
			rc = CKPT_ENOMEM;
		else if (is_direct[i]) {
			vars[nwrite] = a->var;
			srcs[nwrite] = ckpt__variable_data(a->var, 0);
			sizes[nwrite] = (size_t)ckpt_variable_nbytes(a->var);
			nwrite++;
		} else if (!t)
			rc = ckpt__fail(CKPT_ERROR, s->path, v->key, -1, "value was released before use");
		else if (v->initialized)
			continue; /* load already created the variable with this value */
		else if (t->dtype == CKPT_DT_STRING) {
			rc = ckpt__variable_stage_strings(a->var, t, &sstaged[nstr]);
			if (rc == CKPT_OK)
				svars[nstr++] = a->var;
			else
				ckpt__error_annotate(s->path, v->key);
		} else {
			vars[nwrite] = a->var;
			srcs[nwrite] = t->data;
			sizes[nwrite] = (size_t)t->nbytes;
			nwrite++;
		}
	}
	if (rc == CKPT_OK)
		rc = reserve_pending(r);
	if (rc == CKPT_OK)
		rc = ckpt__assign_plan_new(&plan, vars, srcs, sizes, nwrite);
	/* across processes: everything staged and prepared everywhere, or nobody assigns */
	if (r->cs) {
		void *bases[2] = { now, later };
		const uint64_t *bounds[2] = { bnow, blater };
		rc = ckpt__strategy_ops_of(r->cs)->share_staged(r->cs, rc, 2, bases, bounds);
	}

	/* 3. read in place (checksums verified as they are read): mirrored values
	 * first, so a bad one is undone before any plain variable is written */
	/* device values first (a failing device then has touched no host variable), rollbackable ones first */
	if (rc == CKPT_OK && nstream) {
		rc = run_stream(s->reader, str, nstream, str_touched);
		if (rc < 0 && !r->fresh)
			undo_direct(s, str, nstream, str_touched);
	}
	if (rc == CKPT_OK && ndir) {
		rc = run_direct(s->reader, dir, nrb, 1, touched);
		if (rc == CKPT_OK)
			rc = run_direct(s->reader, dir + nrb, ndir - nrb, 1, touched + nrb);
		if (rc < 0 && !r->fresh) {
			undo_direct(s, dir, ndir, touched);
			undo_direct(s, str, nstream, str_touched);
		}
	}

	/* 4. fan out and swap in: cannot fail on the host (device copies: only the provider can) */
	if (rc == CKPT_OK)
		rc = ckpt__assign_plan_run(plan);
	ckpt__assign_plan_free(plan);
	for (size_t i = 0; i < nstr; i++) {
		if (rc == CKPT_OK)
			ckpt__variable_commit_strings(svars[i], sstaged[i]);
		else
			ckpt__variable_discard_strings(svars[i], sstaged[i]);
	}
	if (rc == CKPT_OK && s->reader) {
		if (later)
			s->arenas[s->narenas++] = later;
		later = NULL;
		ckpt_reader_free(s->reader);
		s->reader = NULL;
	}
	if (later)
		release_later(s, want_later, later);
	ckpt__free(uses);
	ckpt__free(want_now);
	ckpt__free(want_later);
	ckpt__free(touched);
	ckpt__free(is_direct);
	ckpt__free(dir);
	ckpt__free(str);
	ckpt__free(str_touched);
	ckpt__free(vars);
	ckpt__free(srcs);
	ckpt__free(sizes);
	ckpt__free(svars);
	ckpt__free(sstaged);
	ckpt__free(bnow);
	ckpt__free(blater);
	if (rc < 0) {
		for (size_t i = 0; keys && i < r->nasg; i++)
			ckpt__free(keys[i]);
		ckpt__free(keys);
		release_staged(s, now);
		return rc;
	}
	for (size_t i = 0; i < r->nasg; i++) {
		assignment *a = &r->asg[i];
		s->assigned[s->nassigned++] = a->var;
		/* where the key is reported: the variable node, or the attribute of any other object */
		char **sk = a->owner->is_var_node ? &a->owner->source_key : NULL;
		for (size_t k = 0; !sk && k < a->owner->nattrs; k++)
			if (a->owner->attrs[k].var == a->var)
				sk = &a->owner->attrs[k].source_key;
		if (keys[i] && sk) {
			ckpt__free(*sk);
			*sk = keys[i];
			keys[i] = NULL;
		}
	}
	for (size_t i = 0; i < r->nasg; i++) {
		ckpt__value *v = &s->vals[r->asg[i].val];
		if (v->node >= 0 && !*v->suffix && strcmp(v->attr, CKPT_VARIABLE_VALUE_KEY) == 0)
			s->bound_var[v->node] = r->asg[i].var;
		if (!v->consumed) {
			v->consumed = 1;
			ckpt_tensor_free(v->t);
			v->t = NULL;
		}
	}
	ckpt__free(keys);
	release_staged(s, now);
	for (size_t i = 0; i < r->npc; i++) {
		ckpt_object *o = r->pc[i].obj;
		ckpt__session_ref(s);
		o->pchild[o->npchild++] = (ckpt__pending_child){ r->pc[i].name, s, r->pc[i].node };
	}
	for (size_t i = 0; i < r->nps; i++) {
		ckpt_object *o = r->ps[i].opt;
		ckpt__session_ref(s);
		o->pslot[o->npslot++] = (ckpt__pending_slot){ s, r->ps[i].orig, r->ps[i].slot_name,
			r->ps[i].slot_node };
	}
	r->npc = r->nps = 0; /* names now belong to the objects */
	return CKPT_OK;
}

void ckpt__run_discard(ckpt__run *r)
{
	if (!r)
		return;
	drop_names(r);
	run_free(r);
}

/* ================================================================== */
/* restore-on-create                                                    */
/* ================================================================== */

int ckpt__apply_pending_child(ckpt_object *parent, const char *name, ckpt_object *child)
{
	/* the most recent restore wins */
	size_t found = SIZE_MAX;
	for (size_t i = parent->npchild; i-- > 0;) {
		if (strcmp(parent->pchild[i].name, name) == 0) {
			found = i;
			break;
		}
	}
	if (found == SIZE_MAX)
		return CKPT_OK;
	ckpt__pending_child pc = parent->pchild[found];
	ckpt__run *r;
	CKPT_TRY(ckpt__run_new(&r, pc.s));
	int rc = run_match(r, pc.node, child);
	if (rc == CKPT_OK)
		rc = ckpt__run_commit(r);
	ckpt__run_discard(r);
	if (rc < 0)
		return rc;
	/* consumed: drop every record for this name */
	size_t j = 0;
	for (size_t i = 0; i < parent->npchild; i++) {
		if (strcmp(parent->pchild[i].name, name) == 0) {
			ckpt__session_unref(parent->pchild[i].s);
			ckpt__free(parent->pchild[i].name);
		} else {
			parent->pchild[j++] = parent->pchild[i];
		}
	}
	parent->npchild = j;
	return CKPT_OK;
}

int ckpt__apply_pending_slot(ckpt_object *opt, ckpt_variable *primary, const char *slot_name, ckpt_object *node)
{
	size_t found = SIZE_MAX;
	for (size_t i = opt->npslot; i-- > 0;) {
		ckpt__pending_slot *p = &opt->pslot[i];
		if (strcmp(p->slot_name, slot_name) == 0 && p->s->bound_var[p->orig_node] == primary) {
			found = i;
			break;
		}
	}
	if (found == SIZE_MAX)
		return CKPT_OK;
	ckpt__pending_slot ps = opt->pslot[found];
	ckpt__run *r;
	CKPT_TRY(ckpt__run_new(&r, ps.s));
	r->visited[ps.slot_node] = 1;
	int rc = match_values(r, ps.slot_node, node);
	if (rc == CKPT_OK)
		rc = ckpt__run_commit(r);
	ckpt__run_discard(r);
	if (rc < 0)
		return rc;
	ckpt__session_unref(ps.s);
	ckpt__free(ps.slot_name);
	memmove(&opt->pslot[found], &opt->pslot[found + 1], (opt->npslot - found - 1) * sizeof(*opt->pslot));
	opt->npslot--;
	return CKPT_OK;
}

/* ================================================================== */
/* public entry point                                                   */
/* ================================================================== */

int ckpt_checkpoint_restore(ckpt_restore_status **status, ckpt_checkpoint *ck, const char *path)
{
	if (status)
		*status = NULL;
	if (!ck || !path)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_checkpoint_restore: NULL argument");
	CKPT_TRY(ckpt__check_not_replica("ckpt_checkpoint_restore"));
	/* multi-process: every process agrees before any assigns, so all restore or none does */
	ckpt_strategy *cs = ckpt__checkpoint_collective(ck);
	ckpt__session *s;
	int rc = ckpt__session_open(&s, path, &ck->opts);
	if (rc < 0)
		return cs ? ckpt__strategy_ops_of(cs)->agree(cs, rc) : rc;
	/* like TF, restoring a file that has a save_counter creates ours */
	if (s->graph) {
		const ckpt_og_node *root = &s->graph->nodes[0];
		for (size_t c = 0; c < root->nchildren; c++) {
			if (strcmp(root->children[c].local_name, "save_counter") == 0 &&
				!ckpt__object_edge(ck->root, "save_counter")) {
				ckpt_variable *v;
				rc = ckpt_checkpoint_save_counter_variable(&v, ck);
				break;
			}
		}
	}
	ckpt__run *r = NULL;
	ckpt_restore_status *st = NULL;
	if (rc == CKPT_OK)
		rc = ckpt__run_new(&r, s);
	if (rc == CKPT_OK)
		rc = ckpt__run_match_root(r, ck->root);
	/* partitioned variables: each part's rows read (only those) and checked now, assigned at commit */
	ckpt__partitioned_restore *pr = NULL;
	rc = ckpt__partitioned_stage(&pr, ck, s, cs, rc);
	/* the status first: nothing may fail once values are assigned */
	if (rc == CKPT_OK && status)
		rc = ckpt__restore_status_new(&st, s, ck);
	if (cs)
		rc = ckpt__strategy_ops_of(cs)->agree(cs, rc);
	/* across processes the commit stages everything, agrees, and only then assigns: its status is agreed */
	if (rc == CKPT_OK && cs)
		ckpt__run_set_collective(r, cs);
	if (rc == CKPT_OK)
		rc = ckpt__run_commit(r);
	/* partitioned parts were read and checked before the agreement: assigning them cannot fail (device parts: only the provider can) */
	if (rc == CKPT_OK)
		rc = ckpt__partitioned_commit(pr);
	ckpt__partitioned_restore_free(pr);
	ckpt__run_discard(r);
	if (rc < 0) {
		if (st)
			ckpt_restore_status_expect_partial(st);
		ckpt_restore_status_free(st);
		st = NULL;
	}
	if (status)
		*status = st;
	ckpt__session_unref(s);
	return rc;
}

void ckpt_checkpoint_discard_pending(ckpt_checkpoint *ck)
{
	if (!ck)
		return;
	ckpt__plan p;
	if (ckpt__plan_build(&p, ck->root) < 0) {
		ckpt_error_clear();
		return;
	}
	for (size_t i = 0; i < p.n; i++) {
		ckpt_object *o = p.nodes[i].obj;
		for (size_t k = 0; k < o->npchild; k++) {
			ckpt__session_unref(o->pchild[k].s);
			ckpt__free(o->pchild[k].name);
		}
		for (size_t k = 0; k < o->npslot; k++) {
			ckpt__session_unref(o->pslot[k].s);
			ckpt__free(o->pslot[k].slot_name);
		}
		o->npchild = o->npslot = 0;
	}
	ckpt__plan_free(&p);
}
