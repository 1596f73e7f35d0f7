/*
 * A set of names for duplicate detection while a header is parsed: 8 bytes a
 * slot (a 32-bit hash and a 32-bit id), the names themselves stay where the
 * caller keeps them and are reached through its callback. Far smaller than
 * a JSON object of the names (about 100 bytes each), which is what made
 * duplicate checks cost several times the header.
 */
#ifndef CKPT_NAME_SET_H
#define CKPT_NAME_SET_H

#include <stddef.h>
#include <stdint.h>

/** The name of `id` (its bytes and length) from the caller's storage. */
typedef const char *(*ckpt__name_of)(const void *ctx, uint32_t id, size_t *len);

typedef struct ckpt__name_set {
	uint64_t *slot;      /* hash << 32 | (id + 1); 0 = empty */
	size_t cap, n;       /* cap a power of 2, at most 3/4 full */
	ckpt__name_of name_of;
	const void *ctx;
} ckpt__name_set;

/** An empty set whose ids name_of resolves (nothing allocated until the first add). */
void ckpt__name_set_init(ckpt__name_set *s, ckpt__name_of name_of, const void *ctx);
/**
 * Add `id`, named name[0..len): 0 when added, 1 when an equal name is
 * already there (*dup its id), CKPT_ENOMEM / CKPT_ELIMIT (error set).
 */
int ckpt__name_set_add(ckpt__name_set *s, const char *name, size_t len, uint32_t id, uint32_t *dup);
void ckpt__name_set_free(ckpt__name_set *s);

#endif
