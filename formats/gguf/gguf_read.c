/*
 * GGUF reader. Every count, length, dim, type and offset is checked against
 * the file before it is used or allocated for:
 *   - magic, version 2 or 3 (little-endian; v1 and big-endian files refused);
 *   - tensor_count and kv_count fit in the bytes left (at least 24 / 13 bytes each);
 *   - string lengths fit in the file; keys and names are UTF-8, names 1..64 bytes;
 *   - value and array element types are known (no arrays of arrays), array counts fit;
 *   - duplicate keys and duplicate tensor names are refused;
 *   - general.alignment is a u32 power of two in [8, 1 MiB];
 *   - n_dims <= 4, every ne >= 1, the element count and byte size fit in int64;
 *   - the ggml type is known and ne[0] a multiple of its block size;
 *   - each offset is aligned and equals the end of the previous tensor padded to the
 *     alignment (ggml's rule: no hole, no overlap), and the data lies inside the file.
 * The metadata section is capped at GGUF_MAX_KV_BYTES; the key-value pairs
 * are kept compact, as the file stores them (kv_store.h), and become JSON
 * ("gguf.kv") only when asked for; duplicates are found with a name set.
 */
#include <stdlib.h>
#include <string.h>
#include "gguf.h"
#include "libckpt/base/kv_store.h"

#define GGUF_MAX_KV_BYTES (256ull << 20)
#define WIN (256u << 10)

typedef struct cur {
	ckpt_io *io;
	const char *path;
	uint64_t size, pos;
	unsigned char *buf;
	uint64_t bstart;
	size_t blen;
	const char *what;      /* the current key or tensor, for messages */
} cur;

typedef struct gguf_state {
	flat_reader fr;        /* first: ckpt__flat_read_into / ckpt__flat_close */
} gguf_state;

static int get(cur *c, void *dst, size_t n)
{
	unsigned char *d = dst;
	if (n > c->size || c->pos > c->size - n)
		return ckpt__fail(CKPT_EFORMAT, c->path, c->what, (int64_t)c->pos, "truncated: %zu bytes wanted at "
			"offset %llu, the file has %llu", n, (unsigned long long)c->pos, (unsigned long long)c->size);
	while (n) {
		if (c->pos < c->bstart || c->pos >= c->bstart + c->blen) {
			uint64_t left = c->size - c->pos;
			c->bstart = c->pos;
			c->blen = left < WIN ? (size_t)left : WIN;
			CKPT_TRY(ckpt_io_read_exact(c->io, c->buf, c->blen, c->bstart));
		}
		size_t off = (size_t)(c->pos - c->bstart), k = c->blen - off < n ? c->blen - off : n;
		memcpy(d, c->buf + off, k);
		d += k;
		n -= k;
		c->pos += k;
	}
	return CKPT_OK;
}

static int get_u32(cur *c, uint32_t *v)
{
	unsigned char b[4];
	CKPT_TRY(get(c, b, 4));
	*v = b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
	return CKPT_OK;
}

static int get_u64(cur *c, uint64_t *v)
{
	unsigned char b[8];
	CKPT_TRY(get(c, b, 8));
	*v = 0;
	for (int i = 7; i >= 0; i--)
		*v = *v << 8 | b[i];
	return CKPT_OK;
}

/* A GGUF string into a fresh NUL-terminated buffer; its length checked against the file and `max`. */
static int get_str(cur *c, uint64_t max, char **out, uint64_t *len)
{
	uint64_t at = c->pos, n;
	char *s;
	CKPT_TRY(get_u64(c, &n));
	if (n > c->size - c->pos)
		return ckpt__fail(CKPT_EFORMAT, c->path, c->what, (int64_t)at, "string length %llu runs past the end of "
			"the file (%llu bytes left)", (unsigned long long)n, (unsigned long long)(c->size - c->pos));
	if (n > max)
		return ckpt__fail(CKPT_EFORMAT, c->path, c->what, (int64_t)at, "string of %llu bytes, at most %llu "
			"allowed here", (unsigned long long)n, (unsigned long long)max);
	if (!(s = ckpt__malloc((size_t)n + 1)))
		return CKPT_ENOMEM;
	if (get(c, s, (size_t)n) < 0) {
		ckpt__free(s);
		return CKPT_EFORMAT;
	}
	s[n] = '\0';
	*out = s;
	*len = n;
	return CKPT_OK;
}

