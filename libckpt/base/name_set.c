/* Duplicate detection over names kept elsewhere (name_set.h). */
#include <string.h>
#include "internal.h"
#include "name_set.h"

void ckpt__name_set_init(ckpt__name_set *s, ckpt__name_of name_of, const void *ctx)
{
	memset(s, 0, sizeof(*s));
	s->name_of = name_of;
	s->ctx = ctx;
}

/* FNV-1a: names are short and this runs once per name */
static uint32_t name_hash(const char *p, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 16777619u;
	return h;
}

static void place(uint64_t *slot, size_t cap, uint64_t v)
{
	size_t i = (size_t)(v >> 32) & (cap - 1);
	while (slot[i])
		i = (i + 1) & (cap - 1);
	slot[i] = v;
}

static int grow(ckpt__name_set *s)
{
	size_t cap = s->cap ? s->cap * 2 : 64;
	uint64_t *slot;
	if (cap > ((size_t)1 << 33) || !(slot = ckpt__calloc(cap, sizeof(*slot))))
		return s->cap ? ckpt__fail(CKPT_ENOMEM, NULL, NULL, -1, "name set of %zu names", s->n) : CKPT_ENOMEM;
	for (size_t i = 0; i < s->cap; i++)
		if (s->slot[i])
			place(slot, cap, s->slot[i]);
	ckpt__free(s->slot);
	s->slot = slot;
	s->cap = cap;
	return CKPT_OK;
}

int ckpt__name_set_add(ckpt__name_set *s, const char *name, size_t len, uint32_t id, uint32_t *dup)
{
	uint32_t h = name_hash(name, len);
	size_t i;
	if (id == UINT32_MAX)
		return ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "more than %u names", UINT32_MAX - 1);
	if (4 * (s->n + 1) > 3 * s->cap) /* at most 3/4 full */
		CKPT_TRY(grow(s));
	for (i = h & (s->cap - 1); s->slot[i]; i = (i + 1) & (s->cap - 1)) {
		size_t ol;
		uint32_t other = (uint32_t)(s->slot[i] & 0xffffffffu) - 1;
		const char *on;
		if ((uint32_t)(s->slot[i] >> 32) != h)
			continue;
		on = s->name_of(s->ctx, other, &ol);
		if (ol == len && memcmp(on, name, len) == 0) {
			if (dup)
				*dup = other;
			return 1;
		}
	}
	s->slot[i] = (uint64_t)h << 32 | ((uint64_t)id + 1);
	s->n++;
	return 0;
}

void ckpt__name_set_free(ckpt__name_set *s)
{
	ckpt__free(s->slot);
	s->slot = NULL;
	s->cap = s->n = 0;
}
