/*
 * Building Keras HDF5 images the way Keras + h5py 3 write them (keras.md
 * §1.2, §2, §4): superblock v0 (libver earliest), symbol-table groups,
 * contiguous unfiltered datasets, and these attribute encodings:
 *   root@keras_version, root@backend           VLEN UTF-8 scalar (Python str)
 *   root@model_config, root@training_config,
 *   model_weights@backend, @keras_version      VLEN ASCII scalar (Python bytes)
 *   layer_names, weight_names                  VLEN ASCII SIMPLE(n); FIXED NULLPAD
 *                                              chunks name0.. above 64512 bytes
 *   weight_names of a weightless layer         float64 SIMPLE(0)
 *   Keras 3 dataset@dtype                      "bfloat16" (VLEN UTF-8) for bfloat16
 *
 * Dataset paths come from the names given to ckpt_writer_add: Keras paths
 * ("model_weights/dense/dense/kernel:0", "layers/dense/vars/0") are used as
 * they are; TensorFlow object-graph keys are mapped through the writer's
 * graph (attribute full_name) or, without one, derived from the key.
 */
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
#include <jansson.h>
#include "formats/keras_h5/h5_safe.h"
#include "formats/keras_h5/keras_h5.h"

#define HDF5_OBJECT_HEADER_LIMIT 64512
#define DEFAULT_KERAS_VERSION "2.15.0"

typedef struct wentry {
	char *path;              /* dataset path */
	const ckpt_tensor *t;
	int order;               /* for Keras 3 optimizer ordering */
} wentry;

static int has_prefix(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

/* "a/.ATTRIBUTES/VARIABLE_VALUE" -> unescaped object path components joined by '/'. */
static char *key_object_path(const char *key, int *is_slot, int *is_opt)
{
	const char *end = strstr(key, "/.ATTRIBUTES/");
	size_t n = end ? (size_t)(end - key) : strlen(key), i, j = 0;
	char *out = ckpt__malloc(n + 1);
	*is_slot = strstr(key, "/.OPTIMIZER_SLOT/") != NULL;
	*is_opt = has_prefix(key, "optimizer/") || *is_slot;
	if (!out)
		return NULL;
	for (i = 0; i < n; i++) {
		if (key[i] == '.' && i + 1 < n && key[i + 1] == 'S') {
			out[j++] = '_'; /* an escaped '/' inside one name: keep it one component */
			i++;
		} else if (key[i] == '.' && i + 1 < n && key[i + 1] == '.') {
			out[j++] = '.';
			i++;
		} else if (has_prefix(key + i, "/.OPTIMIZER_SLOT/")) {
			out[j++] = '/';
			i += strlen("/.OPTIMIZER_SLOT/") - 1;
		} else {
			out[j++] = key[i];
		}
	}
	out[j] = '\0';
	return out;
}

static const char *graph_full_name(const ckpt_object_graph *g, const char *key)
{
	size_t i, j;
	if (!g)
		return NULL;
	for (i = 0; i < g->nnodes; i++)
		for (j = 0; j < g->nodes[i].nattrs; j++)
			if (g->nodes[i].attrs[j].checkpoint_key && strcmp(g->nodes[i].attrs[j].checkpoint_key, key) == 0)
				return g->nodes[i].attrs[j].full_name;
	return NULL;
}

static int is_legacy_path(const char *p)
{
	return has_prefix(p, "model_weights/") || has_prefix(p, "optimizer_weights/");
}

static int is_v3_path(const char *p)
{
	const char *v = strstr(p, "vars/");
	return (has_prefix(p, "layers/") || has_prefix(p, "optimizer/") || has_prefix(p, "vars/") ||
		has_prefix(p, "_layer_checkpoint_dependencies/")) && v && (v == p || v[-1] == '/');
}

/* Dataset path for a legacy file. */
static char *legacy_path(const ckpt_writer *w, const char *name)
{
	const char *fn;
	char *obj, *out, *slash;
	int slot, opt;
	if (is_legacy_path(name))
		return ckpt__strdup(name);
	/* A weights-only dataset path ("<layer>/<weight>"): the same layer group under model_weights. */
	if (!strstr(name, "/.ATTRIBUTES/") && !graph_full_name(w->graph, name) && strchr(name, '/'))
		return ckpt__asprintf("model_weights/%s", name);
	fn = graph_full_name(w->graph, name);
	if (fn && is_legacy_path(fn))
		return ckpt__strdup(fn);
	obj = key_object_path(name, &slot, &opt);
	if (!obj)
		return NULL;
	if (fn && *fn && !is_v3_path(fn)) {
		/* A TensorFlow variable name ("dense/kernel", "Adam/dense/kernel/m"). */
		ckpt__free(obj);
		if (opt)
			return ckpt__asprintf("optimizer_weights/%s:0", fn);
		slash = strchr(fn, '/');
		return ckpt__asprintf("model_weights/%.*s/%s:0", (int)(slash ? (size_t)(slash - fn) : strlen(fn)), fn, fn);
	}
	if (opt)
		out = ckpt__asprintf("optimizer_weights/%s:0", obj);
	else {
		slash = strchr(obj, '/');
		out = ckpt__asprintf("model_weights/%.*s/%s:0", (int)(slash ? (size_t)(slash - obj) : strlen(obj)), obj, obj);
	}
	ckpt__free(obj);
	return out;
}

/* ---- attributes ---- */

static int str_attr(hid_t obj, const char *name, const char *value, H5T_cset_t cset)
{
	hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR), a = -1;
	int rc = CKPT_OK;
	H5Tset_size(t, H5T_VARIABLE);
	H5Tset_cset(t, cset);
	H5Tset_strpad(t, H5T_STR_NULLTERM);
	a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
	if (a < 0 || H5Awrite(a, t, &value) < 0)
		rc = ckpt__fail(CKPT_ERROR, NULL, name, -1, "HDF5 could not write attribute '%s'", name);
	ckpt__h5_close(a);
	ckpt__h5_close(sp);
	ckpt__h5_close(t);
	return rc;
}