static const unsigned vsize[GV_COUNT] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };

/* A u64 length that must fit in the bytes left; at: where it starts, for the message. */
static int fits(cur *c, uint64_t n, int64_t at)
{
	if (n > c->size - c->pos)
		return ckpt__fail(CKPT_EFORMAT, c->path, c->what, at, "string length %llu runs past the end of "
			"the file (%llu bytes left)", (unsigned long long)n, (unsigned long long)(c->size - c->pos));
	return CKPT_OK;
}

/* The value of the pair just appended to kv (type t), read straight into the store. */
static int read_value(cur *c, ckpt__kv_store *kv, unsigned t)
{
	int64_t at = (int64_t)c->pos;
	unsigned char *d;
	if (t == GV_STRING) {
		uint64_t n;
		CKPT_TRY(get_u64(c, &n));
		CKPT_TRY(fits(c, n, at));
		CKPT_TRY(ckpt__kv_grow_last(kv, n, &d));
		return get(c, d, (size_t)n);
	}
	if (t == GV_ARRAY) {
		uint32_t et;
		uint64_t count;
		CKPT_TRY(get_u32(c, &et));
		CKPT_TRY(get_u64(c, &count));
		if (et >= GV_COUNT || et == GV_ARRAY)
			return ckpt__fail(CKPT_EFORMAT, c->path, c->what, at, "key '%s': array of %s elements (type %u)",
				c->what, et == GV_ARRAY ? "array" : "unknown", et);
		unsigned es = et == GV_STRING ? 8 : vsize[et];
		if (count > (c->size - c->pos) / es)
			return ckpt__fail(CKPT_EFORMAT, c->path, c->what, at, "key '%s': array of %llu %s elements cannot fit "
				"in the %llu bytes left", c->what, (unsigned long long)count, ckpt__gguf_vtype_name(et),
				(unsigned long long)(c->size - c->pos));
		ckpt__kv_set_last(kv, (ckpt_kv_type)et, count);
		if (et != GV_STRING) {
			CKPT_TRY(ckpt__kv_grow_last(kv, count * es, &d));
			return get(c, d, (size_t)(count * es));
		}
		for (uint64_t i = 0; i < count; i++) {
			uint64_t n;
			int64_t eat = (int64_t)c->pos;
			CKPT_TRY(get_u64(c, &n));
			CKPT_TRY(fits(c, n, eat));
			CKPT_TRY(ckpt__kv_grow_last(kv, 8 + n, &d));
			for (int k = 0; k < 8; k++)
				d[k] = (unsigned char)(n >> (8 * k));
			CKPT_TRY(get(c, d + 8, (size_t)n));
		}
		return CKPT_OK;
	}
	CKPT_TRY(ckpt__kv_grow_last(kv, vsize[t], &d));
	return get(c, d, vsize[t]);
}

/*
 * The key-value pairs, kept as the file has them (kv_store.h): memory about
 * the section's size, no JSON until someone asks for "gguf.kv".
 */
