/* Variables created through the current strategy: plain, mirrored, sync-on-read. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "libckpt/model/variable_internal.h"

static int contains(const char *hay, const char *needle)
{
	return hay && needle && strstr(hay, needle) != NULL;
}

static ckpt_shape shape1(int64_t n)
{
	ckpt_shape s;
	cr_assert_eq(ckpt_shape_make(&s, 1, &n), CKPT_OK);
	return s;
}

static ckpt_strategy *mirrored(int n)
{
	ckpt_strategy *s;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, n), CKPT_OK);
	return s;
}

Test(variable, created_inside_scope_is_mirrored_with_identical_copies)
{
	ckpt_strategy *s = mirrored(4);
	ckpt_shape sh = shape1(3);
	const float init[3] = { 1.5f, -2.0f, 3.25f };
	ckpt_variable_options o = CKPT_VARIABLE_OPTIONS_INIT;
	o.initial_value = init;
	ckpt_variable *v;
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_new(&v, "dense/kernel", CKPT_DT_FLOAT, &sh, &o), CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_kind(v), CKPT_VAR_MIRRORED);
	cr_assert_str_eq(ckpt_var_kind_name(ckpt_variable_kind(v)), "mirrored");
	cr_assert_eq(ckpt_variable_num_replicas(v), 4);
	cr_assert_eq(ckpt_variable_strategy(v), s);
	cr_assert_str_eq(ckpt_variable_name(v), "dense/kernel");
	cr_assert_eq(ckpt_variable_dtype(v), CKPT_DT_FLOAT);
	cr_assert_eq(ckpt_variable_nbytes(v), 12);
	cr_assert_eq(ckpt_variable_shape(v)->dims[0], 3);
	char want[96];
	snprintf(want, sizeof(want), "inside %s scope", ckpt_strategy_describe(s));
	cr_assert_str_eq(ckpt_variable_origin(v), want);
	cr_assert_eq(ckpt_variable_replicas_identical(v), 1);
	for (int r = 0; r < 4; r++) {
		cr_assert_eq(memcmp(ckpt_variable_replica_data(v, r), init, sizeof(init)), 0);
		for (int q = 0; q < r; q++)
			cr_assert_neq(ckpt_variable_replica_data(v, r), ckpt_variable_replica_data(v, q));
	}
	cr_assert_null(ckpt_variable_replica_data(v, 4));
	cr_assert_null(ckpt_variable_replica_data(v, -1));
	float got[3];
	cr_assert_eq(ckpt_variable_read(v, got, sizeof(got)), CKPT_OK);
	cr_assert_eq(memcmp(got, init, sizeof(init)), 0);
	ckpt_variable_free(v);
	ckpt_strategy_free(s);
}

Test(variable, no_initial_value_means_zeros)
{
	ckpt_strategy *s = mirrored(2);
	ckpt_shape sh = shape1(1000);
	ckpt_variable *v;
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_new(&v, "zeros", CKPT_DT_INT64, &sh, NULL), CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	for (int r = 0; r < 2; r++) {
		const int64_t *p = ckpt_variable_replica_data(v, r);
		for (int i = 0; i < 1000; i++)
			cr_assert_eq(p[i], 0);
	}
	ckpt_variable_free(v);
	ckpt_strategy_free(s);
}

/* ---- the loud rule ---- */

typedef struct {
	ckpt_variable *v;
	int add_id;
} update_arg;

static int update_fn(ckpt_replica_ctx *ctx, void *arg)
{
	update_arg *u = arg;
	void *p;
	CKPT_TRY(ckpt_status_of(p = ckpt_variable_local(u->v)));
	if (p != ckpt_variable_replica_data(u->v, ckpt_replica_id(ctx)))
		return ckpt__fail(CKPT_ERROR, NULL, NULL, -1, "local is not this replica's copy");
	float *w = p;
	float grad[3] = { 0.5f * (float)(ckpt_replica_id(ctx) + 1), 1.0f, -0.25f };
	CKPT_TRY(ckpt_replica_all_reduce_f32(ctx, CKPT_REDUCE_MEAN, grad, 3));
	for (int i = 0; i < 3; i++)
		w[i] -= 0.1f * grad[i];
	return CKPT_OK;
}

Test(variable, mirrored_updates_in_replica_context_stay_identical)
{
	ckpt_strategy *s = mirrored(4);
	ckpt_shape sh = shape1(3);
	ckpt_variable *v;
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_new(&v, "w", CKPT_DT_FLOAT, &sh, NULL), CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	update_arg u = { v, 0 };
	for (int step = 0; step < 10; step++)
		cr_assert_eq(ckpt_strategy_run(s, update_fn, &u), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_variable_replicas_identical(v), 1);
	cr_assert_neq(((const float *)ckpt_variable_replica_data(v, 0))[0], 0.0f);
	ckpt_variable_free(v);
	ckpt_strategy_free(s);
}

static void check_plain_update_fails(ckpt_variable *v, ckpt_strategy *s)
{
	update_arg u = { v, 0 };
	cr_assert_eq(ckpt_strategy_run(s, update_fn, &u), CKPT_ESCOPE);
	const ckpt_error *e = ckpt_error_last();
	cr_assert_eq(e->code, CKPT_ESCOPE);
	cr_assert(contains(e->message, "'dense/kernel'"), "%s", e->message);
	cr_assert(contains(e->message, "DefaultStrategy"), "%s", e->message);
	cr_assert(contains(e->message, ckpt_strategy_describe(s)), "%s", e->message);
	cr_assert(contains(e->message, "inside the scope"), "%s", e->message);
	cr_assert(contains(e->message, "created outside strategy scope"), "%s", e->message);
	cr_assert_str_eq(e->variable, "dense/kernel");
}

