/* The reader's index of entry names (ckpt__reader_lookup): below the reader and the sync rules that use it. */
#include <stdint.h>
#include <string.h>
#include "reader/format_registry.h"

static size_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return (size_t)h;
}

/*
 * A hash index of the entry names, built at open in one pass (restores look
 * up every entry; sorting 10,000 names took longer than decoding them).
 * Linear probing keeps equal names in entry order: a lookup finds the first.
 */
int ckpt__reader_build_name_index(ckpt_reader *r)
{
	size_t cap = 16;
	while (cap < r->nvars * 2)
		cap *= 2;
	size_t *slot = ckpt__calloc(cap, sizeof(*slot));
	if (!slot)
		return CKPT_ENOMEM;
	for (size_t i = 0; i < r->nvars; i++) {
		size_t h = name_hash(r->vars[i].name) & (cap - 1);
		while (slot[h])
			h = (h + 1) & (cap - 1);
		slot[h] = i + 1;
	}
	r->name_index = slot;
	r->name_cap = cap;
	return CKPT_OK;
}

int ckpt__reader_lookup(const ckpt_reader *r, const char *name, size_t *index)
{
	if (r->name_cap) {
		for (size_t h = name_hash(name) & (r->name_cap - 1); r->name_index[h]; h = (h + 1) & (r->name_cap - 1))
			if (strcmp(r->vars[r->name_index[h] - 1].name, name) == 0) {
				*index = r->name_index[h] - 1;
				return 1;
			}
		return 0;
	}
	for (size_t i = 0; i < r->nvars; i++)
		if (strcmp(r->vars[i].name, name) == 0) {
			*index = i;
			return 1;
		}
	return 0;
}