static int read_kvs(cur *c, ckpt_reader *r, uint64_t nkv, uint32_t *alignment)
{
	ckpt__kv_store *kv = ckpt__kv_new("gguf.kv", CKPT__KV_JSON_GGUF);
	char key[CKPT_MAX_NAME_LEN + 1];
	uint64_t start = c->pos;
	if (!kv)
		return CKPT_ENOMEM;
	r->kv = kv; /* the core frees it, on failure too */
	for (uint64_t i = 0; i < nkv; i++) {
		int64_t at = (int64_t)c->pos;
		uint64_t kl;
		uint32_t t, dup;
		unsigned char *d;
		int rc;
		c->what = NULL;
		CKPT_TRY(get_u64(c, &kl));
		CKPT_TRY(fits(c, kl, at));
		if (kl > CKPT_MAX_NAME_LEN)
			return ckpt__fail(CKPT_EFORMAT, c->path, NULL, at, "string of %llu bytes, at most %d allowed here",
				(unsigned long long)kl, CKPT_MAX_NAME_LEN);
		CKPT_TRY(get(c, key, (size_t)kl));
		key[kl] = '\0';
		if (!kl || strlen(key) != kl || !ckpt__utf8_valid(key, (size_t)kl))
			return ckpt__fail(CKPT_EFORMAT, c->path, NULL, at, "key %llu is empty, holds a NUL or is not UTF-8",
				(unsigned long long)i);
		c->what = key;
		CKPT_TRY(get_u32(c, &t));
		if (t >= GV_COUNT)
			return ckpt__fail(CKPT_EFORMAT, c->path, key, (int64_t)c->pos - 4, "key '%s': unknown value type %u",
				key, t);
		if ((rc = ckpt__kv_append(kv, key, (size_t)kl, (ckpt_kv_type)t, (ckpt_kv_type)0, 1, 0, &d, &dup)) < 0)
			return rc;
		if (rc == 1)
			return ckpt__fail(CKPT_EFORMAT, c->path, key, at, "duplicate key '%s'", key);
		CKPT_TRY(read_value(c, kv, t));
		if (strcmp(key, "general.alignment") == 0) {
			ckpt_kv v;
			uint32_t a;
			if (t != GV_U32)
				return ckpt__fail(CKPT_EFORMAT, c->path, key, at, "general.alignment is %s, must be u32",
					ckpt__gguf_vtype_name(t));
			ckpt__kv_get(kv, kv->n - 1, &v);
			a = (uint32_t)v.data[0] | (uint32_t)v.data[1] << 8 | (uint32_t)v.data[2] << 16 | (uint32_t)v.data[3] << 24;
			if (a < 8 || a > (1 << 20) || (a & (a - 1)))
				return ckpt__fail(CKPT_EFORMAT, c->path, key, at, "general.alignment %u is not a power of two "
					"in [8, 1048576]", a);
			*alignment = a;
		}
		if (c->pos - start > GGUF_MAX_KV_BYTES)
			return ckpt__fail(CKPT_ELIMIT, c->path, NULL, at, "metadata section above %llu bytes",
				(unsigned long long)GGUF_MAX_KV_BYTES);
	}
	c->what = NULL;
	ckpt__kv_seal(kv);
	return CKPT_OK;
}

static const char *tensor_name_of(const void *ctx, uint32_t id, size_t *len)
{
	const gguf_state *s = ctx;
	*len = strlen(s->fr.names[id]);
	return s->fr.names[id];
}

typedef struct tinfo {
	uint64_t ne[GGUF_MAX_DIMS];
	uint32_t ndims;
	const gguf_type *type;
	uint64_t offset;
	int64_t at;
} tinfo;

