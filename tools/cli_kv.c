/*
 * Typed metadata pairs (ckpt_reader_kv: GGUF key-values, safetensors
 * __metadata__) for inspect's text and --json, read in place: nothing is
 * parsed or copied, so printing a million pairs costs no memory.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include "cli.h"

static const char *const kv_type_names[] = { "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array",
	"u64", "i64", "f64" };

const char *cli_kv_type_name(ckpt_kv_type t)
{
	return (unsigned)t < sizeof(kv_type_names) / sizeof(kv_type_names[0]) ? kv_type_names[t] : "?";
}

static uint64_t le(const unsigned char *b, unsigned n)
{
	uint64_t u = 0;
	while (n--)
		u = u << 8 | b[n];
	return u;
}

static unsigned elem_size(ckpt_kv_type t)
{
	static const unsigned sz[] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
	return (unsigned)t < sizeof(sz) / sizeof(sz[0]) ? sz[t] : 0;
}

void cli_kv_elem_init(cli_kv_elems *it, const ckpt_kv *kv)
{
	it->kv = kv;
	it->p = kv->data;
	it->end = kv->data + kv->nbytes;
	it->index = 0;
}

int cli_kv_elem_next(cli_kv_elems *it, const unsigned char **bytes, uint64_t *len)
{
	const ckpt_kv *kv = it->kv;
	uint64_t n;
	if (kv->type != CKPT_KV_ARRAY || it->index >= kv->count)
		return 0;
	if (kv->elem_type == CKPT_KV_STRING) {
		if (it->end - it->p < 8)
			return 0;
		n = le(it->p, 8);
		if (n > (uint64_t)(it->end - it->p - 8))
			return 0;
		*bytes = it->p + 8;
		*len = n;
		it->p += 8 + n;
	} else {
		n = elem_size(kv->elem_type);
		if (!n || (uint64_t)(it->end - it->p) < n)
			return 0;
		*bytes = it->p;
		*len = n;
		it->p += n;
	}
	it->index++;
	return 1;
}

/* One number of type t (its little-endian bytes) as text; `json`: JSON spelling (null for non-finite). */
void cli_kv_number(FILE *f, ckpt_kv_type t, const unsigned char *b, int json)
{
	uint64_t u = le(b, elem_size(t));
	switch (t) {
	case CKPT_KV_U8: case CKPT_KV_U16: case CKPT_KV_U32: case CKPT_KV_U64: fprintf(f, "%" PRIu64, u); break;
	case CKPT_KV_I8: fprintf(f, "%d", (int8_t)u); break;
	case CKPT_KV_I16: fprintf(f, "%d", (int16_t)u); break;
	case CKPT_KV_I32: fprintf(f, "%" PRId32, (int32_t)u); break;
	case CKPT_KV_I64: fprintf(f, "%" PRId64, (int64_t)u); break;
	case CKPT_KV_BOOL: fputs(u ? "true" : "false", f); break;
	case CKPT_KV_F32: case CKPT_KV_F64: {
		double d;
		if (t == CKPT_KV_F32) {
			float x;
			uint32_t v = (uint32_t)u;
			memcpy(&x, &v, 4);
			d = x;
		} else {
			memcpy(&d, &u, 8);
		}
		if (json)
			jout_double(f, d);
		else
			fprintf(f, "%.9g", d);
		break;
	}
	default: fputs(json ? "null" : "?", f);
	}
}

/* A string value for a terminal: at most 60 bytes shown. */
static void text_string(const unsigned char *s, uint64_t n)
{
	char buf[64];
	size_t k = n > 60 ? 60 : (size_t)n;
	memcpy(buf, s, k);
	buf[k] = '\0';
	if (n > 60)
		printf("\"%s...\" (%" PRIu64 " bytes)", cli_vis(buf), n);
	else if (strlen(buf) != k)
		printf("(a string of %" PRIu64 " bytes holding NUL)", n);
	else
		printf("\"%s\"", cli_vis(buf));
}