Test(variable, created_outside_scope_is_plain_and_replica_update_fails_loudly)
{
	ckpt_strategy *s = mirrored(2);
	ckpt_shape sh = shape1(3);
	ckpt_variable *v;
	cr_assert_eq(ckpt_variable_new(&v, "dense/kernel", CKPT_DT_FLOAT, &sh, NULL), CKPT_OK);
	cr_assert_eq(ckpt_variable_kind(v), CKPT_VAR_PLAIN);
	cr_assert_eq(ckpt_variable_num_replicas(v), 1);
	cr_assert_eq(ckpt_variable_strategy(v), ckpt_strategy_default());
	cr_assert_str_eq(ckpt_variable_origin(v), "outside any strategy scope");
	check_plain_update_fails(v, s);
	/* outside replica context a plain variable is directly updatable */
	void *p;
	cr_assert_eq(ckpt_status_of(p = ckpt_variable_local(v)), CKPT_OK);
	cr_assert_eq(p, ckpt_variable_replica_data(v, 0));
	/* and in a run of the default strategy too: code works with and without distribution */
	update_arg u = { v, 0 };
	cr_assert_eq(ckpt_strategy_run(ckpt_strategy_default(), update_fn, &u), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_variable_free(v);
	ckpt_strategy_free(s);
}

Test(variable, global_created_before_any_scope_stays_plain_inside_it)
{
	ckpt_shape sh = shape1(3);
	ckpt_variable *v;
	cr_assert_eq(ckpt_variable_new(&v, "dense/kernel", CKPT_DT_FLOAT, &sh, NULL), CKPT_OK);
	ckpt_strategy *s = mirrored(4);
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_kind(v), CKPT_VAR_PLAIN);
	cr_assert_eq(ckpt_variable_num_replicas(v), 1);
	check_plain_update_fails(v, s);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	ckpt_variable_free(v);
	ckpt_strategy_free(s);
}

Test(variable, variable_of_one_strategy_in_another_run_names_both)
{
	ckpt_strategy *a = mirrored(2), *b = mirrored(2);
	ckpt_shape sh = shape1(3);
	ckpt_variable *v;
	cr_assert_eq(ckpt_scope_enter(a), CKPT_OK);
	cr_assert_eq(ckpt_variable_new(&v, "dense/bias", CKPT_DT_FLOAT, &sh, NULL), CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(a), CKPT_OK);
	update_arg u = { v, 0 };
	cr_assert_eq(ckpt_strategy_run(b, update_fn, &u), CKPT_ESCOPE);
	const ckpt_error *e = ckpt_error_last();
	cr_assert(contains(e->message, "'dense/bias'"), "%s", e->message);
	cr_assert(contains(e->message, ckpt_strategy_describe(a)), "%s", e->message);
	cr_assert(contains(e->message, ckpt_strategy_describe(b)), "%s", e->message);
	cr_assert_str_eq(e->variable, "dense/bias");
	/* and in its own strategy's run it works */
	cr_assert_eq(ckpt_strategy_run(a, update_fn, &u), CKPT_OK, "%s", ckpt_error_last()->message);
	ckpt_variable_free(v);
	ckpt_strategy_free(a);
	ckpt_strategy_free(b);
}

Test(variable, mirrored_local_outside_replica_context_points_to_assign)
{
	ckpt_strategy *s = mirrored(2);
	ckpt_shape sh = shape1(3);
	ckpt_variable *v;
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_new(&v, "m", CKPT_DT_FLOAT, &sh, NULL), CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	void *p = (void *)1;
	cr_assert_eq(ckpt_status_of(p = ckpt_variable_local(v)), CKPT_ESCOPE);
	cr_assert_null(p);
	cr_assert(contains(ckpt_error_last()->message, "ckpt_variable_assign"), "%s", ckpt_error_last()->message);
	ckpt_variable_free(v);
	ckpt_strategy_free(s);
}

static int create_in_replica_fn(ckpt_replica_ctx *ctx, void *arg)
{
	ckpt_shape sh = shape1(1);
	ckpt_variable *v = NULL;
	int rc = ckpt_variable_new(&v, "late", CKPT_DT_FLOAT, &sh, NULL);
	ckpt_variable_free(v);
	return rc;
}

Test(variable, creation_in_replica_context_is_escope)
{
	ckpt_strategy *s = mirrored(2);
	cr_assert_eq(ckpt_strategy_run(s, create_in_replica_fn, NULL), CKPT_ESCOPE);
	cr_assert(contains(ckpt_error_last()->message, "replica context"));
	ckpt_strategy_free(s);
}

/* ---- cross-replica assign ---- */

static int assign_in_replica_fn(ckpt_replica_ctx *ctx, void *arg)
{
	float x[3] = { 0 };
	return ckpt_variable_assign(arg, x, sizeof(x));
}

