/*
 * A pull tokenizer for JSON held in memory: the caller walks the grammar it
 * expects (a header's schema) and checks its limits as each token comes, so
 * nothing is built that the schema does not keep. Accepts what jansson's
 * json_loadb accepts without flags: RFC 8259 JSON, UTF-8, no \u0000, integers
 * within int64. Strings are decoded into one reused buffer.
 */
#ifndef CKPT_JSON_SCAN_H
#define CKPT_JSON_SCAN_H

#include <stddef.h>
#include <stdint.h>

typedef struct ckpt__jscan {
	const char *s;      /* the text */
	size_t n, pos;
	char *str;          /* the last string, decoded and NUL-terminated (may hold no NUL inside) */
	size_t len, cap;
	const char *err;    /* why the text is not JSON, at err_at */
	size_t err_at;
} ckpt__jscan;

/** Kinds of number. */
enum { CKPT__JS_UINT, CKPT__JS_OTHER_NUMBER };

/** The next character after whitespace (not consumed), -1 at the end. */
int ckpt__js_peek(ckpt__jscan *j);
/** Consume character c (after whitespace); -1 (err set) when another comes. */
int ckpt__js_expect(ckpt__jscan *j, char c);
/** A string into j->str / j->len; -1 when invalid (err set, or ENOMEM: err "out of memory"). */
int ckpt__js_string(ckpt__jscan *j);
/**
 * A number: CKPT__JS_UINT with *v when a non-negative integer within int64,
 * CKPT__JS_OTHER_NUMBER for any other valid number, -1 when invalid.
 */
int ckpt__js_number(ckpt__jscan *j, uint64_t *v);
/** Skip one value of any kind, nested at most max_depth deep; -1 when invalid or deeper. */
int ckpt__js_skip(ckpt__jscan *j, int max_depth);
/**
 * After a value in an object or array: 1 when a ',' follows (consumed), 0 at
 * `close` (consumed), -1 otherwise.
 */
int ckpt__js_next(ckpt__jscan *j, char close);
void ckpt__js_free(ckpt__jscan *j);

#endif
