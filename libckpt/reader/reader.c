/*
 * The format-independent reader and writer: libarchive-style bidding among
 * the backends of format_registry.c, on the bytes (never the file name), and
 * the public ckpt_reader_* / ckpt_writer_* functions that forward to the
 * winner.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "reader/format_registry.h"
#include "ckpt/saved_model.h"
#include "base/kv_store.h"



static int read_head(ckpt_vfs *vfs, const char *path, unsigned char *head, size_t cap, size_t *n)
{
	int is_dir = 0;
	*n = 0;
	int e = ckpt_vfs_exists(&is_dir, vfs, path);
	if (e < 0)
		return e; /* an outage is not an absent file */
	if (!e || is_dir)
		return CKPT_OK;
	ckpt_io *io;
	if (ckpt_vfs_open(&io, vfs, path, CKPT_IO_READ) < 0)
		return CKPT_OK; /* let the backends report the real problem */
	int rc = ckpt_io_pread(n, io, head, cap, 0);
	ckpt_io_close(io);
	if (rc < 0)
		*n = 0;
	return CKPT_OK;
}

void ckpt_reader_free(ckpt_reader *r)
{
	if (!r)
		return;
	if (r->fmt && r->fmt->close)
		r->fmt->close(r);
	ckpt_object_graph_free(r->graph);
	ckpt_saved_model_free(r->saved_model);
	ckpt__kv_free(r->kv);
	for (size_t i = 0; i < r->nmeta; i++) {
		ckpt__free(r->meta_keys[i]);
		ckpt__free(r->meta_vals[i]);
	}
	ckpt__free(r->meta_keys);
	ckpt__free(r->meta_vals);
	ckpt__free(r->name_index);
	ckpt__free(r->path);
	ckpt__free(r->user_path);
	ckpt__free(r);
}


static int reader_open(ckpt_reader **out, const char *path, const ckpt_open_options *o);

/*
 * One operation (ckpt_vfs_op_begin): the bidding and the backend's open read
 * the same state file and index; an object store then serves the second
 * read from what the first one got, instead of a HEAD and a GET again.
 */
int ckpt_reader_open(ckpt_reader **out, const char *path, const ckpt_open_options *o)
{
	ckpt_vfs_op_begin();
	int rc = reader_open(out, path, o);
	ckpt_vfs_op_end();
	return rc;
}

static int reader_open(ckpt_reader **out, const char *path, const ckpt_open_options *o)
{
	if (!out || !path)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_reader_open: NULL argument");
	*out = NULL;
	ckpt_open_options opts = CKPT_OPEN_OPTIONS_INIT;
	if (o) {
		if (o->version == 1) { /* before sync_rules */
			memcpy(&opts, o, offsetof(ckpt_open_options, sync_rules));
			opts.version = CKPT_OPEN_OPTIONS_VERSION;
		} else if (o->version == CKPT_OPEN_OPTIONS_VERSION) {
			opts = *o;
		} else {
			return ckpt__fail(CKPT_EINVAL, path, NULL, -1, "unsupported ckpt_open_options version %u", o->version);
		}
	}
	const ckpt_sync_rule *rules = opts.sync_rules;
	size_t nrules = opts.num_sync_rules;
	opts.sync_rules = NULL; /* read during this call only */
	opts.num_sync_rules = 0;
	CKPT_TRY(ckpt__sync_rules_check(rules, nrules));
	CKPT_TRY(ckpt_status_of(opts.vfs = ckpt_vfs_for_path(opts.vfs, path)));
	if (!opts.memory_budget)
		opts.memory_budget = CKPT_DEFAULT_MEMORY_BUDGET;

	unsigned char head[16];
	size_t nhead = 0;
	read_head(opts.vfs, path, head, sizeof(head), &nhead);

	const ckpt_format *best = ckpt__format_bid(opts.vfs, path, head, nhead);
	if (!best) {
		int is_dir = 0;
		int exists = ckpt_vfs_exists(&is_dir, opts.vfs, path);
		if (exists < 0)
			return exists;
		if (exists && is_dir)
			return ckpt__fail(CKPT_ENOTFOUND, path, NULL, -1,
				"no checkpoint in this directory (no `checkpoint` state file, SavedModel variables/ "
				"or single .index file, and no Keras file)");
		if (!exists) {
			char *idx = ckpt__asprintf("%s.index", path);
			int has_index = idx ? ckpt_vfs_exists(NULL, opts.vfs, idx) : CKPT_ENOMEM;
			ckpt__free(idx);
			if (has_index < 0)
				return has_index;
			if (!has_index)
				return ckpt__fail(CKPT_ENOTFOUND, path, NULL, -1,
					"no such file, directory or checkpoint prefix (%s.index)", path);
		}
		return ckpt__fail(CKPT_EUNSUPPORTED, path, NULL, nhead ? 0 : -1,
			"not a recognized checkpoint (TensorBundle, Keras HDF5, .keras archive, safetensors or GGUF)");
	}

	ckpt_reader *r = ckpt__calloc(1, sizeof(*r));
	if (!r)
		return CKPT_ENOMEM;
	r->fmt = best;
	r->vfs = opts.vfs;
	r->opts = opts;
	r->nshards = 1;
	r->user_path = ckpt__strdup(path);
	if (!r->user_path) {
		ckpt__free(r);
		return CKPT_ENOMEM;
	}
	int rc = best->open(r);
	if (rc < 0) {
		ckpt__error_annotate(path, NULL);
		ckpt_reader_free(r);
		return rc;
	}
	if (!r->path && !(r->path = ckpt__strdup(path))) {
		ckpt_reader_free(r);
		return CKPT_ENOMEM;
	}
	/* built here, not on first lookup, so concurrent finds never race on it */
	if (r->nvars > 8 && (rc = ckpt__reader_build_name_index(r)) < 0) {
		ckpt_reader_free(r);
		return rc;
	}
	if ((rc = ckpt__reader_apply_sync(r, rules, nrules)) < 0) {
		ckpt_reader_free(r);
		return rc;
	}
	*out = r;
	return CKPT_OK;
}