Test(variable, assign_writes_every_copy_and_checks_its_arguments)
{
	ckpt_strategy *s = mirrored(4);
	ckpt_shape sh = shape1(3);
	ckpt_variable *v;
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_new(&v, "a", CKPT_DT_FLOAT, &sh, NULL), CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	const float val[3] = { 7, 8, 9 };
	cr_assert_eq(ckpt_variable_assign(v, val, sizeof(val)), CKPT_OK);
	for (int r = 0; r < 4; r++)
		cr_assert_eq(memcmp(ckpt_variable_replica_data(v, r), val, sizeof(val)), 0);
	cr_assert_eq(ckpt_variable_assign(v, val, 8), CKPT_EINVAL);
	cr_assert(contains(ckpt_error_last()->message, "want 12 bytes, got 8"), "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_variable_assign(v, NULL, 12), CKPT_EINVAL);
	cr_assert_eq(ckpt_variable_assign(v, ckpt_variable_replica_data(v, 2), 12), CKPT_EINVAL);
	cr_assert_eq(ckpt_strategy_run(s, assign_in_replica_fn, v), CKPT_ESCOPE);
	cr_assert(contains(ckpt_error_last()->message, "ckpt_variable_local"));
	float small[2];
	cr_assert_eq(ckpt_variable_read(v, small, sizeof(small)), CKPT_EINVAL);
	ckpt_variable_free(v);
	ckpt_strategy_free(s);
}

Test(variable, large_assign_fans_out_to_huge_page_buffers)
{
	ckpt_strategy *s = mirrored(4);
	const int64_t n = (int64_t)3 << 20; /* 12 MiB of float32 per copy */
	ckpt_shape sh = shape1(n);
	float *val = malloc((size_t)n * sizeof(float));
	for (int64_t i = 0; i < n; i++)
		val[i] = (float)i * 0.5f;
	ckpt_variable *v;
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_new(&v, "big", CKPT_DT_FLOAT, &sh, NULL), CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	for (int r = 0; r < 4; r++)
		cr_assert_eq((uintptr_t)ckpt_variable_replica_data(v, r) % 64, 0, "copy %d not 64-byte aligned", r);
	cr_assert_eq(ckpt_variable_assign(v, val, (size_t)n * sizeof(float)), CKPT_OK);
	for (int r = 0; r < 4; r++)
		cr_assert_eq(memcmp(ckpt_variable_replica_data(v, r), val, (size_t)n * sizeof(float)), 0);
	cr_assert_eq(ckpt_variable_replicas_identical(v), 1);
	((float *)ckpt__variable_data(v, 3))[n - 1] += 1.0f;
	cr_assert_eq(ckpt_variable_replicas_identical(v), 0);
	ckpt_variable_free(v);
	ckpt_strategy_free(s);
	free(val);
}

Test(variable, assign_many_validates_everything_before_writing)
{
	ckpt_strategy *s = mirrored(2);
	ckpt_shape sh3 = shape1(3), sh2 = shape1(2);
	ckpt_variable *a, *b;
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_new(&a, "a", CKPT_DT_FLOAT, &sh3, NULL), CKPT_OK);
	cr_assert_eq(ckpt_variable_new(&b, "b", CKPT_DT_DOUBLE, &sh2, NULL), CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	const float va[3] = { 1, 2, 3 };
	const double vb[2] = { 4, 5 };
	ckpt_variable *vars[2] = { a, b };
	const void *srcs[2] = { va, vb };
	size_t bad[2] = { sizeof(va), 8 };
	cr_assert_eq(ckpt__variable_assign_many(vars, srcs, bad, 2), CKPT_EINVAL);
	cr_assert_str_eq(ckpt_error_last()->variable, "b");
	const float zero3[3] = { 0 };
	cr_assert_eq(memcmp(ckpt_variable_replica_data(a, 0), zero3, 12), 0, "nothing written on failure");
	cr_assert_eq(memcmp(ckpt_variable_replica_data(a, 1), zero3, 12), 0);
	ckpt_variable *dup[2] = { a, a };
	const void *dsrc[2] = { va, va };
	size_t dsz[2] = { 12, 12 };
	cr_assert_eq(ckpt__variable_assign_many(dup, dsrc, dsz, 2), CKPT_EINVAL);
	size_t good[2] = { sizeof(va), sizeof(vb) };
	cr_assert_eq(ckpt__variable_assign_many(vars, srcs, good, 2), CKPT_OK);
	for (int r = 0; r < 2; r++) {
		cr_assert_eq(memcmp(ckpt_variable_replica_data(a, r), va, sizeof(va)), 0);
		cr_assert_eq(memcmp(ckpt_variable_replica_data(b, r), vb, sizeof(vb)), 0);
	}
	ckpt_variable_free(a);
	ckpt_variable_free(b);
	ckpt_strategy_free(s);
}

Test(variable, broadcast_primary_copies_replica_0_everywhere)
{
	ckpt_strategy *s = mirrored(3);
	ckpt_shape sh = shape1(4);
	ckpt_variable *v;
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_new(&v, "p", CKPT_DT_INT32, &sh, NULL), CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	int32_t *p0 = ckpt__variable_data(v, 0);
	for (int i = 0; i < 4; i++)
		p0[i] = 10 + i;
	cr_assert_eq(ckpt_variable_replicas_identical(v), 0);
	cr_assert_eq(ckpt__variable_broadcast_primary(v), CKPT_OK);
	cr_assert_eq(ckpt_variable_replicas_identical(v), 1);
	cr_assert_eq(((const int32_t *)ckpt_variable_replica_data(v, 2))[3], 13);
	ckpt_variable_free(v);
	ckpt_strategy_free(s);
}

/* ---- sync-on-read ---- */

static ckpt_variable *sor_new(ckpt_strategy *s, const char *name, ckpt_dtype dt, int64_t n, ckpt_aggregation agg)
{
	ckpt_shape sh = shape1(n);
	ckpt_variable_options o = CKPT_VARIABLE_OPTIONS_INIT;
	o.sync = CKPT_SYNC_ON_READ;
	o.aggregation = agg;
	ckpt_variable *v;
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	int rc = ckpt_variable_new(&v, name, dt, &sh, &o);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	cr_assert_eq(rc, CKPT_OK, "%s", ckpt_error_last()->message);
	return v;
}

static int accumulate_fn(ckpt_replica_ctx *ctx, void *arg)
{
	ckpt_variable *v = arg;
	void *p;
	CKPT_TRY(ckpt_status_of(p = ckpt_variable_local(v)));
	int id = ckpt_replica_id(ctx);
	if (ckpt_variable_dtype(v) == CKPT_DT_FLOAT)
		((float *)p)[0] += (float)(id + 1);
	else
		((int64_t *)p)[0] += id + 1;
	return CKPT_OK;
}

static void check_sync_on_read(int n)
{
	ckpt_strategy *s = mirrored(n);
	const float val[3] = { 2.0f, 6.0f, -3.0f };
	float got[3];

	/* SUM, float: the value in replica 0, -0.0 elsewhere; the aggregate is the value */
	ckpt_variable *sum = sor_new(s, "metric/total", CKPT_DT_FLOAT, 3, CKPT_AGG_SUM);
	cr_assert_eq(ckpt_variable_kind(sum), CKPT_VAR_SYNC_ON_READ);
	cr_assert_eq(ckpt_variable_aggregation(sum), CKPT_AGG_SUM);
	cr_assert_eq(ckpt_variable_num_replicas(sum), n);
	cr_assert_eq(ckpt_variable_assign(sum, val, sizeof(val)), CKPT_OK);
	cr_assert_eq(memcmp(ckpt_variable_replica_data(sum, 0), val, sizeof(val)), 0);
	for (int r = 1; r < n; r++)
		for (int i = 0; i < 3; i++) {
			float x = ((const float *)ckpt_variable_replica_data(sum, r))[i];
			cr_assert(x == 0.0f && signbit(x), "replica %d element %d: %g, want -0.0", r, i, (double)x);
		}
	cr_assert_eq(ckpt_variable_read(sum, got, sizeof(got)), CKPT_OK);
	cr_assert_eq(memcmp(got, val, sizeof(val)), 0);
	/* per-replica accumulation, then the aggregate */
	cr_assert_eq(ckpt_strategy_run(s, accumulate_fn, sum), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_variable_read(sum, got, sizeof(got)), CKPT_OK);
	cr_assert_eq(got[0], 2.0f + (float)(n * (n + 1) / 2));

	/* SUM, integer: whole value in replica 0, zeros elsewhere: exact */
	ckpt_variable *cnt = sor_new(s, "metric/count", CKPT_DT_INT64, 2, CKPT_AGG_SUM);
	const int64_t ival[2] = { 7, -9 };
	int64_t iget[2];
	cr_assert_eq(ckpt_variable_assign(cnt, ival, sizeof(ival)), CKPT_OK);
	cr_assert_eq(memcmp(ckpt_variable_replica_data(cnt, 0), ival, sizeof(ival)), 0);
	for (int r = 1; r < n; r++)
		cr_assert_eq(((const int64_t *)ckpt_variable_replica_data(cnt, r))[0], 0);
	cr_assert_eq(ckpt_variable_read(cnt, iget, sizeof(iget)), CKPT_OK);
	cr_assert_eq(memcmp(iget, ival, sizeof(ival)), 0);
	cr_assert_eq(ckpt_strategy_run(s, accumulate_fn, cnt), CKPT_OK);
	cr_assert_eq(ckpt_variable_read(cnt, iget, sizeof(iget)), CKPT_OK);
	cr_assert_eq(iget[0], 7 + n * (n + 1) / 2);

	/* MEAN: every replica gets the value */
	ckpt_variable *mean = sor_new(s, "metric/mean", CKPT_DT_FLOAT, 3, CKPT_AGG_MEAN);
	cr_assert_eq(ckpt_variable_assign(mean, val, sizeof(val)), CKPT_OK);
	cr_assert_eq(ckpt_variable_replicas_identical(mean), 1);
	cr_assert_eq(ckpt_variable_read(mean, got, sizeof(got)), CKPT_OK);
	cr_assert_eq(memcmp(got, val, sizeof(val)), 0);
	cr_assert_eq(ckpt_strategy_run(s, accumulate_fn, mean), CKPT_OK);
	cr_assert_eq(ckpt_variable_read(mean, got, sizeof(got)), CKPT_OK);
	cr_assert_eq(got[0], (2.0f * (float)n + (float)(n * (n + 1) / 2)) / (float)n);

	/* ONLY_FIRST_REPLICA: every replica gets the value, reads see replica 0 */
	ckpt_variable *first = sor_new(s, "metric/first", CKPT_DT_FLOAT, 3, CKPT_AGG_ONLY_FIRST_REPLICA);
	cr_assert_eq(ckpt_variable_assign(first, val, sizeof(val)), CKPT_OK);
	cr_assert_eq(ckpt_variable_replicas_identical(first), 1);
	cr_assert_eq(ckpt_strategy_run(s, accumulate_fn, first), CKPT_OK);
	cr_assert_eq(ckpt_variable_read(first, got, sizeof(got)), CKPT_OK);
	cr_assert_eq(got[0], 3.0f);

	ckpt_variable_free(sum);
	ckpt_variable_free(cnt);
	ckpt_variable_free(mean);
	ckpt_variable_free(first);
	ckpt_strategy_free(s);
}

Test(variable, sync_on_read_with_1_replica) { check_sync_on_read(1); }
Test(variable, sync_on_read_with_2_replicas) { check_sync_on_read(2); }
Test(variable, sync_on_read_with_4_replicas) { check_sync_on_read(4); }

Test(variable, sync_on_read_f64_split_and_int32_overflow)
{
	ckpt_strategy *s = mirrored(4);
	ckpt_variable *d = sor_new(s, "d", CKPT_DT_DOUBLE, 1, CKPT_AGG_SUM);
	double x = 10.0, y;
	cr_assert_eq(ckpt_variable_assign(d, &x, sizeof(x)), CKPT_OK);
	cr_assert_eq(((const double *)ckpt_variable_replica_data(d, 0))[0], 10.0);
	cr_assert(signbit(((const double *)ckpt_variable_replica_data(d, 3))[0]));
	cr_assert_eq(((const double *)ckpt_variable_replica_data(d, 3))[0], 0.0);
	cr_assert_eq(ckpt_variable_read(d, &y, sizeof(y)), CKPT_OK);
	cr_assert_eq(y, 10.0);
	ckpt_variable *i = sor_new(s, "i", CKPT_DT_INT32, 1, CKPT_AGG_SUM);
	for (int r = 0; r < 4; r++)
		((int32_t *)ckpt__variable_data(i, r))[0] = INT32_MAX / 2;
	int32_t z;
	cr_assert_eq(ckpt_variable_read(i, &z, sizeof(z)), CKPT_ELIMIT);
	cr_assert_str_eq(ckpt_error_last()->variable, "i");
	ckpt_variable *m = sor_new(s, "m", CKPT_DT_INT32, 1, CKPT_AGG_MEAN);
	for (int r = 0; r < 4; r++)
		((int32_t *)ckpt__variable_data(m, r))[0] = INT32_MAX - r;
	cr_assert_eq(ckpt_variable_read(m, &z, sizeof(z)), CKPT_OK, "MEAN accumulates wider");
	cr_assert_eq(z, INT32_MAX - 2); /* (4 * MAX - 6) / 4 truncated */
	ckpt_variable_free(d);
	ckpt_variable_free(i);
	ckpt_variable_free(m);
	ckpt_strategy_free(s);
}

Test(variable, sync_on_read_option_checks)
{
	ckpt_strategy *s = mirrored(2);
	ckpt_shape sh = shape1(2);
	ckpt_variable_options o = CKPT_VARIABLE_OPTIONS_INIT;
	o.sync = CKPT_SYNC_ON_READ;
	ckpt_variable *v = (ckpt_variable *)1;
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_new(&v, "x", CKPT_DT_FLOAT, &sh, &o), CKPT_EINVAL, "aggregation required");
	cr_assert_null(v);
	o.aggregation = CKPT_AGG_SUM;
	cr_assert_eq(ckpt_variable_new(&v, "x", CKPT_DT_HALF, &sh, &o), CKPT_EUNSUPPORTED);
	o.aggregation = CKPT_AGG_ONLY_FIRST_REPLICA;
	cr_assert_eq(ckpt_variable_new(&v, "x", CKPT_DT_HALF, &sh, &o), CKPT_OK);
	ckpt_variable_free(v);
	o.version = 99;
	cr_assert_eq(ckpt_variable_new(&v, "x", CKPT_DT_FLOAT, &sh, &o), CKPT_EINVAL);
	cr_assert_eq(ckpt_variable_new(&v, "s", CKPT_DT_STRING, &sh, &o), CKPT_EINVAL, "bad version");
	o.version = CKPT_VARIABLE_OPTIONS_VERSION;
	cr_assert_eq(ckpt_variable_new(&v, "s", CKPT_DT_STRING, &sh, &o), CKPT_EUNSUPPORTED, "sync-on-read strings");
	cr_assert_null(v);
	o.version = 99;
	cr_assert_eq(ckpt_variable_new(&v, "", CKPT_DT_FLOAT, &sh, NULL), CKPT_EINVAL);
	cr_assert_eq(ckpt_variable_new(&v, NULL, CKPT_DT_FLOAT, &sh, NULL), CKPT_EINVAL);
	cr_assert_eq(ckpt_variable_new(&v, "x", CKPT_DT_FLOAT, NULL, NULL), CKPT_EINVAL);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	/* outside a scope a sync-on-read variable is a plain one with its aggregation */
	o.version = CKPT_VARIABLE_OPTIONS_VERSION;
	o.aggregation = CKPT_AGG_SUM;
	cr_assert_eq(ckpt_variable_new(&v, "x", CKPT_DT_FLOAT, &sh, &o), CKPT_OK);
	cr_assert_eq(ckpt_variable_kind(v), CKPT_VAR_PLAIN);
	cr_assert_eq(ckpt_variable_aggregation(v), CKPT_AGG_SUM);
	const float val[2] = { 3, 4 };
	cr_assert_eq(ckpt_variable_assign(v, val, sizeof(val)), CKPT_OK);
	cr_assert_eq(memcmp(ckpt_variable_replica_data(v, 0), val, sizeof(val)), 0);
	ckpt_variable_free(v);
	ckpt_strategy_free(s);
}

