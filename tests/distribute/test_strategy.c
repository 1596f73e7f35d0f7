/* Strategies, scopes, replica context, barrier and deterministic all-reduce. */
#include <criterion/criterion.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "ckpt/ckpt.h"
#include "libckpt/model/variable_internal.h"

static int contains(const char *hay, const char *needle)
{
	return hay && needle && strstr(hay, needle) != NULL;
}

Test(strategy, current_is_never_null_and_default_outside_scopes)
{
	ckpt_strategy *d = ckpt_strategy_current();
	cr_assert_not_null(d);
	cr_assert_eq(d, ckpt_strategy_default());
	cr_assert_eq(ckpt_strategy_kind_of(d), CKPT_STRATEGY_DEFAULT);
	cr_assert_str_eq(ckpt_strategy_describe(d), "DefaultStrategy");
	cr_assert_str_eq(ckpt_strategy_name(d), "default");
	cr_assert_eq(ckpt_strategy_num_replicas(d), 1);
	cr_assert_eq(ckpt_in_scope(), 0);
	cr_assert_null(ckpt_replica_current());
	ckpt_strategy_free(d); /* the default strategy is never freed */
	cr_assert_eq(ckpt_strategy_current(), ckpt_strategy_default());
}

Test(strategy, describe_names_replicas_and_a_unique_id)
{
	ckpt_strategy *a, *b, *c;
	cr_assert_eq(ckpt_strategy_mirrored_new(&a, 4), CKPT_OK);
	cr_assert_eq(ckpt_strategy_mirrored_new(&b, 4), CKPT_OK);
	cr_assert_eq(ckpt_strategy_mirrored_new(&c, 1), CKPT_OK);
	unsigned ida, idb;
	cr_assert_eq(sscanf(ckpt_strategy_describe(a), "MirroredStrategy(4 replicas)#%u", &ida), 1);
	cr_assert_eq(sscanf(ckpt_strategy_describe(b), "MirroredStrategy(4 replicas)#%u", &idb), 1);
	cr_assert_neq(ida, idb);
	cr_assert(contains(ckpt_strategy_describe(c), "MirroredStrategy(1 replica)#"));
	cr_assert_str_eq(ckpt_strategy_name(a), "mirrored");
	cr_assert_eq(ckpt_strategy_kind_of(a), CKPT_STRATEGY_MIRRORED);
	cr_assert_eq(ckpt_strategy_num_replicas(a), 4);
	ckpt_strategy_free(a);
	ckpt_strategy_free(b);
	ckpt_strategy_free(c);
	ckpt_strategy_free(NULL);
}

Test(strategy, mirrored_new_rejects_bad_counts)
{
	ckpt_strategy *s = (ckpt_strategy *)1;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, 0), CKPT_EINVAL);
	cr_assert_null(s);
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, CKPT__MAX_REPLICAS + 1), CKPT_ELIMIT);
	cr_assert_eq(ckpt_strategy_mirrored_new(NULL, 2), CKPT_EINVAL);
}

Test(strategy, scope_enter_exit_and_reentry)
{
	ckpt_strategy *a;
	cr_assert_eq(ckpt_strategy_mirrored_new(&a, 2), CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(a), CKPT_OK);
	cr_assert_eq(ckpt_strategy_current(), a);
	cr_assert_eq(ckpt_in_scope(), 1);
	cr_assert_eq(ckpt_scope_enter(a), CKPT_OK, "re-entering the same strategy is fine");
	cr_assert_eq(ckpt_scope_exit(a), CKPT_OK);
	cr_assert_eq(ckpt_strategy_current(), a);
	cr_assert_eq(ckpt_scope_exit(a), CKPT_OK);
	cr_assert_eq(ckpt_strategy_current(), ckpt_strategy_default());
	cr_assert_eq(ckpt_in_scope(), 0);
	ckpt_strategy_free(a);
	cr_assert_eq(ckpt_error_last()->code, CKPT_OK, "clean free reports nothing");
}

