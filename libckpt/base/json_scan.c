/* A pull tokenizer for in-memory JSON (json_scan.h). */
#include <string.h>
#include "internal.h"
#include "json_scan.h"
#include "kv_store.h"

static int fail(ckpt__jscan *j, const char *why)
{
	j->err = why;
	j->err_at = j->pos;
	return -1;
}

int ckpt__js_peek(ckpt__jscan *j)
{
	while (j->pos < j->n && (j->s[j->pos] == ' ' || j->s[j->pos] == '\t' || j->s[j->pos] == '\n' ||
	       j->s[j->pos] == '\r'))
		j->pos++;
	return j->pos < j->n ? (unsigned char)j->s[j->pos] : -1;
}

int ckpt__js_expect(ckpt__jscan *j, char c)
{
	if (ckpt__js_peek(j) != (unsigned char)c) {
		static const char *const what[] = { "'{' expected", "'}' expected", "':' expected", "'[' expected",
			"']' expected", "',' expected", "unexpected token" };
		const char *w = c == '{' ? what[0] : c == '}' ? what[1] : c == ':' ? what[2] : c == '[' ? what[3] :
			c == ']' ? what[4] : c == ',' ? what[5] : what[6];
		return fail(j, w);
	}
	j->pos++;
	return 0;
}

static int put(ckpt__jscan *j, const char *p, size_t n)
{
	if (j->cap - j->len <= n) {
		size_t c = j->cap ? j->cap : 256;
		char *q;
		while (c - j->len <= n)
			c *= 2;
		if (!(q = ckpt__realloc(j->str, c)))
			return fail(j, "out of memory");
		j->str = q;
		j->cap = c;
	}
	memcpy(j->str + j->len, p, n);
	j->len += n;
	j->str[j->len] = '\0';
	return 0;
}

static int hex4(ckpt__jscan *j, uint32_t *v)
{
	*v = 0;
	if (j->n - j->pos < 4)
		return fail(j, "invalid escape");
	for (int k = 0; k < 4; k++) {
		char c = j->s[j->pos++];
		*v <<= 4;
		if (c >= '0' && c <= '9')
			*v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			*v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			*v |= (uint32_t)(c - 'A' + 10);
		else
			return fail(j, "invalid escape");
	}
	return 0;
}

