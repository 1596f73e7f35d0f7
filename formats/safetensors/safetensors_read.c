/*
 * safetensors reader. Every rule the reference (safetensors/src/tensor.rs)
 * applies, and a few more, checked at open before any tensor is used:
 *   - the file holds the 8-byte size; the header is <= 100 MB and inside the file;
 *   - the header starts with '{' and is one UTF-8 JSON object (jansson, duplicate keys refused);
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
#include <jansson.h>
#include "st.h"

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

/* Absolute offset of member `name`'s key in the header (8 when it cannot be found verbatim). */
static int64_t key_offset(const char *h, size_t hn, const char *name)
{
	size_t nl = strlen(name);
	for (size_t i = 0; i + nl + 3 <= hn; i++) {
		const char *p = memchr(h + i, '"', hn - i);
		if (!p)
			break;
		i = (size_t)(p - h);
		if (i + nl + 2 <= hn && memcmp(p + 1, name, nl) == 0 && p[nl + 1] == '"')
			return 8 + (int64_t)i;
	}
	return 8;
}

/*
 * jansson stops right after a duplicate key: recover that key (the string
 * ending just before `pos`) and where it starts (*at, header-relative).
 */
static char *dup_key_before(const char *h, size_t pos, size_t *at)
{
	size_t end, start;
	json_t *s;
	char *out = NULL;
	if (pos == 0)
		return NULL;
	for (end = pos; end > 0 && h[end - 1] != '"'; end--)
		;
	if (end == 0)
		return NULL;
	for (start = end - 1; start > 0; start--) {
		size_t bs = 0;
		if (h[start - 1] != '"')
			continue;
		while (start - 1 > bs && h[start - 2 - bs] == '\\')
			bs++;
		if (bs % 2 == 0)
			break;
	}
	if (start == 0)
		return NULL;
	*at = start - 1;
	s = json_loadb(h + start - 1, end - start + 1, JSON_DECODE_ANY, NULL);
	if (s && json_is_string(s))
		out = ckpt__strdup(json_string_value(s));
	json_decref(s);
	return out;
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

static int get_u64(json_t *v, uint64_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -1;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/* One tensor member: fills var and its offsets. */
static int parse_entry(ckpt_reader *r, const char *h, size_t hn, const char *name, json_t *v, ckpt_var_info *var,
	st_tmp *t)
{
	const char *path = r->path;
#define at key_offset(h, hn, name) /* only on the error path: the search is linear */
	json_t *jd, *js, *jo, *x;
	const char *k;
	const st_dtype *d;
	uint64_t nel = 1, nbytes;
	size_t i;
	if (!json_is_object(v))
		return ckpt__fail(CKPT_EFORMAT, path, name, at, "tensor '%s': header entry is not an object", name);
	json_object_foreach(v, k, x) {
		if (strcmp(k, "dtype") && strcmp(k, "shape") && strcmp(k, "data_offsets"))
			return ckpt__fail(CKPT_EFORMAT, path, name, at, "tensor '%s': unexpected field '%s' (only dtype, "
				"shape, data_offsets)", name, k);
	}
	jd = json_object_get(v, "dtype");
	js = json_object_get(v, "shape");
	jo = json_object_get(v, "data_offsets");
	if (!json_is_string(jd) || !json_is_array(js) || !json_is_array(jo))
		return ckpt__fail(CKPT_EFORMAT, path, name, at, "tensor '%s': needs a string dtype, a shape array and "
			"a data_offsets array", name);
	d = ckpt__st_dtype_by_name(json_string_value(jd));
	if (!d)
		return ckpt__fail(CKPT_EFORMAT, path, name, at, "tensor '%s': unknown dtype '%s'", name,
			json_string_value(jd));
	if (d->dt == CKPT_DT_INVALID)
		return ckpt__fail(CKPT_EUNSUPPORTED, path, name, at, "tensor '%s': dtype %s is not supported", name, d->name);
	if (json_array_size(js) > CKPT_MAX_RANK)
		return ckpt__fail(CKPT_EFORMAT, path, name, at, "tensor '%s': rank %zu above the maximum %d", name,
			json_array_size(js), CKPT_MAX_RANK);
	var->shape.rank = (int)json_array_size(js);
	json_array_foreach(js, i, x) {
		uint64_t dim;
		if (get_u64(x, &dim) < 0)
			return ckpt__fail(CKPT_EFORMAT, path, name, at, "tensor '%s': shape dim %zu is not an integer >= 0",
				name, i);
		var->shape.dims[i] = (int64_t)dim;
		if (ckpt__mul_u64(nel, dim, &nel))
			return ckpt__fail(CKPT_EFORMAT, path, name, at, "tensor '%s': element count overflows 64 bits", name);
	}
	if (ckpt__mul_u64(nel, d->size, &nbytes))
		return ckpt__fail(CKPT_EFORMAT, path, name, at, "tensor '%s': byte size (%llu x %zu) overflows 64 bits",
			name, (unsigned long long)nel, d->size);
	if (json_array_size(jo) != 2 || get_u64(json_array_get(jo, 0), &t->begin) < 0 ||
	    get_u64(json_array_get(jo, 1), &t->end) < 0)
		return ckpt__fail(CKPT_EFORMAT, path, name, at, "tensor '%s': data_offsets is not [BEGIN, END] of "
			"integers >= 0", name);
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
#undef at
}

static int check_metadata(ckpt_reader *r, const char *h, size_t hn, json_t *m)
{
	const char *k;
	json_t *x;
	char *s;
	int rc;
	if (!json_is_object(m))
		return ckpt__fail(CKPT_EFORMAT, r->path, "__metadata__", key_offset(h, hn, "__metadata__"),
			"__metadata__ is not an object");
	json_object_foreach(m, k, x) {
		if (!json_is_string(x))
			return ckpt__fail(CKPT_EFORMAT, r->path, "__metadata__", key_offset(h, hn, "__metadata__"),
				"__metadata__ value of '%s' is not a string", k);
	}
	s = json_dumps(m, JSON_COMPACT);
	if (!s)
		return CKPT_ENOMEM;
	rc = ckpt__reader_set_meta(r, "safetensors.metadata", s);
	free(s);
	return rc;
}

static int parse_header(ckpt_reader *r, st_state *s, const char *h, size_t hn, uint64_t buflen)
{
	json_error_t err;
	json_t *root = json_loadb(h, hn, JSON_REJECT_DUPLICATES, &err);
	const char *k;
	json_t *v;
	st_tmp *tmp = NULL;
	size_t n = 0, cap;
	int rc = CKPT_OK;
	uint64_t expect = 0;

	if (!root) {
		if (json_error_code(&err) == json_error_duplicate_key) {
			size_t at = (size_t)err.position;
			char *key = dup_key_before(h, (size_t)err.position, &at);
			rc = ckpt__fail(CKPT_EFORMAT, r->path, key, 8 + (int64_t)at,
				"header has a duplicate key '%s'", key ? key : "?");
			ckpt__free(key);
			return rc;
		}
		return ckpt__fail(CKPT_EFORMAT, r->path, NULL, 8 + (int64_t)err.position,
			"header is not valid UTF-8 JSON: %s", err.text);
	}
	if (!json_is_object(root)) {
		json_decref(root);
		return ckpt__fail(CKPT_EFORMAT, r->path, NULL, 8, "header is not a JSON object");
	}
	cap = json_object_size(root);
	if (cap > CKPT_MAX_VARIABLES) {
		json_decref(root);
		return ckpt__fail(CKPT_ELIMIT, r->path, NULL, 8, "header lists %zu tensors, limit is %d", cap,
			CKPT_MAX_VARIABLES);
	}
	r->vars = ckpt__calloc(cap ? cap : 1, sizeof(*r->vars));
	s->fr.names = ckpt__calloc(cap ? cap : 1, sizeof(char *));
	tmp = ckpt__calloc(cap ? cap : 1, sizeof(*tmp));
	if (!r->vars || !s->fr.names || !tmp) {
		rc = CKPT_ENOMEM;
		goto out;
	}
	json_object_foreach(root, k, v) {
		if (strcmp(k, "__metadata__") == 0) {
			if ((rc = check_metadata(r, h, hn, v)) < 0)
				goto out;
			continue;
		}
		if (!*k || strlen(k) > CKPT_MAX_NAME_LEN) {
			rc = ckpt__fail(*k ? CKPT_ELIMIT : CKPT_EFORMAT, r->path, NULL, key_offset(h, hn, k),
				"tensor name of %zu bytes (1..%d allowed)", strlen(k), CKPT_MAX_NAME_LEN);
			goto out;
		}
		if (!(s->fr.names[n] = ckpt__strdup(k))) {
			rc = CKPT_ENOMEM;
			goto out;
		}
		r->vars[n].name = s->fr.names[n];
		s->fr.n = n + 1;
		if ((rc = parse_entry(r, h, hn, k, v, &r->vars[n], &tmp[n])) < 0)
			goto out;
		tmp[n].idx = n;
		n++;
	}
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
		char **snames = ckpt__calloc(cap ? cap : 1, sizeof(char *));
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
	json_decref(root);
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
	if ((rc = ckpt_vfs_open(r->vfs, r->path, CKPT_IO_READ, &s->fr.io)) < 0 || (rc = ckpt_io_size(s->fr.io, &size)) < 0)
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
