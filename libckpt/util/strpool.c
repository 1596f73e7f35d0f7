/*
 * A pool of NUL-terminated strings (and small arrays: the dims of compact
 * shapes) freed together: the names of 10,000
 * tiny entries cost one allocation per block instead of one each (malloc
 * and free were a quarter of opening such a checkpoint). Blocks never move,
 * so the strings stay where they were put until the pool is freed.
 */
#include <string.h>
#include "../internal.h"

struct ckpt__strpool_block {
	struct ckpt__strpool_block *next;
	size_t used, cap;
	char data[];
};

#define STRPOOL_FIRST 4096
#define STRPOOL_MAX (1u << 20)

/* n bytes at an offset that is a multiple of align (a power of 2) in the current block, or a new one */
static char *pool_take(ckpt__strpool *p, size_t n, size_t align)
{
	struct ckpt__strpool_block *b = p->head;
	size_t at = b ? (b->used + align - 1) & ~(align - 1) : 0;
	if (!b || at > b->cap || b->cap - at < n) {
		size_t cap = p->next_cap ? p->next_cap : STRPOOL_FIRST;
		if (cap < n)
			cap = n;
		if (cap > SIZE_MAX - sizeof(*b)) {
			ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "pool allocation of %zu bytes", n);
			return NULL;
		}
		b = ckpt__malloc(sizeof(*b) + cap);
		if (!b)
			return NULL;
		b->next = p->head;
		b->used = 0;
		b->cap = cap;
		p->head = b;
		p->next_cap = cap < STRPOOL_MAX ? cap * 2 : cap;
		at = 0;
	}
	b->used = at + n;
	return b->data + at;
}

char *ckpt__strpool_dup(ckpt__strpool *p, const char *s, size_t n)
{
	if (n == SIZE_MAX) {
		ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "string of %zu bytes", n);
		return NULL;
	}
	char *d = pool_take(p, n + 1, 1);
	if (!d)
		return NULL;
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

void *ckpt__strpool_alloc(ckpt__strpool *p, size_t n)
{
	/* blocks come from malloc and data follows three words: 8-aligned offsets are 8-aligned addresses */
	return pool_take(p, n, 8);
}

void ckpt__strpool_free(ckpt__strpool *p)
{
	for (struct ckpt__strpool_block *b = p->head, *nx; b; b = nx) {
		nx = b->next;
		ckpt__free(b);
	}
	p->head = NULL;
	p->next_cap = 0;
}
