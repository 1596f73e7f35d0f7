/*
 * safetensors reader. Every rule the reference (safetensors/src/tensor.rs)
 * applies, and a few more, checked at open before any tensor is used:
 *   - the file holds the 8-byte size; the header is <= 100 MB and inside the file;
 *   - the header starts with '{' and is one UTF-8 JSON object (duplicate keys refused), scanned
 *     token by token (json_scan.h): every limit below is checked as its token comes, so memory
 *     is the header plus what the reader keeps (no JSON tree; __metadata__ compact, kv_store.h);
 *   - "__metadata__" is an object of string values;
 *   - every other member is {"dtype", "shape", "data_offsets"} and nothing else, with a
 *     known dtype, dims >= 0 (rank <= CKPT_MAX_RANK) and BEGIN <= END;
 *   - END - BEGIN == product(shape) x dtype size (checked arithmetic);
 *   - sorted by offset, tensors tile the buffer from 0 with no hole and no overlap, and the
 *     last END is the end of the file (no trailing bytes).
 * Errors name the file, the tensor and the absolute byte offset (of the tensor's
 * key in the header, or of its data).
 */
#include <stdlib.h>
#include <string.h>
#include "st.h"
#include "libckpt/base/json_scan.h"
#include "libckpt/base/kv_store.h"

typedef struct st_state {
	flat_reader fr;        /* first: ckpt__flat_read_into / ckpt__flat_close */
	uint64_t data_start;   /* 8 + N */
} st_state;

typedef struct st_tmp {
	uint64_t begin, end;
	size_t idx;
} st_tmp;