static int list_attr_one(hid_t obj, const char *name, char **items, size_t n, size_t fixed_width)
{
	hsize_t dim = n;
	hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate_simple(1, &dim, NULL), a;
	int rc = CKPT_OK;
	char *buf = NULL;
	size_t i;
	if (fixed_width) {
		H5Tset_size(t, fixed_width);
		H5Tset_strpad(t, H5T_STR_NULLPAD);
		buf = ckpt__calloc(n ? n : 1, fixed_width);
		if (!buf) {
			ckpt__h5_close(sp);
			ckpt__h5_close(t);
			return CKPT_ENOMEM;
		}
		for (i = 0; i < n; i++)
			memcpy(buf + i * fixed_width, items[i], strlen(items[i]));
	} else {
		H5Tset_size(t, H5T_VARIABLE);
		H5Tset_strpad(t, H5T_STR_NULLTERM);
	}
	H5Tset_cset(t, H5T_CSET_ASCII);
	a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
	if (a < 0 || H5Awrite(a, t, fixed_width ? (const void *)buf : (const void *)items) < 0)
		rc = ckpt__fail(CKPT_ERROR, NULL, name, -1, "HDF5 could not write attribute '%s'", name);
	ckpt__free(buf);
	ckpt__h5_close(a);
	ckpt__h5_close(sp);
	ckpt__h5_close(t);
	return rc;
}

