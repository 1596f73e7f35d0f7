#define _GNU_SOURCE /* memfd_create */
/*
 * Reading Keras HDF5 files (keras.md §1-§4). HDF5 always opens a file image
 * (h5_safe.c resolves variable-length strings in it, bounds-checked): on the
 * POSIX VFS a read-only mapping of the file, so only the metadata pages HDF5
 * touches are read; elsewhere (memory VFS, faulty VFS, a .keras member) the
 * whole file read into memory. Contiguous datasets stored exactly as they are
 * in memory (little-endian, or raw bytes) of a mapped file are read with
 * pread straight into the caller's buffer, at the offset and size that
 * ckpt__h5_dataset_info checked against the file size: no HDF5 call, no lock.
 * Everything else goes through H5Dread on the image.
 *
 * libhdf5 never runs on the file in the caller's process (h5_sandbox.h):
 * the layout walk below runs in a sandboxed child that sends back the
 * entries and metadata (encode_layout / decode_layout, which checks the
 * answer as untrusted input), and a dataset that is not one contiguous,
 * as-stored extent is read by a child with H5Dread. Contiguous extents are
 * read here with pread (mapped file) or memcpy (image): no libhdf5 at all.
 *
 * Layouts, classified from the root:
 *   legacy full model   root@model_config or /model_weights
 *       /model_weights@layer_names[0..]  -> /model_weights/<layer>@weight_names[0..]
 *       -> dataset /model_weights/<layer>/<weight name>   ('/' in a name = subgroups)
 *       /optimizer_weights@weight_names[0..] -> dataset /optimizer_weights/<weight name>
 *   legacy weights-only root@layer_names[0..]; same below the root
 *   Keras 3 store       /layers/<key>[/<attr>...]/vars/<N>, /optimizer/vars/<N>, /vars/<N>
 * Order comes from the name attributes (legacy) or the parsed integers N
 * (Keras 3), never from HDF5 iteration order.
 */
#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/mman.h>
#include <jansson.h>
#include "formats/keras_h5/h5_safe.h"
#include "formats/keras_h5/h5_sandbox.h"
#include "formats/keras_h5/keras_h5.h"

typedef struct kh5_var {
	char *path;
	char *layer;     /* legacy layer name / v3 saveable path */
	char *weight;    /* legacy weight name */
	char *vname;     /* v3 vars@name */
	int kind, index;
	int direct;      /* contiguous, stored as in memory: pread (or memcpy from the image) at info.offset */
	ckpt__h5_dsinfo info;
} kh5_var;

typedef struct kh5_state {
	void *image;        /* ckpt__malloc'ed, or the mapping of fd */
	size_t image_len;
	int fd;             /* mapped file, or -1 */
	hid_t file;
	int layout;
	kh5_var *v;
	size_t nv, cap;
	ckpt_var_info *infos;
	uint64_t budget;
	const char *path;   /* r->path, for messages */
	ckpt_reader *r;
	int shard;          /* one file of a sharded store: vars groups may hold any indices (keras_sharded.c checks the union) */
} kh5_state;

static void state_free(kh5_state *s)
{
	size_t i;
	if (!s)
		return;
	if (s->file >= 0)
		ckpt__h5_close_image(s->file);
	for (i = 0; i < s->nv; i++) {
		ckpt__free(s->v[i].path);
		ckpt__free(s->v[i].layer);
		ckpt__free(s->v[i].weight);
		ckpt__free(s->v[i].vname);
	}
	ckpt__free(s->v);
	ckpt__free(s->infos);
	if (s->fd >= 0) {
		munmap(s->image, s->image_len);
		close(s->fd);
	} else {
		ckpt__free(s->image);
	}
	ckpt__free(s);
}

static int add_var(kh5_state *s, char *path, const char *layer, const char *weight, const char *vname,
	int kind, int index, const ckpt__h5_dsinfo *info, int direct)
{
	kh5_var *x;
	if (s->nv >= CKPT_MAX_VARIABLES) {
		ckpt__free(path);
		return ckpt__fail(CKPT_ELIMIT, s->path, NULL, -1, "more than %d datasets", CKPT_MAX_VARIABLES);
	}
	if (s->nv == s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 32;
		kh5_var *nv = ckpt__realloc(s->v, nc * sizeof(*nv));
		if (!nv) {
			ckpt__free(path);
			return CKPT_ENOMEM;
		}
		s->v = nv;
		s->cap = nc;
	}
	x = &s->v[s->nv];
	memset(x, 0, sizeof(*x));
	x->path = path;
	x->kind = kind;
	x->index = index;
	x->direct = direct;
	x->info = *info;
	if ((layer && !(x->layer = ckpt__strdup(layer))) || (weight && !(x->weight = ckpt__strdup(weight))) ||
		(vname && !(x->vname = ckpt__strdup(vname)))) {
		ckpt__free(x->path);
		ckpt__free(x->layer);
		ckpt__free(x->weight);
		ckpt__free(x->vname);
		return CKPT_ENOMEM;
	}
	s->nv++;
	return CKPT_OK;
}

/*
 * Open dataset `rel` (below group `loc` as `sub`, or from the root when sub
 * is NULL), validate it, record it as entry. `rel` is adopted.
 */
