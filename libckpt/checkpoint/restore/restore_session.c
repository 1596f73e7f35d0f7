/*
 * The restore session (ckpt__session, refcounted): a stored checkpoint
 * opened for restoring, its object graph and one record per stored value,
 * sorted by node. The reader stays open while values wait in the file for
 * restore-on-create (restore_session.h). Restore runs (checkpoint_restore.c) match and consume the
 * values; objects keep references for restore-on-create. The session is
 * the only owner of its values, strings and arenas, and this file the only
 * one that sees its fields (restore_session.h).
 */
#include <stdlib.h>
#include <string.h>
#include "checkpoint/checkpoint_internal.h"
#include "restore_session.h"

struct ckpt__session {
	int refs;
	char *path;                  /* resolved */
	char *format;
	ckpt_object_graph *graph;    /* NULL for name-based files; taken from the reader */
	ckpt__strpool strings;       /* the values' keys and the dims of their shapes */
	size_t nvals;
	ckpt__value *vals;           /* sorted by node, then attribute order */
	size_t *node_first;          /* per node: first value index (nnodes + 1 entries) */
	ckpt_variable **bound_var;   /* per node: live variable it restored into (compared, never dereferenced) */
	size_t nflat_first;          /* values [nflat_first, nvals): node -1, no attribute refers to them */
	size_t nassigned, capassigned;
	ckpt_variable **assigned;    /* every live variable a value went to */
	ckpt_warning_fn warn;
	void *warn_ctx;
	int single_pass;             /* ckpt_checkpoint_options.restore_single_pass */
	int hold_deferred;           /* the source goes away after the restore: deferred values are kept in memory */
	ckpt_reader *reader;         /* open while values wait in the file (restore-on-create), or until load read them all */
	void **arenas;               /* staged values kept for restore-on-create */
	size_t narenas;
	ckpt_variable **unfilled;    /* load: variables it created without a value (compared, never dereferenced) */
	size_t nunfilled, capunfilled;
	uint64_t stored_bytes;       /* the stored values' bytes, as the index gives them (slices counted in their entry) */
};


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
	s->single_pass = o && o->version >= 3 ? o->restore_single_pass : 0;
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
	for (size_t i = 0; rc == CKPT_OK && i < ckpt_reader_num_entries(s->reader); i++) {
		const ckpt_var_info *vi = ckpt_reader_var(s->reader, i);
		if (vi && !vi->slice_part)
			s->stored_bytes += vi->nbytes;
	}
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

uint64_t ckpt__session_stored_bytes(const ckpt__session *s)
{
	return s->stored_bytes;
}

ckpt_reader *ckpt__session_reader(const ckpt__session *s)
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

