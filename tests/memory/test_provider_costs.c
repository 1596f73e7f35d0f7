/*
 * What the provider interface costs a real device, counted by the guarded
 * test provider: a restore's and a load's pinned ring no larger than the
 * values need, one pinned buffer for a whole ckpt_replica_check_crc32c,
 * byte-uniform fills through the optional fill method (a version 1 table,
 * without it, still accepted), and the message of a failed synchronize.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "ckpt/replica_check.h"
#include "guarded_provider.h"
#include "test_support.h"

#define NV 5

static ckpt_strategy *strategy_on(const ckpt_memory_provider *p)
{
	int devs[2] = { 0, 1 };
	ckpt_strategy *s;
	cr_assert_eq(ckpt_strategy_mirrored_on(&s, p, devs, 2), CKPT_OK, "%s", ckpt_error_last()->message);
	return s;
}

/* NV mirrored float variables v0..v4 of 100 * 3^i floats, values `base` + index. */
static ckpt_checkpoint *small_model(ckpt_strategy *s, ckpt_variable **v, float base)
{
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	int64_t n = 100;
	for (int i = 0; i < NV; i++, n *= 3) {
		char name[8] = { 'v', (char)('0' + i), 0 };
		ckpt_shape sh;
		ckpt_shape_make(&sh, 1, &n);
		cr_assert_eq(ckpt_status_of(v[i] = ckpt_object_add_variable(ckpt_checkpoint_root(ck), name, name, CKPT_DT_FLOAT,
			&sh, NULL)), CKPT_OK);
		float *buf = malloc((size_t)n * sizeof(float));
		for (int64_t k = 0; k < n; k++)
			buf[k] = base + (float)k;
		cr_assert_eq(ckpt_variable_assign(v[i], buf, (size_t)n * sizeof(float)), CKPT_OK);
		free(buf);
	}
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	return ck;
}