static int take_dataset_at(kh5_state *s, hid_t loc, const char *sub, char *rel, const char *layer, const char *weight,
	const char *vname, int kind, int index)
{
	hid_t ds;
	ckpt__h5_dsinfo info;
	int direct = 0, rc = ckpt__h5_open(sub ? loc : s->file, sub ? sub : rel, CKPT_H5_DATASET, s->path, &ds);
	if (rc < 0) {
		ckpt__error_annotate(s->path, rel);
		ckpt__free(rel);
		return rc;
	}
	rc = ckpt__h5_dataset_info(ds, s->path, rel, s->image_len, s->budget, &info);
	if (rc >= 0 && info.offset >= 0 && info.nbytes > 0) {
		/* Bytes as stored = bytes in memory when read raw, or for little-endian (or 1-byte) numbers. */
		hid_t ft = H5Dget_type(ds);
		direct = info.raw || (ft >= 0 && (H5Tget_order(ft) == H5T_ORDER_LE || H5Tget_size(ft) == 1));
		ckpt__h5_close(ft);
	}
	ckpt__h5_close(ds);
	if (rc < 0) {
		ckpt__free(rel);
		return rc;
	}
	return add_var(s, rel, layer, weight, vname, kind, index, &info, direct);
}

static int take_dataset(kh5_state *s, char *rel, const char *layer, const char *weight, const char *vname,
	int kind, int index)
{
	return take_dataset_at(s, -1, NULL, rel, layer, weight, vname, kind, index);
}

static char *join3(const char *a, const char *b, const char *c)
{
	return ckpt__asprintf("%s%s%s%s%s", a, *a ? "/" : "", b, (c && *c) ? "/" : "", c ? c : "");
}

/* ---- legacy (§2, §3) ---- */

static int read_layer(kh5_state *s, hid_t g, const char *prefix, const char *layer)
{
	hid_t lg;
	char **wn = NULL, *where;
	size_t nw = 0, i;
	int rc;
	where = join3(prefix, layer, NULL);
	if (!where)
		return CKPT_ENOMEM;
	rc = ckpt__h5_check_relpath(layer, s->path, "layer name in layer_names");
	if (rc < 0)
		goto out;
	rc = ckpt__h5_open(g, layer, CKPT_H5_GROUP, s->path, &lg);
	if (rc < 0) {
		ckpt__error_annotate(s->path, where);
		goto out;
	}
	rc = ckpt__h5_attr_list_chunked(lg, "weight_names", s->path, where, &wn, &nw);
	ckpt__h5_close(lg);
	if (rc == CKPT_ENOTFOUND)
		rc = ckpt__fail(CKPT_EFORMAT, s->path, where, -1, "layer group '%s' has no weight_names attribute", where);
	for (i = 0; rc >= 0 && i < nw; i++) {
		char *rel;
		rc = ckpt__h5_check_relpath(wn[i], s->path, "weight name in weight_names");
		if (rc < 0)
			break;
		rel = join3(prefix, layer, wn[i]);
		if (!rel) {
			rc = CKPT_ENOMEM;
			break;
		}
		rc = take_dataset(s, rel, layer, wn[i], NULL, CKPT_KE_MODEL, (int)i);
	}
out:
	ckpt__h5_free_strings(wn, nw);
	ckpt__free(where);
	return rc;
}

/* The full layer list (weightless layers included) as a JSON array, so a rewrite keeps it. */
static int layer_names_meta(kh5_state *s, char **ln, size_t nl)
{
	json_t *a = json_array();
	char *txt;
	size_t i;
	int rc = CKPT_OK;
	if (!a)
		return CKPT_ENOMEM;
	for (i = 0; i < nl; i++) {
		json_t *x = json_string(ln[i]);
		if (!x) /* not UTF-8: leave the metadata out rather than alter a name */
			goto out;
		json_array_append_new(a, x);
	}
	txt = json_dumps(a, JSON_COMPACT);
	if (!txt) {
		rc = CKPT_ENOMEM;
		goto out;
	}
	rc = ckpt__reader_set_meta(s->r, "layer_names", txt);
	free(txt);
out:
	json_decref(a);
	return rc;
}

static int read_legacy(kh5_state *s, int full)
{
	const char *prefix = full ? "model_weights" : "";
	hid_t g = s->file;
	char **ln = NULL;
	size_t nl = 0, i;
	int rc, kind;
	if (full) {
		rc = ckpt__h5_open(s->file, "model_weights", CKPT_H5_GROUP, s->path, &g);
		if (rc == CKPT_ENOTFOUND) /* model_config but no weights: a config-only file */
			goto optimizer;
		if (rc < 0)
			return rc;
	}
	rc = ckpt__h5_attr_list_chunked(g, "layer_names", s->path, full ? "model_weights" : "/", &ln, &nl);
	if (rc == CKPT_ENOTFOUND)
		rc = ckpt__fail(CKPT_EFORMAT, s->path, full ? "model_weights" : "/", -1, "no layer_names attribute");
	for (i = 0; rc >= 0 && i < nl; i++)
		rc = read_layer(s, g, prefix, ln[i]);
	if (rc >= 0)
		rc = layer_names_meta(s, ln, nl);
	/* tf.keras >= 2.7 keeps the model's own weights apart (normally none). */
	if (rc >= 0)
		rc = ckpt__h5_child_kind(g, "top_level_model_weights", s->path, prefix, &kind);
	if (rc >= 0 && kind == CKPT_H5_GROUP) {
		for (i = 0; i < nl && strcmp(ln[i], "top_level_model_weights") != 0; i++)
			;
		if (i == nl)
			rc = read_layer(s, g, prefix, "top_level_model_weights");
	}
	ckpt__h5_free_strings(ln, nl);
	if (full)
		ckpt__h5_close(g);
	if (rc < 0 || !full)
		return rc;
optimizer:
	CKPT_TRY(ckpt__h5_child_kind(s->file, "optimizer_weights", s->path, "/", &kind));
	if (kind == CKPT_H5_GROUP) {
		char **wn = NULL;
		size_t nw = 0;
		CKPT_TRY(ckpt__h5_open(s->file, "optimizer_weights", CKPT_H5_GROUP, s->path, &g));
		rc = ckpt__h5_attr_list_chunked(g, "weight_names", s->path, "optimizer_weights", &wn, &nw);
		ckpt__h5_close(g);
		if (rc == CKPT_ENOTFOUND)
			rc = ckpt__fail(CKPT_EFORMAT, s->path, "optimizer_weights", -1, "no weight_names attribute");
		for (i = 0; rc >= 0 && i < nw; i++) {
			char *rel;
			rc = ckpt__h5_check_relpath(wn[i], s->path, "optimizer weight name");
			if (rc < 0)
				break;
			if (!(rel = join3("optimizer_weights", wn[i], NULL))) {
				rc = CKPT_ENOMEM;
				break;
			}
			rc = take_dataset(s, rel, NULL, wn[i], NULL, CKPT_KE_OPTIMIZER, (int)i);
		}
		ckpt__h5_free_strings(wn, nw);
	}
	return rc;
}

