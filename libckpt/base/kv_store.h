/*
 * Typed metadata key-values in compact form (GGUF's key-value pairs,
 * safetensors' __metadata__): one blob of records and one offset per pair,
 * about the bytes the file spent on them. JSON ("gguf.kv",
 * "safetensors.metadata") is rendered from it only when someone asks
 * (kv_json.c); ckpt_reader_kv() reads it in place.
 *
 * A record: the key, a NUL, u8 type (arrays: then u8 element type and u64
 * count, native order, unaligned), then the value as GGUF stores it
 * (ckpt_kv's `data`) up to the next record: 2 bytes more than the key and
 * value themselves for a scalar or string.
 */
#ifndef CKPT_KV_STORE_H
#define CKPT_KV_STORE_H

#include "ckpt/reader.h"
#include "name_set.h"

/** How the store is rendered as JSON. */
enum {
	CKPT__KV_JSON_GGUF,   /* [{"key", "type", "value" | "elem", "count", "hex"}, ...] (gguf_write.c reads it) */
	CKPT__KV_JSON_OBJECT  /* {"key": "string value", ...}: safetensors' __metadata__ */
};

typedef struct ckpt__kv_store {
	unsigned char *blob;
	size_t len, cap;
	uint64_t *rec;        /* offset of each record in blob */
	size_t n, rcap;
	ckpt__name_set names; /* while it is built: duplicate keys */
	int style;            /* CKPT__KV_JSON_* */
	char json_key[32];    /* the metadata key its JSON is rendered under ("gguf.kv") */
} ckpt__kv_store;

/** A fresh, empty store rendered under `json_key` in `style` (NULL on ENOMEM). */
ckpt__kv_store *ckpt__kv_new(const char *json_key, int style);
/**
 * Append a pair and return where its nbytes of value go (*data; valid until
 * the next append). 1 when `key` is already there (nothing appended; *dup
 * its index), 0 when appended, CKPT_ENOMEM / CKPT_ELIMIT (error set).
 */
int ckpt__kv_append(ckpt__kv_store *s, const char *key, size_t klen, ckpt_kv_type type, ckpt_kv_type elem,
	uint64_t count, uint64_t nbytes, unsigned char **data, uint32_t *dup);
/** Grow the last pair's value by n bytes; *data is where they go (valid until the next append or grow). */
int ckpt__kv_grow_last(ckpt__kv_store *s, uint64_t n, unsigned char **data);
/** Set the last pair's element type and count (an array once its header is read). */
void ckpt__kv_set_last(ckpt__kv_store *s, ckpt_kv_type elem, uint64_t count);
/** Done appending: the duplicate index is freed and the blob trimmed. */
void ckpt__kv_seal(ckpt__kv_store *s);
/** Pair i (i < s->n). */
void ckpt__kv_get(const ckpt__kv_store *s, size_t i, ckpt_kv *out);
void ckpt__kv_free(ckpt__kv_store *s);

/** Size in bytes of one element of a fixed-size type (0 for strings and arrays). */
unsigned ckpt__kv_type_size(ckpt_kv_type t);
/** "u8", ..., "f64" (NULL for an unknown type). */
const char *ckpt__kv_type_name(ckpt_kv_type t);
/** Whether s[0..n) is UTF-8 (no overlong forms or surrogates). */
int ckpt__utf8_valid(const char *s, size_t n);
/** Bytes of s[0..n) before its first invalid UTF-8 sequence (n when valid). */
size_t ckpt__utf8_prefix(const char *s, size_t n);
/** The store as JSON in its style: a fresh ckpt__malloc'ed string, NULL on ENOMEM (error set). */
char *ckpt__kv_render_json(const ckpt__kv_store *s);

#endif