static uint64_t le64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static int cmp_tmp(const void *a, const void *b)
{
	const st_tmp *x = a, *y = b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* The header as it is scanned: limits are checked as each token comes, nothing kept that the reader does not. */
typedef struct hdr {
	ckpt_reader *r;
	st_state *s;
	ckpt__jscan j;
	st_tmp *tmp;
	size_t n, cap;
	ckpt__name_set names;  /* tensor names: duplicates */
	int seen_meta;
	char *key;             /* the current metadata key (j.str is reused for its value) */
	size_t key_cap;
} hdr;

static int not_json(hdr *h)
{
	if (strcmp(h->j.err, "out of memory") == 0)
		return CKPT_ENOMEM;
	return ckpt__fail(CKPT_EFORMAT, h->r->path, NULL, 8 + (int64_t)h->j.err_at, "header is not valid UTF-8 "
		"JSON: %s", h->j.err);
}

#define SCAN(expr) do { if ((expr) < 0) return not_json(h); } while (0)

static int duplicate(hdr *h, const char *key, size_t at)
{
	return ckpt__fail(CKPT_EFORMAT, h->r->path, key, 8 + (int64_t)at, "header has a duplicate key '%s'", key);
}

/* Elements left in the array being scanned, up to its ']': counted, not kept. */
static int count_rest(hdr *h, uint64_t *n)
{
	int more;
	do {
		SCAN(ckpt__js_skip(&h->j, 64));
		(*n)++;
	} while ((more = ckpt__js_next(&h->j, ']')) == 1);
	SCAN(more);
	return CKPT_OK;
}

/* "shape": at most CKPT_MAX_RANK dims kept; a longer array is counted for the message, never stored. */
static int parse_shape(hdr *h, const char *name, int64_t at, ckpt_var_info *var, uint64_t *nel)
{
	ckpt__jscan *j = &h->j;
	int more;
	*nel = 1;
	var->shape.rank = 0;
	SCAN(ckpt__js_expect(j, '['));
	if (ckpt__js_peek(j) == ']') {
		j->pos++;
		return CKPT_OK;
	}
	do {
		uint64_t dim;
		int kind;
		if (var->shape.rank == CKPT_MAX_RANK) {
			uint64_t rank = CKPT_MAX_RANK;
			CKPT_TRY(count_rest(h, &rank));
			return ckpt__fail(CKPT_EFORMAT, h->r->path, name, at, "tensor '%s': rank %llu above the maximum %d",
				name, (unsigned long long)rank, CKPT_MAX_RANK);
		}
		SCAN(kind = ckpt__js_peek(j) == '-' || (ckpt__js_peek(j) >= '0' && ckpt__js_peek(j) <= '9') ?
			ckpt__js_number(j, &dim) : ckpt__js_skip(j, 64) < 0 ? -1 : CKPT__JS_OTHER_NUMBER);
		if (kind != CKPT__JS_UINT)
			return ckpt__fail(CKPT_EFORMAT, h->r->path, name, at, "tensor '%s': shape dim %d is not an integer "
				">= 0", name, var->shape.rank);
		var->shape.dims[var->shape.rank++] = (int64_t)dim;
		if (ckpt__mul_u64(*nel, dim, nel))
			return ckpt__fail(CKPT_EFORMAT, h->r->path, name, at, "tensor '%s': element count overflows 64 bits",
				name);
	} while ((more = ckpt__js_next(j, ']')) == 1);
	SCAN(more);
	return CKPT_OK;
}

/* "data_offsets": exactly two integers >= 0. */
static int parse_offsets(hdr *h, const char *name, int64_t at, st_tmp *t)
{
	ckpt__jscan *j = &h->j;
	uint64_t v[2];
	int more, n = 0;
	SCAN(ckpt__js_expect(j, '['));
	if (ckpt__js_peek(j) != ']') {
		do {
			int kind;
			SCAN(kind = ckpt__js_peek(j) == '-' || (ckpt__js_peek(j) >= '0' && ckpt__js_peek(j) <= '9') ?
				ckpt__js_number(j, &v[n < 2 ? n : 1]) : ckpt__js_skip(j, 64) < 0 ? -1 : CKPT__JS_OTHER_NUMBER);
			if (kind != CKPT__JS_UINT || ++n > 2)
				return ckpt__fail(CKPT_EFORMAT, h->r->path, name, at, "tensor '%s': data_offsets is not [BEGIN, "
					"END] of integers >= 0", name);
		} while ((more = ckpt__js_next(j, ']')) == 1);
		SCAN(more);
	} else {
		j->pos++;
	}
	if (n != 2)
		return ckpt__fail(CKPT_EFORMAT, h->r->path, name, at, "tensor '%s': data_offsets is not [BEGIN, END] of "
			"integers >= 0", name);
	t->begin = v[0];
	t->end = v[1];
	return CKPT_OK;
}

/* One tensor member {"dtype", "shape", "data_offsets"}: fills var and its offsets. */
static int parse_entry(hdr *h, const char *name, int64_t at, ckpt_var_info *var, st_tmp *t)
{
	ckpt__jscan *j = &h->j;
	const char *path = h->r->path;
	const st_dtype *d = NULL;
	uint64_t nel = 1, nbytes;
	int have[3] = { 0, 0, 0 }, more;
	if (ckpt__js_peek(j) != '{') {
		SCAN(ckpt__js_skip(j, 64));
		return ckpt__fail(CKPT_EFORMAT, path, name, at, "tensor '%s': header entry is not an object", name);
	}
	j->pos++;
	if (ckpt__js_peek(j) == '}') {
		j->pos++;
		more = 0;
	} else {
		do {
			size_t fat = j->pos;
			int f;
			SCAN(ckpt__js_string(j));
			f = strcmp(j->str, "dtype") == 0 ? 0 : strcmp(j->str, "shape") == 0 ? 1 :
				strcmp(j->str, "data_offsets") == 0 ? 2 : -1;
			if (f < 0)
				return ckpt__fail(CKPT_EFORMAT, path, name, at, "tensor '%s': unexpected field '%s' (only dtype, "
					"shape, data_offsets)", name, j->str);
			if (have[f])
				return duplicate(h, j->str, fat);
			SCAN(ckpt__js_expect(j, ':'));
			int want = f == 0 ? '"' : '[';
			if (ckpt__js_peek(j) != want)
				return ckpt__fail(CKPT_EFORMAT, path, name, at, "tensor '%s': needs a string dtype, a shape array "
					"and a data_offsets array", name);
			have[f] = 1;
			if (f == 0) {
				SCAN(ckpt__js_string(j));
				if (!(d = ckpt__st_dtype_by_name(j->str)))
					return ckpt__fail(CKPT_EFORMAT, path, name, at, "tensor '%s': unknown dtype '%s'", name, j->str);
			} else if (f == 1) {
				CKPT_TRY(parse_shape(h, name, at, var, &nel));
			} else {
				CKPT_TRY(parse_offsets(h, name, at, t));
			}
		} while ((more = ckpt__js_next(j, '}')) == 1);
		SCAN(more);
	}
	if (!have[0] || !have[1] || !have[2])
		return ckpt__fail(CKPT_EFORMAT, path, name, at, "tensor '%s': needs a string dtype, a shape array and "
			"a data_offsets array", name);
	if (d->dt == CKPT_DT_INVALID)
		return ckpt__fail(CKPT_EUNSUPPORTED, path, name, at, "tensor '%s': dtype %s is not supported", name, d->name);
	if (ckpt__mul_u64(nel, d->size, &nbytes))
		return ckpt__fail(CKPT_EFORMAT, path, name, at, "tensor '%s': byte size (%llu x %zu) overflows 64 bits",
			name, (unsigned long long)nel, d->size);
	if (t->end < t->begin)
		return ckpt__fail(CKPT_EFORMAT, path, name, at, "tensor '%s': data_offsets [%llu, %llu] end before they "
			"begin", name, (unsigned long long)t->begin, (unsigned long long)t->end);
	if (t->end - t->begin != nbytes) {
		char sh[128];
		ckpt_shape_format(&var->shape, sh, sizeof(sh));
		return ckpt__fail(CKPT_EFORMAT, path, name, at, "tensor '%s': data_offsets [%llu, %llu] hold %llu bytes, "
			"shape %s of %s needs %llu", name, (unsigned long long)t->begin, (unsigned long long)t->end,
			(unsigned long long)(t->end - t->begin), sh, d->name, (unsigned long long)nbytes);
	}
	var->dtype = d->dt;
	var->nbytes = nbytes;
	var->shard = 0;
	return CKPT_OK;
}

/* "__metadata__": an object of strings, kept compact (kv_store.h) as it is scanned. */
static int parse_metadata(hdr *h, size_t at)
{
	ckpt__jscan *j = &h->j;
	ckpt__kv_store *kv;
	int more;
	if (h->seen_meta)
		return duplicate(h, "__metadata__", at);
	h->seen_meta = 1;
	if (ckpt__js_peek(j) != '{')
		return ckpt__fail(CKPT_EFORMAT, h->r->path, "__metadata__", 8 + (int64_t)at, "__metadata__ is not an object");
	j->pos++;
	if (!(kv = h->r->kv = ckpt__kv_new("safetensors.metadata", CKPT__KV_JSON_OBJECT)))
		return CKPT_ENOMEM;
	if (ckpt__js_peek(j) == '}') {
		j->pos++;
		ckpt__kv_seal(kv);
		return CKPT_OK;
	}
	do {
		size_t kat = j->pos, kl;
		unsigned char *d;
		uint32_t dup;
		int rc;
		SCAN(ckpt__js_string(j));
		kl = j->len;
		if (kl + 1 > h->key_cap) {
			char *k = ckpt__realloc(h->key, kl + 1);
			if (!k)
				return CKPT_ENOMEM;
			h->key = k;
			h->key_cap = kl + 1;
		}
		memcpy(h->key, j->str, kl + 1);
		SCAN(ckpt__js_expect(j, ':'));
		if (ckpt__js_peek(j) != '"')
			return ckpt__fail(CKPT_EFORMAT, h->r->path, "__metadata__", 8 + (int64_t)at, "__metadata__ value of "
				"'%s' is not a string", h->key);
		SCAN(ckpt__js_string(j));
		if ((rc = ckpt__kv_append(kv, h->key, kl, CKPT_KV_STRING, CKPT_KV_U8, 1, j->len, &d, &dup)) < 0)
			return rc;
		if (rc == 1)
			return duplicate(h, h->key, kat);
		memcpy(d, j->str, j->len);
	} while ((more = ckpt__js_next(j, '}')) == 1);
	SCAN(more);
	ckpt__kv_seal(kv);
	return CKPT_OK;
}

static const char *tensor_name_of(const void *ctx, uint32_t id, size_t *len)
{
	const st_state *s = ctx;
	*len = strlen(s->fr.names[id]);
	return s->fr.names[id];
}

/* Room for one more tensor in r->vars, the names and tmp. */
static int grow(hdr *h)
{
	size_t cap = h->cap ? h->cap * 2 : 16;
	void *p;
	if (h->n < h->cap)
		return CKPT_OK;
	if (h->n >= CKPT_MAX_VARIABLES)
		return ckpt__fail(CKPT_ELIMIT, h->r->path, NULL, 8 + (int64_t)h->j.pos, "header lists more than %d "
			"tensors, the limit", CKPT_MAX_VARIABLES);
	if (cap > CKPT_MAX_VARIABLES)
		cap = CKPT_MAX_VARIABLES;
	if (!(p = ckpt__realloc(h->r->vars, cap * sizeof(*h->r->vars))))
		return CKPT_ENOMEM;
	h->r->vars = p;
	if (!(p = ckpt__realloc(h->s->fr.names, cap * sizeof(char *))))
		return CKPT_ENOMEM;
	h->s->fr.names = p;
	if (!(p = ckpt__realloc(h->tmp, cap * sizeof(*h->tmp))))
		return CKPT_ENOMEM;
	h->tmp = p;
	h->cap = cap;
	return CKPT_OK;
}

/* The root object, member by member. */
static int scan_header(hdr *h)
{
	ckpt__jscan *j = &h->j;
	st_state *s = h->s;
	int more;
	SCAN(ckpt__js_expect(j, '{'));
	if (ckpt__js_peek(j) == '}') {
		j->pos++;
		more = 0;
	} else {
		do {
			size_t at;
			uint32_t dup;
			int rc;
			ckpt__js_peek(j);
			at = j->pos;
			SCAN(ckpt__js_string(j));
			if (strcmp(j->str, "__metadata__") == 0) {
				SCAN(ckpt__js_expect(j, ':'));
				CKPT_TRY(parse_metadata(h, at));
				continue;
			}
			if (!j->len || j->len > CKPT_MAX_NAME_LEN)
				return ckpt__fail(j->len ? CKPT_ELIMIT : CKPT_EFORMAT, h->r->path, NULL, 8 + (int64_t)at,
					"tensor name of %zu bytes (1..%d allowed)", j->len, CKPT_MAX_NAME_LEN);
			CKPT_TRY(grow(h));
			memset(&h->r->vars[h->n], 0, sizeof(h->r->vars[h->n]));
			if (!(s->fr.names[h->n] = ckpt__strdup(j->str)))
				return CKPT_ENOMEM;
			s->fr.n = h->n + 1;
			h->r->vars[h->n].name = s->fr.names[h->n];
			if ((rc = ckpt__name_set_add(&h->names, j->str, j->len, (uint32_t)h->n, &dup)) < 0)
				return rc;
			if (rc == 1)
				return duplicate(h, s->fr.names[h->n], at);
			SCAN(ckpt__js_expect(j, ':'));
			CKPT_TRY(parse_entry(h, s->fr.names[h->n], 8 + (int64_t)at, &h->r->vars[h->n], &h->tmp[h->n]));
			h->tmp[h->n].idx = h->n;
			h->n++;
		} while ((more = ckpt__js_next(j, '}')) == 1);
		SCAN(more);
	}
	if (ckpt__js_peek(j) >= 0) {
		/* jansson names the end of the token that follows */
		while (j->pos < j->n && !strchr(" \t\r\n", j->s[j->pos]))
			j->pos++;
		j->err = "end of file expected";
		j->err_at = j->pos;
		return not_json(h);
	}
	return CKPT_OK;
}

static int parse_header(ckpt_reader *r, st_state *s, const char *hb, size_t hn, uint64_t buflen)
{
	hdr h;
	st_tmp *tmp;
	size_t n;
	int rc;
	uint64_t expect = 0;

	memset(&h, 0, sizeof(h));
	h.r = r;
	h.s = s;
	h.j.s = hb;
	h.j.n = hn;
	ckpt__name_set_init(&h.names, tensor_name_of, s);
	rc = scan_header(&h);
	ckpt__name_set_free(&h.names);
	ckpt__js_free(&h.j);
	ckpt__free(h.key);
	tmp = h.tmp;
	n = h.n;
	if (rc < 0)
		goto out;
	if (n) /* tmp is NULL for a header of no tensors */
		qsort(tmp, n, sizeof(*tmp), cmp_tmp);
	for (size_t i = 0; i < n; i++) {
		const char *name = r->vars[tmp[i].idx].name;
		if (tmp[i].begin > expect) {
			rc = ckpt__fail(CKPT_EFORMAT, r->path, name, (int64_t)(s->data_start + expect), "tensor '%s': hole "
				"of %llu bytes before its data (buffer bytes [%llu, %llu) belong to no tensor)", name,
				(unsigned long long)(tmp[i].begin - expect), (unsigned long long)expect,
				(unsigned long long)tmp[i].begin);
			goto out;
		}
		if (tmp[i].begin < expect) {
			rc = ckpt__fail(CKPT_EFORMAT, r->path, name, (int64_t)(s->data_start + tmp[i].begin), "tensor '%s': "
				"data [%llu, %llu) overlaps tensor '%s' (which ends at %llu)", name,
				(unsigned long long)tmp[i].begin, (unsigned long long)tmp[i].end,
				r->vars[tmp[i - 1].idx].name, (unsigned long long)expect);
			goto out;
		}
		if (tmp[i].end > buflen) {
			rc = ckpt__fail(CKPT_EFORMAT, r->path, name, (int64_t)(s->data_start + tmp[i].begin), "tensor '%s': "
				"data [%llu, %llu) runs past the end of the file (buffer holds %llu bytes): truncated", name,
				(unsigned long long)tmp[i].begin, (unsigned long long)tmp[i].end, (unsigned long long)buflen);
			goto out;
		}
		r->vars[tmp[i].idx].offset = (int64_t)(s->data_start + tmp[i].begin);
		expect = tmp[i].end;
	}
	if (expect != buflen) {
		rc = ckpt__fail(CKPT_EFORMAT, r->path, n ? r->vars[tmp[n - 1].idx].name : NULL,
			(int64_t)(s->data_start + expect), "%llu trailing bytes after the last tensor's data (nothing may "
			"follow the buffer)", (unsigned long long)(buflen - expect));
		goto out;
	}
	/* entries in file order */
	{
		ckpt_var_info *sorted = ckpt__calloc(n ? n : 1, sizeof(*sorted));
		char **snames = ckpt__calloc(n ? n : 1, sizeof(char *));
		if (!sorted || !snames) {
			ckpt__free(sorted);
			ckpt__free(snames);
			rc = CKPT_ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < n; i++) {
			sorted[i] = r->vars[tmp[i].idx];
			snames[i] = s->fr.names[tmp[i].idx];
		}
		ckpt__free(r->vars);
		ckpt__free(s->fr.names);
		r->vars = sorted;
		s->fr.names = snames;
	}
	r->nvars = n;
out:
	ckpt__free(tmp);
	return rc;
}

int ckpt__st_open(ckpt_reader *r)
{
	st_state *s = ckpt__calloc(1, sizeof(*s));
	unsigned char b8[8];
	uint64_t size, hl;
	char *h = NULL;
	int rc;
	if (!s)
		return CKPT_ENOMEM;
	r->state = s;
	r->format_name = "safetensors";
	if (!(r->path = ckpt__strdup(r->user_path)))
		return CKPT_ENOMEM;
	if ((rc = ckpt_vfs_open(&s->fr.io, r->vfs, r->path, CKPT_IO_READ)) < 0 || (rc = ckpt_io_size(&size, s->fr.io)) < 0)
		return rc;
	if (size < 8)
		return ckpt__fail(CKPT_EFORMAT, r->path, NULL, 0, "file of %llu bytes cannot hold the 8-byte header size",
			(unsigned long long)size);
	CKPT_TRY(ckpt_io_read_exact(s->fr.io, b8, 8, 0));
	hl = le64(b8);
	if (hl > ST_MAX_HEADER)
		return ckpt__fail(CKPT_ELIMIT, r->path, NULL, 0, "header size %llu is above safetensors' limit of "
			"100000000 bytes", (unsigned long long)hl);
	if (hl > size - 8)
		return ckpt__fail(CKPT_EFORMAT, r->path, NULL, 0, "header size %llu runs past the end of the file "
			"(%llu bytes)", (unsigned long long)hl, (unsigned long long)size);
	if (hl < 2)
		return ckpt__fail(CKPT_EFORMAT, r->path, NULL, 0, "header size %llu cannot hold a JSON object",
			(unsigned long long)hl);
	s->data_start = 8 + hl;
	if (!(h = ckpt__malloc((size_t)hl)))
		return CKPT_ENOMEM;
	rc = ckpt_io_read_exact(s->fr.io, h, (size_t)hl, 8);
	if (rc == CKPT_OK && h[0] != '{')
		rc = ckpt__fail(CKPT_EFORMAT, r->path, NULL, 8, "header does not start with '{'");
	if (rc == CKPT_OK)
		rc = parse_header(r, s, h, (size_t)hl, size - s->data_start);
	ckpt__free(h);
	if (rc < 0)
		return rc;
	return ckpt__flat_build_graph(r);
}