/* ---- Keras 3 (§4) ---- */

/* Strict decimal: digits only, no sign, no leading zero (except "0"), <= max. */
static int parse_index(const char *s, long max, long *out)
{
	long v = 0;
	if (!*s || (s[0] == '0' && s[1]))
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		v = v * 10 + (*s - '0');
		if (v > max)
			return -1;
	}
	*out = v;
	return 0;
}

static int link_natcmp(const void *a, const void *b)
{
	return ckpt__keras_natcmp(((const ckpt__h5_link *)a)->name, ((const ckpt__h5_link *)b)->name);
}

static int read_vars_group(kh5_state *s, hid_t vg, const char *owner, const char *rel)
{
	ckpt__h5_link *l = NULL;
	size_t n = 0, i;
	long *slot = NULL;
	char *vname = NULL;
	int rc, exists = 0;
	CKPT_TRY(ckpt__h5_list(vg, s->path, rel, &l, &n));
	rc = ckpt__h5_attr_exists(vg, "name", &exists);
	if (rc == CKPT_OK && exists)
		rc = ckpt__h5_attr_string(vg, "name", s->path, rel, &vname);
	if (rc < 0)
		goto out;
	slot = ckpt__calloc(n ? n : 1, sizeof(long));
	if (!slot) {
		rc = CKPT_ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++)
		slot[i] = -1;
	rc = CKPT_OK;
	if (s->shard) {
		/* a shard holds some of the group's variables: distinct indices, in order; the union is checked later */
		long *idx = ckpt__calloc(n ? n : 1, sizeof(long));
		if (!idx) {
			rc = CKPT_ENOMEM;
			goto out;
		}
		for (i = 0; i < n && rc == CKPT_OK; i++)
			if (l[i].kind != CKPT_H5_DATASET || parse_index(l[i].name, CKPT_MAX_VARIABLES - 1, &idx[i]) < 0)
				rc = ckpt__fail(CKPT_EFORMAT, s->path, rel, -1,
					"'%s/%s' is not a variable: a vars group holds datasets named by their index", rel, l[i].name);
		for (i = 0; i < n && rc == CKPT_OK; i++) { /* insertion by index: a handful per group */
			size_t k = i;
			while (k > 0 && idx[slot[k - 1]] > idx[i]) {
				slot[k] = slot[k - 1];
				k--;
			}
			slot[k] = (long)i;
		}
		for (i = 1; i < n && rc == CKPT_OK; i++)
			if (idx[slot[i]] == idx[slot[i - 1]])
				rc = ckpt__fail(CKPT_EFORMAT, s->path, rel, -1, "'%s/%s' is listed twice", rel, l[slot[i]].name);
		ckpt__free(idx);
		if (rc < 0)
			goto out;
		for (i = 0; i < n && rc >= 0; i++) {
			char *p = ckpt__asprintf("%s/%s", rel, l[slot[i]].name);
			long k = 0;
			int kind = strncmp(rel, "optimizer/", 10) == 0 ? CKPT_KE_OPTIMIZER :
				(strncmp(rel, "layers/", 7) == 0 || strcmp(rel, "vars") == 0) ? CKPT_KE_MODEL : CKPT_KE_OTHER;
			if (!p) {
				rc = CKPT_ENOMEM;
				break;
			}
			parse_index(l[slot[i]].name, CKPT_MAX_VARIABLES - 1, &k);
			rc = take_dataset_at(s, vg, l[slot[i]].name, p, owner, NULL, vname, kind, (int)k);
		}
		goto out;
	}
	/* Names must be exactly 0..n-1: each parsed strictly, no gaps, no duplicates. */
	for (i = 0; i < n; i++) {
		long k;
		if (l[i].kind != CKPT_H5_DATASET || parse_index(l[i].name, (long)n - 1, &k) < 0 || slot[k] >= 0) {
			rc = ckpt__fail(CKPT_EFORMAT, s->path, rel, -1,
				"'%s/%s' is not a variable: a vars group holds datasets named 0..%zu only", rel, l[i].name, n ? n - 1 : 0);
			goto out;
		}
		slot[k] = (long)i;
	}
	for (i = 0; i < n && rc >= 0; i++) {
		char *p = ckpt__asprintf("%s/%s", rel, l[slot[i]].name);
		int kind = strncmp(rel, "optimizer/", 10) == 0 ? CKPT_KE_OPTIMIZER :
			(strncmp(rel, "layers/", 7) == 0 || strcmp(rel, "vars") == 0 ||
			 strncmp(rel, "_layer_checkpoint_dependencies/", 31) == 0) ? CKPT_KE_MODEL : CKPT_KE_OTHER;
		if (!p) {
			rc = CKPT_ENOMEM;
			break;
		}
		/* from the open vars group: one link, already checked by ckpt__h5_list, instead of the whole path */
		rc = take_dataset_at(s, vg, l[slot[i]].name, p, owner, NULL, vname, kind, (int)i);
	}
out:
	ckpt__free(slot);
	ckpt__free(vname);
	ckpt__h5_free_links(l, n);
	return rc;
}

