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
 * Data is written when a tensor is added, from the caller's buffer, as an
 * anonymous contiguous dataset (H5Dcreate_anon); names, groups and the
 * attributes are laid out at finish (H5Olink), once every name, the object
 * graph and the metadata are known. No copy of a tensor is kept.
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
#include "formats/keras_h5/h5_vfd.h"

#define HDF5_OBJECT_HEADER_LIMIT 64512
#define DEFAULT_KERAS_VERSION "2.15.0"

typedef struct wentry {
	char *path;              /* dataset path */
	haddr_t addr;            /* object header of the anonymous dataset holding its data */
} wentry;

static int has_prefix(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

/*
 * Name -> value, by hash (open addressing, FNV-1a): files with 10,000
 * tensors must not cost O(n^2) string compares. Keys are borrowed and looked
 * up by (bytes, length), so prefixes of a path need no copy.
 */
typedef struct strmap {
	const char **k;
	size_t *kl;
	uintptr_t *v;
	size_t cap, n;
} strmap;

static size_t sm_hash(const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ull;
	size_t i;
	for (i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return (size_t)h;
}

static size_t sm_slot(const strmap *m, const char *s, size_t len)
{
	size_t k = sm_hash(s, len) & (m->cap - 1);
	while (m->k[k] && !(m->kl[k] == len && memcmp(m->k[k], s, len) == 0))
		k = (k + 1) & (m->cap - 1);
	return k;
}

/* The value of key s[0..len), or NULL. */
static uintptr_t *sm_find(const strmap *m, const char *s, size_t len)
{
	size_t k;
	if (!m->cap)
		return NULL;
	k = sm_slot(m, s, len);
	return m->k[k] ? &m->v[k] : NULL;
}

/* Add key[0..len) (borrowed; not present yet). */
static int sm_add(strmap *m, const char *key, size_t len, uintptr_t val)
{
	size_t k;
	if ((m->n + 1) * 2 > m->cap) {
		strmap g = { NULL, NULL, NULL, m->cap ? m->cap * 2 : 64, 0 };
		size_t i;
		g.k = ckpt__calloc(g.cap, sizeof(*g.k));
		g.kl = ckpt__calloc(g.cap, sizeof(*g.kl));
		g.v = ckpt__calloc(g.cap, sizeof(*g.v));
		if (!g.k || !g.kl || !g.v) {
			ckpt__free(g.k);
			ckpt__free(g.kl);
			ckpt__free(g.v);
			return CKPT_ENOMEM;
		}
		for (i = 0; i < m->cap; i++)
			if (m->k[i]) {
				k = sm_slot(&g, m->k[i], m->kl[i]);
				g.k[k] = m->k[i];
				g.kl[k] = m->kl[i];
				g.v[k] = m->v[i];
			}
		g.n = m->n;
		ckpt__free(m->k);
		ckpt__free(m->kl);
		ckpt__free(m->v);
		*m = g;
	}
	k = sm_slot(m, key, len);
	m->k[k] = key;
	m->kl[k] = len;
	m->v[k] = val;
	m->n++;
	return CKPT_OK;
}

static void sm_free(strmap *m)
{
	ckpt__free(m->k);
	ckpt__free(m->kl);
	ckpt__free(m->v);
	memset(m, 0, sizeof(*m));
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

/* checkpoint_key -> full_name of the writer's graph (first attribute with the key wins). */
static int graph_map(const ckpt_object_graph *g, strmap *m)
{
	size_t i, j;
	for (i = 0; g && i < g->nnodes; i++)
		for (j = 0; j < g->nodes[i].nattrs; j++) {
			const char *k = g->nodes[i].attrs[j].checkpoint_key;
			if (k && !sm_find(m, k, strlen(k)))
				CKPT_TRY(sm_add(m, k, strlen(k), (uintptr_t)g->nodes[i].attrs[j].full_name));
		}
	return CKPT_OK;
}

static const char *graph_full_name(const strmap *gm, const char *key)
{
	uintptr_t *v = sm_find(gm, key, strlen(key));
	return v ? (const char *)*v : NULL;
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
static char *legacy_path(const strmap *gm, const char *name)
{
	const char *fn;
	char *obj, *out, *slash;
	int slot, opt;
	if (is_legacy_path(name))
		return ckpt__strdup(name);
	/* A weights-only dataset path ("<layer>/<weight>"): the same layer group under model_weights. */
	fn = graph_full_name(gm, name);
	if (!strstr(name, "/.ATTRIBUTES/") && !fn && strchr(name, '/'))
		return ckpt__asprintf("model_weights/%s", name);
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

/*
 * A write to an on-disk file failed (ENOSPC, EFBIG under ulimit -f with
 * SIGXFSZ ignored, an injected fault): the file is given up. libhdf5 1.10
 * drops the id of a dataset or file whose close failed to flush but keeps
 * the object, and H5_term_library then crashes on it at exit. So the file
 * driver is told to discard: the flushes and the final truncate succeed
 * without writing and every close completes; the temporary itself is removed
 * through the VFS. What still fails to close is left to ckpt__h5_mark_unclean
 * (h5_safe.h): no crash at exit. (The in-memory core driver never fails this
 * way: `sink` NULL.)
 */
static void neutralize(ckpt__h5_vfd_sink *sink)
{
	if (sink)
		sink->discard = 1;
}

/* ---- datasets ---- */

/*
 * The data, now, from the caller's buffer: an anonymous contiguous dataset,
 * no conversion (memory type = file type). An extra reference keeps it when
 * it is closed (an unlinked object would be deleted); *addr finds it again.
 */
static int create_dataset(hid_t file, ckpt__h5_vfd_sink *sink, const char *name, const ckpt_tensor *t,
	const char *fpath, haddr_t *addr)
{
	hid_t ty, sp, ds;
	hsize_t dims[CKPT_MAX_RANK];
	H5O_info_t oi;
	int i, rc = CKPT_OK;
	CKPT_TRY(ckpt__h5_type_for(t->dtype, &ty));
	for (i = 0; i < t->shape.rank; i++)
		dims[i] = (hsize_t)t->shape.dims[i];
	sp = t->shape.rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(t->shape.rank, dims, NULL);
	ds = sp < 0 ? -1 : H5Dcreate_anon(file, ty, sp, H5P_DEFAULT, H5P_DEFAULT);
	if (ds < 0)
		rc = ckpt__fail(CKPT_ERROR, fpath, name, -1, "HDF5 could not create the dataset for '%s'", name);
	else if (t->nbytes && H5Dwrite(ds, ty, H5S_ALL, H5S_ALL, H5P_DEFAULT, t->data) < 0) {
		rc = ckpt__fail(CKPT_EIO, fpath, name, -1, "HDF5 could not write the %llu bytes of '%s' (disk full or file too large?)",
			(unsigned long long)t->nbytes, name);
		neutralize(sink); /* before H5Dclose flushes again */
	}
	if (rc == CKPT_OK && t->dtype == CKPT_DT_BFLOAT16)
		rc = str_attr(ds, "dtype", "bfloat16", H5T_CSET_UTF8);
	if (rc == CKPT_OK && (H5Oget_info2(ds, &oi, H5O_INFO_BASIC) < 0 || H5Oincr_refcount(ds) < 0))
		rc = ckpt__fail(CKPT_ERROR, fpath, name, -1, "HDF5 could not keep the dataset of '%s'", name);
	if (rc == CKPT_OK)
		*addr = oi.addr;
	ckpt__h5_close(ds);
	ckpt__h5_close(sp);
	ckpt__h5_close(ty);
	return rc;
}

/*
 * Give an added dataset its path (groups created on the way). It was kept
 * alive unlinked by an extra reference (ckpt__keras_h5w_add), dropped here.
 */
static int link_dataset(hid_t file, const char *path, haddr_t addr, const char *fpath)
{
	hid_t lcpl, ds;
	int rc = CKPT_OK;
	CKPT_TRY(ckpt__h5_check_relpath(path, fpath, "dataset path"));
	ds = H5Oopen_by_addr(file, addr);
	if (ds < 0)
		return ckpt__fail(CKPT_ERROR, fpath, path, -1, "HDF5 could not reopen the data of '%s'", path);
	lcpl = H5Pcreate(H5P_LINK_CREATE);
	if (lcpl < 0 || H5Pset_create_intermediate_group(lcpl, 1) < 0 || H5Olink(ds, file, path, lcpl, H5P_DEFAULT) < 0)
		rc = ckpt__fail(CKPT_EINVAL, fpath, path, -1, "HDF5 could not create dataset '%s' (a name used both as group and dataset?)", path);
	else if (H5Odecr_refcount(ds) < 0)
		rc = ckpt__fail(CKPT_ERROR, fpath, path, -1, "HDF5 could not update the link count of '%s'", path);
	ckpt__h5_close(lcpl);
	ckpt__h5_close(ds);
	return rc;
}

/* ---- layouts ---- */

typedef struct strlist {
	char **v;
	size_t n, cap;
	strmap idx;      /* item -> position */
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
	if (!sm_find(&l->idx, s, len) && sm_add(&l->idx, l->v[l->n], len, l->n) < 0) {
		ckpt__free(l->v[l->n]);
		return CKPT_ENOMEM;
	}
	l->n++;
	return CKPT_OK;
}

static int sl_find(const strlist *l, const char *s, size_t len)
{
	uintptr_t *v = sm_find(&l->idx, s, len);
	return v ? (int)*v : -1;
}

static void sl_free(strlist *l)
{
	ckpt__h5_free_strings(l->v, l->n);
	sm_free(&l->idx);
	l->v = NULL;
	l->n = l->cap = 0;
}

/*
 * Keras reads a missing keras_version as "1" and then converts Keras 1
 * weights (kernel transposes, LSTM gate splits). So without metadata:
 * Keras 1 names (no '/' in any weight name) keep the attributes absent,
 * anything else gets a Keras 2 version that loads the weights as they are.
 */
static void default_versions(const wentry *e, size_t n, const char **kv, const char **be)
{
	if (*kv && *be)
		return;
	int k1 = 1;
	for (size_t i = 0; i < n && k1; i++)
		if (has_prefix(e[i].path, "model_weights/")) {
			const char *l = strchr(e[i].path + 14, '/');
			if (l && strchr(l + 1, '/'))
				k1 = 0;
		}
	if (!*kv && !k1)
		*kv = DEFAULT_KERAS_VERSION;
	if (!*be && !k1)
		*be = "tensorflow";
}

/* Layer order into *layers: meta "layer_names" `ln` (a JSON list, from a legacy reader) first, then first use. */
static int layer_order(const ckpt_writer *w, const wentry *e, size_t n, const char *ln, strlist *layers)
{
	int rc = CKPT_OK;
	if (ln) {
		json_error_t err;
		json_t *a = json_loads(ln, 0, &err), *x;
		size_t i;
		if (a && json_is_array(a)) {
			json_array_foreach(a, i, x) {
				const char *s = json_string_value(x);
				if (s && ckpt__h5_check_component(s, strlen(s)) == 0 && sl_find(layers, s, strlen(s)) < 0 &&
					(rc = sl_push(layers, s, strlen(s))) < 0)
					break;
			}
		}
		if (a)
			json_decref(a);
		CKPT_TRY(rc);
	}
	for (size_t i = 0; i < n; i++) {
		if (has_prefix(e[i].path, "model_weights/")) {
			const char *l = e[i].path + 14, *s = strchr(l, '/');
			if (!s)
				return ckpt__fail(CKPT_EINVAL, w->path, e[i].path, -1, "'%s' names no layer group and weight", e[i].path);
			if (strncmp(l, "top_level_model_weights/", 24) != 0 && sl_find(layers, l, (size_t)(s - l)) < 0)
				CKPT_TRY(sl_push(layers, l, (size_t)(s - l)));
		}
	}
	return CKPT_OK;
}

/*
 * Link the entries of each layer group under model_weights (`mw`) in the
 * order added, with its weight_names; the last group is top_level_model_weights.
 */
static int write_layer_groups(const ckpt_writer *w, hid_t f, hid_t mw, const wentry *e, size_t n,
	const strlist *layers)
{
	/* the entries of each group in the order added (counting sort) */
	size_t *first = ckpt__calloc(layers->n + 3, sizeof(size_t));
	size_t *order = ckpt__calloc(n + 1, sizeof(size_t));
	size_t *group = ckpt__calloc(n + 1, sizeof(size_t));
	size_t i, j;
	int rc = (!first || !order || !group) ? CKPT_ENOMEM : CKPT_OK;
	for (i = 0; i < n && rc == CKPT_OK; i++) {
		const char *l = e[i].path + 14, *s;
		int k;
		group[i] = layers->n + 1; /* none */
		if (!has_prefix(e[i].path, "model_weights/"))
			continue;
		s = strchr(l, '/');
		k = sl_find(layers, l, (size_t)(s - l));
		group[i] = k >= 0 ? (size_t)k : (size_t)(s - l) == 23 && strncmp(l, "top_level_model_weights", 23) == 0 ? layers->n : layers->n + 1;
		first[group[i] + 1]++;
	}
	if (rc == CKPT_OK) {
		for (j = 1; j <= layers->n + 1; j++)
			first[j] += first[j - 1];
		for (i = 0; i < n; i++)
			if (group[i] <= layers->n)
				order[first[group[i]]++] = i;
		for (j = layers->n + 1; j > 0; j--)
			first[j] = first[j - 1];
		first[0] = 0;
	}
	for (j = 0; j <= layers->n && rc >= 0; j++) {
		const char *lname = j < layers->n ? layers->v[j] : "top_level_model_weights";
		strlist wn = { 0 };
		size_t ll = strlen(lname), q;
		hid_t lg;
		for (q = first[j]; q < first[j + 1] && rc >= 0; q++) {
			const char *l = e[order[q]].path + 14;
			rc = sl_push(&wn, l + ll + 1, strlen(l + ll + 1));
			if (rc >= 0)
				rc = link_dataset(f, e[order[q]].path, e[order[q]].addr, w->path);
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
	ckpt__free(first);
	ckpt__free(order);
	ckpt__free(group);
	return rc;
}

/* Link the optimizer_weights/ entries and list them in that group's weight_names. */
static int write_optimizer_weights(const ckpt_writer *w, hid_t f, const wentry *e, size_t n)
{
	strlist opt = { 0 };
	int rc = CKPT_OK;
	for (size_t i = 0; i < n && rc >= 0; i++) {
		if (has_prefix(e[i].path, "optimizer_weights/")) {
			rc = sl_push(&opt, e[i].path + 18, strlen(e[i].path + 18));
			if (rc >= 0)
				rc = link_dataset(f, e[i].path, e[i].addr, w->path);
		}
	}
	if (rc >= 0 && opt.n) {
		hid_t g = H5Gopen2(f, "optimizer_weights", H5P_DEFAULT);
		rc = g < 0 ? ckpt__fail(CKPT_ERROR, w->path, "optimizer_weights", -1, "HDF5 could not open a group") :
			list_attr(g, "weight_names", opt.v, opt.n);
		ckpt__h5_close(g);
	}
	sl_free(&opt);
	return rc;
}

static int build_legacy(const ckpt_writer *w, hid_t f, wentry *e, size_t n)
{
	strlist layers = { 0 };
	const char *kv = ckpt__writer_meta(w, "keras_version"), *be = ckpt__writer_meta(w, "backend");
	const char *mc = ckpt__writer_meta(w, "model_config"), *tc = ckpt__writer_meta(w, "training_config");
	const char *ln = ckpt__writer_meta(w, "layer_names");
	hid_t mw = -1;
	int rc;
	default_versions(e, n, &kv, &be);
	if ((rc = layer_order(w, e, n, ln, &layers)) < 0)
		goto out;
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
	if ((rc = write_layer_groups(w, f, mw, e, n, &layers)) < 0)
		goto out;
	rc = write_optimizer_weights(w, f, e, n);
out:
	ckpt__h5_close(mw);
	sl_free(&layers);
	return rc;
}

static int build_v3(const ckpt_writer *w, hid_t f, wentry *e, size_t n)
{
	strmap count = { 0 };  /* "<group>" -> entries named "<group>/<no slash>" */
	size_t i;
	int rc = CKPT_OK;
	for (i = 0; i < n && rc >= 0; i++) {
		const char *v = strrchr(e[i].path, '/');
		uintptr_t *c = v ? sm_find(&count, e[i].path, (size_t)(v - e[i].path)) : NULL;
		if (c)
			(*c)++;
		else if (v)
			rc = sm_add(&count, e[i].path, (size_t)(v - e[i].path), 1);
	}
	/* Each vars group must hold exactly 0..k-1 (paths are distinct: k indices below k). */
	for (i = 0; i < n && rc >= 0; i++) {
		const char *v = strrchr(e[i].path, '/');
		size_t glen = v ? (size_t)(v - e[i].path) : 0, k;
		long idx;
		char *endp;
		if (!v || glen < 4 || strncmp(v - 4, "vars", 4) != 0 || (glen > 4 && v[-5] != '/')) {
			rc = ckpt__fail(CKPT_EINVAL, w->path, e[i].path, -1, "'%s' is not a Keras 3 path '<...>/vars/<N>'", e[i].path);
			break;
		}
		idx = strtol(v + 1, &endp, 10);
		if (*endp || v[1] < '0' || v[1] > '9' || (v[1] == '0' && v[2])) {
			rc = ckpt__fail(CKPT_EINVAL, w->path, e[i].path, -1, "'%s': variable index must be a plain integer", e[i].path);
			break;
		}
		k = (size_t)*sm_find(&count, e[i].path, glen);
		if (idx < 0 || (size_t)idx >= k)
			rc = ckpt__fail(CKPT_EINVAL, w->path, e[i].path, -1,
				"'%s': index %ld but the group has %zu variables (indices must be 0..%zu)", e[i].path, idx, k, k ? k - 1 : 0);
	}
	sm_free(&count);
	CKPT_TRY(rc);
	/* Layers first (Keras walks model.layers first), then the rest, in the order given. */
	for (i = 0; i < n; i++)
		if (has_prefix(e[i].path, "layers/"))
			CKPT_TRY(link_dataset(f, e[i].path, e[i].addr, w->path));
	for (i = 0; i < n; i++)
		if (!has_prefix(e[i].path, "layers/"))
			CKPT_TRY(link_dataset(f, e[i].path, e[i].addr, w->path));
	return CKPT_OK;
}

/* Keras 3 path for a name that is not one: TF keys via the graph, else by object path. */
static int v3_paths(wentry *e, const char *const *names, size_t n)
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
		obj = key_object_path(names[i], &slot, &opt);
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
		obj = key_object_path(names[i], &slot, &opt);
		if (!obj) {
			rc = CKPT_ENOMEM;
			break;
		}
		if (opt) {
			e[i].path = ckpt__asprintf("optimizer/vars/%zu", opt_count++);
		} else {
			/* owner object = the path less its last component; top-level variables share the root's vars/ */
			last = strrchr(obj, '/');
			if (last)
				*last = '\0';
			else
				obj[0] = '\0';
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

/* ---- the file being written ---- */

typedef struct staged {
	char *name;             /* as added */
	int var;                /* 0 for the serialized object graph (remembered, never stored) */
	haddr_t addr;           /* its anonymous dataset */
} staged;

struct ckpt__keras_h5w {
	const ckpt_writer *w;
	int layout;
	int in_memory;          /* the core driver, no io */
	ckpt__h5_vfd_sink sink; /* else: the io libhdf5 writes through (h5_vfd.h) */
	int broken;             /* an HDF5 write failed: the file is not trusted any more */
	int spent;              /* finish ran */
	hid_t file;
	staged *v;
	size_t n, cap;
	strmap names;           /* name -> index in v */
};

static int h5w_open_locked(ckpt__keras_h5w *b, ckpt_io *io)
{
	static unsigned seq;
	char fname[96];
	hid_t fapl;
	int ok, rc = CKPT_OK;
	ckpt__h5_quiet();
	fapl = H5Pcreate(H5P_FILE_ACCESS);
	/* Superblock v0 and old-style groups, as h5py writes by default. */
	ok = fapl >= 0 && H5Pset_libver_bounds(fapl, H5F_LIBVER_EARLIEST, H5F_LIBVER_LATEST) >= 0;
	/* the file's name for libhdf5 only: the core driver has no backing store, ours writes to the io */
	snprintf(fname, sizeof(fname), "ckpt-keras-%ld-%u.h5", (long)getpid(), ++seq);
	if (ok && !io) {
		/* In memory only (no backing store). */
		ok = H5Pset_fapl_core(fapl, 1 << 20, 0) >= 0;
	} else if (ok) {
		/* through the writer's VFS: one pwrite per dataset, straight from the caller's buffer */
		b->sink.io = io;
		rc = ckpt__h5_vfd_set(fapl, &b->sink, b->w->path);
		ok = rc == CKPT_OK;
		/* no sieve buffer: a dataset's bytes are written (or fail) in H5Dwrite, not later in a close */
		ok = ok && H5Pset_sieve_buf_size(fapl, 0) >= 0;
	}
	if (ok)
		b->file = H5Fcreate(fname, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
	ckpt__h5_close(fapl);
	if (rc < 0)
		return rc;
	if (b->file < 0)
		return ckpt__h5_vfd_error(io ? &b->sink : NULL, ckpt__fail(CKPT_EIO, b->w->path, NULL, -1,
			"HDF5 could not create %s", io ? "the file" : "an in-memory file"));
	return CKPT_OK;
}

int ckpt__keras_h5w_open(ckpt__keras_h5w **out, const ckpt_writer *w, int layout, ckpt_io *io)
{
	ckpt__keras_h5w *b = ckpt__calloc(1, sizeof(*b));
	int rc;
	*out = NULL;
	if (!b)
		return CKPT_ENOMEM;
	b->w = w;
	b->layout = layout;
	b->in_memory = io == NULL;
	b->file = -1;
	ckpt__h5_lock();
	rc = h5w_open_locked(b, io);
	ckpt__h5_unlock();
	if (rc < 0) {
		ckpt__keras_h5w_free(b);
		return rc;
	}
	*out = b;
	return CKPT_OK;
}

int ckpt__keras_h5w_add(ckpt__keras_h5w *b, const char *name, const ckpt_tensor *t)
{
	staged x = { NULL, 0, HADDR_UNDEF };
	int rc;
	if (b->spent)
		return ckpt__fail(CKPT_EINVAL, b->w->path, name, -1, "the Keras file was already laid out");
	CKPT_TRY(ckpt__keras_check_tensor(name, t));
	if (sm_find(&b->names, name, strlen(name)))
		return ckpt__fail(CKPT_EINVAL, NULL, name, -1, "tensor '%s' added twice", name);
	if (b->n == b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 32;
		staged *nv = ckpt__realloc(b->v, nc * sizeof(*nv));
		if (!nv)
			return CKPT_ENOMEM;
		b->v = nv;
		b->cap = nc;
	}
	if (!(x.name = ckpt__strdup(name)))
		return CKPT_ENOMEM;
	if (sm_add(&b->names, x.name, strlen(x.name), b->n) < 0) {
		ckpt__free(x.name);
		return CKPT_ENOMEM;
	}
	/* The serialized object graph of a bundle is not a variable. */
	x.var = strcmp(name, CKPT_OBJECT_GRAPH_KEY) != 0;
	if (x.var) {
		ckpt__h5_lock();
		rc = create_dataset(b->file, b->in_memory ? NULL : &b->sink, name, t, b->w->path, &x.addr);
		rc = ckpt__h5_vfd_error(b->in_memory ? NULL : &b->sink, rc);
		ckpt__h5_unlock();
		if (rc < 0) {
			/* The name stays known (a retry is "added twice"); the file is not trusted any more. */
			b->broken = 1;
			x.var = 0;
		}
	} else {
		rc = CKPT_OK;
	}
	b->v[b->n++] = x;
	return rc;
}

/* Dataset paths for every variable, checked, in add order. */
static int lay_out_paths(ckpt__keras_h5w *b, const strmap *gm, wentry *e, size_t *m_out)
{
	const ckpt_writer *w = b->w;
	const char **names = NULL;
	strmap seen = { 0 };
	size_t i, m = 0;
	int rc = CKPT_OK;
	for (i = 0; i < b->n && rc >= 0; i++) {
		const char *name = b->v[i].name, *fn;
		if (!b->v[i].var)
			continue;
		e[m].addr = b->v[i].addr;
		if (b->layout == CKPT_KERAS_LEGACY && is_v3_path(name)) {
			rc = ckpt__fail(CKPT_EINVAL, w->path, name, -1,
				"'%s' is a Keras 3 path; the keras-h5 layout needs model_weights/<layer>/<weight> or optimizer_weights/<weight>",
				name);
		} else if (b->layout == CKPT_KERAS_LEGACY) {
			e[m].path = legacy_path(gm, name);
			if (!e[m].path)
				rc = CKPT_ENOMEM;
		} else if (is_v3_path(name)) {
			if (!(e[m].path = ckpt__strdup(name)))
				rc = CKPT_ENOMEM;
		} else if ((fn = graph_full_name(gm, name)) && is_v3_path(fn)) {
			if (!(e[m].path = ckpt__strdup(fn)))
				rc = CKPT_ENOMEM;
		} else if (is_legacy_path(name)) {
			rc = ckpt__fail(CKPT_EINVAL, w->path, name, -1,
				"'%s' is a legacy Keras path; the keras-weights layout needs layers/<key>/vars/<N>", name);
		}
		m++;
	}
	*m_out = m;
	if (rc >= 0 && b->layout == CKPT_KERAS_V3) {
		size_t k = 0;
		names = ckpt__calloc(m + 1, sizeof(*names));
		if (!names)
			return CKPT_ENOMEM;
		for (i = 0; i < b->n; i++)
			if (b->v[i].var)
				names[k++] = b->v[i].name;
		rc = v3_paths(e, names, m);
		ckpt__free(names);
	}
	for (i = 0; rc >= 0 && i < m; i++) {
		if (sm_find(&seen, e[i].path, strlen(e[i].path)))
			rc = ckpt__fail(CKPT_EINVAL, w->path, e[i].path, -1, "two tensors map to dataset '%s'", e[i].path);
		else
			rc = sm_add(&seen, e[i].path, strlen(e[i].path), i);
	}
	sm_free(&seen);
	return rc;
}

/*
 * Close a file being given up (see neutralize()).
 */
static void close_abandoned(ckpt__keras_h5w *b)
{
	if (b->file < 0)
		return;
	neutralize(b->in_memory ? NULL : &b->sink);
	if (H5Fclose(b->file) < 0)
		ckpt__h5_mark_unclean();
	b->file = -1;
}

static int finish_locked(ckpt__keras_h5w *b, void **image, size_t *len)
{
	const ckpt_writer *w = b->w;
	strmap gm = { 0 };
	wentry *e;
	size_t i, m = 0;
	ssize_t sz;
	int rc;
	if (b->broken)
		return ckpt__fail(CKPT_EIO, w->path, NULL, -1, "an earlier write to the Keras file failed");
	e = ckpt__calloc(b->n + 1, sizeof(*e));
	if (!e)
		return CKPT_ENOMEM;
	rc = graph_map(ckpt__writer_graph(w), &gm);
	if (rc >= 0)
		rc = lay_out_paths(b, &gm, e, &m);
	if (rc >= 0)
		rc = b->layout == CKPT_KERAS_LEGACY ? build_legacy(w, b->file, e, m) : build_v3(w, b->file, e, m);
	for (i = 0; i < b->n; i++)
		ckpt__free(e[i].path);
	ckpt__free(e);
	sm_free(&gm);
	if (rc < 0)
		return rc;
	if (b->in_memory) {
		if (H5Fflush(b->file, H5F_SCOPE_GLOBAL) < 0 || (sz = H5Fget_file_image(b->file, NULL, 0)) <= 0)
			return ckpt__fail(CKPT_ERROR, w->path, NULL, -1, "HDF5 could not produce the file image");
		if (!(*image = ckpt__malloc((size_t)sz)))
			return CKPT_ENOMEM;
		if (H5Fget_file_image(b->file, *image, (size_t)sz) != sz) {
			ckpt__free(*image);
			*image = NULL;
			return ckpt__fail(CKPT_ERROR, w->path, NULL, -1, "HDF5 could not copy the file image");
		}
		*len = (size_t)sz;
	}
	/* The data is in the file already; flushing writes the remaining metadata (and may fail: then give it up). */
	if (!b->in_memory && H5Fflush(b->file, H5F_SCOPE_GLOBAL) < 0) {
		close_abandoned(b);
		return ckpt__fail(CKPT_EIO, w->path, NULL, -1, "HDF5 could not finish writing the file (disk full or file too large?)");
	}
	rc = CKPT_OK;
	b->sink.closing = 1;
	if (H5Fclose(b->file) < 0 || b->sink.failed) {
		if (!b->sink.failed)
			ckpt__h5_mark_unclean();
		rc = ckpt__fail(CKPT_EIO, w->path, NULL, -1, "HDF5 could not finish writing the file");
	}
	b->file = -1;
	if (rc < 0 && b->in_memory) {
		ckpt__free(*image);
		*image = NULL;
	}
	return rc;
}

int ckpt__keras_h5w_finish(ckpt__keras_h5w *b, void **image, size_t *len)
{
	int rc;
	if (image)
		*image = NULL;
	if (len)
		*len = 0;
	if (b->spent)
		return ckpt__fail(CKPT_EINVAL, b->w->path, NULL, -1, "the Keras file was already laid out");
	if (b->in_memory && (!image || !len))
		return ckpt__fail(CKPT_EINVAL, b->w->path, NULL, -1, "an in-memory Keras file needs somewhere to put its image");
	b->spent = 1;
	ckpt__h5_lock();
	rc = finish_locked(b, image, len);
	ckpt__h5_unlock();
	return ckpt__h5_vfd_error(b->in_memory ? NULL : &b->sink, rc);
}

void ckpt__keras_h5w_free(ckpt__keras_h5w *b)
{
	size_t i;
	if (!b)
		return;
	if (b->file >= 0) {
		ckpt__h5_lock();
		close_abandoned(b);
		ckpt__h5_unlock();
	}
	ckpt__error_slot_clear(&b->sink.err);
	for (i = 0; i < b->n; i++)
		ckpt__free(b->v[i].name);
	ckpt__free(b->v);
	sm_free(&b->names);
	ckpt__free(b);
}

int ckpt__keras_h5_build(const ckpt_writer *w, int layout, const ckpt__keras_wtensor *v, size_t n, void **image,
	size_t *len)
{
	ckpt__keras_h5w *b;
	size_t i;
	int rc;
	*image = NULL;
	*len = 0;
	CKPT_TRY(ckpt__keras_h5w_open(&b, w, layout, NULL));
	for (i = 0, rc = CKPT_OK; i < n && rc >= 0; i++)
		rc = ckpt__keras_h5w_add(b, v[i].name, v[i].t);
	if (rc >= 0)
		rc = ckpt__keras_h5w_finish(b, image, len);
	ckpt__keras_h5w_free(b);
	return rc;
}