const ckpt_saved_model *ckpt_reader_saved_model(const ckpt_reader *r) { return r ? r->saved_model : NULL; }

const char *ckpt_reader_format(const ckpt_reader *r) { return r ? r->format_name : NULL; }
const char *ckpt_reader_path(const ckpt_reader *r) { return r ? r->path : NULL; }
int ckpt_reader_num_shards(const ckpt_reader *r) { return r ? r->nshards : 0; }

const char *ckpt_reader_shard_path(const ckpt_reader *r, int shard, int *exists)
{
	if (!r || shard < 0 || shard >= r->nshards) {
		if (exists)
			*exists = 0;
		return NULL;
	}
	if (exists)
		*exists = r->shard_exists ? r->shard_exists[shard] : 1;
	return r->shard_paths ? r->shard_paths[shard] : r->path;
}

size_t ckpt_reader_num_entries(const ckpt_reader *r) { return r ? r->nvars : 0; }

const ckpt_var_info *ckpt_reader_var(const ckpt_reader *r, size_t i)
{
	return (r && i < r->nvars) ? &r->vars[i] : NULL;
}

int ckpt_reader_find(size_t *index, const ckpt_reader *r, const char *name)
{
	if (!r || !name)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_reader_find: NULL argument");
	size_t i;
	if (ckpt__reader_lookup(r, name, &i)) {
		if (index)
			*index = i;
		return CKPT_OK;
	}
	return ckpt__fail(CKPT_ENOTFOUND, r->path, name, -1, "no entry named '%s'", name);
}

/* Entry i into a new tensor: the backend's read, or (backends without string entries) its read_into. */
static int backend_read(ckpt_reader *r, size_t i, ckpt_tensor **out)
{
	ckpt_tensor *t = NULL;
	int rc;
	if (r->fmt->read)
		return r->fmt->read(r, i, out);
	CKPT_TRY(ckpt_tensor_new(&t, r->vars[i].dtype, &r->vars[i].shape));
	if ((rc = r->fmt->read_into(r, i, t->data, (size_t)t->nbytes)) < 0) {
		ckpt_tensor_free(t);
		return rc;
	}
	*out = t;
	return CKPT_OK;
}

int ckpt_reader_read(ckpt_tensor **out, ckpt_reader *r, size_t i)
{
	if (!r || !out || i >= r->nvars)
		return ckpt__fail(CKPT_EINVAL, r ? r->path : NULL, NULL, -1, "ckpt_reader_read: bad argument");
	int rc = backend_read(r, i, out);
	if (rc < 0)
		ckpt__error_annotate(r->path, r->vars[i].name);
	return rc;
}