static int read_tensor_info(cur *c, ckpt_reader *r, gguf_state *s, ckpt__name_set *seen, tinfo *ti, size_t i)
{
	ckpt_var_info *v = &r->vars[i];
	uint64_t nl = 0, rows = 1, rowb, nbytes;
	uint32_t type;
	char *name = NULL;
	ti->at = (int64_t)c->pos;
	c->what = NULL;
	CKPT_TRY(get_str(c, 64, &name, &nl));
	s->fr.names[i] = name;
	s->fr.n = i + 1;
	v->name = name;
	if (!nl || strlen(name) != nl || !ckpt__utf8_valid(name, (size_t)nl))
		return ckpt__fail(CKPT_EFORMAT, c->path, NULL, ti->at, "tensor %zu: name is empty, holds a NUL or is not "
			"UTF-8", i);
	c->what = name;
	int rc = ckpt__name_set_add(seen, name, (size_t)nl, (uint32_t)i, NULL);
	if (rc == 1)
		return ckpt__fail(CKPT_EFORMAT, c->path, name, ti->at, "duplicate tensor name '%s'", name);
	if (rc < 0)
		return rc;
	CKPT_TRY(get_u32(c, &ti->ndims));
	if (ti->ndims > GGUF_MAX_DIMS)
		return ckpt__fail(CKPT_EFORMAT, c->path, name, ti->at, "tensor '%s': n_dims %u above ggml's maximum of %d",
			name, ti->ndims, GGUF_MAX_DIMS);
	for (uint32_t d = 0; d < ti->ndims; d++) {
		CKPT_TRY(get_u64(c, &ti->ne[d]));
		if (ti->ne[d] == 0 || ti->ne[d] > INT64_MAX)
			return ckpt__fail(CKPT_EFORMAT, c->path, name, ti->at, "tensor '%s': ne[%u] = %llu (must be 1.."
				"INT64_MAX)", name, d, (unsigned long long)ti->ne[d]);
	}
	CKPT_TRY(get_u32(c, &type));
	if (!(ti->type = ckpt__gguf_type((int)type)))
		return ckpt__fail(CKPT_EFORMAT, c->path, name, ti->at, "tensor '%s': unknown ggml type %u", name, type);
	CKPT_TRY(get_u64(c, &ti->offset));
	uint64_t ne0 = ti->ndims ? ti->ne[0] : 1;
	if (ne0 % ti->type->blck)
		return ckpt__fail(CKPT_EFORMAT, c->path, name, ti->at, "tensor '%s': ne[0] = %llu is not a multiple of "
			"%s's block of %u", name, (unsigned long long)ne0, ti->type->name, ti->type->blck);
	if (ckpt__mul_u64(ne0 / ti->type->blck, ti->type->size, &rowb) || rowb > INT64_MAX)
		return ckpt__fail(CKPT_EFORMAT, c->path, name, ti->at, "tensor '%s': row size overflows", name);
	for (uint32_t d = 1; d < ti->ndims; d++)
		if (ckpt__mul_u64(rows, ti->ne[d], &rows) || rows > INT64_MAX)
			return ckpt__fail(CKPT_EFORMAT, c->path, name, ti->at, "tensor '%s': element count overflows", name);
	if (ckpt__mul_u64(rows, ne0, &nbytes) || nbytes > INT64_MAX || ckpt__mul_u64(rows, rowb, &nbytes) ||
	    nbytes > INT64_MAX)
		return ckpt__fail(CKPT_EFORMAT, c->path, name, ti->at, "tensor '%s': size overflows", name);
	/* row-major shape: ne reversed; a quantized row is its bytes */
	v->shape.rank = (int)ti->ndims;
	for (uint32_t d = 0; d < ti->ndims; d++)
		v->shape.dims[ti->ndims - 1 - d] = (int64_t)ti->ne[d];
	if (ti->type->dt == CKPT_DT_INVALID) {
		v->dtype = CKPT_DT_UINT8;
		if (ti->ndims == 0) {
			v->shape.rank = 1;
			v->shape.dims[0] = (int64_t)rowb;
		} else {
			v->shape.dims[ti->ndims - 1] = (int64_t)rowb;
		}
	} else {
		v->dtype = ti->type->dt;
	}
	v->nbytes = nbytes;
	v->shard = 0;
	return CKPT_OK;
}

static int tensor_types_meta(ckpt_reader *r, const tinfo *ti)
{
	json_t *m = json_object();
	int rc = CKPT_OK, any = 0;
	if (!m)
		return CKPT_ENOMEM;
	for (size_t i = 0; i < r->nvars && rc == CKPT_OK; i++) {
		if (ti[i].type->dt != CKPT_DT_INVALID)
			continue;
		json_t *sh = json_array();
		for (uint32_t d = ti[i].ndims; sh && d > 0; d--)
			json_array_append_new(sh, json_integer((json_int_t)ti[i].ne[d - 1]));
		if (!sh || json_object_set_new(m, r->vars[i].name, json_pack("{s:s,s:o}", "type", ti[i].type->name,
			"shape", sh)) < 0)
			rc = CKPT_ENOMEM;
		any = 1;
	}
	if (rc == CKPT_OK && any) {
		char *s = json_dumps(m, JSON_COMPACT);
		rc = s ? ckpt__reader_set_meta(r, "gguf.tensor_types", s) : CKPT_ENOMEM;
		free(s);
	}
	json_decref(m);
	return rc;
}