/* ---- wrapped (trainer-owned) buffers ---- */

Test(variable, wrapped_buffers_are_zero_copy)
{
	ckpt_strategy *s = mirrored(2);
	ckpt_shape sh = shape1(4);
	float block[2][4] = { { 1, 2, 3, 4 }, { 1, 2, 3, 4 } };
	void *bufs[2] = { block[0], block[1] };
	ckpt_variable_options o = CKPT_VARIABLE_OPTIONS_INIT;
	o.replica_buffers = bufs;
	ckpt_variable *v;
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_new(&v, "wrapped", CKPT_DT_FLOAT, &sh, &o), CKPT_OK);
	cr_assert_eq(ckpt_variable_replica_data(v, 0), block[0]);
	cr_assert_eq(ckpt_variable_replica_data(v, 1), block[1]);
	cr_assert_eq(block[1][3], 4.0f, "contents kept without an initial value");
	const float val[4] = { 9, 8, 7, 6 };
	cr_assert_eq(ckpt_variable_assign(v, val, sizeof(val)), CKPT_OK);
	cr_assert_eq(memcmp(block[0], val, sizeof(val)), 0, "assign writes the caller's memory");
	cr_assert_eq(memcmp(block[1], val, sizeof(val)), 0);
	ckpt_variable_free(v);
	cr_assert_eq(block[1][0], 9.0f, "free leaves the caller's memory alone");

	/* initial value goes into the caller's buffers */
	const float init[4] = { -1, -2, -3, -4 };
	o.initial_value = init;
	cr_assert_eq(ckpt_variable_new(&v, "wrapped2", CKPT_DT_FLOAT, &sh, &o), CKPT_OK);
	cr_assert_eq(memcmp(block[1], init, sizeof(init)), 0);
	ckpt_variable_free(v);

	/* overlapping or missing buffers */
	float one[6];
	void *overlap[2] = { one, one + 2 };
	o.replica_buffers = overlap;
	cr_assert_eq(ckpt_variable_new(&v, "bad", CKPT_DT_FLOAT, &sh, &o), CKPT_EINVAL);
	cr_assert(contains(ckpt_error_last()->message, "overlap"));
	void *missing[2] = { block[0], NULL };
	o.replica_buffers = missing;
	cr_assert_eq(ckpt_variable_new(&v, "bad", CKPT_DT_FLOAT, &sh, &o), CKPT_EINVAL);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	ckpt_strategy_free(s);
}

