/*
 * A stable sort that is linear on nearly sorted input: the arrays sorted
 * when opening and restoring a checkpoint (data ranges by offset, values by
 * variable) mostly follow the order they are built in but for a handful of
 * entries, and qsort on 10,000 of them was a tenth of the work. Up to
 * SORT_RUNS ascending runs are merged pairwise (each merge through a copy
 * of its shorter run), which is stable; more runs than that go to qsort, as
 * before, which promises no order for elements that compare equal.
 */
#include <stdlib.h>
#include <string.h>
#include "../internal.h"

#define SORT_RUNS 16

typedef int (*cmp_fn)(const void *, const void *);

/* Merge sorted p[0, na) and p[na, na + nb) (elements of sz bytes) in place, stably. */
static int merge(unsigned char *p, size_t na, size_t nb, size_t sz, cmp_fn cmp)
{
	size_t nt = na <= nb ? na : nb;
	unsigned char *t = ckpt__malloc(nt * sz);
	if (!t)
		return CKPT_ENOMEM;
	if (na <= nb) {
		memcpy(t, p, na * sz);
		size_t i = 0, j = na, o = 0;
		while (i < na && j < na + nb) {
			/* the right run's element goes first only when strictly smaller: ties keep their order */
			if (cmp(p + j * sz, t + i * sz) < 0)
				memcpy(p + o++ * sz, p + j++ * sz, sz);
			else
				memcpy(p + o++ * sz, t + i++ * sz, sz);
		}
		memcpy(p + o * sz, t + i * sz, (na - i) * sz);
	} else {
		memcpy(t, p + na * sz, nb * sz);
		size_t i = na, j = nb, o = na + nb; /* one past the next to take */
		while (i > 0 && j > 0) {
			if (cmp(t + (j - 1) * sz, p + (i - 1) * sz) < 0)
				memcpy(p + --o * sz, p + --i * sz, sz);
			else
				memcpy(p + --o * sz, t + --j * sz, sz);
		}
		memcpy(p, t, j * sz);
	}
	ckpt__free(t);
	return CKPT_OK;
}

int ckpt__sort(void *base, size_t n, size_t sz, int (*cmp)(const void *, const void *))
{
	unsigned char *p = base;
	size_t at[SORT_RUNS + 1], nr = 1;
	at[0] = 0;
	for (size_t k = 1; k < n; k++) {
		if (cmp(p + (k - 1) * sz, p + k * sz) <= 0)
			continue;
		if (nr == SORT_RUNS) {
			qsort(base, n, sz, cmp);
			return CKPT_OK;
		}
		at[nr++] = k;
	}
	at[nr] = n;
	while (nr > 1) {
		size_t m = 0;
		for (size_t j = 0; j < nr; j += 2) {
			if (j + 1 < nr)
				CKPT_TRY(merge(p + at[j] * sz, at[j + 1] - at[j], at[j + 2] - at[j + 1], sz, cmp));
			at[m++] = at[j];
		}
		at[m] = n;
		nr = m;
	}
	return CKPT_OK;
}