static int walk_v3(kh5_state *s, hid_t g, const char *rel, int depth)
{
	ckpt__h5_link *l = NULL;
	size_t n = 0, i;
	int rc = CKPT_OK;
	if (depth > CKPT_H5_MAX_DEPTH)
		return ckpt__fail(CKPT_ELIMIT, s->path, rel, -1, "groups nested deeper than %d (a cycle of hard links?)", CKPT_H5_MAX_DEPTH);
	CKPT_TRY(ckpt__h5_list(g, s->path, *rel ? rel : "/", &l, &n));
	if (n > 1) /* qsort(NULL, 0) is undefined: an empty group lists nothing */
		qsort(l, n, sizeof(*l), link_natcmp);
	for (i = 0; i < n && rc >= 0; i++) {
		char *child = *rel ? ckpt__asprintf("%s/%s", rel, l[i].name) : ckpt__strdup(l[i].name);
		hid_t cg;
		if (!child) {
			rc = CKPT_ENOMEM;
			break;
		}
		if (l[i].kind != CKPT_H5_GROUP) {
			rc = ckpt__fail(CKPT_EFORMAT, s->path, child, -1, "dataset '%s' outside a vars group (not a Keras 3 layout)", child);
			ckpt__free(child);
			break;
		}
		rc = ckpt__h5_open(g, l[i].name, CKPT_H5_GROUP, s->path, &cg);
		if (rc >= 0) {
			if (strcmp(l[i].name, "vars") == 0)
				rc = read_vars_group(s, cg, rel, child);
			else
				rc = walk_v3(s, cg, child, depth + 1);
			ckpt__h5_close(cg);
		}
		ckpt__free(child);
	}
	ckpt__h5_free_links(l, n);
	return rc;
}

/* ---- classification and metadata ---- */

static int classify(kh5_state *s, int *layout)
{
	int a, k;
	static const char *const v3_groups[] = { "layers", "vars", "optimizer", "_layer_checkpoint_dependencies", NULL };
	size_t i;
	CKPT_TRY(ckpt__h5_attr_exists(s->file, "model_config", &a));
	CKPT_TRY(ckpt__h5_child_kind(s->file, "model_weights", s->path, "/", &k));
	if (a || k == CKPT_H5_GROUP) {
		*layout = CKPT_KERAS_LEGACY;
		return CKPT_OK;
	}
	CKPT_TRY(ckpt__h5_attr_exists(s->file, "layer_names", &a));
	if (!a)
		CKPT_TRY(ckpt__h5_attr_exists(s->file, "layer_names0", &a));
	if (a) {
		*layout = CKPT_KERAS_LEGACY_WEIGHTS;
		return CKPT_OK;
	}
	for (i = 0; v3_groups[i]; i++) {
		CKPT_TRY(ckpt__h5_child_kind(s->file, v3_groups[i], s->path, "/", &k));
		if (k == CKPT_H5_GROUP) {
			*layout = CKPT_KERAS_V3;
			return CKPT_OK;
		}
	}
	if (H5Aget_num_attrs(s->file) == 0) {
		hsize_t nlinks = 0;
		H5G_info_t gi;
		if (H5Gget_info(s->file, &gi) >= 0)
			nlinks = gi.nlinks;
		if (nlinks == 0) { /* an empty Keras 3 store: a model without variables */
			*layout = CKPT_KERAS_V3;
			return CKPT_OK;
		}
	}
	return ckpt__fail(CKPT_EFORMAT, s->path, NULL, -1,
		"HDF5 file is not a Keras layout: no model_config/model_weights, no layer_names, no layers/vars/optimizer groups");
}

static int meta_attr(ckpt_reader *r, kh5_state *s, hid_t obj, const char *attr, const char *key)
{
	char *v = NULL;
	int rc, exists;
	if (ckpt_reader_meta(r, key))
		return CKPT_OK;
	CKPT_TRY(ckpt__h5_attr_exists(obj, attr, &exists));
	if (!exists)
		return CKPT_OK;
	rc = ckpt__h5_attr_string(obj, attr, s->path, attr, &v);
	if (rc < 0)
		return rc;
	rc = ckpt__reader_set_meta(r, key, v);
	ckpt__free(v);
	return rc;
}

static int cmp_strp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sort-based duplicate check (O(n log n)): hard-link aliases could list one path twice. */
static int check_duplicates(kh5_state *s)
{
	size_t i;
	const char **names;
	int rc = CKPT_OK;
	if (s->nv < 2)
		return CKPT_OK;
	names = ckpt__calloc(s->nv, sizeof(char *));
	if (!names)
		return CKPT_ENOMEM;
	for (i = 0; i < s->nv; i++)
		names[i] = s->v[i].path;
	qsort(names, s->nv, sizeof(char *), cmp_strp);
	for (i = 1; i < s->nv; i++)
		if (strcmp(names[i - 1], names[i]) == 0) {
			rc = ckpt__fail(CKPT_EFORMAT, s->path, names[i], -1, "dataset '%s' is listed twice", names[i]);
			break;
		}
	ckpt__free(names);
	return rc;
}

static int attach_locked(ckpt_reader *r, kh5_state *s, const char *config_json, int from_archive);