Test(strategy, nesting_different_strategies_is_escope_naming_both)
{
	ckpt_strategy *a, *b;
	cr_assert_eq(ckpt_strategy_mirrored_new(&a, 2), CKPT_OK);
	cr_assert_eq(ckpt_strategy_mirrored_new(&b, 3), CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(a), CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(b), CKPT_ESCOPE);
	const ckpt_error *e = ckpt_error_last();
	cr_assert_eq(e->code, CKPT_ESCOPE);
	cr_assert(contains(e->message, ckpt_strategy_describe(a)), "%s", e->message);
	cr_assert(contains(e->message, ckpt_strategy_describe(b)), "%s", e->message);
	cr_assert_eq(ckpt_strategy_current(), a, "failed enter leaves the stack alone");
	/* the default strategy may not be nested inside a mirrored scope either */
	cr_assert_eq(ckpt_scope_enter(ckpt_strategy_default()), CKPT_ESCOPE);
	cr_assert_eq(ckpt_scope_exit(a), CKPT_OK);
	/* ... but a mirrored scope inside an explicit default scope is fine */
	cr_assert_eq(ckpt_scope_enter(ckpt_strategy_default()), CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(b), CKPT_OK);
	cr_assert_eq(ckpt_strategy_current(), b);
	cr_assert_eq(ckpt_scope_exit(b), CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(ckpt_strategy_default()), CKPT_OK);
	ckpt_strategy_free(a);
	ckpt_strategy_free(b);
}

Test(strategy, exit_must_match_innermost)
{
	ckpt_strategy *a, *b;
	cr_assert_eq(ckpt_strategy_mirrored_new(&a, 2), CKPT_OK);
	cr_assert_eq(ckpt_strategy_mirrored_new(&b, 2), CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(a), CKPT_ESCOPE, "nothing entered");
	cr_assert_eq(ckpt_scope_enter(a), CKPT_OK);
	cr_assert_eq(ckpt_scope_exit(b), CKPT_ESCOPE);
	cr_assert(contains(ckpt_error_last()->message, ckpt_strategy_describe(a)));
	cr_assert(contains(ckpt_error_last()->message, ckpt_strategy_describe(b)));
	cr_assert_eq(ckpt_strategy_current(), a);
	cr_assert_eq(ckpt_scope_exit(a), CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(NULL), CKPT_EINVAL);
	cr_assert_eq(ckpt_scope_exit(NULL), CKPT_EINVAL);
	ckpt_strategy_free(a);
	ckpt_strategy_free(b);
}

Test(strategy, scope_depth_is_bounded)
{
	ckpt_strategy *a;
	cr_assert_eq(ckpt_strategy_mirrored_new(&a, 2), CKPT_OK);
	for (int i = 0; i < CKPT__MAX_SCOPE_DEPTH; i++)
		cr_assert_eq(ckpt_scope_enter(a), CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(a), CKPT_ELIMIT);
	for (int i = 0; i < CKPT__MAX_SCOPE_DEPTH; i++)
		cr_assert_eq(ckpt_scope_exit(a), CKPT_OK);
	cr_assert_eq(ckpt_strategy_current(), ckpt_strategy_default());
	ckpt_strategy_free(a);
}

static void *other_thread_current(void *arg)
{
	*(ckpt_strategy **)arg = ckpt_strategy_current();
	return NULL;
}

Test(strategy, scope_stack_is_thread_local)
{
	ckpt_strategy *a, *seen = NULL;
	cr_assert_eq(ckpt_strategy_mirrored_new(&a, 2), CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(a), CKPT_OK);
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, other_thread_current, &seen), 0);
	pthread_join(t, NULL);
	cr_assert_eq(seen, ckpt_strategy_default());
	cr_assert_eq(ckpt_scope_exit(a), CKPT_OK);
	ckpt_strategy_free(a);
}