static int put_cp(ckpt__jscan *j, uint32_t cp)
{
	char b[4];
	size_t n;
	if (cp < 0x80) {
		b[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		b[0] = (char)(0xc0 | cp >> 6);
		b[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		b[0] = (char)(0xe0 | cp >> 12);
		b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		b[0] = (char)(0xf0 | cp >> 18);
		b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	return put(j, b, n);
}

int ckpt__js_string(ckpt__jscan *j)
{
	size_t run;
	int nul = 0;
	if (ckpt__js_expect(j, '"') < 0)
		return fail(j, "string expected");
	j->len = 0;
	if (put(j, "", 0) < 0)
		return -1;
	run = j->pos;
	for (;;) {
		unsigned char c;
		if (j->pos >= j->n)
			return fail(j, "premature end of input in a string");
		c = (unsigned char)j->s[j->pos];
		if (c == '"' || c == '\\') {
			size_t ok = ckpt__utf8_prefix(j->s + run, j->pos - run);
			if (ok != j->pos - run) {
				j->pos = run + ok;
				return fail(j, "invalid UTF-8 in a string");
			}
			if (put(j, j->s + run, j->pos - run) < 0)
				return -1;
			j->pos++;
			if (c == '"')
				return nul ? fail(j, "NUL byte (\\u0000) in a string") : 0;
			if (j->pos >= j->n)
				return fail(j, "invalid escape");
			c = (unsigned char)j->s[j->pos++];
			switch (c) {
			case '"': case '\\': case '/': if (put(j, (const char *)&c, 1) < 0) return -1; break;
			case 'b': if (put(j, "\b", 1) < 0) return -1; break;
			case 'f': if (put(j, "\f", 1) < 0) return -1; break;
			case 'n': if (put(j, "\n", 1) < 0) return -1; break;
			case 'r': if (put(j, "\r", 1) < 0) return -1; break;
			case 't': if (put(j, "\t", 1) < 0) return -1; break;
			case 'u': {
				uint32_t cp, lo;
				if (hex4(j, &cp) < 0)
					return -1;
				if (cp >= 0xdc00 && cp <= 0xdfff)
					return fail(j, "invalid Unicode '\\u' escape (lone low surrogate)");
				if (cp >= 0xd800 && cp <= 0xdbff) {
					if (j->n - j->pos < 2 || j->s[j->pos] != '\\' || j->s[j->pos + 1] != 'u')
						return fail(j, "invalid Unicode '\\u' escape (lone high surrogate)");
					j->pos += 2;
					if (hex4(j, &lo) < 0)
						return -1;
					if (lo < 0xdc00 || lo > 0xdfff)
						return fail(j, "invalid Unicode '\\u' escape (bad low surrogate)");
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				}
				nul |= cp == 0; /* refused at the string's end, where jansson refuses it */
				if (put_cp(j, cp) < 0)
					return -1;
				break;
			}
			default:
				return fail(j, "invalid escape");
			}
			run = j->pos;
			continue;
		}
		if (c < 0x20)
			return fail(j, "control character in a string");
		j->pos++;
	}
}

int ckpt__js_number(ckpt__jscan *j, uint64_t *v)
{
	size_t start;
	int neg = 0, real = 0, big = 0, digits = 0;
	uint64_t u = 0;
	if (ckpt__js_peek(j) < 0)
		return fail(j, "number expected");
	start = j->pos;
	if (j->s[j->pos] == '-') {
		neg = 1;
		j->pos++;
	}
	if (j->pos < j->n && j->s[j->pos] == '0') {
		j->pos++;
		digits = 1;
	} else {
		while (j->pos < j->n && j->s[j->pos] >= '0' && j->s[j->pos] <= '9') {
			unsigned d = (unsigned)(j->s[j->pos++] - '0');
			if (u > (UINT64_MAX - d) / 10)
				big = 1;
			else
				u = u * 10 + d;
			digits++;
		}
	}
	if (!digits) {
		j->pos = start;
		return fail(j, "invalid token");
	}
	if (j->pos < j->n && j->s[j->pos] == '.') {
		j->pos++;
		if (j->pos >= j->n || j->s[j->pos] < '0' || j->s[j->pos] > '9')
			return fail(j, "invalid real number");
		while (j->pos < j->n && j->s[j->pos] >= '0' && j->s[j->pos] <= '9')
			j->pos++;
		real = 1;
	}
	if (j->pos < j->n && (j->s[j->pos] == 'e' || j->s[j->pos] == 'E')) {
		j->pos++;
		if (j->pos < j->n && (j->s[j->pos] == '+' || j->s[j->pos] == '-'))
			j->pos++;
		if (j->pos >= j->n || j->s[j->pos] < '0' || j->s[j->pos] > '9')
			return fail(j, "invalid real number");
		while (j->pos < j->n && j->s[j->pos] >= '0' && j->s[j->pos] <= '9')
			j->pos++;
		real = 1;
	}
	if (!real && (big || (neg ? u > (uint64_t)INT64_MAX + 1 : u > (uint64_t)INT64_MAX))) {
		j->pos = start; /* jansson refuses an integer outside int64 */
		return fail(j, "too big integer");
	}
	if (real || (neg && u))
		return CKPT__JS_OTHER_NUMBER;
	*v = u;
	return CKPT__JS_UINT;
}

static int literal(ckpt__jscan *j, const char *w)
{
	size_t n = strlen(w);
	if (j->n - j->pos < n || memcmp(j->s + j->pos, w, n) != 0)
		return fail(j, "invalid token");
	j->pos += n;
	return 0;
}

int ckpt__js_next(ckpt__jscan *j, char close)
{
	int c = ckpt__js_peek(j);
	if (c == ',') {
		j->pos++;
		return 1;
	}
	if (c == (unsigned char)close) {
		j->pos++;
		return 0;
	}
	return fail(j, close == '}' ? "'}' or ',' expected" : "']' or ',' expected");
}

int ckpt__js_skip(ckpt__jscan *j, int max_depth)
{
	uint64_t v;
	int c = ckpt__js_peek(j), more;
	switch (c) {
	case '"':
		return ckpt__js_string(j);
	case 't':
		return literal(j, "true");
	case 'f':
		return literal(j, "false");
	case 'n':
		return literal(j, "null");
	case '{':
	case '[':
		if (max_depth <= 0)
			return fail(j, "nested too deep");
		j->pos++;
		if (ckpt__js_peek(j) == (c == '{' ? '}' : ']')) {
			j->pos++;
			return 0;
		}
		do {
			if (c == '{' && (ckpt__js_string(j) < 0 || ckpt__js_expect(j, ':') < 0))
				return -1;
			if (ckpt__js_skip(j, max_depth - 1) < 0)
				return -1;
		} while ((more = ckpt__js_next(j, c == '{' ? '}' : ']')) == 1);
		return more;
	default:
		return ckpt__js_number(j, &v) < 0 ? -1 : 0;
	}
}

void ckpt__js_free(ckpt__jscan *j)
{
	ckpt__free(j->str);
	j->str = NULL;
	j->len = j->cap = 0;
}