int ckpt_reader_read_into(ckpt_reader *r, size_t i, void *dst, size_t n)
{
	if (!r || (!dst && n) || i >= r->nvars)
		return ckpt__fail(CKPT_EINVAL, r ? r->path : NULL, NULL, -1, "ckpt_reader_read_into: bad argument");
	const ckpt_var_info *v = &r->vars[i];
	if (v->dtype == CKPT_DT_STRING)
		return ckpt__fail(CKPT_EINVAL, r->path, v->name, -1, "read_into needs a fixed-size dtype, entry is string");
	if (v->nbytes != n)
		return ckpt__fail(CKPT_EMISMATCH, r->path, v->name, -1, "destination has %zu bytes, entry has %llu",
			n, (unsigned long long)v->nbytes);
	int rc;
	if (r->fmt->read_into)
		rc = r->fmt->read_into(r, i, dst, n);
	else {
		ckpt_tensor *t;
		rc = r->fmt->read(r, i, &t);
		if (rc == CKPT_OK) {
			if (n)
				memcpy(dst, t->data, n);
			ckpt_tensor_free(t);
		}
	}
	if (rc < 0)
		ckpt__error_annotate(r->path, v->name);
	return rc;
}

void ckpt__reader_trim(ckpt_reader *r)
{
	if (r && r->fmt->trim)
		r->fmt->trim(r);
}

/* Entries ckpt__reader_read_many takes: fixed-size and stored whole. */
static int batchable(const ckpt_var_info *v)
{
	return v->dtype != CKPT_DT_STRING && !v->nslices;
}

int ckpt__reader_read_many(ckpt_reader *r, const ckpt__read_req *req, size_t n, unsigned flags)
{
	if (!r || (n && !req))
		return ckpt__fail(CKPT_EINVAL, r ? r->path : NULL, NULL, -1, "ckpt__reader_read_many: bad argument");
	if (!r->fmt->read_many || n == 0)
		return CKPT__DECLINED;
	for (size_t k = 0; k < n; k++) {
		if (req[k].entry >= r->nvars || (!req[k].dst && req[k].n))
			return ckpt__fail(CKPT_EINVAL, r->path, NULL, -1, "ckpt__reader_read_many: bad request %zu", k);
		const ckpt_var_info *v = &r->vars[req[k].entry];
		if (!batchable(v))
			return CKPT__DECLINED; /* read as a whole by their own paths */
		if (req[k].dst && v->nbytes != req[k].n)
			return ckpt__fail(CKPT_EMISMATCH, r->path, v->name, -1, "destination has %zu bytes, entry has %llu",
				req[k].n, (unsigned long long)v->nbytes);
	}
	int rc = r->fmt->read_many(r, req, n, flags);
	if (rc < 0)
		ckpt__error_annotate(r->path, NULL);
	return rc;
}

int ckpt_reader_verify(ckpt_reader *r, size_t i)
{
	if (!r || i >= r->nvars)
		return ckpt__fail(CKPT_EINVAL, r ? r->path : NULL, NULL, -1, "ckpt_reader_verify: bad argument");
	int rc;
	if (r->fmt->verify)
		rc = r->fmt->verify(r, i);
	else {
		ckpt_tensor *t;
		if ((rc = backend_read(r, i, &t)) == CKPT_OK)
			ckpt_tensor_free(t);
	}
	if (rc < 0)
		ckpt__error_annotate(r->path, r->vars[i].name);
	return rc;
}

int ckpt_reader_verify_all(ckpt_reader *r)
{
	if (!r)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_reader_verify_all: bad argument");
	ckpt__read_req *req = ckpt__malloc((r->nvars ? r->nvars : 1) * sizeof(*req));
	size_t m = 0;
	for (size_t i = 0; req && i < r->nvars; i++)
		if (batchable(&r->vars[i]))
			req[m++] = (ckpt__read_req){ i, NULL, 0 };
	int rc = req ? ckpt__reader_read_many(r, req, m, 0) : CKPT__DECLINED;
	ckpt__free(req);
	if (rc < 0)
		return rc;
	int batched = rc == CKPT_OK;
	ckpt_error_clear(); /* declined, or no room for the request list: the rest entry by entry */
	rc = CKPT_OK;
	for (size_t i = 0; rc == CKPT_OK && i < r->nvars; i++)
		if (!batched || !batchable(&r->vars[i]))
			rc = ckpt_reader_verify(r, i);
	return rc;
}

