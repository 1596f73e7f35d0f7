/*
 * The slab (libckpt/util/slab.c) that packs variables, their tiny copies,
 * objects and edge names: allocations are aligned and disjoint across the
 * growth from small blocks to huge-page ones, a block goes with its last
 * allocation (nothing stays allocated once everything is freed), an
 * allocator failure is ENOMEM; and an object's attributes move out of the
 * inline first slot into an array without losing one.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ckpt/ckpt.h>
#include "libckpt/internal.h"

static long g_live, g_calls;
static int g_fail;

static void *c_malloc(size_t n, void *ctx)
{
	(void)ctx;
	g_calls++;
	if (g_fail)
		return NULL;
	void *p = malloc(n);
	if (p)
		g_live++;
	return p;
}
static void *c_realloc(void *p, size_t n, void *ctx)
{
	(void)ctx;
	if (!p)
		return c_malloc(n, ctx);
	return realloc(p, n);
}
static void c_free(void *p, void *ctx)
{
	(void)ctx;
	if (p)
		g_live--;
	free(p);
}
static const ckpt_allocator counting = { c_malloc, c_realloc, c_free, NULL };

#define N 6000

Test(slab, grows_aligned_disjoint_and_frees_every_block)
{
	static unsigned char *p[N];
	static size_t len[N];
	g_live = g_calls = 0;
	g_fail = 0;
	ckpt_set_allocator(&counting);
	for (int i = 0; i < N; i++) {
		/* sizes 1..2047 and both alignments: ~6 MB, past the 64 KiB..1 MiB blocks into 2 MiB ones */
		len[i] = (size_t)(i * 7919 % 2047) + 1;
		size_t align = i % 3 ? 16 : 64;
		p[i] = ckpt__slab_alloc(len[i], align);
		cr_assert_not_null(p[i], "allocation %d", i);
		cr_assert_eq((uintptr_t)p[i] % align, 0, "allocation %d not %zu-aligned", i, align);
		memset(p[i], (unsigned char)i, len[i]);
	}
	long calls = g_calls;
	cr_assert_lt(calls, 40, "%d allocations took %ld underlying allocations: not packed", N, calls);
	for (int i = 0; i < N; i++)
		for (size_t k = 0; k < len[i]; k++)
			cr_assert_eq(p[i][k], (unsigned char)i, "allocation %d byte %zu overwritten", i, k);
	/* every other one first, then the rest: blocks die only with their last allocation */
	for (int i = 0; i < N; i += 2)
		ckpt__slab_free(p[i]);
	for (int i = 1; i < N; i += 2)
		for (size_t k = 0; k < len[i]; k++)
			cr_assert_eq(p[i][k], (unsigned char)i, "allocation %d changed by freeing its neighbours", i);
	cr_assert_gt(g_live, 0);
	for (int i = 1; i < N; i += 2)
		ckpt__slab_free(p[i]);
	cr_assert_eq(g_live, 0, "%ld underlying allocations still live after freeing everything", g_live);
	/* and it starts over with a small block */
	void *q = ckpt__slab_alloc(100, 16);
	cr_assert_not_null(q);
	ckpt__slab_free(q);
	cr_assert_eq(g_live, 0);
	ckpt_set_allocator(NULL);
}

Test(slab, allocator_failure_is_enomem_and_limits_are_checked)
{
	g_live = g_calls = 0;
	g_fail = 1;
	ckpt_set_allocator(&counting);
	cr_assert_null(ckpt__slab_alloc(64, 16));
	cr_assert_eq(ckpt_error_last()->code, CKPT_ENOMEM);
	g_fail = 0;
	void *p = ckpt__slab_alloc(64, 16);
	cr_assert_not_null(p);
	cr_assert_null(ckpt__slab_alloc(CKPT__SLAB_MAX + 1, 16));
	cr_assert_eq(ckpt_error_last()->code, CKPT_EINVAL);
	cr_assert_null(ckpt__slab_alloc(8, 24));
	ckpt__slab_free(p);
	cr_assert_eq(g_live, 0);
	ckpt_set_allocator(NULL);
}

Test(slab, object_attributes_past_the_inline_one)
{
	ckpt_object *o;
	cr_assert_eq(ckpt_object_new(&o), CKPT_OK);
	int64_t d = 3;
	ckpt_shape s;
	ckpt_shape_make(&s, 1, &d);
	ckpt_variable *v[7];
	char sfx[16];
	for (int i = 0; i < 7; i++) {
		snprintf(sfx, sizeof sfx, "-part%d", i);
		cr_assert_eq(ckpt_status_of(v[i] = ckpt_object_add_attribute_tensor(o, "table", sfx, NULL, CKPT_DT_INT32, &s, NULL)),
			     CKPT_OK, "%s", ckpt_error_last()->message);
		int32_t val[3] = { i, i + 1, i + 2 };
		cr_assert_eq(ckpt_variable_assign(v[i], val, sizeof val), CKPT_OK);
	}
	for (int i = 0; i < 7; i++) {
		ckpt_variable *got;
		snprintf(sfx, sizeof sfx, "-part%d", i);
		cr_assert_eq(ckpt_status_of(got = ckpt_object_attribute_tensor(o, "table", sfx)), CKPT_OK,
			     "attribute %d lost", i);
		cr_assert_eq(got, v[i]);
		int32_t val[3];
		cr_assert_eq(ckpt_variable_read(got, val, sizeof val), CKPT_OK);
		cr_assert(val[0] == i && val[2] == i + 2, "attribute %d holds %d..%d", i, val[0], val[2]);
	}
	ckpt_object_free(o);
}