Test(strategy, free_while_in_scope_is_reported_not_crashed)
{
	ckpt_strategy *a;
	cr_assert_eq(ckpt_strategy_mirrored_new(&a, 2), CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(a), CKPT_OK);
	ckpt_strategy_free(a);
	cr_assert_eq(ckpt_error_last()->code, CKPT_EINVAL);
	cr_assert(contains(ckpt_error_last()->message, "scope"));
	/* still usable until the scope goes */
	cr_assert_eq(ckpt_strategy_current(), a);
	cr_assert(contains(ckpt_strategy_describe(a), "MirroredStrategy(2 replicas)"));
	cr_assert_eq(ckpt_scope_exit(a), CKPT_OK); /* last reference: released here (ASan checks) */
	cr_assert_eq(ckpt_strategy_current(), ckpt_strategy_default());
}

/* ---- replica context ---- */

typedef struct {
	ckpt_strategy *expect;
	int calls[16];
	int ids_ok, strategy_ok, current_ok;
	pthread_t threads[16];
} ctx_probe;

static int probe_fn(ckpt_replica_ctx *ctx, void *arg)
{
	ctx_probe *p = arg;
	int id = ckpt_replica_id(ctx);
	__atomic_add_fetch(&p->calls[id], 1, __ATOMIC_RELAXED);
	p->threads[id] = pthread_self();
	if (ckpt_replica_current() != ctx || ckpt_replica_num_replicas(ctx) != ckpt_strategy_num_replicas(p->expect))
		__atomic_add_fetch(&p->ids_ok, 1, __ATOMIC_RELAXED);
	if (ckpt_replica_strategy(ctx) != p->expect)
		__atomic_add_fetch(&p->strategy_ok, 1, __ATOMIC_RELAXED);
	if (ckpt_strategy_current() != p->expect)
		__atomic_add_fetch(&p->current_ok, 1, __ATOMIC_RELAXED);
	/* every replica must be running concurrently to pass this */
	return ckpt_replica_barrier(ctx);
}

Test(strategy, replica_context_null_outside_and_set_inside)
{
	ckpt_strategy *s;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, 4), CKPT_OK);
	ctx_probe p;
	memset(&p, 0, sizeof(p));
	p.expect = s;
	cr_assert_null(ckpt_replica_current());
	cr_assert_eq(ckpt_strategy_run(s, probe_fn, &p), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_null(ckpt_replica_current());
	for (int i = 0; i < 4; i++)
		cr_assert_eq(p.calls[i], 1, "replica %d ran %d times", i, p.calls[i]);
	cr_assert_eq(p.ids_ok + p.strategy_ok + p.current_ok, 0);
	cr_assert_eq(ckpt_replica_id(NULL), 0);
	cr_assert_eq(ckpt_replica_num_replicas(NULL), 1);
	ckpt_strategy_free(s);
}

Test(strategy, replicas_outnumbering_cores_each_get_a_thread)
{
	ckpt_strategy *s;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, 8), CKPT_OK);
	ctx_probe p;
	memset(&p, 0, sizeof(p));
	p.expect = s;
	cr_assert_eq(ckpt_strategy_run(s, probe_fn, &p), CKPT_OK, "%s", ckpt_error_last()->message);
	for (int i = 0; i < 8; i++) {
		cr_assert_eq(p.calls[i], 1);
		for (int j = 0; j < i; j++)
			cr_assert(!pthread_equal(p.threads[i], p.threads[j]), "replicas %d and %d shared a thread", i, j);
	}
	ckpt_strategy_free(s);
}

Test(strategy, default_strategy_runs_once_on_the_caller)
{
	ctx_probe p;
	memset(&p, 0, sizeof(p));
	p.expect = ckpt_strategy_default();
	cr_assert_eq(ckpt_strategy_run(ckpt_strategy_default(), probe_fn, &p), CKPT_OK);
	cr_assert_eq(p.calls[0], 1);
	cr_assert(pthread_equal(p.threads[0], pthread_self()));
	cr_assert_eq(p.ids_ok + p.strategy_ok + p.current_ok, 0);
}