/* ---- lifetime ---- */

Test(variable, freeing_a_strategy_with_live_variables_is_deferred)
{
	ckpt_strategy *s = mirrored(2);
	ckpt_shape sh = shape1(2);
	ckpt_variable *v;
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_new(&v, "v", CKPT_DT_FLOAT, &sh, NULL), CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	ckpt_strategy_free(s);
	cr_assert_eq(ckpt_error_last()->code, CKPT_EINVAL);
	cr_assert(contains(ckpt_error_last()->message, "1 variable"), "%s", ckpt_error_last()->message);
	/* the strategy is still readable through the variable */
	cr_assert(contains(ckpt_strategy_describe(ckpt_variable_strategy(v)), "MirroredStrategy(2 replicas)"));
	cr_assert(contains(ckpt_variable_origin(v), "MirroredStrategy(2 replicas)"));
	ckpt_variable_free(v); /* releases the strategy (ASan: no leak, no use after free) */
}

Test(variable, accessors_accept_null)
{
	cr_assert_null(ckpt_variable_name(NULL));
	cr_assert_eq(ckpt_variable_num_replicas(NULL), 0);
	cr_assert_eq(ckpt_variable_replicas_identical(NULL), 0);
	cr_assert_null(ckpt_variable_replica_data(NULL, 0));
	ckpt_variable_free(NULL);
	void *p;
	cr_assert_eq(ckpt_status_of(p = ckpt_variable_local(NULL)), CKPT_EINVAL);
	cr_assert_eq(ckpt_variable_assign(NULL, NULL, 0), CKPT_EINVAL);
	cr_assert_str_eq(ckpt_var_kind_name(CKPT_VAR_SYNC_ON_READ), "sync-on-read");
	cr_assert_str_eq(ckpt_var_kind_name(CKPT_VAR_PLAIN), "plain");
}

