/*
 * A pointer -> int map by open addressing (linear probing, power-of-two
 * capacity, at most half full): the restore run's variables, an object's
 * latest slot per primary, the cycle check's visited set.
 */
#include <string.h>
#include "../internal.h"
#include "ptrmap.h"

static size_t ptr_hash(const void *p, size_t cap)
{
	uint64_t x = (uint64_t)(uintptr_t)p;
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return (size_t)(x & (cap - 1));
}

int ckpt__ptrmap_put(ckpt__ptrmap *m, const void *key, int val)
{
	if (m->cap) {
		/* updating an existing key never allocates */
		size_t h = ptr_hash(key, m->cap);
		while (m->keys[h]) {
			if (m->keys[h] == key) {
				m->vals[h] = val;
				return CKPT_OK;
			}
			h = (h + 1) & (m->cap - 1);
		}
	}
	if ((m->n + 1) * 2 > m->cap) {
		size_t nc = m->cap ? m->cap * 2 : 64;
		const void **nk = ckpt__calloc(nc, sizeof(*nk));
		int *nv = ckpt__calloc(nc, sizeof(*nv));
		if (!nk || !nv) {
			ckpt__free(nk);
			ckpt__free(nv);
			return CKPT_ENOMEM;
		}
		for (size_t i = 0; i < m->cap; i++) {
			if (!m->keys[i])
				continue;
			size_t h = ptr_hash(m->keys[i], nc);
			while (nk[h])
				h = (h + 1) & (nc - 1);
			nk[h] = m->keys[i];
			nv[h] = m->vals[i];
		}
		ckpt__free(m->keys);
		ckpt__free(m->vals);
		m->keys = nk;
		m->vals = nv;
		m->cap = nc;
	}
	size_t h = ptr_hash(key, m->cap);
	while (m->keys[h] && m->keys[h] != key)
		h = (h + 1) & (m->cap - 1);
	if (!m->keys[h])
		m->n++;
	m->keys[h] = key;
	m->vals[h] = val;
	return CKPT_OK;
}

int ckpt__ptrmap_get(const ckpt__ptrmap *m, const void *key)
{
	if (!m->cap)
		return -1;
	size_t h = ptr_hash(key, m->cap);
	while (m->keys[h]) {
		if (m->keys[h] == key)
			return m->vals[h];
		h = (h + 1) & (m->cap - 1);
	}
	return -1;
}

void ckpt__ptrmap_free(ckpt__ptrmap *m)
{
	ckpt__free(m->keys);
	ckpt__free(m->vals);
	memset(m, 0, sizeof(*m));
}