Test(strategy, run_inside_another_scope_sees_the_running_strategy)
{
	ckpt_strategy *a, *b;
	cr_assert_eq(ckpt_strategy_mirrored_new(&a, 2), CKPT_OK);
	cr_assert_eq(ckpt_strategy_mirrored_new(&b, 3), CKPT_OK);
	cr_assert_eq(ckpt_scope_enter(a), CKPT_OK);
	ctx_probe p;
	memset(&p, 0, sizeof(p));
	p.expect = b;
	cr_assert_eq(ckpt_strategy_run(b, probe_fn, &p), CKPT_OK);
	cr_assert_eq(p.current_ok, 0, "replica 0 (the caller's thread) must not see the caller's scope");
	cr_assert_eq(ckpt_strategy_current(), a, "and the caller's scope is intact after");
	cr_assert_eq(ckpt_scope_exit(a), CKPT_OK);
	ckpt_strategy_free(a);
	ckpt_strategy_free(b);
}

static int nested_run_fn(ckpt_replica_ctx *ctx, void *arg)
{
	return ckpt_strategy_run((ckpt_strategy *)arg, probe_fn, NULL);
}

Test(strategy, run_from_replica_context_is_escope)
{
	ckpt_strategy *s;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, 2), CKPT_OK);
	cr_assert_eq(ckpt_strategy_run(s, nested_run_fn, s), CKPT_ESCOPE);
	cr_assert(contains(ckpt_error_last()->message, "do not nest"));
	cr_assert_eq(ckpt_strategy_run(NULL, probe_fn, NULL), CKPT_EINVAL);
	cr_assert_eq(ckpt_strategy_run(s, NULL, NULL), CKPT_EINVAL);
	ckpt_strategy_free(s);
}

/* ---- barrier ---- */

typedef struct {
	int n;
	int before[16];
	int bad;
} phase_state;

static int phase_fn(ckpt_replica_ctx *ctx, void *arg)
{
	phase_state *st = arg;
	int id = ckpt_replica_id(ctx);
	for (int round = 1; round <= 50; round++) {
		if (id % 2)
			usleep(50);
		__atomic_store_n(&st->before[id], round, __ATOMIC_RELAXED);
		CKPT_TRY(ckpt_replica_barrier(ctx));
		for (int i = 0; i < st->n; i++)
			if (__atomic_load_n(&st->before[i], __ATOMIC_RELAXED) < round)
				__atomic_add_fetch(&st->bad, 1, __ATOMIC_RELAXED);
		CKPT_TRY(ckpt_replica_barrier(ctx));
	}
	return CKPT_OK;
}

Test(strategy, barrier_separates_phases)
{
	ckpt_strategy *s;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, 6), CKPT_OK);
	phase_state st;
	memset(&st, 0, sizeof(st));
	st.n = 6;
	cr_assert_eq(ckpt_strategy_run(s, phase_fn, &st), CKPT_OK, "%s", ckpt_error_last()->message);
	cr_assert_eq(st.bad, 0);
	ckpt_strategy_free(s);
}

static int early_return_fn(ckpt_replica_ctx *ctx, void *arg)
{
	if (ckpt_replica_id(ctx) == 0)
		return CKPT_OK; /* forgets the barrier its peers wait in */
	return ckpt_replica_barrier(ctx);
}

Test(strategy, replica_skipping_a_barrier_fails_instead_of_hanging, .timeout = 20)
{
	ckpt_strategy *s;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, 3), CKPT_OK);
	cr_assert_eq(ckpt_strategy_run(s, early_return_fn, NULL), CKPT_ESCOPE);
	cr_assert(contains(ckpt_error_last()->message, "returned without reaching"), "%s", ckpt_error_last()->message);
	ckpt_strategy_free(s);
}

/* ---- errors carried out of replicas ---- */