Test(variable, large_sync_on_read_broadcast_splits_in_place)
{
	ckpt_strategy *s = mirrored(4);
	const int64_t n = (int64_t)5 << 19; /* 10 MiB of float32: several 2 MiB pieces */
	ckpt_variable *v = sor_new(s, "metric/big_total", CKPT_DT_FLOAT, n, CKPT_AGG_SUM);
	float *p0 = ckpt__variable_data(v, 0);
	for (int64_t i = 0; i < n; i++)
		p0[i] = (float)(i % 1000) * 4.0f;
	cr_assert_eq(ckpt__variable_broadcast_primary(v), CKPT_OK);
	for (int r = 0; r < 4; r++) {
		/* copy 0 keeps the value, the others get -0.0 */
		const float *p = ckpt_variable_replica_data(v, r);
		float want = r ? -0.0f : (float)((n - 1) % 1000) * 4.0f;
		for (int64_t i = 0; i < n; i += 4099)
			cr_assert_eq(p[i], r ? -0.0f : (float)(i % 1000) * 4.0f, "replica %d element %lld", r, (long long)i);
		cr_assert_eq(p[n - 1], want);
		cr_assert_eq(signbit(p[n - 1]) != 0, r != 0);
	}
	float *got = malloc((size_t)n * sizeof(float));
	cr_assert_eq(ckpt_variable_read(v, got, (size_t)n * sizeof(float)), CKPT_OK);
	for (int64_t i = 0; i < n; i += 4099)
		cr_assert_eq(got[i], (float)(i % 1000) * 4.0f);
	free(got);
	ckpt_variable_free(v);
	ckpt_strategy_free(s);
}

Test(variable, initial_value_may_be_a_wrapped_buffer)
{
	ckpt_strategy *s = mirrored(3);
	ckpt_shape sh = shape1(4);
	float block[3][4] = { { 1, 2, 3, 4 }, { 0 }, { 0 } };
	void *bufs[3] = { block[0], block[1], block[2] };
	ckpt_variable_options o = CKPT_VARIABLE_OPTIONS_INIT;
	o.replica_buffers = bufs;
	o.initial_value = block[0]; /* "replica 0 holds the trained values" */
	ckpt_variable *v;
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_new(&v, "w", CKPT_DT_FLOAT, &sh, &o), CKPT_OK);
	cr_assert_eq(ckpt_variable_replicas_identical(v), 1);
	cr_assert_eq(block[2][3], 4.0f);
	ckpt_variable_free(v);
	o.initial_value = &block[0][1];
	cr_assert_eq(ckpt_variable_new(&v, "w", CKPT_DT_FLOAT, &sh, &o), CKPT_EINVAL);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	ckpt_strategy_free(s);
}

/* ---- string variables (ckpt_variable_assign_tensor / read_tensor) ---- */

static ckpt_bytes bstr(const char *s)
{
	ckpt_bytes b = { strlen(s), (char *)s };
	return b;
}

static void check_strings(const ckpt_variable *v, const char *const *want, size_t n)
{
	for (int r = 0; r < ckpt_variable_num_replicas(v); r++) {
		const ckpt_bytes *e = ckpt_variable_replica_data(v, r);
		cr_assert_not_null(e);
		for (size_t i = 0; i < n; i++) {
			cr_assert_eq(e[i].len, strlen(want[i]), "replica %d element %zu", r, i);
			cr_assert(e[i].len == 0 || memcmp(e[i].data, want[i], e[i].len) == 0, "replica %d element %zu", r, i);
		}
	}
}

Test(variable, string_variable_inside_scope_is_mirrored_with_deep_copies)
{
	ckpt_strategy *s = mirrored(4);
	ckpt_shape sh = shape1(3);
	const char *init_s[3] = { "hello", "", "w\0rld" };
	ckpt_bytes init[3] = { bstr(init_s[0]), bstr(init_s[1]), { 5, (char *)"w\0rld" } };
	ckpt_variable_options o = CKPT_VARIABLE_OPTIONS_INIT;
	o.initial_value = init;
	ckpt_variable *v;
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_new(&v, "vocab", CKPT_DT_STRING, &sh, &o), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_kind(v), CKPT_VAR_MIRRORED);
	cr_assert_eq(ckpt_variable_num_replicas(v), 4);
	cr_assert_eq(ckpt_variable_nbytes(v), 10);
	cr_assert(ckpt_variable_replicas_identical(v));
	/* each replica has its own copy of every element */
	const ckpt_bytes *r0 = ckpt_variable_replica_data(v, 0), *r3 = ckpt_variable_replica_data(v, 3);
	cr_assert_neq(r0, r3);
	cr_assert_neq(r0[0].data, r3[0].data);
	cr_assert_neq(r0[0].data, init[0].data);
	cr_assert_eq(memcmp(r3[2].data, "w\0rld", 5), 0);
	/* replicas compare element-wise */
	r3[2].data[0] = 'W';
	cr_assert_not(ckpt_variable_replicas_identical(v));
	r3[2].data[0] = 'w';
	cr_assert(ckpt_variable_replicas_identical(v));
	ckpt_variable_free(v);
	ckpt_strategy_free(s);
}

Test(variable, string_variable_outside_scope_is_plain_and_starts_empty)
{
	ckpt_shape sh = shape1(2);
	ckpt_variable *v;
	cr_assert_eq(ckpt_variable_new(&v, "s", CKPT_DT_STRING, &sh, NULL), CKPT_OK);
	cr_assert_eq(ckpt_variable_kind(v), CKPT_VAR_PLAIN);
	cr_assert_eq(ckpt_variable_num_replicas(v), 1);
	cr_assert_eq(ckpt_variable_nbytes(v), 0);
	const char *want[2] = { "", "" };
	check_strings(v, want, 2);
	void *p;
	cr_assert_eq(ckpt_status_of(p = ckpt_variable_local(v)), CKPT_OK);
	cr_assert_eq(p, ckpt_variable_replica_data(v, 0));
	ckpt_variable_free(v);
}

