/*
 * The JSON of a kv store (kv_store.h), written straight into one buffer:
 * no tree, so rendering costs the output and nothing else. The text is what
 * jansson's json_dumps(JSON_COMPACT) gave for the same values, which the
 * writers and scripts already read.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "internal.h"
#include "kv_store.h"

typedef struct out {
	char *p;
	size_t len, cap;
	int oom;
} out;

static void put(out *o, const char *s, size_t n)
{
	if (o->oom)
		return;
	if (n > o->cap - o->len) {
		size_t c = o->cap ? o->cap : 4096;
		char *q;
		while (c - o->len < n)
			c *= 2;
		if (!(q = ckpt__realloc(o->p, c))) {
			o->oom = 1;
			return;
		}
		o->p = q;
		o->cap = c;
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
}

static void puts_(out *o, const char *s)
{
	put(o, s, strlen(s));
}

/* A JSON string, escaped as jansson escapes (control characters as \uXXXX). */
static void put_str(out *o, const unsigned char *s, size_t n)
{
	size_t run = 0;
	put(o, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		char esc[8];
		unsigned char c = s[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		put(o, (const char *)s + run, i - run);
		run = i + 1;
		switch (c) {
		case '"': puts_(o, "\\\""); break;
		case '\\': puts_(o, "\\\\"); break;
		case '\b': puts_(o, "\\b"); break;
		case '\f': puts_(o, "\\f"); break;
		case '\n': puts_(o, "\\n"); break;
		case '\r': puts_(o, "\\r"); break;
		case '\t': puts_(o, "\\t"); break;
		default:
			snprintf(esc, sizeof(esc), "\\u%04X", c);
			puts_(o, esc);
		}
	}
	put(o, (const char *)s + run, n - run);
	put(o, "\"", 1);
}

static void put_hex(out *o, const unsigned char *b, size_t n)
{
	static const char d[] = "0123456789abcdef";
	char buf[256];
	size_t k = 0;
	put(o, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		buf[k++] = d[b[i] >> 4];
		buf[k++] = d[b[i] & 15];
		if (k == sizeof(buf)) {
			put(o, buf, k);
			k = 0;
		}
	}
	put(o, buf, k);
	put(o, "\"", 1);
}

/* A string value: a JSON string when UTF-8, else {"hex": ...}. */
static void put_text(out *o, const unsigned char *s, size_t n)
{
	if (ckpt__utf8_valid((const char *)s, n)) {
		put_str(o, s, n);
		return;
	}
	puts_(o, "{\"hex\":");
	put_hex(o, s, n);
	puts_(o, "}");
}

/* A double as jansson prints it: %.17g, a ".0" when it would read as an integer, no '+' or leading 0 in exponents. */
static void put_real(out *o, double v)
{
	char b[40], t[40];
	size_t k = 0;
	if (!isfinite(v)) {
		puts_(o, "null");
		return;
	}
	snprintf(b, sizeof(b), "%.17g", v);
	if (!strpbrk(b, ".eE") )
		strcat(b, ".0");
	for (const char *p = b; *p; p++) {
		t[k++] = *p;
		if (*p == 'e') {
			if (p[1] == '+')
				p++;
			else if (p[1] == '-')
				t[k++] = *++p;
			while (p[1] == '0' && p[2])
				p++;
		}
	}
	t[k] = '\0';
	puts_(o, t);
}

static uint64_t le(const unsigned char *b, unsigned n)
{
	uint64_t u = 0;
	for (int i = (int)n - 1; i >= 0; i--)
		u = u << 8 | b[i];
	return u;
}

static void put_number(out *o, ckpt_kv_type t, const unsigned char *b)
{
	char buf[32];
	uint64_t u = le(b, ckpt__kv_type_size(t));
	switch (t) {
	case CKPT_KV_U8: case CKPT_KV_U16: case CKPT_KV_U32: snprintf(buf, sizeof(buf), "%llu", (unsigned long long)u); break;
	case CKPT_KV_U64: snprintf(buf, sizeof(buf), "%lld", (long long)u); break; /* jansson's json_int_t */
	case CKPT_KV_I8: snprintf(buf, sizeof(buf), "%d", (int8_t)u); break;
	case CKPT_KV_I16: snprintf(buf, sizeof(buf), "%d", (int16_t)u); break;
	case CKPT_KV_I32: snprintf(buf, sizeof(buf), "%d", (int32_t)u); break;
	case CKPT_KV_I64: snprintf(buf, sizeof(buf), "%lld", (long long)u); break;
	case CKPT_KV_BOOL: snprintf(buf, sizeof(buf), "%s", u ? "true" : "false"); break;
	case CKPT_KV_F32: { float f; uint32_t v = (uint32_t)u; memcpy(&f, &v, 4); put_real(o, f); return; }
	case CKPT_KV_F64: { double f; memcpy(&f, &u, 8); put_real(o, f); return; }
	default: snprintf(buf, sizeof(buf), "null");
	}
	puts_(o, buf);
}

static void gguf_pair(out *o, const ckpt_kv *kv)
{
	puts_(o, "{\"key\":");
	put_str(o, (const unsigned char *)kv->key, strlen(kv->key));
	puts_(o, ",\"type\":\"");
	puts_(o, ckpt__kv_type_name(kv->type));
	puts_(o, "\"");
	if (kv->type == CKPT_KV_STRING) {
		puts_(o, ",\"value\":");
		put_text(o, kv->data, (size_t)kv->nbytes);
	} else if (kv->type == CKPT_KV_ARRAY && kv->elem_type != CKPT_KV_STRING) {
		char buf[48];
		puts_(o, ",\"elem\":\"");
		puts_(o, ckpt__kv_type_name(kv->elem_type));
		snprintf(buf, sizeof(buf), "\",\"count\":%llu,\"hex\":", (unsigned long long)kv->count);
		puts_(o, buf);
		put_hex(o, kv->data, (size_t)kv->nbytes);
	} else if (kv->type == CKPT_KV_ARRAY) {
		const unsigned char *p = kv->data;
		puts_(o, ",\"elem\":\"string\",\"value\":[");
		for (uint64_t e = 0; e < kv->count; e++) {
			uint64_t n = le(p, 8);
			if (e)
				put(o, ",", 1);
			put_text(o, p + 8, (size_t)n);
			p += 8 + n;
		}
		puts_(o, "]");
	} else {
		puts_(o, ",\"value\":");
		put_number(o, kv->type, kv->data);
		if (kv->type == CKPT_KV_F32 || kv->type == CKPT_KV_F64) {
			puts_(o, ",\"hex\":");
			put_hex(o, kv->data, ckpt__kv_type_size(kv->type));
		}
	}
	puts_(o, "}");
}

char *ckpt__kv_render_json(const ckpt__kv_store *s)
{
	out o = { 0 };
	puts_(&o, s->style == CKPT__KV_JSON_GGUF ? "[" : "{");
	for (size_t i = 0; i < s->n; i++) {
		ckpt_kv kv;
		ckpt__kv_get(s, i, &kv);
		if (i)
			put(&o, ",", 1);
		if (s->style == CKPT__KV_JSON_GGUF) {
			gguf_pair(&o, &kv);
		} else {
			put_str(&o, (const unsigned char *)kv.key, strlen(kv.key));
			put(&o, ":", 1);
			put_str(&o, kv.data, (size_t)kv.nbytes);
		}
	}
	puts_(&o, s->style == CKPT__KV_JSON_GGUF ? "]" : "}");
	put(&o, "", 1);
	if (o.oom) {
		ckpt__free(o.p);
		ckpt__fail(CKPT_ENOMEM, NULL, s->json_key, -1, "rendering %s as JSON", s->json_key);
		return NULL;
	}
	return o.p;
}