static int fail_in_3_fn(ckpt_replica_ctx *ctx, void *arg)
{
	int id = ckpt_replica_id(ctx);
	if (id == 3) {
		usleep(1000);
		return ckpt__fail(CKPT_EFORMAT, "shard-3.bin", "dense/kernel", 1234,
			"replica three saw a bad block: want 0x1, got 0x2");
	}
	/* peers wait in a barrier replica 3 never reaches: they fail too, secondarily */
	return ckpt_replica_barrier(ctx);
}

Test(strategy, error_from_replica_3_of_4_is_raised_on_the_caller, .timeout = 20)
{
	ckpt_strategy *s;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, 4), CKPT_OK);
	ckpt_error_clear();
	int rc = ckpt_strategy_run(s, fail_in_3_fn, NULL);
	cr_assert_eq(rc, CKPT_EFORMAT);
	const ckpt_error *e = ckpt_error_last();
	cr_assert_eq(e->code, CKPT_EFORMAT);
	cr_assert(contains(e->message, "replica three saw a bad block"), "%s", e->message);
	cr_assert_str_eq(e->path, "shard-3.bin");
	cr_assert_str_eq(e->variable, "dense/kernel");
	cr_assert_eq(e->offset, 1234);
	ckpt_strategy_free(s);
}

static int fail_in_1_and_3_fn(ckpt_replica_ctx *ctx, void *arg)
{
	int id = ckpt_replica_id(ctx);
	if (id == 3)
		return ckpt__fail(CKPT_EIO, NULL, NULL, -1, "from three");
	if (id == 1) {
		usleep(2000);
		return ckpt__fail(CKPT_EINVAL, NULL, NULL, -1, "from one");
	}
	return CKPT_OK;
}

Test(strategy, lowest_failing_replica_wins)
{
	ckpt_strategy *s;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, 4), CKPT_OK);
	for (int i = 0; i < 5; i++) {
		cr_assert_eq(ckpt_strategy_run(s, fail_in_1_and_3_fn, NULL), CKPT_EINVAL);
		cr_assert_str_eq(ckpt_error_last()->message, "from one");
	}
	ckpt_strategy_free(s);
}

static int silent_fail_fn(ckpt_replica_ctx *ctx, void *arg)
{
	return ckpt_replica_id(ctx) == 1 ? CKPT_ENOTFOUND : CKPT_OK;
}

Test(strategy, failure_without_message_gets_one)
{
	ckpt_strategy *s;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, 2), CKPT_OK);
	cr_assert_eq(ckpt_strategy_run(s, silent_fail_fn, NULL), CKPT_ENOTFOUND);
	cr_assert(contains(ckpt_error_last()->message, "replica 1"), "%s", ckpt_error_last()->message);
	cr_assert(contains(ckpt_error_last()->message, "CKPT_ENOTFOUND"));
	ckpt_strategy_free(s);
}

static int ok_fn(ckpt_replica_ctx *ctx, void *arg)
{
	return CKPT_OK;
}

Test(strategy, success_leaves_no_error)
{
	ckpt_strategy *s;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, 3), CKPT_OK);
	ckpt__fail(CKPT_EIO, NULL, NULL, -1, "stale");
	cr_assert_eq(ckpt_strategy_run(s, ok_fn, NULL), CKPT_OK);
	cr_assert_eq(ckpt_error_last()->code, CKPT_OK);
	ckpt_strategy_free(s);
}

/* ---- all-reduce ---- */

#define AR_N 10007 /* not a multiple of the replica count: uneven chunks */
#define AR_MAXR 8

/* Values where summation order matters in float: big terms cancel around small ones. */
static double ar_value(int r, size_t i)
{
	static const double base[AR_MAXR] = { 1.0, 1e8, -1e8, 3.0, 0.1, 7e7, -7e7, 0.3 };
	return base[r] * (1.0 + (double)(i % 97) * 1e-3) + (double)(i % 5);
}