Test(variable, string_assign_read_tensor_round_trip)
{
	ckpt_strategy *s = mirrored(3);
	ckpt_shape sh = shape1(3);
	ckpt_variable *v;
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_new(&v, "s", CKPT_DT_STRING, &sh, NULL), CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	const char *vals[3] = { "a", "longer string", "" };
	ckpt_bytes e[3] = { bstr(vals[0]), bstr(vals[1]), bstr(vals[2]) };
	ckpt_tensor *t, *back;
	cr_assert_eq(ckpt_tensor_new_strings(&t, &sh, e), CKPT_OK);
	cr_assert_eq(ckpt_variable_assign_tensor(v, t), CKPT_OK, "%s", ckpt_error_last()->message);
	/* deep copies: changing the source changes nothing */
	((ckpt_bytes *)t->data)[0].data[0] = 'z';
	check_strings(v, vals, 3);
	cr_assert(ckpt_variable_replicas_identical(v));
	cr_assert_eq(ckpt_variable_nbytes(v), 14);
	cr_assert_eq(ckpt_variable_read_tensor(&back, v), CKPT_OK);
	cr_assert_eq(back->dtype, CKPT_DT_STRING);
	cr_assert_eq(back->nbytes, 14);
	((ckpt_bytes *)t->data)[0].data[0] = 'a';
	cr_assert(ckpt_tensor_equal(back, t));
	cr_assert_eq(ckpt_tensor_crc32(back), ckpt_tensor_crc32(t));
	ckpt_tensor_free(back);
	ckpt_tensor_free(t);
	/* assign again: old copies are released (ASan / leak check) */
	const char *vals2[3] = { "x", "y", "zz" };
	ckpt_bytes e2[3] = { bstr(vals2[0]), bstr(vals2[1]), bstr(vals2[2]) };
	cr_assert_eq(ckpt_tensor_new_strings(&t, &sh, e2), CKPT_OK);
	cr_assert_eq(ckpt_variable_assign_tensor(v, t), CKPT_OK);
	check_strings(v, vals2, 3);
	cr_assert_eq(ckpt_variable_nbytes(v), 4);
	ckpt_tensor_free(t);
	ckpt_variable_free(v);
	ckpt_strategy_free(s);
}

Test(variable, tensor_api_on_fixed_size_variables)
{
	ckpt_strategy *s = mirrored(2);
	ckpt_shape sh = shape1(2);
	ckpt_variable *v;
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_new(&v, "w", CKPT_DT_FLOAT, &sh, NULL), CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	float x[2] = { 1.5f, -3.0f };
	ckpt_tensor *t, *back;
	cr_assert_eq(ckpt_tensor_wrap(&t, CKPT_DT_FLOAT, &sh, x, sizeof(x)), CKPT_OK);
	cr_assert_eq(ckpt_variable_assign_tensor(v, t), CKPT_OK);
	cr_assert(ckpt_variable_replicas_identical(v));
	cr_assert_eq(ckpt_variable_read_tensor(&back, v), CKPT_OK);
	cr_assert(ckpt_tensor_equal(back, t));
	ckpt_tensor_free(back);
	ckpt_tensor_free(t);
	ckpt_variable_free(v);
	ckpt_strategy_free(s);
}

Test(variable, tensor_api_mismatch_names_variable_and_shapes)
{
	ckpt_shape sh = shape1(2), other = shape1(3);
	ckpt_variable *v, *f;
	cr_assert_eq(ckpt_variable_new(&v, "names", CKPT_DT_STRING, &sh, NULL), CKPT_OK);
	cr_assert_eq(ckpt_variable_new(&f, "weights", CKPT_DT_FLOAT, &sh, NULL), CKPT_OK);
	ckpt_bytes e[3] = { bstr("a"), bstr("b"), bstr("c") };
	ckpt_tensor *t;
	cr_assert_eq(ckpt_tensor_new_strings(&t, &other, e), CKPT_OK);
	cr_assert_eq(ckpt_variable_assign_tensor(v, t), CKPT_EMISMATCH);
	const ckpt_error *err = ckpt_error_last();
	cr_assert(contains(err->message, "names"), "%s", err->message);
	cr_assert(contains(err->message, "[2]"), "%s", err->message);
	cr_assert(contains(err->message, "[3]"), "%s", err->message);
	const char *empty[2] = { "", "" };
	check_strings(v, empty, 2);
	ckpt_tensor_free(t);
	/* dtype differs: string tensor into a float variable, float into a string one */
	cr_assert_eq(ckpt_tensor_new_strings(&t, &sh, e), CKPT_OK);
	cr_assert_eq(ckpt_variable_assign_tensor(f, t), CKPT_EMISMATCH);
	cr_assert(contains(ckpt_error_last()->message, "weights"), "%s", ckpt_error_last()->message);
	ckpt_tensor_free(t);
	cr_assert_eq(ckpt_tensor_new(&t, CKPT_DT_FLOAT, &sh), CKPT_OK);
	cr_assert_eq(ckpt_variable_assign_tensor(v, t), CKPT_EMISMATCH);
	ckpt_tensor_free(t);
	cr_assert_eq(ckpt_variable_assign_tensor(v, NULL), CKPT_EINVAL);
	cr_assert_eq(ckpt_variable_read_tensor(NULL, v), CKPT_EINVAL);
	ckpt_variable_free(v);
	ckpt_variable_free(f);
}