const ckpt_object_graph *ckpt_reader_object_graph(const ckpt_reader *r)
{
	return r ? r->graph : NULL;
}

ckpt_object_graph *ckpt__reader_take_object_graph(ckpt_reader *r)
{
	ckpt_object_graph *g = r->graph;
	r->graph = NULL;
	return g;
}

static int meta_put(char ***keys, char ***vals, size_t *n, const char *key, char *v);

/* the JSON of the typed pairs is rendered once, on the first request, by whichever thread asks first */
static pthread_mutex_t meta_render_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *meta_find(const ckpt_reader *r, const char *key)
{
	for (size_t i = 0; i < r->nmeta; i++)
		if (strcmp(r->meta_keys[i], key) == 0)
			return r->meta_vals[i];
	return NULL;
}

const char *ckpt_reader_meta(const ckpt_reader *r, const char *key)
{
	const char *v;
	if (!r || !key)
		return NULL;
	if (!r->kv)
		return meta_find(r, key);
	/* a reader with typed pairs may grow its metadata here: every lookup of it takes the lock */
	pthread_mutex_lock(&meta_render_lock);
	if ((v = meta_find(r, key)) || strcmp(key, r->kv->json_key) != 0) {
		pthread_mutex_unlock(&meta_render_lock);
		return v;
	}
	{
		ckpt_reader *w = (ckpt_reader *)r; /* a cache: what the reader holds does not change */
		char *s = ckpt__kv_render_json(r->kv);
		if (s && meta_put(&w->meta_keys, &w->meta_vals, &w->nmeta, key, s) == CKPT_OK)
			v = meta_find(r, key);
	}
	pthread_mutex_unlock(&meta_render_lock);
	return v;
}

size_t ckpt_reader_num_kv(const ckpt_reader *r)
{
	return r && r->kv ? r->kv->n : 0;
}

int ckpt_reader_kv(ckpt_kv *out, const ckpt_reader *r, size_t i)
{
	if (!out || i >= ckpt_reader_num_kv(r))
		return ckpt__fail(CKPT_EINVAL, r ? r->path : NULL, NULL, -1, "metadata pair %zu of %zu", i,
			ckpt_reader_num_kv(r));
	ckpt__kv_get(r->kv, i, out);
	return CKPT_OK;
}

/* Set key to v, which the table takes (freed on failure too). */
static int meta_put(char ***keys, char ***vals, size_t *n, const char *key, char *v)
{
	for (size_t i = 0; i < *n; i++)
		if (strcmp((*keys)[i], key) == 0) {
			ckpt__free((*vals)[i]);
			(*vals)[i] = v;
			return CKPT_OK;
		}
	char *k = ckpt__strdup(key);
	char **nk = k ? ckpt__realloc(*keys, (*n + 1) * sizeof(char *)) : NULL;
	if (nk)
		*keys = nk;
	char **nv = nk ? ckpt__realloc(*vals, (*n + 1) * sizeof(char *)) : NULL;
	if (!nv) {
		ckpt__free(k);
		ckpt__free(v);
		return CKPT_ENOMEM;
	}
	*vals = nv;
	(*keys)[*n] = k;
	(*vals)[*n] = v;
	(*n)++;
	return CKPT_OK;
}

static int meta_set(char ***keys, char ***vals, size_t *n, const char *key, const char *value)
{
	char *v = ckpt__strdup(value ? value : "");
	return v ? meta_put(keys, vals, n, key, v) : CKPT_ENOMEM;
}

int ckpt__reader_set_meta(ckpt_reader *r, const char *key, const char *value)
{
	return meta_set(&r->meta_keys, &r->meta_vals, &r->nmeta, key, value);
}

/* ------------------------------------------------------------------ writer */

const char *ckpt__writer_meta(const ckpt_writer *w, const char *key)
{
	for (size_t i = 0; i < w->nmeta; i++)
		if (strcmp(w->meta_keys[i], key) == 0)
			return w->meta_vals[i];
	return NULL;
}