static kh5_state *state_new(ckpt_reader *r, void *image, size_t n, int fd)
{
	kh5_state *s = ckpt__calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->image = image;
	s->image_len = n;
	s->fd = fd;
	s->file = -1;
	s->path = r->path ? r->path : r->user_path;
	s->r = r;
	s->budget = r->opts.memory_budget ? r->opts.memory_budget : CKPT_DEFAULT_MEMORY_BUDGET;
	return s;
}

int ckpt__keras_h5_attach(ckpt_reader *r, void *image, size_t n, const char *config_json, int from_archive)
{
	kh5_state *s = state_new(r, image, n, -1);
	int rc;
	if (!s) {
		ckpt__free(image);
		return CKPT_ENOMEM;
	}
	ckpt__h5_lock();
	rc = attach_locked(r, s, config_json, from_archive);
	ckpt__h5_unlock();
	return rc;
}

/* A mapped file (fd >= 0) or image (fd -1): a .keras member (config_json), a shard of sharded weights, or a file. */
static int attach_fd(ckpt_reader *r, int fd, void *map, size_t n, const char *config_json, int shard)
{
	kh5_state *s = state_new(r, map, n, fd);
	int rc;
	if (!s) {
		if (fd >= 0) {
			munmap(map, n);
			close(fd);
		} else {
			ckpt__free(map);
		}
		return CKPT_ENOMEM;
	}
	s->shard = shard;
	ckpt__h5_lock();
	rc = attach_locked(r, s, config_json, config_json != NULL);
	ckpt__h5_unlock();
	return rc;
}

int ckpt__keras_h5_attach_member(ckpt_reader *r, int fd, void *map, size_t n, const char *config_json)
{
	return attach_fd(r, fd, map, n, config_json, 0);
}

int ckpt__keras_h5_attach_shard(ckpt_reader *r, int fd, void *map, size_t n, int shard)
{
	return attach_fd(r, fd, map, n, NULL, shard);
}

int ckpt__keras_h5_attach_file(ckpt_reader *r, int fd, void *map, size_t n)
{
	return attach_fd(r, fd, map, n, NULL, 0);
}

/* The libhdf5 part of opening, run in the sandboxed child: entries and metadata into s and r. */
static int scan_locked(ckpt_reader *r, kh5_state *s, int from_archive)
{
	int rc;
	CKPT_TRY(ckpt__h5_open_image(&s->file, s->image, s->image_len, s->path));
	CKPT_TRY(classify(s, &s->layout));
	if (from_archive && s->layout != CKPT_KERAS_V3)
		return ckpt__fail(CKPT_EFORMAT, s->path, "model.weights.h5", -1,
			"model.weights.h5 of a .keras archive is not a Keras 3 weights store");
	if (s->shard && s->layout != CKPT_KERAS_V3)
		return ckpt__fail(CKPT_EFORMAT, s->path, NULL, -1, "a shard of sharded Keras weights is not a Keras 3 weights store");
	if (s->layout == CKPT_KERAS_V3)
		rc = walk_v3(s, s->file, "", 0);
	else
		rc = read_legacy(s, s->layout == CKPT_KERAS_LEGACY);
	if (rc < 0)
		return rc;
	CKPT_TRY(check_duplicates(s));
	if (s->layout != CKPT_KERAS_V3) {
		hid_t mw = -1;
		CKPT_TRY(meta_attr(r, s, s->file, "keras_version", "keras_version"));
		CKPT_TRY(meta_attr(r, s, s->file, "backend", "backend"));
		CKPT_TRY(meta_attr(r, s, s->file, "model_config", "model_config"));
		CKPT_TRY(meta_attr(r, s, s->file, "training_config", "training_config"));
		if (s->layout == CKPT_KERAS_LEGACY &&
			ckpt__h5_open(s->file, "model_weights", CKPT_H5_GROUP, s->path, &mw) == CKPT_OK) {
			rc = meta_attr(r, s, mw, "keras_version", "keras_version");
			if (rc >= 0)
				rc = meta_attr(r, s, mw, "backend", "backend");
			ckpt__h5_close(mw);
			CKPT_TRY(rc);
		}
		ckpt_error_clear();
	}
	return CKPT_OK;
}

/* ---- the child's answer: layout, entries, metadata (little-endian fields, length-prefixed strings) ---- */

typedef struct wbuf {
	unsigned char *p;
	size_t n, cap;
	int oom;
} wbuf;

