/* Typed metadata key-values in compact form (kv_store.h). */
#include <stdio.h>
#include <string.h>
#include "internal.h"
#include "kv_store.h"

/* the record head after the key's NUL: the type; for arrays also the element type and the u64 count */
static size_t head_len(ckpt_kv_type type)
{
	return type == CKPT_KV_ARRAY ? 10 : 1;
}

static const char *key_of(const void *ctx, uint32_t id, size_t *len)
{
	const ckpt__kv_store *s = ctx;
	const char *k = (const char *)s->blob + s->rec[id];
	*len = strlen(k);
	return k;
}

ckpt__kv_store *ckpt__kv_new(const char *json_key, int style)
{
	ckpt__kv_store *s = ckpt__calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	ckpt__name_set_init(&s->names, key_of, s);
	s->style = style;
	snprintf(s->json_key, sizeof(s->json_key), "%s", json_key);
	return s;
}

static int reserve(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t c = *cap ? *cap : 256;
	void *q;
	if (need <= *cap)
		return CKPT_OK;
	while (c < need) {
		if (c > SIZE_MAX / 2 / elem)
			return ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "metadata of %zu bytes", need * elem);
		c *= 2;
	}
	if (!(q = ckpt__realloc(*p, c * elem)))
		return CKPT_ENOMEM;
	*p = q;
	*cap = c;
	return CKPT_OK;
}

int ckpt__kv_append(ckpt__kv_store *s, const char *key, size_t klen, ckpt_kv_type type, ckpt_kv_type elem,
	uint64_t count, uint64_t nbytes, unsigned char **data, uint32_t *dup)
{
	size_t at = s->len, need, hl = head_len(type);
	unsigned char *p;
	int rc;
	if (nbytes > SIZE_MAX - klen - 1 - hl - at)
		return ckpt__fail(CKPT_ELIMIT, NULL, key, -1, "metadata value of %llu bytes", (unsigned long long)nbytes);
	need = at + klen + 1 + hl + (size_t)nbytes;
	CKPT_TRY(reserve((void **)&s->blob, &s->cap, need, 1));
	CKPT_TRY(reserve((void **)&s->rec, &s->rcap, s->n + 1, sizeof(*s->rec)));
	p = s->blob + at;
	memcpy(p, key, klen);
	p[klen] = '\0';
	s->rec[s->n] = at;
	/* the key must be in the blob for the set to compare against it */
	if ((rc = ckpt__name_set_add(&s->names, (const char *)p, klen, (uint32_t)s->n, dup)) != 0)
		return rc;
	p += klen + 1;
	p[0] = (unsigned char)type;
	if (type == CKPT_KV_ARRAY) {
		p[1] = (unsigned char)elem;
		memcpy(p + 2, &count, 8);
	}
	*data = p + hl;
	s->len = need; /* a value's size is where the next record (or the blob) begins */
	s->n++;
	return 0;
}

/* The record head of the last pair. */
static unsigned char *last_head(ckpt__kv_store *s)
{
	unsigned char *p = s->blob + s->rec[s->n - 1];
	return p + strlen((const char *)p) + 1;
}

int ckpt__kv_grow_last(ckpt__kv_store *s, uint64_t n, unsigned char **data)
{
	if (n > SIZE_MAX - s->len)
		return ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "metadata of more than %zu bytes", s->len);
	CKPT_TRY(reserve((void **)&s->blob, &s->cap, s->len + (size_t)n, 1));
	*data = s->blob + s->len;
	s->len += (size_t)n;
	return CKPT_OK;
}

void ckpt__kv_set_last(ckpt__kv_store *s, ckpt_kv_type elem, uint64_t count)
{
	unsigned char *h = last_head(s);
	if (h[0] != CKPT_KV_ARRAY)
		return;
	h[1] = (unsigned char)elem;
	memcpy(h + 2, &count, 8);
}

void ckpt__kv_seal(ckpt__kv_store *s)
{
	void *p;
	ckpt__name_set_free(&s->names);
	if (s->len && s->len < s->cap && (p = ckpt__realloc(s->blob, s->len))) {
		s->blob = p;
		s->cap = s->len;
	}
	if (s->n && s->n < s->rcap && (p = ckpt__realloc(s->rec, s->n * sizeof(*s->rec)))) {
		s->rec = p;
		s->rcap = s->n;
	}
}

void ckpt__kv_get(const ckpt__kv_store *s, size_t i, ckpt_kv *out)
{
	const unsigned char *p = s->blob + s->rec[i];
	size_t kl = strlen((const char *)p), end = i + 1 < s->n ? (size_t)s->rec[i + 1] : s->len;
	out->key = (const char *)p;
	p += kl + 1;
	out->type = (ckpt_kv_type)p[0];
	out->elem_type = CKPT_KV_U8;
	out->count = 1;
	if (out->type == CKPT_KV_ARRAY) {
		out->elem_type = (ckpt_kv_type)p[1];
		memcpy(&out->count, p + 2, 8);
	}
	out->data = p + head_len(out->type);
	out->nbytes = (uint64_t)(s->blob + end - out->data);
}

void ckpt__kv_free(ckpt__kv_store *s)
{
	if (!s)
		return;
	ckpt__name_set_free(&s->names);
	ckpt__free(s->blob);
	ckpt__free(s->rec);
	ckpt__free(s);
}

static const unsigned type_size[] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
static const char *const type_name[] = { "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array",
	"u64", "i64", "f64" };

unsigned ckpt__kv_type_size(ckpt_kv_type t)
{
	return (unsigned)t < sizeof(type_size) / sizeof(type_size[0]) ? type_size[t] : 0;
}

const char *ckpt__kv_type_name(ckpt_kv_type t)
{
	return (unsigned)t < sizeof(type_name) / sizeof(type_name[0]) ? type_name[t] : NULL;
}

int ckpt__utf8_valid(const char *str, size_t n)
{
	return ckpt__utf8_prefix(str, n) == n;
}

size_t ckpt__utf8_prefix(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;
	while (i < n) {
		unsigned char c = s[i];
		size_t len;
		uint32_t cp;
		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xe0) == 0xc0) {
			len = 2;
			cp = c & 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			len = 3;
			cp = c & 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			len = 4;
			cp = c & 0x07;
		} else {
			return i;
		}
		if (len > n - i)
			return i;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return i;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
		    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
			return i;
		i += len;
	}
	return n;
}