int ckpt_writer_open(ckpt_writer **out, const char *path, const char *format, const ckpt_write_options *o)
{
	if (!out || !path)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_writer_open: NULL argument");
	*out = NULL;
	if (!format)
		format = "tf-bundle";
	ckpt_write_options opts = CKPT_WRITE_OPTIONS_INIT;
	if (o) {
		if (o->version != CKPT_WRITE_OPTIONS_VERSION)
			return ckpt__fail(CKPT_EINVAL, path, NULL, -1, "unsupported ckpt_write_options version %u", o->version);
		opts = *o;
	}
	CKPT_TRY(ckpt_status_of(opts.vfs = ckpt_vfs_for_path(opts.vfs, path)));
	if (opts.num_shards <= 0)
		opts.num_shards = 1;
	if (opts.num_shards > CKPT_MAX_SHARDS)
		return ckpt__fail(CKPT_ELIMIT, path, NULL, -1, "%d shards requested, limit is %d", opts.num_shards,
			CKPT_MAX_SHARDS);
	const ckpt_format *f = ckpt__format_writer(format);
	if (!f)
		return ckpt__fail(CKPT_EUNSUPPORTED, path, NULL, -1,
			"no writer for format '%s' (known: tf-bundle, keras-h5, keras-weights, keras, safetensors, gguf)", format);
	ckpt_writer *w = ckpt__calloc(1, sizeof(*w));
	if (!w)
		return CKPT_ENOMEM;
	w->fmt = f;
	w->vfs = opts.vfs;
	w->opts = opts;
	w->path = ckpt__strdup(path);
	w->format_name = ckpt__strdup(format);
	if (!w->path || !w->format_name) {
		ckpt__free(w->path);
		ckpt__free(w->format_name);
		ckpt__free(w);
		return CKPT_ENOMEM;
	}
	int rc = f->writer_open(w);
	if (rc < 0) {
		ckpt__error_annotate(path, NULL);
		w->fmt = NULL; /* backend cleaned up after itself */
		ckpt_writer_free(w);
		return rc;
	}
	*out = w;
	return CKPT_OK;
}

int ckpt_writer_add(ckpt_writer *w, const char *name, const ckpt_tensor *t, int shard)
{
	if (!w || !name || !t)
		return ckpt__fail(CKPT_EINVAL, w ? w->path : NULL, name, -1, "ckpt_writer_add: NULL argument");
	if (w->committed)
		return ckpt__fail(CKPT_EINVAL, w->path, name, -1, "writer already committed");
	if (shard < 0 || shard >= w->opts.num_shards)
		return ckpt__fail(CKPT_EINVAL, w->path, name, -1, "shard %d out of range [0, %d)", shard,
			w->opts.num_shards);
	w->added = 1;
	int rc = w->fmt->writer_add(w, name, t, shard);
	if (rc < 0)
		ckpt__error_annotate(w->path, name);
	return rc;
}

int ckpt__writer_streams(const ckpt_writer *w)
{
	return w && w->fmt->writer_add_pieces != NULL;
}

int ckpt__writer_add_pieces(ckpt_writer *w, const char *name, ckpt_dtype dt, const ckpt_shape *shape,
	uint64_t nbytes, ckpt__piece_fn next, void *ctx)
{
	if (!w->fmt->writer_add_pieces)
		return ckpt__fail(CKPT_EUNSUPPORTED, w->path, name, -1, "the %s format takes a value only whole",
			w->fmt->name);
	if (w->committed)
		return ckpt__fail(CKPT_EINVAL, w->path, name, -1, "writer already committed");
	w->added = 1;
	int rc = w->fmt->writer_add_pieces(w, name, dt, shape, nbytes, next, ctx);
	if (rc < 0)
		ckpt__error_annotate(w->path, name);
	return rc;
}

void ckpt__incr_clear(ckpt__incr *inc)
{
	if (inc && inc->base && inc->base_free)
		inc->base_free(inc->base);
	if (inc)
		memset(inc, 0, sizeof(*inc));
}

int ckpt__writer_incremental(ckpt_writer *w, ckpt__incr *inc)
{
	const ckpt__format_incr *x = ckpt__format_incr_of(w->fmt);
	if (!x || w->added)
		return 0;
	int rc = x->writer_incremental(w, inc);
	w->incremental = rc > 0;
	return rc;
}

