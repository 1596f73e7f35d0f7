/* Allocation through the replaceable allocator hook (fault-injection tests). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

static void *std_malloc(size_t n, void *ctx) { (void)ctx; return malloc(n); }
static void *std_realloc(void *p, size_t n, void *ctx) { (void)ctx; return realloc(p, n); }
static void std_free(void *p, void *ctx) { (void)ctx; free(p); }

static ckpt_allocator current = { std_malloc, std_realloc, std_free, NULL };

void ckpt_set_allocator(const ckpt_allocator *a)
{
	if (a && a->malloc_fn && a->realloc_fn && a->free_fn)
		current = *a;
	else
		current = (ckpt_allocator){ std_malloc, std_realloc, std_free, NULL };
}

void *ckpt_malloc(size_t n)
{
	void *p = current.malloc_fn(n ? n : 1, current.ctx);
	if (!p)
		ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "out of memory (allocating %zu bytes)", n);
	return p;
}

void *ckpt_calloc(size_t count, size_t size)
{
	size_t n;
	if (__builtin_mul_overflow(count, size, &n)) {
		ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "allocation of %zu x %zu bytes overflows", count, size);
		return NULL;
	}
	void *p = ckpt__malloc(n);
	if (p)
		memset(p, 0, n);
	return p;
}

void *ckpt_realloc(void *p, size_t n)
{
	void *q = current.realloc_fn(p, n ? n : 1, current.ctx);
	if (!q)
		ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "out of memory (reallocating to %zu bytes)", n);
	return q;
}

void ckpt_free(void *p)
{
	if (p)
		current.free_fn(p, current.ctx);
}

char *ckpt__strndup(const char *s, size_t n)
{
	char *d = ckpt__malloc(n + 1);
	if (d) {
		memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

char *ckpt__strdup(const char *s)
{
	return s ? ckpt__strndup(s, strlen(s)) : NULL;
}

char *ckpt__asprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	char *s = ckpt__malloc((size_t)n + 1);
	if (!s)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

char *ckpt__path_dir(const char *path)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return ckpt__strdup(".");
	if (slash == path)
		return ckpt__strdup("/");
	return ckpt__strndup(path, (size_t)(slash - path));
}

char *ckpt__path_join(const char *a, const char *b)
{
	if (b[0] == '/' || a[0] == '\0')
		return ckpt__strdup(b);
	size_t la = strlen(a);
	return ckpt__asprintf("%s%s%s", a, (la && a[la - 1] == '/') ? "" : "/", b);
}
