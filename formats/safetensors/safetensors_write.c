/*
 * safetensors writer, laid out as the reference writes: entries sorted by
 * dtype (the reference's enum order, largest element first) and then by
 * name, data back to back in that order, "__metadata__" first in the
 * compact JSON header when the writer has "safetensors.metadata" (a JSON
 * object of strings), and the header padded with spaces to a multiple of 8
 * so that every tensor is aligned to its element size.
 * Names: TF keys are mapped to flat dotted names (flat.h).
 */
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "st.h"

typedef struct stw_state {
	flat_writer fw;
} stw_state;

int ckpt__st_writer_open(ckpt_writer *w)
{
	if (!(w->state = ckpt__calloc(1, sizeof(stw_state))))
		return CKPT_ENOMEM;
	return CKPT_OK;
}

/* The stored name and dtype rank of `name` (a fresh string in *flat), or the reason it cannot be written. */
static int st_map(ckpt_writer *w, const char *name, ckpt_dtype dtype, char **flat, int *rank)
{
	const st_dtype *d = ckpt__st_dtype_by_dt(dtype);
	int rc = CKPT_OK;
	*flat = NULL;
	*rank = d ? d->rank : 0;
	if (!d)
		return ckpt__fail(CKPT_EUNSUPPORTED, w->path, name, -1, "safetensors has no dtype for %s",
			ckpt_dtype_name(dtype));
	if (!(*flat = ckpt__flat_from_key(name)))
		return CKPT_ENOMEM;
	json_t *probe = json_string(*flat); /* NULL for a name that is not UTF-8 */
	if (!probe)
		rc = ckpt__fail(CKPT_EINVAL, w->path, name, -1, "tensor name is not valid UTF-8");
	else if (strcmp(*flat, "__metadata__") == 0)
		rc = ckpt__fail(CKPT_EINVAL, w->path, name, -1, "'__metadata__' is reserved by safetensors");
	json_decref(probe);
	if (rc < 0) {
		ckpt__free(*flat);
		*flat = NULL;
	}
	return rc;
}

static int st_layout(ckpt_writer *w, stw_state *s, char **head, size_t *hlen, uint64_t *total);

int ckpt__st_writer_announce(ckpt_writer *w, const char *name, ckpt_dtype dtype, const ckpt_shape *shape)
{
	stw_state *s = w->state;
	char *flat;
	int rank;
	CKPT_TRY(st_map(w, name, dtype, &flat, &rank));
	int rc = ckpt__flat_announce(&s->fw, w->path, flat, dtype, shape, rank);
	ckpt__free(flat);
	return rc;
}

/* An announced writer's first add (or a commit with nothing added): the header is final now. */
static int st_begin(ckpt_writer *w)
{
	stw_state *s = w->state;
	char *head = NULL;
	size_t hlen = 0;
	uint64_t total = 0;
	int rc = st_layout(w, s, &head, &hlen, &total);
	if (rc == CKPT_OK)
		rc = ckpt__flat_begin(w, &s->fw, head, hlen, hlen, total);
	ckpt__free(head);
	return rc;
}

int ckpt__st_writer_add(ckpt_writer *w, const char *name, const ckpt_tensor *t, int shard)
{
	stw_state *s = w->state;
	char *flat;
	int rank, rc;
	(void)shard;
	CKPT_TRY(st_map(w, name, t->dtype, &flat, &rank));
	rc = ckpt__flat_add(w, &s->fw, flat, t, rank, st_begin);
	ckpt__free(flat);
	return rc;
}

static int cmp_entry(const void *a, const void *b)
{
	const flat_entry *x = a, *y = b;
	if (x->ftype != y->ftype)
		return y->ftype - x->ftype;
	return strcmp(x->name, y->name);
}

static const char *st_name_of_rank(int rank)
{
	static const char *const names[] = { "BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "I16", "U16", "F16", "BF16",
		"I32", "U32", "F32", "C64", "F64", "I64", "U64" };
	return names[rank];
}