/* save_attributes_to_hdf5_group: a list, chunked as name0.. when numpy's fixed-width array exceeds 64512 bytes. */
static int list_attr(hid_t obj, const char *name, char **items, size_t n)
{
	size_t width = 1, i, k;
	if (n == 0) {
		hsize_t zero = 0;
		hid_t sp = H5Screate_simple(1, &zero, NULL);
		hid_t a = H5Acreate2(obj, name, H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
		int rc = a < 0 ? ckpt__fail(CKPT_ERROR, NULL, name, -1, "HDF5 could not write attribute '%s'", name) : CKPT_OK;
		ckpt__h5_close(a);
		ckpt__h5_close(sp);
		return rc;
	}
	for (i = 0; i < n; i++)
		if (strlen(items[i]) > width)
			width = strlen(items[i]);
	if (width > HDF5_OBJECT_HEADER_LIMIT)
		return ckpt__fail(CKPT_ELIMIT, NULL, name, -1, "an item of '%s' is %zu bytes; Keras allows %d", name, width,
			HDF5_OBJECT_HEADER_LIMIT);
	if ((uint64_t)width * n <= HDF5_OBJECT_HEADER_LIMIT)
		return list_attr_one(obj, name, items, n, 0);
	for (k = 2;; k++) {
		size_t big = n / k + (n % k ? 1 : 0);
		if ((uint64_t)width * big <= HDF5_OBJECT_HEADER_LIMIT)
			break;
	}
	{
		size_t start = 0, c;
		for (c = 0; c < k; c++) {
			size_t len = n / k + (c < n % k ? 1 : 0);
			char an[256];
			snprintf(an, sizeof(an), "%s%zu", name, c);
			CKPT_TRY(list_attr_one(obj, an, items + start, len, width));
			start += len;
		}
	}
	return CKPT_OK;
}

/* ---- datasets ---- */

static int write_dataset(hid_t file, const char *path, const ckpt_tensor *t, const char *fpath)
{
	hid_t ty, sp, lcpl, ds;
	hsize_t dims[CKPT_MAX_RANK];
	int i, rc = CKPT_OK;
	CKPT_TRY(ckpt__h5_check_relpath(path, fpath, "dataset path"));
	CKPT_TRY(ckpt__h5_type_for(t->dtype, &ty));
	for (i = 0; i < t->shape.rank; i++)
		dims[i] = (hsize_t)t->shape.dims[i];
	sp = t->shape.rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(t->shape.rank, dims, NULL);
	lcpl = H5Pcreate(H5P_LINK_CREATE);
	H5Pset_create_intermediate_group(lcpl, 1);
	ds = H5Dcreate2(file, path, ty, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
	if (ds < 0)
		rc = ckpt__fail(CKPT_EINVAL, fpath, path, -1, "HDF5 could not create dataset '%s' (a name used both as group and dataset?)", path);
	else if (t->nbytes && H5Dwrite(ds, ty, H5S_ALL, H5S_ALL, H5P_DEFAULT, t->data) < 0)
		rc = ckpt__fail(CKPT_ERROR, fpath, path, -1, "HDF5 could not write dataset '%s'", path);
	if (rc == CKPT_OK && t->dtype == CKPT_DT_BFLOAT16)
		rc = str_attr(ds, "dtype", "bfloat16", H5T_CSET_UTF8);
	ckpt__h5_close(ds);
	ckpt__h5_close(lcpl);
	ckpt__h5_close(sp);
	ckpt__h5_close(ty);
	return rc;
}

/* ---- layouts ---- */

typedef struct strlist {
	char **v;
	size_t n, cap;
} strlist;

static int sl_push(strlist *l, const char *s, size_t len)
{
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 16;
		char **nv = ckpt__realloc(l->v, nc * sizeof(char *));
		if (!nv)
			return CKPT_ENOMEM;
		l->v = nv;
		l->cap = nc;
	}
	if (!(l->v[l->n] = ckpt__strndup(s, len)))
		return CKPT_ENOMEM;
	l->n++;
	return CKPT_OK;
}

static int sl_find(const strlist *l, const char *s, size_t len)
{
	size_t i;
	for (i = 0; i < l->n; i++)
		if (strlen(l->v[i]) == len && strncmp(l->v[i], s, len) == 0)
			return (int)i;
	return -1;
}

static void sl_free(strlist *l)
{
	ckpt__h5_free_strings(l->v, l->n);
	l->v = NULL;
	l->n = l->cap = 0;
}

static int build_legacy(const ckpt_writer *w, hid_t f, wentry *e, size_t n)
{
	strlist layers = { 0 }, opt = { 0 };
	const char *kv = ckpt__writer_meta(w, "keras_version"), *be = ckpt__writer_meta(w, "backend");
	const char *mc = ckpt__writer_meta(w, "model_config"), *tc = ckpt__writer_meta(w, "training_config");
	const char *ln = ckpt__writer_meta(w, "layer_names");
	hid_t mw = -1, g = -1;
	size_t i, j;
	int rc = CKPT_OK;
	/*
	 * Keras reads a missing keras_version as "1" and then converts Keras 1
	 * weights (kernel transposes, LSTM gate splits). So without metadata:
	 * Keras 1 names (no '/' in any weight name) keep the attributes absent,
	 * anything else gets a Keras 2 version that loads the weights as they are.
	 */
	if (!kv || !be) {
		int k1 = 1;
		for (i = 0; i < n && k1; i++)
			if (has_prefix(e[i].path, "model_weights/")) {
				const char *l = strchr(e[i].path + 14, '/');
				if (l && strchr(l + 1, '/'))
					k1 = 0;
			}
		if (!kv && !k1)
			kv = DEFAULT_KERAS_VERSION;
		if (!be && !k1)
			be = "tensorflow";
	}
	/* Layer order: meta "layer_names" (a JSON list, from a legacy reader) first, then first use. */
	if (ln) {
		json_error_t err;
		json_t *a = json_loads(ln, 0, &err), *x;
		if (a && json_is_array(a)) {
			json_array_foreach(a, i, x) {
				const char *s = json_string_value(x);
				if (s && ckpt__h5_check_component(s, strlen(s)) == 0 && sl_find(&layers, s, strlen(s)) < 0 &&
					(rc = sl_push(&layers, s, strlen(s))) < 0)
					break;
			}
		}
		if (a)
			json_decref(a);
		if (rc < 0)
			goto out;
	}
	for (i = 0; i < n; i++) {
		if (has_prefix(e[i].path, "model_weights/")) {
			const char *l = e[i].path + 14, *s = strchr(l, '/');
			if (!s)
				{ rc = ckpt__fail(CKPT_EINVAL, w->path, e[i].path, -1, "'%s' names no layer group and weight", e[i].path); goto out; }
			if (strncmp(l, "top_level_model_weights/", 24) != 0 && sl_find(&layers, l, (size_t)(s - l)) < 0 &&
				(rc = sl_push(&layers, l, (size_t)(s - l))) < 0)
				goto out;
		}
	}
	if ((be && (rc = str_attr(f, "backend", be, H5T_CSET_UTF8)) < 0) ||
		(kv && (rc = str_attr(f, "keras_version", kv, H5T_CSET_UTF8)) < 0))
		goto out;
	if (mc && (rc = str_attr(f, "model_config", mc, H5T_CSET_ASCII)) < 0)
		goto out;
	if (tc && (rc = str_attr(f, "training_config", tc, H5T_CSET_ASCII)) < 0)
		goto out;
	mw = H5Gcreate2(f, "model_weights", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
	if (mw < 0) {
		rc = ckpt__fail(CKPT_ERROR, w->path, "model_weights", -1, "HDF5 could not create a group");
		goto out;
	}
	if ((be && (rc = str_attr(mw, "backend", be, H5T_CSET_ASCII)) < 0) ||
		(kv && (rc = str_attr(mw, "keras_version", kv, H5T_CSET_ASCII)) < 0) ||
		(rc = list_attr(mw, "layer_names", layers.v, layers.n)) < 0)
		goto out;
	for (j = 0; j <= layers.n && rc >= 0; j++) {
		const char *lname = j < layers.n ? layers.v[j] : "top_level_model_weights";
		strlist wn = { 0 };
		size_t ll = strlen(lname);
		hid_t lg;
		for (i = 0; i < n && rc >= 0; i++) {
			const char *l = e[i].path + 14;
			if (has_prefix(e[i].path, "model_weights/") && strncmp(l, lname, ll) == 0 && l[ll] == '/') {
				rc = sl_push(&wn, l + ll + 1, strlen(l + ll + 1));
				if (rc >= 0)
					rc = write_dataset(f, e[i].path, e[i].t, w->path);
			}
		}
		if (rc >= 0) {
			/* tf.keras >= 2.7 writes the model's own (normally empty) weight list here. */
			H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
			lg = H5Lexists(mw, lname, H5P_DEFAULT) > 0 ? H5Gopen2(mw, lname, H5P_DEFAULT) :
				H5Gcreate2(mw, lname, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
			if (lg < 0)
				rc = ckpt__fail(CKPT_ERROR, w->path, lname, -1, "HDF5 could not create layer group '%s'", lname);
			else
				rc = list_attr(lg, "weight_names", wn.v, wn.n);
			ckpt__h5_close(lg);
		}
		sl_free(&wn);
	}
	if (rc < 0)
		goto out;
	for (i = 0; i < n && rc >= 0; i++) {
		if (has_prefix(e[i].path, "optimizer_weights/")) {
			rc = sl_push(&opt, e[i].path + 18, strlen(e[i].path + 18));
			if (rc >= 0)
				rc = write_dataset(f, e[i].path, e[i].t, w->path);
		}
	}
	if (rc >= 0 && opt.n) {
		g = H5Gopen2(f, "optimizer_weights", H5P_DEFAULT);
		rc = g < 0 ? ckpt__fail(CKPT_ERROR, w->path, "optimizer_weights", -1, "HDF5 could not open a group") :
			list_attr(g, "weight_names", opt.v, opt.n);
	}
out:
	ckpt__h5_close(g);
	ckpt__h5_close(mw);
	sl_free(&layers);
	sl_free(&opt);
	return rc;
}

static int build_v3(const ckpt_writer *w, hid_t f, wentry *e, size_t n)
{
	size_t i, j;
	/* Each vars group must hold exactly 0..k-1. */
	for (i = 0; i < n; i++) {
		const char *v = strrchr(e[i].path, '/');
		size_t glen = v ? (size_t)(v - e[i].path) : 0, count = 0;
		long idx;
		char *endp;
		if (!v || glen < 4 || strncmp(v - 4, "vars", 4) != 0 || (glen > 4 && v[-5] != '/'))
			return ckpt__fail(CKPT_EINVAL, w->path, e[i].path, -1, "'%s' is not a Keras 3 path '<...>/vars/<N>'", e[i].path);
		idx = strtol(v + 1, &endp, 10);
		if (*endp || v[1] < '0' || v[1] > '9' || (v[1] == '0' && v[2]))
			return ckpt__fail(CKPT_EINVAL, w->path, e[i].path, -1, "'%s': variable index must be a plain integer", e[i].path);
		for (j = 0; j < n; j++)
			if (strncmp(e[j].path, e[i].path, glen + 1) == 0 && !strchr(e[j].path + glen + 1, '/'))
				count++;
		if (idx < 0 || (size_t)idx >= count)
			return ckpt__fail(CKPT_EINVAL, w->path, e[i].path, -1,
				"'%s': index %ld but the group has %zu variables (indices must be 0..%zu)", e[i].path, idx, count, count ? count - 1 : 0);
	}
	/* Layers first (Keras walks model.layers first), then the rest, in the order given. */
	for (i = 0; i < n; i++)
		if (has_prefix(e[i].path, "layers/"))
			CKPT_TRY(write_dataset(f, e[i].path, e[i].t, w->path));
	for (i = 0; i < n; i++)
		if (!has_prefix(e[i].path, "layers/"))
			CKPT_TRY(write_dataset(f, e[i].path, e[i].t, w->path));
	return CKPT_OK;
}

/* Keras 3 path for a name that is not one: TF keys via the graph, else by object path. */
static int v3_paths(const ckpt_writer *w, wentry *e, const ckpt__keras_wtensor *v, size_t n)
{
	strlist groups = { 0 };
	size_t *counts = NULL, i, opt_count = 0;
	int rc = CKPT_OK;
	counts = ckpt__calloc(n + 1, sizeof(size_t));
	if (!counts)
		return CKPT_ENOMEM;
	/* The iteration counter is optimizer/vars/0 in Keras 3: place it first. */
	for (i = 0; i < n && rc >= 0; i++) {
		int slot, opt;
		char *obj;
		if (e[i].path)
			continue;
		obj = key_object_path(v[i].name, &slot, &opt);
		if (!obj) {
			rc = CKPT_ENOMEM;
			break;
		}
		if (opt && !slot && (strcmp(obj, "optimizer/iter") == 0 || strcmp(obj, "optimizer/iteration") == 0 ||
			strcmp(obj, "optimizer/iterations") == 0)) {
			e[i].path = ckpt__strdup("optimizer/vars/0");
			opt_count = 1;
			if (!e[i].path)
				rc = CKPT_ENOMEM;
		}
		ckpt__free(obj);
	}
	for (i = 0; i < n && rc >= 0; i++) {
		int slot, opt, gi;
		char *obj, *last;
		if (e[i].path)
			continue;
		obj = key_object_path(v[i].name, &slot, &opt);
		if (!obj) {
			rc = CKPT_ENOMEM;
			break;
		}
		if (opt) {
			e[i].path = ckpt__asprintf("optimizer/vars/%zu", opt_count++);
		} else {
			last = strrchr(obj, '/');
			if (last)
				*last = '\0';
			gi = sl_find(&groups, obj, strlen(obj));
			if (gi < 0) {
				rc = sl_push(&groups, obj, strlen(obj));
				gi = (int)groups.n - 1;
			}
			if (rc >= 0)
				e[i].path = last ? ckpt__asprintf("layers/%s/vars/%zu", obj, counts[gi]++) :
					ckpt__asprintf("vars/%zu", counts[gi]++);
		}
		ckpt__free(obj);
		if (rc >= 0 && !e[i].path)
			rc = CKPT_ENOMEM;
	}
	ckpt__free(counts);
	sl_free(&groups);
	return rc;
}

static int build_locked(const ckpt_writer *w, int layout, const ckpt__keras_wtensor *v, size_t n, void **image,
	size_t *len);

int ckpt__keras_h5_build(const ckpt_writer *w, int layout, const ckpt__keras_wtensor *v, size_t n, void **image,
	size_t *len)
{
	int rc;
	ckpt__h5_lock();
	rc = build_locked(w, layout, v, n, image, len);
	ckpt__h5_unlock();
	return rc;
}

static int build_locked(const ckpt_writer *w, int layout, const ckpt__keras_wtensor *v, size_t n, void **image,
	size_t *len)
{
	static unsigned seq;
	wentry *e;
	hid_t fapl = -1, f = -1;
	char fname[96];
	size_t i, m = 0;
	ssize_t sz;
	int rc = CKPT_OK;
	*image = NULL;
	*len = 0;
	ckpt__h5_quiet();
	e = ckpt__calloc(n + 1, sizeof(*e));
	if (!e)
		return CKPT_ENOMEM;
	for (i = 0; i < n && rc >= 0; i++) {
		const char *fn;
		/* The serialized object graph of a bundle is not a variable. */
		if (strcmp(v[i].name, CKPT_OBJECT_GRAPH_KEY) == 0)
			continue;
		e[m].t = v[i].t;
		if (layout == CKPT_KERAS_LEGACY && is_v3_path(v[i].name)) {
			rc = ckpt__fail(CKPT_EINVAL, w->path, v[i].name, -1,
				"'%s' is a Keras 3 path; the keras-h5 layout needs model_weights/<layer>/<weight> or optimizer_weights/<weight>",
				v[i].name);
		} else if (layout == CKPT_KERAS_LEGACY) {
			e[m].path = legacy_path(w, v[i].name);
			if (!e[m].path)
				rc = CKPT_ENOMEM;
		} else if (is_v3_path(v[i].name)) {
			if (!(e[m].path = ckpt__strdup(v[i].name)))
				rc = CKPT_ENOMEM;
		} else if ((fn = graph_full_name(w->graph, v[i].name)) && is_v3_path(fn)) {
			if (!(e[m].path = ckpt__strdup(fn)))
				rc = CKPT_ENOMEM;
		} else if (is_legacy_path(v[i].name)) {
			rc = ckpt__fail(CKPT_EINVAL, w->path, v[i].name, -1,
				"'%s' is a legacy Keras path; the keras-weights layout needs layers/<key>/vars/<N>", v[i].name);
		}
		m++;
	}
	if (rc >= 0 && layout == CKPT_KERAS_V3) {
		ckpt__keras_wtensor *vv = ckpt__calloc(m + 1, sizeof(*vv));
		size_t k = 0;
		if (!vv)
			rc = CKPT_ENOMEM;
		for (i = 0; rc >= 0 && i < n; i++)
			if (strcmp(v[i].name, CKPT_OBJECT_GRAPH_KEY) != 0)
				vv[k++] = v[i];
		if (rc >= 0)
			rc = v3_paths(w, e, vv, m);
		ckpt__free(vv);
	}
	for (i = 0; rc >= 0 && i < m; i++) {
		size_t j;
		for (j = 0; j < i; j++)
			if (strcmp(e[i].path, e[j].path) == 0) {
				rc = ckpt__fail(CKPT_EINVAL, w->path, e[i].path, -1, "two tensors map to dataset '%s'", e[i].path);
				break;
			}
	}
	if (rc < 0)
		goto out;
	snprintf(fname, sizeof(fname), "ckpt-keras-%ld-%u.h5", (long)getpid(), ++seq);
	fapl = H5Pcreate(H5P_FILE_ACCESS);
	/* In memory only (no backing store); superblock v0 and old-style groups as h5py writes by default. */
	if (fapl < 0 || H5Pset_fapl_core(fapl, 1 << 20, 0) < 0 ||
		H5Pset_libver_bounds(fapl, H5F_LIBVER_EARLIEST, H5F_LIBVER_LATEST) < 0) {
		rc = ckpt__fail(CKPT_ERROR, w->path, NULL, -1, "HDF5 could not set up an in-memory file");
		goto out;
	}
	f = H5Fcreate(fname, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
	if (f < 0) {
		rc = ckpt__fail(CKPT_ERROR, w->path, NULL, -1, "HDF5 could not create an in-memory file");
		goto out;
	}
	rc = layout == CKPT_KERAS_LEGACY ? build_legacy(w, f, e, m) : build_v3(w, f, e, m);
	if (rc < 0)
		goto out;
	if (H5Fflush(f, H5F_SCOPE_GLOBAL) < 0 || (sz = H5Fget_file_image(f, NULL, 0)) <= 0) {
		rc = ckpt__fail(CKPT_ERROR, w->path, NULL, -1, "HDF5 could not produce the file image");
		goto out;
	}
	*image = ckpt__malloc((size_t)sz);
	if (!*image) {
		rc = CKPT_ENOMEM;
		goto out;
	}
	if (H5Fget_file_image(f, *image, (size_t)sz) != sz) {
		ckpt__free(*image);
		*image = NULL;
		rc = ckpt__fail(CKPT_ERROR, w->path, NULL, -1, "HDF5 could not copy the file image");
		goto out;
	}
	*len = (size_t)sz;
out:
	ckpt__h5_close(f);
	ckpt__h5_close(fapl);
	for (i = 0; i < n; i++)
		ckpt__free(e[i].path);
	ckpt__free(e);
	return rc;
}