static void put(wbuf *b, const void *v, size_t n)
{
	if (b->oom)
		return;
	if (b->cap - b->n < n) {
		size_t nc = b->cap ? b->cap : 4096;
		unsigned char *np;
		while (nc - b->n < n)
			nc *= 2;
		if (!(np = ckpt__realloc(b->p, nc))) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = nc;
	}
	memcpy(b->p + b->n, v, n);
	b->n += n;
}
static void put_u64(wbuf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(wbuf *b, const char *s)
{
	uint64_t n = s ? strlen(s) : UINT64_MAX;
	put_u64(b, n);
	if (s)
		put(b, s, (size_t)n);
}

static int encode_layout(const ckpt_reader *r, const kh5_state *s, void **out, size_t *len)
{
	wbuf b = { NULL, 0, 0, 0 };
	size_t i;
	int d;
	put_u64(&b, (uint64_t)s->layout);
	put_u64(&b, s->nv);
	for (i = 0; i < s->nv; i++) {
		const kh5_var *x = &s->v[i];
		put_str(&b, x->path);
		put_str(&b, x->layer);
		put_str(&b, x->weight);
		put_str(&b, x->vname);
		put_u64(&b, (uint64_t)x->kind);
		put_u64(&b, (uint64_t)x->index);
		put_u64(&b, (uint64_t)x->direct);
		put_u64(&b, (uint64_t)x->info.dtype);
		put_u64(&b, (uint64_t)x->info.shape.rank);
		for (d = 0; d < x->info.shape.rank; d++)
			put_u64(&b, (uint64_t)x->info.shape.dims[d]);
		put_u64(&b, x->info.nbytes);
		put_u64(&b, (uint64_t)x->info.offset);
		put_u64(&b, (uint64_t)x->info.raw);
	}
	put_u64(&b, r->nmeta);
	for (i = 0; i < r->nmeta; i++) {
		put_str(&b, r->meta_keys[i]);
		put_str(&b, r->meta_vals[i]);
	}
	if (b.oom) {
		ckpt__free(b.p);
		return CKPT_ENOMEM;
	}
	*out = b.p;
	*len = b.n;
	return CKPT_OK;
}

typedef struct rbuf {
	const unsigned char *p;
	size_t n, at;
	int bad;
} rbuf;

static uint64_t get_u64(rbuf *b)
{
	uint64_t v = 0;
	if (b->bad || b->n - b->at < 8) {
		b->bad = 1;
		return 0;
	}
	memcpy(&v, b->p + b->at, 8);
	b->at += 8;
	return v;
}
/* A fresh string, or NULL (absent, or b->bad set on a malformed/oversized one). */
static char *get_str(rbuf *b, int *absent)
{
	uint64_t n = get_u64(b);
	char *s;
	*absent = 0;
	if (b->bad)
		return NULL;
	if (n == UINT64_MAX) {
		*absent = 1;
		return NULL;
	}
	if (n > b->n - b->at || memchr(b->p + b->at, 0, (size_t)n)) {
		b->bad = 1;
		return NULL;
	}
	if (!(s = ckpt__strndup((const char *)b->p + b->at, (size_t)n))) {
		b->bad = 2;
		return NULL;
	}
	b->at += (size_t)n;
	return s;
}

/* The child's memory may have been damaged by libhdf5 before it answered: check everything. */
static int decode_layout(ckpt_reader *r, kh5_state *s, const void *buf, size_t len)
{
	rbuf b = { buf, len, 0, 0 };
	uint64_t nv, nm, i, v;
	int absent, rc = CKPT_OK, d;
	v = get_u64(&b);
	if (v < CKPT_KERAS_LEGACY || v > CKPT_KERAS_V3)
		b.bad = 1;
	s->layout = (int)v;
	nv = get_u64(&b);
	if (nv > CKPT_MAX_VARIABLES)
		b.bad = 1;
	for (i = 0; !b.bad && i < nv && rc >= 0; i++) {
		char *path, *layer, *weight, *vname;
		ckpt__h5_dsinfo info;
		int kind, index, direct, a2, a3, a4;
		uint64_t want, end;
		memset(&info, 0, sizeof(info));
		path = get_str(&b, &absent);
		layer = get_str(&b, &a2);
		weight = get_str(&b, &a3);
		vname = get_str(&b, &a4);
		kind = (int)get_u64(&b);
		index = (int)get_u64(&b);
		direct = (int)get_u64(&b);
		info.dtype = (ckpt_dtype)get_u64(&b);
		info.shape.rank = (int)get_u64(&b);
		if (info.shape.rank < 0 || info.shape.rank > CKPT_MAX_RANK)
			b.bad = 1;
		for (d = 0; !b.bad && d < info.shape.rank; d++)
			info.shape.dims[d] = (int64_t)get_u64(&b);
		info.nbytes = get_u64(&b);
		info.offset = (int64_t)get_u64(&b);
		info.raw = (int)get_u64(&b);
		if (!b.bad && (!path || absent || ckpt_dtype_size(info.dtype) == 0 ||
			ckpt_shape_nbytes(&want, &info.shape, info.dtype) < 0 || want != info.nbytes || info.nbytes > s->budget ||
			kind < CKPT_KE_MODEL || kind > CKPT_KE_OTHER || (direct != 0 && direct != 1) ||
			(direct && (info.offset < 0 || ckpt__add_u64((uint64_t)info.offset, info.nbytes, &end) || end > s->image_len))))
			b.bad = 1;
		if (b.bad) {
			ckpt__free(path);
			ckpt__free(layer);
			ckpt__free(weight);
			ckpt__free(vname);
			break;
		}
		rc = add_var(s, path, layer, weight, vname, kind, index, &info, direct);
		ckpt__free(layer);
		ckpt__free(weight);
		ckpt__free(vname);
	}
	nm = b.bad ? 0 : get_u64(&b);
	if (nm > 4096)
		b.bad = 1;
	for (i = 0; !b.bad && i < nm && rc >= 0; i++) {
		char *k = get_str(&b, &absent), *val = k ? get_str(&b, &absent) : NULL;
		if (k && val)
			rc = ckpt__reader_set_meta(r, k, val);
		ckpt__free(k);
		ckpt__free(val);
	}
	if (rc < 0)
		return rc;
	if (b.bad == 2)
		return CKPT_ENOMEM;
	if (b.bad || b.at != b.n)
		return ckpt__fail(CKPT_EFORMAT, s->path, NULL, -1,
			"the libhdf5 reader process sent a malformed layout (%zu of %zu bytes parsed): corrupt HDF5 metadata?", b.at, b.n);
	return CKPT_OK;
}

/*
 * A job in the sandbox (h5_sandbox.h), on a fresh reader and state over
 * the job's image: the same code whether the child was forked from the
 * caller (which inherits the image) or from the sandbox server (which maps
 * the descriptor it was sent). Nothing is freed: the child exits.
 */
int ckpt__keras_h5_serve(const ckpt__h5_job *j, void **payload, size_t *len)
{
	ckpt_reader *r = ckpt__calloc(1, sizeof(*r));
	kh5_state *s = ckpt__calloc(1, sizeof(*s));
	hid_t ds;
	void *buf;
	int rc;
	if (!r || !s)
		return CKPT_ENOMEM;
	r->path = (char *)j->path;
	r->user_path = (char *)j->path;
	r->opts.memory_budget = j->budget;
	s->image = (void *)j->image;
	s->image_len = j->image_len;
	s->fd = -1;
	s->file = -1;
	s->path = j->path;
	s->r = r;
	s->budget = j->budget;
	s->shard = j->shard;
	if (j->op == CKPT_H5_JOB_SCAN) {
		CKPT_TRY(scan_locked(r, s, j->from_archive));
		return encode_layout(r, s, payload, len);
	}
	if (j->op != CKPT_H5_JOB_READ)
		return ckpt__fail(CKPT_EINVAL, j->path, NULL, -1, "unknown libhdf5 job %d", j->op);
	/* H5Dread of one entry into a fresh buffer */
	CKPT_TRY(ckpt__h5_open_image(&s->file, s->image, s->image_len, s->path));
	CKPT_TRY(ckpt__h5_open(s->file, j->var, CKPT_H5_DATASET, s->path, &ds));
	if (!(buf = ckpt__malloc(j->info.nbytes ? (size_t)j->info.nbytes : 1))) {
		ckpt__h5_close(ds);
		return CKPT_ENOMEM;
	}
	rc = ckpt__h5_dataset_read(ds, &j->info, s->path, j->var, buf);
	if (rc < 0) {
		ckpt__free(buf);
		return rc;
	}
	*payload = buf;
	*len = (size_t)j->info.nbytes;
	return CKPT_OK;
}

/*
 * The sandbox server gets the file as a descriptor: an image in memory
 * (memory VFS, a shard read whole) moves into a memfd, mapped in its place
 * (the same memory, not a second copy). No memfd: the forked child reads
 * the buffer as before.
 */
static void image_to_memfd(kh5_state *s)
{
	void *m;
	size_t done = 0;
	int fd;
	if (s->fd >= 0 || !s->image_len || !ckpt__h5_sandbox_server_usable())
		return;
	if ((fd = memfd_create("ckpt-h5-image", MFD_CLOEXEC)) < 0)
		return;
	while (done < s->image_len) {
		ssize_t k = write(fd, (const char *)s->image + done, s->image_len - done);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) { /* ENOSPC, or a file-size limit: keep the buffer */
			close(fd);
			return;
		}
		done += (size_t)k;
	}
	m = mmap(NULL, s->image_len, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		close(fd);
		return;
	}
	ckpt__free(s->image);
	s->image = m;
	s->fd = fd;
}

