/*
 * A small streaming JSON writer for `--json` modes: the writer, not the
 * caller, knows where commas and colons go, so a printer only says what
 * it writes (begin an object, a key, a value, end it). Separators follow
 * Python's json.dumps defaults (", " and ": "), and strings are written as
 * pure ASCII as json.dumps does (one escaping function, after curl's
 * jsonquoted in src/tool_writeout_json.c), so every command prints
 * byte-identical text for the same input and scripts can compare output
 * as text.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

/* Length of the valid UTF-8 sequence at s (n bytes left) and its code point; 0 when invalid. */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
	size_t len, i;
	uint32_t c;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	} else if ((s[0] & 0xe0) == 0xc0) {
		len = 2;
		c = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3;
		c = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		len = 4;
		c = s[0] & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	/* reject overlong forms, surrogates and values above U+10FFFF */
	if ((len == 2 && c < 0x80) || (len == 3 && c < 0x800) || (len == 4 && c < 0x10000) ||
	    (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
		return 0;
	*cp = c;
	return len;
}

static void jout_string(FILE *f, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;

	fputc('"', f);
	while (i < n) {
		uint32_t cp;
		size_t len = utf8_decode(s + i, n - i, &cp);

		if (len == 0) {
			/* not UTF-8: Python's surrogateescape spelling keeps the byte recoverable */
			fprintf(f, "\\u%04x", 0xdc00u | s[i]);
			i++;
			continue;
		}
		i += len;
		switch (cp) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\b': fputs("\\b", f); break;
		case '\f': fputs("\\f", f); break;
		case '\n': fputs("\\n", f); break;
		case '\r': fputs("\\r", f); break;
		case '\t': fputs("\\t", f); break;
		default:
			if (cp < 0x20 || (cp >= 0x7f && cp < 0x10000)) {
				fprintf(f, "\\u%04x", (unsigned)cp);
			} else if (cp >= 0x10000) {
				uint32_t v = cp - 0x10000;
				fprintf(f, "\\u%04x\\u%04x", (unsigned)(0xd800 + (v >> 10)), (unsigned)(0xdc00 + (v & 0x3ff)));
			} else {
				fputc((int)cp, f);
			}
		}
	}
	fputc('"', f);
}

static void jout_cstring(FILE *f, const char *s)
{
	if (!s)
		fputs("null", f);
	else
		jout_string(f, s, strlen(s));
}

static void jout_shape(FILE *f, const ckpt_shape *s)
{
	int i;

	fputc('[', f);
	for (i = 0; i < s->rank; i++)
		fprintf(f, "%s%" PRId64, i ? ", " : "", s->dims[i]);
	fputc(']', f);
}

void jout_double(FILE *f, double v)
{
	char buf[40];

	if (!isfinite(v)) {
		fputs("null", f);
		return;
	}
	/* shortest of %.15g / %.17g that reads back exactly */
	snprintf(buf, sizeof(buf), "%.15g", v);
	if (strtod(buf, NULL) != v)
		snprintf(buf, sizeof(buf), "%.17g", v);
	fputs(buf, f);
}

static void jout_crc32(FILE *f, uint32_t crc)
{
	fprintf(f, "\"0x%08" PRIx32 "\"", crc);
}

void jw_init(jw *w, FILE *f)
{
	memset(w, 0, sizeof(*w));
	w->f = f;
}

/* Before any value: the separator from the previous sibling, unless a key just came. */
static void before_value(jw *w)
{
	if (w->after_key) {
		w->after_key = 0;
		return;
	}
	if (w->depth > 0 && w->depth <= JW_MAX_DEPTH && w->count[w->depth - 1]++ > 0)
		fputs(", ", w->f);
}

static void open_container(jw *w, int c)
{
	before_value(w);
	fputc(c, w->f);
	if (w->depth < JW_MAX_DEPTH)
		w->count[w->depth] = 0;
	w->depth++;
}

static void close_container(jw *w, int c)
{
	if (w->depth > 0)
		w->depth--;
	fputc(c, w->f);
}

void jw_object_begin(jw *w) { open_container(w, '{'); }
void jw_object_end(jw *w) { close_container(w, '}'); }
void jw_array_begin(jw *w) { open_container(w, '['); }
void jw_array_end(jw *w) { close_container(w, ']'); }

void jw_key(jw *w, const char *key)
{
	before_value(w);
	jout_cstring(w->f, key);
	fputs(": ", w->f);
	w->after_key = 1;
}

void jw_string(jw *w, const char *s)
{
	before_value(w);
	jout_cstring(w->f, s);
}

void jw_string_n(jw *w, const char *s, size_t n)
{
	before_value(w);
	jout_string(w->f, s, n);
}

void jw_int(jw *w, int64_t v)
{
	before_value(w);
	fprintf(w->f, "%" PRId64, v);
}

void jw_uint(jw *w, uint64_t v)
{
	before_value(w);
	fprintf(w->f, "%" PRIu64, v);
}

void jw_double(jw *w, double v)
{
	before_value(w);
	jout_double(w->f, v);
}

void jw_bool(jw *w, int v)
{
	before_value(w);
	fputs(v ? "true" : "false", w->f);
}

void jw_null(jw *w)
{
	before_value(w);
	fputs("null", w->f);
}

void jw_shape(jw *w, const ckpt_shape *s)
{
	before_value(w);
	jout_shape(w->f, s);
}

void jw_crc32(jw *w, uint32_t crc)
{
	before_value(w);
	jout_crc32(w->f, crc);
}

void jw_raw(jw *w, const char *json)
{
	before_value(w);
	fputs(json, w->f);
}

FILE *jw_value(jw *w)
{
	before_value(w);
	return w->f;
}

void jw_end_line(jw *w)
{
	fputc('\n', w->f);
}