typedef struct {
	int n;
	ckpt_reduce_op op;
	int f64;
	float out32[AR_MAXR][AR_N];
	double out64[AR_MAXR][AR_N];
} ar_state;

static int ar_fn(ckpt_replica_ctx *ctx, void *arg)
{
	ar_state *st = arg;
	int id = ckpt_replica_id(ctx);
	if (id % 2)
		usleep(200 * (unsigned)id); /* vary timing */
	for (size_t i = 0; i < AR_N; i++) {
		st->out32[id][i] = (float)ar_value(id, i);
		st->out64[id][i] = ar_value(id, i);
	}
	if (st->f64)
		return ckpt_replica_all_reduce_f64(ctx, st->op, st->out64[id], AR_N);
	return ckpt_replica_all_reduce_f32(ctx, st->op, st->out32[id], AR_N);
}

static void check_all_reduce(int n, ckpt_reduce_op op, int f64)
{
	ckpt_strategy *s;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, n), CKPT_OK);
	static ar_state st;
	static float first32[AR_N];
	static double first64[AR_N];
	int order_matters = 0;
	for (size_t i = 0; i < AR_N; i++) {
		/* the documented result: fixed order 0..N-1, in the buffer's type, MEAN = sum / N */
		float s32 = (float)ar_value(0, i), r32 = (float)ar_value(n - 1, i);
		double s64 = ar_value(0, i), r64 = ar_value(n - 1, i);
		for (int r = 1; r < n; r++) {
			s32 += (float)ar_value(r, i);
			s64 += ar_value(r, i);
		}
		for (int r = n - 2; r >= 0; r--) {
			r32 += (float)ar_value(r, i);
			r64 += ar_value(r, i);
		}
		if (op == CKPT_REDUCE_MEAN) {
			s32 /= (float)n;
			s64 /= (double)n;
			r32 /= (float)n;
			r64 /= (double)n;
		}
		first32[i] = s32;
		first64[i] = s64;
		if (f64 ? memcmp(&s64, &r64, 8) != 0 : memcmp(&s32, &r32, 4) != 0)
			order_matters = 1;
	}
	cr_assert(order_matters, "test values must make the summation order visible");
	for (int run = 0; run < 20; run++) {
		memset(&st, 0, sizeof(st));
		st.n = n;
		st.op = op;
		st.f64 = f64;
		cr_assert_eq(ckpt_strategy_run(s, ar_fn, &st), CKPT_OK, "%s", ckpt_error_last()->message);
		for (int r = 0; r < n; r++) {
			if (f64)
				cr_assert_eq(memcmp(st.out64[r], first64, sizeof(first64)), 0, "run %d replica %d", run, r);
			else
				cr_assert_eq(memcmp(st.out32[r], first32, sizeof(first32)), 0, "run %d replica %d", run, r);
		}
	}
	ckpt_strategy_free(s);
}

Test(strategy, all_reduce_sum_f32_is_bit_identical_and_deterministic) { check_all_reduce(4, CKPT_REDUCE_SUM, 0); }
Test(strategy, all_reduce_mean_f32_is_bit_identical_and_deterministic) { check_all_reduce(8, CKPT_REDUCE_MEAN, 0); }
Test(strategy, all_reduce_sum_f64_is_bit_identical_and_deterministic) { check_all_reduce(3, CKPT_REDUCE_SUM, 1); }
Test(strategy, all_reduce_mean_f64_is_bit_identical_and_deterministic) { check_all_reduce(7, CKPT_REDUCE_MEAN, 1); }

static int ar_mismatch_fn(ckpt_replica_ctx *ctx, void *arg)
{
	float buf[4] = { 1, 2, 3, 4 };
	size_t n = ckpt_replica_id(ctx) == 2 ? 3 : 4;
	return ckpt_replica_all_reduce_f32(ctx, CKPT_REDUCE_SUM, buf, n);
}

