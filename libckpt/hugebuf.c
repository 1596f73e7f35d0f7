/*
 * Tensor buffers backed by transparent huge pages.
 *
 * Restores are dominated by first-touch page faults on fresh memory
 * (PERFORMANCE.md: 0.3 GB/s into 4 KiB-faulting malloc memory, 7-10 GB/s
 * with MADV_HUGEPAGE). Buffers of 2 MiB and more are therefore 2 MiB
 * aligned and advised as huge pages. They come from the allocator hook
 * (over-allocated by one huge page, then aligned) rather than
 * aligned_alloc/mmap, so allocator replacement and fault injection see them.
 *
 * Layout: [base ... pad ... | void *base | data (aligned) ... ]
 */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include "variable_internal.h"

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
	if (huge) {
		/* only a hint: a failure (THP disabled, odd allocator) just means 4 KiB pages */
		size_t len = ((size_t)n + 4095) & ~(size_t)4095;
#ifdef MADV_HUGEPAGE
		(void)madvise((void *)p, len, MADV_HUGEPAGE);
#else
		(void)len;
#endif
	}
	if (zero && n > 0)
		memset((void *)p, 0, (size_t)n);
	return (void *)p;
}

void ckpt__buffer_free(void *p)
{
	if (p)
		ckpt__free(((void **)p)[-1]);
}
