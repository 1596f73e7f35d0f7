/*
 * GGUF v3 writer, laid out as gguf-py's GGUFWriter does: header, key-value
 * pairs, tensor infos in the order added, padding to the alignment, then
 * each tensor's data padded to the alignment.
 *
 * Key-value pairs come from the writer's "gguf.kv" metadata (the JSON a
 * GGUF reader exposes), so GGUF -> GGUF keeps them, types included. Tensor
 * types: F32/F16/BF16/F64/I8/I16/I32/I64 from the dtype; a uint8 byte view
 * named in "gguf.tensor_types" by its flat name or by the name given to
 * the writer (a quantized tensor read from a GGUF, or one ckpt convert
 * --quantize encoded) is
 * written raw with its ggml type, ne[0] recovered from its bytes per row.
 * Other dtypes (unsigned, bool, complex, float8, string), rank above 4,
 * empty dims and names over 63 bytes are EUNSUPPORTED: GGUF and ggml have
 * no such tensors.
 */
#include <stdlib.h>
#include <string.h>
#include "gguf.h"

typedef struct gw_state {
	flat_writer fw;
	json_t *types;     /* "gguf.tensor_types", parsed on first add */
	int types_loaded;
} gw_state;

typedef struct bbuf {
	unsigned char *p;
	size_t n, cap;
	int oom;
} bbuf;