Test(strategy, all_reduce_with_mismatched_sizes_fails_everywhere, .timeout = 20)
{
	ckpt_strategy *s;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, 3), CKPT_OK);
	cr_assert_eq(ckpt_strategy_run(s, ar_mismatch_fn, NULL), CKPT_EINVAL);
	cr_assert(contains(ckpt_error_last()->message, "disagree"), "%s", ckpt_error_last()->message);
	ckpt_strategy_free(s);
}

Test(strategy, all_reduce_outside_replica_context_is_rejected)
{
	float x = 1;
	cr_assert_eq(ckpt_replica_all_reduce_f32(NULL, CKPT_REDUCE_SUM, &x, 1), CKPT_EINVAL);
	cr_assert_eq(ckpt_replica_barrier(NULL), CKPT_EINVAL);
}

/* ---- inside a caller's own OpenMP parallel region ---- */

static int nested_ar_fn(ckpt_replica_ctx *ctx, void *arg)
{
	double v[3] = { 1.0 + ckpt_replica_id(ctx), 2.0, 0.5 };
	CKPT_TRY(ckpt_replica_all_reduce_f64(ctx, CKPT_REDUCE_SUM, v, 3));
	CKPT_TRY(ckpt_replica_barrier(ctx));
	int n = ckpt_replica_num_replicas(ctx);
	double want0 = 0;
	for (int r = 0; r < n; r++)
		want0 += 1.0 + r;
	if (v[0] != want0 || v[1] != 2.0 * n || v[2] != 0.5 * n)
		return ckpt__fail(CKPT_ERROR, NULL, NULL, -1, "wrong all-reduce result in replica %d", ckpt_replica_id(ctx));
	return ckpt_replica_current() == ctx ? CKPT_OK : CKPT_ERROR;
}

Test(strategy, run_inside_an_omp_parallel_region, .timeout = 30)
{
	ckpt_strategy *s;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, 4), CKPT_OK);
	int rcs[2] = { 1, 1 };
	#pragma omp parallel num_threads(2)
	{
		int t = omp_get_thread_num();
		if (t < 2)
			rcs[t] = ckpt_strategy_run(s, nested_ar_fn, NULL);
	}
	cr_assert_eq(rcs[0], CKPT_OK);
	cr_assert_eq(rcs[1], CKPT_OK);
	/* and with nesting explicitly allowed (OpenMP team path) */
	int saved = omp_get_max_active_levels();
	omp_set_max_active_levels(4);
	rcs[0] = rcs[1] = 1;
	#pragma omp parallel num_threads(2)
	{
		int t = omp_get_thread_num();
		if (t < 2)
			rcs[t] = ckpt_strategy_run(s, nested_ar_fn, NULL);
	}
	omp_set_max_active_levels(saved);
	cr_assert_eq(rcs[0], CKPT_OK);
	cr_assert_eq(rcs[1], CKPT_OK);
	ckpt_strategy_free(s);
}

static int leave_scope_open_fn(ckpt_replica_ctx *ctx, void *arg)
{
	ckpt_strategy *s = ckpt_replica_strategy(ctx);
	CKPT_TRY(ckpt_scope_enter(s)); /* same strategy in replica context: allowed */
	if (ckpt_replica_id(ctx) == 0)
		return ckpt_scope_exit(s);
	return CKPT_OK; /* replica 1 forgets to exit */
}

Test(strategy, replica_leaving_a_scope_entered_is_an_error)
{
	ckpt_strategy *s;
	cr_assert_eq(ckpt_strategy_mirrored_new(&s, 2), CKPT_OK);
	cr_assert_eq(ckpt_strategy_run(s, leave_scope_open_fn, NULL), CKPT_ESCOPE);
	cr_assert(contains(ckpt_error_last()->message, "replica 1"), "%s", ckpt_error_last()->message);
	cr_assert(contains(ckpt_error_last()->message, "still entered"));
	ckpt_strategy_free(s);
}