Test(provider_costs, restore_and_load_pin_no_more_than_the_values_need)
{
	char *dir = ts_tmpdir(), *prefix = ts_join(dir, "small");
	ts_guarded *g = ts_guarded_new(2, 0);
	ckpt_strategy *s = strategy_on(ts_guarded_provider(g));
	ckpt_variable *v[NV];
	ckpt_checkpoint *ck = small_model(s, v, 1);
	cr_assert_eq(ckpt_checkpoint_write(ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	size_t largest = (size_t)ckpt_variable_nbytes(v[NV - 1]); /* 32.4 KB, against a default ring of 64 MiB */
	ts_guarded_reset_peak(g);
	cr_assert_eq(ckpt_checkpoint_restore(NULL, ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	uint64_t peak = ts_guarded_get_stats(g).pinned_peak;
	cr_assert_leq(peak, 2 * largest + 128, "a restore of %zu-byte values pinned %llu bytes", largest,
		(unsigned long long)peak);
	ckpt_checkpoint_free(ck);
	ckpt_checkpoint *loaded;
	ts_guarded_reset_peak(g);
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_load(&loaded, NULL, prefix, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	peak = ts_guarded_get_stats(g).pinned_peak;
	cr_assert_leq(peak, 2 * largest + 128, "a load of %zu-byte values pinned %llu bytes", largest,
		(unsigned long long)peak);
	ckpt_checkpoint_free(loaded);
	ckpt_strategy_free(s);
	ts_guarded_free(g);
	ts_rmtree(dir);
	free(prefix);
	free(dir);
}

Test(provider_costs, replica_check_reuses_one_pinned_buffer)
{
	ts_guarded *g = ts_guarded_new(2, 0);
	ckpt_strategy *s = strategy_on(ts_guarded_provider(g));
	ckpt_variable *v[NV];
	ckpt_checkpoint *ck = small_model(s, v, 3);
	ckpt_replica_check checks[NV];
	memset(checks, 0, sizeof(checks));
	for (int i = 0; i < NV; i++) {
		size_t n = (size_t)ckpt_variable_nbytes(v[i]);
		float *buf = malloc(n);
		cr_assert_eq(ckpt_variable_read(v[i], buf, n), CKPT_OK);
		checks[i].variable = v[i];
		checks[i].expected_crc32c = ckpt_crc32c_extend(0, buf, n);
		free(buf);
	}
	checks[2].expected_crc32c ^= 1; /* and a mismatch is still found */
	ts_guarded_reset_peak(g);
	ts_guarded_stats before = ts_guarded_get_stats(g);
	cr_assert_eq(ckpt_replica_check_crc32c(checks, NV), CKPT_OK, "%s", ckpt_error_last()->message);
	ts_guarded_stats after = ts_guarded_get_stats(g);
	cr_assert_eq(after.host_alloc_calls - before.host_alloc_calls, 1, "%llu pinned allocations for %d variables",
		(unsigned long long)(after.host_alloc_calls - before.host_alloc_calls), NV);
	cr_assert_leq(after.pinned_peak, ckpt_variable_nbytes(v[NV - 1]), "pinned peak %llu",
		(unsigned long long)after.pinned_peak);
	for (int i = 0; i < NV; i++)
		cr_assert_eq(checks[i].bad_replica, i == 2 ? 0 : -1, "v%d: bad replica %d", i, checks[i].bad_replica);
	cr_assert_eq(after.pinned_live, 0);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(s);
	ts_guarded_free(g);
}

/* A zero-initialised 1 MiB variable, over `p`: created, every replica read back as zeros. */
static void zero_variable(const ckpt_memory_provider *p)
{
	ckpt_strategy *s = strategy_on(p);
	ckpt_variable *v;
	ckpt_shape sh;
	int64_t n = 1 << 18;
	ckpt_shape_make(&sh, 1, &n);
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	cr_assert_eq(ckpt_variable_new(&v, "zeros", CKPT_DT_FLOAT, &sh, NULL), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	float *buf = malloc((size_t)n * sizeof(float));
	memset(buf, 0x7f, (size_t)n * sizeof(float));
	cr_assert_eq(ckpt_variable_read(v, buf, (size_t)n * sizeof(float)), CKPT_OK);
	for (int64_t k = 0; k < n; k++)
		cr_assert_eq(buf[k], 0.0f);
	cr_assert_eq(ckpt_variable_replicas_identical(v), 1);
	free(buf);
	ckpt_variable_free(v);
	ckpt_strategy_free(s);
}

Test(provider_costs, zero_fills_use_the_providers_fill)
{
	ts_guarded *g = ts_guarded_new(2, 0);
	ts_guarded_set_fill(g, 1);
	ts_guarded_stats before = ts_guarded_get_stats(g);
	zero_variable(ts_guarded_provider(g));
	ts_guarded_stats after = ts_guarded_get_stats(g);
	cr_assert_geq(after.fill_bytes - before.fill_bytes, (uint64_t)1 << 20, "fill: %llu bytes",
		(unsigned long long)(after.fill_bytes - before.fill_bytes));
	cr_assert_lt(after.h2d_bytes - before.h2d_bytes, (uint64_t)1 << 20, "uploaded %llu bytes of zeros",
		(unsigned long long)(after.h2d_bytes - before.h2d_bytes));
	ts_guarded_free(g);
}

static int must_not_be_called(void *ctx, ckpt_memory_queue *q, void *dst, int value, size_t n)
{
	(void)ctx, (void)q, (void)dst, (void)value, (void)n;
	abort();
}

/* A provider compiled against version 1 of the header: its table ends at broadcast. */
Test(provider_costs, a_version_1_table_is_read_no_further_than_its_size)
{
	ts_guarded *g = ts_guarded_new(2, 0);
	ckpt_memory_provider v1 = *ts_guarded_provider(g);
	v1.version = 1;
	v1.struct_size = CKPT_MEMORY_PROVIDER_V1_SIZE;
	v1.fill = must_not_be_called; /* past struct_size: what follows a version 1 table in its memory */
	cr_assert_eq(ckpt_memory_provider_check(&v1), CKPT_OK, "%s", ckpt_error_last()->message);
	zero_variable(&v1);
	v1.struct_size = CKPT_MEMORY_PROVIDER_V1_SIZE - 1;
	cr_assert_eq(ckpt_memory_provider_check(&v1), CKPT_EINVAL);
	v1.version = 2;
	v1.struct_size = CKPT_MEMORY_PROVIDER_V1_SIZE;
	cr_assert_eq(ckpt_memory_provider_check(&v1), CKPT_EINVAL, "a version 2 table without room for fill");
	ts_guarded_free(g);
}

Test(provider_costs, a_failed_synchronize_is_named_without_a_size)
{
	ts_guarded *g = ts_guarded_new(2, 0);
	ckpt_strategy *s = strategy_on(ts_guarded_provider(g));
	ckpt_variable *v[NV];
	ckpt_checkpoint *ck = small_model(s, v, 1);
	float buf[100];
	ts_guarded_fail_nth(g, TS_G_D2H, 0, 1);
	cr_assert_eq(ckpt_variable_read(v[0], buf, sizeof(buf)), CKPT_EIO);
	const char *msg = ckpt_error_last()->message;
	cr_assert(strstr(msg, "synchronize for replica 0") && !strstr(msg, "0 bytes") && strstr(msg, "'v0'"), "%s", msg);
	ckpt_checkpoint_free(ck);
	ckpt_strategy_free(s);
	ts_guarded_free(g);
}

/*
 * 383 small variables (scalars and 3 KiB biases, GPT-2's count) on two
 * replicas take a few shared device buffers, not 766; each keeps its own
 * bytes through a save and restore, a large one still gets its own buffer,
 * and freeing them all gives every buffer back.
 */
Test(provider_costs, small_values_share_device_buffers)
{
	enum { NSMALL = 383 };
	char *dir = ts_tmpdir(), *prefix = ts_join(dir, "many");
	ts_guarded *g = ts_guarded_new(2, 0);
	ckpt_strategy *s = strategy_on(ts_guarded_provider(g));
	ckpt_checkpoint *ck;
	cr_assert_eq(ckpt_checkpoint_new(&ck, NULL), CKPT_OK);
	ckpt_variable *v[NSMALL + 1];
	static float buf[32768];
	cr_assert_eq(ckpt_scope_enter(s), CKPT_OK);
	for (int i = 0; i <= NSMALL; i++) {
		char name[16];
		snprintf(name, sizeof(name), "v%d", i);
		int64_t n = i == NSMALL ? 32768 : i % 5 == 0 ? 768 : 2; /* the last: 128 KiB, above the pool's sizes */
		ckpt_shape sh;
		ckpt_shape_make(&sh, 1, &n);
		cr_assert_eq(ckpt_status_of(v[i] = ckpt_object_add_variable(ckpt_checkpoint_root(ck), name, name,
			CKPT_DT_FLOAT, &sh, NULL)), CKPT_OK, "%s", ckpt_error_last()->message);
		for (int64_t k = 0; k < n; k++)
			buf[k] = (float)i * 10000.0f + (float)k;
		cr_assert_eq(ckpt_variable_assign(v[i], buf, (size_t)n * sizeof(float)), CKPT_OK);
	}
	cr_assert_eq(ckpt_scope_exit(s), CKPT_OK);
	ts_guarded_stats st = ts_guarded_get_stats(g);
	cr_expect_leq(st.device_alloc_calls, 8, "%d variables on 2 replicas made %llu device allocations",
		NSMALL + 1, (unsigned long long)st.device_alloc_calls);
	cr_assert_eq(ckpt_checkpoint_write(ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	memset(buf, 0, sizeof(buf));
	for (int i = 0; i <= NSMALL; i++)
		cr_assert_eq(ckpt_variable_assign(v[i], buf, (size_t)ckpt_variable_nbytes(v[i])), CKPT_OK);
	cr_assert_eq(ckpt_checkpoint_restore(NULL, ck, prefix), CKPT_OK, "%s", ckpt_error_last()->message);
	for (int i = 0; i <= NSMALL; i++) {
		size_t n = (size_t)ckpt_variable_nbytes(v[i]) / sizeof(float);
		cr_assert_eq(ckpt_variable_replicas_identical(v[i]), 1, "v%d: its replicas differ", i);
		cr_assert_eq(ckpt_variable_read(v[i], buf, n * sizeof(float)), CKPT_OK, "%s", ckpt_error_last()->message);
		for (size_t k = 0; k < n; k++)
			cr_assert_eq(buf[k], (float)i * 10000.0f + (float)k, "v%d [%zu] = %g", i, k, buf[k]);
	}
	ckpt_checkpoint_free(ck);
	cr_expect_eq(ts_guarded_get_stats(g).device_live, 0, "device buffers left after every variable was freed");
	ckpt_strategy_free(s);
	ts_guarded_free(g);
	ts_rmtree(dir);
	free(prefix);
	free(dir);
}