int ckpt__session_single_pass(const ckpt__session *s)
{
	return s->single_pass;
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

/* ---- accessors ---- */

const ckpt_object_graph *ckpt__session_graph(const ckpt__session *s)
{
	return s->graph;
}

size_t ckpt__session_nvals(const ckpt__session *s)
{
	return s->nvals;
}

const ckpt__value *ckpt__session_value(const ckpt__session *s, size_t i)
{
	return &s->vals[i];
}

void ckpt__session_node_values(const ckpt__session *s, int node, size_t *first, size_t *end)
{
	*first = s->node_first[node];
	*end = s->node_first[node + 1];
}

void ckpt__session_flat_values(const ckpt__session *s, size_t *first, size_t *end)
{
	*first = s->nflat_first;
	*end = s->nvals;
}

void ckpt__session_mark_initialized(ckpt__session *s, size_t i)
{
	s->vals[i].initialized = 1;
}

void ckpt__session_consume(ckpt__session *s, size_t i, ckpt_variable *var)
{
	ckpt__value *v = &s->vals[i];
	if (v->node >= 0 && !*v->suffix && strcmp(v->attr, CKPT_VARIABLE_VALUE_KEY) == 0)
		s->bound_var[v->node] = var;
	if (!v->consumed) {
		v->consumed = 1;
		ckpt_tensor_free(v->t);
		v->t = NULL;
	}
}

int ckpt__session_reserve_assigned(ckpt__session *s, size_t n)
{
	size_t need = s->nassigned + n;
	if (need > s->capassigned) {
		ckpt_variable **na = ckpt__realloc(s->assigned, (need ? need : 1) * sizeof(*na));
		if (!na)
			return CKPT_ENOMEM;
		s->assigned = na;
		s->capassigned = need;
	}
	return CKPT_OK;
}

void ckpt__session_push_assigned(ckpt__session *s, ckpt_variable *var)
{
	s->assigned[s->nassigned++] = var;
}

/* ---- staging: the values read into arenas the session keeps ---- */

int ckpt__session_reserve_arena(ckpt__session *s)
{
	void **na = ckpt__realloc(s->arenas, (s->narenas + 1) * sizeof(*na));
	if (!na)
		return CKPT_ENOMEM;
	s->arenas = na;
	return CKPT_OK;
}

void ckpt__session_keep_arena(ckpt__session *s, void *arena)
{
	s->arenas[s->narenas++] = arena;
}

void ckpt__session_hold_deferred(ckpt__session *s)
{
	s->hold_deferred = 1;
}

int ckpt__session_holds_deferred(const ckpt__session *s)
{
	return s->hold_deferred;
}

void ckpt__session_close_reader(ckpt__session *s)
{
	ckpt_reader_free(s->reader);
	s->reader = NULL;
}

void ckpt__session_close_if_done(ckpt__session *s)
{
	if (s->reader && ckpt__session_unconsumed(s, NULL) == 0)
		ckpt__session_close_reader(s);
	else
		ckpt__reader_trim(s->reader); /* kept for restore-on-create: its index, not its read buffers */
}

void ckpt__session_mark_temp(ckpt__session *s, const unsigned char *want)
{
	for (size_t i = 0; i < s->nvals; i++)
		s->vals[i].temp = want[i];
}

void ckpt__session_release_temp(ckpt__session *s, void *arena)
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

void ckpt__session_release(ckpt__session *s, const unsigned char *want, void *arena)
{
	for (size_t i = 0; i < s->nvals; i++) {
		if (want[i]) {
			ckpt_tensor_free(s->vals[i].t);
			s->vals[i].t = NULL;
		}
	}
	ckpt__buffer_free(arena);
}

/* The data file of value v (its shard's, where the reader says), for messages. */
static const char *value_file(const ckpt__session *s, const ckpt__value *v, int64_t *offset)
{
	const ckpt_var_info *vi = s->reader ? ckpt_reader_var(s->reader, v->reader_index) : NULL;
	const char *f = vi && vi->shard >= 0 ? ckpt_reader_shard_path(s->reader, vi->shard, NULL) : NULL;
	*offset = vi ? vi->offset : -1;
	return f ? f : s->path;
}

/* A deferred value without a stored crc32c, read now: is it what the restore that deferred it saw? */
static int check_deferred(const ckpt__session *s, const ckpt__value *v, const void *p, uint64_t nb)
{
	uint32_t got = ckpt_crc32c_extend(0, p, (size_t)nb);
	if (got == v->crc)
		return CKPT_OK;
	int64_t off;
	const char *f = value_file(s, v, &off);
	return ckpt__fail(CKPT_ECHECKSUM, f, v->key, off,
		"crc32c mismatch: want 0x%08x (the bytes ckpt_checkpoint_restore read), got 0x%08x (%llu bytes)",
		v->crc, got, (unsigned long long)nb);
}

/* Whether deferred value i needs a crc32c of its own: its entry stores none the reader checks. */
static int needs_crc(const ckpt__session *s, size_t i, uint64_t *nb)
{
	const ckpt__value *v = &s->vals[i];
	*nb = 0;
	if (v->has_crc || v->t || v->consumed || v->dtype == CKPT_DT_STRING)
		return 0;
	const ckpt_var_info *vi = ckpt_reader_var(s->reader, v->reader_index);
	if (vi && vi->has_crc32c && vi->nslices == 0)
		return 0;
	ckpt_shape sh;
	ckpt__cshape_expand(&v->shape, &sh);
	return ckpt_shape_nbytes(nb, &sh, v->dtype) == CKPT_OK && *nb > 0;
}

int ckpt__session_defer(ckpt__session *s, const unsigned char *want)
{
	if (!s->reader)
		return CKPT_OK;
	uint64_t max = 0, nb;
	for (size_t i = 0; i < s->nvals; i++)
		if (want[i] && needs_crc(s, i, &nb) && nb > max)
			max = nb;
	if (!max)
		return CKPT_OK;
	if (max > SIZE_MAX)
		return ckpt__fail(CKPT_ELIMIT, s->path, NULL, -1, "a value of %llu bytes does not fit in memory",
			(unsigned long long)max);
	/* one value at a time through one buffer: the peak is the largest value, never their sum */
	unsigned char *buf = ckpt__buffer_alloc(max, 0);
	if (!buf)
		return CKPT_ENOMEM;
	int rc = CKPT_OK;
	for (size_t i = 0; i < s->nvals && rc == CKPT_OK; i++) {
		ckpt__value *v = &s->vals[i];
		if (!want[i] || !needs_crc(s, i, &nb))
			continue;
		rc = ckpt_reader_read_into(s->reader, v->reader_index, buf, (size_t)nb);
		if (rc == CKPT_EUNSUPPORTED) {
			/* a partitioned entry the backend only assembles in ckpt_reader_read */
			ckpt_tensor *t;
			if ((rc = ckpt_reader_read(&t, s->reader, v->reader_index)) == CKPT_OK) {
				if (t->nbytes == nb)
					memcpy(buf, t->data, (size_t)nb);
				else
					rc = ckpt__fail(CKPT_EFORMAT, s->path, v->key, -1, "entry has %llu bytes, want %llu",
						(unsigned long long)t->nbytes, (unsigned long long)nb);
				ckpt_tensor_free(t);
			}
		}
		if (rc == CKPT_OK) {
			v->crc = ckpt_crc32c_extend(0, buf, (size_t)nb);
			v->has_crc = 1;
		} else {
			ckpt__error_annotate(s->path, v->key);
		}
	}
	ckpt__buffer_free(buf);
	return rc;
}

/*
 * ckpt__session_stage's reads as one batch, where the backend has a batched path (object
 * storage: few large ranged reads instead of one per value): the fixed-size,
 * whole entries of this process's part go to their places in the arena
 * (laid out as ckpt__session_stage lays them). *batched (caller frees) flags the values
 * read, NULL when the backend declined; the others are read one by one.
 */
static int stage_batch(ckpt__session *s, const unsigned char *want, unsigned char *base, uint64_t chunk, int part,
	unsigned char **batched)
{
	*batched = NULL;
	ckpt__read_req *req = ckpt__malloc((s->nvals ? s->nvals : 1) * sizeof(*req));
	unsigned char *in = ckpt__calloc(s->nvals ? s->nvals : 1, 1);
	size_t n = 0;
	uint64_t off = 0;
	for (size_t i = 0; req && in && i < s->nvals; i++) {
		const ckpt__value *v = &s->vals[i];
		if (!want[i] || v->dtype == CKPT_DT_STRING)
			continue;
		uint64_t nb;
		ckpt_shape sh;
		ckpt__cshape_expand(&v->shape, &sh);
		ckpt_shape_nbytes(&nb, &sh, v->dtype);
		off = (off + 63) & ~(uint64_t)63;
		int owner = chunk ? (int)(off / chunk) : part;
		const ckpt_var_info *vi = ckpt_reader_var(s->reader, v->reader_index);
		/* anything unusual (partitioned, another size) keeps its own path and its own error */
		if (nb && owner == part && vi && vi->nslices == 0 && vi->dtype == v->dtype && vi->nbytes == nb) {
			req[n++] = (ckpt__read_req){ v->reader_index, base + off, (size_t)nb };
			in[i] = 1;
		}
		off += nb;
	}
	int rc = req && in && n ? ckpt__reader_read_many(s->reader, req, n, 0) : CKPT__DECLINED;
	ckpt__free(req);
	if (rc == CKPT_OK) {
		*batched = in;
		return CKPT_OK;
	}
	ckpt__free(in);
	if (rc == CKPT__DECLINED) {
		ckpt_error_clear(); /* declined, or no room for the requests: one by one */
		return CKPT_OK;
	}
	return rc;
}

/*
 * Read the values flagged in `want` into one huge-page arena (fresh 4 KiB
 * pages cost more than the read itself), straight from the reader with
 * checksums verified (the stored ones, and those ckpt__session_defer
 * recorded). The tensors wrap the arena; *arena is freed by the caller once
 * they are released.
 * parts > 1 (a restore whose processes share the reading): the arena's
 * bytes are cut into `parts` equal ranges, each value belongs to the range
 * its first byte is in, and only the values of range `part` are read here
 * (strings, outside the arena, always are); bounds[0..parts] receives where
 * each part's values begin in the arena (bounds[parts]: its size), for the
 * strategy to share them.
 */
int ckpt__session_stage(ckpt__session *s, const unsigned char *want, void **arena, int parts, int part,
	uint64_t *bounds)
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
		CKPT_TRY(ckpt_shape_nbytes(&nb, &sh, s->vals[i].dtype));
		if (ckpt__add_u64(total, 63, &total) || ckpt__add_u64(total & ~(uint64_t)63, nb, &total))
			return ckpt__fail(CKPT_ELIMIT, s->path, s->vals[i].key, -1, "checkpoint values exceed 2^64 bytes");
	}
	if (total > SIZE_MAX)
		return ckpt__fail(CKPT_ELIMIT, s->path, NULL, -1, "%llu bytes of values do not fit in memory",
			(unsigned long long)total);
	unsigned char *base = total ? ckpt__buffer_alloc(total, 0) : NULL;
	if (total && !base)
		return CKPT_ENOMEM;
	uint64_t chunk = parts > 1 ? total / (uint64_t)parts + 1 : 0;
	unsigned char *batched = NULL;
	int rc = stage_batch(s, want, base, chunk, part, &batched);
	uint64_t off = 0;
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
			rc = ckpt_reader_read(&v->t, s->reader, v->reader_index);
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
		ckpt_shape_nbytes(&nb, &sh, v->dtype);
		off = (off + 63) & ~(uint64_t)63;
		unsigned char *dst = nb ? base + off : empty;
		int owner = parts > 1 ? (int)(off / chunk) : part;
		while (bounds && next <= owner)
			bounds[next++] = off;
		rc = nb && owner == part && !(batched && batched[i]) ?
			ckpt_reader_read_into(s->reader, v->reader_index, dst, (size_t)nb) : CKPT_OK;
		if (rc == CKPT_EUNSUPPORTED) {
			/* e.g. a partitioned entry the backend only assembles in ckpt_reader_read */
			ckpt_tensor *t;
			if ((rc = ckpt_reader_read(&t, s->reader, v->reader_index)) == CKPT_OK) {
				if (t->nbytes == nb)
					memcpy(dst, t->data, (size_t)nb);
				else
					rc = ckpt__fail(CKPT_EFORMAT, s->path, v->key, -1, "entry has %llu bytes, want %llu",
						(unsigned long long)t->nbytes, (unsigned long long)nb);
				ckpt_tensor_free(t);
			}
		}
		if (rc == CKPT_OK && v->has_crc && nb && owner == part)
			rc = check_deferred(s, v, dst, nb);
		if (rc == CKPT_OK)
			rc = ckpt_tensor_wrap(&v->t, v->dtype, &sh, dst, nb);
		if (rc < 0)
			ckpt__error_annotate(s->path, v->key);
		off += nb;
	}
	ckpt__free(batched);
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
		rc = ckpt__session_stage(s, want, &arena, 1, 0, NULL);
	if (rc == CKPT_OK) {
		if (arena)
			s->arenas[s->narenas++] = arena;
		ckpt_reader_free(s->reader);
		s->reader = NULL;
	}
	ckpt__free(want);
	return rc;
}