static void job_init(ckpt__h5_job *j, const kh5_state *s, int op)
{
	memset(j, 0, sizeof(*j));
	j->op = op;
	j->fd = s->fd;
	j->image = s->image;
	j->image_len = s->image_len;
	j->path = s->path;
	j->budget = s->budget;
	j->shard = s->shard;
}

static int attach_locked(ckpt_reader *r, kh5_state *s, const char *config_json, int from_archive)
{
	ckpt__keras_entry *ents = NULL;
	ckpt__keras_ctx ctx;
	ckpt__h5_limits lim;
	ckpt__h5_job job;
	char *notes = NULL, *names = NULL;
	void *wire = NULL;
	size_t i, wlen = 0;
	int rc;
	r->state = s;
	image_to_memfd(s);
	job_init(&job, s, CKPT_H5_JOB_SCAN);
	job.from_archive = from_archive;
	ckpt__h5_limits_layout(&lim);
	CKPT_TRY(ckpt__h5_sandbox_job("reading the file's layout", &lim, &job, ckpt__keras_h5_serve, NULL, 0, 256u << 20, &wire,
		&wlen));
	rc = decode_layout(r, s, wire, wlen);
	ckpt__free(wire);
	CKPT_TRY(rc);
	s->infos = ckpt__calloc(s->nv ? s->nv : 1, sizeof(ckpt_var_info));
	ents = ckpt__calloc(s->nv ? s->nv : 1, sizeof(*ents));
	if (!s->infos || !ents) {
		ckpt__free(ents);
		return CKPT_ENOMEM;
	}
	for (i = 0; i < s->nv; i++) {
		kh5_var *x = &s->v[i];
		ckpt_var_info *vi = &s->infos[i];
		vi->name = x->path;
		vi->dtype = x->info.dtype;
		vi->shape = x->info.shape;
		vi->nbytes = x->info.nbytes;
		vi->role = x->kind == CKPT_KE_MODEL ? CKPT_ROLE_MODEL : x->kind == CKPT_KE_OPTIMIZER ? CKPT_ROLE_OPTIMIZER : CKPT_ROLE_OTHER;
		vi->shard = 0;
		vi->offset = x->info.offset;
		ents[i].path = x->path;
		ents[i].kind = x->kind;
		ents[i].layer = x->layer;
		ents[i].weight = x->weight;
		ents[i].vname = x->vname;
		ents[i].index = x->index;
		ents[i].dtype = x->info.dtype;
		ents[i].shape = x->info.shape;
	}
	r->vars = s->infos;
	r->nvars = s->nv;
	r->nshards = 1;
	if (s->shard) { /* the sharded store maps the union of its shards */
		r->format_name = "keras-weights-h5";
		ckpt__free(ents);
		return CKPT_OK;
	}
	r->format_name = from_archive ? "keras-v3" :
		s->layout == CKPT_KERAS_LEGACY ? "keras-h5-legacy" :
		s->layout == CKPT_KERAS_LEGACY_WEIGHTS ? "keras-h5-legacy-weights" : "keras-weights-h5";
	memset(&ctx, 0, sizeof(ctx));
	ctx.layout = s->layout;
	ctx.keras_version = ckpt_reader_meta(r, "keras_version");
	ctx.model_config = ckpt_reader_meta(r, "model_config");
	ctx.training_config = ckpt_reader_meta(r, "training_config");
	ctx.config_json = config_json;
	rc = ckpt__keras_map(&ctx, ents, s->nv, &r->graph, &notes, &names);
	ckpt__free(ents);
	if (rc >= 0 && notes)
		rc = ckpt__reader_set_meta(r, "mapping_notes", notes);
	if (rc >= 0 && names)
		rc = ckpt__reader_set_meta(r, "keras_layer_names", names);
	ckpt__free(notes);
	ckpt__free(names);
	notes = NULL;
	/* Configs are data: report Lambda and custom classes, never act on them. */
	if (rc >= 0)
		rc = ckpt__keras_config_warnings(config_json ? config_json : ctx.model_config, &notes);
	if (rc >= 0 && notes)
		rc = ckpt__reader_set_meta(r, "config_warnings", notes);
	ckpt__free(notes);
	return rc;
}

