/*
 * Tensor buffers, 2 MiB aligned from 2 MiB on (advised as huge pages only
 * where huge_advice.c says so).
 *
 * Buffers come from the allocator hook (over-allocated by one huge page,
 * then aligned) rather than aligned_alloc/mmap, so allocator replacement
 * and fault injection see them.
 *
 * Layout: [base ... pad ... | void *base | data (aligned) ... ]
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include "../internal.h"

#define HUGE_PAGE ((uint64_t)2 << 20)
#define SMALL_ALIGN ((uint64_t)64)

void *ckpt__buffer_alloc(uint64_t n, int zero)
{
	int huge = n >= HUGE_PAGE;
	uint64_t align = huge ? HUGE_PAGE : SMALL_ALIGN;
	/*
	 * Room for the base pointer and the alignment slack; huge buffers also a
	 * page of rounding for madvise. Small ones get no more: a page of padding
	 * per tiny tensor made 10,000 variables cost 80 MiB of fresh pages.
	 */
	uint64_t total;
	if (ckpt__add_u64(n, align + (huge ? 8192 : sizeof(void *)), &total) || total > SIZE_MAX) {
		ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "buffer of %llu bytes exceeds the address space",
			(unsigned long long)n);
		return NULL;
	}
	unsigned char *base = ckpt__malloc((size_t)total);
	if (!base)
		return NULL;
	uintptr_t p = ((uintptr_t)base + sizeof(void *) + (uintptr_t)align - 1) & ~((uintptr_t)align - 1);
	((void **)p)[-1] = base;
	if (huge)
		ckpt__advise_huge((void *)p, ((size_t)n + 4095) & ~(size_t)4095);
	if (zero && n > 0)
		memset((void *)p, 0, (size_t)n);
	return (void *)p;
}

void ckpt__buffer_free(void *p)
{
	if (p)
		ckpt__free(((void **)p)[-1]);
}

/*
 * Variable buffers, packed. A buffer in its own mapping keeps the part past
 * its last whole huge page in 4 KiB pages (THP needs a whole aligned 2 MiB
 * inside the mapping): on the medium benchmark state that tail is ~11 % of
 * the bytes and most of the first-touch time. Variables therefore take their
 * copies one after another from shared 256 MiB huge-page blocks (address space only until touched), so every
 * byte but the last block's end is in a huge page, with no rounding waste.
 * A block is freed with its last buffer; space inside a block is not reused
 * (variables live as long as the model), so this is only for variables.
 *
 * Buffer layout inside a block: [packed_head (64 bytes) | data, 64-aligned].
 */
/* big blocks: each block's last, partly used huge page is the only waste (<= 2 MiB a block) */
#define BLOCK_BYTES ((uint64_t)256 << 20)
#define PACK_MIN ((uint64_t)64 << 10)     /* smaller ones: plain ckpt__buffer_alloc */
#define SMALL_SLAB ((uint64_t)4 << 10)    /* up to this: ckpt__slab_alloc */
#define PACK_MAX (BLOCK_BYTES / 2)        /* bigger ones: a block of their own */
#define PACK_MAGIC 0x6b6370616b6365ULL

typedef struct block {
	void *raw;           /* ckpt__malloc'ed */
	unsigned char *base; /* 2 MiB aligned */
	uint64_t cap, used;
	size_t refs;
} block;

typedef struct packed_head {
	uint64_t magic;
	block *blk;
	unsigned char pad[64 - sizeof(uint64_t) - sizeof(block *)];
} packed_head;

static pthread_mutex_t pack_lock = PTHREAD_MUTEX_INITIALIZER;
static block *pack_current;

static block *block_new(uint64_t cap)
{
	uint64_t total;
	if (ckpt__add_u64(cap, HUGE_PAGE, &total) || total > SIZE_MAX) {
		ckpt__fail(CKPT_ELIMIT, NULL, NULL, -1, "buffer block of %llu bytes exceeds the address space",
			(unsigned long long)cap);
		return NULL;
	}
	block *b = ckpt__malloc(sizeof(*b));
	void *raw = b ? ckpt__malloc((size_t)total) : NULL;
	if (!raw) {
		ckpt__free(b);
		return NULL;
	}
	b->raw = raw;
	b->base = (unsigned char *)(((uintptr_t)raw + (uintptr_t)HUGE_PAGE - 1) & ~((uintptr_t)HUGE_PAGE - 1));
	b->cap = cap;
	b->used = 0;
	b->refs = 0;
	ckpt__advise_huge(b->base, (size_t)cap);
	return b;
}

static void block_free(block *b)
{
	ckpt__free(b->raw);
	ckpt__free(b);
}

void *ckpt__variable_buffer_alloc(uint64_t n)
{
	/* tiny copies go with the variables themselves (slab.c): no page of their own, no 64-byte slack each */
	if (n <= SMALL_SLAB)
		return ckpt__slab_alloc((size_t)n, SMALL_ALIGN);
	if (n < PACK_MIN)
		return ckpt__buffer_alloc(n, 0);
	uint64_t need = sizeof(packed_head) + ((n + 63) & ~(uint64_t)63);
	pthread_mutex_lock(&pack_lock);
	block *b = pack_current;
	if (n > PACK_MAX) {
		/* a block of its own, rounded to whole huge pages (<= 2 MiB on >= 32 MiB) */
		b = block_new((need + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1));
	} else if (!b || b->cap - b->used < need) {
		/* the old current block lives on while its buffers do */
		b = block_new(BLOCK_BYTES);
		if (b)
			pack_current = b;
	}
	unsigned char *p = NULL;
	if (b) {
		packed_head *h = (packed_head *)(b->base + b->used);
		h->magic = PACK_MAGIC;
		h->blk = b;
		p = (unsigned char *)(h + 1);
		b->used += need;
		b->refs++;
	}
	pthread_mutex_unlock(&pack_lock);
	return p;
}

void ckpt__variable_buffer_free(void *p, uint64_t n)
{
	if (!p)
		return;
	if (n <= SMALL_SLAB) {
		ckpt__slab_free(p);
		return;
	}
	if (n < PACK_MIN) {
		ckpt__buffer_free(p);
		return;
	}
	packed_head *h = (packed_head *)p - 1;
	if (h->magic != PACK_MAGIC)
		return; /* not ours: never free what we cannot account for */
	pthread_mutex_lock(&pack_lock);
	block *b = h->blk;
	h->magic = 0;
	if (--b->refs == 0) {
		if (b == pack_current)
			pack_current = NULL;
		block_free(b);
	}
	pthread_mutex_unlock(&pack_lock);
}