void cli_kv_print_text(const ckpt_kv *kv)
{
	if (kv->type == CKPT_KV_ARRAY) {
		cli_kv_elems it;
		const unsigned char *b;
		uint64_t n;
		printf("array[%s] of %" PRIu64, cli_kv_type_name(kv->elem_type), kv->count);
		cli_kv_elem_init(&it, kv);
		if (cli_kv_elem_next(&it, &b, &n)) {
			printf(" (first: ");
			if (kv->elem_type == CKPT_KV_STRING)
				text_string(b, n);
			else
				cli_kv_number(stdout, kv->elem_type, b, 0);
			printf(")");
		}
	} else if (kv->type == CKPT_KV_STRING) {
		text_string(kv->data, kv->nbytes);
	} else {
		cli_kv_number(stdout, kv->type, kv->data, 0);
	}
}

/*
 * {"key": ..., "type": ..., "value": ...}; an array as {"key", "type":
 * "array", "elem", "count", "values": [the first max_array elements, all
 * when 0], "truncated": whether some were left out}.
 */
static void kv_json(jw *w, const ckpt_kv *kv, uint64_t max_array)
{
	jw_object_begin(w);
	jw_key(w, "key");
	jw_string(w, kv->key);
	jw_key(w, "type");
	jw_string(w, cli_kv_type_name(kv->type));
	if (kv->type == CKPT_KV_ARRAY) {
		cli_kv_elems it;
		const unsigned char *b;
		uint64_t n, shown = 0;
		jw_key(w, "elem");
		jw_string(w, cli_kv_type_name(kv->elem_type));
		jw_key(w, "count");
		jw_uint(w, kv->count);
		jw_key(w, "values");
		jw_array_begin(w);
		cli_kv_elem_init(&it, kv);
		for (; (!max_array || shown < max_array) && cli_kv_elem_next(&it, &b, &n); shown++) {
			if (kv->elem_type == CKPT_KV_STRING)
				jw_string_n(w, (const char *)b, (size_t)n);
			else
				cli_kv_number(jw_value(w), kv->elem_type, b, 1);
		}
		jw_array_end(w);
		jw_key(w, "truncated");
		jw_bool(w, shown < kv->count);
	} else if (kv->type == CKPT_KV_STRING) {
		jw_key(w, "value");
		jw_string_n(w, (const char *)kv->data, (size_t)kv->nbytes);
	} else {
		jw_key(w, "value");
		cli_kv_number(jw_value(w), kv->type, kv->data, 1);
	}
	jw_object_end(w);
}

void cli_kv_print_json(jw *w, const ckpt_reader *r, uint64_t max_array)
{
	size_t i, n = ckpt_reader_num_kv(r);
	ckpt_kv kv;
	const char *v = ckpt_reader_meta(r, "gguf.version"), *a = ckpt_reader_meta(r, "gguf.alignment");

	if (strcmp(ckpt_reader_format(r), "gguf") == 0) {
		jw_key(w, "gguf");
		jw_object_begin(w);
		jw_key(w, "version");
		jw_raw(w, v ? v : "null");
		jw_key(w, "alignment");
		jw_raw(w, a ? a : "null");
		jw_key(w, "kv");
		jw_array_begin(w);
		for (i = 0; i < n && ckpt_reader_kv(&kv, r, i) == CKPT_OK; i++)
			kv_json(w, &kv, max_array);
		jw_array_end(w);
		jw_object_end(w);
	} else if (strcmp(ckpt_reader_format(r), "safetensors") == 0) {
		jw_key(w, "safetensors");
		jw_object_begin(w);
		jw_key(w, "metadata");
		if (!ckpt_reader_meta(r, "safetensors.metadata") && !n) {
			jw_null(w);
		} else {
			jw_object_begin(w);
			for (i = 0; i < n && ckpt_reader_kv(&kv, r, i) == CKPT_OK; i++) {
				jw_key(w, kv.key);
				jw_string_n(w, (const char *)kv.data, (size_t)kv.nbytes);
			}
			jw_object_end(w);
		}
		jw_object_end(w);
	}
}