static int set_header_meta(ckpt_reader *r, uint32_t version, uint32_t alignment)
{
	char num[32];
	snprintf(num, sizeof(num), "%u", version);
	CKPT_TRY(ckpt__reader_set_meta(r, "gguf.version", num));
	snprintf(num, sizeof(num), "%u", alignment);
	return ckpt__reader_set_meta(r, "gguf.alignment", num);
}

/* meta_only: stop after the key-value pairs (ckpt_gguf_open_metadata: a broken tensor table still shows them) */
static int parse(ckpt_reader *r, gguf_state *s, cur *c, int meta_only)
{
	unsigned char magic[4];
	uint32_t version, alignment = GGUF_DEFAULT_ALIGNMENT;
	uint64_t nt, nkv, data_start, expect = 0;
	tinfo *ti = NULL;
	ckpt__name_set seen;
	int rc;
	CKPT_TRY(get(c, magic, 4));
	if (memcmp(magic, "GGUF", 4) != 0)
		return ckpt__fail(CKPT_EFORMAT, c->path, NULL, 0, "not a GGUF file (bad magic)");
	CKPT_TRY(get_u32(c, &version));
	if (version == 1)
		return ckpt__fail(CKPT_EUNSUPPORTED, c->path, NULL, 4, "GGUF version 1 (32-bit counts) is not supported");
	if (version != 2 && version != 3)
		return ckpt__fail(CKPT_EUNSUPPORTED, c->path, NULL, 4, "GGUF version %u%s is not supported", version,
			(version & 0xffff) == 0 ? " (a big-endian file)" : "");
	CKPT_TRY(get_u64(c, &nt));
	CKPT_TRY(get_u64(c, &nkv));
	if (nkv > (c->size - c->pos) / 13)
		return ckpt__fail(CKPT_EFORMAT, c->path, NULL, 16, "kv_count %llu cannot fit in the file (%llu bytes)",
			(unsigned long long)nkv, (unsigned long long)c->size);
	if (nt > (c->size - c->pos) / 24)
		return ckpt__fail(CKPT_EFORMAT, c->path, NULL, 8, "tensor_count %llu cannot fit in the file (%llu bytes)",
			(unsigned long long)nt, (unsigned long long)c->size);
	if (nt > CKPT_MAX_VARIABLES)
		return ckpt__fail(CKPT_ELIMIT, c->path, NULL, 8, "tensor_count %llu above the limit of %d",
			(unsigned long long)nt, CKPT_MAX_VARIABLES);
	CKPT_TRY(read_kvs(c, r, nkv, &alignment));
	if (meta_only)
		return set_header_meta(r, version, alignment);
	r->vars = ckpt__calloc(nt ? (size_t)nt : 1, sizeof(*r->vars));
	s->fr.names = ckpt__calloc(nt ? (size_t)nt : 1, sizeof(char *));
	ti = ckpt__calloc(nt ? (size_t)nt : 1, sizeof(*ti));
	ckpt__name_set_init(&seen, tensor_name_of, s);
	rc = r->vars && s->fr.names && ti ? CKPT_OK : CKPT_ENOMEM;
	for (size_t i = 0; rc == CKPT_OK && i < nt; i++)
		rc = read_tensor_info(c, r, s, &seen, &ti[i], i);
	if (rc < 0)
		goto out;
	r->nvars = (size_t)nt;
	data_start = (c->pos + alignment - 1) / alignment * alignment;
	for (size_t i = 0; i < nt; i++) {
		const char *name = r->vars[i].name;
		uint64_t end;
		if (ti[i].offset % alignment) {
			rc = ckpt__fail(CKPT_EFORMAT, c->path, name, ti[i].at, "tensor '%s': offset %llu is not a multiple of "
				"the alignment %u", name, (unsigned long long)ti[i].offset, alignment);
			goto out;
		}
		if (ti[i].offset != expect) {
			rc = ckpt__fail(CKPT_EFORMAT, c->path, name, ti[i].at, "tensor '%s': offset %llu, expected %llu (the "
				"end of the previous tensor, padded): %s", name, (unsigned long long)ti[i].offset,
				(unsigned long long)expect, ti[i].offset > expect ? "a hole" : "overlapping data");
			goto out;
		}
		if (ckpt__add_u64(data_start, ti[i].offset, &end) || ckpt__add_u64(end, r->vars[i].nbytes, &end) ||
		    end > c->size) {
			rc = ckpt__fail(CKPT_EFORMAT, c->path, name, (int64_t)(data_start + ti[i].offset), "tensor '%s': "
				"%llu bytes of data at offset %llu run past the end of the file (%llu bytes): truncated", name,
				(unsigned long long)r->vars[i].nbytes, (unsigned long long)(data_start + ti[i].offset),
				(unsigned long long)c->size);
			goto out;
		}
		r->vars[i].offset = (int64_t)(data_start + ti[i].offset);
		expect = ti[i].offset + (r->vars[i].nbytes + alignment - 1) / alignment * alignment;
	}
	c->what = NULL;
	if ((rc = tensor_types_meta(r, ti)) < 0)
		goto out;
	rc = set_header_meta(r, version, alignment);
out:
	ckpt__free(ti);
	ckpt__name_set_free(&seen);
	return rc;
}

