/*
 * A pool of NUL-terminated strings freed together: the names of 10,000
 * tiny entries cost one allocation per block instead of one each (malloc
 * and free were a quarter of opening such a checkpoint). Blocks never move,
 * so the strings stay where they were put until the pool is freed.
 */
#include <string.h>
#include "internal.h"

struct ckpt__strpool_block {
	struct ckpt__strpool_block *next;
	size_t used, cap;
	char data[];
};

#define STRPOOL_FIRST 4096
#define STRPOOL_MAX (1u << 20)

char *ckpt__strpool_dup(ckpt__strpool *p, const char *s, size_t n)
{
	struct ckpt__strpool_block *b = p->head;
	if (!b || b->cap - b->used < n + 1) {
		size_t cap = p->next_cap ? p->next_cap : STRPOOL_FIRST;
		if (cap < n + 1)
			cap = n + 1;
		if (cap > SIZE_MAX - sizeof(*b)) {
			ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "string of %zu bytes", n);
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
	}
	char *d = b->data + b->used;
	memcpy(d, s, n);
	d[n] = '\0';
	b->used += n + 1;
	return d;
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