static int build_header(ckpt_writer *w, stw_state *s, char **out, size_t *hlen)
{
	json_t *root = json_object(), *meta = NULL;
	const char *ms = ckpt__writer_meta(w, "safetensors.metadata");
	uint64_t off = 0;
	char *txt = NULL, *padded;
	size_t n, pad;
	int rc = CKPT_ENOMEM;
	if (!root)
		return CKPT_ENOMEM;
	if (ms) {
		const char *k;
		json_t *v;
		meta = json_loads(ms, JSON_REJECT_DUPLICATES, NULL);
		if (!json_is_object(meta)) {
			rc = ckpt__fail(CKPT_EINVAL, w->path, NULL, -1, "safetensors.metadata is not a JSON object");
			goto out;
		}
		json_object_foreach(meta, k, v) {
			if (!json_is_string(v)) {
				rc = ckpt__fail(CKPT_EINVAL, w->path, NULL, -1, "safetensors.metadata value of '%s' is not a "
					"string", k);
				goto out;
			}
		}
		if (json_object_set(root, "__metadata__", meta) < 0)
			goto out;
	}
	for (size_t i = 0; i < s->fw.n; i++) {
		flat_entry *e = &s->fw.e[i];
		json_t *ent = json_object(), *shape = json_array(), *offs = json_array();
		int bad = !ent || !shape || !offs;
		for (int d = 0; !bad && d < e->shape.rank; d++)
			bad = json_array_append_new(shape, json_integer(e->shape.dims[d])) < 0;
		e->offset = off;
		off += e->nbytes;
		bad = bad || json_array_append_new(offs, json_integer((json_int_t)e->offset)) < 0 ||
			json_array_append_new(offs, json_integer((json_int_t)off)) < 0 ||
			json_object_set_new(ent, "dtype", json_string(st_name_of_rank(e->ftype))) < 0 ||
			json_object_set(ent, "shape", shape) < 0 || json_object_set(ent, "data_offsets", offs) < 0 ||
			json_object_set(root, e->name, ent) < 0;
		json_decref(ent);
		json_decref(shape);
		json_decref(offs);
		if (bad)
			goto out;
	}
	if (!(txt = json_dumps(root, JSON_COMPACT)))
		goto out;
	n = strlen(txt);
	pad = (8 - n % 8) % 8;
	if (!(padded = ckpt__malloc(8 + n + pad)))
		goto out;
	for (int i = 0; i < 8; i++)
		padded[i] = (char)(((uint64_t)(n + pad) >> (8 * i)) & 0xff);
	memcpy(padded + 8, txt, n);
	memset(padded + 8 + n, ' ', pad);
	*out = padded;
	*hlen = 8 + n + pad;
	rc = CKPT_OK;
out:
	free(txt);
	json_decref(meta);
	json_decref(root);
	return rc;
}

/* Sort as the reference does, give every entry its offset, build the padded header. */
static int st_layout(ckpt_writer *w, stw_state *s, char **head, size_t *hlen, uint64_t *total)
{
	if (s->fw.n) /* qsort(NULL, 0) is undefined */
		qsort(s->fw.e, s->fw.n, sizeof(*s->fw.e), cmp_entry);
	CKPT_TRY(build_header(w, s, head, hlen));
	*total = *hlen;
	for (size_t i = 0; i < s->fw.n; i++)
		*total += s->fw.e[i].nbytes;
	return CKPT_OK;
}

int ckpt__st_writer_commit(ckpt_writer *w)
{
	stw_state *s = w->state;
	char *head = NULL;
	size_t hlen = 0;
	uint64_t total;
	int rc;
	if (s->fw.planned) {
		if (!s->fw.started && (rc = st_begin(w)) < 0)
			return rc; /* a temporary left open is removed with the writer */
		return ckpt__flat_finish(w, &s->fw);
	}
	CKPT_TRY(st_layout(w, s, &head, &hlen, &total));
	rc = ckpt__flat_commit(w, &s->fw, head, hlen, hlen, total);
	ckpt__free(head);
	return rc;
}

void ckpt__st_writer_close(ckpt_writer *w)
{
	stw_state *s = w->state;
	if (!s)
		return;
	ckpt__flat_writer_free(w, &s->fw);
	ckpt__free(s);
	w->state = NULL;
}
