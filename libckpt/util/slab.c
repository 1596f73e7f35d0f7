/*
 * Small allocations that live as long as a model (variables, their small
 * copies, tracked objects), packed one after another into shared blocks.
 *
 * Loading 10,000 tiny variables touches ~2.5 KB of fresh memory per tensor
 * and each 4 KiB page of it costs a page fault (bench/RESULTS.md: faults
 * were 40 % of the load). The first block is 64 KiB (a program with a
 * few variables keeps a small footprint); every later one is 2 MiB,
 * aligned so that it can be one transparent huge page (one fault for
 * ~5,000 such allocations) where CKPT_HUGE_PAGES=1 asks for them (see
 * hugebuf.c for why they are off by default). Blocks come from the allocator hook,
 * so allocator replacement and fault injection see them.
 *
 * Space inside a block is not reused: a block is freed with its last
 * allocation (the current one too), and once no block is left the next one
 * starts small again. Layout: [slab_head (16 bytes) | data, aligned].
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include "../internal.h"

#define SLAB_FIRST ((size_t)64 << 10)
#define SLAB_HUGE ((size_t)2 << 20)
#define SLAB_MAGIC 0x736c6162736c6162ULL

typedef struct slab_block {
	void *raw;            /* ckpt__malloc'ed */
	unsigned char *base;  /* raw aligned: 2 MiB for huge blocks */
	size_t cap, used, refs;
} slab_block;

typedef struct slab_head {
	slab_block *blk;
	uint64_t magic;
} slab_head;

static pthread_mutex_t slab_lock = PTHREAD_MUTEX_INITIALIZER;
static slab_block *slab_current;
static size_t slab_blocks;                 /* blocks alive */
static size_t slab_next_cap = SLAB_FIRST;

/* a child forked while another thread held the lock must not inherit it held (as par.c does) */
static pthread_once_t slab_atfork_once = PTHREAD_ONCE_INIT;
static void slab_lock_all(void) { pthread_mutex_lock(&slab_lock); }
static void slab_unlock_all(void) { pthread_mutex_unlock(&slab_lock); }
static void slab_register_atfork(void) { pthread_atfork(slab_lock_all, slab_unlock_all, slab_unlock_all); }

static slab_block *block_new(size_t cap)
{
	int huge = cap >= SLAB_HUGE;
	size_t align = huge ? SLAB_HUGE : 64;
	slab_block *b = ckpt__malloc(sizeof(*b));
	void *raw = b ? ckpt__malloc(cap + align) : NULL;
	if (!raw) {
		ckpt__free(b);
		return NULL;
	}
	b->raw = raw;
	b->base = (unsigned char *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
	b->cap = cap;
	b->used = 0;
	b->refs = 0;
	if (huge)
		ckpt__advise_huge(b->base, cap);
	slab_blocks++;
	return b;
}

static void block_free(slab_block *b)
{
	ckpt__free(b->raw);
	ckpt__free(b);
	if (--slab_blocks == 0)
		slab_next_cap = SLAB_FIRST;
}

void *ckpt__slab_alloc(size_t n, size_t align)
{
	if (n > CKPT__SLAB_MAX || align < sizeof(slab_head) || align > 64 || (align & (align - 1))) {
		ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "slab allocation of %zu bytes aligned to %zu", n, align);
		return NULL;
	}
	pthread_once(&slab_atfork_once, slab_register_atfork);
	pthread_mutex_lock(&slab_lock);
	slab_block *b = slab_current;
	size_t at = b ? (b->used + sizeof(slab_head) + align - 1) & ~(align - 1) : 0;
	if (!b || at > b->cap || b->cap - at < n) {
		b = block_new(slab_next_cap);
		if (!b) {
			pthread_mutex_unlock(&slab_lock);
			return NULL;
		}
		/* the old current block lives on while its allocations do */
		slab_current = b;
		/* past the first small block straight to huge ones: 64 KiB .. 1 MiB blocks were 500 faults */
		slab_next_cap = SLAB_HUGE;
		at = (sizeof(slab_head) + align - 1) & ~(align - 1);
	}
	slab_head *h = (slab_head *)(void *)(b->base + at) - 1;
	h->blk = b;
	h->magic = SLAB_MAGIC;
	b->used = at + n;
	b->refs++;
	pthread_mutex_unlock(&slab_lock);
	return b->base + at;
}

void ckpt__slab_free(void *p)
{
	if (!p)
		return;
	slab_head *h = (slab_head *)p - 1;
	if (h->magic != SLAB_MAGIC)
		return; /* not ours: never free what we cannot account for */
	pthread_mutex_lock(&slab_lock);
	slab_block *b = h->blk;
	h->magic = 0;
	if (--b->refs == 0) {
		if (b == slab_current)
			slab_current = NULL;
		block_free(b);
	}
	pthread_mutex_unlock(&slab_lock);
}