void ckpt__keras_h5_entry(const ckpt_reader *r, size_t i, ckpt__keras_entry *e)
{
	const kh5_state *s = r->state;
	const kh5_var *x = &s->v[i];
	memset(e, 0, sizeof(*e));
	e->path = x->path;
	e->kind = x->kind;
	e->layer = x->layer;
	e->weight = x->weight;
	e->vname = x->vname;
	e->index = x->index;
	e->dtype = x->info.dtype;
	e->shape = x->info.shape;
}

static int check_index(ckpt_reader *r, size_t i)
{
	if (!r->state || i >= r->nvars)
		return ckpt__fail(CKPT_EINVAL, r->path, NULL, -1, "entry %zu out of range (%zu entries)", i, r->nvars);
	return CKPT_OK;
}

/* pread of a checked contiguous extent into the destination (a file that shrank since: EFORMAT). */
static int read_direct(const kh5_state *s, const kh5_var *x, void *dst)
{
	size_t n = (size_t)x->info.nbytes, done = 0;
	uint64_t off = (uint64_t)x->info.offset;
	while (done < n) {
		size_t want = n - done > (1u << 30) ? (1u << 30) : n - done;
		ssize_t k = pread(s->fd, (char *)dst + done, want, (off_t)(off + done));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int rc = ckpt__fail_errno(errno, s->path, "read of %zu bytes at offset %llu failed", n,
				(unsigned long long)off);
			ckpt__error_annotate(s->path, x->path);
			return rc;
		}
		if (k == 0)
			return ckpt__fail(CKPT_EFORMAT, s->path, x->path, (int64_t)(off + done),
				"truncated: wanted %zu bytes at offset %llu, the file ends first (changed after it was opened?)", n,
				(unsigned long long)off);
		done += (size_t)k;
	}
	return CKPT_OK;
}

int ckpt__keras_h5_read_into(ckpt_reader *r, size_t i, void *dst, size_t n)
{
	kh5_state *s = r->state;
	ckpt__h5_limits lim;
	ckpt__h5_job job;
	uint64_t t;
	int rc;
	CKPT_TRY(check_index(r, i));
	if (n != s->v[i].info.nbytes)
		return ckpt__fail(CKPT_EINVAL, s->path, s->v[i].path, -1, "buffer of %zu bytes, entry has %llu", n,
			(unsigned long long)s->v[i].info.nbytes);
	if (n == 0)
		return CKPT_OK;
	if (s->v[i].direct && s->fd >= 0)
		return read_direct(s, &s->v[i], dst);
	if (s->v[i].direct) { /* extent checked against the image by decode_layout */
		memcpy(dst, (const char *)s->image + s->v[i].info.offset, n);
		return CKPT_OK;
	}
	/* Chunked, compact or byte-swapped: libhdf5 reads it, in a child; room for the data twice (conversion). */
	lim.mem_bytes = (2ull << 30) + 2 * (uint64_t)n;
	t = 60000 + (uint64_t)n / (8u << 20) * 1000; /* 60 s plus a second per 8 MiB */
	lim.timeout_ms = t > 3600000 ? 3600000u : (unsigned)t;
	job_init(&job, s, CKPT_H5_JOB_READ);
	job.var = s->v[i].path;
	job.info = s->v[i].info;
	ckpt__h5_lock();
	rc = ckpt__h5_sandbox_job("reading a dataset", &lim, &job, ckpt__keras_h5_serve, dst, n, 0, NULL, NULL);
	ckpt__h5_unlock();
	if (rc < 0)
		ckpt__error_annotate(s->path, s->v[i].path);
	return rc;
}

int ckpt__keras_h5_read(ckpt_reader *r, size_t i, ckpt_tensor **out)
{
	kh5_state *s = r->state;
	ckpt_tensor *t;
	int rc;
	*out = NULL;
	CKPT_TRY(check_index(r, i));
	CKPT_TRY(ckpt_tensor_new(&t, s->v[i].info.dtype, &s->v[i].info.shape));
	rc = ckpt__keras_h5_read_into(r, i, t->data, (size_t)t->nbytes);
	if (rc < 0) {
		ckpt_tensor_free(t);
		return rc;
	}
	*out = t;
	return CKPT_OK;
}

void ckpt__keras_h5_close(ckpt_reader *r)
{
	ckpt__h5_lock();
	state_free(r->state);
	ckpt__h5_unlock();
	r->state = NULL;
	r->vars = NULL;
	r->nvars = 0;
}
