/*
 * ckpt__sort (libckpt/util/sort.c): merged runs give exactly the sorted order,
 * stably; many runs fall back to qsort; a failed merge buffer is ENOMEM and
 * leaves a permutation of the input.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <ckpt/ckpt.h>
#include "libckpt/internal.h"

typedef struct item {
	uint32_t key;
	uint32_t pos; /* position in the input: ties must keep it ascending */
	uint64_t pad[2];
} item;

static int cmp_key(const void *a, const void *b)
{
	const item *x = a, *y = b;
	return x->key < y->key ? -1 : x->key > y->key;
}

static uint32_t rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return (uint32_t)(*s >> 33);
}

/* n items in `runs` ascending runs of random lengths, keys from a small range (many ties) */
static void fill(item *a, size_t n, size_t runs, uint64_t *seed)
{
	size_t at = 0;
	for (size_t r = 0; r < runs; r++) {
		size_t len = r + 1 == runs ? n - at : (n - at) / (runs - r) + rnd(seed) % 3;
		if (len > n - at)
			len = n - at;
		uint32_t k = rnd(seed) % 50;
		for (size_t i = 0; i < len; i++, at++) {
			k += rnd(seed) % 3;
			a[at] = (item){ k, (uint32_t)at, { 0, 0 } };
		}
	}
}

Test(sort, runs_merge_to_the_sorted_order_stably)
{
	enum { N = 3000 };
	static item a[N], want[N];
	uint64_t seed = 12345;
	size_t sizes[] = { 0, 1, 2, 7, N };
	size_t runs[] = { 1, 2, 3, 5, 15, 16, 17, 40, 400 };
	for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
		for (size_t ri = 0; ri < sizeof runs / sizeof *runs; ri++)
			for (int rep = 0; rep < 4; rep++) {
				size_t n = sizes[si], nr = runs[ri] < n ? runs[ri] : (n ? n : 1);
				fill(a, n, nr, &seed);
				if (rep == 3 && n > 1) /* the graph entry's case: one large key first */
					a[0].key = 1000000;
				memcpy(want, a, n * sizeof *a);
				qsort(want, n, sizeof *want, cmp_key);
				cr_assert_eq(ckpt__sort(a, n, sizeof *a, cmp_key), CKPT_OK);
				for (size_t i = 0; i < n; i++) {
					cr_assert_eq(a[i].key, want[i].key, "n %zu runs %zu: key %zu is %u, want %u", n, nr, i,
						a[i].key, want[i].key);
					if (nr <= 16 && i && a[i].key == a[i - 1].key)
						cr_assert_lt(a[i - 1].pos, a[i].pos, "n %zu runs %zu: ties at %zu out of order", n, nr, i);
				}
			}
}

static void *fail_malloc(size_t n, void *ctx) { (void)n; (void)ctx; return NULL; }
static void *std_realloc(void *p, size_t n, void *ctx) { (void)ctx; return realloc(p, n); }
static void std_free(void *p, void *ctx) { (void)ctx; free(p); }

Test(sort, merge_buffer_failure_is_enomem_and_a_permutation)
{
	enum { N = 500 };
	static item a[N];
	uint64_t seed = 7;
	fill(a, N, 4, &seed);
	static const ckpt_allocator failing = { fail_malloc, std_realloc, std_free, NULL };
	ckpt_set_allocator(&failing);
	int rc = ckpt__sort(a, N, sizeof *a, cmp_key);
	ckpt_set_allocator(NULL);
	cr_assert_eq(rc, CKPT_ENOMEM);
	static unsigned char seen[N];
	for (size_t i = 0; i < N; i++) {
		cr_assert_lt(a[i].pos, N);
		cr_assert_not(seen[a[i].pos], "position %u twice", a[i].pos);
		seen[a[i].pos] = 1;
	}
}