static int gguf_open(ckpt_reader *r, int meta_only)
{
	gguf_state *s = ckpt__calloc(1, sizeof(*s));
	cur c = { 0 };
	int rc;
	if (!s)
		return CKPT_ENOMEM;
	r->state = s;
	r->format_name = "gguf";
	if (!(r->path = ckpt__strdup(r->user_path)))
		return CKPT_ENOMEM;
	CKPT_TRY(ckpt_vfs_open(&s->fr.io, r->vfs, r->path, CKPT_IO_READ));
	c.io = s->fr.io;
	c.path = r->path;
	CKPT_TRY(ckpt_io_size(&c.size, s->fr.io));
	if (!(c.buf = ckpt__malloc(WIN)))
		return CKPT_ENOMEM;
	rc = parse(r, s, &c, meta_only);
	ckpt__free(c.buf);
	if (rc < 0 || meta_only)
		return rc;
	return ckpt__flat_build_graph(r);
}

int ckpt__gguf_open(ckpt_reader *r)
{
	return gguf_open(r, 0);
}

int ckpt_gguf_open_metadata(ckpt_reader **out, const char *path, const ckpt_open_options *o)
{
	ckpt_reader *r;
	int rc;
	if (!out || !path)
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "ckpt_gguf_open_metadata: NULL argument");
	*out = NULL;
	if (o && o->version != 1 && o->version != CKPT_OPEN_OPTIONS_VERSION)
		return ckpt__fail(CKPT_EINVAL, path, NULL, -1, "unsupported ckpt_open_options version %u", o->version);
	if (!(r = ckpt__calloc(1, sizeof(*r))))
		return CKPT_ENOMEM;
	r->fmt = &ckpt_format_gguf;
	r->opts = (ckpt_open_options)CKPT_OPEN_OPTIONS_INIT;
	r->nshards = 1;
	if ((rc = ckpt_status_of(r->vfs = ckpt_vfs_for_path(o ? o->vfs : NULL, path))) < 0 ||
	    (rc = (r->user_path = ckpt__strdup(path)) ? CKPT_OK : CKPT_ENOMEM) < 0 || (rc = gguf_open(r, 1)) < 0) {
		ckpt__error_annotate(path, NULL);
		ckpt_reader_free(r);
		return rc;
	}
	*out = r;
	return CKPT_OK;
}