Test(variable, raw_api_rejects_string_variables)
{
	ckpt_shape sh = shape1(1);
	ckpt_bytes init[1] = { bstr("keep") };
	ckpt_variable_options o = CKPT_VARIABLE_OPTIONS_INIT;
	o.initial_value = init;
	ckpt_variable *v;
	cr_assert_eq(ckpt_variable_new(&v, "s", CKPT_DT_STRING, &sh, &o), CKPT_OK);
	char buf[16];
	cr_assert_eq(ckpt_variable_assign(v, buf, (size_t)ckpt_variable_nbytes(v)), CKPT_EINVAL);
	cr_assert(contains(ckpt_error_last()->message, "ckpt_variable_assign_tensor"), "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_variable_read(v, buf, (size_t)ckpt_variable_nbytes(v)), CKPT_EINVAL);
	cr_assert(contains(ckpt_error_last()->message, "ckpt_variable_read_tensor"), "%s", ckpt_error_last()->message);
	ckpt_variable *vars[1] = { v };
	const void *srcs[1] = { buf };
	size_t sizes[1] = { 4 };
	cr_assert_eq(ckpt__variable_assign_many(vars, srcs, sizes, 1), CKPT_EINVAL);
	cr_assert_eq(ckpt__variable_broadcast_primary(v), CKPT_EINVAL);
	const char *want[1] = { "keep" };
	check_strings(v, want, 1);
	ckpt_variable_free(v);
	/* replica_buffers wrapping is for fixed-size dtypes; elements must have data */
	void *bufs[1] = { buf };
	o.replica_buffers = bufs;
	cr_assert_eq(ckpt_variable_new(&v, "s", CKPT_DT_STRING, &sh, &o), CKPT_EINVAL);
	o.replica_buffers = NULL;
	ckpt_bytes bad[1] = { { 3, NULL } };
	o.initial_value = bad;
	cr_assert_eq(ckpt_variable_new(&v, "s", CKPT_DT_STRING, &sh, &o), CKPT_EINVAL);
}

typedef struct str_local_arg {
	ckpt_variable *v;
	int seen[4];
} str_local_arg;

static int str_local_fn(ckpt_replica_ctx *ctx, void *arg)
{
	str_local_arg *a = arg;
	void *p;
	int rc = ckpt_status_of(p = ckpt_variable_local(a->v));
	if (rc < 0)
		return rc;
	int id = ckpt_replica_id(ctx);
	const ckpt_bytes *e = p;
	a->seen[id] = p == ckpt_variable_replica_data(a->v, id) && e[0].len == 2 && memcmp(e[0].data, "hi", 2) == 0;
	return CKPT_OK;
}

Test(variable, string_local_in_replica_context_is_the_replica_copy)
{
	ckpt_strategy *s = mirrored(4);
	ckpt_shape sh = shape1(1);
	ckpt_bytes init[1] = { bstr("hi") };
	ckpt_variable_options o = CKPT_VARIABLE_OPTIONS_INIT;
	o.initial_value = init;
	ckpt_variable *v;
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_new(&v, "s", CKPT_DT_STRING, &sh, &o), CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	str_local_arg a = { v, { 0 } };
	cr_assert_eq(ckpt_strategy_run(s, str_local_fn, &a), CKPT_OK, "%s", ckpt_error_last()->message);
	for (int r = 0; r < 4; r++)
		cr_assert(a.seen[r], "replica %d", r);
	/* outside replica context a mirrored string variable is ESCOPE, as others */
	void *p;
	cr_assert_eq(ckpt_status_of(p = ckpt_variable_local(v)), CKPT_ESCOPE);
	ckpt_variable_free(v);
	ckpt_strategy_free(s);
}

/* Copies packed into shared 2 MiB-aligned blocks: aligned, disjoint, and independent through frees and new variables. */
Test(variable, packed_copies_are_disjoint_and_survive_neighbours)
{
	ckpt_strategy *s = mirrored(2);
	enum { NV = 60 };
	ckpt_variable *vs[NV] = { 0 };
	int64_t lens[NV];
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	for (int i = 0; i < NV; i++) {
		lens[i] = (int64_t)(16384 + (i * 37813) % (3 << 20) / 4); /* 64 KiB .. ~850 KiB of float32 */
		ckpt_shape sh = shape1(lens[i]);
		char nm[32];
		snprintf(nm, sizeof nm, "v%d", i);
		cr_assert_eq(ckpt_variable_new(&vs[i], nm, CKPT_DT_FLOAT, &sh, NULL), CKPT_OK);
		float *val = malloc((size_t)lens[i] * sizeof(float));
		for (int64_t k = 0; k < lens[i]; k++)
			val[k] = (float)(i * 1000003 + k);
		cr_assert_eq(ckpt_variable_assign(vs[i], val, (size_t)lens[i] * sizeof(float)), CKPT_OK);
		free(val);
	}
	/* free every third, make new ones in between: the others keep their values */
	for (int i = 0; i < NV; i += 3) {
		ckpt_variable_free(vs[i]);
		ckpt_shape sh = shape1(lens[i]);
		char nm[32];
		snprintf(nm, sizeof nm, "w%d", i);
		cr_assert_eq(ckpt_variable_new(&vs[i], nm, CKPT_DT_FLOAT, &sh, NULL), CKPT_OK);
		const float *z = ckpt_variable_replica_data(vs[i], 1);
		for (int64_t k = 0; k < lens[i]; k++)
			cr_assert_eq(z[k], 0.0f, "new variable w%d not zeroed at %lld", i, (long long)k);
	}
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	for (int i = 0; i < NV; i++) {
		for (int r = 0; r < 2; r++) {
			const float *d = ckpt_variable_replica_data(vs[i], r);
			cr_assert_eq((uintptr_t)d % 64, 0);
			if (i % 3 == 0)
				continue;
			for (int64_t k = 0; k < lens[i]; k++)
				cr_assert_eq(d[k], (float)(i * 1000003 + k), "v%d copy %d element %lld", i, r, (long long)k);
		}
		/* no two copies overlap */
		for (int j = 0; j < i; j++)
			for (int r = 0; r < 2; r++)
				for (int q = 0; q < 2; q++) {
					uintptr_t a = (uintptr_t)ckpt_variable_replica_data(vs[i], r);
					uintptr_t b = (uintptr_t)ckpt_variable_replica_data(vs[j], q);
					uintptr_t na = (uintptr_t)lens[i] * 4, nb = (uintptr_t)lens[j] * 4;
					cr_assert(a + na <= b || b + nb <= a, "v%d copy %d overlaps v%d copy %d", i, r, j, q);
				}
	}
	for (int i = 0; i < NV; i++)
		ckpt_variable_free(vs[i]);
	ckpt_strategy_free(s);
}

/* The VmFlags of the mapping that holds p (/proc/self/smaps): "hg" = advised as transparent huge pages. */
static int advised_huge(const void *p)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	cr_assert_not_null(f);
	char line[512];
	int inside = 0, hg = -1;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
			inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
		else if (inside && strncmp(line, "VmFlags:", 8) == 0)
			hg = strstr(line, " hg") != NULL;
	}
	fclose(f);
	cr_assert_neq(hg, -1, "no mapping holds %p", p);
	return hg;
}

/* A 12 MiB variable's copy, and whether its memory was advised as huge pages (the environment read first). */
static int big_copy_advised(const char *env)
{
	if (env)
		cr_assert_eq(setenv("CKPT_HUGE_PAGES", env, 1), 0);
	else
		unsetenv("CKPT_HUGE_PAGES");
	ckpt_shape sh = shape1((int64_t)3 << 20);
	ckpt_variable *v;
	cr_assert_eq(ckpt_variable_new(&v, "big", CKPT_DT_FLOAT, &sh, NULL), CKPT_OK);
	int hg = advised_huge(ckpt_variable_replica_data(v, 0));
	ckpt_variable_free(v);
	return hg;
}

/* Huge pages are off unless asked for: on VMs that hand free memory back to the host they fault in 5x slower. */
Test(variable, copies_are_not_advised_as_huge_pages_by_default)
{
	cr_assert_eq(big_copy_advised(NULL), 0, "a copy was advised as huge pages without CKPT_HUGE_PAGES=1");
}

Test(variable, huge_pages_env_1_advises_copies_as_huge_pages)
{
	cr_assert_eq(big_copy_advised("1"), 1, "CKPT_HUGE_PAGES=1 did not advise the copy as huge pages");
}
