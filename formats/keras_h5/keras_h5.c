/*
 * Backend "keras-h5": Keras HDF5 files, detected from bytes.
 *
 *   offset 0: 89 48 44 46 0D 0A 1A 0A  ("\x89HDF\r\n\x1a\n", superblock; Keras
 *             always writes userblock 0, so the signature is at offset 0)
 *
 * Reads the three layouts (keras_h5_read.c, format names "keras-h5-legacy",
 * "keras-h5-legacy-weights", "keras-weights-h5") and writes two:
 *   "keras-h5"      legacy full-model layout (model_weights + optimizer_weights)
 *   "keras-weights" Keras 3 .weights.h5 layout (layers/<key>/vars/N)
 * Writing builds the file in memory (HDF5 core driver) and commits it with
 * ckpt_vfs_write_atomic: temporary sibling, fsync, rename.
 */
#include <string.h>
#include "formats/keras_h5/h5_safe.h"
#include "formats/keras_h5/keras_h5.h"

static int kh5_bid(ckpt_vfs *vfs, const char *path, const unsigned char *head, size_t n)
{
	(void)vfs;
	(void)path;
	if (n >= 8 && memcmp(head, "\x89HDF\r\n\x1a\n", 8) == 0)
		return 80;
	return -1;
}

static int kh5_open(ckpt_reader *r)
{
	void *buf = NULL;
	size_t n = 0;
	uint64_t max = r->opts.memory_budget ? r->opts.memory_budget : CKPT_DEFAULT_MEMORY_BUDGET;
	if (!r->path && !(r->path = ckpt__strdup(r->user_path)))
		return CKPT_ENOMEM;
	/* Whole file into memory, then an HDF5 file image: every byte goes through the VFS. */
	CKPT_TRY(ckpt_vfs_read_all(r->vfs, r->user_path, max, &buf, &n));
	return ckpt__keras_h5_attach(r, buf, n, NULL, 0);
}

/* ---- writer ---- */

typedef struct kw_state {
	ckpt__keras_wtensor *v;
	size_t n, cap;
	int layout;
} kw_state;

static void kw_free(kw_state *s)
{
	if (!s)
		return;
	ckpt__keras_wlist_free(s->v, s->n);
	ckpt__free(s);
}

static int kw_open(ckpt_writer *w)
{
	kw_state *s;
	int layout;
	if (strcmp(w->format_name, "keras-h5") == 0)
		layout = CKPT_KERAS_LEGACY;
	else if (strcmp(w->format_name, "keras-weights") == 0)
		layout = CKPT_KERAS_V3;
	else
		return ckpt__fail(CKPT_EUNSUPPORTED, w->path, NULL, -1, "keras-h5 backend does not write '%s'", w->format_name);
	s = ckpt__calloc(1, sizeof(*s));
	if (!s)
		return CKPT_ENOMEM;
	s->layout = layout;
	w->state = s;
	return CKPT_OK;
}

void ckpt__keras_wlist_free(ckpt__keras_wtensor *v, size_t n)
{
	size_t i;
	for (i = 0; v && i < n; i++) {
		ckpt__free(v[i].name);
		ckpt_tensor_free(v[i].t);
	}
	ckpt__free(v);
}

/* Shared with the archive writer: keep a private copy of every tensor added. */
int ckpt__keras_wlist_add(ckpt__keras_wtensor **v, size_t *n, size_t *cap, const char *name, const ckpt_tensor *t)
{
	ckpt_tensor *c;
	size_t i;
	if (t->dtype == CKPT_DT_STRING || t->dtype == CKPT_DT_COMPLEX64 || t->dtype == CKPT_DT_COMPLEX128 ||
		!ckpt_dtype_valid((int)t->dtype))
		return ckpt__fail(CKPT_EUNSUPPORTED, NULL, name, -1, "Keras HDF5 files cannot hold %s tensors", ckpt_dtype_name(t->dtype));
	for (i = 0; i < *n; i++)
		if (strcmp((*v)[i].name, name) == 0)
			return ckpt__fail(CKPT_EINVAL, NULL, name, -1, "tensor '%s' added twice", name);
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 32;
		ckpt__keras_wtensor *nv = ckpt__realloc(*v, nc * sizeof(*nv));
		if (!nv)
			return CKPT_ENOMEM;
		*v = nv;
		*cap = nc;
	}
	CKPT_TRY(ckpt_tensor_new(&c, t->dtype, &t->shape));
	if (c->nbytes != t->nbytes) {
		ckpt_tensor_free(c);
		return ckpt__fail(CKPT_EINVAL, NULL, name, -1, "tensor holds %llu bytes, its shape needs %llu",
			(unsigned long long)t->nbytes, (unsigned long long)c->nbytes);
	}
	if (c->nbytes)
		memcpy(c->data, t->data, (size_t)c->nbytes);
	(*v)[*n].name = ckpt__strdup(name);
	if (!(*v)[*n].name) {
		ckpt_tensor_free(c);
		return CKPT_ENOMEM;
	}
	(*v)[*n].t = c;
	(*n)++;
	return CKPT_OK;
}

static int kw_add(ckpt_writer *w, const char *name, const ckpt_tensor *t, int shard)
{
	kw_state *s = w->state;
	(void)shard;
	return ckpt__keras_wlist_add(&s->v, &s->n, &s->cap, name, t);
}

static int kw_commit(ckpt_writer *w)
{
	kw_state *s = w->state;
	void *img = NULL;
	size_t len = 0;
	int rc;
	CKPT_TRY(ckpt__keras_h5_build(w, s->layout, s->v, s->n, &img, &len));
	rc = ckpt_vfs_write_atomic(w->vfs, w->path, img, len, !w->opts.no_fsync);
	ckpt__free(img);
	return rc;
}

static void kw_close(ckpt_writer *w)
{
	kw_free(w->state);
	w->state = NULL;
}

static const char *const kh5_write_formats[] = { "keras-h5", "keras-weights", NULL };

const ckpt_format ckpt_format_keras_h5 = {
	1,
	"keras-h5",
	kh5_bid,
	kh5_open,
	ckpt__keras_h5_read,
	ckpt__keras_h5_read_into,
	ckpt__keras_h5_close,
	kh5_write_formats,
	kw_open,
	kw_add,
	kw_commit,
	kw_close,
	NULL, /* verify: core fallback */
};