static void put(bbuf *b, const void *s, size_t n)
{
	if (b->oom || n == 0) /* memcpy from NULL (an empty section) is undefined even for 0 bytes */
		return;
	if (b->n + n > b->cap) {
		size_t nc = b->cap ? b->cap : 4096;
		while (nc < b->n + n)
			nc *= 2;
		unsigned char *np = ckpt__realloc(b->p, nc);
		if (!np) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = nc;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
}

static void put_le(bbuf *b, uint64_t v, unsigned n)
{
	unsigned char x[8];
	for (unsigned i = 0; i < n; i++)
		x[i] = (unsigned char)(v >> (8 * i));
	put(b, x, n);
}

static void put_str(bbuf *b, const char *s, size_t n)
{
	put_le(b, n, 8);
	put(b, s, n);
}

int ckpt__gguf_writer_open(ckpt_writer *w)
{
	return (w->state = ckpt__calloc(1, sizeof(gw_state))) ? CKPT_OK : CKPT_ENOMEM;
}

static int unhex(const char *h, unsigned char *out, size_t n)
{
	if (strlen(h) != 2 * n)
		return -1;
	for (size_t i = 0; i < 2 * n; i++) {
		int c = h[i], v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (v < 0)
			return -1;
		out[i / 2] = (unsigned char)(i % 2 ? out[i / 2] | v : v << 4);
	}
	return 0;
}

/* The stored name and ggml type of `name` (a fresh string in *flat), or the reason it cannot be written. */
static int gguf_map(ckpt_writer *w, gw_state *s, const char *name, ckpt_dtype dtype, const ckpt_shape *shape,
	char **flat, int *type_id)
{
	const gguf_type *gt = NULL;
	int rc;
	*flat = NULL;
	*type_id = 0;
	if (!s->types_loaded) {
		const char *m = ckpt__writer_meta(w, "gguf.tensor_types");
		s->types_loaded = 1;
		s->types = m ? json_loads(m, 0, NULL) : NULL; /* json_is_* are macros: no call inside */
		if (m && !json_is_object(s->types))
			return ckpt__fail(CKPT_EINVAL, w->path, NULL, -1, "gguf.tensor_types is not a JSON object");
	}
	if (!(*flat = ckpt__flat_from_key(name)))
		return CKPT_ENOMEM;
	json_t *q = s->types ? json_object_get(s->types, *flat) : NULL;
	if (!q && s->types) /* ckpt convert --quantize lists what it encodes under the names it writes */
		q = json_object_get(s->types, name);
	if (strlen(*flat) > GGUF_MAX_NAME) {
		rc = ckpt__fail(CKPT_EUNSUPPORTED, w->path, name, -1, "GGUF name '%s' is %zu bytes, ggml reads at most %d",
			*flat, strlen(*flat), GGUF_MAX_NAME);
	} else if (shape->rank > GGUF_MAX_DIMS) {
		rc = ckpt__fail(CKPT_EUNSUPPORTED, w->path, name, -1, "rank %d above GGUF's maximum of %d", shape->rank,
			GGUF_MAX_DIMS);
	} else if (q) {
		gt = ckpt__gguf_type_by_name(json_string_value(json_object_get(q, "type")));
		int64_t rowb = shape->rank ? shape->dims[shape->rank - 1] : 0;
		if (!gt || gt->dt != CKPT_DT_INVALID || dtype != CKPT_DT_UINT8 || rowb <= 0 || rowb % gt->size)
			rc = ckpt__fail(CKPT_EINVAL, w->path, name, -1, "'%s' is listed as quantized but is not a uint8 view "
				"of whole %s blocks", *flat, gt ? gt->name : "?");
		else
			rc = CKPT_OK;
	} else if (!(gt = ckpt__gguf_type_by_dt(dtype))) {
		rc = ckpt__fail(CKPT_EUNSUPPORTED, w->path, name, -1, "GGUF has no tensor type for %s",
			ckpt_dtype_name(dtype));
	} else {
		rc = CKPT_OK;
	}
	for (int d = 0; rc == CKPT_OK && d < shape->rank; d++)
		if (shape->dims[d] <= 0)
			rc = ckpt__fail(CKPT_EUNSUPPORTED, w->path, name, -1, "GGUF has no empty tensors (dim %d is 0)", d);
	if (rc < 0) {
		ckpt__free(*flat);
		*flat = NULL;
		return rc;
	}
	*type_id = gt->id;
	return CKPT_OK;
}

static int gguf_layout(ckpt_writer *w, gw_state *s, bbuf *b, uint64_t *data_start, uint64_t *total);

int ckpt__gguf_writer_announce(ckpt_writer *w, const char *name, ckpt_dtype dtype, const ckpt_shape *shape)
{
	gw_state *s = w->state;
	char *flat;
	int id;
	CKPT_TRY(gguf_map(w, s, name, dtype, shape, &flat, &id));
	int rc = ckpt__flat_announce(&s->fw, w->path, flat, dtype, shape, id);
	ckpt__free(flat);
	return rc;
}

/* An announced writer's first add (or a commit with nothing added): the header is final now. */
static int gguf_begin(ckpt_writer *w)
{
	gw_state *s = w->state;
	bbuf b = { 0 };
	uint64_t data_start = 0, total = 0;
	int rc = gguf_layout(w, s, &b, &data_start, &total);
	if (rc == CKPT_OK)
		rc = ckpt__flat_begin(w, &s->fw, b.p, b.n, data_start, total);
	ckpt__free(b.p);
	return rc;
}

int ckpt__gguf_writer_add(ckpt_writer *w, const char *name, const ckpt_tensor *t, int shard)
{
	gw_state *s = w->state;
	char *flat;
	int id, rc;
	(void)shard;
	CKPT_TRY(gguf_map(w, s, name, t->dtype, &t->shape, &flat, &id));
	rc = ckpt__flat_add(w, &s->fw, flat, t, id, gguf_begin);
	ckpt__free(flat);
	return rc;
}

static int put_value(ckpt_writer *w, bbuf *b, const char *key, int t, json_t *o)
{
	json_t *v = json_object_get(o, "value"), *h = json_object_get(o, "hex");
	static const unsigned vsize[GV_COUNT] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
	if (t == GV_STRING) {
		if (json_is_string(v)) {
			put_str(b, json_string_value(v), json_string_length(v));
			return CKPT_OK;
		}
		h = json_object_get(v, "hex");
		if (json_is_string(h)) {
			size_t n = json_string_length(h) / 2;
			unsigned char *x = ckpt__malloc(n ? n : 1);
			int bad = !x || unhex(json_string_value(h), x, n) < 0;
			if (!bad)
				put_str(b, (const char *)x, n);
			ckpt__free(x);
			if (!bad)
				return CKPT_OK;
		}
		return ckpt__fail(CKPT_EINVAL, w->path, key, -1, "gguf.kv: '%s' has no string value", key);
	}
	if (t == GV_ARRAY) {
		int et = ckpt__gguf_vtype_by_name(json_string_value(json_object_get(o, "elem")) ?
			json_string_value(json_object_get(o, "elem")) : "");
		if (et < 0 || et == GV_ARRAY)
			return ckpt__fail(CKPT_EINVAL, w->path, key, -1, "gguf.kv: '%s' has a bad array element type", key);
		put_le(b, (uint64_t)et, 4);
		if (et == GV_STRING) {
			size_t i;
			json_t *x;
			if (!json_is_array(v))
				return ckpt__fail(CKPT_EINVAL, w->path, key, -1, "gguf.kv: '%s' has no string array", key);
			put_le(b, json_array_size(v), 8);
			json_array_foreach(v, i, x) {
				json_t *one = json_pack("{s:O}", "value", x);
				int rc = one ? put_value(w, b, key, GV_STRING, one) : CKPT_ENOMEM;
				json_decref(one);
				CKPT_TRY(rc);
			}
			return CKPT_OK;
		}
		json_int_t count = json_integer_value(json_object_get(o, "count"));
		size_t nb = (size_t)count * vsize[et];
		unsigned char *x = ckpt__malloc(nb ? nb : 1);
		if (!x)
			return CKPT_ENOMEM;
		if (count < 0 || !json_is_string(h) || unhex(json_string_value(h), x, nb) < 0) {
			ckpt__free(x);
			return ckpt__fail(CKPT_EINVAL, w->path, key, -1, "gguf.kv: '%s' array bytes do not match its count", key);
		}
		put_le(b, (uint64_t)count, 8);
		put(b, x, nb);
		ckpt__free(x);
		return CKPT_OK;
	}
	if (t == GV_F32 || t == GV_F64) {
		unsigned char x[8];
		if (json_is_string(h) && unhex(json_string_value(h), x, vsize[t]) == 0) {
			put(b, x, vsize[t]);
			return CKPT_OK;
		}
		if (!json_is_number(v))
			return ckpt__fail(CKPT_EINVAL, w->path, key, -1, "gguf.kv: '%s' has no number", key);
		double d = json_number_value(v);
		if (t == GV_F32) {
			float f = (float)d;
			uint32_t u;
			memcpy(&u, &f, 4);
			put_le(b, u, 4);
		} else {
			uint64_t u;
			memcpy(&u, &d, 8);
			put_le(b, u, 8);
		}
		return CKPT_OK;
	}
	if (t == GV_BOOL) {
		if (!json_is_boolean(v))
			return ckpt__fail(CKPT_EINVAL, w->path, key, -1, "gguf.kv: '%s' has no boolean", key);
		put_le(b, json_is_true(v), 1);
		return CKPT_OK;
	}
	if (!json_is_integer(v))
		return ckpt__fail(CKPT_EINVAL, w->path, key, -1, "gguf.kv: '%s' has no integer", key);
	put_le(b, (uint64_t)json_integer_value(v), vsize[t]);
	return CKPT_OK;
}

/* The key-value section from "gguf.kv"; sets *alignment from general.alignment. */
static int put_kvs(ckpt_writer *w, bbuf *b, uint64_t *count, uint32_t *alignment)
{
	const char *m = ckpt__writer_meta(w, "gguf.kv");
	json_t *list, *o;
	size_t i;
	int rc = CKPT_OK;
	*count = 0;
	if (!m)
		return CKPT_OK;
	list = json_loads(m, 0, NULL);
	if (!json_is_array(list)) {
		json_decref(list);
		return ckpt__fail(CKPT_EINVAL, w->path, NULL, -1, "gguf.kv is not a JSON array");
	}
	json_array_foreach(list, i, o) {
		const char *key = json_string_value(json_object_get(o, "key"));
		const char *tn = json_string_value(json_object_get(o, "type"));
		int t = tn ? ckpt__gguf_vtype_by_name(tn) : -1;
		if (!key || t < 0) {
			rc = ckpt__fail(CKPT_EINVAL, w->path, NULL, -1, "gguf.kv entry %zu needs a key and a known type", i);
			break;
		}
		put_str(b, key, strlen(key));
		put_le(b, (uint64_t)t, 4);
		if ((rc = put_value(w, b, key, t, o)) < 0)
			break;
		if (strcmp(key, "general.alignment") == 0) {
			json_int_t a = json_integer_value(json_object_get(o, "value"));
			if (t != GV_U32 || a < 8 || a > (1 << 20) || (a & (a - 1))) {
				rc = ckpt__fail(CKPT_EINVAL, w->path, key, -1, "general.alignment must be a u32 power of two in "
					"[8, 1048576]");
				break;
			}
			*alignment = (uint32_t)a;
		}
		(*count)++;
	}
	json_decref(list);
	return rc;
}

/* Header, key-value pairs and tensor infos in `b`; every entry's offset; where the data starts and ends. */
static int gguf_layout(ckpt_writer *w, gw_state *s, bbuf *b, uint64_t *data_start, uint64_t *total)
{
	bbuf kv = { 0 };
	uint64_t nkv = 0, off = 0;
	uint32_t alignment = GGUF_DEFAULT_ALIGNMENT;
	int rc = put_kvs(w, &kv, &nkv, &alignment);
	if (rc < 0)
		goto out;
	put(b, "GGUF", 4);
	put_le(b, 3, 4);
	put_le(b, s->fw.n, 8);
	put_le(b, nkv, 8);
	put(b, kv.p, kv.n);
	for (size_t i = 0; i < s->fw.n; i++) {
		flat_entry *e = &s->fw.e[i];
		const gguf_type *gt = ckpt__gguf_type(e->ftype);
		put_str(b, e->name, strlen(e->name));
		put_le(b, (uint64_t)e->shape.rank, 4);
		for (int d = e->shape.rank - 1; d >= 0; d--) {
			uint64_t ne = (uint64_t)e->shape.dims[d];
			if (d == e->shape.rank - 1 && gt->dt == CKPT_DT_INVALID)
				ne = ne / gt->size * gt->blck; /* bytes per row back to elements */
			put_le(b, ne, 8);
		}
		put_le(b, (uint64_t)e->ftype, 4);
		put_le(b, off, 8);
		e->offset = off;
		off += (e->nbytes + alignment - 1) / alignment * alignment;
	}
	if (b->oom || kv.oom) {
		rc = CKPT_ENOMEM;
		goto out;
	}
	*data_start = (b->n + alignment - 1) / alignment * alignment;
	*total = *data_start + off;
out:
	ckpt__free(kv.p);
	return rc;
}

int ckpt__gguf_writer_commit(ckpt_writer *w)
{
	gw_state *s = w->state;
	bbuf b = { 0 };
	uint64_t data_start = 0, total = 0;
	int rc;
	if (s->fw.planned) {
		if (!s->fw.started && (rc = gguf_begin(w)) < 0)
			return rc; /* a temporary left open is removed with the writer */
		return ckpt__flat_finish(w, &s->fw);
	}
	rc = gguf_layout(w, s, &b, &data_start, &total);
	if (rc == CKPT_OK)
		rc = ckpt__flat_commit(w, &s->fw, b.p, b.n, data_start, total);
	ckpt__free(b.p);
	return rc;
}

void ckpt__gguf_writer_close(ckpt_writer *w)
{
	gw_state *s = w->state;
	if (!s)
		return;
	ckpt__flat_writer_free(w, &s->fw);
	json_decref(s->types);
	ckpt__free(s);
	w->state = NULL;
}