int ckpt__writer_add_clean(ckpt_writer *w, const char *name, const ckpt_tensor *t)
{
	if (!w->incremental || !t || !name)
		return ckpt_writer_add(w, name, t, 0);
	if (w->committed)
		return ckpt__fail(CKPT_EINVAL, w->path, name, -1, "writer already committed");
	w->added = 1;
	int rc = ckpt__format_incr_of(w->fmt)->writer_add_clean(w, name, t);
	if (rc < 0)
		ckpt__error_annotate(w->path, name);
	return rc;
}

int ckpt_writer_announce(ckpt_writer *w, const char *name, ckpt_dtype dtype, const ckpt_shape *shape)
{
	if (!w || !name || !shape)
		return ckpt__fail(CKPT_EINVAL, w ? w->path : NULL, name, -1, "ckpt_writer_announce: NULL argument");
	if (w->committed)
		return ckpt__fail(CKPT_EINVAL, w->path, name, -1, "writer already committed");
	if (w->added)
		return ckpt__fail(CKPT_EINVAL, w->path, name, -1, "tensor '%s' announced after the first add: announce every "
			"tensor before the first is added", name);
	if (strcmp(ckpt_dtype_name(dtype), "invalid") == 0 || shape->rank < 0 || shape->rank > CKPT_MAX_RANK)
		return ckpt__fail(CKPT_EINVAL, w->path, name, -1, "ckpt_writer_announce: bad dtype or shape");
	w->announced = 1;
	if (!w->fmt->writer_announce)
		return CKPT_OK;
	int rc = w->fmt->writer_announce(w, name, dtype, shape);
	if (rc < 0)
		ckpt__error_annotate(w->path, name);
	return rc;
}

/* An announced writer has laid out its header at the first add: what goes into it must come before. */
static int before_first_add(const ckpt_writer *w, const char *what)
{
	if (w->announced && w->added)
		return ckpt__fail(CKPT_EINVAL, w->path, NULL, -1, "%s must be set before the first tensor is added to a "
			"writer with announced tensors", what);
	return CKPT_OK;
}

int ckpt_writer_set_object_graph(ckpt_writer *w, const ckpt_object_graph *g)
{
	if (!w)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_writer_set_object_graph: NULL writer");
	CKPT_TRY(before_first_add(w, "the object graph"));
	ckpt_object_graph *copy = NULL;
	if (g)
		CKPT_TRY(ckpt_object_graph_copy(&copy, g));
	ckpt_object_graph_free(w->graph);
	w->graph = copy;
	w->graph_borrowed = NULL;
	return CKPT_OK;
}

const ckpt_object_graph *ckpt__writer_graph(const ckpt_writer *w)
{
	return w->graph_borrowed ? w->graph_borrowed : w->graph;
}

int ckpt__writer_borrow_object_graph(ckpt_writer *w, const ckpt_object_graph *g)
{
	if (!w)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt__writer_borrow_object_graph: NULL writer");
	ckpt_object_graph_free(w->graph);
	w->graph = NULL;
	w->graph_borrowed = g;
	return CKPT_OK;
}

int ckpt_writer_set_meta(ckpt_writer *w, const char *key, const char *value)
{
	if (!w || !key)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_writer_set_meta: NULL argument");
	CKPT_TRY(before_first_add(w, "metadata"));
	return meta_set(&w->meta_keys, &w->meta_vals, &w->nmeta, key, value);
}

int ckpt_writer_commit(ckpt_writer *w)
{
	if (!w)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_writer_commit: NULL writer");
	if (w->committed)
		return ckpt__fail(CKPT_EINVAL, w->path, NULL, -1, "writer already committed");
	int rc = w->fmt->writer_commit(w);
	if (rc < 0) {
		ckpt__error_annotate(w->path, NULL);
		return rc;
	}
	w->committed = 1;
	return CKPT_OK;
}

void ckpt_writer_free(ckpt_writer *w)
{
	if (!w)
		return;
	if (w->fmt && w->fmt->writer_close)
		w->fmt->writer_close(w);
	ckpt_object_graph_free(w->graph);
	for (size_t i = 0; i < w->nmeta; i++) {
		ckpt__free(w->meta_keys[i]);
		ckpt__free(w->meta_vals[i]);
	}
	ckpt__free(w->meta_keys);
	ckpt__free(w->meta_vals);
	ckpt__free(w->path);
	ckpt__free(w->format_name);
	ckpt__free(w);
}
