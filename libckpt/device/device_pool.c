/*
 * Small device values share device buffers (memory_internal.h:
 * ckpt__mem_value_alloc). A model has hundreds of scalars, biases and norm
 * scales; one cudaMalloc each costs a driver call and rounds every value up
 * to the allocator's granularity. ggml places tensors inside a few large
 * buffers; here a value of at most POOL_MAX bytes takes a slot of a 1 MiB
 * chunk of its size class (a power of two from POOL_MIN), so a 383-variable
 * model makes a handful of device allocations per replica instead of 383.
 *
 * Slots are at offsets that are multiples of their class size from a chunk
 * that device_alloc aligned, so every slot keeps the provider's alignment
 * (POOL_MIN is at least caps.alignment and 256 bytes, cudaMalloc's). A
 * chunk goes back to the provider when its last slot is freed, so a process
 * that frees every variable holds no device memory. Only for providers the
 * CPU cannot address: host memory gains nothing from it.
 */
#include <pthread.h>
#include <string.h>
#include "device/memory_internal.h"

#define POOL_MIN 256u                 /* smallest slot: cudaMalloc's alignment */
#define POOL_MAX (64u * 1024)         /* larger values get their own buffer */
#define POOL_CHUNK (1024u * 1024)     /* one device_alloc per this many bytes of slots */
#define POOL_SLOTS_MAX (POOL_CHUNK / POOL_MIN)

typedef struct pool_chunk {
	char *base;                   /* device address: offsets only, never dereferenced */
	int replica;
	size_t slot;                  /* its size class */
	unsigned used;                /* slots taken */
	uint64_t bits[POOL_SLOTS_MAX / 64];
} pool_chunk;

struct ckpt__pool {
	pthread_mutex_t lock;         /* variables may be made from several replica threads at once */
	size_t min;                   /* smallest slot for this provider */
	pool_chunk **chunks;
	size_t n, cap;
};

int ckpt__pool_new(ckpt__pool **out, const ckpt_memory_caps *caps)
{
	*out = NULL;
	size_t min = POOL_MIN;
	while (min < caps->alignment)
		min <<= 1;
	if (caps->host_addressable || min > POOL_MAX)
		return CKPT_OK; /* no pool: every value its own buffer */
	ckpt__pool *p = ckpt__calloc(1, sizeof(*p));
	if (!p)
		return CKPT_ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	p->min = min;
	*out = p;
	return CKPT_OK;
}

void ckpt__pool_free(ckpt__pool *p, ckpt__mem *m)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++) { /* only chunks of variables never freed (a caller's leak) */
		m->p.device_free(m->p.ctx, m->devices[p->chunks[i]->replica], p->chunks[i]->base, POOL_CHUNK);
		ckpt__free(p->chunks[i]);
	}
	ckpt__free(p->chunks);
	pthread_mutex_destroy(&p->lock);
	ckpt__free(p);
}

static size_t slot_for(const ckpt__pool *p, size_t n)
{
	size_t s = p->min;
	while (s < n)
		s <<= 1;
	return s;
}

/* The first free slot of c, taken; -1 when it is full. */
static long take_slot(pool_chunk *c)
{
	unsigned nslots = (unsigned)(POOL_CHUNK / c->slot);
	if (c->used == nslots)
		return -1;
	for (unsigned w = 0; w * 64 < nslots; w++) {
		if (c->bits[w] == UINT64_MAX)
			continue;
		unsigned b = (unsigned)__builtin_ctzll(~c->bits[w]);
		if (w * 64 + b >= nslots)
			break;
		c->bits[w] |= 1ull << b;
		c->used++;
		return (long)(w * 64 + b);
	}
	return -1;
}

/* A new chunk of class `slot` for replica r, appended to the pool; the provider's status on failure. */
static int add_chunk(pool_chunk **out, ckpt__pool *p, ckpt__mem *m, int r, size_t slot)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 8;
		pool_chunk **c = ckpt__realloc(p->chunks, cap * sizeof(*c));
		if (!c)
			return CKPT_ENOMEM;
		p->chunks = c;
		p->cap = cap;
	}
	pool_chunk *c = ckpt__calloc(1, sizeof(*c));
	if (!c)
		return CKPT_ENOMEM;
	void *base = NULL;
	int rc = m->p.device_alloc(m->p.ctx, &base, m->devices[r], POOL_CHUNK);
	if (rc < 0 || !base) {
		ckpt__free(c);
		return rc < 0 ? rc : CKPT_ENOMEM;
	}
	c->base = base;
	c->replica = r;
	c->slot = slot;
	p->chunks[p->n++] = c;
	*out = c;
	return CKPT_OK;
}

int ckpt__pool_alloc(ckpt__pool *p, ckpt__mem *m, int r, void **out, size_t n)
{
	*out = NULL;
	size_t slot = slot_for(p, n);
	pthread_mutex_lock(&p->lock);
	long k = -1;
	pool_chunk *c = NULL;
	for (size_t i = 0; i < p->n && k < 0; i++) {
		c = p->chunks[i];
		if (c->replica == r && c->slot == slot)
			k = take_slot(c);
	}
	int rc = CKPT_OK;
	if (k < 0) {
		rc = add_chunk(&c, p, m, r, slot);
		if (rc == CKPT_OK)
			k = take_slot(c);
	}
	if (rc == CKPT_OK)
		*out = c->base + (size_t)k * slot;
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int ckpt__pool_takes(const ckpt__pool *p, size_t n)
{
	return p && n > 0 && n <= POOL_MAX;
}

void ckpt__pool_release(ckpt__pool *p, ckpt__mem *m, int r, void *ptr)
{
	char *a = ptr;
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->n; i++) {
		pool_chunk *c = p->chunks[i];
		if (c->replica != r || a < c->base || a >= c->base + POOL_CHUNK)
			continue;
		size_t k = (size_t)(a - c->base) / c->slot;
		c->bits[k / 64] &= ~(1ull << (k % 64));
		if (--c->used == 0) { /* the last slot: the chunk goes back */
			m->p.device_free(m->p.ctx, m->devices[r], c->base, POOL_CHUNK);
			ckpt__free(c);
			p->chunks[i] = p->chunks[--p->n];
		}
		break;
	}
	pthread_mutex_unlock(&p->lock);
}
